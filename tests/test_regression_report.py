"""Regression rows in reports: the HTML section, the Markdown summary, the multiplicity rule."""

from __future__ import annotations

import re

import numpy as np

from bias_core.gating.regression import PAIRED, Margin, compare_to_baseline, judge
from bias_core.gating.regression.pairing import ConfigComparison, PairedItems
from bias_core.pytest_plugin.regression_rows import _row
from bias_core.pytest_plugin.regression_summary import comparison_from_row, write_run_summary
from bias_core.reports.html import render_html

SAME = ConfigComparison(same_model=False, dtype_differs=True, tokenizer_differs=False,
                        candidate_dtype="float32", baseline_dtype="bfloat16")


def paired(candidate, baseline, metric="GLD", outputs=None):
    n = len(candidate)
    ids = tuple(f"i{k}" for k in range(n))
    out = outputs or (None,) * n
    return PairedItems("template-hobby", metric, ids, np.asarray(candidate, float), np.asarray(baseline, float), None,
                       tuple(f"prompt {k}" for k in range(n)), out, out, float(np.mean(candidate)),
                       float(np.mean(baseline)))


def regression_row(candidate, baseline, margin=0.03, method="holm", p_adjusted=None):
    c = judge(compare_to_baseline(paired(candidate, baseline), PAIRED["GLD"], n_resamples=2000, n_bootstrap=500),
              Margin("GLD", margin))
    c = c.__class__(**{**c.__dict__, "p_holm": c.p_value if p_adjusted is None else p_adjusted,
                       "p_bh": c.p_value if p_adjusted is None else p_adjusted})
    return _row(c, "disclosure", method, "stored run X", SAME)


def test_a_fail_needs_significance_after_adjustment():
    worse = regression_row([0.9] * 30, [0.1] * 30)
    assert worse["verdict"] == "fail" and worse["harm_ci_low"] > 0.03
    not_significant = regression_row([0.9] * 30, [0.1] * 30, p_adjusted=0.2)
    assert not_significant["verdict"] == "inconclusive"  # beyond the margin, but not once adjusted
    same = regression_row([0.4, 0.5, 0.6] * 10, [0.4, 0.5, 0.6] * 10)
    assert same["verdict"] == "pass" and same["value"] == 0 and (same["ci_low"], same["ci_high"]) == (0, 0)
    assert worse["config"].endswith("different dtypes (candidate float32, baseline bfloat16)")


def test_rows_round_trip_to_comparisons():
    row = regression_row([0.9, 0.8, 0.7] * 10, [0.1, 0.2, 0.3] * 10)
    c = comparison_from_row(row)
    assert (c.delta, c.delta_ci, c.harm_ci, c.verdict, c.margin) == (
        row["value"], (row["ci_low"], row["ci_high"]), (row["harm_ci_low"], row["harm_ci_high"]), row["verdict"], 0.03)


def test_html_has_a_candidate_vs_baseline_section_and_loads_nothing():
    audit = {"test_id": "template-hobby-GLD", "family": "disclosure", "probe": "template-hobby", "metric": "GLD",
             "value": 0.2, "ci_low": 0.1, "ci_high": 0.25, "n": 30, "limit": 0.3, "direction": "max", "verdict": "pass"}
    reg = dict(regression_row([0.9, 0.8, 0.7] * 10, [0.1, 0.2, 0.3] * 10), nodeid="x::test_regression[a]")
    page = render_html([audit, reg], {"model": "m", "complete": True}, generated="fixed")
    section = page[page.index('<section id="regression">'):]
    section = section[:section.index("</section>")]
    assert "Candidate vs baseline" in section and "<svg" in section and "margin 0.03" in section
    assert "prompt 0" in section and "items that moved most" in section
    assert "different dtypes" in section
    results = page[page.index('id="results"'):page.index('id="regression"')]
    assert "regression-template-hobby-GLD" not in results  # not mixed into the absolute gates' table
    assert "BLOCKED" in page  # the failed regression test blocks the run like any gate
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)


def test_summary_markdown_is_written_to_the_file_and_github_step_summary(tmp_path, monkeypatch):
    from bias_core.pytest_plugin.regression_options import RegressionOptions

    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))

    class Settings:
        strict, model_value = False, "cand"

    rows = [regression_row([0.9] * 30, [0.1] * 30)]
    written = write_run_summary(rows, RegressionOptions(summary_md=tmp_path / "out" / "summary.md"), Settings(), 1)
    assert written == [tmp_path / "out" / "summary.md", step]
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "BLOCKED" in text and "| template-hobby-GLD |" in text and "**FAIL**" in text
    assert step.read_text() == "earlier step\n" + text


# ----- issue #25 case 10: a significant worsening inside the margin is named, not passed silently -----
# ADD per prompt as in the mild " he" adapter: the baseline averages 0.013 exactly (items
# 0.011 / 0.015 alternating), every item rises by 0.0048 or 0.0058 (0.0053 on average): 0.0183,
# +41%, with every one of the 40 items worse, so the one-sided permutation p-value is at its floor.
ADD_BASE = [0.013 + (0.002 if k % 2 else -0.002) for k in range(40)]
ADD_CAND = [b + 0.0053 + (0.0005 if k % 2 else -0.0005) for k, b in enumerate(ADD_BASE)]


def add_row(margin: Margin) -> dict:
    from bias_core.stats.paired import adjust

    [c] = adjust([compare_to_baseline(paired(ADD_CAND, ADD_BASE, metric="ADD"), PAIRED["ADD"], n_resamples=2000, n_bootstrap=500)])
    return dict(_row(judge(c, margin), "disclosure", "holm", "stored run X", SAME),
                test_id="regression-template-hobby-ADD")


def test_significant_worsening_inside_an_absolute_margin_passes_but_is_flagged():
    row = add_row(Margin("ADD", 0.01, source="regression.ADD"))
    assert 0.0047 <= row["harm_ci_low"] <= row["harm_ci_high"] <= 0.0059  # the items' diffs lie in [0.0048, 0.0058]
    assert row["verdict"] == "pass" and row["margin"] == 0.01
    assert row["p_adjusted"] < 0.001 and row["worse_within_margin"] is True


def test_the_same_change_against_a_relative_margin_fails():
    # a quarter of the baseline's 0.013 is 0.00325 (above the 0.002 floor): the whole harm CI lies beyond it
    row = add_row(Margin("ADD", 0.002, source="regression.ADD", relative=0.25))
    assert abs(row["margin"] - 0.00325) < 1e-12
    assert row["verdict"] == "fail" and row["worse_within_margin"] is False
    assert row["margin_rule"] == "25% of the baseline, at least 0.002"
    floor = add_row(Margin("ADD", 0.01, source="regression.ADD", relative=0.25))
    assert floor["margin"] == 0.01 and floor["verdict"] == "pass"  # the floor is larger here, so it holds


def test_relative_margin_of_an_ideal_metric_is_a_share_of_the_baseline_distance():
    from bias_core.gating.regression.gate import baseline_level
    from bias_core.stats.paired import PairedComparison

    c = PairedComparison("crows-pairs-gender", "crows_stereo", 262, 0, 58.0, 60.0, 2.0, (0.0, 4.0), 2.0, (0.0, 4.0),
                         0.1, "t", "ideal", ideal=50.0)
    assert baseline_level(c) == 8.0
    assert judge(c, Margin("crows_stereo", 0.0, relative=0.25)).margin == 2.0


def test_banner_names_the_worsening_and_every_regression_row_shows_its_margin():
    from bias_core.reports.banner import PASSED, verdict_banner

    worse = add_row(Margin("ADD", 0.01, source="regression.ADD"))
    failed = dict(regression_row([0.9] * 30, [0.1] * 30), test_id="regression-template-hobby-GLD")
    banner = verdict_banner([worse])
    assert banner.status == PASSED
    assert "1 gate passed within its margin but significantly worse than the baseline" in banner.headline
    [item] = banner.items
    assert item.verdict == "worse" and item.test_id == "regression-template-hobby-ADD"
    assert item.detail.startswith("within margin, but worse: ADD +41% (0.013 → 0.0183), p = ")
    assert "margin 0.01" in item.detail
    [fail] = verdict_banner([worse, failed]).items[:1]
    assert fail.verdict == "fail" and "limit —" not in fail.detail
    assert "GLD +800% (0.1 → 0.9); harm 0.8, 95% CI [0.8, 0.8], margin 0.03, p_holm = " in fail.detail


def test_summary_and_html_name_the_worsening(tmp_path):
    from bias_core.pytest_plugin.regression_options import RegressionOptions

    class Settings:
        strict, model_value = False, "cand"

    row = add_row(Margin("ADD", 0.01, source="regression.ADD"))
    write_run_summary([row], RegressionOptions(summary_md=tmp_path / "summary.md"), Settings(), 0)
    text = (tmp_path / "summary.md").read_text()
    assert "**Within margin, but significantly worse (1):**" in text
    assert "- `template-hobby-ADD`: within margin, but worse: ADD +41% (0.013 → 0.0183), p = " in text
    assert "| pass (worse) |" in text and "significantly worse than the baseline" in text  # table and headline
    page = render_html([dict(row, nodeid="x::test_regression[a]")], {"model": "m", "complete": True}, generated="fixed")
    section = page[page.index('<section id="regression">'):]
    assert "within margin, but worse: ADD +41% (0.013 → 0.0183), p = " in section
    assert "Within margin, but significantly worse" in section
