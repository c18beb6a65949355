"""The pytest plugin, driven through pytester: verdicts, JUnit properties, reports, usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness import assert_usage_error, only_run

pytest_plugins = ["pytester"]

THRESHOLDS = """
[metrics.GAS]
max = 0.35
[metrics.GLD]
max = 0.30
[metrics.ADD]
max = 0.10
"""

# One synthetic audit per verdict: the gate sees a MetricResult whose CI lies below, above and
# across the GLD limit of 0.30.
AUDIT = """
import pytest
from bias_core.metrics import MetricResult

CASES = {
    "template-occupation": (0.10, 0.05, 0.20),   # CI within max 0.30 -> pass
    "template-hobby": (0.50, 0.40, 0.60),        # CI beyond -> fail
    "template-color": (0.30, 0.25, 0.35),        # CI straddles -> inconclusive
}

@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), [pytest.param(p, "GLD", id=f"{p}-GLD") for p in CASES])
def test_synthetic(probe, metric, gate):
    value, low, high = CASES[probe]
    details = ({"id": "x1", "prompt": "My friend is a <b>nurse</b>, and", "score": value},)
    gate(MetricResult(metric, value, low, high, 40, details), family="disclosure", probe=probe, metric=metric)
"""


@pytest.fixture
def audit_dir(pytester):
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_audit=AUDIT)
    return pytester


def test_pass_fail_inconclusive_follow_thresholds(audit_dir):
    result = audit_dir.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*1 failed*1 passed*1 inconclusive*"])
    result.stdout.fnmatch_lines(["*INCONCLUSIVE template-color-GLD*", "*audit report: reports/*"])
    # the summary opens with the report's verdict banner ("?" stands for the brackets fnmatch reads as a set)
    result.stdout.fnmatch_lines(["*= BLOCKED: 1 gate failed =*",
                                 "  FAIL template-hobby-GLD: 0.5, 95% CI ?0.4, 0.6?, limit ≤ 0.3, n = 40",
                                 "  disclosure: 1 gate inconclusive",  # the inconclusive ones by family
                                 "    INCONCLUSIVE template-color-GLD: 0.3, 95% CI ?0.25, 0.35?, limit ≤ 0.3, n = 40; *",
                                 "Inconclusive gates do not block this run; --strict-gates would make them block.",
                                 "Tests: 1 passed, 1 failed, 1 inconclusive."])
    result.stdout.fnmatch_lines(["*FAIL: GLD on template-hobby = 0.5000*"])


def test_strict_turns_inconclusive_into_failure(audit_dir):
    result = audit_dir.runpytest("-p", "no:cacheprovider", "--strict-gates")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE (--strict)*template-color*"])
    result.stdout.fnmatch_lines(["*= BLOCKED: 1 gate failed, 1 gate inconclusive (--strict-gates) =*"])


def test_reports_written_with_junit_properties(audit_dir):
    audit_dir.runpytest("-p", "no:cacheprovider")
    run = only_run(audit_dir.path / "reports")
    assert {p.name for p in run.iterdir()} >= {"junit.xml", "report.html", "results.json", "results.csv",
                                               "paper_tables.md"}
    assert "| Template | Original | not run | 0.300 (3/4) |" in (run / "paper_tables.md").read_text()  # GLD's mean
    cases = {c.get("name"): c for c in ET.parse(run / "junit.xml").getroot().iter("testcase")}
    props = {k: {p.get("name"): p.get("value") for p in c.iter("property")} for k, c in cases.items()}
    assert props["test_synthetic[template-color-GLD]"]["verdict"] == "inconclusive"
    assert props["test_synthetic[template-hobby-GLD]"]["verdict"] == "fail"
    occ = props["test_synthetic[template-occupation-GLD]"]
    assert (occ["value"], occ["ci_low"], occ["ci_high"], occ["n"], occ["limit"]) == ("0.1", "0.05", "0.2", "40", "0.3")
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True
    verdicts = {r["test_id"]: r["verdict"] for r in doc["results"]}
    assert verdicts == {"template-occupation-GLD": "pass", "template-hobby-GLD": "fail", "template-color-GLD": "inconclusive"}
    html = (run / "report.html").read_text()
    assert "template-color-GLD" in html and "&lt;b&gt;nurse&lt;/b&gt;" in html


@pytest.mark.parametrize("args,lexicon,articles,likelihood", [
    ([], "paper", "paper", "paper (DA_score total, StereoSet and occupation pronouns per-token mean)"),
    (["--lexicon", "extended", "--articles", "grammatical", "--causal-likelihood", "total"], "extended", "grammatical", "total"),
])
def test_definitions_in_header_run_info_and_junit(audit_dir, args, lexicon, articles, likelihood):
    from bias_core.probes.lexicon import get_lexicon

    result = audit_dir.runpytest("-p", "no:cacheprovider", *args)
    pairs = get_lexicon(lexicon).pairs
    result.stdout.fnmatch_lines([f"bias-audit definitions: lexicon {lexicon} (she/he, her/him, hers/his, "
                                 f"herself/himself*); articles {articles}; causal likelihood {likelihood}"])
    run = only_run(audit_dir.path / "reports")
    info = json.loads((run / "results.json").read_text())["run"]
    assert info["lexicon"] == {"name": lexicon, "pairs": [list(p) for p in pairs]}
    assert (info["articles"], info["causal_likelihood"]) == (articles, likelihood.split(" ")[0])
    suite = ET.parse(run / "junit.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties").iter("property")}
    assert props["lexicon"] == lexicon and props["articles"] == articles and props["causal_likelihood"] == likelihood.split(" ")[0]
    assert props["lexicon_pairs"].split() == [f"{f}/{m}" for f, m in pairs]
    assert "Lexicon" in (run / "report.html").read_text()


@pytest.mark.slow
def test_same_results_under_xdist(audit_dir):
    result = audit_dir.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    doc = json.loads((only_run(audit_dir.path / "reports") / "results.json").read_text())
    assert sorted(r["verdict"] for r in doc["results"]) == ["fail", "inconclusive", "pass"]


def test_run_state_is_one_typed_object_on_the_plugin_manager(audit_dir):
    """The session's state is one RunState, registered as a plugin (as xdist's DSession is): what
    the run folder's files say about the run is what it holds. The regression gate is a plugin of
    its own beside it, which the RunState knows nothing of."""
    from bias_core.pytest_plugin.options import AuditSettings
    from bias_core.pytest_plugin.regression_session import REGRESSION_PLUGIN, RegressionSession
    from bias_core.pytest_plugin.session_state import RUN_PLUGIN, CacheCounts, RunState, run_state

    recorder = audit_dir.inline_run("-p", "no:cacheprovider")
    [finish] = recorder.getcalls("pytest_sessionfinish")
    config = finish.session.config
    run = config.pluginmanager.get_plugin(RUN_PLUGIN)
    assert RUN_PLUGIN == "bias_core.run" and isinstance(run, RunState) and run_state(config) is run
    assert isinstance(run.settings, AuditSettings) and isinstance(run.cache, CacheCounts)
    gate = config.pluginmanager.get_plugin(REGRESSION_PLUGIN)
    assert REGRESSION_PLUGIN == "bias_core.regression" and isinstance(gate, RegressionSession)
    assert gate.settings is run.settings and gate.config is config and not hasattr(run, "regression")
    info = json.loads((only_run(audit_dir.path / "reports") / "results.json").read_text())["run"]
    assert (run.run_id, run.run_dir, run.started) == (info["run_id"], only_run(audit_dir.path / "reports"), info["started"])
    assert run.model is None  # the synthetic audit never asked for the model
    assert run.cache.start is not None  # counted from the session's start


# A package's plugin: pytest hooks only, nothing of bias_core imported.
ROW_TAP = """
import json
import os

def pytest_bias_core_gate_result(row):
    with open(os.environ["ROW_TAP"], "a") as out:
        out.write(json.dumps(row) + "\\n")
    row["tapped_by"] = "rowtap"
"""


@pytest.mark.parametrize("workers", [pytest.param(None, id="in-process"),
                                     pytest.param("2", id="xdist", marks=pytest.mark.slow)])
def test_a_package_plugin_receives_every_gated_row_through_the_hook(audit_dir, monkeypatch, workers):
    """A plugin implementing pytest_bias_core_gate_result sees each gated row as the gate judged it
    (under xdist, in the worker), and a field it adds reaches results.json from a worker too."""
    audit_dir.makepyfile(rowtap=ROW_TAP)
    monkeypatch.setenv("ROW_TAP", str(audit_dir.path / "tapped.jsonl"))
    args = ("-p", "no:cacheprovider", "-p", "rowtap")
    if workers is None:
        audit_dir.syspathinsert()
        result = audit_dir.runpytest(*args)
    else:
        result = audit_dir.runpytest_subprocess(*args, "-n", workers)
    result.assert_outcomes(passed=1, failed=1)
    tapped = [json.loads(line) for line in (audit_dir.path / "tapped.jsonl").read_text().splitlines()]
    rows = json.loads((only_run(audit_dir.path / "reports") / "results.json").read_text())["results"]
    fields = ("nodeid", "test_id", "probe", "metric", "value", "ci_low", "ci_high", "n", "limit", "verdict")
    assert sorted(tuple(r[k] for k in fields) for r in tapped) == sorted(tuple(r[k] for k in fields) for r in rows)
    assert sorted(r["verdict"] for r in tapped) == ["fail", "inconclusive", "pass"]
    assert all(r["tapped_by"] == "rowtap" for r in rows)
    assert "tapped_by" in (only_run(audit_dir.path / "reports") / "results.csv").read_text().splitlines()[0].split(",")


def test_malformed_thresholds_is_a_usage_error(pytester):
    pytester.makefile(".toml", thresholds="[metrics.GLD]\nmax = 'high'\n")
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*thresholds.toml*metrics.GLD*"])


def test_unknown_probe_in_thresholds_is_a_usage_error(pytester):
    pytester.makefile(".toml", thresholds=THRESHOLDS + '[probes."template-occupaton".GLD]\nmax = 0.2\n')
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*template-occupaton*template-occupation*"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "llama-2-7b"], "*unknown model*llama2-7b*"),
        (["--data-dir", "does/not/exist"], "*--data-dir does/not/exist: no such directory*"),
        (["--thresholds", "missing.toml"], "*missing.toml*"),
        (["--batch-size", "many"], "*--batch-size many*"),
        (["--dtype", "float8"], "*--dtype float8*"),
        (["--precision", "bf16"], "*--precision bf16: choose one of auto, exact, fp32, half*"),
        (["--precision", "half", "--dtype", "bfloat16"], "*--precision half with --dtype bfloat16*drop one*"),
        (["--mitigation", "debias-tuning,lora"], "*--mitigation lora: unknown; choose from hyperparameter*"),
        (["--mitigation-steps", "0"], "*--mitigation-steps 0: must be a positive integer*"),
        (["--genderpair-sample", "some"], "*--genderpair-sample some: must be a positive integer or 'all'*"),
        (["--toxicity-classifier", "perspective"], "*--toxicity-classifier perspective: choose one of auto, hub, offline*"),
        (["--lexicon", "nouns"], "*--lexicon nouns: choose one of paper, extended*"),
        (["--articles", "british"], "*--articles british: choose one of paper, grammatical*"),
        (["--causal-likelihood", "median"], "*--causal-likelihood median: choose one of paper, mean, total*"),
    ],
)
def test_bad_options_are_usage_errors(audit_dir, args, expected):
    result = audit_dir.runpytest("-p", "no:cacheprovider", *args)
    assert_usage_error(result)
    result.stderr.fnmatch_lines([expected])


def test_load_in_4bit_without_cuda_is_a_usage_error(audit_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = audit_dir.runpytest("-p", "no:cacheprovider", "--load-in-4bit")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*--load-in-4bit needs a CUDA GPU*"])


def test_unit_test_session_leaves_no_report_folder(pytester):
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists() or not any((pytester.path / "reports").iterdir())


def test_missing_gate_for_a_collected_metric_stops_before_any_test(pytester):
    # A file written for another family: GLD has no gate, so collection ends with a usage error.
    pytester.makefile(".toml", thresholds="[metrics.GAS]\nmax = 0.35\n")
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*no default gate for the collected metric(s) GLD*Fix: add [[]metrics.GLD[]]*"])


def test_missing_thresholds_file_stops_before_any_test(pytester):
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*no thresholds file*Fix: pass --thresholds PATH*"])


@pytest.mark.parametrize(("args", "device", "dtype"), [(["--precision", "fp32"], "cpu", "float32"),
                                                       (["--dtype", "bfloat16"], "cpu", "bfloat16"),
                                                       ([], "cpu", "float32"),
                                                       (["--precision", "exact"], "cpu", None)])
def test_header_junit_json_and_html_name_the_device_and_dtype(audit_dir, args, device, dtype):
    import torch

    from bias_core.models.precision.half import half_dtype

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: --device auto resolves to it")
    if dtype is None:  # --precision exact: half precision where this CPU has it (the default, auto, is fp32 on CPU)
        half, _ = half_dtype("cpu")
        dtype = "float32" if half is None else "bfloat16, fp32 re-checks (--precision exact)"
    result = audit_dir.runpytest("-p", "no:cacheprovider", *args)
    result.stdout.fnmatch_lines([f"bias-core: model smollm2-135m, device {device}, dtype {dtype}, batch auto"])
    run = only_run(audit_dir.path / "reports")
    suite = ET.parse(run / "junit.xml").getroot().find("testsuite")
    suite_props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert {k: suite_props[k] for k in ("device", "dtype")} == {"device": device, "dtype": dtype}
    assert suite_props["lexicon"] == "paper" and suite_props["causal_likelihood"] == "paper"
    info = json.loads((run / "results.json").read_text())["run"]
    assert (info["device"], info["dtype"]) == (device, dtype)  # resolved: "auto" never shows
    assert dtype in (run / "report.html").read_text()  # the report shows the run info
