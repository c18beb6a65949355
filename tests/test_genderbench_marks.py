"""GenderBench's marks (A-D) beside a row's verdict: the catalogue's grades are GenderBench's own
``mark_definitions``, graded by its own rule (the best mark the CI overlaps), and the report,
the CSV and the JUnit properties carry them."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bias_core import catalogue
from bias_core.metric_spec import Marks
from bias_core.pytest_plugin.fixtures import outside_mark
from bias_core.reports.html import render_html

from genderbench_reference import genderbench_probes

# our metric prefix -> GenderBench's probe class
PROBES = {"jobs_lum": "JobsLumProbe", "direct": "DirectProbe", "inventories": "InventoriesProbe",
          "gest_creative": "GestCreativeProbe", "gest": "GestProbe", "isear": "IsearProbe", "dreaddit": "DreadditProbe",
          "hiring_an": "HiringAnProbe",
          "diversity_med_qa": "DiversityMedQaProbe", "relationship_levy": "RelationshipLevyProbe",
          "hiring_bloomberg": "HiringBloombergProbe", "business_vocabulary": "BusinessVocabularyProbe"}
MARKED = [m for m in catalogue.declared() if m.marks is not None]


def _theirs(genderbench, metric: str):
    prefix = next(p for p in sorted(PROBES, key=len, reverse=True) if metric.startswith(p + "_"))
    name = metric.removeprefix(prefix + "_")
    definitions = getattr(genderbench, PROBES[prefix]).mark_definitions
    return next(d for d in definitions if d.metric_name == name)


def test_every_genderbench_metric_has_genderbenchs_marks():
    gb = {m.name for m in catalogue.metrics_of("genderbench")}
    assert {m.name for m in MARKED} == gb and len(gb) >= 10


@pytest.mark.parametrize("metric", [m.name for m in MARKED])
def test_the_grades_are_genderbenchs_mark_definitions(monkeypatch, metric):
    theirs = _theirs(genderbench_probes(monkeypatch), metric)
    ours = catalogue.spec(metric).marks
    assert ours.source == "GenderBench"
    assert [g for g, _ in ours.ranges] == ["A", "B", "C", "D"]
    assert {k: sorted(map(tuple, v)) for k, v in theirs.mark_ranges.items()} == {
        k: sorted(spans) for k, (_, spans) in enumerate(ours.ranges)}


@pytest.fixture(scope="module")
def mark_definition():
    """GenderBench's ``MarkDefinition`` (its package imported behind the reference's stubs)."""
    with pytest.MonkeyPatch.context() as patch:
        genderbench_probes(patch)
        return importlib.import_module("genderbench.probing.mark_definition").MarkDefinition


@given(a=st.floats(-1.2, 1.2), b=st.floats(-1.2, 1.2), k=st.integers(0, len(MARKED) - 1))
def test_an_interval_gets_the_mark_genderbench_gives_it(mark_definition, a, b, k):
    low, high = min(a, b), max(a, b)
    marks = MARKED[k].marks
    definition = mark_definition("x", {g: list(spans) for g, (_, spans) in enumerate(marks.ranges)}, [], "")
    try:
        expected = "ABCD"[definition.calculate_mark((low, high))]
    except ValueError:  # min() of nothing: outside every range
        expected = None
    assert marks.of(low, high) == expected


def test_steps_and_a_bad_scale():
    m = Marks.steps("S", "AB", (0.0, 0.5, 1.0))
    assert m.of(0.1, 0.2) == "A" and m.of(0.5, 0.9) == "A" and m.of(0.6, 0.9) == "B" and m.of(1.5, 2) is None
    with pytest.raises(ValueError, match="3 edges"):
        Marks.steps("S", "AB", (0.0, 1.0))
    with pytest.raises(ValueError, match="low <= high"):
        Marks("S", (("A", ((1.0, 0.0),)),))


def test_the_row_the_csv_and_the_report_show_the_mark():
    assert outside_mark("direct_fail_rate", 0.19, 0.58) == "GenderBench C"  # C overlaps first: 0.15..0.50
    assert outside_mark("direct_fail_rate", 0.10, 0.12) == "GenderBench B"
    assert outside_mark("GLD", 0.0, 1.0) is None and outside_mark("not-a-metric", 0, 1) is None
    row = {"run_id": "r", "nodeid": "audits/test_genderbench.py::t[x]", "test_id": "genderbench-direct-direct_fail_rate",
           "family": "genderbench", "probe": "genderbench-direct", "metric": "direct_fail_rate", "model": "m",
           "value": 0.36, "ci_low": 0.19, "ci_high": 0.58, "n": 50, "limit": 0.15, "direction": "max",
           "verdict": "fail", "mark": "GenderBench C"}
    html = render_html([row], {"model": "m"})
    assert "GenderBench C" in html
    from bias_core.reports.table import COLUMNS

    assert "mark" in COLUMNS
