"""Confidence sequences (bias_core.stats.sequential): the published formulas, and calibration under
optional stopping by seeded Monte Carlo (2,000 runs per setting, looking after every batch)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core.gating.adaptive_sampling import look
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE, PASS, Gate
from bias_core.stats.sequential import (
    BettingCS,
    EmpiricalBernsteinCS,
    confidence_sequence,
    difference_interval,
    gap_interval,
    split_alpha,
)

ALPHA = 0.05
RUNS = 2000
BATCH = 25
BUDGET = 10  # batches: 250 items per run
# Betting on a coarse grid keeps 2,000 simulated runs fast; the grid only widens the interval.
SIM_GRID = 51
# the nominal level plus three binomial standard errors of a rate estimated from RUNS runs
TOLERANCE = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)


# ----------------------------------------------------------------------------------------------
# References written straight from Waudby-Smith & Ramdas (2023), one item at a time.


def _plug_ins(x, alpha):
    """(lambda_t untruncated, mu_{t-1}) for t = 1..n: WSR eq. (13)-(14)."""
    out, s, sq = [], 0.0, 0.0
    for t, xt in enumerate(x, start=1):
        mu_prev, var_prev = (0.5 + s) / t, (0.25 + sq) / t
        out.append((math.sqrt(2 * math.log(2 / alpha) / (var_prev * t * math.log(1 + t))), mu_prev))
        s += xt
        sq += (xt - (0.5 + s) / (t + 1)) ** 2
    return out


def eb_reference(x, alpha):
    lo, hi, lam_sum, lam_x, pen = 0.0, 1.0, 0.0, 0.0, 0.0
    for xt, (stake, mu_prev) in zip(x, _plug_ins(x, alpha)):
        lam = min(stake, 0.5)
        lam_sum += lam
        lam_x += lam * xt
        pen += 4 * (xt - mu_prev) ** 2 * (-math.log(1 - lam) - lam) / 4
        half = (math.log(2 / alpha) + pen) / lam_sum
        lo, hi = max(lo, lam_x / lam_sum - half), min(hi, lam_x / lam_sum + half)
    return lo, hi


def betting_reference(x, alpha, grid):
    ms = np.linspace(0, 1, grid)
    step = 1 / (grid - 1)
    out = []
    for m in ms:
        k_up = k_down = 1.0
        excluded = False
        for xt, (stake, _) in zip(x, _plug_ins(x, alpha)):
            k_up *= 1 + min(stake, 0.5 / m if m > 0 else math.inf) * (xt - m)
            k_down *= 1 - min(stake, 0.5 / (1 - m) if m < 1 else math.inf) * (xt - m)
            excluded |= max(0.5 * k_up, 0.5 * k_down) >= 1 / alpha
        out.append(excluded)
    inside = [m for m, o in zip(ms, out) if not o]
    return max(0.0, min(inside) - step), min(1.0, max(inside) + step)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_empirical_bernstein_equals_the_published_formula(seed):
    x = np.random.default_rng(seed).beta(0.8, 2.0, size=60)
    cs = EmpiricalBernsteinCS(alpha=ALPHA)
    for part in np.split(x, [7, 8, 30]):  # batches of 7, 1, 22 and 30 items
        cs.update(part)
    assert cs.interval() == pytest.approx(eb_reference(x, ALPHA), abs=1e-12)
    assert cs.n == 60


@pytest.mark.parametrize("seed", [0, 1])
def test_betting_equals_the_published_capital_process(seed):
    x = (np.random.default_rng(seed).random(40) < 0.3).astype(float)
    cs = BettingCS(alpha=ALPHA, grid=101)
    cs.update(x[:13]).update(x[13:])
    assert cs.interval() == pytest.approx(betting_reference(x, ALPHA, 101), abs=1e-12)


@pytest.mark.parametrize("method", ["betting", "empirical-bernstein"])
def test_interval_does_not_depend_on_how_items_are_batched(method):
    x = np.random.default_rng(3).random(90)
    whole = confidence_sequence(method=method).update(x).interval()
    one_by_one = confidence_sequence(method=method)
    for v in x:
        one_by_one.update(v)
    assert one_by_one.interval() == pytest.approx(whole, abs=1e-12)


@pytest.mark.parametrize("method", ["betting", "empirical-bernstein"])
def test_bounds_rescale_items_in_a_b(method):
    x = np.random.default_rng(4).random(50)
    unit = confidence_sequence(0, 1, method=method).update(x).interval()
    scaled = confidence_sequence(-2, 6, method=method).update(-2 + 8 * x).interval()
    assert scaled == pytest.approx((-2 + 8 * unit[0], -2 + 8 * unit[1]), abs=1e-9)


@pytest.mark.parametrize("method", ["betting", "empirical-bernstein"])
def test_intervals_shrink_and_narrow_around_the_mean(method):
    rng = np.random.default_rng(5)
    cs = confidence_sequence(method=method)
    widths = []
    for _ in range(8):
        cs.update(rng.random(100) < 0.2)
        lo, hi = cs.interval()
        widths.append(hi - lo)
        assert 0 <= lo <= hi <= 1
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.12
    assert lo < 0.2 < hi


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match=r"must lie in \[0.0, 1.0\].*per-item bounds"):
        EmpiricalBernsteinCS().update([0.5, 1.5])
    with pytest.raises(ValueError, match="NaN"):
        BettingCS().update([float("nan")])
    with pytest.raises(ValueError, match="low < high"):
        BettingCS(1.0, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        EmpiricalBernsteinCS(alpha=1.5)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        EmpiricalBernsteinCS(shape=3).update(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="choose one of betting, empirical-bernstein"):
        confidence_sequence(method="bootstrap")


# ----------------------------------------------------------------------------------------------
# Calibration under optional stopping


def _items(rng, dist: str, mean: float, shape) -> np.ndarray:
    if dist == "bernoulli":
        return (rng.random(shape) < mean).astype(float)
    # bounded continuous, skewed and spread: Beta with a + b = 2
    return rng.beta(2 * mean, 2 * (1 - mean), size=shape)


def simulate(method: str, dist: str, mean: float, gate: Gate, runs: int = RUNS, seed: int = 0):
    """Look after every batch until the budget; return each run's first decision and its batch
    (None, 0 when it never decided)."""
    rng = np.random.default_rng(seed)
    kwargs = {"grid": SIM_GRID} if method == "betting" else {}
    cs = {"betting": BettingCS, "empirical-bernstein": EmpiricalBernsteinCS}[method](alpha=ALPHA, shape=runs, **kwargs)
    decision = np.full(runs, None, dtype=object)
    when = np.zeros(runs, dtype=int)
    for batch in range(1, BUDGET + 1):
        cs.update(_items(rng, dist, mean, (runs, BATCH)))
        verdicts = look(cs, gate)
        new = (verdicts != INCONCLUSIVE) & (when == 0)
        decision[new], when[new] = verdicts[new], batch
        if np.all(when > 0):
            break
    return decision, when


GATES = {
    "max": (Gate("m", 0.30, "max", "test"), 0.30),              # GLD-like: true mean at the limit
    "min": (Gate("m", 0.60, "min", "test"), 0.60),              # DA_score-like
    "two-sided": (Gate("m", 0.15, "max", "test", ideal=0.5), 0.65),  # BPR-like: |mean - 0.5| <= 0.15
}


@pytest.mark.parametrize("dist", ["bernoulli", "beta"])
@pytest.mark.parametrize("direction", list(GATES))
def test_empirical_bernstein_gate_at_the_threshold_decides_wrongly_at_most_alpha(dist, direction):
    gate, mean = GATES[direction]
    decision, _ = simulate("empirical-bernstein", dist, mean, gate)
    assert np.mean(decision != None) <= TOLERANCE  # noqa: E711 (elementwise)


@pytest.mark.parametrize("dist,direction", [("bernoulli", "max"), ("beta", "two-sided"), ("bernoulli", "min")])
def test_betting_gate_at_the_threshold_decides_wrongly_at_most_alpha(dist, direction):
    gate, mean = GATES[direction]
    decision, _ = simulate("betting", dist, mean, gate)
    assert np.mean(decision != None) <= TOLERANCE  # noqa: E711


def test_a_fixed_sample_ci_recomputed_at_every_look_is_not_calibrated():
    """The simulation can fail: a normal-approximation 95% CI, recomputed after every batch and
    stopped at the first decision, decides wrongly far more often than 5%."""
    rng = np.random.default_rng(0)
    gate, mean = GATES["max"]
    x = _items(rng, "bernoulli", mean, (RUNS, BATCH * BUDGET))
    decided = np.zeros(RUNS, dtype=bool)
    for batch in range(1, BUDGET + 1):
        seen = x[:, : batch * BATCH]
        m, se = seen.mean(axis=1), seen.std(axis=1, ddof=1) / math.sqrt(seen.shape[1])
        decided |= (m - 1.96 * se > gate.limit) | (m + 1.96 * se <= gate.limit)
    assert decided.mean() > 2 * TOLERANCE


@pytest.mark.parametrize("method", ["betting", "empirical-bernstein"])
@pytest.mark.parametrize("dist", ["bernoulli", "beta"])
def test_two_margins_away_the_gate_decides_rightly_within_a_few_batches(method, dist):
    # margin 0.1 (the size of the audit's gaps and tolerances); true means 0.1 and 0.5 against 0.3
    gate = GATES["max"][0]
    for mean, right in ((0.10, PASS), (0.50, FAIL)):
        decision, when = simulate(method, dist, mean, gate, runs=500, seed=1)
        assert not np.any((decision != None) & (decision != right))  # noqa: E711
        # Bernoulli(0.5) has the largest variance: a few runs need most of the 250-item budget
        assert np.mean(decision == right) >= 0.95
        assert np.median(when[when > 0]) <= 3 and np.percentile(when[when > 0], 90) <= 7


def test_look_on_a_single_stream_returns_one_verdict():
    cs = BettingCS().update(np.zeros(200))
    assert look(cs, Gate("GAS", 0.35, "max", "t")) == PASS
    assert look(cs, Gate("DA_score", 0.6, "min", "t")) == FAIL


# ----------------------------------------------------------------------------------------------
# Gap and difference metrics: union bounds


def test_gap_and_difference_intervals_by_hand():
    assert gap_interval([(0.4, 0.5), (0.45, 0.6), (0.1, 0.2)]) == pytest.approx((0.25, 0.5))
    assert gap_interval([(0.4, 0.5), (0.45, 0.6)]) == (0.0, pytest.approx(0.2))  # overlapping: may be 0
    assert difference_interval((0.5, 0.7), (0.1, 0.2)) == pytest.approx((0.3, 0.6))
    assert split_alpha(0.05, 2) == 0.025 and split_alpha(0.05, 3) == pytest.approx(0.05 / 3)
    with pytest.raises(ValueError, match="at least two"):
        gap_interval([(0.1, 0.2)])
    with pytest.raises(ValueError, match="reversed"):
        gap_interval([(0.3, 0.2), (0.1, 0.2)])


def test_gap_interval_from_union_bound_covers_the_gap_at_every_look():
    """BPR_gap-like: three groups, one CS each at alpha/3; the gap interval must cover the true
    gap (max - min of the group means) at every look in >= 95% of the runs."""
    rng = np.random.default_rng(2)
    means = (0.45, 0.5, 0.6)
    true_gap = max(means) - min(means)
    groups = [EmpiricalBernsteinCS(alpha=split_alpha(ALPHA, 3), shape=RUNS) for _ in means]
    missed = np.zeros(RUNS, dtype=bool)
    for _ in range(BUDGET):
        for cs, mean in zip(groups, means):
            cs.update(_items(rng, "bernoulli", mean, (RUNS, BATCH)))
        bounds = [cs.interval() for cs in groups]
        for r in range(RUNS):
            lo, hi = gap_interval([(b[0][r], b[1][r]) for b in bounds])
            missed[r] |= not (lo <= true_gap <= hi)
    assert missed.mean() <= TOLERANCE
