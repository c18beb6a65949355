"""The verdict banner (plain text, shared by HTML, terminal and Markdown) and report number format."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.reports.banner import BLOCKED, NOT_DECIDED, PASSED, banner_for_run, verdict_banner, what_decides
from bias_core.reports.fmt import gate_text, sig


def row(test_id, verdict, value=0.2, ci=(0.1, 0.3), limit=0.25, direction="max", ideal=None, n=100, **extra):
    return {"test_id": test_id, "verdict": verdict, "value": value, "ci_low": ci[0], "ci_high": ci[1], "limit": limit,
            "direction": direction, "ideal": ideal, "n": n, **extra}


FAILED = [row("a-GLD", "fail", 0.41234, (0.3512, 0.4733), 0.3), row("b-crows_stereo", "fail", 62.64, (61.1, 64.0), 10, ideal=50)]
PASSING = [row("c-GAS", "pass", 0.1, (0.05, 0.15), 0.35), row("d-ADD", "pass", 0.01, (0.0, 0.02), 0.1)]
INCONCLUSIVE = [row("e-ADD", "inconclusive", 0.045, (0.03, 0.06), 0.05, family="disclosure")]
SKIPPED = [row("f-BPR", "skipped", None, (None, None), None, reason="data missing")]


def test_failures_block_and_are_listed_one_line_each():
    b = verdict_banner(FAILED + PASSING + INCONCLUSIVE + SKIPPED)
    assert b.status == BLOCKED and b.headline == "BLOCKED: 2 gates failed"
    lines = b.lines
    assert lines[0] == "BLOCKED: 2 gates failed"
    assert lines[1] == "  FAIL a-GLD: 0.412, 95% CI [0.351, 0.473], limit ≤ 0.3, n = 100"
    assert lines[2] == "  FAIL b-crows_stereo: 62.6, 95% CI [61.1, 64], limit 50 ± 10, n = 100"
    assert lines[3] == "  disclosure: 1 gate inconclusive"  # inconclusive tests under their family
    assert lines[4].startswith("    INCONCLUSIVE e-ADD: 0.045, 95% CI [0.03, 0.06], limit ≤ 0.05")
    assert "Inconclusive gates do not block this run; --strict-gates would make them block." in lines
    assert lines[-1] == "Tests: 2 passed, 2 failed, 1 inconclusive, 1 skipped."
    assert "<" not in b.text()  # plain text, reusable outside HTML


def test_inconclusive_alone_is_not_decided_unless_strict():
    loose = verdict_banner(PASSING + INCONCLUSIVE)
    assert loose.status == NOT_DECIDED and loose.headline == "NOT DECIDED: 1 gate inconclusive"
    strict = verdict_banner(PASSING + INCONCLUSIVE, strict=True)
    assert strict.status == BLOCKED and strict.headline == "BLOCKED: 1 gate inconclusive (--strict-gates)"
    assert "Inconclusive gates block this run (--strict-gates)." in strict.notes


def test_passed_only_when_every_evaluated_gate_passed():
    assert verdict_banner(PASSING + SKIPPED).headline == "PASSED: all 2 gates passed"
    assert verdict_banner(PASSING[:1]).headline == "PASSED: the gate passed"
    assert verdict_banner(SKIPPED).headline == "NOT DECIDED: no gate was evaluated"
    assert verdict_banner([]).headline == "NOT DECIDED: no gate was evaluated"


def test_errors_block():
    err = row("g-GAS", "error", None, (None, None), None, reason="Traceback ...\nRuntimeError: out of memory")
    b = verdict_banner(PASSING + [err])
    assert b.headline == "BLOCKED: 1 test errored"
    assert b.items[0].text() == "ERROR g-GAS: RuntimeError: out of memory"


def test_incomplete_run_never_passes_and_says_why():
    b = banner_for_run(PASSING, {"complete": False, "partial_reason": "interrupted (SIGINT) after 2 tests"})
    assert b.status == NOT_DECIDED and b.headline == "NOT DECIDED: INCOMPLETE RUN"
    assert b.notes[0] == ("INCOMPLETE RUN: interrupted (SIGINT) after 2 tests. Only 2 tests reported; "
                          "the rest may fail.")
    blocked = banner_for_run(FAILED, {"complete": False, "strict": True})
    assert blocked.headline == "BLOCKED: 2 gates failed (INCOMPLETE RUN)"
    assert "the run did not finish" in blocked.notes[0] and blocked.strict
    assert banner_for_run(PASSING, {}).status == PASSED  # no "complete" key: a finished run


@pytest.mark.parametrize(("r", "expected"), [
    # pass side: upper half-width 0.06 - 0.045 = 0.015 must shrink to 0.05 - 0.045 = 0.005: (3)^2 = 9x
    (row("x", "inconclusive", 0.045, (0.03, 0.06), 0.05), "passes once the CI ends at or below 0.05 (now 0.06): about 9× "),
    # fail side: lower half-width 0.1 must shrink to 0.3 - 0.25 = 0.05: 4x
    (row("x", "inconclusive", 0.3, (0.2, 0.4), 0.25), "fails once the CI starts above 0.25 (now 0.2): about 4× "),
    # min gate below its limit: upper half-width 0.1 -> room 0.05: 4x
    (row("x", "inconclusive", 0.7, (0.6, 0.8), 0.75, direction="min"), "fails once the CI ends below 0.75 (now 0.8): about 4× "),
    # two-sided 50 ± 10: the upper side binds, 17 -> 5: 11.56x, shown to 2 significant figures
    (row("x", "inconclusive", 55, (38, 72), 10, ideal=50),
     "passes once the CI ends at or below 60 (now 72) and starts at or above 40 (now 38): about 12× "),
])
def test_what_decides_an_inconclusive_test(r, expected):
    assert what_decides(r).startswith(expected)


def test_a_value_on_the_limit_cannot_be_decided_by_more_items():
    assert "more items alone cannot decide it" in what_decides(row("x", "inconclusive", 0.25, (0.2, 0.3), 0.25))
    assert what_decides(row("x", "inconclusive", None, (None, None), 0.25)) == ""


def test_an_interval_as_wide_as_the_scale_gives_no_item_estimate():
    # value 0.08 under a limit of 0.10 with the CI [-1, 1]: (0.92 / 0.02)^2 = 2116x would be meaningless
    text = what_decides(row("x", "inconclusive", 0.08, (-1.0, 1.0), 0.10))
    assert "more than 100× the items" in text and "2116" not in text
    assert "about 4× the items" in what_decides(row("x", "inconclusive", 0.04, (0.0, 0.08), 0.06))


VERDICT = st.sampled_from(["pass", "fail", "inconclusive", "skipped", "error"])


@settings(max_examples=200, deadline=None)
@given(st.lists(VERDICT, max_size=12), st.booleans(), st.booleans())
def test_status_follows_the_rules(verdicts, strict, complete):
    rows = [row(f"t{i}", v) for i, v in enumerate(verdicts)]
    b = verdict_banner(rows, strict=strict, complete=complete)
    blocking = any(v in ("fail", "error") for v in verdicts) or (strict and "inconclusive" in verdicts)
    assert (b.status == BLOCKED) == blocking
    assert (b.status == PASSED) == (not blocking and complete and "pass" in verdicts and "inconclusive" not in verdicts)
    assert b.headline.startswith(b.status)
    assert ("INCOMPLETE RUN" in b.headline) == (not complete)
    # every failure and error listed; the inconclusive ones (one family here) at most 3, the rest counted
    n_inc = verdicts.count("inconclusive")
    listed = sorted((v for v in verdicts if v in ("fail", "error")), key=["fail", "error"].index)
    assert [i.verdict for i in b.items] == listed + ["inconclusive"] * min(n_inc, 3)
    assert sum(g.total for g in b.groups) == n_inc == b.counts["inconclusive"]
    assert (f"    and {n_inc - 3} more inconclusive in other (see the results table)" in b.lines) == (n_inc > 3)


@pytest.mark.parametrize(("v", "text"), [
    (0.91234, "0.912"), (62.64, "62.6"), (2610, "2610"), (12345.6, "12346"), (0.000123, "0.000123"),
    (3.2e-07, "3.2e-7"), (-0.5, "-0.5"), (0, "0"), (None, "—"), (float("nan"), "—"), (float("inf"), "∞"), ("x", "—"),
])
def test_three_significant_figures(v, text):
    assert sig(v) == text


def test_gate_text():
    assert gate_text({"limit": 0.3, "direction": "max"}) == "≤ 0.3"
    assert gate_text({"limit": 0.75, "direction": "min"}) == "≥ 0.75"
    assert gate_text({"limit": 0.8, "direction": "max", "ideal": 0}) == "|x| ≤ 0.8"
    assert gate_text({"limit": 10, "direction": "max", "ideal": 50}) == "50 ± 10"
    assert gate_text({}) == "—"


@pytest.mark.parametrize(("reason", "says"), [
    ("fixed sample", "a fixed item set"),
    ("pool exhausted", "every item of the data set was used"),
    ("item cap", "--sample-cap raises it"),
    ("budget", "--sample-budget raises it"),
    ("decided", None),
])
def test_the_hint_says_where_more_items_would_come_from(reason, says):
    text = what_decides({**row("x", "inconclusive", 0.045, (0.03, 0.06), 0.05), "stop_reason": reason})
    assert text.startswith("passes once the CI ends at or below 0.05")
    if says is None:
        assert text.endswith("the items at this value")
    else:
        assert text.endswith(")") and says in text.rsplit("(", 1)[1]
