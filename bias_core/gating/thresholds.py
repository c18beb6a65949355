"""Gates: the only place that knows thresholds.

``thresholds.toml`` (layout documented at the top of the repo's own file) gives every metric a
default gate and lets a probe, a model, or a model+probe pair override it::

    [metrics.GLD]                                   # default (required for every known metric)
    max = 0.30                                      # or min = ...; exactly one of the two
    ideal = 50                                      # optional, with max: |value - ideal| <= max
    note = "why this number"                        # optional
    [probes."template-occupation".GLD]              # per-probe override
    [models."llama2-7b".GLD]                        # per-model override
    [models."llama2-7b".probes."template-occupation".GLD]   # per model+probe override

Precedence: model+probe > model > probe > metric default.

A verdict compares a metric's confidence interval with its gate: it *fails* when the whole
interval lies beyond the limit, *passes* when the whole interval lies within it (touching the
limit counts as within), and is *inconclusive* otherwise.

Public API: :func:`load_thresholds`, :class:`Thresholds` (``lookup``), :class:`Gate`
(``describe``, ``verdict``), :func:`verdict`, and the verdict constants ``PASS``, ``FAIL``,
``INCONCLUSIVE``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

import tomllib

from bias_core import catalogue
from bias_core.catalogue import BY_NAME as CATALOGUE
from bias_core.errors import ThresholdsError, some_of
from bias_core.gating.verdicts import FAIL, INCONCLUSIVE, PASS

__all__ = [
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "Gate",
    "Thresholds",
    "load_thresholds",
    "verdict",
]

Direction = Literal["max", "min"]

_TOP_LEVEL = ("metrics", "probes", "models", "regression")

#: The values each metric can take (None: unbounded on that side), so that a limit no result can
#: meet (``max = -0.5`` for GLD) or none can exceed (``max = 30`` for a share written as a percent)
#: is an error, not a gate that can never pass or never fail: each declared metric's
#: ``value_range``, installed packages' included. Metrics not declared are not checked.
METRIC_RANGES: Mapping[str, tuple[float | None, float | None]] = catalogue.Derived(
    lambda: {m.name: m.value_range for m in catalogue.declared()})
_GATE_KEYS = ("max", "min", "ideal", "note")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


# --------------------------------------------------------------------------------------------
# Gate and verdict
# --------------------------------------------------------------------------------------------


def _fmt_limit(limit: float) -> str:
    """0.3 -> '0.30'; keeps full precision when two decimals would round the number."""
    short = f"{limit:.2f}"
    return short if float(short) == limit else repr(float(limit))


@dataclass(frozen=True)
class Gate:
    """One resolved threshold: ``metric`` must stay <= (``max``) or >= (``min``) ``limit``.

    ``source`` is the TOML key path that supplied the gate (e.g. ``probes."template-hobby".GLD``)
    so reports can say where a number came from; ``note`` is the optional explanation.
    """

    metric: str
    limit: float
    direction: Direction
    source: str
    note: str = ""
    # Two-sided gates (StereoSet's ideal is 50, not 0): the distance |value - ideal| must stay
    # within ``limit``; only with direction "max".
    ideal: float | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("max", "min"):
            raise ValueError(f"Gate direction must be 'max' or 'min', got {self.direction!r}")
        if not math.isfinite(self.limit):
            raise ValueError(f"Gate limit must be a finite number, got {self.limit!r}")
        if self.ideal is not None and (self.direction != "max" or not math.isfinite(self.ideal)):
            raise ValueError("a gate with an ideal needs direction 'max' and a finite ideal")

    def describe(self) -> str:
        """Human-readable gate, e.g. ``GLD <= 0.30 (metrics.GLD)``."""
        op = "<=" if self.direction == "max" else ">="
        name = self.metric if self.ideal is None else f"|{self.metric} - {_fmt_limit(self.ideal)}|"
        return f"{name} {op} {_fmt_limit(self.limit)} ({self.source})"

    def verdict(self, ci_low: float, ci_high: float) -> str:
        """Shortcut for :func:`verdict` with this gate."""
        return verdict(ci_low, ci_high, self)


def verdict(ci_low: float, ci_high: float, gate: Gate) -> str:
    """``"pass"``, ``"fail"`` or ``"inconclusive"`` for a confidence interval against a gate.

    direction ``max``: fail if ``ci_low > limit`` (whole CI above), pass if ``ci_high <= limit``
    (whole CI at or below), else inconclusive. direction ``min`` mirrors it: fail if
    ``ci_high < limit``, pass if ``ci_low >= limit``. A NaN bound gives inconclusive (the data
    cannot decide); ``ci_low > ci_high`` is a caller bug and raises ``ValueError``.
    """
    lo, hi = float(ci_low), float(ci_high)
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"confidence interval is reversed: ci_low={lo!r} > ci_high={hi!r}")
    limit = gate.limit
    if gate.ideal is not None:
        lo, hi = _distance_interval(lo, hi, gate.ideal)
    if gate.direction == "max":
        if lo > limit:
            return FAIL
        if hi <= limit:
            return PASS
        return INCONCLUSIVE
    if hi < limit:
        return FAIL
    if lo >= limit:
        return PASS
    return INCONCLUSIVE


def _distance_interval(lo: float, hi: float, ideal: float) -> tuple[float, float]:
    """The range of |x - ideal| for x in [lo, hi]."""
    if lo <= ideal <= hi:
        return 0.0, max(ideal - lo, hi - ideal)
    return (ideal - hi, ideal - lo) if hi < ideal else (lo - ideal, hi - ideal)


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """A validated thresholds file. Build it with :func:`load_thresholds`."""

    path: Path
    defaults: Mapping[str, Gate]
    model_names: tuple[str, ...] = ()  # the [models."..."] keys as written
    probe_overrides: Mapping[tuple[str, str], Gate] = field(default_factory=dict)
    model_overrides: Mapping[tuple[str, str], Gate] = field(default_factory=dict)
    model_probe_overrides: Mapping[tuple[str, str, str], Gate] = field(default_factory=dict)
    # [regression.<metric>]: non-inferiority margins against a baseline (bias_core.gating.regression.gate)
    regression: Mapping[str, Any] = field(default_factory=dict)
    # [regression.external."<task>"."<metric>"]: other tools' metrics (an ExternalThresholds,
    # bias_core.gating.external_logs.thresholds; None only for a Thresholds built by hand)
    external: Any = None

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(sorted(self.defaults))

    def lookup(self, metric: str, probe: str | None = None, model: str | None = None) -> Gate:
        """The gate for ``metric`` on ``probe`` with ``model``.

        Precedence: model+probe > model > probe > metric default. ``probe``/``model`` may be
        None (no override at that level applies). Asking for a metric the file was not loaded
        with raises :class:`ThresholdsError`.
        """
        if metric not in self.defaults:
            known = ", ".join(sorted(self.defaults)) or "(none)"
            raise ThresholdsError(
                f"{self.path}: metrics.{_key(metric)}: no gate for metric {metric!r}; "
                f"known metrics: {known}{_did_you_mean(metric, self.defaults)}. "
                f"Fix: pass {metric!r} in known_metrics to load_thresholds and add "
                f"[metrics.{_key(metric)}] with max = ... or min = ... to {self.path}"
            )
        model = None if model is None else model.casefold()  # keys are stored case-folded
        if model is not None and probe is not None:
            gate = self.model_probe_overrides.get((model, probe, metric))
            if gate is not None:
                return gate
        if model is not None:
            gate = self.model_overrides.get((model, metric))
            if gate is not None:
                return gate
        if probe is not None:
            gate = self.probe_overrides.get((probe, metric))
            if gate is not None:
                return gate
        return self.defaults[metric]


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


def _key(name: str) -> str:
    """A TOML key as written in a dotted path: bare when possible, quoted otherwise."""
    return name if _BARE_KEY.match(name) else _quoted(name)


def _quoted(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _did_you_mean(name: str, options: Iterable[str]) -> str:
    """'; did you mean 'X'?' for the closest option (case-insensitive first), or ''."""
    options = list(options)
    for opt in options:
        if opt.lower() == name.lower():
            return f"; did you mean {opt!r}?"
    lowered = {opt.lower(): opt for opt in options}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return type(value).__name__  # dates and times


def _toml_repr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quoted(value)
    return repr(value)


class _Collector:
    """Gathers every problem so one run reports them all, each naming file, key and fix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def add(self, key: str, problem: str, fix: str) -> None:
        end = "" if problem.endswith(("?", ".")) else "."
        self.problems.append(f"{self.path}: {key}: {problem}{end} Fix: {fix}")

    def raise_if_any(self) -> None:
        if not self.problems:
            return
        if len(self.problems) == 1:
            exc = ThresholdsError(self.problems[0])
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            exc = ThresholdsError(f"{self.path}: {len(self.problems)} problems:\n{lines}")
        exc.problems = list(self.problems)  # type: ignore[attr-defined]
        raise exc


def _parse_gate(
    col: _Collector, key: str, metric: str, value: Any, example_limit: str = "0.3"
) -> Gate | None:
    example = f"[{key}] with max = {example_limit} (or min = {example_limit})"
    if not isinstance(value, dict):
        col.add(
            key,
            f"a gate must be a table, got {_type_name(value)} {_toml_repr(value)}",
            f"write it as {example}",
        )
        return None
    ok = True
    for k in value:
        if k not in _GATE_KEYS:
            col.add(
                f"{key}.{_key(k)}",
                f"unknown key {k!r} in a gate{_did_you_mean(k, _GATE_KEYS)}",
                "a gate allows only the keys: max, min, ideal, note",
            )
            ok = False
    present = [d for d in ("max", "min") if d in value]
    if len(present) == 2:
        col.add(
            key,
            "both max and min are set",
            "keep exactly one: max for metrics where lower is better, min where higher is better",
        )
        return None
    if not present:
        col.add(key, "neither max nor min is set", f"add one, e.g. {example}")
        return None
    direction: Direction = present[0]  # type: ignore[assignment]
    raw = value[direction]
    limit_key = f"{key}.{direction}"
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        hint = f"write {direction} = {example_limit}"
        if isinstance(raw, str):
            hint = f"remove the quotes: {direction} = {raw}" if _is_number(raw) else hint
        col.add(
            limit_key,
            f"must be a number, got {_type_name(raw)} {_toml_repr(raw)}",
            hint,
        )
        ok = False
    elif not math.isfinite(raw):
        col.add(
            limit_key,
            f"must be a finite number, got {raw!r}",
            f"use a finite limit, e.g. {direction} = {example_limit}",
        )
        ok = False
    ideal = value.get("ideal")
    if ideal is not None:
        if isinstance(ideal, bool) or not isinstance(ideal, (int, float)) or not math.isfinite(ideal):
            col.add(f"{key}.ideal", f"must be a finite number, got {_type_name(ideal)} {_toml_repr(ideal)}",
                    "write e.g. ideal = 50")
            ok = False
        elif direction != "max":
            col.add(f"{key}.ideal", "ideal needs max (the largest allowed distance from the ideal)",
                    f"write max = <distance> instead of min = ..., e.g. ideal = {ideal} with max = 10")
            ok = False
    note = value.get("note", "")
    if not isinstance(note, str):
        col.add(
            f"{key}.note",
            f"note must be a string, got {_type_name(note)} {_toml_repr(note)}",
            'quote it: note = "where this number comes from"',
        )
        ok = False
    if not ok or not _in_range(col, key, metric, direction, float(raw), None if ideal is None else float(ideal)):
        return None
    return Gate(metric=metric, limit=float(raw), direction=direction, source=key, note=note,
                ideal=None if ideal is None else float(ideal))


def _in_range(col: _Collector, key: str, metric: str, direction: str, limit: float, ideal: float | None) -> bool:
    """Is the limit one a result of this metric can fall on either side of? A limit at the edge of
    the metric's values counts as beyond it where no CI could then cross it (``max = 1`` on a share
    never fails; ``min = 0`` on one never fails)."""
    lo, hi = METRIC_RANGES.get(metric, (None, None))
    span = f"[{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}]"
    if ideal is not None:
        if (lo is not None and ideal < lo) or (hi is not None and ideal > hi):
            col.add(f"{key}.ideal", f"ideal = {ideal:g} lies outside {metric}'s possible values {span}",
                    f"use an ideal within {span}")
            return False
        reach = None if lo is None or hi is None else max(ideal - lo, hi - ideal)
        if limit < 0:
            col.add(f"{key}.max", f"max = {limit:g} is a distance from the ideal and cannot be negative: no result "
                    "can pass", f"use a distance >= 0, e.g. max = {_example(lo, hi, 0.1)}")
            return False
        if reach is not None and limit >= reach:
            col.add(f"{key}.max", f"max = {limit:g} reaches the largest possible distance from ideal {ideal:g} "
                    f"({reach:g}; {metric} lies in {span}): no result can fail",
                    f"use a distance below {reach:g}, e.g. max = {_example(0.0, reach, 0.2)}")
            return False
        return True
    never_fail = (direction == "max" and hi is not None and limit >= hi) or (
        direction == "min" and lo is not None and limit <= lo)
    if never_fail:
        edge, where = (hi, "at or above the largest") if direction == "max" else (lo, "at or below the smallest")
        hint = " (a percent written for a share?)" if direction == "max" and limit > hi else ""
        col.add(f"{key}.{direction}", f"{direction} = {limit:g} is {where} possible value of {metric} ({edge:g}; "
                f"it lies in {span}): no result can fail, so the gate is switched off{hint}",
                f"use a limit strictly inside {span}, e.g. {direction} = {_example(lo, hi, 0.3)}")
        return False
    if (direction == "max" and lo is not None and limit < lo) or (direction == "min" and hi is not None and limit > hi):
        edge, where = (lo, "below the smallest") if direction == "max" else (hi, "above the largest")
        col.add(f"{key}.{direction}", f"{direction} = {limit:g} is {where} possible value of {metric} ({edge:g}; "
                f"it lies in {span}): no result can pass", f"use a limit within {span}, e.g. {direction} = {_example(lo, hi, 0.3)}")
        return False
    return True


def _example(lo: float | None, hi: float | None, share: float) -> str:
    if lo is None or hi is None:
        return f"{share:g}"
    return f"{lo + share * (hi - lo):.3g}"


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _parse_metric_table(
    col: _Collector,
    prefix: str,
    table: Mapping[str, Any],
    known_metrics: set[str],
    extra_keys: tuple[str, ...] = (),
) -> dict[str, Gate]:
    """Parse ``{metric: gate}`` under ``prefix``; keys in ``extra_keys`` are skipped."""
    gates: dict[str, Gate] = {}
    for name, value in table.items():
        if name in extra_keys:
            continue
        key = f"{prefix}.{_key(name)}"
        if name not in known_metrics:
            known = ", ".join(sorted(known_metrics)) or "(none)"
            also = "".join(f" (or the sub-table '{k}')" for k in extra_keys)
            col.add(
                key,
                f"unknown metric {name!r}{_did_you_mean(name, [*known_metrics, *extra_keys])}",
                f"use one of the known metrics: {known}{also}",
            )
            continue
        gate = _parse_gate(col, key, name, value)
        if gate is not None:
            gates[name] = gate
    return gates


def _require_table(col: _Collector, key: str, value: Any, example: str) -> bool:
    if isinstance(value, dict):
        return True
    col.add(
        key,
        f"must be a table, got {_type_name(value)} {_toml_repr(value)}",
        f"write it as a table, e.g. {example}",
    )
    return False


def _parse_probe_tables(
    col: _Collector,
    prefix: str,
    table: Mapping[str, Any],
    known_metrics: set[str],
    known_probes: set[str],
) -> dict[str, dict[str, Gate]]:
    """``{probe: {metric: gate}}`` from a ``probes`` table (top level or under a model)."""
    out: dict[str, dict[str, Gate]] = {}
    for probe, value in table.items():
        key = f"{prefix}.{_quoted(probe)}"
        if probe not in known_probes:
            known = ", ".join(sorted(known_probes)) or "(none)"
            col.add(
                key,
                f"unknown probe {probe!r}{_did_you_mean(probe, known_probes)}",
                f"use one of the known probes: {known}",
            )
            continue
        if not _require_table(col, key, value, f"[{key}.GLD] max = 0.3"):
            continue
        gates = _parse_metric_table(col, key, value, known_metrics)
        out[probe] = {m: g for m, g in gates.items() if _measured_on(col, prefix, probe, m)}
    return out


def _measured_on(col: _Collector, prefix: str, probe: str, metric: str) -> bool:
    """A gate under a probe that does not measure the metric would never apply: refuse it, naming
    the probe's metrics and the metric's probes (the catalogue's; names it does not declare pass)."""
    spec = CATALOGUE.get(metric)
    has = [m.name for m in CATALOGUE.values() if probe in m.probes]
    if spec is None or not has or probe in spec.probes:
        return True
    close = difflib.get_close_matches(metric.lower(), [m.lower() for m in has], n=1, cutoff=0.6)
    guess = next((m for m in has if close and m.lower() == close[0]), None)
    meant = f"{prefix}.{_quoted(probe)}.{_key(guess)}" if guess else f"{prefix}.{_quoted(spec.probes[0])}.{_key(metric)}"
    probes = some_of(spec.probes, 4)
    col.add(f"{prefix}.{_quoted(probe)}.{_key(metric)}",
            f"probe {probe!r} does not measure {metric} (it measures {', '.join(has)}), so this gate would never "
            f"apply; did you mean [{meant}]?",
            f"gate {metric} under a probe that measures it ({probes}) or as the default [metrics.{_key(metric)}]")
    return False


def _inherit_ideal(gate: Gate, default: Gate | None) -> Gate:
    """An override that only moves the limit keeps the metric's ideal (it is a property of the metric)."""
    if gate.ideal is None and default is not None and default.ideal is not None:
        return dataclasses.replace(gate, ideal=default.ideal)
    return gate


def _check_direction(col: _Collector, gate: Gate, default: Gate | None) -> bool:
    if default is None or gate.direction == default.direction:
        return True
    col.add(
        gate.source,
        f"direction {gate.direction!r} contradicts the default gate {default.source} "
        f"({default.direction!r}); whether lower or higher is better is a property of the metric",
        f"use {default.direction} = ... here too",
    )
    return False


def _check_catalogue(col: _Collector, gate: Gate) -> None:
    """A default gate must point the way the catalogue says is better, with the catalogue's ideal."""
    spec = CATALOGUE.get(gate.metric)
    if spec is None:
        return
    where = "bias_core/catalogue.py"
    if gate.direction != spec.gate_direction:
        way = "lower" if spec.gate_direction == "max" else "higher"
        col.add(f"{gate.source}.{gate.direction}",
                f"direction {gate.direction!r} contradicts the catalogue: {way} {gate.metric} is better ({where})",
                f"use {spec.gate_direction} = ... instead")
    elif spec.gate_direction == "max" and gate.ideal != spec.ideal:
        if spec.ideal is None:
            col.add(f"{gate.source}.ideal", f"{gate.metric} has no ideal in the catalogue ({where}): lower is better",
                    "remove ideal")
        else:
            found = "no ideal" if gate.ideal is None else f"ideal = {gate.ideal:g}"
            col.add(f"{gate.source}.ideal",
                    f"{found} contradicts the catalogue: {gate.metric} is gated by its distance from {spec.ideal:g} ({where})",
                    f"write ideal = {spec.ideal:g}")


_UTF16 = ("a UTF-16 byte-order mark: the file is UTF-16, not UTF-8",
          "convert it: iconv -f UTF-16 -t UTF-8 {path} > fixed.toml, then use fixed.toml")
_BOMS = {b"\xef\xbb\xbf": ("a UTF-8 byte-order mark (BOM: the bytes EF BB BF), which TOML does not allow",
                            "save it as 'UTF-8', not 'UTF-8 with BOM', or strip the mark: "
                            "sed -i '1s/^\\xEF\\xBB\\xBF//' {path}"),
         b"\xff\xfe": _UTF16, b"\xfe\xff": _UTF16}


def _refuse_byte_order_mark(path: Path, raw: bytes) -> None:
    """tomllib's own message for a BOM ("Invalid statement (line 1, column 1)") hides the cause."""
    for bom, (what, fix) in _BOMS.items():
        if raw.startswith(bom):
            raise ThresholdsError(f"{path}: starts with {what}. Fix: {fix.format(path=path)}.")


def load_thresholds(
    path: str | os.PathLike[str],
    known_metrics: set[str],
    known_probes: set[str],
    required_metrics: set[str] | None = None,
) -> Thresholds:
    """Read and validate a thresholds file.

    ``known_metrics``/``known_probes`` are the names the audit suite defines; anything else in
    the file is an error (typos must not silently disable a gate). Model names are free-form
    (the ``--model`` value or alias). Every metric in ``required_metrics`` (default: all known
    ones) needs a default under ``[metrics]``; the plugin requires only the metrics of the tests
    it collected, so a file written for one family keeps working when families are added.
    All problems found are reported together in one :class:`ThresholdsError`.
    """
    path = Path(path)
    known_metrics = set(known_metrics)
    known_probes = set(known_probes)
    col = _Collector(path)

    if not path.is_file():
        what = ("is a directory, not a file" if path.is_dir() else
                "is not a regular file" if path.exists() else "not found")
        raise ThresholdsError(
            f"{path}: thresholds file {what}. Fix: pass --thresholds PATH pointing to a "
            f"thresholds.toml (the repository's own thresholds.toml is a documented example)"
        )
    try:
        raw = path.read_bytes()
        _refuse_byte_order_mark(path, raw)
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ThresholdsError(
            f"{path}: TOML syntax error: {err}. Fix: correct the TOML at that line and column "
            f'(tables look like [metrics.GLD], values like max = 0.3 and note = "...")'
        ) from err
    except UnicodeDecodeError as err:
        raise ThresholdsError(
            f"{path}: not valid UTF-8 text ({err.reason} at byte {err.start}). "
            f"Fix: save the file as UTF-8"
        ) from err
    except OSError as err:
        raise ThresholdsError(
            f"{path}: cannot read thresholds file: {err.strerror or err}. "
            f"Fix: check permissions, or pass --thresholds PATH to another file"
        ) from err

    for name in data:
        if name not in _TOP_LEVEL:
            col.add(
                _key(name),
                f"unknown top-level {'table' if isinstance(data[name], dict) else 'key'} "
                f"{name!r}{_did_you_mean(name, _TOP_LEVEL)}",
                "the file may only contain the tables [metrics], [probes], [models] and [regression]",
            )

    defaults: dict[str, Gate] = {}
    metrics_table = data.get("metrics", {})
    if _require_table(col, "metrics", metrics_table, "[metrics.GLD] max = 0.3"):
        defaults = _parse_metric_table(col, "metrics", metrics_table, known_metrics)
        for gate in defaults.values():
            _check_catalogue(col, gate)
        required = known_metrics if required_metrics is None else required_metrics
        for metric in sorted(required):
            if metric not in metrics_table:
                col.add(
                    f"metrics.{_key(metric)}",
                    f"metric {metric!r} has no default gate",
                    f"add [metrics.{_key(metric)}] with max = ... (lower is better) or "
                    f"min = ... (higher is better)",
                )

    probe_overrides: dict[tuple[str, str], Gate] = {}
    probes_table = data.get("probes", {})
    if _require_table(col, "probes", probes_table, '[probes."template-occupation".GLD]'):
        parsed = _parse_probe_tables(col, "probes", probes_table, known_metrics, known_probes)
        for probe, gates in parsed.items():
            for metric, gate in gates.items():
                if _check_direction(col, gate, defaults.get(metric)):
                    probe_overrides[(probe, metric)] = _inherit_ideal(gate, defaults.get(metric))

    model_overrides: dict[tuple[str, str], Gate] = {}
    model_probe_overrides: dict[tuple[str, str, str], Gate] = {}
    models_table = data.get("models", {})
    if _require_table(col, "models", models_table, '[models."llama2-7b".GLD]'):
        spelled: dict[str, str] = {}
        for written, mtable in models_table.items():
            mkey = f"models.{_quoted(written)}"
            # "SmolLM2-135m" must gate smollm2-135m, not be ignored for want of the exact case.
            model = written.casefold()
            if model in spelled:
                col.add(mkey, f"the same model as models.{_quoted(spelled[model])} (model names match whatever "
                        "their case)", "merge the two tables into one")
                continue
            spelled[model] = written
            if not _require_table(col, mkey, mtable, f"[{mkey}.GLD] max = 0.3"):
                continue
            gates = _parse_metric_table(
                col, mkey, mtable, known_metrics, extra_keys=("probes",)
            )
            for metric, gate in gates.items():
                if _check_direction(col, gate, defaults.get(metric)):
                    model_overrides[(model, metric)] = _inherit_ideal(gate, defaults.get(metric))
            if "probes" not in mtable:
                continue
            pkey = f"{mkey}.probes"
            ptable = mtable["probes"]
            example = f'[{pkey}."template-occupation".GLD] max = 0.3'
            if not _require_table(col, pkey, ptable, example):
                continue
            parsed = _parse_probe_tables(col, pkey, ptable, known_metrics, known_probes)
            for probe, pgates in parsed.items():
                for metric, gate in pgates.items():
                    if _check_direction(col, gate, defaults.get(metric)):
                        model_probe_overrides[(model, probe, metric)] = _inherit_ideal(gate, defaults.get(metric))

    from bias_core.gating.regression.gate import regression_margins

    regression, problems = regression_margins(data.get("regression", {}), known_metrics)
    for key, problem, fix in problems:
        col.add(key, problem, fix)

    col.raise_if_any()
    return Thresholds(
        path=path,
        model_names=tuple(models_table) if isinstance(models_table, dict) else (),
        defaults=defaults,
        probe_overrides=probe_overrides,
        model_overrides=model_overrides,
        model_probe_overrides=model_probe_overrides,
        regression=regression,
        external=dataclasses.replace(regression.external, path=str(path)),
    )
