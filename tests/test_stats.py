"""bias_core.stats.resampling: seeded bootstrap CIs and the sign-flip permutation test."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.stats.resampling import EXACT_MAX_N, bootstrap_ci, paired_permutation_pvalue

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
value_lists = st.lists(finite, min_size=1, max_size=30)


# ---------------------------------------------------------------------------- bootstrap_ci


def test_empty_input_raises_clear_error():
    with pytest.raises(ValueError, match=r"n == 0"):
        bootstrap_ci([])


@pytest.mark.parametrize("bad", [[1.0, float("nan")], [float("inf"), 1.0]])
def test_non_finite_input_raises(bad):
    with pytest.raises(ValueError, match="NaN or infinity"):
        bootstrap_ci(bad)


def test_unknown_statistic_raises():
    with pytest.raises(ValueError, match="unknown statistic"):
        bootstrap_ci([1.0, 2.0], statistic="mode")


@pytest.mark.parametrize("values", [[0.7], [0.3, 0.3, 0.3, 0.3], [1.0] * 50, [0.1] * 7])
def test_single_or_constant_values_collapse_without_warnings(values):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = bootstrap_ci(values)
    assert low == high == float(np.mean(values))
    assert not np.isnan(low)


def test_binary_values_do_not_warn():
    # 0/1 data (GAS) is where BCa would emit a DegenerateDataWarning; percentile must not.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = bootstrap_ci([0.0] * 19 + [1.0])
    assert 0.0 <= low <= 0.05 <= high <= 1.0


def test_width_matches_normal_theory_on_large_sample():
    # n=400 draws from N(0, 1): the 95% CI of the mean is about mean ± 1.96·s/√n. A broken
    # bootstrap (wrong level, resampling the wrong axis, no resampling) misses this by far.
    x = np.random.default_rng(123).normal(size=400)
    low, high = bootstrap_ci(x)
    half_width = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert high - low == pytest.approx(2 * half_width, rel=0.15)
    assert (low + high) / 2 == pytest.approx(x.mean(), abs=0.25 * half_width)


def test_lower_level_gives_narrower_interval():
    x = np.random.default_rng(5).normal(size=50)
    low95, high95 = bootstrap_ci(x, level=0.95)
    low50, high50 = bootstrap_ci(x, level=0.50)
    assert low95 < low50 < high50 < high95


def test_median_statistic():
    x = [1.0, 2.0, 3.0, 4.0, 100.0]
    low, high = bootstrap_ci(x, statistic="median")
    assert low <= 3.0 <= high
    assert high <= 100.0


def test_interval_is_widened_to_contain_point_estimate():
    # On a centred sample -|mean| is ~0 (its maximum); on resamples it is clearly negative, so
    # the raw 97.5% percentile lies below the point estimate. The interval must still reach it.
    def neg_abs_mean(x, axis=-1):
        return -np.abs(np.mean(x, axis=axis))

    x = np.random.default_rng(7).normal(size=30)
    x -= x.mean()
    point = float(neg_abs_mean(x))
    low, high = bootstrap_ci(x, statistic=neg_abs_mean)
    assert low < point
    assert high == point


def test_different_seed_changes_interval():
    x = np.random.default_rng(0).normal(size=30)
    assert bootstrap_ci(x, seed=0) != bootstrap_ci(x, seed=1)


@given(value_lists, st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_ci_contains_mean_and_is_ordered(values, seed):
    low, high = bootstrap_ci(values, seed=seed)
    mean = float(np.mean(values))
    assert low <= mean <= high
    assert min(values) - 1e-9 <= low and high <= max(values) + 1e-9


@given(value_lists, st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_deterministic_for_a_seed(values, seed):
    assert bootstrap_ci(values, seed=seed) == bootstrap_ci(values, seed=seed)


@given(st.lists(finite, min_size=10, max_size=30, unique=True))
@settings(max_examples=40, deadline=None)
def test_seed_matters_on_non_constant_data(values):
    # With discrete data two seeds can land on the same percentile by chance, so ask only that
    # five seeds do not all agree.
    intervals = {bootstrap_ci(values, seed=s) for s in range(5)}
    assert len(intervals) > 1


# ---------------------------------------------------------------------------- permutation


def test_permutation_exact_hand_example():
    # 2**3 = 8 sign patterns of [1, 1, 1]; only (+, +, +) has a mean >= 1  ->  p = 1/8.
    assert paired_permutation_pvalue([1, 1, 1]) == pytest.approx(1 / 8)
    # "less": every pattern has mean <= 1  ->  p = 1.
    assert paired_permutation_pvalue([1, 1, 1], alternative="less") == pytest.approx(1.0)
    # two-sided: 2·min(1/8, 1) = 1/4.
    assert paired_permutation_pvalue([1, 1, 1], alternative="two-sided") == pytest.approx(1 / 4)


def test_permutation_second_hand_example():
    # diffs [2, -1]: pattern means 0.5, -1.5, 1.5, -0.5; observed 0.5; two of four are >= 0.5.
    assert paired_permutation_pvalue([2, -1]) == pytest.approx(2 / 4)


def test_permutation_all_zero_differences_give_p_one():
    assert paired_permutation_pvalue([0.0, 0.0, 0.0]) == pytest.approx(1.0)


def _brute_force_p(diffs):
    diffs = np.asarray(diffs)
    observed = diffs.sum()
    flips = np.array(list(itertools.product([1, -1], repeat=diffs.size)))
    return float(np.mean((flips * diffs).sum(axis=1) >= observed))


@given(st.lists(st.integers(min_value=-5, max_value=5), min_size=1, max_size=8))
@settings(max_examples=60, deadline=None)
def test_permutation_exact_matches_brute_force(diffs):
    # Integer diffs keep the brute-force sums exact.
    assert paired_permutation_pvalue(diffs) == pytest.approx(_brute_force_p(diffs))


@pytest.mark.parametrize(
    ("d", "alternative", "expected"),
    [
        (2.0, "greater", 0.5),
        (2.0, "less", 1.0),
        (-2.0, "less", 0.5),
        (0.0, "greater", 1.0),
        (2.0, "two-sided", 1.0),
    ],
)
def test_permutation_single_item(d, alternative, expected):
    # One difference d: the two sign patterns are d and -d.
    assert paired_permutation_pvalue([d], alternative=alternative) == pytest.approx(expected)


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_permutation_exact_agrees_with_scipy_exact(alternative):
    from scipy.stats import permutation_test

    diffs = np.random.default_rng(4).normal(0.3, 1.0, size=10)
    ref = permutation_test(
        (diffs,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=np.inf, alternative=alternative,
    ).pvalue
    assert paired_permutation_pvalue(diffs, alternative=alternative) == pytest.approx(ref)


def test_permutation_exact_at_limit_is_independent_of_seed():
    diffs = np.random.default_rng(1).normal(0.3, 1.0, size=EXACT_MAX_N)
    assert paired_permutation_pvalue(diffs, seed=0) == paired_permutation_pvalue(diffs, seed=99)


def test_permutation_monte_carlo_above_limit():
    # n = 20 > 16 -> Monte Carlo. Exact p would be 2**-20; Monte Carlo reports (count + 1) /
    # (n_resamples + 1), never 0, and is reproducible for a seed.
    diffs = np.ones(20)
    p = paired_permutation_pvalue(diffs, n_resamples=2000, seed=3)
    assert 0 < p <= 2 / 2001
    assert p == paired_permutation_pvalue(diffs, n_resamples=2000, seed=3)


def test_permutation_monte_carlo_close_to_exact():
    diffs = np.random.default_rng(2).normal(0.2, 1.0, size=17)
    flips = np.array(list(itertools.product([1, -1], repeat=17)), dtype=np.int8)
    exact = float(np.mean(flips @ diffs >= diffs.sum() - 1e-12))
    p = paired_permutation_pvalue(diffs, n_resamples=5000, seed=0)
    assert p == pytest.approx(exact, abs=0.03)


def test_permutation_input_validation():
    with pytest.raises(ValueError, match=r"n == 0"):
        paired_permutation_pvalue([])
    with pytest.raises(ValueError, match="alternative"):
        paired_permutation_pvalue([1.0], alternative="bigger")
