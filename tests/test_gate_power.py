"""The release gate's power simulation (bias_core/gating/regression/power.py) on hand-checkable
baselines: what it finds is what the gate's own interval rule gives by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.gating.regression import ItemValue, Margin, MetricItems, PairedSpec, pair
from bias_core.gating.regression.power import detect_text, detectable, power_note, simulate

LOWER_BINARY = PairedSpec("lower", kind="binary")
LOWER = PairedSpec("lower")


def paired(values):
    items = tuple(ItemValue(f"i{k}", float(v), f"prompt {k}", None, None) for k, v in enumerate(values))
    block = MetricItems("probe", "GAS", "1", "c" * 64, float(np.mean(values)), items)
    return pair(block, block)


def test_a_shift_of_every_item_is_caught_just_beyond_the_margin():
    """No churn, every item shifted: the harm interval has no width, so the gate fails exactly
    when the shift passes the margin. The ladder starts at half the margin and steps by a third:
    0.015, 0.02, 0.0267 (inside 0.03), 0.0356 (caught)."""
    base = paired(np.linspace(0.1, 0.6, 40))
    found = detectable(base, LOWER, Margin("GLD", 0.03), sims=5)
    assert [p.power for p in found.points] == [0.0, 0.0, 0.0, 1.0]
    assert [p.harm for p in found.points] == pytest.approx([0.015, 0.02, 0.08 / 3, 0.32 / 9])
    assert found.effect == pytest.approx(0.32 / 9) and found.margin == 0.03


def test_flipped_items_are_caught_where_the_intervals_lower_end_clears_the_margin():
    """100 items all 0 (lower is better), margin 0.05: k flips give a harm of k/100 whose 95%
    interval starts near k/100 - 1.96 sqrt(k/100 (1 - k/100) / 100) (Wald). The ladder 5, 7, 10,
    14: that lower end is 0.007, 0.020, 0.041 (below 0.05: not caught) and 0.072 (caught)."""
    base = paired([0.0] * 100)
    found = detectable(base, LOWER_BINARY, Margin("GAS", 0.05), sims=20)
    assert [p.step for p in found.points] == [5, 7, 10, 14]
    wald = [p.harm - 1.96 * math.sqrt(p.harm * (1 - p.harm) / 100) for p in found.points]
    assert [w > 0.05 for w in wald] == [p.power >= 0.8 for p in found.points] == [False, False, False, True]
    assert found.effect == pytest.approx(0.14)


def test_a_higher_is_better_metric_is_made_worse_by_flipping_its_ones():
    base = paired([1.0] * 80 + [0.0] * 20)
    point = simulate(base, PairedSpec("higher", kind="binary"), Margin("DA_score", 0.05), 10, churn=0.0, sims=3)
    assert point.harm == pytest.approx(0.10)


@settings(max_examples=8, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=30, max_size=60), st.floats(0.02, 0.1))
def test_churn_never_makes_a_row_catch_a_smaller_regression(values, margin):
    base = paired(values)
    calm = detectable(base, LOWER_BINARY, Margin("GAS", margin), churn=0.0, sims=20)
    noisy = detectable(base, LOWER_BINARY, Margin("GAS", margin), churn=1.0, sims=20)
    if noisy.found is not None:
        assert calm.found is not None and calm.found.step <= noisy.found.step


def test_the_report_names_a_margin_below_what_forty_binary_items_detect():
    """40 items all 0, margin 0.05: a flip moves the mean by 0.025, and the interval's lower end
    (Wald, as above) clears 0.05 only from about 9 flips (0.225): more than twice the margin."""
    note = power_note(paired([0.0] * 40), LOWER_BINARY, Margin("GAS", 0.05))
    assert note["margin_below_detectable"] is True and note["detects_power"] == 0.8
    assert note["detects"] > 2 * 0.05
    text = detect_text({**note, "margin": 0.05})
    assert "margin 0.05 is below what this row detects" in text and f"{note['detects']:.3g} with 80% power" in text


def test_the_report_does_not_flag_a_margin_that_a_shifted_row_detects():
    note = power_note(paired(np.linspace(0.1, 0.6, 40)), LOWER, Margin("GLD", 0.03))
    assert note["margin_below_detectable"] is False and note["detects"] == pytest.approx(0.32 / 9)
    assert detect_text({**note, "margin": 0.03}) == ""


def test_a_row_at_its_floor_is_flagged_as_beyond_reach():
    """An accuracy already 0 on every item (BBQ's ambiguous questions on SmolLM2-135M) cannot get
    worse: no regression the ladder tries is caught."""
    note = power_note(paired([0.0] * 40), PairedSpec("higher", kind="binary"), Margin("bbq_acc_ambig", 0.05))
    assert note["detects"] is None and note["margin_below_detectable"] is True
    assert "no regression the simulation tried" in detect_text({**note, "margin": 0.05})


def test_the_summary_and_the_html_report_list_rows_whose_margin_is_below_what_they_detect():
    from bias_core.gating.regression.summary import render_summary
    from bias_core.pytest_plugin.regression_summary import comparison_from_row
    from bias_core.reports.regression_html import regression_section

    row = {"kind": "regression", "test_id": "regression-template-color-GAS", "probe": "template-color", "metric": "GAS",
           "verdict": "pass", "harm": 0.0, "harm_ci_low": 0.0, "harm_ci_high": 0.0, "margin": 0.05, "value": 0.0,
           "baseline_value": 0.1, "candidate_value": 0.1, "detects": 0.2, "detects_power": 0.8,
           "margin_below_detectable": True, "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0, "better": "lower", "n": 40}
    _, _, html = regression_section([row], badge=str)
    assert "Margins below what the row detects" in html and "0.2 (margin below)" in html
    assert "margin 0.05 is below what this row detects on the baseline&#x27;s items: 0.2 with 80% power" in html
    markdown = render_summary([comparison_from_row(row)], weak={"template-color-GAS": detect_text(row)})
    assert "**Margins below what the row detects (1):**" in markdown
    assert "- `template-color-GAS`: margin 0.05 is below what this row detects" in markdown
