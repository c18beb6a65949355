"""The non-inferiority gate: is the candidate worse than the baseline by more than a margin?

``harm`` (``stats/paired.py``) is how much worse the candidate is, in the metric's own units, with
"worse" following the metric's direction or ideal. With its CI [lo, hi] and the metric's margin
m >= 0, the verdicts mirror the absolute gates:

    pass          hi <= m   the whole CI lies within the margin
    fail          lo >  m   the whole CI lies beyond it
    inconclusive  otherwise

Margins come from thresholds.toml, one table per metric::

    [regression.GLD]
    margin = 0.03                 # largest tolerated worsening, in the metric's units
    note = "where the number comes from"

    [regression.ADD]
    margin_rel = 0.25             # a quarter of the baseline's level (per probe) ...
    margin = 0.002                # ... but never below this floor (optional with margin_rel)

The baseline's level is its value, or its distance from the ideal for a metric gated by one
(stereo_score 58 -> 8): a relative margin tolerates the same share of each probe's bias, however
large that bias is. A margin as large as the worst possible worsening, or a relative one that
tolerates losing everything, can never fail and is refused. ``docs/release-gate-margins.md``
says how to choose them.

``regression_margins`` validates such a table (as parsed by tomllib) and reports every problem
with its key and a fix, in the same wording as ``bias_core.gating.thresholds``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from bias_core.catalogue import BY_NAME as CATALOGUE
from bias_core.errors import ThresholdsError
from bias_core.gating.regression.margin import Margin
from bias_core.gating.regression.spec import NOT_PAIRED, PAIRED
from bias_core.gating.verdicts import FAIL, INCONCLUSIVE, PASS
from bias_core.stats.paired import PairedComparison

_KEYS = ("margin", "margin_rel", "note")


def baseline_level(comparison: PairedComparison) -> float:
    """What a relative margin is a share of: the baseline's distance from the ideal where the
    metric has one, else its value."""
    if comparison.direction == "ideal" and comparison.ideal is not None:
        return abs(comparison.baseline_value - comparison.ideal)
    return abs(comparison.baseline_value)


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
    m = margin.for_baseline(baseline_level(comparison))
    verdict = noninferiority_verdict(*comparison.harm_ci, m)
    return dataclasses.replace(comparison, margin=m, margin_rule=margin.rule(), verdict=verdict)


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


#: ``[regression.external."<task>"."<metric>"]``: other tools' metrics (``gating/external_logs``).
EXTERNAL = "external"


class RegressionMargins(dict):
    """metric -> Margin of the project's metrics, and ``external``: the parsed
    ``[regression.external]`` tables of other tools' metrics (``ExternalThresholds``)."""

    external: Any = None


def regression_margins(table: Any, known_metrics: Iterable[str] | None = None,
                       ) -> tuple[RegressionMargins, list[tuple[str, str, str]]]:
    """Margins from the ``regression`` table of a parsed thresholds file.

    Returns (metric -> Margin, problems); each problem is (key, what is wrong, fix), for
    ``bias_core.gating.thresholds``' collector. A metric must be known (``known_metrics``; default: any
    metric in the pairing table) and pairable; ``margin`` and/or ``margin_rel`` finite numbers
    >= 0 (not strings, not booleans) that some worsening can exceed (``_can_fail``); ``note`` a
    string; no other keys. ``[regression.external]`` is handed to
    ``external_logs.thresholds.external_problems`` (its problems join these) and kept, parsed, as
    the margins' ``external`` (always set: an empty table when the file has none).
    """
    from bias_core.gating.external_logs.thresholds import ExternalThresholds, external_problems

    problems: list[tuple[str, str, str]] = []
    margins = RegressionMargins()
    margins.external = ExternalThresholds()
    if not isinstance(table, Mapping):
        problems.append(("regression", f"must be a table, got {_kind(table)}",
                         'write tables like [regression.GLD] with margin = 0.03 and note = "..."'))
        return margins, problems
    known = set(PAIRED) if known_metrics is None else set(known_metrics)
    for metric, value in table.items():
        key = f"regression.{metric}"
        if metric == EXTERNAL and metric not in known:
            margins.external, found = external_problems(value)
            problems += found
            continue
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
                                 "a regression table allows only: margin, margin_rel, note"))
                ok = False
        raw, rel = value.get("margin"), value.get("margin_rel")
        if raw is None and rel is None:
            problems.append((key, "no margin", f"add margin = <largest tolerated worsening of {metric}> or "
                             "margin_rel = <share of the baseline's level> (docs/release-gate-margins.md)"))
            ok = False
        for name, number in (("margin", raw), ("margin_rel", rel)):
            if number is not None and not _check_number(problems, f"{key}.{name}", name, number):
                ok = False
        if ok:
            ok = _can_fail(problems, key, metric, raw, rel)
        note = value.get("note", "")
        if not isinstance(note, str):
            problems.append((f"{key}.note", f"must be a string, got {_kind(note)}",
                             'quote it: note = "where this margin comes from"'))
            ok = False
        if ok:
            margins[metric] = Margin(metric, float(raw or 0.0), note, key, None if rel is None else float(rel))
    return margins, problems


def _check_number(problems: list[tuple[str, str, str]], key: str, name: str, raw: Any) -> bool:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        example = "0.25" if name == "margin_rel" else "0.05"
        fix = f"remove the quotes: {name} = {raw}" if isinstance(raw, str) and _number(raw) else f"write {name} = {example}"
        problems.append((key, f"must be a number, got {_kind(raw)}", fix))
        return False
    if not math.isfinite(raw) or raw < 0:
        problems.append((key, f"must be a finite number >= 0, got {raw!r}",
                         "a margin is the largest tolerated worsening, so 0 or more (0: no worsening at all)"))
        return False
    return True


def largest_worsening(metric: str) -> float | None:
    """The most a candidate can be worse than any baseline on ``metric`` (None: unbounded): the
    width of its values, or for an ideal metric the farthest value from the ideal."""
    spec = CATALOGUE.get(metric)
    if spec is None or None in spec.value_range:
        return None
    lo, hi = spec.value_range
    if spec.better == "ideal":
        return max(spec.ideal - lo, hi - spec.ideal)
    return hi - lo


def _can_fail(problems: list[tuple[str, str, str]], key: str, metric: str, raw: Any, rel: Any) -> bool:
    """A margin no worsening can exceed switches the gate off: refuse it."""
    reach = largest_worsening(metric)
    spec = CATALOGUE.get(metric)
    docs = "docs/release-gate-margins.md"
    if raw is not None and reach is not None and raw >= reach:
        what = "floor" if rel is not None else "margin"
        problems.append((f"{key}.margin", f"margin = {raw:g} is at or above the largest possible worsening of {metric} "
                         f"({reach:g}; it lies in [{spec.value_range[0]:g}, {spec.value_range[1]:g}]): no candidate "
                         f"can fail, so the regression gate is switched off",
                         f"use a {what} well below a typical model's {metric} (see {docs}), e.g. margin = {reach / 20:.3g}"
                         f", or margin_rel = 0.25 for a quarter of the baseline's level"))
        return False
    lo = spec.value_range[0] if spec is not None else None
    if rel is not None and spec is not None and spec.better == "higher" and lo is not None and lo >= 0 and rel >= 1:
        problems.append((f"{key}.margin_rel", f"margin_rel = {rel:g} tolerates losing all of the baseline's {metric} "
                         "(higher is better, and it cannot fall below 0): no candidate can fail",
                         f"use a share below 1, e.g. margin_rel = 0.1 (see {docs})"))
        return False
    return True


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def parse_regression_margins(table: Any, known_metrics: Iterable[str] | None = None,
                             path: str = "thresholds.toml") -> RegressionMargins:
    """``regression_margins`` that raises ``ThresholdsError`` listing every problem."""
    margins, problems = regression_margins(table, known_metrics)
    if problems:
        lines = [f"{path}: {k}: {what}. Fix: {fix}" for k, what, fix in problems]
        raise ThresholdsError(lines[0] if len(lines) == 1 else f"{path}: {len(lines)} problems:\n"
                              + "\n".join(f"  - {ln}" for ln in lines))
    return margins
