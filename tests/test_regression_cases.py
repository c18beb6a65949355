"""Which audit tests get a regression test: every declared metric that pairs, the project's and
an installed package's, on the cases its family runs; nothing names a family or a metric by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bias_core import catalogue
from bias_core.catalogue import MeanOfItems, MetricSpec, NotPaired, Paired
from bias_core.gating.regression import NOT_PAIRED, PAIRED, PairedSpec, regression_margins
from bias_core.pytest_plugin import extensions
from bias_core.pytest_plugin.regression_cases import regression_cases
from bias_core.suites import ASSOCIATION_CASES, DISCLOSURE_METRICS, DISCLOSURE_PROBES, GENDERBENCH_CASES, genderpair_cases

OFFLINE = SimpleNamespace(regard_classifier="offline")  # the regard proxy (VADER): regard_proxy_* metrics
WHY = "a range of two shares, not an average of item values"


def _package(name: str, pairing) -> MetricSpec:
    return MetricSpec(name, family="pkg", probes=("pkg-pairs",), better="lower", scale="share (0..1)",
                      value_range=(0.0, 1.0), compute="pkg:share", sampling=MeanOfItems(), pairing=pairing,
                      precision="decisions", examples="bias_core.reports.examples:generic_table")


@pytest.fixture
def registry(monkeypatch):
    """A fresh extension registry over copies of the catalogue's tables: what a test registers
    is gone after it."""
    monkeypatch.setattr(catalogue, "BY_NAME", dict(catalogue.BY_NAME))
    monkeypatch.setattr(catalogue, "PROBES", dict(catalogue.PROBES))
    monkeypatch.setattr(extensions, "EXTENSIONS", extensions.Registry())
    return extensions.EXTENSIONS


def test_every_project_audit_of_a_pairable_metric_has_its_regression_case_in_audit_order():
    audits = [("disclosure", p, m) for p in DISCLOSURE_PROBES for m in DISCLOSURE_METRICS]
    audits += [("association", p, m) for p, ms in ASSOCIATION_CASES.items() for m in ms]
    audits += [("genderpair", p, m) for p, ms in genderpair_cases(True).items() for m in ms]
    audits += [("genderbench", p, m) for p, ms in GENDERBENCH_CASES.items() for m in ms]
    expected = [case for case in audits if catalogue.spec(case[2]).paired]
    assert regression_cases(OFFLINE) == expected
    assert {"GLD", "DA_score", "stereo_score", "BPR"} <= {m for _, _, m in expected}
    # the benchmarks' paired metrics get their rows on their own probes
    assert {("association", "winobias-gender", "winobias_stereo"), ("association", "winobias-gender", "winobias_gap"),
            ("association", "winogender", "winogender_acc"), ("association", "winogender", "winogender_gap")} <= set(expected)
    assert not {"SEAT_effect", "GBM", "BPR_gap", "BPR_spread"} & {m for _, _, m in expected}


@pytest.mark.parametrize("kind, kept, left_out", [("offline", "regard_proxy_negative", "regard_negative"),
                                                  ("hub", "regard_negative", "regard_proxy_negative")])
def test_genderpair_regression_cases_follow_the_regard_scorer_in_use(kind, kept, left_out):
    metrics = {m for f, _, m in regression_cases(SimpleNamespace(regard_classifier=kind)) if f == "genderpair"}
    assert kept in metrics and left_out not in metrics


def test_a_package_metric_that_pairs_gets_its_case_spec_and_margin_once_registered(registry):
    before = regression_cases(OFFLINE)
    assert "pkg_share" not in PAIRED
    registry.add_metric(_package("pkg_share", Paired(kind="binary")))
    registry.add_metric(_package("pkg_gap", NotPaired(WHY)))
    registry.add_probe("pkg-pairs", lambda data_dir=None: None)
    registry.add_suite("pkg", lambda lm, settings, probes: None)
    # the same PAIRED the project's code imported before the package registered
    assert PAIRED["pkg_share"] == PairedSpec("lower", kind="binary") and "pkg_gap" not in PAIRED
    assert NOT_PAIRED["pkg_gap"] == WHY and list(PAIRED)[-1] == "pkg_share"
    assert regression_cases(OFFLINE) == [*before, ("pkg", "pkg-pairs", "pkg_share")]
    known = {m.name for m in catalogue.declared()}
    margins, problems = regression_margins({"pkg_share": {"margin": 0.1, "note": "n"}}, known)
    assert margins["pkg_share"].margin == 0.1 and not problems
    _, problems = regression_margins({"pkg_gap": {"margin": 0.1}}, known)
    assert problems == [("regression.pkg_gap", f"pkg_gap cannot be compared item by item ({WHY})",
                         f"remove [regression.pkg_gap]; pairable metrics: {', '.join(sorted(PAIRED))}")]


def test_a_registered_metric_without_a_suite_gets_no_regression_case(registry):
    registry.add_metric(_package("pkg_share", Paired(kind="binary")))
    assert "pkg_share" in PAIRED
    assert all(f != "pkg" for f, _, _ in regression_cases(OFFLINE))  # no suite audits it: nothing to pair
