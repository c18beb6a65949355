"""Association metric math (DA-score, Kurita, WEAT/SEAT) against hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.metrics.association import (
    association_effect,
    cosine_rows,
    da_score,
    effect_ci,
    effect_size,
    kurita_association,
    permutation_pvalue,
    target_scores,
    weat_association,
    weat_effect,
)

finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)
groups = st.lists(finite, min_size=2, max_size=8)


# ---------------------------------------------------------------- effect size and p-values


def test_effect_size_by_hand():
    # mean diff 2; values 1, 3, 0, 0 have mean 1 and population variance (0+4+1+1)/4 = 1.5
    assert effect_size([1, 3], [0, 0]) == pytest.approx(2 / math.sqrt(1.5))
    # sample std (ddof=1, May et al.'s SEAT code): variance 6/3 = 2
    assert effect_size([1, 3], [0, 0], ddof=1) == pytest.approx(2 / math.sqrt(2))


def test_effect_size_constant_values_is_zero():
    assert effect_size([2, 2], [2, 2, 2]) == 0.0


@given(groups, groups)
@settings(max_examples=60, deadline=None)
def test_effect_size_antisymmetric(x, y):
    assert effect_size(x, y) == pytest.approx(-effect_size(y, x), abs=1e-9)


@given(groups, groups, st.floats(min_value=0.1, max_value=10), finite)
@settings(max_examples=60, deadline=None)
def test_effect_size_invariant_to_affine_change(x, y, scale, shift):
    xs = [scale * v + shift for v in x]
    ys = [scale * v + shift for v in y]
    if np.std(np.r_[x, y]) < 1e-6:
        return  # rounding decides a zero-spread case; covered by the constant test
    assert effect_size(xs, ys) == pytest.approx(effect_size(x, y), rel=1e-6, abs=1e-6)


def test_permutation_pvalue_exact_by_hand():
    # 6 labellings of {1,2,3,4} into pairs; only the observed one reaches mean diff 2
    p, exact = permutation_pvalue([3, 4], [1, 2], alternative="greater")
    assert exact and p == pytest.approx(1 / 6)
    # two-sided = 2 * min(one-sided p's) (scipy's convention)
    p2, _ = permutation_pvalue([3, 4], [1, 2], alternative="two-sided")
    assert p2 == pytest.approx(2 / 6)
    p_less, _ = permutation_pvalue([3, 4], [1, 2], alternative="less")
    assert p_less == pytest.approx(1.0)


def test_logprob_effect_p_value_is_the_papers_one_sided_test_by_exact_enumeration():
    # DA-Gender Appendix A: p = Prob_i[s(T1^i, T2^i) >= s(T1, T2)], s = sum over T1 of s(x) minus
    # sum over T2, T1 the male targets. Per-target scores (male-typed minus female-typed
    # attribute): male targets 3, 5; female targets 1, 2, 4. Total 15, so s = 2 * sum(T1^i) - 15.
    # The C(5, 2) = 10 choices of T1^i have sums 3, 4, 5, 6, 5, 6, 7, 7, 8, 9; the observed sum
    # is 8 and only {3, 5} (8) and {4, 5} (9) reach it: p = 2/10.
    scores = {"he": ("male", 3), "this man": ("male", 5), "she": ("female", 1), "this woman": ("female", 2),
              "my mother": ("female", 4)}
    rows = [(t, g, a, s if a == "male" else 0.0) for t, (g, s) in scores.items() for a in ("male", "female")]
    t, tg, ag, v = zip(*rows)
    res = association_effect("logprob_effect", v, t, tg, ag)
    assert res.p_value == pytest.approx(2 / 10)
    assert (res.breakdown["p_value_alternative"], res.breakdown["p_value_exact"]) == ("greater", True)
    # The paper's code tests both sides (|difference|): behind alternative="two-sided", scipy's
    # convention 2 * min(P(>=), P(<=)); P(<= 8) = 9/10, so 2 * 2/10.
    assert association_effect("x", v, t, tg, ag, alternative="two-sided").p_value == pytest.approx(4 / 10)
    # the other way round (female targets more male-typed): the one-sided p is large
    flipped = association_effect("x", v, t, ["female" if g == "male" else "male" for g in tg], ag)
    assert flipped.p_value == pytest.approx(9 / 10)


def test_permutation_pvalue_rejects_an_unknown_alternative():
    with pytest.raises(ValueError, match="alternative must be one of greater, less, two-sided, got 'both'"):
        permutation_pvalue([1, 2], [3, 4], alternative="both")


def test_permutation_pvalue_monte_carlo_is_seeded_and_bounded():
    x, y = np.arange(12) + 100.0, np.arange(12.0)  # C(24, 12) = 2.7M labellings: Monte Carlo
    p, exact = permutation_pvalue(x, y, seed=3)
    assert not exact
    # Only the observed labelling reaches the observed difference: p = (hits + 1)/(10000 + 1)
    assert 1 / 10001 <= p <= 3 / 10001
    assert permutation_pvalue(x, y, seed=3) == (p, exact)


def test_permutation_exact_threshold():
    # C(14, 7) = 3432 <= 10,000 -> exact; C(16, 8) = 12,870 -> sampled
    assert permutation_pvalue(np.arange(7.0), np.arange(7.0) + 0.5)[1] is True
    assert permutation_pvalue(np.arange(8.0), np.arange(8.0) + 0.5)[1] is False


@given(groups, groups, st.integers(0, 5))
@settings(max_examples=25, deadline=None)
def test_effect_ci_contains_value_and_is_deterministic(x, y, seed):
    low, high = effect_ci(x, y, seed=seed, n_resamples=200)
    value = effect_size(x, y)
    assert low <= value <= high
    assert effect_ci(x, y, seed=seed, n_resamples=200) == (low, high)


# ---------------------------------------------------------------- Kurita / DA-score


def test_kurita_association_by_hand():
    np.testing.assert_allclose(kurita_association([0.4, 0.1], [0.1, 0.4]), [math.log(4), -math.log(4)])


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_kurita_association_rejects_non_probabilities(bad):
    with pytest.raises(ValueError, match="probabilities"):
        kurita_association([bad], [0.5])


def test_da_score_by_hand():
    res = da_score([0.5, -1.0, 0.0, 2.0], ["a", "b", "b", "b"], ids=list("wxyz"))
    assert res.metric == "DA_score"
    assert res.value == pytest.approx(0.5)  # 0.5 and 2.0 are right; a tie (0.0) counts as wrong
    assert res.breakdown["per_template"]["a"]["value"] == 1.0
    assert res.breakdown["per_template"]["b"]["value"] == pytest.approx(1 / 3)
    assert res.breakdown["per_template"]["b"]["n"] == 3
    assert [d["score"] for d in res.details] == [1.0, 0.0, 0.0, 1.0]
    assert res.breakdown["mean_margin"] == pytest.approx(1.5 / 4)
    assert res.ci_low <= res.value <= res.ci_high


@given(st.lists(finite, min_size=1, max_size=40), st.integers(0, 3))
@settings(max_examples=50, deadline=None)
def test_da_score_in_unit_interval(margins, seed):
    res = da_score(margins, ["t"] * len(margins), seed=seed)
    assert 0.0 <= res.ci_low <= res.value <= res.ci_high <= 1.0
    assert res.value == pytest.approx(np.mean(np.asarray(margins) > 0))


def test_da_score_rejects_length_mismatch_and_nan():
    with pytest.raises(ValueError, match="templates has 1"):
        da_score([1.0, 2.0], ["t"])
    with pytest.raises(ValueError, match="NaN"):
        da_score([float("nan")], ["t"])


def test_target_scores_by_hand():
    scores = target_scores([2, 4, 1, 5, 0], ["he", "he", "he", "she", "she"], ["male", "male", "female", "male", "female"])
    assert scores == {"he": pytest.approx(3 - 1), "she": pytest.approx(5 - 0)}


def test_target_scores_needs_both_attribute_genders():
    with pytest.raises(ValueError, match="lacks"):
        target_scores([1.0], ["he"], ["male"])


def test_association_effect_by_hand():
    # per-target scores: he 3-1=2, man 1-0=1, she 0-1=-1, woman 0-0=0
    rows = [("he", "male", "male", 2), ("he", "male", "male", 4), ("he", "male", "female", 1),
            ("man", "male", "male", 1), ("man", "male", "female", 0),
            ("she", "female", "male", 0), ("she", "female", "female", 1),
            ("woman", "female", "male", 0), ("woman", "female", "female", 0)]
    t, tg, ag, v = zip(*rows)
    res = association_effect("logprob_effect", v, t, tg, ag)
    # male targets [2, 1], female [-1, 0]: diff 2, population std of the four = sqrt(1.25)
    assert res.value == pytest.approx(2 / math.sqrt(1.25))
    # exact: 6 labellings, the observed one is the only one with diff 2 -> one-sided 1/6
    assert res.p_value == pytest.approx(1 / 6)
    assert res.breakdown["p_value_exact"] is True
    assert res.breakdown["per_target"]["he"] == pytest.approx(2)
    assert res.n == 9 and res.ci_low <= res.value <= res.ci_high


def test_association_effect_antisymmetric_under_swapping_target_groups():
    rng = np.random.default_rng(0)
    t = [f"p{i}" for i in range(6) for _ in range(4)]
    tg = ["male" if i < 3 else "female" for i in range(6) for _ in range(4)]
    ag = ["male", "male", "female", "female"] * 6
    v = rng.normal(size=24)
    swapped = ["female" if g == "male" else "male" for g in tg]
    a = association_effect("x", v, t, tg, ag)
    b = association_effect("x", v, t, swapped, ag)
    assert a.value == pytest.approx(-b.value)


def test_association_effect_rejects_target_with_two_genders():
    with pytest.raises(ValueError, match="labelled both"):
        association_effect("x", [1, 2, 3, 4], ["he", "he", "she", "she"], ["male", "female", "female", "female"],
                           ["male", "female", "male", "female"])


# ---------------------------------------------------------------- WEAT


def test_weat_association_by_hand():
    s = weat_association([[1, 0], [1, 1]], [[1, 0]], [[0, 1]])
    np.testing.assert_allclose(s, [1.0, 0.0], atol=1e-12)


def test_weat_effect_by_hand():
    x, y = [[1, 0], [1, 1]], [[0, 1], [0, 2]]
    res = weat_effect(x, y, [[1, 0]], [[0, 1]])
    # s(X) = [1, 0], s(Y) = [-1, -1]; diff 1.5; population std of [1, 0, -1, -1] = sqrt(0.6875)
    assert res.value == pytest.approx(1.5 / math.sqrt(0.6875))
    # one-sided, exact over C(4, 2) = 6 labellings: only the observed one reaches 1.5
    assert res.p_value == pytest.approx(1 / 6)
    assert res.metric == "SEAT_effect" and res.n == 4


@given(st.integers(0, 1000))
@settings(max_examples=20, deadline=None)
def test_weat_effect_antisymmetric_and_scale_invariant(seed):
    rng = np.random.default_rng(seed)
    x, y, a, b = (rng.normal(size=(4, 5)) for _ in range(4))
    e = weat_effect(x, y, a, b).value
    assert weat_effect(y, x, a, b).value == pytest.approx(-e, abs=1e-9)
    assert weat_effect(x, y, b, a).value == pytest.approx(-e, abs=1e-9)  # swapping A and B too
    assert weat_effect(3 * x, y, a, 0.5 * b).value == pytest.approx(e, abs=1e-9)  # cosine ignores length


def test_weat_rejects_zero_vectors():
    with pytest.raises(ValueError, match="all-zero"):
        weat_association([[0, 0]], [[1, 0]], [[0, 1]])


def test_cosine_rows_by_hand():
    np.testing.assert_allclose(cosine_rows([[1, 0], [1, 1]], [[2, 0], [1, 0]]), [1.0, 1 / math.sqrt(2)])
