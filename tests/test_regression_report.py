"""Regression rows in reports: the HTML section, the Markdown summary, the multiplicity rule."""

from __future__ import annotations

import re

import numpy as np

from bias_core.regression import PAIRED, Margin, compare, judge
from bias_core.regression.pairing import ConfigComparison, PairedItems
from bias_core.regression.session import _row, comparison_from_row, write_run_summary
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
    c = judge(compare(paired(candidate, baseline), PAIRED["GLD"], n_resamples=2000, n_bootstrap=500),
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
    from bias_core.regression.options import RegressionOptions
    from bias_core.regression.session import RegressionState

    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))

    class Settings:
        strict, model_value = False, "cand"

    state = RegressionState(RegressionOptions(summary_md=tmp_path / "out" / "summary.md"), Settings())
    state.rows = [regression_row([0.9] * 30, [0.1] * 30)]
    written = write_run_summary(state, 1)
    assert written == [tmp_path / "out" / "summary.md", step]
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "BLOCKED" in text and "| template-hobby-GLD |" in text and "**FAIL**" in text
    assert step.read_text() == "earlier step\n" + text
