"""The verdict banner: one answer to "may this model ship?", as plain text.

A pure function of the result rows, the run's strictness and whether the run finished, shared by
the HTML report, the terminal summary and the Markdown summary: no HTML here (``Banner.lines`` is
the text, ``Banner.markdown`` the Markdown; ``bias_core.reports.html`` renders the same parts).

The answer:

- **BLOCKED** when a gate failed, a test errored, or (with ``--strict-gates``) a gate is
  inconclusive: the headline counts what blocks ("BLOCKED: 2 gates failed").
- **NOT DECIDED** when nothing blocks but the run cannot be called a pass: the run did not finish
  (INCOMPLETE RUN), a gate is inconclusive without ``--strict-gates`` (pytest then exits 0, but
  the evidence did not decide), or no gate was evaluated at all.
- **PASSED** when every evaluated gate passed in a finished run.

An unfinished run says "INCOMPLETE RUN" in every case: tests that did not run may have failed.
Below the headline, one line per failed and errored test; then the inconclusive tests by family
(``banner_groups``: at most 3 per family, closest to deciding first, then "and N more
inconclusive in <family> (see the results table)"); then one line per regression test that
passed although its candidate is significantly worse than the baseline (inside the margin:
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

from bias_core.reports.banner_groups import group_inconclusive
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
    """One failed, errored, inconclusive or "worse" test: its verdict, id and a one-line explanation."""

    verdict: str
    test_id: str
    detail: str

    def text(self) -> str:
        return f"{self.verdict.upper()} {self.test_id}: {self.detail}"


@dataclass(frozen=True)
class BannerGroup:
    """One family's inconclusive tests as the banner lists them: at most 3, closest to deciding
    first (``banner_groups``), and how many the results table lists besides."""

    family: str
    items: tuple[BannerItem, ...]
    total: int

    @property
    def hidden(self) -> int:
        return self.total - len(self.items)

    def heading(self) -> str:
        order = ", closest to deciding first" if len(self.items) > 1 else ""
        return f"{self.family}: {_plural(self.total, 'gate', 'gates')} inconclusive{order}"

    def more(self) -> str:
        """"and 2 more inconclusive in disclosure (see the results table)", or "" when none is left out."""
        return f"and {self.hidden} more inconclusive in {self.family} (see the results table)" if self.hidden else ""


@dataclass(frozen=True)
class Banner:
    status: str                       # BLOCKED, PASSED or NOT DECIDED
    headline: str                     # e.g. "BLOCKED: 2 gates failed"
    blocking: tuple[BannerItem, ...]  # every failed, then every errored test
    groups: tuple[BannerGroup, ...]   # the inconclusive tests by family
    worse: tuple[BannerItem, ...]     # passed within the margin, but significantly worse
    notes: tuple[str, ...]            # strictness, incomplete run, counts
    counts: Mapping[str, int]
    strict: bool
    complete: bool

    @property
    def items(self) -> tuple[BannerItem, ...]:
        """Every test line the banner shows, in its order (inconclusive ones left out of it are not here)."""
        return (*self.blocking, *(i for g in self.groups for i in g.items), *self.worse)

    def _parts(self) -> list[tuple[int, str, BannerItem | None]]:
        # (indent level, text, item or None): the one layout the text and the Markdown share
        out: list[tuple[int, str, BannerItem | None]] = [(1, i.text(), i) for i in self.blocking]
        for g in self.groups:
            out += [(1, g.heading(), None), *((2, i.text(), i) for i in g.items)]
            out += [(2, g.more(), None)] if g.hidden else []
        return out + [(1, i.text(), i) for i in self.worse]

    @property
    def lines(self) -> list[str]:
        """The banner as text lines: headline, the test lines (inconclusive ones indented under
        their family), then the notes; controls in a row's text (an error quoting a generation)
        written as escapes, so none reaches a terminal."""
        body = ["  " * level + text for level, text, _ in self._parts()]
        return [visible(line) for line in (self.headline, *body, *self.notes)]

    def text(self) -> str:
        return "\n".join(self.lines)

    def markdown(self) -> str:
        """The headline in bold and the test lines as a nested list (for --summary-md); the
        notes are left to the summary's own counts. Markdown's characters in a row's text are
        escaped, so a test id or an error message renders as written."""
        parts = self._parts()
        out = [f"**{_md(self.headline)}**", *([""] if parts else [])]
        for level, text, item in parts:
            # the test id as code, as the summary's own lists show it
            code = item.test_id.replace("`", "'") if item else ""
            line = f"**{item.verdict.upper()}** `{code}`: {_md(item.detail)}" if item else _md(text)
            out.append("  " * (level - 1) + "- " + line)
        return visible("\n".join(out))


# what could start emphasis, code, a link or HTML in a row's text (an error may quote a generation)
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>"})


def _md(text: str) -> str:
    return str(text).replace("\n", " ").translate(_MD_SPECIAL)


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


# Beyond this the 1/sqrt(n) estimate extrapolates from an interval as wide as the scale (a few
# items, or a sequence's first looks): a "2383×" would be a number with no meaning.
MAX_FACTOR = 100


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
    if factor > MAX_FACTOR:
        return (f"{outcome}: more than {MAX_FACTOR}× the items at this value (an interval this wide says "
                f"too little to estimate how many){_where_more(row)}")
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

    blocks = []
    if fails:
        blocks.append(_plural(len(fails), "gate failed", "gates failed"))
    if errors:
        blocks.append(_plural(len(errors), "test errored", "tests errored"))
    if strict and inconclusive:
        blocks.append(_plural(len(inconclusive), "gate inconclusive", "gates inconclusive") + " (--strict-gates)")
    if blocks:
        status, headline = BLOCKED, f"{BLOCKED}: " + ", ".join(blocks)
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

    blocking = [BannerItem("fail", str(r.get("test_id") or r.get("nodeid") or "?"), _value_line(r)) for r in fails]
    blocking += [BannerItem("error", str(r.get("test_id") or r.get("nodeid") or "?"),
                            visible(str(r.get("reason") or "the test raised an error")).strip().splitlines()[-1][:200])
                 for r in errors]
    groups = tuple(BannerGroup(g.family, tuple(_inconclusive_item(r) for r in g.shown), g.total)
                   for g in group_inconclusive(inconclusive))
    # Passed regression gates whose candidate is nonetheless significantly worse: shown, not blocking.
    worse = [r for r in passes if worse_note(r)]
    worse_items = tuple(BannerItem("worse", str(r.get("test_id") or "?"),
                                   f"{worse_note(r)}; margin {sig(r.get('margin'))}, n = {pairs_of(r)}") for r in worse)
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
    return Banner(status, headline, tuple(blocking), groups, worse_items, tuple(notes), counts, bool(strict),
                  bool(complete))


def _inconclusive_item(row: Mapping[str, Any]) -> BannerItem:
    decide = what_decides(row) or worse_note(row)
    return BannerItem("inconclusive", str(row.get("test_id") or "?"), _value_line(row) + (f"; {decide}" if decide else ""))


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
