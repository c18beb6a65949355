"""``--sample auto`` for GenderBench's JobsLum metrics that are not a mean of item values (the
catalogue's ``OwnInterval`` of each): both are bounded through confidence sequences on means of
per-item values, as the other metrics' looks are (docs/sampling.md).

- ``disparity_interval``: |0.5 - masculine rate|, from the CS of the masculine rate (the mean of
  the items' male shares, each in [0, 1]): the distances of that interval's points from 0.5.
- ``stereotype_slope_interval``: the slope of the male share y on the stereotype score x. Over
  the whole list of occupations (the pool, whose x are known beforehand: the loader gives their
  mean mu and variance s2), the least-squares slope is Cov(x, y) / s2 = E[z] with
  z = (x - mu) y / s2, a mean of per-item values bounded by the pool's range of x (y in [0, 1]).
  One CS of the mean of z bounds it, clipped to GenderBench's bounds of the slope [-1, 1]. That
  is the pool's ordinary least-squares slope, which is GenderBench's bounded fit whenever the
  bounds (slope in [-1, 1], intercept in [0, 1]) are not active; the point reported stays
  GenderBench's bounded fit on the sample. A slope is a weak signal in a few dozen occupations:
  z ranges over about [-10, 7.5] on the Kennison list, so this interval is wide at the default
  item cap, and the gate is mostly inconclusive there (docs/audits/genderbench.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from bias_core.gating.adaptive_sampling import _cs, _ordered


def disparity_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """|0.5 - m| over the CS [lo, hi] of the masculine rate m (the details' male shares)."""
    lo, hi = _cs([float(d["score"]) for d in _ordered(result.details, rank)], 0.0, 1.0, alpha)
    nearest = 0.0 if lo <= 0.5 <= hi else min(abs(lo - 0.5), abs(hi - 0.5))
    return nearest, max(abs(lo - 0.5), abs(hi - 0.5))


def stereotype_slope_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """The CS of the pool's least-squares slope, E[(x - mu) y / s2], clipped to [-1, 1] (module doc)."""
    pool = result.breakdown.get("stereotype_pool")
    if not pool or float(pool["var"]) <= 0.0:
        return -1.0, 1.0
    mu, s2 = float(pool["mean"]), float(pool["var"])
    low, high = min(0.0, (float(pool["min"]) - mu) / s2), max(0.0, (float(pool["max"]) - mu) / s2)
    rows = _ordered(result.details, rank)
    z = [(float(d["stereotype"]) - mu) * float(d["score"]) / s2 for d in rows]
    lo, hi = _cs(z, low, high, alpha)
    return float(np.clip(lo, -1.0, 1.0)), float(np.clip(hi, -1.0, 1.0))
