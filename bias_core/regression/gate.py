"""The non-inferiority gate: is the candidate worse than the baseline by more than a margin?

``harm`` (``stats.py``) is how much worse the candidate is, in the metric's own units, with
"worse" following the metric's direction or ideal. With its CI [lo, hi] and the metric's margin
m >= 0, the verdicts mirror the absolute gates:

    pass          hi <= m   the whole CI lies within the margin
    fail          lo >  m   the whole CI lies beyond it
    inconclusive  otherwise

Margins come from thresholds.toml, one table per metric::

    [regression.GLD]
    margin = 0.03                 # largest tolerated worsening, in the metric's units
    note = "where the number comes from"

``regression_margins`` validates such a table (as parsed by tomllib) and reports every problem
with its key and a fix, in the same wording as ``bias_core.gates``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bias_core.errors import ThresholdsError
from bias_core.verdicts import FAIL, INCONCLUSIVE, PASS
from bias_core.regression.spec import NOT_PAIRED, PAIRED
from bias_core.regression.stats import PairedComparison

_KEYS = ("margin", "note")


@dataclass(frozen=True)
class Margin:
    metric: str
    margin: float
    note: str = ""
    source: str = ""

    def describe(self) -> str:
        return f"worsening of {self.metric} <= {self.margin:g} ({self.source})"


def noninferiority_verdict(harm_low: float, harm_high: float, margin: float) -> str:
    """``pass`` / ``fail`` / ``inconclusive`` of a harm CI against a margin (module doc)."""
    lo, hi, m = float(harm_low), float(harm_high), float(margin)
    if not (math.isfinite(m) and m >= 0):
        raise ValueError(f"noninferiority_verdict: the margin must be a finite number >= 0, got {margin!r}")
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"noninferiority_verdict: reversed interval [{lo!r}, {hi!r}]")
    if hi <= m:
        return PASS
    if lo > m:
        return FAIL
    return INCONCLUSIVE


def judge(comparison: PairedComparison, margin: Margin) -> PairedComparison:
    """The comparison with its margin and verdict filled in."""
    verdict = noninferiority_verdict(*comparison.harm_ci, margin.margin)
    return dataclasses.replace(comparison, margin=margin.margin, verdict=verdict)


# ----- thresholds.toml [regression.*] ---------------------------------------------------------------
def _did_you_mean(name: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return f"{type(value).__name__} {value!r}"


def regression_margins(table: Any, known_metrics: Iterable[str] | None = None,
                       ) -> tuple[dict[str, Margin], list[tuple[str, str, str]]]:
    """Margins from the ``regression`` table of a parsed thresholds file.

    Returns (metric -> Margin, problems); each problem is (key, what is wrong, fix), for
    ``bias_core.gates``' collector. A metric must be known (``known_metrics``; default: any
    metric in the pairing table) and pairable; ``margin`` a finite number >= 0 (not a string,
    not a boolean); ``note`` a string; no other keys.
    """
    problems: list[tuple[str, str, str]] = []
    margins: dict[str, Margin] = {}
    if not isinstance(table, Mapping):
        problems.append(("regression", f"must be a table, got {_kind(table)}",
                         'write tables like [regression.GLD] with margin = 0.03 and note = "..."'))
        return margins, problems
    known = set(PAIRED) if known_metrics is None else set(known_metrics)
    for metric, value in table.items():
        key = f"regression.{metric}"
        if metric not in known:
            problems.append((key, f"unknown metric {metric!r}{_did_you_mean(metric, known)}",
                             f"use one of the known metrics: {', '.join(sorted(known))}"))
            continue
        if metric not in PAIRED:
            why = NOT_PAIRED.get(metric, "it has no per-item paired form")
            problems.append((key, f"{metric} cannot be compared item by item ({why})",
                             f"remove [{key}]; pairable metrics: {', '.join(sorted(PAIRED))}"))
            continue
        if not isinstance(value, Mapping):
            problems.append((key, f"must be a table, got {_kind(value)}",
                             f'write [{key}] with margin = <number> and note = "..."'))
            continue
        ok = True
        for k in value:
            if k not in _KEYS:
                problems.append((f"{key}.{k}", f"unknown key {k!r}{_did_you_mean(k, _KEYS)}",
                                 "a regression table allows only: margin, note"))
                ok = False
        raw = value.get("margin")
        if raw is None:
            problems.append((key, "no margin", f"add margin = <largest tolerated worsening of {metric}>"))
            ok = False
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            fix = f"remove the quotes: margin = {raw}" if isinstance(raw, str) and _number(raw) else "write margin = 0.05"
            problems.append((f"{key}.margin", f"must be a number, got {_kind(raw)}", fix))
            ok = False
        elif not math.isfinite(raw) or raw < 0:
            problems.append((f"{key}.margin", f"must be a finite number >= 0, got {raw!r}",
                             "a margin is the largest tolerated worsening, so 0 or more (0: no worsening at all)"))
            ok = False
        note = value.get("note", "")
        if not isinstance(note, str):
            problems.append((f"{key}.note", f"must be a string, got {_kind(note)}",
                             'quote it: note = "where this margin comes from"'))
            ok = False
        if ok:
            margins[metric] = Margin(metric, float(raw), note, key)
    return margins, problems


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def parse_regression_margins(table: Any, known_metrics: Iterable[str] | None = None,
                             path: str = "thresholds.toml") -> dict[str, Margin]:
    """``regression_margins`` that raises ``ThresholdsError`` listing every problem."""
    margins, problems = regression_margins(table, known_metrics)
    if problems:
        lines = [f"{path}: {k}: {what}. Fix: {fix}" for k, what, fix in problems]
        raise ThresholdsError(lines[0] if len(lines) == 1 else f"{path}: {len(lines)} problems:\n"
                              + "\n".join(f"  - {ln}" for ln in lines))
    return margins
