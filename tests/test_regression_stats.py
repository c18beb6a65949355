"""Paired statistics of the regression gate: hand-computed examples and hypothesis properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.gating.regression.pairing import PairedItems
from bias_core.gating.regression.spec import PAIRED, PairedSpec
from bias_core.stats.paired import (
    adjust,
    benjamini_hochberg,
    compare_to_baseline,
    holm,
    mcnemar_exact,
    swap_permutation_pvalue,
)


def paired(candidate, baseline, metric="GLD", groups=None) -> PairedItems:
    c, b = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    n = c.size
    return PairedItems("probe", metric, tuple(f"i{k}" for k in range(n)), c, b,
                       None if groups is None else tuple(groups), tuple(f"prompt {k}" for k in range(n)),
                       (None,) * n, (None,) * n, 0.0, 0.0)


# ----- McNemar, permutation tests ------------------------------------------------------------------
def test_mcnemar_matches_the_binomial_tail_by_hand():
    # 8 worse, 2 better: P(X >= 8), X ~ Bin(10, 1/2) = (45 + 10 + 1) / 1024
    assert mcnemar_exact(8, 2) == pytest.approx(56 / 1024, rel=1e-12)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 3) == 1.0  # P(X >= 0)
    assert mcnemar_exact(3, 0) == pytest.approx(1 / 8, rel=1e-12)


def test_binary_lower_metric_uses_mcnemar_on_the_discordant_pairs():
    # items: 8 go 0 -> 1 (worse for GAS), 2 go 1 -> 0, 5 stay 1, 5 stay 0
    base = [0] * 8 + [1] * 2 + [1] * 5 + [0] * 5
    cand = [1] * 8 + [0] * 2 + [1] * 5 + [0] * 5
    r = compare_to_baseline(paired(cand, base, "GAS"), PAIRED["GAS"])
    assert r.p_value == pytest.approx(56 / 1024, rel=1e-12)
    assert "McNemar" in r.test and "8 items worse, 2 better" in r.test
    assert r.delta == pytest.approx(6 / 20) and r.harm == pytest.approx(6 / 20)
    # for a higher-is-better 0/1 metric (DA_score) the same change is an improvement
    da = compare_to_baseline(paired(cand, base, "DA_score"), PAIRED["DA_score"])
    assert da.harm == pytest.approx(-6 / 20)
    assert da.p_value == pytest.approx(mcnemar_exact(2, 8), rel=1e-12)


def test_sign_flip_p_value_equals_exact_enumeration():
    base = np.array([0.10, 0.30, 0.25, 0.40, 0.05, 0.20, 0.35])
    cand = np.array([0.30, 0.35, 0.20, 0.60, 0.15, 0.20, 0.50])
    d = cand - base
    null = [np.dot(signs, d) for signs in itertools.product((1.0, -1.0), repeat=d.size)]
    expected = sum(v >= d.sum() - 1e-12 for v in null) / len(null)
    r = compare_to_baseline(paired(cand, base, "GLD"), PAIRED["GLD"])
    assert r.p_value == pytest.approx(expected, rel=1e-12)
    assert "exact" in r.test


def test_swap_permutation_of_the_ideal_distance_equals_exact_enumeration():
    # crows_stereo: 100 * share of 1s, ideal 50; the candidate drifts away from 50
    base = np.array([1, 0, 1, 0, 1, 0, 1, 1, 0, 1], dtype=float)
    cand = np.array([1, 1, 1, 1, 1, 0, 1, 1, 1, 1], dtype=float)

    def harm(c, b):
        return abs(100 * c.mean() - 50) - abs(100 * b.mean() - 50)

    observed = harm(cand, base)
    null = []
    for swap in itertools.product((False, True), repeat=base.size):
        s = np.array(swap)
        null.append(harm(np.where(s, base, cand), np.where(s, cand, base)))
    expected = sum(v >= observed - 1e-9 for v in null) / len(null)
    r = compare_to_baseline(paired(cand, base, "crows_stereo"), PAIRED["crows_stereo"])
    assert r.harm == pytest.approx(observed)
    assert r.p_value == pytest.approx(expected, rel=1e-12)
    assert "distance from the ideal" in r.test


def test_monte_carlo_swap_p_value_is_seeded_and_never_zero():
    rng = np.random.default_rng(1)
    c, b = rng.random(60) + 0.3, rng.random(60)

    def stat(cc, bb):
        return cc.mean(axis=1) - bb.mean(axis=1)

    p1 = swap_permutation_pvalue(c, b, stat, n_resamples=500, seed=3)
    assert p1 == swap_permutation_pvalue(c, b, stat, n_resamples=500, seed=3)
    assert p1 == pytest.approx(1 / 501)  # a shift of 0.3 on 60 items: no random swap reaches it


def test_ideal_metric_distance_is_of_the_aggregate_not_of_items():
    # Both runs: half 1s and half 0s, crows 50 = ideal; per-item distances would all be 50.
    base = [1, 0] * 10
    cand = [0, 1] * 10
    r = compare_to_baseline(paired(cand, base, "crows_stereo"), PAIRED["crows_stereo"])
    assert r.baseline_value == 50 and r.candidate_value == 50
    assert r.harm == 0 and r.delta == 0


def test_stereo_score_is_a_mean_of_per_target_means():
    # target a: 3 items all stereotyped (100); target b: 1 item anti (0): SS = 50, micro mean 75
    groups = ["a", "a", "a", "b"]
    base = [1, 1, 1, 0]
    cand = [1, 1, 1, 1]  # SS = 100
    r = compare_to_baseline(paired(cand, base, "stereo_score", groups), PAIRED["stereo_score"])
    assert r.baseline_value == pytest.approx(50.0)
    assert r.candidate_value == pytest.approx(100.0)
    assert r.harm == pytest.approx(50.0)  # distance from 50: 0 -> 50


def test_higher_is_better_harm_is_minus_delta():
    base = [0.8, 0.9, 0.7, 0.6, 0.9]
    cand = [0.5, 0.6, 0.7, 0.4, 0.8]
    spec = PairedSpec("higher")
    r = compare_to_baseline(paired(cand, base, "x"), spec)
    assert r.delta == pytest.approx(np.mean(cand) - np.mean(base))
    assert r.harm == pytest.approx(-r.delta)
    assert r.harm_ci == pytest.approx((-r.delta_ci[1], -r.delta_ci[0]))


# ----- properties ---------------------------------------------------------------------------------
_binary = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=2, max_size=40)
_bounded = st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=40)


def _spec_and_data(draw_metric, pairs):
    spec = PAIRED[draw_metric]
    c = [float(a) for a, _ in pairs]
    b = [float(x) for _, x in pairs]
    names = spec.difference or ("t0", "t1", "t2")  # a difference of two groups' means: those two
    groups = [names[k % len(names)] for k in range(len(pairs))] if spec.group_field else None
    return spec, paired(c, b, draw_metric, groups)


@settings(max_examples=60, deadline=None)
@given(metric=st.sampled_from(sorted(PAIRED)), data=st.data())
def test_swapping_candidate_and_baseline_flips_every_delta(metric, data):
    pairs = data.draw(_binary if PAIRED[metric].kind == "binary" else _bounded)
    spec, p = _spec_and_data(metric, pairs)
    a = compare_to_baseline(p, spec, n_resamples=200, n_bootstrap=200)
    b = compare_to_baseline(p.swapped(), spec, n_resamples=200, n_bootstrap=200)
    assert b.delta == pytest.approx(-a.delta, abs=1e-12)
    assert b.harm == pytest.approx(-a.harm, abs=1e-12)
    assert b.delta_ci == pytest.approx((-a.delta_ci[1], -a.delta_ci[0]), abs=1e-9)
    assert b.harm_ci == pytest.approx((-a.harm_ci[1], -a.harm_ci[0]), abs=1e-9)
    assert (a.baseline_value, a.candidate_value) == (b.candidate_value, b.baseline_value)
    for r in (a, b):
        assert r.harm_ci[0] <= r.harm + 1e-12 and r.harm <= r.harm_ci[1] + 1e-12
        assert 0.0 < r.p_value <= 1.0


@settings(max_examples=60, deadline=None)
@given(metric=st.sampled_from(sorted(PAIRED)), data=st.data())
def test_identical_items_give_zero_delta_and_no_evidence_of_harm(metric, data):
    pairs = data.draw(_binary if PAIRED[metric].kind == "binary" else _bounded)
    spec, p = _spec_and_data(metric, [(a, a) for a, _ in pairs])
    r = compare_to_baseline(p, spec, n_resamples=200, n_bootstrap=200)
    assert r.delta == 0.0 and r.harm == 0.0
    assert r.delta_ci == (0.0, 0.0) and r.harm_ci == (0.0, 0.0)
    assert r.p_value == 1.0


_pvalues = st.lists(st.floats(0, 1), min_size=1, max_size=30)


def test_holm_and_bh_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1 -> max .06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # sorted: .005*4/1=.02, .01*4/2=.02, .03*4/3=.04, .04*4/4=.04
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


@given(_pvalues)
def test_holm_is_monotone_and_at_least_the_raw_p(p):
    adj = holm(p)
    raw = np.asarray(p)
    assert np.all(adj >= raw) and np.all(adj <= 1.0)
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(adj[order]) >= 0)


@given(_pvalues)
def test_bh_lies_between_the_raw_p_and_holm(p):
    bh, h, raw = benjamini_hochberg(p), holm(p), np.asarray(p)
    assert np.all(bh >= raw) and np.all(bh <= h)
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(bh[order]) >= 0)


def test_adjust_fills_both_adjustments_in_the_run_order():
    runs = [compare_to_baseline(paired([1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], "GAS"), PAIRED["GAS"]),
            compare_to_baseline(paired([0.1, 0.2], [0.1, 0.2]), PAIRED["GLD"])]
    out = adjust(runs)
    assert [r.p_value for r in out] == [1 / 64, 1.0]
    assert [r.p_holm for r in out] == pytest.approx([2 / 64, 1.0])
    assert [r.p_bh for r in out] == pytest.approx([2 / 64, 1.0])


def test_moved_items_are_the_largest_changes_each_way():
    base = [0.1, 0.5, 0.5, 0.2, 0.9]
    cand = [0.6, 0.4, 0.5, 0.3, 0.1]
    r = compare_to_baseline(paired(cand, base), PAIRED["GLD"], moved=2)
    assert [m["id"] for m in r.moved_up] == ["i0", "i3"]
    assert [m["id"] for m in r.moved_down] == ["i4", "i1"]
    assert r.moved_down[0]["baseline"] == 0.9 and r.moved_down[0]["candidate"] == 0.1
    assert math.isclose(r.delta, np.mean(cand) - np.mean(base))
