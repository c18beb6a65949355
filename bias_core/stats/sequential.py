"""Time-uniform confidence sequences for bounded means: intervals a gate may look at after every batch.

A fixed-sample CI (``bias_core.stats.resampling.bootstrap_ci``) is valid once, for a sample size chosen in
advance. Drawing items until the CI excludes the threshold and recomputing it after every batch
makes the "95%" interval miss far more often than 5% (the test module shows it does). A
*confidence sequence* (CS) is a sequence of intervals C_1, C_2, ... with

    P(the mean lies in C_t for every t at once) >= 1 - alpha,

so it stays valid at any data-dependent stopping time: look after every batch, stop when the
gate decides, and the interval at the stop still has its coverage.

Two constructions, both for i.i.d. items bounded in a known [low, high] (rescaled to [0, 1]),
both from Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by
betting", JRSS-B 86(1):

- ``BettingCS`` (the default): the hedged capital process (their Theorem 3 with the predictable
  plug-in bets of their section 5.1). For every candidate mean m on a grid, two gamblers bet
  that the mean is above / below m with predictable stakes; m leaves the CS as soon as the
  hedged capital max(K+(m), K-(m)) / 2 reaches 1/alpha (Ville's inequality bounds the chance
  that this ever happens at the true mean by alpha). Once out, m stays out (the running
  intersection). Tightest of the two, at O(grid) work per item. The reported bounds are widened
  by one grid step so that a mean between grid points is never cut off.
- ``EmpiricalBernsteinCS``: the predictable plug-in empirical-Bernstein CS (their Theorem 2;
  the same sub-exponential boundaries as Howard et al. 2021, "Time-uniform, nonparametric,
  nonasymptotic confidence sequences", Ann. Statist. 49(2)), in closed form, intersected over
  time. Wider than betting for small or skewed samples; cheap and grid-free.

Both are updated with batches of items and can track many independent streams at once (the
``shape`` argument), which is how the calibration tests simulate thousands of runs.

Gates. ``bias_core.gating.adaptive_sampling.look(cs, gate)`` applies the gate's ``verdict`` to the
current interval (stats never imports the gates): a max
gate fails when the whole interval lies above the limit, passes when it lies at or below it,
and is inconclusive otherwise; min gates mirror this; a two-sided gate (``ideal`` with a max
limit) judges |mean - ideal|. Whatever the direction, a decision at a time when the interval
covers the true mean is right, so the chance of ever deciding wrongly, at any look, is at most
alpha (5% at the default level): with the true mean exactly at the threshold every decision is
wrong, and the tests measure that rate.

How each metric gets a bounded per-item form (or a union bound over its parts):

- GAS, DA_score, crows_stereo (/100), regard_*_negative, regard_proxy_*: per-item 0/1 scores,
  a Bernoulli mean in [0, 1].
- GLD: per item |ΣPf - ΣPm| / (ΣPf + ΣPm), in [0, 1]; the metric is their mean.
- ADD: per item half the sum over pairs of (a+b)(log 2 - H(a/(a+b))) <= (a+b) log 2, and the
  pairs' probabilities sum to at most 2 (each word is in one pair, and distinct words' probabilities
  sum to at most 1 when no word's tokens begin with another's: the bound leaves twice that), so
  per-item ADD lies in [0, (1 + K eps) log 2] for K pairs and the metric's eps.
- lm_score: per item (comparisons won)/2 in {0, 1/2, 1}; stereo_score: per item 0/1. StereoSet
  averages per target term first (a macro mean); with target terms as the sampled unit, each
  term's score is one bounded item in [0, 100].
- toxicity: per-response probabilities in [0, 1].
- BPR: per decided response 0/1 (biased chosen or not). Undecided responses are dropped before
  the CS sees them; the decided ones of an i.i.d. prompt stream are themselves i.i.d., so their
  CS is valid for BPR, whose denominator is the decided responses.
- BPR_gap, toxicity_gap, regard gaps, BPR_spread: max - min of k group (or variant) means. Run
  one CS per group at level alpha/k (``split_alpha``): by the union bound every group's CS
  covers its mean at every time with probability >= 1 - alpha, and then ``gap_interval``
  (max of lows - min of highs, clipped at 0, to max of highs - min of lows) covers the gap. For
  two groups this is alpha/2 each and ``difference_interval``.
- GBM: (F+ - M+)/N+ + (M- - F-)/N- is a function of six per-sentiment means of per-prompt
  shares in [0, 1]; a CS per mean at alpha/6 and interval arithmetic bound it (while N > 0).
- logprob_effect and SEAT_effect are standardised effect sizes over fixed word sets, not means
  of i.i.d. items: they keep fixed samples and bootstrap CIs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_ALPHA = 0.05
# Cap on the stake (a fraction of the capital, relative to the largest loss): WSR suggest 1/2 or
# 3/4; 1/2 keeps each factor of the capital >= 1/2.
BET_CAP = 0.5
GRID_POINTS = 1001


def _check_level(alpha: float) -> float:
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


class _BoundedMeanCS:
    """Shared state: running sums of the rescaled items and the plug-in mean/variance that make
    the next bet predictable (it depends only on items already seen)."""

    kind = ""

    def __init__(self, low: float = 0.0, high: float = 1.0, alpha: float = DEFAULT_ALPHA, shape: Sequence[int] | int = ()):
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"bounds must be finite with low < high, got [{low!r}, {high!r}]")
        self.low, self.high = float(low), float(high)
        self.alpha = _check_level(alpha)
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.n = 0
        # WSR's plug-in estimates start from a fictitious item: mean 1/2, variance 1/4.
        self._sum = np.zeros(self.shape)
        self._sq = np.zeros(self.shape)
        self._lo = np.zeros(self.shape)
        self._hi = np.ones(self.shape)

    def _scaled(self, values: Any) -> np.ndarray:
        x = np.asarray(values, dtype=np.float64)
        if x.ndim == len(self.shape):  # one item per stream
            x = x[..., None]
        if x.shape[:-1] != self.shape:
            raise ValueError(f"values must have shape {self.shape} + (batch,), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("values contain NaN or infinity")
        tol = 1e-12 * (self.high - self.low)
        if np.any(x < self.low - tol) or np.any(x > self.high + tol):
            raise ValueError(f"values must lie in [{self.low}, {self.high}]; got [{x.min()}, {x.max()}]. "
                             "Fix: give the metric's per-item bounds (see bias_core.stats.sequential).")
        return np.clip((x - self.low) / (self.high - self.low), 0.0, 1.0)

    def _plug_in(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each new item t (last axis): the stake lambda_t, and mu_{t-1}, from items < t.
        Updates the running sums with the batch."""
        k = x.shape[-1]
        t = self.n + np.arange(1, k + 1)  # 1-based times of the batch's items
        csum = self._sum[..., None] + np.cumsum(x, axis=-1)
        mu = (0.5 + csum) / (t + 1)  # mu_t, including item t
        sq = self._sq[..., None] + np.cumsum((x - mu) ** 2, axis=-1)
        var = (0.25 + sq) / (t + 1)  # sigma^2_t
        mu_prev = np.concatenate([((0.5 + self._sum) / (self.n + 1))[..., None], mu[..., :-1]], axis=-1)
        var_prev = np.concatenate([((0.25 + self._sq) / (self.n + 1))[..., None], var[..., :-1]], axis=-1)
        stake = np.sqrt(2.0 * math.log(2.0 / self.alpha) / (var_prev * t * np.log1p(t)))
        self._sum, self._sq = csum[..., -1], sq[..., -1]
        self.n += k
        return stake, mu_prev, t

    def update(self, values: Any) -> "_BoundedMeanCS":
        """Add a batch of items (shape ``shape + (batch,)``, or ``shape`` for one item each)."""
        x = self._scaled(values)
        if x.shape[-1]:
            self._update(x)
        return self

    def _update(self, x: np.ndarray) -> None:
        raise NotImplementedError

    def interval(self) -> tuple[Any, Any]:
        """(low, high) in the items' units, valid simultaneously for every update so far."""
        span = self.high - self.low
        lo, hi = self.low + span * self._lo, self.low + span * self._hi
        if not self.shape:
            return float(lo), float(hi)
        return lo, hi


class EmpiricalBernsteinCS(_BoundedMeanCS):
    """WSR's predictable plug-in empirical-Bernstein CS (Theorem 2), intersected over time:

        C_t = [ (Σ λ_i X_i ± (log(2/α) + Σ v_i ψ(λ_i))) / Σ λ_i ],
        λ_i = min(sqrt(2 log(2/α) / (σ²_{i-1} i log(1+i))), 1/2), v_i = 4 (X_i - μ_{i-1})²,
        ψ(λ) = (-log(1-λ) - λ) / 4.
    """

    kind = "empirical-Bernstein confidence sequence (Waudby-Smith & Ramdas 2023, Thm 2)"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lam = np.zeros(self.shape)
        self._lam_x = np.zeros(self.shape)
        self._pen = np.zeros(self.shape)

    def _update(self, x: np.ndarray) -> None:
        stake, mu_prev, _ = self._plug_in(x)
        lam = np.minimum(stake, BET_CAP)
        psi = (-np.log1p(-lam) - lam) / 4.0
        lam_sum = self._lam[..., None] + np.cumsum(lam, axis=-1)
        lam_x = self._lam_x[..., None] + np.cumsum(lam * x, axis=-1)
        pen = self._pen[..., None] + np.cumsum(4.0 * (x - mu_prev) ** 2 * psi, axis=-1)
        half = (math.log(2.0 / self.alpha) + pen) / lam_sum
        centre = lam_x / lam_sum
        self._lo = np.maximum(self._lo, np.max(centre - half, axis=-1))
        self._hi = np.minimum(self._hi, np.min(centre + half, axis=-1))
        self._lam, self._lam_x, self._pen = lam_sum[..., -1], lam_x[..., -1], pen[..., -1]
        # An empty intersection (probability <= alpha) collapses to a point, not a reversed interval.
        crossed = self._lo > self._hi
        if np.any(crossed):
            mid = (self._lo + self._hi) / 2.0
            self._lo, self._hi = np.where(crossed, mid, self._lo), np.where(crossed, mid, self._hi)


class BettingCS(_BoundedMeanCS):
    """WSR's hedged-capital betting CS (Theorem 3) on a grid of candidate means.

    For candidate m: K+ = Π (1 + λ+_i (X_i - m)), K- = Π (1 - λ-_i (X_i - m)) with
    λ+_i = min(λ_i, c/m), λ-_i = min(λ_i, c/(1-m)), λ_i the plug-in stake of the EB CS and
    c = 1/2; m is excluded for good once max(K+, K-)/2 >= 1/α.
    """

    kind = "betting confidence sequence, hedged capital (Waudby-Smith & Ramdas 2023, Thm 3)"
    CHUNK = 128

    def __init__(self, *args: Any, grid: int = GRID_POINTS, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if grid < 3:
            raise ValueError(f"grid must have at least 3 points, got {grid}")
        self.grid = np.linspace(0.0, 1.0, grid)
        self._step = 1.0 / (grid - 1)
        with np.errstate(divide="ignore"):
            self._cap_up = BET_CAP / self.grid  # inf at m = 0: nothing to lose betting up
            self._cap_down = BET_CAP / (1.0 - self.grid)
        self._log_up = np.zeros(self.shape + (grid,))
        self._log_down = np.zeros(self.shape + (grid,))
        self._out = np.zeros(self.shape + (grid,), dtype=bool)

    def _update(self, x: np.ndarray) -> None:
        stake, _, _ = self._plug_in(x)
        # Products of at most CHUNK factors, each in [1 - c, 1 + stake], neither overflow nor
        # underflow, so logs are taken once per chunk rather than once per item.
        for start in range(0, x.shape[-1], self.CHUNK):
            part = slice(start, start + self.CHUNK)
            # (..., grid, k): candidates by items, so the running products use contiguous memory
            diff = x[..., None, part] - self.grid[:, None]
            lam = stake[..., None, part]
            up = np.cumprod(1.0 + np.minimum(lam, self._cap_up[:, None]) * diff, axis=-1)
            down = np.cumprod(1.0 - np.minimum(lam, self._cap_down[:, None]) * diff, axis=-1)
            # Excluded once the hedged capital max(K+, K-)/2 ever reaches 1/alpha.
            peak = np.maximum(np.log(up.max(axis=-1)) + self._log_up, np.log(down.max(axis=-1)) + self._log_down)
            self._out |= peak >= math.log(2.0 / self.alpha)
            self._log_up = self._log_up + np.log(up[..., -1])
            self._log_down = self._log_down + np.log(down[..., -1])
        self._set_bounds(np.maximum(self._log_up, self._log_down))

    def _set_bounds(self, log_capital: np.ndarray) -> None:
        inside = ~self._out
        # Everything excluded (probability <= alpha, or a mean between grid points): keep the
        # grid point with the least capital, so the interval is never empty.
        none = ~np.any(inside, axis=-1)
        if np.any(none):
            least = np.argmin(log_capital, axis=-1)
            inside = inside | (none[..., None] & (np.arange(self.grid.size) == least[..., None]))
        first = np.argmax(inside, axis=-1)
        last = self.grid.size - 1 - np.argmax(inside[..., ::-1], axis=-1)
        self._lo = np.clip(self.grid[first] - self._step, 0.0, 1.0)
        self._hi = np.clip(self.grid[last] + self._step, 0.0, 1.0)


METHODS = {"betting": BettingCS, "empirical-bernstein": EmpiricalBernsteinCS}


def confidence_sequence(low: float = 0.0, high: float = 1.0, alpha: float = DEFAULT_ALPHA,
                        method: str = "betting", shape: Sequence[int] | int = ()) -> _BoundedMeanCS:
    """A fresh CS for items in [low, high]: ``method`` "betting" (default) or "empirical-bernstein"."""
    if method not in METHODS:
        raise ValueError(f"unknown confidence sequence {method!r}; choose one of {', '.join(METHODS)}")
    return METHODS[method](low, high, alpha, shape=shape)


def split_alpha(alpha: float, parts: int) -> float:
    """Per-part level of a union bound: ``parts`` CSs at alpha/parts all cover with prob >= 1 - alpha."""
    _check_level(alpha)
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    return alpha / parts


def gap_interval(intervals: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Bounds on max - min of the means, given an interval for each (from CSs at split_alpha)."""
    if len(intervals) < 2:
        raise ValueError("a gap needs intervals for at least two groups")
    lows = [float(lo) for lo, _ in intervals]
    highs = [float(hi) for _, hi in intervals]
    if any(lo > hi for lo, hi in zip(lows, highs)):
        raise ValueError("an interval is reversed (low > high)")
    return max(0.0, max(lows) - min(highs)), max(highs) - min(lows)


def difference_interval(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Bounds on mean_a - mean_b from an interval for each (from CSs at alpha/2)."""
    return float(a[0]) - float(b[1]), float(a[1]) - float(b[0])
