"""The preference LoRA (continuations.train_preference_adapter) that makes a sentence-preference
candidate worse on purpose: its scores are the audit's continuation log-likelihoods, its loss the
pairwise logistic one, and on the tiny model the trained adapter, loaded as ``--adapter`` loads
it, prefers the chosen continuations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.cda import IGNORE
from bias_core.mitigation.training.continuations import (
    continuation_logprob,
    preference_loss,
    train_preference_adapter,
)
from bias_core.mitigation.training.lora import LoraTrainConfig
from bias_core.models.weights.adapter import apply_adapter


def test_continuation_logprob_sums_the_labelled_tokens_log_probabilities():
    # two rows over a 3-word vocabulary; position t's logits predict token t+1
    logits = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [3.0, 0.0, 0.0]],
                           [[2.0, 0.0, 0.0], [0.0, 0.0, 5.0], [0.0, 0.0, 0.0]]])
    labels = torch.tensor([[IGNORE, 2, 0], [IGNORE, 1, IGNORE]])

    def logp(row, k):
        return row[k] - math.log(sum(math.exp(v) for v in row))

    first = logp([0.0, 1.0, 2.0], 2) + logp([1.0, 1.0, 1.0], 0)  # tokens 2 then 0
    second = logp([2.0, 0.0, 0.0], 1)  # token 1; the padded last position is not counted
    got = continuation_logprob(logits, labels)
    np.testing.assert_allclose(got.numpy(), [first, second], rtol=1e-6)


def test_preference_loss_is_the_logistic_loss_of_the_score_difference():
    chosen, rejected = torch.tensor([-3.0, -1.0, -2.0]), torch.tensor([-1.0, -4.0, -2.0])
    want = np.mean([math.log1p(math.exp(-(c - r))) for c, r in zip([-3.0, -1.0, -2.0], [-1.0, -4.0, -2.0])])
    assert float(preference_loss(chosen, rejected)) == pytest.approx(want, rel=1e-6)
    assert float(preference_loss(torch.tensor([-2.0]), torch.tensor([-2.0]))) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="rejected"):
        preference_loss(chosen, rejected[:2])


@given(st.floats(-20, 20), st.floats(0.01, 20), st.floats(0.1, 5))
def test_a_wider_margin_for_the_chosen_side_always_lowers_the_loss(margin, more, beta):
    lower = preference_loss(torch.tensor([margin + more], dtype=torch.float64), torch.tensor([0.0], dtype=torch.float64), beta)
    higher = preference_loss(torch.tensor([margin], dtype=torch.float64), torch.tensor([0.0], dtype=torch.float64), beta)
    assert float(lower) < float(higher) or float(higher) == 0.0  # both underflow to 0 far out


TRIPLES = [("The nurse said that ", "she was tired.", "he was tired."),
           ("My neighbour told me ", "he fixed the car.", "she fixed the car."),
           ("The engineer thinks ", "he is right.", "she is right."),
           ("The secretary said ", "she would call.", "he would call.")]


def _margins(lm) -> np.ndarray:
    chosen = lm.loglikelihood([(p, c) for p, c, _ in TRIPLES])
    rejected = lm.loglikelihood([(p, r) for p, _, r in TRIPLES])
    return np.asarray(chosen) - np.asarray(rejected)


def test_the_trained_adapter_prefers_the_chosen_continuations_when_loaded_as_a_candidate(tiny_lm, tmp_path):
    before = _margins(tiny_lm)
    config = LoraTrainConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, batch_size=4, steps=12, max_length=32)
    history = train_preference_adapter(tiny_lm, TRIPLES, config, seed=0, folder=tmp_path / "adapter", progress=False)
    assert len(history) == 12 and all("margin" in h for h in history)
    after = _margins(apply_adapter(tiny_lm, tmp_path / "adapter"))
    # every chosen continuation gained on its twin, through the audit's own scoring
    assert np.all(after > before + 0.1), (before, after)
    np.testing.assert_array_equal(_margins(tiny_lm), before)  # the base handle is untouched


def test_triples_without_a_preference_are_refused_before_training(tiny_lm, tmp_path):
    config = LoraTrainConfig(r=4, alpha=8, dropout=0.0, lr=1e-3, batch_size=2, steps=1, max_length=32)
    with pytest.raises(AuditUsageError, match="same.*Fix"):
        train_preference_adapter(tiny_lm, [("A ", "b.", "b.")], config, seed=0, folder=tmp_path / "a", progress=False)
    with pytest.raises(AuditUsageError, match="no training triples"):
        train_preference_adapter(tiny_lm, [], config, seed=0, folder=tmp_path / "a", progress=False)
    assert not (tmp_path / "a").exists()


def test_the_anchor_raises_the_chosen_continuations_themselves(tiny_lm, tmp_path):
    config = LoraTrainConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, batch_size=4, steps=12, max_length=32)
    chosen = {}
    for weight in (0.0, 1.0):
        folder = tmp_path / f"adapter-{weight}"
        train_preference_adapter(tiny_lm, TRIPLES, config, seed=0, folder=folder, nll_weight=weight, progress=False)
        adapted = apply_adapter(tiny_lm, folder)
        chosen[weight] = np.asarray(adapted.loglikelihood([(p, c) for p, c, _ in TRIPLES]))
        assert np.all(_margins(adapted) > _margins(tiny_lm))  # a preference either way
    # the pairwise loss alone can be met by lowering the rejected side; the anchor raises the chosen
    assert np.all(chosen[1.0] > chosen[0.0] + 1.0), chosen
