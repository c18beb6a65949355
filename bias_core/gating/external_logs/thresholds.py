"""Directions and margins of other tools' metrics, beside the project's own regression margins::

    [regression.external."crows_pairs_english_gender".pct_stereotype]
    direction = "ideal"      # "higher" or "lower" is better, or "ideal": nearer `ideal` is better
    ideal = 0.5              # with direction = "ideal" only
    kind = "binary"          # 0/1 per sample ("binary"), else "bounded" or "unbounded"
    margin = 0.05            # largest tolerated worsening, in the metric's units
    margin_rel = 0.25        # instead, or as well: a share of the baseline's level (margin is its floor)
    note = "where the margin comes from"

    [regression.external."*".acc]   # every task's acc
    margin = 0.02

The task is lm-eval's task name or inspect's task; the metric lm-eval's metric name (any filter) or
inspect's "<scorer>/<metric>" ("choice/accuracy"). A table for the task wins over "*", which wins
over the defaults of ``defaults.py``; a table's keys override the default's one by one (a margin
given replaces both margin fields). Every problem is a ``ThresholdsError`` naming its key and fix,
as the rest of thresholds.toml's.

thresholds.toml is read once: the project's reader (``bias_core.gating.thresholds``) hands the
``regression.external`` table to ``external_problems`` (through ``regression_margins``), reports its
problems with the file's others, and keeps the parsed table as ``Thresholds.external``: what
``pytest audits --candidate-log ... --baseline-log ...`` gates with. ``gate_logs`` takes a file, a
parsed table or that object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from bias_core.errors import ThresholdsError
from bias_core.gating.external_logs.defaults import default_for
from bias_core.gating.regression.margin import Margin
from bias_core.gating.regression.spec import PairedSpec

KEYS = ("direction", "ideal", "kind", "margin", "margin_rel", "note")
DIRECTIONS = ("higher", "lower", "ideal")
KINDS = ("binary", "bounded", "unbounded")
ANY_TASK = "*"


@dataclass(frozen=True)
class ExternalGate:
    """How one task x metric is gated: its direction and kind, its margin, and where they come from."""

    task: str
    metric: str
    spec: PairedSpec
    margin: Margin
    source: str


def _quoted(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else '"' + name.replace('"', '\\"') + '"'


def table_key(task: str, metric: str) -> str:
    return f"regression.external.{_quoted(task)}.{_quoted(metric)}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


Problem = tuple[str, str, str]  # (key, what is wrong, fix), as thresholds.toml's other problems


def _problems(key: str, table: Any) -> list[Problem]:
    if not isinstance(table, Mapping):
        return [(key, f"must be a table, got {type(table).__name__}", f"write [{key}] with direction and margin")]
    out = [(f"{key}.{k}", "unknown key", f"a regression.external table allows only {', '.join(KEYS)}")
           for k in table if k not in KEYS]
    if "direction" in table and table["direction"] not in DIRECTIONS:
        out.append((f"{key}.direction", repr(table["direction"]), 'direction = "higher", "lower" or "ideal"'))
    if "kind" in table and table["kind"] not in KINDS:
        out.append((f"{key}.kind", repr(table["kind"]),
                    'kind = "binary" (0/1 per sample), "bounded" or "unbounded"'))
    if "ideal" in table and not _number(table["ideal"]):
        out.append((f"{key}.ideal", f"{table['ideal']!r} is not a number", "ideal = <the best value>, unquoted"))
    if "ideal" in table and table.get("direction", "ideal") != "ideal":
        out.append((f"{key}.ideal", f"given with direction = {table['direction']!r}",
                    'remove ideal, or direction = "ideal"'))
    for name in ("margin", "margin_rel"):
        if name in table and not (_number(table[name]) and table[name] >= 0):
            out.append((f"{key}.{name}", repr(table[name]), f"a finite number >= 0, unquoted ({name} = 0.05)"))
    if "note" in table and not isinstance(table["note"], str):
        out.append((f"{key}.note", "must be a string", 'note = "where the margin comes from"'))
    return out


def _line(problem: Problem) -> str:
    key, what, fix = problem
    return f"{key}: {what}. Fix: {fix}"


def _raise(path: str, problems: list[Problem]) -> None:
    lines = [_line(p) for p in problems]
    if lines:
        raise ThresholdsError(f"{path}: {lines[0]}" if len(lines) == 1 else
                              f"{path}: {len(lines)} problems:\n" + "\n".join(f"  - {ln}" for ln in lines))


@dataclass(frozen=True)
class ExternalThresholds:
    """The parsed ``[regression.external]`` tables: (task or "*", metric) -> its keys."""

    declared: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    path: str = "thresholds.toml"

    def gate(self, tool: str, task: str, metric: str) -> ExternalGate | None:
        """The gate of a row (declaration over "*" over default), or None when there is none."""
        decl_key = (task, metric) if (task, metric) in self.declared else (ANY_TASK, metric)
        decl = self.declared.get(decl_key)
        found = default_for(tool, metric)
        if decl is None and found is None:
            return None
        merged: dict[str, Any] = {}
        sources = []
        if found is not None:
            d, name = found
            merged = {"direction": d.direction, "kind": d.kind, "ideal": d.ideal, "margin": d.margin,
                      "margin_rel": d.margin_rel, "note": d.why}
            sources.append(f"default for {name} (bias_core/gating/external_logs/defaults.py)")
        if decl is not None:
            if "margin" in decl or "margin_rel" in decl:
                merged.pop("margin", None)
                merged.pop("margin_rel", None)
            if decl.get("direction", "ideal") != "ideal":
                merged.pop("ideal", None)
            merged.update(decl)
            sources.insert(0, f"{self.path} [{table_key(*decl_key)}]")
        key = table_key(*decl_key) if decl is not None else table_key(task, metric)
        direction, kind = merged.get("direction"), merged.get("kind", "bounded")
        problems = []
        if direction is None:
            problems.append((key, "no direction", 'direction = "higher", "lower" or "ideal" (with ideal = ...)'))
        elif direction == "ideal" and merged.get("ideal") is None:
            problems.append((key, 'direction = "ideal" without ideal', "ideal = <the best value>"))
        if merged.get("margin") is None and merged.get("margin_rel") is None:
            problems.append((key, "no margin", f"margin = <largest tolerated worsening of {metric}> or margin_rel = "
                             "<share of the baseline's level> (docs/release-gate-margins.md)"))
        if not problems:
            problems += _can_fail(key, metric, direction, kind, merged.get("ideal"), merged.get("margin"),
                                  merged.get("margin_rel"))
        _raise(self.path, problems)
        rel = merged.get("margin_rel")
        spec = PairedSpec(direction, merged.get("ideal") if direction == "ideal" else None, kind)
        margin = Margin(metric, float(merged.get("margin") or 0.0), str(merged.get("note", "")), " over ".join(sources),
                        None if rel is None else float(rel))
        return ExternalGate(task, metric, spec, margin, " over ".join(sources))


def _can_fail(key: str, metric: str, direction: str, kind: str, ideal: Any, margin: Any, rel: Any) -> list[Problem]:
    """A margin no worsening can exceed switches the gate off: refused, as the project's own."""
    if kind != "binary":
        return []  # no known range: nothing to check against
    if direction == "ideal" and not 0.0 <= ideal <= 1.0:
        return [(key, f'ideal = {ideal:g} on a mean of 0/1 values (kind = "binary"), which lies in 0..1',
                 'an ideal in 0..1, or kind = "bounded"')]
    reach = max(ideal, 1.0 - ideal) if direction == "ideal" else 1.0
    if margin is not None and margin >= reach:
        return [(f"{key}.margin", f"{margin:g} is at or above the largest possible worsening of {metric} ({reach:g}): no "
                 "candidate can fail", f"a margin well below it, e.g. margin = {reach / 20:.3g}")]
    if rel is not None and direction == "higher" and rel >= 1:
        return [(f"{key}.margin_rel", f"{rel:g} tolerates losing all of the baseline's {metric}",
                 "a share below 1, e.g. margin_rel = 0.1")]
    return []


def external_problems(table: Any, path: str = "thresholds.toml") -> tuple[ExternalThresholds, list[Problem]]:
    """The ``regression.external`` table (as tomllib parses it) checked whole: the declarations
    that are sound, and every problem as (key, what is wrong, fix)."""
    if table is None:
        return ExternalThresholds({}, path), []
    if not isinstance(table, Mapping):
        return ExternalThresholds({}, path), [("regression.external", "must be a table of tasks",
                                                f"[{table_key('<task>', '<metric>')}]")]
    declared: dict[tuple[str, str], Mapping[str, Any]] = {}
    problems: list[Problem] = []
    for task, metrics in table.items():
        if not isinstance(metrics, Mapping):
            problems.append((f"regression.external.{_quoted(task)}", "must be a table of metrics",
                             f"[{table_key(task, '<metric>')}] with direction and margin"))
            continue
        for metric, entry in metrics.items():
            found = _problems(table_key(task, metric), entry)
            problems += found
            if not found:
                declared[(task, metric)] = dict(entry)
    return ExternalThresholds(declared, path), problems


def parse_external(table: Any, path: str = "thresholds.toml") -> ExternalThresholds:
    """``external_problems`` that raises ``ThresholdsError`` listing every problem."""
    parsed, problems = external_problems(table, path)
    _raise(path, problems)
    return parsed


def load_external(source: Any = None) -> ExternalThresholds:
    """From a thresholds file (path), a parsed file or its ``regression.external`` table, or None
    (defaults only)."""
    if source is None:
        return ExternalThresholds({}, "thresholds.toml")
    if isinstance(source, ExternalThresholds):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ThresholdsError(f"{path}: not readable as TOML ({exc}). Fix: correct the file, or pass another.") from None
        return parse_external((data.get("regression") or {}).get("external"), str(path))
    if isinstance(source, Mapping):
        if "regression" in source:
            return parse_external((source.get("regression") or {}).get("external"))
        return parse_external(source.get("external") if set(source) == {"external"} else source)
    raise TypeError(f"thresholds: a path, a parsed TOML table or None, got {type(source).__name__}")


def toml_fix(task: str, metric: str, tool_direction: str = "") -> str:
    """The lines to add for a metric that has neither a declaration nor a default: placeholders to
    fill in (they do not parse as they are, so nothing is gated until someone chose)."""
    said = f"; the tool itself says {tool_direction} is better" if tool_direction else ""
    return (f"[{table_key(task, metric)}]\n"
            f'direction = "higher|lower|ideal"  # which way is better{said}; "ideal" needs ideal = <best value>\n'
            'kind = "bounded"  # "binary" when every sample scores 0 or 1, "unbounded" when no range is known\n'
            f"margin = <largest tolerated worsening of {metric}, in its units>\n"
            'note = "where the margin comes from"')
