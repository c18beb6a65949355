"""The ER loss against hand computations, and each model kind's training batch."""

from __future__ import annotations

import math

import pytest
import torch

from bias_core.mitigation.training.objectives import (
    IGNORE,
    encode,
    er_distance,
    er_loss,
    lm_loss,
    make_batch,
    representation,
    token_loss,
)

from tolerances import Forward, assert_close, assert_close_rows


def test_er_distance_hand_computed():
    a = torch.tensor([[1.0, 0.0], [3.0, 4.0], [2.0, 2.0]])
    b = torch.tensor([[0.0, 5.0], [4.0, 3.0], [-1.0, -1.0]])
    # 1 − cos: orthogonal -> 1; cos = 24/25 -> 1/25; opposite -> 2
    assert float(er_distance(a, b)) == pytest.approx((1.0 + 1.0 / 25.0 + 2.0) / 3.0, rel=1e-6)
    assert float(er_distance(a, 7.0 * a)) == pytest.approx(0.0, abs=1e-6)


def test_er_loss_hand_computed():
    lm = torch.tensor(2.5)
    a = torch.tensor([[3.0, 4.0]])
    b = torch.tensor([[4.0, 3.0]])
    assert float(er_loss(lm, a, b, 0.5)) == pytest.approx(2.5 + 0.5 * (1.0 - 24.0 / 25.0), rel=1e-6)
    assert float(er_loss(lm, a, b, 0.0)) == pytest.approx(2.5)


def test_er_loss_gradient_pulls_the_pair_together():
    a = torch.tensor([[1.0, 0.0]], requires_grad=True)
    b = torch.tensor([[0.0, 1.0]])
    er_loss(torch.tensor(0.0), a, b, 2.0).backward()
    # d/da (1 − a·b/|a||b|) at a=(1,0), b=(0,1) is −(b − cos·a)/|a| = (0, −1); times λ = 2
    assert a.grad[0].tolist() == pytest.approx([0.0, -2.0])


def test_token_loss_shifted_hand_computed():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = math.log(3.0)  # P(2 | pos 0) = 3/6 = 1/2
    labels = torch.tensor([[IGNORE, 2, IGNORE]])
    assert float(token_loss(logits, labels, shift=True)) == pytest.approx(math.log(2.0), rel=1e-6)
    with pytest.raises(ValueError, match="no labelled tokens"):
        token_loss(logits, torch.full((1, 3), IGNORE), shift=True)


def test_causal_batch_scores_every_token_after_the_prefix(tiny_lm):
    encoded = [encode(tiny_lm.training(), s, 32) for s in ("She is a nurse.", "He is.")]
    assert encoded[0][0][0] == tiny_lm.training().prefix_token_id()
    assert encoded[0][0][1:] == list(tiny_lm.training().tokenizer("She is a nurse.", add_special_tokens=False)["input_ids"])
    batch = make_batch(tiny_lm.training(), encoded)
    short = len(encoded[1][0])
    assert batch.labels[0, 0] == IGNORE and (batch.labels[0, 1:] != IGNORE).all()
    assert (batch.labels[1, short:] == IGNORE).all() and batch.last.tolist() == [len(encoded[0][0]) - 1, short - 1]
    # the loss is the mean NLL sentence_logprob sums, over the same tokens
    loss, out = lm_loss(tiny_lm.training().model, "causal", batch, tiny_lm.training().device)
    logprobs = tiny_lm.sentence_logprob(["She is a nurse.", "He is."])
    n_tokens = sum(len(ids) - 1 for ids, _ in encoded)
    sizes = Forward.of(tiny_lm, ["She is a nurse.", "He is."])
    assert_close(loss.item(), -logprobs.sum() / n_tokens, sizes.token_logprob_atol(), kind="mean NLL")  # a mean of tokens
    # the representation is the final state at each row's last real token
    rep = representation(out, "causal", batch)
    assert_close_rows(rep.detach().double(), tiny_lm.embed(["She is a nurse.", "He is."]), sizes.hidden_rtol())


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from bias_core.models import LoadOptions, load_model, resolve_model

    from tiny_model import build_tiny_masked_lm

    folder = build_tiny_masked_lm(tmp_path_factory.mktemp("bert"))
    return load_model(resolve_model(str(folder)), LoadOptions(cache_dir=folder / "cache", use_cache=False, progress=False))


def test_masked_batch(tiny_bert):
    encoded = [encode(tiny_bert.training(), s, 32) for s in ("the nurse said that she was tired .", "he is .")]
    batch = make_batch(tiny_bert.training(), encoded, gen=torch.Generator().manual_seed(1))
    again = make_batch(tiny_bert.training(), encoded, gen=torch.Generator().manual_seed(1))
    assert torch.equal(batch.inputs["input_ids"], again.inputs["input_ids"]) and torch.equal(batch.labels, again.labels)
    for row, (ids, special) in enumerate(encoded):
        labelled = (batch.labels[row] != IGNORE).nonzero().flatten().tolist()
        assert labelled, "every sentence carries loss"
        assert all(not special[p] and batch.labels[row, p] == ids[p] for p in labelled)
    # representations read the uncorrupted sentence: mean over non-special tokens, as embed
    plain = make_batch(tiny_bert.training(), encoded, corrupt=False)
    assert (plain.labels == IGNORE).all()
    out = tiny_bert.training().model(**plain.inputs, output_hidden_states=True)
    rep = representation(out, "masked", plain)
    texts = ["the nurse said that she was tired .", "he is ."]
    assert_close_rows(rep.detach().double(), tiny_bert.embed(texts), Forward.of(tiny_bert, texts).hidden_rtol())


def test_encode_truncates_keeping_the_closing_token(tiny_bert, tiny_lm):
    long = "the nurse said that she was tired and the doctor said that he was tired ."
    ids, special = encode(tiny_bert.training(), long, 6)
    assert len(ids) == 6 and ids[-1] == tiny_bert.training().tokenizer.sep_token_id and special == [1, 0, 0, 0, 0, 1]
    ids, special = encode(tiny_lm.training(), "She is a nurse and he is a doctor.", 4)
    assert len(ids) == 4 and ids[0] == tiny_lm.training().prefix_token_id()
