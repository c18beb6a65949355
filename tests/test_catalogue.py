"""The metric catalogue is the one place a metric is declared: what the audits parametrize, the
gates, the regression pairing and the README's table all agree with it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bias_core import catalogue
from bias_core.catalogue import BY_NAME, METRICS, MetricSpec
from bias_core.errors import ThresholdsError
from bias_core.gates import METRIC_RANGES, load_thresholds
from bias_core.regression import spec as regression_spec
from bias_core.suites import known_metrics, known_probes
from paths import REPO


class _Metafunc:
    """What the audits' pytest_generate_tests use of pytest's metafunc."""

    def __init__(self, function: str, options: dict[str, str]):
        self.function = SimpleNamespace(__name__=function)
        self.config = SimpleNamespace(getoption=options.get)
        self.params: list = []

    def parametrize(self, names, params):
        self.params += params


def _audit_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_catalogue_audit_{name}", REPO / "audits" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generated(module, function: str, options: dict[str, str]) -> set[tuple[str, str]]:
    metafunc = _Metafunc(function, options)
    module.pytest_generate_tests(metafunc)
    return {tuple(p.values[-2:]) for p in metafunc.params}  # (probe, metric)


def _audited(monkeypatch) -> set[tuple[str, str]]:
    """Every (probe, metric) some audit test is parametrized with, for every option that changes it."""
    from bias_core import classifiers
    from bias_core.mitigation.names import WEIGHT_CHANGING

    found = set()
    for name in ("test_disclosure", "test_association"):
        found |= {tuple(p.values) for p in _audit_module(name).CASES}
    genderpair = _audit_module("test_genderpair")
    for proxy in (False, True):
        monkeypatch.setattr(classifiers, "get_regard", lambda _name, proxy=proxy: SimpleNamespace(is_proxy=proxy))
        found |= _generated(genderpair, "test_genderpair", {"--regard-classifier": "auto"})
    mitigation = _audit_module("test_mitigation")
    for function in ("test_mitigation_reduces_bias", "test_mitigation_guard"):
        found |= _generated(mitigation, function, {"--mitigation": WEIGHT_CHANGING[0]})
    found |= _generated(_audit_module("test_tradeoff"), "test_tradeoff_point_guard", {"--mitigation-sweep": "quick"})
    return found


def test_audits_parametrize_exactly_the_catalogue(monkeypatch):
    audited = _audited(monkeypatch)
    declared = {(p, m.name) for m in METRICS for p in m.probes}
    assert audited - declared == set(), "audited but not in bias_core/catalogue.py"
    assert declared - audited == set(), "in the catalogue but no audit runs it"


def test_names_are_unique_and_the_suites_know_them_all():
    assert len(BY_NAME) == len(METRICS)
    assert known_metrics() == set(BY_NAME)
    assert known_probes() == {p for m in METRICS for p in m.probes}


def test_every_compute_and_runner_reference_is_a_function():
    for m in METRICS:
        assert callable(m.compute_function()), m.name
        # association runners serve every model kind; the other families' suites run the model
        assert (m.runner is not None) == (m.family == "association"), m.name
        assert m.runner is None or callable(m.runner_function()), m.name


def test_association_suite_runs_each_probe_with_the_catalogues_runner():
    from bias_core.runners.preference import run_stereoset
    from bias_core.suites.association import _probe_table

    table = _probe_table()
    assert set(table) == {p for m in catalogue.metrics_of("association") for p in m.probes}
    assert table["stereoset-gender"][1] is run_stereoset


def test_readme_metric_table_is_the_catalogue():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- metric-table:begin -->\n(.*?)<!-- metric-table:end -->", text, re.S)
    assert found, "README.md lost its metric table markers"
    assert found.group(1) == catalogue.markdown_table(), (
        "regenerate it: python -c 'from bias_core.catalogue import markdown_table; print(markdown_table())'")
    listed = {row.split("|")[1].strip() for row in found.group(1).splitlines()[2:]}
    assert listed == set(BY_NAME)


def test_gate_ranges_and_regression_pairing_come_from_the_catalogue():
    assert METRIC_RANGES == {m.name: m.value_range for m in METRICS}
    paired = {m.name for m in METRICS if m.paired}
    assert set(regression_spec.PAIRED) == paired
    assert set(regression_spec.NOT_PAIRED) == set(BY_NAME) - paired  # every unpaired metric says why
    for name, spec in regression_spec.PAIRED.items():
        m = BY_NAME[name]
        assert spec.direction == m.better and (spec.ideal is None or spec.ideal == m.ideal)


def test_shipped_thresholds_agree_with_the_catalogue():
    t = load_thresholds(REPO / "thresholds.toml", known_metrics(), known_probes())
    for name, gate in t.defaults.items():
        m = BY_NAME[name]
        assert gate.direction == m.gate_direction, name
        assert gate.ideal == (m.ideal if m.gate_direction == "max" else None), name


def _load(tmp_path: Path, body: str):
    path = tmp_path / "thresholds.toml"
    path.write_text(body, encoding="utf-8")
    return load_thresholds(path, set(BY_NAME), known_probes(), required_metrics=set())


@pytest.mark.parametrize(("body", "said"), [
    ("[metrics.GLD]\nmin = 0.1\n", "direction 'min' contradicts the catalogue: lower GLD is better"),
    ("[metrics.DA_score]\nmax = 0.9\n", "direction 'max' contradicts the catalogue: higher DA_score is better"),
    ("[metrics.stereo_score]\nmax = 10\n", "no ideal contradicts the catalogue: stereo_score is gated by its distance from 50"),
    ("[metrics.stereo_score]\nideal = 40\nmax = 10\n", "ideal = 40 contradicts the catalogue"),
    ("[metrics.GLD]\nideal = 0.1\nmax = 0.2\n", "GLD has no ideal in the catalogue"),
])
def test_a_default_gate_that_disagrees_with_the_catalogue_is_an_error(tmp_path, body, said):
    with pytest.raises(ThresholdsError, match=re.escape(said)):
        _load(tmp_path, body)


def test_agreeing_gates_load(tmp_path):
    t = _load(tmp_path, "[metrics.GLD]\nmax = 0.3\n[metrics.lm_score]\nideal = 100\nmax = 25\n[metrics.DA_score]\nmin = 0.6\n")
    assert t.defaults["lm_score"].ideal == 100 and t.defaults["DA_score"].direction == "min"


def test_metric_spec_rejects_contradictions():
    with pytest.raises(ValueError, match="needs an ideal"):
        MetricSpec("x", "association", ("p",), "ideal", "", (None, None), False, "m:f")
    with pytest.raises(ValueError, match="family"):
        MetricSpec("x", "", ("p",), "lower", "", (None, None), False, "m:f")
    # an installed package may bring a family of its own (bias_core.hookspec); the project may not
    assert {m.family for m in catalogue.METRICS} <= set(catalogue.FAMILIES)
