"""Number and gate formatting shared by the verdict banner, the terminal summary and the HTML.

Reports show 3 significant figures; results.json keeps the raw values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def num(v: Any) -> float | None:
    """``v`` as a finite-or-infinite float, or None for missing, NaN and non-numbers."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def sig(v: Any, digits: int = 3) -> str:
    """``v`` to ``digits`` significant figures: 0.91234 -> 0.912, 62.64 -> 62.6, 2610 -> 2610,
    0.000123 -> 0.000123, 3.2e-07 -> 3.2e-7; "—" when missing."""
    f = num(v)
    if f is None:
        return "—"
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    if f == 0:
        return "0"
    if abs(f) >= 10 ** digits and abs(f) < 1e9:
        return str(int(round(f)))
    text = f"{f:.{digits}g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def ci_text(row: Mapping[str, Any]) -> str:
    lo, hi = num(row.get("ci_low")), num(row.get("ci_high"))
    if lo is None and hi is None:
        return "—"
    return f"[{sig(lo)}, {sig(hi)}]"


def gate_text(row: Mapping[str, Any]) -> str:
    """The threshold as a reader says it: "≤ 0.3", "≥ 0.75", "|x| ≤ 0.8" (ideal 0), "50 ± 10"."""
    limit = num(row.get("limit"))
    if limit is None:
        return "—"
    ideal = num(row.get("ideal"))
    if ideal is not None:
        return f"|x| ≤ {sig(limit)}" if ideal == 0 else f"{sig(ideal)} ± {sig(limit)}"
    return {"max": "≤ ", "min": "≥ "}.get(str(row.get("direction") or ""), "") + sig(limit)


def passing_range(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """The interval a value's whole CI must lie in to pass, or None without a numeric gate."""
    limit = num(row.get("limit"))
    if limit is None:
        return None
    ideal = num(row.get("ideal"))
    if ideal is not None:
        return ideal - limit, ideal + limit
    direction = row.get("direction")
    if direction == "max":
        return -math.inf, limit
    if direction == "min":
        return limit, math.inf
    return None


def change_text(metric: str, baseline: Any, candidate: Any, ideal: Any = None) -> str:
    """A regression row's change as a reader says it: "ADD +41% (0.013 → 0.0183)", or for a metric
    gated by its distance from an ideal "crows_stereo 56.9 → 59.2 (2.3 further from 50)"."""
    b, c, i = num(baseline), num(candidate), num(ideal)
    if b is None or c is None:
        return metric
    moved = f"{sig(b)} → {sig(c)}"
    if i is not None:
        further = abs(c - i) - abs(b - i)
        return f"{metric} {moved} ({sig(abs(further))} {'further from' if further >= 0 else 'closer to'} {sig(i)})"
    if b == 0:
        return f"{metric} {moved}"
    return f"{metric} {100 * (c - b) / abs(b):+.0f}% ({moved})"


def worse_note(row: Mapping[str, Any]) -> str:
    """"within margin, but worse: ADD +41% (0.013 → 0.0183), p = 0.0008" for a regression row whose
    candidate is significantly worse than its baseline without crossing the margin; else ""."""
    if not row.get("worse_within_margin"):
        return ""
    ideal = row.get("ideal") if row.get("better") == "ideal" else None
    change = change_text(str(row.get("metric") or ""), row.get("baseline_value"), row.get("candidate_value"), ideal)
    return f"within margin, but worse: {change}, p = {sig(row.get('p_adjusted'), 2)}"


def pairs_of(row: Mapping[str, Any]) -> str:
    """A regression row's n: "40 pairs", or "3 pairs of 40 items (37 without a value in the baseline)"
    (rows written before the sides were counted: "3 pairs of 40 items (37 unpaired)"); "—" without one."""
    from bias_core.gating.regression.pairing import pairs_text

    if row.get("pairs"):
        return str(row["pairs"])
    n = num(row.get("n"))
    if n is None:
        return "—"
    dropped = int(num(row.get("n_dropped")) or 0)
    return pairs_text(int(n), int(n) + dropped)
