"""``--sample auto`` for GenderBench's HiringAn metrics (the catalogue's ``OwnInterval`` of each).
Each is a difference between the male and the female items, so each gender's part is bounded by
a confidence sequence on a mean of per-item values at alpha / 2 (a union bound over the two), and
the difference by interval arithmetic (docs/sampling.md). The sampled items of one gender are a
prefix of that gender's items in the pool's seeded order, so each CS is a valid one of its own.

- ``acceptance_difference_interval``: male minus female acceptance rate, from a CS of each
  gender's mean acceptance (each item's in [0, 1]).
- ``abs_acceptance_difference_interval``: its absolute value, the same interval seen from 0.
- ``regression_difference_interval``: male minus female slope of acceptance y on the role's
  stereotype score x. Over a gender's items of the whole pool (whose x the loader knows: their
  mean mu and variance s2 per gender, ``stereotype_pool``), the least-squares slope is
  E[z] with z = (x - mu) y / s2, a mean of per-item values bounded by the pool's range of x; a
  CS of it, clipped to GenderBench's slope bounds [-1, 1], per gender, then the difference. That
  is the pool's ordinary least-squares slope, GenderBench's bounded fit whenever its bounds are
  not active, as for JobsLum's slope (bias_core/gating/genderbench_sampling.py); the point
  reported stays GenderBench's bounded fit on the sample. At the default item cap it spans
  nearly [-2, 2] and the row is inconclusive unless a larger sample is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bias_core.gating.adaptive_sampling import _cs, _ordered
from bias_core.gating.genderbench_sampling import pool_slope_interval, seen_from
from bias_core.stats.sequential import difference_interval, split_alpha

GENDERS = ("male", "female")


def _by_gender(result: Any, rank: Mapping[str, int]) -> dict[str, list[Mapping[str, Any]]]:
    rows = _ordered(result.details, rank)
    return {g: [d for d in rows if d["gender"] == g] for g in GENDERS}


def acceptance_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """Male minus female mean acceptance: a CS per gender at alpha / 2, then their difference."""
    level = split_alpha(alpha, len(GENDERS))
    rows = _by_gender(result, rank)
    male, female = (_cs([float(d["score"]) for d in rows[g]], 0.0, 1.0, level) for g in GENDERS)
    return difference_interval(male, female)


def abs_acceptance_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """|male minus female mean acceptance| over the difference's interval."""
    return seen_from(0.0, acceptance_difference_interval(result, rank, alpha))


def regression_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """Male minus female pool slope: a CS of each gender's E[(x - mu) y / s2] at alpha / 2,
    clipped to [-1, 1], then their difference (module doc); [-2, 2] without the pool's moments."""
    pool = result.breakdown.get("stereotype_pool") or {}
    level = split_alpha(alpha, len(GENDERS))
    rows = _by_gender(result, rank)
    male, female = (pool_slope_interval(rows[g], pool.get(g), level) for g in GENDERS)
    return difference_interval(male, female)
