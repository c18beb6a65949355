"""The asymptotic confidence sequence that bounds discrim-eval's unbounded per-item values under
``--sample auto`` (bias_core/stats/asymptotic.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core.stats.asymptotic import asymptotic_cs, half_width, rho

LOOKS = (64, 128, 256, 512, 1024)  # --sample auto's looks from the first 64 up to the default cap


def ever_missed(streams: np.ndarray, mean: float, alpha: float = 0.05) -> float:
    """Share of streams whose interval excludes ``mean`` at any look."""
    missed = np.zeros(len(streams), dtype=bool)
    for n in LOOKS:
        x = streams[:, :n]
        w = np.array([half_width(n, float(sd), alpha, LOOKS[0]) for sd in x.std(axis=1, ddof=1)])
        missed |= np.abs(x.mean(axis=1) - mean) > w
    return float(missed.mean())


@pytest.mark.parametrize("draw", ["normal", "student-t, 3 df", "lognormal"])
def test_the_chance_of_ever_missing_the_mean_over_the_looks_stays_near_alpha(draw):
    rng = np.random.default_rng(7)
    runs = 1500
    streams, mean = {"normal": (rng.normal(0.3, 2.0, (runs, 1024)), 0.3),
                     "student-t, 3 df": (rng.standard_t(3, (runs, 1024)), 0.0),
                     "lognormal": (rng.lognormal(0.0, 1.0, (runs, 1024)), math.exp(0.5))}[draw]
    # asymptotic: near 5% for skewed items, below it for symmetric ones; 3 standard errors of slack
    assert ever_missed(streams, mean) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_the_interval_narrows_as_items_come_and_needs_two_items():
    assert asymptotic_cs([1.0]) == (-math.inf, math.inf)
    widths = [half_width(n, 1.0, 0.05, 64) for n in LOOKS]
    assert all(a > b for a, b in zip(widths, widths[1:]))
    # wider than a fixed-sample 95% interval at the same n (the price of looking at every look)
    assert all(w > 1.96 / math.sqrt(n) for w, n in zip(widths, LOOKS))
    low, high = asymptotic_cs([0.0, 1.0, 2.0])
    assert low < 1.0 < high and high - 1.0 == pytest.approx(1.0 - low)


def test_rho_is_tightest_at_the_chosen_time():
    best = rho(0.05, 200)
    for other in (0.5 * best, 0.8 * best, 1.25 * best, 2.0 * best):
        r2 = other ** 2
        w_other = math.sqrt(2 * (200 * r2 + 1) / (200 ** 2 * r2) * math.log(math.sqrt(200 * r2 + 1) / 0.05))
        assert half_width(200, 1.0, 0.05, 200) <= w_other * (1 + 1e-3)
    with pytest.raises(ValueError, match="alpha in"):
        rho(1.5, 64)
