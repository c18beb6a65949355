"""An asymptotic confidence sequence for means of unbounded per-item values.

The confidence sequences of ``sequential.py`` need values in a known [low, high]. A logit
difference (discrim-eval's discrimination score) has no such bound, so its ``--sample auto``
looks use the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas
(2024), "Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist.
52(6), Theorem 2.2: Robbins' normal-mixture boundary for a standardised sum with the running
sample variance plugged in,

    mean_t ± sd_t · sqrt( 2 (t ρ² + 1) / (t² ρ²) · log( sqrt(t ρ² + 1) / alpha ) ),

two-sided at level alpha, with ρ chosen to make it tightest at t* items:
ρ² = (−2 log alpha + log(−2 log alpha + 1)) / t*. Its coverage at every look is approximate: it
tends to 1 − alpha as the sample grows (finite variance suffices; i.i.d. items), where the
bounded sequences' holds exactly at every n. docs/sampling.md says so next to the metrics that
use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def rho(alpha: float, t_star: float) -> float:
    """The mixture's scale that makes the boundary tightest at ``t_star`` items."""
    if not 0.0 < alpha < 1.0 or t_star <= 0:
        raise ValueError(f"rho: alpha in (0, 1) and t_star > 0 needed, got {alpha}, {t_star}")
    lg = -2.0 * math.log(alpha)
    return math.sqrt((lg + math.log(lg + 1.0)) / t_star)


def half_width(t: int, sd: float, alpha: float, t_star: float) -> float:
    """The boundary's half-width after ``t`` items of sample standard deviation ``sd``."""
    r2 = rho(alpha, t_star) ** 2
    return sd * math.sqrt(2.0 * (t * r2 + 1.0) / (t * t * r2) * math.log(math.sqrt(t * r2 + 1.0) / alpha))


def asymptotic_cs(values: Sequence[float], alpha: float = 0.05, t_star: float = 64.0) -> tuple[float, float]:
    """The interval after all of ``values`` (module doc); the whole line for fewer than two."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("asymptotic_cs: values must be a 1-D array of finite numbers")
    if x.size < 2:
        return -math.inf, math.inf
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    w = half_width(int(x.size), sd, alpha, t_star)
    return mean - w, mean + w
