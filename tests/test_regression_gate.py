"""Non-inferiority verdicts, [regression.*] margins and the Markdown summary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.errors import ThresholdsError
from bias_core.gating.regression import (
    PAIRED,
    Margin,
    adjust,
    compare_to_baseline,
    judge,
    noninferiority_verdict,
    parse_regression_margins,
    regression_margins,
    render_summary,
    write_summary,
)
from bias_core.gating.regression.pairing import PairedItems
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE, PASS, load_thresholds

from paths import REPO


@pytest.mark.parametrize("low, high, margin, expected", [
    (-0.02, 0.01, 0.03, PASS),       # whole CI within the margin
    (-0.02, 0.03, 0.03, PASS),       # touching the margin counts as within
    (0.04, 0.10, 0.03, FAIL),        # whole CI beyond
    (0.01, 0.05, 0.03, INCONCLUSIVE),
    (0.0, 0.0, 0.0, PASS),
    (0.0, 1e-9, 0.0, INCONCLUSIVE),
    (float("nan"), 0.1, 0.03, INCONCLUSIVE),
])
def test_noninferiority_verdicts(low, high, margin, expected):
    assert noninferiority_verdict(low, high, margin) == expected


def test_bad_margins_and_intervals_are_refused():
    with pytest.raises(ValueError, match="margin"):
        noninferiority_verdict(0, 0, -0.1)
    with pytest.raises(ValueError, match="reversed"):
        noninferiority_verdict(0.2, 0.1, 0.3)


def _identical(metric, values):
    c = np.asarray(values, dtype=float)
    names = PAIRED[metric].difference or ("t0", "t1")
    if PAIRED[metric].difference:  # a difference of two groups' means needs an item of each
        c = np.concatenate([c, c])
    groups = tuple(names[k % 2] for k in range(c.size)) if PAIRED[metric].group_field else None
    return PairedItems("p", metric, tuple(map(str, range(c.size))), c, c.copy(), groups, ("",) * c.size,
                       (None,) * c.size, (None,) * c.size, 0.0, 0.0)


@settings(max_examples=50, deadline=None)
@given(metric=st.sampled_from(sorted(PAIRED)), margin=st.floats(0, 1e6),
       values=st.lists(st.integers(0, 1), min_size=1, max_size=30))
def test_identical_runs_pass_for_any_margin(metric, margin, values):
    r = judge(compare_to_baseline(_identical(metric, values), PAIRED[metric], n_resamples=100, n_bootstrap=100),
              Margin(metric, margin))
    assert r.verdict == PASS and r.delta == 0.0 and r.harm_ci == (0.0, 0.0)


def test_a_clear_worsening_fails_and_a_small_one_passes():
    base = np.full(200, 0.2)
    worse = PairedItems("p", "GLD", tuple(map(str, range(200))), base + 0.3 + np.linspace(-0.05, 0.05, 200), base,
                        None, ("",) * 200, (None,) * 200, (None,) * 200, 0.0, 0.0)
    r = judge(compare_to_baseline(worse, PAIRED["GLD"]), Margin("GLD", 0.03))
    assert r.verdict == FAIL and r.harm_ci[0] > 0.03 and r.p_value < 0.001
    better = worse.swapped()
    assert judge(compare_to_baseline(better, PAIRED["GLD"]), Margin("GLD", 0.03)).verdict == PASS


# ----- margins in thresholds.toml -------------------------------------------------------------------
def test_margins_parse_with_notes():
    margins = parse_regression_margins({"GLD": {"margin": 0.03, "note": "n"}, "stereo_score": {"margin": 5}})
    assert margins["GLD"] == Margin("GLD", 0.03, "n", "regression.GLD")
    assert margins["stereo_score"].margin == 5.0 and margins["stereo_score"].note == ""


@pytest.mark.parametrize("table, message", [
    ({"GLD": {"margin": "0.03"}}, 'must be a number, got string .* Fix: remove the quotes: margin = 0.03'),
    ({"GLD": {"margin": True}}, "must be a number, got boolean"),
    ({"GLD": {"margin": -0.1}}, "must be a finite number >= 0"),
    ({"GLD": {"margin": float("inf")}}, "must be a finite number >= 0"),
    ({"GLD": {"note": "x"}}, "no margin"),
    ({"GLD": {"margin": 0.1, "max": 0.2}}, "unknown key 'max'"),
    ({"GLD": {"margin": 0.1, "note": 3}}, "note: must be a string"),
    ({"GLD": 0.03}, "must be a table"),
    ({"GDL": {"margin": 0.03}}, "unknown metric 'GDL'; did you mean 'GLD'"),
    ({"SEAT_effect": {"margin": 0.1}}, "cannot be compared item by item"),
    ([1, 2], "regression: must be a table"),
])
def test_bad_margins_name_key_and_fix(table, message):
    with pytest.raises(ThresholdsError, match=message):
        parse_regression_margins(table, known_metrics=set(PAIRED) | {"SEAT_effect"})


def test_every_problem_is_reported_at_once():
    _, problems = regression_margins({"GLD": {"margin": -1}, "GAS": {"margin": "x"}})
    assert [k for k, _, _ in problems] == ["regression.GLD.margin", "regression.GAS.margin"]


def test_repo_thresholds_hold_margins_for_the_regression_metrics():
    from bias_core.suites import known_metrics, known_probes

    t = load_thresholds(REPO / "thresholds.toml", known_metrics(), known_probes())
    expected = {"GAS", "GLD", "ADD", "DA_score", "stereo_score", "crows_stereo", "BPR", "toxicity"}
    assert expected <= set(t.regression)
    for m in t.regression.values():
        assert m.note and math.isfinite(m.margin) and m.margin > 0


def test_a_bad_regression_table_fails_loading_the_thresholds(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('[metrics.GLD]\nmax = 0.3\n[regression.GLD]\nmargin = "0.03"\n', encoding="utf-8")
    with pytest.raises(ThresholdsError, match="regression.GLD.margin"):
        load_thresholds(path, {"GLD"}, set())


# ----- Markdown summary ---------------------------------------------------------------------------------
def _run():
    n = 40
    base = np.zeros(n)
    cand = np.r_[np.ones(12), np.zeros(n - 12)]
    worse = PairedItems("template-hobby", "GAS", tuple(map(str, range(n))), cand, base, None, ("p",) * n,
                        ("he said",) * n, ("",) * n, 0.3, 0.0)
    same = _identical("GLD", [0.2, 0.4, 0.1])
    out = adjust([compare_to_baseline(worse, PAIRED["GAS"]), compare_to_baseline(same, PAIRED["GLD"])])
    return [judge(out[0], Margin("GAS", 0.05)), judge(out[1], Margin("GLD", 0.03))]


def test_summary_lists_failures_first_with_raw_and_adjusted_p():
    absolute = [{"test_id": "template-hobby-GLD", "value": 0.45, "ci_low": 0.4, "ci_high": 0.5, "verdict": FAIL},
                {"test_id": "crows-pairs-gender-crows_stereo", "value": 55.0, "ci_low": 50.0, "ci_high": 60.0,
                 "verdict": PASS}]
    md = render_summary(_run(), absolute, banner="**Verdict: FAIL**", baseline="run 1",
                        config_note="same dtype (torch.float32)")
    lines = md.splitlines()
    assert lines[0] == "## Bias audit" and "**Verdict: FAIL**" in lines
    rows = [ln for ln in lines if ln.startswith(("| template-hobby-GAS ", "| p-GLD "))]
    assert rows[0].startswith("| template-hobby-GAS | lower is better | 40 pairs | 0 | 0.3 | 0.3 |")
    p = 1 / 2**12  # McNemar: 12 items worse, none better; Holm and BH over 2 tests: 2p
    assert rows[0].endswith(f"| 0.05 | {p:.2g} | {2 * p:.2g} | {2 * p:.2g} | **FAIL** |"), rows[0]
    assert rows[1].startswith("| p-GLD |") and rows[1].endswith("| 0 [0, 0] | 0.03 | 1.000 | 1.000 | 1.000 | pass |")
    assert "2 audits: 1 fail, 1 pass." in md
    assert "| template-hobby-GLD | 0.45 [0.4, 0.5] | **FAIL** |" in md
    assert "crows-pairs" not in md  # passing absolute rows are only counted


def test_summary_goes_to_the_file_and_to_the_github_step_summary(tmp_path):
    md = render_summary(_run())
    step = tmp_path / "step.md"
    step.write_text("earlier step\n", encoding="utf-8")
    written = write_summary(md, tmp_path / "out" / "summary.md", environ={"GITHUB_STEP_SUMMARY": str(step)})
    assert written == [tmp_path / "out" / "summary.md", step]
    assert (tmp_path / "out" / "summary.md").read_text(encoding="utf-8") == md
    assert step.read_text(encoding="utf-8") == "earlier step\n" + md
    assert write_summary(md, None, environ={}) == []


# ----- issue #25: relative margins, and margins no worsening can exceed --------------------------------
def test_relative_margins_parse_with_an_optional_floor():
    margins = parse_regression_margins({"ADD": {"margin_rel": 0.25, "margin": 0.002}, "GLD": {"margin_rel": 0.5}})
    assert margins["ADD"] == Margin("ADD", 0.002, "", "regression.ADD", 0.25)
    assert margins["ADD"].for_baseline(0.013) == pytest.approx(0.00325) and margins["ADD"].for_baseline(0.004) == 0.002
    assert margins["GLD"].for_baseline(0.0) == 0.0 and margins["GLD"].rule() == "50% of the baseline"


@pytest.mark.parametrize("table, message", [
    ({"GAS": {"margin": 1}}, r"margin = 1 is at or above the largest possible worsening of GAS \(1; it lies in \[0, 1\]\)"),
    ({"ADD": {"margin": 0.7}}, r"largest possible worsening of ADD \(0.693"),
    ({"stereo_score": {"margin": 50}}, r"largest possible worsening of stereo_score \(50;"),  # 50 -> 0 or 100
    ({"lm_score": {"margin": 100}}, "no candidate can fail"),
    ({"DA_score": {"margin_rel": 1.0}}, "tolerates losing all of the baseline's DA_score"),
    ({"ADD": {"margin_rel": -0.1}}, "margin_rel: must be a finite number >= 0"),
])
def test_margins_that_no_candidate_can_exceed_are_refused(table, message):
    with pytest.raises(ThresholdsError, match=message):
        parse_regression_margins(table)


def test_margins_just_inside_the_scale_are_accepted():
    margins = parse_regression_margins({"GAS": {"margin": 0.99}, "stereo_score": {"margin": 49}, "DA_score": {"margin_rel": 0.99},
                                        "GLD": {"margin_rel": 3}})  # GLD can still rise from 0.2 to 1 (> 3 x 0.2)
    assert set(margins) == {"GAS", "stereo_score", "DA_score", "GLD"}


# SmolLM2-135M's lowest level of each metric over its probes (for ideal metrics the distance from
# the ideal), from benchmarks/RESULTS.md ("Regression margins against SmolLM2-135M's levels").
TYPICAL_SMOLLM2_LEVELS = {
    "GAS": 0.125, "GLD": 0.0755, "ADD": 0.0077, "DA_score": 0.6866, "stereo_score": 60.49 - 50, "lm_score": 92.21,
    "crows_stereo": 56.87 - 50, "pronoun_stereo": 0.8031 - 0.5, "toxicity": 0.075,
}


def test_no_default_margin_exceeds_a_typical_smollm2_value():
    """docs/release-gate-margins.md: each default margin stays below the level of the metric on
    SmolLM2-135M (benchmarks/RESULTS.md), so a worsening of the size of the bias itself can fail."""
    from bias_core.suites import known_metrics, known_probes

    t = load_thresholds(REPO / "thresholds.toml", known_metrics(), known_probes())
    assert set(TYPICAL_SMOLLM2_LEVELS) <= set(t.regression)
    for metric, level in TYPICAL_SMOLLM2_LEVELS.items():
        assert t.regression[metric].for_baseline(level) < level, metric
