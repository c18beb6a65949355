"""The banner's inconclusive gates: by family, at most 3 each, closest to deciding first (issue #41).

The terminal, report.html and the Markdown summary show the same grouping; the tables keep every row.
"""

from __future__ import annotations

import itertools
import re

import pytest

from bias_core.reports.banner import verdict_banner
from bias_core.reports.banner_groups import decision_distance, family_of, group_inconclusive
from bias_core.reports.html import render_html


def gate(test_id, family="disclosure", ci=(0.25, 0.35), limit=0.3, verdict="inconclusive", **extra):
    """An absolute gate row, ``max`` limit by default; the value sits mid-CI."""
    lo, hi = ci
    value = None if lo is None else (lo + hi) / 2
    return {"test_id": test_id, "nodeid": f"audits/test_x.py::t[{test_id}]", "family": family, "probe": test_id,
            "metric": "GLD", "verdict": verdict, "value": value, "ci_low": lo, "ci_high": hi, "limit": limit,
            "direction": "max", "ideal": None, "n": 40, **extra}


def regression(test_id, harm_ci, margin=0.03, verdict="inconclusive"):
    lo, hi = harm_ci
    return {"kind": "regression", "test_id": f"regression-{test_id}", "family": "disclosure", "probe": test_id,
            "metric": "GLD", "verdict": verdict, "value": 0.0, "ci_low": lo, "ci_high": hi, "n": 40,
            "harm": (lo + hi) / 2, "harm_ci_low": lo, "harm_ci_high": hi, "margin": margin}


# Five disclosure gates at limit 0.3 whose CIs cross it by 0.01 .. 0.05 above (width 0.2): the
# distance is the smaller of the two sides over the width, so d1 (0.05) is closest and d5 (0.25)
# farthest; listed in a shuffled order on purpose.
FIVE = [gate(f"d{k}", ci=(0.3 - (0.2 - 0.01 * k), 0.3 + 0.01 * k)) for k in (3, 5, 1, 4, 2)]


@pytest.mark.parametrize(("row", "expected"), [
    (gate("x", ci=(0.2, 0.4)), 0.5),                                  # the limit at the CI's centre
    (gate("x", ci=(0.28, 0.38)), 0.2),                                # 0.02 below of a 0.1 width
    ({**gate("x", ci=(0.6, 0.8), limit=0.75), "direction": "min"}, 0.25),
    (regression("x", (0.01, 0.04)), 0.01 / 0.03),                     # 0.04 - 0.03, of the margin
    (regression("x", (0.04, 0.05)), 0.0),                             # beyond the margin, left by the adjusted p
    (gate("x", ci=(None, None)), None),
    (gate("x", ci=(0.3, 0.3)), None),                                 # no width: no yardstick
    (regression("x", (0.0, 0.01), margin=0.0), None),
])
def test_decision_distance_is_the_least_move_of_the_ci_relative_to_its_yardstick(row, expected):
    d = decision_distance(row)
    assert d == expected if expected is None else d == pytest.approx(expected)


def test_two_sided_gate_takes_the_cheaper_of_passing_and_failing():
    # 50 ± 10, CI [38, 72]: passing moves 72 -> 60 and 38 -> 40 (14), failing moves 38 -> 60 (22) or 72 -> 40 (32)
    assert decision_distance({**gate("x", ci=(38, 72), limit=10), "ideal": 50}) == pytest.approx(14 / 34)


def test_a_family_lists_its_three_closest_then_counts_the_rest():
    lines = verdict_banner(FIVE).lines
    assert lines[1] == "  disclosure: 5 gates inconclusive, closest to deciding first"
    assert [line.split(":")[0] for line in lines[2:5]] == [f"    INCONCLUSIVE {k}" for k in ("d1", "d2", "d3")]
    assert lines[5] == "    and 2 more inconclusive in disclosure (see the results table)"
    assert not any(k in line for line in lines for k in ("d4", "d5"))


def test_every_failure_is_listed_first_however_many():
    fails = [gate(f"f{k}", ci=(0.4, 0.6), verdict="fail") for k in range(6)]
    b = verdict_banner([*FIVE, *fails])
    assert [i.test_id for i in b.items[:6]] == [f"f{k}" for k in range(6)]
    first_group = next(k for k, line in enumerate(b.lines) if "gates inconclusive," in line)
    assert all(line.startswith("  FAIL f") for line in b.lines[1:first_group])


def test_two_families_are_grouped_separately_in_name_order():
    rows = [*FIVE, gate("a1", family="association", ci=(0.1, 0.4)), regression("r1", (0.0, 0.05))]
    groups = group_inconclusive(rows)
    assert [(g.family, g.total, g.hidden) for g in groups] == [("association", 1, 0), ("disclosure", 5, 2),
                                                               ("regression", 1, 0)]
    lines = verdict_banner(rows).lines
    assert "  association: 1 gate inconclusive" in lines and "  regression: 1 gate inconclusive" in lines
    assert lines.index("  association: 1 gate inconclusive") < lines.index(
        "  disclosure: 5 gates inconclusive, closest to deciding first")


def test_rows_without_numbers_sort_last_by_test_id_and_other_verdicts_are_ignored():
    rows = [gate("z", ci=(None, None)), gate("b", ci=(None, None)), gate("m", ci=(0.1, 0.4)), gate("p", verdict="pass")]
    [group] = group_inconclusive(rows)
    assert [r["test_id"] for r in group.shown] == ["m", "b", "z"] and group.total == 3


def test_the_banner_does_not_depend_on_the_rows_order():
    rows = [*FIVE, gate("a1", family="association"), gate("a2", family="association"), gate("tie", ci=(0.3 - 0.17, 0.33))]
    texts = {verdict_banner(list(p)).text() for p in itertools.islice(itertools.permutations(rows), 0, None, 211)}
    assert len(texts) == 1


def test_a_regression_row_is_its_own_family():
    assert family_of(regression("x", (0.0, 0.1))) == "regression"
    assert family_of({"test_id": "regression-x-GLD", "family": "disclosure"}) == "regression"
    assert family_of({"test_id": "x", "family": "genderpair"}) == "genderpair"
    assert family_of({"test_id": "x"}) == "other"


def test_report_html_groups_the_banner_and_its_table_keeps_every_row():
    rows = [*FIVE, gate("f1", ci=(0.4, 0.6), verdict="fail")]
    page = render_html(rows, {"model": "m", "complete": True}, generated="fixed")
    start = page.index('id="verdict"')
    banner = page[start:page.index("</section>", start)]
    assert len(re.findall(r'class="item-inconclusive"', banner)) == 3 and 'class="item-fail"' in banner
    assert 'and 2 more inconclusive in disclosure (see the <a href="#show-inconclusive">results table</a>)' in banner
    assert "<code>d4</code>" not in banner
    results = page[page.index('<section id="results">'):page.index('<section id="how">')]
    assert len(re.findall(r'<td class="c-test"', results)) == 6
    assert all(f"<code>{r['test_id']}</code>" in results for r in rows)


def test_markdown_summary_groups_the_banner_and_keeps_every_row_in_its_table(tmp_path):
    from bias_core.pytest_plugin.regression_options import RegressionOptions
    from bias_core.pytest_plugin.regression_summary import write_run_summary

    class Settings:
        strict, model_value = False, "m"

    rows = [*FIVE, gate("f1", ci=(0.4, 0.6), verdict="fail")]
    write_run_summary(rows, RegressionOptions(summary_md=tmp_path / "summary.md"), Settings(), 1, attempt=None)
    text = (tmp_path / "summary.md").read_text()
    banner = text[:text.index("### Absolute gates")]
    assert banner.count("**INCONCLUSIVE**") == 3 and "- **FAIL** `f1`: " in banner
    assert "- disclosure: 5 gates inconclusive, closest to deciding first\n  - **INCONCLUSIVE** `d1`: " in banner
    assert "  - and 2 more inconclusive in disclosure (see the results table)" in banner
    table = text[text.index("### Absolute gates"):]
    assert all(f"| {r['test_id']} |" in table for r in rows)
