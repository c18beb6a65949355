"""Which inconclusive gates the verdict banner lists: grouped by family, closest to deciding first.

The default audit leaves about 20 gates inconclusive; listed one by one above the run's header
they bury the failures. So the banner (terminal, report.html, Markdown summary: all three read
:func:`group_inconclusive` through ``bias_core.reports.banner``) lists every failure, then per
family at most :data:`PER_FAMILY` inconclusive gates, those nearest a verdict first, and counts
the rest. The results tables still list every row. Pure functions of result rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bias_core.reports.fmt import num, passing_range

#: Inconclusive gates the banner lists per family; the rest are counted.
PER_FAMILY = 3
#: The group of candidate-vs-baseline rows, whatever family their probe belongs to.
REGRESSION = "regression"


@dataclass(frozen=True)
class InconclusiveGroup:
    """One family's inconclusive rows: those the banner shows (closest to deciding first) and the total."""

    family: str
    shown: tuple[Mapping[str, Any], ...]
    total: int

    @property
    def hidden(self) -> int:
        return self.total - len(self.shown)


def family_of(row: Mapping[str, Any]) -> str:
    """The row's group: "regression" for a candidate-vs-baseline row (judged against a margin, not
    a limit, so its distance does not compare with an absolute gate's, and listed in its own
    table), else the row's ``family``, else "other"."""
    if row.get("kind") == REGRESSION or str(row.get("test_id") or "").startswith(f"{REGRESSION}-"):
        return REGRESSION
    return str(row.get("family") or "") or "other"


def decision_distance(row: Mapping[str, Any]) -> float | None:
    """How far an inconclusive row is from a verdict, smaller is closer; None without the numbers.

    An absolute gate is decided once its CI [lo, hi] lies wholly inside its passing range [a, b]
    (pass) or wholly beyond one end of it (fail). The distance is the least total amount the CI's
    ends must move for either, ``min((hi - b)+ + (a - lo)+, (b - lo)+, (hi - a)+)``, divided by
    the CI width ``hi - lo``: for a one-sided limit t inside the CI that is
    ``min(hi - t, t - lo) / (hi - lo)``, 0 when the CI barely crosses the limit and 0.5 when the
    limit sits at its centre. Relative to the width, it compares metrics on different scales.

    A regression row is decided once its harm CI lies wholly within its margin m (pass) or beyond
    it: ``min(hi - m, m - lo)+ / m``, relative to the margin it is judged by (0 for a CI wholly
    beyond the margin that only the adjusted p-value leaves inconclusive). A zero CI width or
    margin gives no yardstick: None, like missing numbers.
    """
    if row.get("kind") == REGRESSION:
        lo, hi, m = num(row.get("harm_ci_low")), num(row.get("harm_ci_high")), num(row.get("margin"))
        if m is None or not m > 0:
            return None
        rng, scale = (-math.inf, m), m
    else:
        lo, hi, rng = num(row.get("ci_low")), num(row.get("ci_high")), passing_range(row)
        scale = None if lo is None or hi is None else hi - lo
    if rng is None or lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or not scale or scale < 0:
        return None
    a, b = rng
    to_pass = max(0.0, hi - b) + max(0.0, a - lo)
    to_fail = min(max(0.0, b - lo), max(0.0, hi - a))  # an infinite end cannot be crossed: inf
    return min(to_pass, to_fail) / scale


def _closest_first(row: Mapping[str, Any]) -> tuple[bool, float, str, str]:
    d = decision_distance(row)
    # rows without numbers last, ties (and those) by test id: the same rows give the same banner
    return (d is None, 0.0 if d is None else d, str(row.get("test_id") or ""), str(row.get("nodeid") or ""))


def group_inconclusive(rows: Iterable[Mapping[str, Any]], per_family: int = PER_FAMILY) -> tuple[InconclusiveGroup, ...]:
    """The inconclusive rows by family (families in name order), each group's first ``per_family``
    closest to deciding (:func:`decision_distance`) and its total; other verdicts are ignored."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if str(r.get("verdict") or "").lower() == "inconclusive":
            by.setdefault(family_of(r), []).append(r)
    return tuple(InconclusiveGroup(f, tuple(sorted(rs, key=_closest_first)[:max(0, per_family)]), len(rs))
                 for f, rs in sorted(by.items()))
