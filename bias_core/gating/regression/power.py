"""How large a regression a paired row of the release gate detects: simulated candidates made
from a baseline run's own item values, judged by the gate's own statistics.

A simulated candidate starts as the baseline, item for item. Then:

1. **churn** (a share ``churn`` of the items, at random): each such item takes the baseline value
   of another item drawn at random. It moves the candidate away from the baseline item by item
   without moving the metric on average: the noise of a real fine-tune, whose items change both
   ways. ``churn`` 0 is a candidate that differs only by the regression (the optimistic case);
   1 makes every item independent of its baseline twin (the pessimistic one: no pairing gain).
2. **the regression**, in the harmful direction, of ``step`` units: 0/1 items (``kind`` binary)
   have ``step`` of their good items flipped to the bad value (for an ideal metric, the bad
   value is the side the baseline already leans to); other items move by ``step`` in the metric's
   item units, away from the ideal where there is one (for a difference of two groups' means,
   the first group's items by half a step one way and the other's by half the other way).

Each candidate is judged as the gate judges a row (``compare_to_baseline``, ``judge``, the
row's margin); its harm is what the regression really did to the metric (for an ideal metric
flips can cross the ideal, and group means weigh items unequally). ``detectable`` walks the
regression up until at least ``power`` of the simulations fail: the smallest regression the row
catches that often, in the metric's own units, against its margin.

Only the interval rule of a fail is simulated (the harm's whole CI beyond the margin), not its
second condition (the p-value adjusted across the run below 0.05): the figures are the single
row's best case, and a run with many rows catches a little less.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bias_core.gating.regression.gate import Margin, baseline_level, judge
from bias_core.stats.paired import compare_to_baseline

if TYPE_CHECKING:
    from bias_core.gating.regression.pairing import PairedItems
    from bias_core.gating.regression.spec import PairedSpec


@dataclass(frozen=True)
class PowerPoint:
    step: float  # the regression asked for: items flipped (binary) or the shift per item
    harm: float  # the metric's worsening it gave, mean over the simulations (metric units)
    power: float  # share of the simulations the gate failed


@dataclass(frozen=True)
class Detectable:
    probe: str
    metric: str
    n: int
    margin: float
    churn: float
    points: tuple[PowerPoint, ...]
    power: float  # the power asked for

    @property
    def found(self) -> PowerPoint | None:
        """The first point reaching ``power``; None when no regression tried got there."""
        return next((p for p in self.points if p.power >= self.power), None)

    @property
    def effect(self) -> float | None:
        found = self.found
        return None if found is None else found.harm


def _bad_value(spec: PairedSpec, baseline_aggregate: float) -> float:
    if spec.direction == "lower":
        return 1.0
    if spec.direction == "higher":
        return 0.0
    return 1.0 if baseline_aggregate >= float(spec.ideal) else 0.0


def _sign(spec: PairedSpec, baseline_aggregate: float) -> float:
    """+1 where larger item values are worse, -1 where smaller ones are."""
    if spec.direction == "ideal":
        return 1.0 if baseline_aggregate >= float(spec.ideal) else -1.0
    return 1.0 if spec.direction == "lower" else -1.0


def _shift(paired: PairedItems, spec: PairedSpec) -> np.ndarray | float:
    """How far each item moves per unit of regression: 1 for a mean (or a mean of group means);
    for a difference of two groups' means, +1/2 for the first group's items and -1/2 for the
    other's, so the difference moves by the unit (a shift of every item would cancel out)."""
    if spec.aggregation != "group_difference":
        return 1.0
    assert spec.difference is not None and paired.groups is not None
    return np.where(np.asarray(paired.groups, dtype=object) == spec.difference[0], 0.5, -0.5)


def _binary(paired: PairedItems, spec: PairedSpec) -> bool:
    return spec.kind == "binary" and bool(np.all(np.isin(paired.baseline, (0.0, 1.0))))


def simulate(paired: PairedItems, spec: PairedSpec, margin: Margin, step: float, *, churn: float, sims: int,
             seed: int = 0, n_bootstrap: int = 1000) -> PowerPoint:
    """``sims`` candidates with a regression of ``step`` (module doc), judged against ``margin``."""
    rng = np.random.default_rng(seed)
    b = paired.baseline
    n = b.size
    binary = _binary(paired, spec)
    level = paired.baseline_value  # the baseline's metric value, as its run reported it
    bad, sign = _bad_value(spec, level), _sign(spec, level)
    shift = _shift(paired, spec)
    failed, harms = 0, []
    for k in range(sims):
        c = b.copy()
        moved = rng.random(n) < churn
        c[moved] = b[rng.integers(0, n, size=int(moved.sum()))]
        if binary:
            good = np.flatnonzero(c != bad)
            flip = rng.choice(good, size=min(int(step), good.size), replace=False)
            c[flip] = bad
        else:
            c = c + sign * step * shift
        cmp = judge(compare_to_baseline(dataclasses.replace(paired, candidate=c), spec, seed=k, n_resamples=1,
                                        n_bootstrap=n_bootstrap), margin)
        failed += cmp.verdict == "fail"
        harms.append(cmp.harm)
    return PowerPoint(float(step), float(np.mean(harms)), failed / sims)


def detectable(paired: PairedItems, spec: PairedSpec, margin: Margin, *, churn: float = 0.0, power: float = 0.8,
               sims: int = 100, seed: int = 0, n_bootstrap: int = 1000, max_steps: int = 12) -> Detectable:
    """The regression ladder of one row: steps grow by about a third each time, until ``power`` of
    the simulations fail (or ``max_steps``), from the flips that would move the metric by its
    margin (binary items), or from half the margin (other items: a shift of exactly the margin
    would be judged on floating-point rounding)."""
    base_cmp = compare_to_baseline(paired, spec, n_resamples=1, n_bootstrap=n_bootstrap)
    m = margin.for_baseline(baseline_level(base_cmp))
    n = paired.baseline.size
    binary = _binary(paired, spec)
    # one flipped item moves a mean of n items x scale by scale / n
    unit = spec.item_scale / n if binary else spec.item_scale
    step = max(1.0, np.ceil(m / unit)) if binary else m / unit / 2
    points = []
    for _ in range(max_steps):
        point = simulate(paired, spec, margin, step, churn=churn, sims=sims, seed=seed, n_bootstrap=n_bootstrap)
        points.append(point)
        if point.power >= power or (binary and step >= n):
            break
        step = float(min(n, np.ceil(step * 4 / 3))) if binary else step * 4 / 3
    return Detectable(paired.probe, paired.metric, n, m, churn, tuple(points), power)


# What a run's report says of each row: a lean ladder (fewer simulations and resamples than the
# benchmark's table, the same answers to a step there: benchmarks/gate_power.py), no churn.
REPORT_SIMS, REPORT_BOOTSTRAP, REPORT_POWER = 20, 200, 0.8
# A margin is "below what the row detects" when a regression of twice the margin would still pass
# unnoticed more often than 1 - REPORT_POWER (docs/release-gate-margins.md).
BELOW_RATIO = 2.0


def power_note(paired: PairedItems, spec: PairedSpec, margin: Margin, seed: int = 0) -> dict[str, float | bool | None]:
    """The row's fields for results.json: ``detects`` (the regression, in the metric's units, that
    the baseline's items catch with probability ``REPORT_POWER``; None: none the ladder tried),
    ``detects_power`` and ``margin_below_detectable``."""
    found = detectable(paired, spec, margin, power=REPORT_POWER, sims=REPORT_SIMS, seed=seed,
                       n_bootstrap=REPORT_BOOTSTRAP)
    effect = found.effect
    return {"detects": effect, "detects_power": REPORT_POWER,
            "margin_below_detectable": effect is None or effect > BELOW_RATIO * found.margin}


def detect_text(row: dict) -> str:
    """"margin 0.05 is below what this row detects: 0.19 with 80% power" for a row so marked; else ""."""
    if not row.get("margin_below_detectable"):
        return ""
    power = f"{100 * float(row.get('detects_power') or REPORT_POWER):g}%"
    reach = ("no regression the simulation tried" if row.get("detects") is None
             else f"{float(row['detects']):.3g} with {power} power")
    return (f"margin {float(row['margin']):.3g} is below what this row detects on the baseline's items: {reach} "
            "(more items, or a wider margin; docs/release-gate-margins.md)")
