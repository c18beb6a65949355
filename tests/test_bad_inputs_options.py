"""Bad input, faulty setups: the command-line options.

Each case ends in one of three ways, and asserts which:

- a **usage error** before any model loads: exit code 4, a message naming the file or option and
  the fix, no traceback, and the model loader never called;
- a **test error** naming the probe and item (a data file broken mid-run, NaN model outputs):
  exit code 1, the row's verdict "error", never a pass or a skip;
- a run that **works around** the fault and says so (a read-only cache, a corrupted converted
  model rebuilt, an interrupted run whose reports say "partial").

The runs use the repository's own audits (copied into a temporary project: the ``project`` fixture,
tests/harness.py) with the model loader replaced by a recorder, so a usage error that slipped past
to the model would show; cases that need a model use the tiny random Llama of tests/tiny_model.py.
The other subjects: test_bad_inputs_thresholds.py, _model.py, _adapters.py, _cache.py, _data.py
and _reports.py. docs/reliability.md counts them.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest

from harness import assert_usage_error, import_before_in_process_runs
from paths import REPO

pytest_plugins = ["pytester"]
import_before_in_process_runs()


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
    result, _ = project.run("--seed", "abc")
    assert_usage_error(result, ["--seed", "invalid int value"])
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


# ----- every option's bad value is refused before the model loads, by its name -------------------
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
    # the release gate over other tools' logs (tests/test_external_logs_pytest.py has the rest)
    "candidate-log-alone": (["--candidate-log", "audits"], ["--candidate-log audits", "given without --baseline-log"]),
    "baseline-log-missing": (["--candidate-log", "audits", "--baseline-log", "no/such/log"],
                             ["--baseline-log no/such/log", "no such file or folder", "Fix:"]),
    "log-allow-without-logs": (["--log-allow", "version"], ["--log-allow version", "applies to a comparison of two logs"]),
    "log-metrics-without-logs": (["--log-metrics", "acc"], ["--log-metrics acc", "applies to a comparison of two logs"]),
}


# Options with no value to get wrong, and one whose bad value the run works around, saying so.
FLAG_OPTIONS = {"--load-in-4bit", "--no-cache", "--strict-gates", "--no-report", "--trust-remote-code",
                "--allow-adapter-base-mismatch", "--genderbench-full", "--noncommercial-data"}


WORKED_AROUND = {"--cache-dir": "an unwritable cache runs as with --no-cache, with a warning (test_cache.py)"}


@pytest.mark.parametrize("case", sorted(OPTION_CASES_A))
def test_bad_option_values_name_the_option_and_value(project, case):
    args, names = OPTION_CASES_A[case]
    project.usage_error(*args, names=names)


def test_every_option_has_a_bad_value_case():
    """A new option comes with its refusal case (or is a flag): the class, not a sample of it."""
    declared = set()
    for source in ("bias_core/pytest_plugin/options.py", "bias_core/pytest_plugin/regression_options.py"):
        declared |= set(re.findall(r'addoption\(\s*"(--[a-z0-9-]+)"', (REPO / source).read_text()))
    covered = {arg for args, _ in [*OPTION_CASES.values(), *OPTION_CASES_A.values()] for arg in args if arg.startswith("--")}
    assert len(declared) > 30
    assert declared - covered - FLAG_OPTIONS - set(WORKED_AROUND) == set()


def test_sample_zero_names_sample_not_genderpair_sample(project):
    out = project.usage_error("--sample", "0", names=["--sample 0", "positive integer"])
    assert "--genderpair-sample" not in out
