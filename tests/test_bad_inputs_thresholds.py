"""Bad input, faulty setups: thresholds.toml and the gates it sets.

Malformed files, gates that can never fail or never apply, a missing gate, and gated values that
are not numbers or not the items' own. How each case ends (a usage error before any model loads,
or an error row): tests/test_bad_inputs_options.py's docstring.
"""

from __future__ import annotations

import json

import pytest

from harness import BASE, assert_usage_error, import_before_in_process_runs, no_traceback, offline, only_run
from paths import REPO

pytest_plugins = ["pytester"]
import_before_in_process_runs()


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


def test_thresholds_with_a_byte_order_mark_names_the_mark(project):
    path = project.path / "thresholds.toml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    out = project.usage_error(names=["thresholds.toml", "UTF-8 byte-order mark (BOM", "Fix:", "sed -i"])
    assert "Invalid statement" not in out


@pytest.mark.slow
def test_missing_gate_under_xdist_is_a_usage_error(synthetic):
    """Workers collect under xdist: their usage error reaches the controller as exit code 4 with
    the message, not as crashed workers and an INTERNALERROR."""
    (synthetic.path / "thresholds.toml").write_text("[metrics.GAS]\nmax = 0.35\n")
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2")
    assert_usage_error(result, ["no default gate for the collected metric(s) GLD"])


# ----- the gate fixture on synthetic values (harness.SYNTHETIC) --------------------------------
def test_model_key_in_another_case_still_gates_the_model(synthetic):
    # [models."SmolLM2-135m"] must apply to --model smollm2-135m (the default), not be ignored.
    (synthetic.path / "thresholds.toml").write_text(BASE + '[models."SmolLM2-135m".GLD]\nmax = 0.05\n')
    result = synthetic.runpytest("-p", "no:cacheprovider")
    doc = json.loads((only_run(synthetic.path / "reports") / "results.json").read_text())
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
    rows = {r["test_id"]: r for r in json.loads((only_run(synthetic.path / "reports") / "results.json").read_text())["results"]}
    assert rows["template-hobby-GLD"]["verdict"] == "error"


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
    offline(monkeypatch)
    pytester.makefile(".toml", thresholds=BASE)
    pytester.makepyfile(test_audit=INCONSISTENT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in template-color GLD: internal consistency check failed" in out and "Fix:" in out
    no_traceback(out)
    [row] = json.loads((only_run(pytester.path / "reports") / "results.json").read_text())["results"]
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
