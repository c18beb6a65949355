"""``--sample auto`` for metrics whose per-item values have no bound: the catalogue's
``OwnInterval`` of discrim-eval's discrimination scores (a mean of logit differences).

Their looks use the asymptotic confidence sequence of ``bias_core.stats.asymptotic`` over the
per-item ``score`` values in the sampling order, tightest at 32 items; its
coverage is approximate (it tends to 95% as the sample grows), where the bounded metrics'
sequences cover exactly at every look (docs/sampling.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bias_core.gating.adaptive_sampling import _ordered
from bias_core.stats.asymptotic import asymptotic_cs

# The sequence is tightest here: discrim-eval's one look under its cap (adaptive_sampling.PROBE_CAPS).
T_STAR = 32


def mean_of_unbounded(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """The asymptotic CS of the mean of the result's per-item scores, in sampling order."""
    return asymptotic_cs([float(d["score"]) for d in _ordered(result.details, rank)], alpha, t_star=T_STAR)
