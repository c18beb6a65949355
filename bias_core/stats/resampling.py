"""Uncertainty for metrics: seeded bootstrap confidence intervals and paired permutation tests.

Both work on per-item values (one number per probe item), so the unit of resampling is the
item, which is what a user means by "would another sample of prompts give the same verdict".
Everything is seeded: the same input and seed always give the same numbers, so a CI gate cannot
flip between two runs of the same model.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Union

import numpy as np
from scipy import stats as _st

Statistic = Union[str, Callable[..., float]]

_STATISTICS: dict[str, Callable[..., np.ndarray]] = {"mean": np.mean, "median": np.median}
_ALTERNATIVES = ("greater", "less", "two-sided")
#: Up to this many items the sign-flip null distribution is enumerated exactly (2**16 = 65,536).
EXACT_MAX_N = 16


def rng_kwargs(func: Callable, seed: int) -> dict[str, np.random.Generator]:
    """scipy >= 1.15 takes ``rng=``; older versions (pyproject allows >= 1.11) ``random_state=``."""
    name = "rng" if "rng" in inspect.signature(func).parameters else "random_state"
    return {name: np.random.default_rng(seed)}


def _as_finite_1d(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D sequence of per-item values, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what}: no values (n == 0); a metric over zero items has no estimate")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values contain NaN or infinity")
    return arr


def _statistic(statistic: Statistic) -> Callable[..., np.ndarray]:
    if callable(statistic):
        return statistic
    try:
        return _STATISTICS[statistic]
    except KeyError:
        raise ValueError(
            f"bootstrap_ci: unknown statistic {statistic!r}; use one of {sorted(_STATISTICS)} "
            "or a callable taking (values, axis=...)"
        ) from None


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: Statistic = "mean",
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Seeded percentile-bootstrap confidence interval of ``statistic`` over per-item values.

    Resampling is done by ``scipy.stats.bootstrap`` (method ``"percentile"``) with a numpy
    Generator seeded by ``seed``. Percentile rather than BCa because BCa's jackknife
    acceleration is undefined (NaN + warning) for the 0/1 and near-constant data metrics such
    as GAS produce.

    - n == 1 or all values equal: the interval collapses to the point estimate (no resampling,
      no warning, no NaN).
    - n == 0, non-1-D or non-finite input: ``ValueError``.
    - The interval is widened, if needed, to contain the point estimate ``statistic(values)``.
      For the mean this only matters for tiny, extremely skewed samples, but it guarantees
      ``low <= value <= high``, which the gates rely on.
    """
    arr = _as_finite_1d(values, "bootstrap_ci")
    if not 0.0 < level < 1.0:
        raise ValueError(f"bootstrap_ci: level must be in (0, 1), got {level}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    stat = _statistic(statistic)
    point = float(stat(arr))
    if arr.size == 1 or np.all(arr == arr[0]):
        return point, point
    res = _st.bootstrap(
        (arr,),
        stat,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        vectorized=None if callable(statistic) else True,
        **rng_kwargs(_st.bootstrap, seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return min(low, point), max(high, point)


@functools.lru_cache(maxsize=EXACT_MAX_N + 1)
def _sign_patterns(n: int) -> np.ndarray:
    """All 2**n sign vectors as a (2**n, n) float array; row 0 is all +1."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    signs = 1.0 - 2.0 * bits
    signs.setflags(write=False)  # shared through the cache
    return signs


def _exact_sign_flip_pvalue(arr: np.ndarray, alternative: str) -> float:
    """Enumerate every sign pattern. Sums that differ from the observed one only by rounding
    count as ties (tolerance 1e-12 of sum|d|, as scipy does with its own relative tolerance)."""
    null = _sign_patterns(arr.size) @ arr
    observed = float(arr.sum())
    tol = 1e-12 * float(np.abs(arr).sum())
    p_greater = float(np.mean(null >= observed - tol))
    p_less = float(np.mean(null <= observed + tol))
    if alternative == "greater":
        return p_greater
    if alternative == "less":
        return p_less
    return min(1.0, 2.0 * min(p_greater, p_less))


def _mean_statistic(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def paired_permutation_pvalue(
    diffs: Sequence[float] | np.ndarray,
    n_resamples: int = 10000,
    seed: int = 0,
    alternative: str = "greater",
) -> float:
    """Sign-flip permutation p-value for the mean of per-item paired differences.

    Under H0 (no systematic difference within pairs) each difference is as likely to be +d as
    -d, so the null distribution of the mean comes from flipping signs independently.
    ``alternative="greater"`` tests mean(diffs) > 0.

    - n <= 16: exact enumeration of all 2**n sign patterns in one vectorised product (p = share
      of patterns whose mean is >= the observed one, the observed pattern included, so
      p >= 2**-n). Done here rather than by scipy, whose exact path takes ~1 s at n = 16 and
      refuses n = 1.
    - n > 16: seeded Monte Carlo by ``scipy.stats.permutation_test`` with
      ``permutation_type="samples"`` on one sample (scipy's sign-flip test) and ``n_resamples``
      draws; p = (count + 1) / (n_resamples + 1), never 0.

    Two-sided p = min(1, 2 * min(p_greater, p_less)) in both paths (scipy's convention).

    Example: diffs [1, 1, 1], greater -> only the all-plus pattern reaches a mean of 1: p = 1/8.
    """
    arr = _as_finite_1d(diffs, "paired_permutation_pvalue")
    if alternative not in _ALTERNATIVES:
        raise ValueError(
            f"paired_permutation_pvalue: alternative must be one of {_ALTERNATIVES}, got {alternative!r}"
        )
    if n_resamples < 1:
        raise ValueError(f"paired_permutation_pvalue: n_resamples must be >= 1, got {n_resamples}")
    if arr.size <= EXACT_MAX_N:
        return _exact_sign_flip_pvalue(arr, alternative)
    res = _st.permutation_test(
        (arr,),
        _mean_statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        **rng_kwargs(_st.permutation_test, seed),
    )
    return float(res.pvalue)
