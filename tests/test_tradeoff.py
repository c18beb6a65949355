"""Trade-off points, the point to take, tradeoff.csv and the figures, on synthetic numbers."""

from __future__ import annotations

import csv

import pytest

from bias_core.errors import AuditUsageError
from bias_core.metrics import MetricResult
from bias_core.mitigation.evaluation.strength_sweep import check_grid
from bias_core.mitigation.evaluation.tradeoff_curves import (
    BASE,
    PAPER_GRID,
    QUICK_GRID,
    Estimate,
    SweepPoint,
    best_point,
    csv_rows,
    figure_svg,
    point_from_results,
    variant_name,
    write_outputs,
)


def P(method, strength, seat, lost, guards=None):
    return SweepPoint(method, strength, {"SEAT-v1": Estimate(seat, max(seat - 0.1, 0), seat + 0.1)},
                      Estimate(lost, lost - 0.02, lost + 0.02), guards or {})


POINTS = [
    P(BASE, None, 0.8, 0.10, {"perplexity_rise": 0.0}),
    P("cds", 0.6, 0.6, 0.10, {"perplexity_rise": 0.02}),
    P("cds", 0.95, 0.4, 0.15, {"perplexity_rise": 0.05}),
    P("er", 0.2, 0.2, 0.30, {"perplexity_rise": 0.20}),  # nearest the origin, but over the guard
    P("sentence-debias", 1.0, 0.1, 0.40, {"perplexity_rise": 0.01}),
]


def test_distance_from_ideal_and_complement():
    assert Estimate(-0.5, -0.9, -0.1).distance_from(0.0) == Estimate(0.5, 0.1, 0.9)
    assert Estimate(0.2, -0.1, 0.6).distance_from(0.0) == Estimate(0.2, 0.0, 0.6)  # CI holds the ideal
    assert Estimate(58.0, 55.0, 61.0).distance_from(50.0) == Estimate(8.0, 5.0, 11.0)
    assert Estimate(0.9, 0.85, 0.95).complement() == Estimate(pytest.approx(0.1), pytest.approx(0.05), pytest.approx(0.15))


def test_best_point_within_the_guards():
    # scaled by the base (0.8, 0.10): cds@0.6 (0.75, 1.0) -> 1.25; cds@0.95 (0.5, 1.5) -> 1.58;
    # er@0.2 (0.25, 3.0) -> 3.01; sd@1 (0.125, 4.0) -> 4.00
    assert best_point(POINTS, "SEAT-v1").variant == "cds@0.6"
    assert best_point(POINTS, "SEAT-v1", {"perplexity_rise": 0.10}).variant == "cds@0.6"
    # sd@1 alone is within this guard, but at 4.00 it is farther than the base model (sqrt 2)
    assert best_point(POINTS, "SEAT-v1", {"perplexity_rise": 0.015}) is None
    assert best_point([p for p in POINTS if p.method != BASE], "SEAT-v1", {"perplexity_rise": 0.015}).variant == \
        "sentence-debias@1"  # without a base model there is nothing to beat
    assert best_point(POINTS, "SEAT-v1", {"perplexity_rise": 0.001}) is None
    assert best_point(POINTS, "SEAT-v1", {"lm_score_drop": 5.0}) is None  # an unmeasured guard never passes
    assert best_point(POINTS, "logprob_effect") is None


def test_the_point_to_take_improves_on_the_base_model():
    """A point with more bias than before debiasing is never taken, however little DA it loses;
    nor one farther from the origin than the base (the quick sweep on SmolLM2 once recommended
    cds@0.95 for SEAT-v1 at 1.58 against the base's 1.00)."""
    base = P(BASE, None, 1.0, 0.30)
    more_bias = P("er", 0.2, 1.2, 0.05)      # scaled (1.2, 0.17): nearer the origin than the base (1.41)
    farther = P("cds", 0.95, 0.9, 0.45)      # less bias, scaled (0.9, 1.5) -> 1.75 > 1.41
    better = P("sentence-debias", 1.0, 0.5, 0.33)  # scaled (0.5, 1.1) -> 1.21
    assert best_point([base, more_bias, farther], "SEAT-v1") is None
    assert best_point([base, more_bias, farther, better], "SEAT-v1") is better


def test_point_from_results_checks_metrics():
    def R(metric, v):
        return MetricResult(metric, v, v - 0.1, v + 0.1, 10)

    p = point_from_results("er", 0.5, {"DA_score": R("DA_score", 0.8), "SEAT-v2": R("SEAT_effect", -0.3),
                                       "stereo_score": R("stereo_score", 45.0)}, {"perplexity_rise": R("perplexity_rise", 0.03)})
    assert p.variant == "er@0.5" and p.guards == {"perplexity_rise": 0.03}
    assert p.knowledge_lost.value == pytest.approx(0.2)
    assert p.bias["SEAT-v2"].value == pytest.approx(0.3) and p.bias["stereo_score"].value == pytest.approx(5.0)
    assert p.values == {"SEAT-v2": -0.3, "stereo_score": 45.0}  # signed, as DA-Gender's Table 7 prints them
    assert csv_rows([p])[0]["SEAT-v2_value"] == -0.3 and csv_rows([p])[0]["SEAT-v2_bias"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="SEAT_effect"):
        point_from_results("er", 0.5, {"DA_score": R("DA_score", 0.8), "SEAT-v1": R("logprob_effect", 0.1)})
    with pytest.raises(KeyError, match="DA_score"):
        point_from_results("er", 0.5, {})


def test_csv(tmp_path):
    rows = csv_rows(POINTS, {"perplexity_rise": 0.10})
    assert [r["variant"] for r in rows] == ["base", "cds@0.6", "cds@0.95", "er@0.2", "sentence-debias@1"]
    assert [r["take_for"] for r in rows] == ["", "SEAT-v1", "", "", ""]
    assert [r["within_guards"] for r in rows] == ["", True, True, False, True]
    paths = write_outputs(POINTS, tmp_path, {"perplexity_rise": 0.10}, note="synthetic")
    with paths["csv"].open() as fh:
        read = list(csv.DictReader(fh))
    assert read[3]["strength_name"] == "lambda" and float(read[3]["SEAT-v1_bias"]) == 0.2
    assert read[3]["SEAT-v1_value"] == ""  # a point made without its signed value leaves the column empty
    assert float(read[2]["1-DA_score"]) == pytest.approx(0.15) and float(read[2]["perplexity_rise"]) == 0.05
    assert set(paths) == {"csv", "SEAT-v1"}


def test_figure_is_deterministic_svg():
    svg = figure_svg(POINTS, "SEAT-v1", {"perplexity_rise": 0.10}, note="synthetic")
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for text in ("cds (swap rate)", "er (lambda)", "sentence-debias (ratio of pairs)", "before debiasing", "take: cds@0.6",
                 "synthetic"):
        assert text in svg
    assert figure_svg(POINTS, "SEAT-v1", {"perplexity_rise": 0.10}, note="synthetic") == svg


def test_grids():
    assert min(PAPER_GRID["cds"]) == 0.6 and max(PAPER_GRID["cds"]) == 1.0  # Table 12: BERT and BART's 1.0
    assert min(PAPER_GRID["er"]) == 0.2 and max(PAPER_GRID["er"]) == 2.0
    assert min(PAPER_GRID["sentence-debias"]) == 0.01 and max(PAPER_GRID["sentence-debias"]) == 1.0
    for method, points in QUICK_GRID.items():
        assert set(points) <= set(PAPER_GRID[method]) and len(points) < len(PAPER_GRID[method])
    check_grid(PAPER_GRID)
    assert variant_name("er", 2.0) == "er@2"
    with pytest.raises(AuditUsageError, match="unknown method"):
        check_grid({"inlp": (0.1,)})
    with pytest.raises(AuditUsageError, match="out of range"):
        check_grid({"sentence-debias": (0.0,)})
    with pytest.raises(AuditUsageError, match="out of range"):
        check_grid({"cds": (1.2,)})
