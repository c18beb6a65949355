"""The Debias Tuning losses against hand computations and the disclosure metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bias_core.metrics.disclosure import add, gld
from bias_core.mitigation.training.losses import (
    LossSwitches,
    debias_loss,
    divergence_loss,
    gender_mass_loss,
    logit_difference_loss,
)

PF = [[0.2, 0.0], [0.3, 0.1]]
PM = [[0.1, 0.0], [0.3, 0.1]]


def t(x):
    return torch.tensor(x, dtype=torch.float64)


def test_divergence_loss_by_hand():
    # Row 1, pair 1: a=0.2, b=0.1 -> 0.2 ln(0.4/0.3) + 0.1 ln(0.2/0.3); pair 2 (0, 0) -> 0.
    # Row 2: equal sides -> 0. L_d = (1/(2*2)) * row-1 sum.
    row1 = 0.2 * math.log(0.4 / 0.3) + 0.1 * math.log(0.2 / 0.3)
    assert float(divergence_loss(t(PF), t(PM))) == pytest.approx(row1 / 4, rel=1e-9, abs=1e-12)


def test_gender_mass_loss_by_hand():
    # Row sums: 0.2+0.1 = 0.3 and 0.4+0.4 = 0.8 -> mean 0.55.
    assert float(gender_mass_loss(t(PF), t(PM))) == pytest.approx(0.55)


def test_logit_difference_loss_by_hand():
    pf, pm = t([[0.1, 0.2], [0.3, 0.0]]), t([[0.05, 0.0], [0.0, 0.1]])
    # |0.3 - 0.05| / 0.35 and |0.3 - 0.1| / 0.4, averaged.
    assert float(logit_difference_loss(pf, pm)) == pytest.approx((0.25 / 0.35 + 0.2 / 0.4) / 2)


def test_no_gender_mass_scores_zero_with_finite_gradients():
    pf = torch.zeros((2, 3), dtype=torch.float64, requires_grad=True)
    pm = torch.zeros((2, 3), dtype=torch.float64, requires_grad=True)
    total, parts = debias_loss(pf, pm)
    total.backward()
    assert parts == {"L_d": 0.0, "L_g": 0.0, "L_l": 0.0}
    assert torch.isfinite(pf.grad).all() and torch.isfinite(pm.grad).all()


def test_gradients_push_the_larger_side_down():
    pf = t([[0.4, 0.1]]).requires_grad_()
    pm = t([[0.1, 0.1]]).requires_grad_()
    (divergence_loss(pf, pm) + logit_difference_loss(pf, pm)).backward()
    assert pf.grad[0, 0] > 0 and pm.grad[0, 0] < 0  # lowering pf / raising pm lowers the loss


@pytest.mark.parametrize(
    "switches, expected",
    [
        (LossSwitches(), {"L_d", "L_g", "L_l"}),
        (LossSwitches(divergence=False), {"L_g", "L_l"}),
        (LossSwitches(gender_mass=False), {"L_d", "L_l"}),
        (LossSwitches(logit_difference=False), {"L_d", "L_g"}),
        (LossSwitches(gender_mass=False, logit_difference=False), {"L_d"}),
    ],
)
def test_combiner_sums_only_switched_on_terms(switches, expected):
    total, parts = debias_loss(t(PF), t([[0.05, 0.2], [0.1, 0.3]]), switches)
    assert set(parts) == {"L_d", "L_g", "L_l"}  # every term is logged
    assert float(total) == pytest.approx(sum(parts[k] for k in expected))
    assert switches.label == "+".join(k for k in ("L_d", "L_g", "L_l") if k in expected)


def test_all_switches_off_is_refused():
    with pytest.raises(ValueError, match="all three losses are switched off"):
        LossSwitches(False, False, False)


@pytest.mark.parametrize("fn", [divergence_loss, gender_mass_loss, logit_difference_loss])
def test_shape_errors(fn):
    with pytest.raises(ValueError, match="shape"):
        fn(t([[0.1, 0.2]]), t([[0.1]]))
    with pytest.raises(ValueError, match="shape"):
        fn(t([0.1, 0.2]), t([0.1, 0.2]))


probs = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 6)),
               elements=st.floats(0.0, 0.2, allow_subnormal=False))


@settings(max_examples=60, deadline=None)
@given(probs, st.data())
def test_losses_equal_the_audit_metrics(pf, data):
    # L_d and L_l are the batch's ADD and GLD: the metrics' numpy code is an independent check.
    pm = data.draw(arrays(np.float64, pf.shape, elements=st.floats(0.0, 0.2, allow_subnormal=False)))
    assert float(divergence_loss(t(pf), t(pm))) == pytest.approx(add(pf, pm).value, rel=1e-9, abs=1e-12)
    assert float(logit_difference_loss(t(pf), t(pm))) == pytest.approx(gld(pf, pm).value, rel=1e-9, abs=1e-12)
    assert float(gender_mass_loss(t(pf), t(pm))) == pytest.approx(float((pf.sum(1) + pm.sum(1)).mean()))


@settings(max_examples=40, deadline=None)
@given(probs)
def test_equal_sides_have_zero_divergence_and_difference(p):
    assert float(divergence_loss(t(p), t(p))) == pytest.approx(0.0, abs=1e-15)
    assert float(logit_difference_loss(t(p), t(p))) == 0.0
