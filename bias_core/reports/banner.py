"""The verdict banner: one answer to "may this model ship?", as plain text.

A pure function of the result rows, the run's strictness and whether the run finished, shared by
the HTML report, the terminal summary and any other summary (Markdown): no HTML here.

The answer:

- **BLOCKED** when a gate failed, a test errored, or (with ``--strict-gates``) a gate is
  inconclusive: the headline counts what blocks ("BLOCKED: 2 gates failed").
- **NOT DECIDED** when nothing blocks but the run cannot be called a pass: the run did not finish
  (INCOMPLETE RUN), a gate is inconclusive without ``--strict-gates`` (pytest then exits 0, but
  the evidence did not decide), or no gate was evaluated at all.
- **PASSED** when every evaluated gate passed in a finished run.

An unfinished run says "INCOMPLETE RUN" in every case: tests that did not run may have failed.
Below the headline, one line per failed, errored and inconclusive test, and per regression test
that passed although its candidate is significantly worse than the baseline (inside the margin:
"within margin, but worse"; the headline counts them without blocking); every regression row's
n of pairs (and the items it left out) in a note; an inconclusive line
says what would decide it: how far the CI must move and about how many times the items that
takes if the value holds and the CI narrows as 1/sqrt(n) (an estimate, not a promise).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bias_core.reports.fmt import change_text, ci_text, gate_text, num, pairs_of, passing_range, sig, worse_note
from bias_core.storage.result_cache import rejected_note
from bias_core.storage.visible import visible

BLOCKED = "BLOCKED"
PASSED = "PASSED"
NOT_DECIDED = "NOT DECIDED"
INCOMPLETE = "INCOMPLETE RUN"
_TALLY = (("pass", "passed"), ("fail", "failed"), ("inconclusive", "inconclusive"), ("error", "errored"),
          ("skipped", "skipped"))


@dataclass(frozen=True)
class BannerItem:
    """One failed, errored or inconclusive test: its verdict, id and a one-line explanation."""

    verdict: str
    test_id: str
    detail: str

    def text(self) -> str:
        return f"{self.verdict.upper()} {self.test_id}: {self.detail}"


@dataclass(frozen=True)
class Banner:
    status: str                       # BLOCKED, PASSED or NOT DECIDED
    headline: str                     # e.g. "BLOCKED: 2 gates failed"
    items: tuple[BannerItem, ...]     # failed, errored, then inconclusive tests
    notes: tuple[str, ...]            # strictness, incomplete run, counts
    counts: Mapping[str, int]
    strict: bool
    complete: bool

    @property
    def lines(self) -> list[str]:
        """The banner as text lines: headline, one line per item, then the notes; controls in a
        row's text (an error quoting a generation) written as escapes, so none reaches a terminal."""
        return [visible(line) for line in (self.headline, *(f"  {i.text()}" for i in self.items), *self.notes)]

    def text(self) -> str:
        return "\n".join(self.lines)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _value_line(row: Mapping[str, Any]) -> str:
    n = row.get("n")
    n_txt = f", n = {sig(n)}" if num(n) is not None else ""
    if row.get("kind") == "regression":
        return _regression_line(row) + f", n = {pairs_of(row)}"
    return f"{sig(row.get('value'))}, 95% CI {ci_text(row)}, limit {gate_text(row)}{n_txt}"


def _regression_line(row: Mapping[str, Any]) -> str:
    """A candidate-vs-baseline row: the change, the harm's CI against the margin it was judged by."""
    ideal = row.get("ideal") if row.get("better") == "ideal" else None
    change = change_text(str(row.get("metric") or ""), row.get("baseline_value"), row.get("candidate_value"), ideal)
    rule = str(row.get("margin_rule") or "")
    rule = f" ({rule})" if "%" in rule else ""
    lo, hi = sig(row.get("harm_ci_low")), sig(row.get("harm_ci_high"))
    p = f", p_{row.get('adjustment') or 'adjusted'} = {sig(row.get('p_adjusted'), 2)}" if num(row.get("p_adjusted")) is not None else ""
    return f"{change}; harm {sig(row.get('harm'))}, 95% CI [{lo}, {hi}], margin {sig(row.get('margin'))}{rule}{p}"


def _factor(spread: float, room: float) -> float:
    """How many times the items shrink a CI half-width ``spread`` to ``room`` (1/sqrt(n))."""
    if room <= 0:
        return math.inf
    return max(1.0, (spread / room) ** 2)


def what_decides(row: Mapping[str, Any]) -> str:
    """For an inconclusive row: which CI bound must move where, and roughly how much more data
    that takes at the current value. Empty when the row has no numeric CI or gate."""
    rng = passing_range(row)
    v, lo, hi = num(row.get("value")), num(row.get("ci_low")), num(row.get("ci_high"))
    if rng is None or v is None or lo is None or hi is None:
        return ""
    a, b = rng
    if a <= v <= b:  # passes if the CI tightens around the value
        needs, factor = [], 1.0
        if hi > b:
            needs.append(f"ends at or below {sig(b)} (now {sig(hi)})")
            factor = max(factor, _factor(hi - v, b - v))
        if lo < a:
            needs.append(f"starts at or above {sig(a)} (now {sig(lo)})")
            factor = max(factor, _factor(v - lo, v - a))
        outcome = "passes once the CI " + " and ".join(needs)
    elif v > b:
        outcome = f"fails once the CI starts above {sig(b)} (now {sig(lo)})"
        factor = _factor(v - lo, v - b)
    else:
        outcome = f"fails once the CI ends below {sig(a)} (now {sig(hi)})"
        factor = _factor(hi - v, a - v)
    if math.isinf(factor):
        return f"{outcome}; the value sits on the limit, so more items alone cannot decide it"
    return f"{outcome}: about {sig(factor, 2)}× the items at this value{_where_more(row)}"


# Where more items would come from, by the row's stopping reason (bias_core.gating.adaptive_sampling): a reader
# should not be told to "add items" to a probe that has no more.
_MORE_ITEMS = {
    "fixed sample": " (a fixed item set: more items need more data, or --sample auto for a sampled probe)",
    "pool exhausted": " (every item of the data set was used)",
    "item cap": " (the item cap was reached: --sample-cap raises it)",
    "budget": " (the time budget ran out: --sample-budget raises it)",
}


def _where_more(row: Mapping[str, Any]) -> str:
    return _MORE_ITEMS.get(str(row.get("stop_reason") or ""), "")


def verdict_banner(rows: Iterable[Mapping[str, Any]], *, strict: bool = False, complete: bool = True,
                   partial_reason: str | None = None) -> Banner:
    """The banner for a run's result rows (see the module doc for the rules)."""
    rows = list(rows)
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(str(r.get("verdict") or "").lower(), []).append(r)
    fails, errors = by.get("fail", []), by.get("error", [])
    inconclusive, passes, skipped = by.get("inconclusive", []), by.get("pass", []), by.get("skipped", [])
    counts = {"fail": len(fails), "error": len(errors), "inconclusive": len(inconclusive),
              "pass": len(passes), "skipped": len(skipped), "total": len(rows)}

    blocking = []
    if fails:
        blocking.append(_plural(len(fails), "gate failed", "gates failed"))
    if errors:
        blocking.append(_plural(len(errors), "test errored", "tests errored"))
    if strict and inconclusive:
        blocking.append(_plural(len(inconclusive), "gate inconclusive", "gates inconclusive") + " (--strict-gates)")
    if blocking:
        status, headline = BLOCKED, f"{BLOCKED}: " + ", ".join(blocking)
        if not complete:
            headline += f" ({INCOMPLETE})"
    elif not complete:
        status, headline = NOT_DECIDED, f"{NOT_DECIDED}: {INCOMPLETE}"
    elif inconclusive:
        status = NOT_DECIDED
        headline = f"{NOT_DECIDED}: " + _plural(len(inconclusive), "gate inconclusive", "gates inconclusive")
    elif not passes:
        status, headline = NOT_DECIDED, f"{NOT_DECIDED}: no gate was evaluated"
    else:
        status, headline = PASSED, f"{PASSED}: " + ("the gate passed" if len(passes) == 1 else f"all {len(passes)} gates passed")

    items = [BannerItem("fail", str(r.get("test_id") or r.get("nodeid") or "?"), _value_line(r)) for r in fails]
    items += [BannerItem("error", str(r.get("test_id") or r.get("nodeid") or "?"),
                         visible(str(r.get("reason") or "the test raised an error")).strip().splitlines()[-1][:200])
              for r in errors]
    for r in inconclusive:
        decide = what_decides(r) or worse_note(r)
        items.append(BannerItem("inconclusive", str(r.get("test_id") or "?"),
                                _value_line(r) + (f"; {decide}" if decide else "")))
    # Passed regression gates whose candidate is nonetheless significantly worse: shown, not blocking.
    worse = [r for r in passes if worse_note(r)]
    items += [BannerItem("worse", str(r.get("test_id") or "?"),
                         f"{worse_note(r)}; margin {sig(r.get('margin'))}, n = {pairs_of(r)}") for r in worse]
    if worse:
        headline += f" ({_plural(len(worse), 'gate passed within its margin', 'gates passed within their margins')} " \
                    "but significantly worse than the baseline)"

    notes = []
    if not complete:
        reason = f": {partial_reason}" if partial_reason else ": the run did not finish"
        notes.append(f"{INCOMPLETE}{reason}. Only {_plural(len(rows), 'test', 'tests')} reported; the rest may fail.")
    if strict:
        notes.append("Inconclusive gates block this run (--strict-gates).")
    else:
        notes.append("Inconclusive gates do not block this run; --strict-gates would make them block.")
    pairs = _pairs_note(rows)
    if pairs:
        notes.append(pairs)
    tally = [f"{counts[k]} {label}" for k, label in _TALLY if counts[k]]
    notes.append(f"Tests: {', '.join(tally) if tally else 'none'}.")
    return Banner(status, headline, tuple(items), tuple(notes), counts, bool(strict), bool(complete))


def _pairs_note(rows: list[Mapping[str, Any]]) -> str:
    """What every candidate-vs-baseline comparison stands on, grouped by its n of pairs."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.get("kind") == "regression" and num(r.get("n")) is not None:
            groups.setdefault(pairs_of(r), []).append(str(r.get("test_id") or "?").removeprefix("regression-"))
    if not groups:
        return ""
    shown = [f"{text}: {', '.join(ids) if len(ids) <= 4 else f'{len(ids)} comparisons'}" for text, ids in groups.items()]
    return "Candidate vs baseline, n per comparison: " + "; ".join(shown) + "."


def banner_for_run(rows: Iterable[Mapping[str, Any]], run_info: Mapping[str, Any] | None) -> Banner:
    """:func:`verdict_banner` with strictness and completeness read from results.json's run info
    (a run info without ``complete`` counts as finished)."""
    info = run_info or {}
    banner = verdict_banner(rows, strict=bool(info.get("strict", False)), complete=info.get("complete", True) is not False,
                            partial_reason=info.get("partial_reason") or None)
    cache = cache_note(info)
    return dataclasses.replace(banner, notes=(*banner.notes, cache)) if cache else banner


def cache_note(run_info: Mapping[str, Any]) -> str:
    """The warning about result-cache entries that did not prove their key and value and were
    recomputed (results.json's ``run.cache``), or ""."""
    cache = run_info.get("cache")
    if not isinstance(cache, Mapping):
        return ""
    rejected, old = num(cache.get("rejected")), num(cache.get("rejected_old_format"))
    return f"WARNING: {rejected_note(int(rejected), int(old or 0))}" if rejected else ""
