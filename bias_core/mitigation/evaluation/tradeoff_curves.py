"""Debiasing / over-debiasing trade-off curves (DA-Gender, "Unmasking the Trade-off", Figure 2).

Each method is run over a strength grid; at every point the bias metrics and 1 − DA_score are
measured. This module holds the grids, the table of points, the choice of the point to take,
``tradeoff.csv`` and one figure per bias metric. Driving the models is ``mitigation/evaluation/strength_sweep.py``'s job.

Axes. x = the bias left, as the distance of the metric from its ideal (|SEAT effect|,
|logprob effect|, |stereo_score − 50|), so that less bias is always nearer 0; y = 1 − DA_score,
the genuine gender knowledge lost (0 = every DA-Gender pair right). A CI on the metric becomes a
CI on the distance (a CI holding the ideal gives distance 0 as its lower end).

The point to take, per bias metric: among the points within the guards (every guard value at
most its limit, e.g. ``perplexity_rise`` <= 0.10), the one nearest the origin on axes scaled by
the base model's own (bias distance, 1 − DA) — the base model sits at (1, 1), so a point that
halves the bias and keeps DA is at (0.5, 1). An axis on which the base model is at 0 is left
unscaled. A point is taken only if it improves on the model before debiasing: less bias on that
metric and nearer the origin than the base model. Where none does, none is taken (a sweep whose
every point adds bias, or removes it only by losing more of DA_score, recommends nothing).
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from bias_core import catalogue
from bias_core.mitigation.methods.paper_settings import TABLE11_GRID, TABLE12

METHODS = ("cds", "er", "sentence-debias")
STRENGTH_NAMES = {"cds": "swap rate", "er": "lambda", "sentence-debias": "ratio of pairs"}
# Table 11's grids, the same for every model (paper_settings), with the strength each model of
# Table 12 was run at: Tables 7 and 8 report those points (BERT and BART's CDS 1.0, BART's ER
# 1.25 and SD 0.07 lie outside Table 11's grids), so the paper's sweep measures them for any kind.
PAPER_GRID: dict[str, tuple[float, ...]] = {
    method: tuple(sorted({*points, *(column.strengths()[method] for column in TABLE12.values())}))
    for method, points in TABLE11_GRID.items()}
# The CPU quick grid: the ends of each range (and a middle SD point, which costs no training).
QUICK_GRID: dict[str, tuple[float, ...]] = {
    "cds": (0.6, 0.95),
    "er": (0.2, 2.0),
    "sentence-debias": (0.01, 0.1, 1.0),
}
# Bias axis -> (the measured metric's name, its ideal value): the catalogue's trade-off axes
# (MetricSpec.tradeoff="bias"; catalogue.tradeoff_axes names them).
BIAS_METRICS: dict[str, tuple[str, float]] = {a.name: (a.metric, a.ideal) for a in catalogue.tradeoff_axes()}
# The knowledge axis: the metric declared tradeoff="knowledge" (DA_score), plotted as 1 - value.
KNOWLEDGE_METRIC = catalogue.tradeoff_knowledge().name
KNOWLEDGE = f"1-{KNOWLEDGE_METRIC}"
BASE = "base"


def variant_name(method: str, strength: float) -> str:
    """``cds@0.6``, ``er@2``, ``sentence-debias@0.01``."""
    return f"{method}@{strength:g}"


def check_grid(grid: Mapping[str, Sequence[float]]) -> None:
    """A usage error naming a bad method or strength, before anything loads or trains."""
    from bias_core.errors import AuditUsageError

    limits = {"cds": (0.0, 1.0, "a swap rate in [0, 1]"), "er": (0.0, float("inf"), "a weight λ >= 0"),
              "sentence-debias": (0.0, 1.0, "a ratio of pairs in (0, 1]")}
    for method, strengths in grid.items():
        if method not in METHODS:
            raise AuditUsageError(f"trade-off sweep: unknown method {method!r}; choose from {', '.join(METHODS)}.")
        low, high, what = limits[method]
        for s in strengths:
            bad = not (low <= s <= high) or (method == "sentence-debias" and s == 0)
            if bad:
                raise AuditUsageError(f"trade-off sweep: {method} strength {s} is out of range; it takes {what}.")


#: Schedules a sweep trains CDS / ER on: the project's LoRA configurations (one seed), or the
#: paper's (full fine-tuning with Table 12's settings, five seeds averaged; CUDA).
SCHEDULES = ("quick", "paper")
PAPER_PREFIX = "paper:"


def sweep_schedule(value: str | None) -> str:
    """"paper" for ``paper`` and ``paper:GRID``, else "quick" (the project's LoRA configuration)."""
    text = (value or "").strip()
    return "paper" if text == "paper" or text.startswith(PAPER_PREFIX) else "quick"


def parse_grid(value: str | None, option: str = "--mitigation-sweep") -> dict[str, tuple[float, ...]] | None:
    """``quick`` / ``paper`` -> that grid; ``cds=0.6,0.95;sentence-debias=1`` (optionally after
    ``paper:``, for the paper's schedule) -> that grid; a usage error naming the problem
    otherwise (checked when the command line is read)."""
    from bias_core.errors import AuditUsageError

    if value is None or not value.strip():
        return None
    named = {"quick": QUICK_GRID, "paper": PAPER_GRID}
    if value.strip() in named:
        return dict(named[value.strip()])
    example = ("quick, paper, or a grid such as 'cds=0.6,0.95;er=0.2,2;sentence-debias=0.1,1' (after 'paper:' to "
               "train it on the paper's schedule)")
    text = value.strip().removeprefix(PAPER_PREFIX)
    grid: dict[str, tuple[float, ...]] = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        method, eq, values = part.partition("=")
        method = method.strip()
        if not eq or not values.strip():
            raise AuditUsageError(f"{option} {value}: {part!r} is not METHOD=STRENGTH[,STRENGTH...]; choose {example}.")
        if method not in METHODS:
            raise AuditUsageError(f"{option} {value}: unknown method {method!r}; choose from {', '.join(METHODS)} "
                                  f"({example}).")
        try:
            strengths = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise AuditUsageError(f"{option} {value}: {method}'s strengths must be numbers; choose {example}.") from None
        if method in grid or not strengths:
            raise AuditUsageError(f"{option} {value}: give {method} once, with at least one strength.")
        grid[method] = tuple(dict.fromkeys(strengths))
    if not grid:
        raise AuditUsageError(f"{option} {value!r}: choose {example}.")
    try:
        check_grid(grid)
    except AuditUsageError as exc:
        raise AuditUsageError(f"{option} {value}: {exc}") from None
    return grid


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float

    @classmethod
    def of(cls, result: Any) -> "Estimate":
        return cls(float(result.value), float(result.ci_low), float(result.ci_high))

    def distance_from(self, ideal: float) -> "Estimate":
        ends = sorted((abs(self.ci_low - ideal), abs(self.ci_high - ideal)))
        low = 0.0 if self.ci_low <= ideal <= self.ci_high else ends[0]
        return Estimate(abs(self.value - ideal), low, ends[1])

    def complement(self) -> "Estimate":
        return Estimate(1.0 - self.value, 1.0 - self.ci_high, 1.0 - self.ci_low)


@dataclass(frozen=True)
class SweepPoint:
    """One variant's measurements: ``bias`` by bias metric name (already distances from the
    ideal), ``knowledge_lost`` = 1 − DA_score, ``guards`` by guard name (raw values);
    ``values``: each bias metric's value itself, signed (+0.154 or -0.154 where ``bias`` holds
    0.154), as DA-Gender's Table 7 prints it."""

    method: str  # one of METHODS, or BASE for the model before debiasing
    strength: float | None
    bias: Mapping[str, Estimate]
    knowledge_lost: Estimate
    guards: Mapping[str, float] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    # axis (a bias metric, or KNOWLEDGE) -> the per-seed values, when the point averages seeds
    spread: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        return BASE if self.method == BASE else variant_name(self.method, float(self.strength))

    def within(self, limits: Mapping[str, float]) -> bool:
        """Every guard with a limit is measured and at most its limit (NaN fails)."""
        for name, limit in limits.items():
            value = self.guards.get(name)
            if value is None or not value <= limit:
                return False
        return True


def seed_spread(runs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, ...]]:
    """axis -> its per-seed values on the curve's scale (bias as distance from the ideal, and
    1 − DA_score), from each seed's MetricResults; an axis some seed lacks is left out."""
    out: dict[str, tuple[float, ...]] = {}
    for name, (_, ideal) in BIAS_METRICS.items():
        if all(hasattr(run.get(name), "value") for run in runs):
            out[name] = tuple(abs(float(run[name].value) - ideal) for run in runs)
    if all(hasattr(run.get(KNOWLEDGE_METRIC), "value") for run in runs):
        out[KNOWLEDGE] = tuple(1.0 - float(run[KNOWLEDGE_METRIC].value) for run in runs)
    return out


def point_from_results(method: str, strength: float | None, results: Mapping[str, Any],
                       guards: Mapping[str, Any] | None = None, info: Mapping[str, Any] | None = None,
                       spread: Mapping[str, tuple[float, ...]] | None = None) -> SweepPoint:
    """A SweepPoint from MetricResults keyed by bias axis (``BIAS_METRICS``) plus ``KNOWLEDGE_METRIC``
    (a point averaged over seeds: their means, with ``spread`` from ``seed_spread``)."""
    if KNOWLEDGE_METRIC not in results:
        raise KeyError(f"point_from_results: a {KNOWLEDGE_METRIC} result is needed for the knowledge axis")
    bias, values = {}, {}
    for name, (metric, ideal) in BIAS_METRICS.items():
        if name in results:
            result = results[name]
            if result.metric != metric:
                raise ValueError(f"point_from_results: {name} must be a {metric} result, got {result.metric}")
            bias[name] = Estimate.of(result).distance_from(ideal)
            values[name] = float(result.value)
    return SweepPoint(method, strength, bias, Estimate.of(results[KNOWLEDGE_METRIC]).complement(),
                      {k: float(getattr(v, "value", v)) for k, v in (guards or {}).items()}, dict(info or {}),
                      dict(spread or {}), values)


def _scales(base: SweepPoint | None, metric: str) -> tuple[float, float]:
    if base is None or metric not in base.bias:
        return 1.0, 1.0
    x, y = base.bias[metric].value, base.knowledge_lost.value
    return (x if x > 0 else 1.0), (y if y > 0 else 1.0)


def best_point(points: Sequence[SweepPoint], metric: str, limits: Mapping[str, float] | None = None) -> SweepPoint | None:
    """The debiased point nearest the origin within the guards for ``metric`` that improves on
    the base model (module doc); None when no point qualifies. Ties go to the earlier point."""
    base = next((p for p in points if p.method == BASE), None)
    sx, sy = _scales(base, metric)
    best, best_d, base_bias = None, math.inf, math.inf
    if base is not None and metric in base.bias:
        base_bias = base.bias[metric].value
        best_d = math.hypot(base_bias / sx, base.knowledge_lost.value / sy)  # a point must beat this
    for p in points:
        if p.method == BASE or metric not in p.bias or not p.within(limits or {}):
            continue
        if not p.bias[metric].value < base_bias:
            continue  # more bias than before debiasing: not a point to take for this metric
        d = math.hypot(p.bias[metric].value / sx, p.knowledge_lost.value / sy)
        if d < best_d:
            best, best_d = p, d
    return best


# ----- tradeoff.csv ------------------------------------------------------------------------------
def csv_rows(points: Sequence[SweepPoint], limits: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per point: method, strength, every metric with its CI (``<metric>_bias``: the
    distance from the ideal, the curve's axis; ``<metric>_value``: the value itself, signed),
    guards, and which bias metrics this point is the one to take for; when points average seeds,
    their number and each axis's sd, min and max over the seeds."""
    metrics = [m for m in BIAS_METRICS if any(m in p.bias for p in points)]
    seeded = any(p.spread for p in points)
    guards = sorted({g for p in points for g in p.guards})
    chosen = {m: best_point(points, m, limits) for m in metrics}
    rows = []
    for p in points:
        row: dict[str, Any] = {"variant": p.variant, "method": p.method,
                               "strength_name": STRENGTH_NAMES.get(p.method, ""),
                               "strength": "" if p.strength is None else p.strength}
        for m in metrics:
            e = p.bias.get(m)
            row.update({f"{m}_bias": e.value if e else "", f"{m}_ci_low": e.ci_low if e else "",
                        f"{m}_ci_high": e.ci_high if e else "", f"{m}_value": p.values.get(m, "")})
        row.update({KNOWLEDGE: p.knowledge_lost.value, f"{KNOWLEDGE}_ci_low": p.knowledge_lost.ci_low,
                    f"{KNOWLEDGE}_ci_high": p.knowledge_lost.ci_high})
        if seeded:
            row["seeds"] = len(next(iter(p.spread.values()))) if p.spread else 1
            for axis in (*metrics, KNOWLEDGE):
                values = p.spread.get(axis, ())
                row.update({f"{axis}_seed_sd": _sd(values), f"{axis}_seed_min": min(values) if values else "",
                            f"{axis}_seed_max": max(values) if values else ""})
        for g in guards:
            row[g] = p.guards.get(g, "")
        row["within_guards"] = "" if p.method == BASE else p.within(limits or {})
        row["take_for"] = ";".join(m for m in metrics if chosen[m] is p)
        rows.append(row)
    return rows


def _sd(values: Sequence[float]) -> float | str:
    """Sample standard deviation (n − 1), "" for fewer than two values."""
    if len(values) < 2:
        return ""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def write_csv(points: Sequence[SweepPoint], path: Path | str, limits: Mapping[str, float] | None = None) -> Path:
    rows = csv_rows(points, limits)
    if not rows:
        raise ValueError("write_csv: no points")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = Path(path)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


# ----- figures -----------------------------------------------------------------------------------
COLORS = {"cds": "#1565c0", "er": "#2e7d32", "sentence-debias": "#c62828", BASE: "#37474f"}


def figure(points: Sequence[SweepPoint], metric: str, limits: Mapping[str, float] | None = None, note: str = ""):
    """A matplotlib Figure (no pyplot): bias distance on x, 1 − DA_score on y, one line per
    method in strength order with CI bars (and, for points averaged over seeds, the range over
    the seeds as broad pale bars), the base model as a square and the point to take ringed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.6))
    ax = fig.add_subplot()
    for method in (BASE, *METHODS):
        pts = sorted((p for p in points if p.method == method and metric in p.bias),
                     key=lambda p: p.strength or 0.0)
        if not pts:
            continue
        xs = [p.bias[metric].value for p in pts]
        ys = [p.knowledge_lost.value for p in pts]
        xerr = [[x - p.bias[metric].ci_low for x, p in zip(xs, pts)], [p.bias[metric].ci_high - x for x, p in zip(xs, pts)]]
        yerr = [[y - p.knowledge_lost.ci_low for y, p in zip(ys, pts)], [p.knowledge_lost.ci_high - y for y, p in zip(ys, pts)]]
        label = "before debiasing" if method == BASE else f"{method} ({STRENGTH_NAMES[method]})"
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, fmt="s" if method == BASE else "o-", color=COLORS[method],
                    label=label, capsize=2, markersize=6 if method == BASE else 4, linewidth=1.2, elinewidth=0.7)
        for x, y, p in zip(xs, ys, pts):  # the range over the training seeds, a broad pale bar behind the CI
            if metric in p.spread:
                ax.plot([min(p.spread[metric]), max(p.spread[metric])], [y, y], color=COLORS[method], alpha=0.3,
                        linewidth=5, solid_capstyle="butt")
            if KNOWLEDGE in p.spread:
                ax.plot([x, x], [min(p.spread[KNOWLEDGE]), max(p.spread[KNOWLEDGE])], color=COLORS[method], alpha=0.3,
                        linewidth=5, solid_capstyle="butt")
        if method != BASE:
            for x, y, p in zip(xs, ys, pts):
                ax.annotate(f"{p.strength:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7,
                            color=COLORS[method])
    best = best_point(points, metric, limits)
    if best is not None:
        ax.plot([best.bias[metric].value], [best.knowledge_lost.value], marker="o", markersize=14, fillstyle="none",
                color="black", linestyle="none", label=f"take: {best.variant}")
    ideal = BIAS_METRICS[metric][1]
    ax.set_xlabel(f"{metric} bias: |value − {ideal:g}|  (less bias →  left)")
    ax.set_ylabel(f"1 − {KNOWLEDGE_METRIC}  (genuine gender knowledge lost)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    # a long corpus note is wrapped: on one line it ran past both edges of the figure
    ax.set_title(f"Debiasing vs over-debiasing: {metric}" + (f"\n{textwrap.fill(note, 80)}" if note else ""), fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def figure_svg(points: Sequence[SweepPoint], metric: str, limits: Mapping[str, float] | None = None, note: str = "") -> str:
    """The figure as deterministic SVG text (no date, fixed hash salt), for files and the HTML report."""
    import matplotlib

    buf = io.StringIO()
    fig = figure(points, metric, limits, note)
    with matplotlib.rc_context({"svg.hashsalt": f"bias-core-tradeoff-{metric}", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def write_outputs(points: Sequence[SweepPoint], folder: Path | str, limits: Mapping[str, float] | None = None,
                  note: str = "") -> dict[str, Path]:
    """``tradeoff.csv`` and ``tradeoff_<metric>.svg`` per measured bias metric in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {"csv": write_csv(points, folder / "tradeoff.csv", limits)}
    for metric in BIAS_METRICS:
        if any(metric in p.bias for p in points):
            path = folder / f"tradeoff_{metric}.svg"
            path.write_text(figure_svg(points, metric, limits, note), encoding="utf-8")
            out[metric] = path
    return out
