"""SentenceDebias: the projection, the subspace estimate, and the hook on a loaded model."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.sentence_debias import (
    SubspaceEstimator,
    debiased_copy,
    defining_sentences,
    gender_subspace,
    leading_pairs,
    project_out,
    sentence_debiased,
)
from bias_core.mitigation.methods.swap import GenderSwapper, default_pairs

from tolerances import Forward, assert_close, assert_close_rows

SENTENCES = ["She is a nurse and her job is hard.", "He said his friend is a doctor.", "The man read.",
             "My friend likes books.", "The boy is here.", "Mary met a friend."]


def _basis(*rows):
    b = np.asarray(rows, dtype=np.float64)
    return torch.tensor(b / np.linalg.norm(b, axis=1, keepdims=True))


def test_projection_keeps_orthogonal_and_removes_inside():
    basis = _basis([1.0, 0.0, 0.0])
    ortho = torch.tensor([[0.0, 2.0, -3.0]], dtype=torch.float64)
    inside = torch.tensor([[5.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(project_out(ortho, basis), ortho)
    assert torch.equal(project_out(inside, basis), torch.zeros_like(inside))
    assert project_out(torch.tensor([[5.0, 2.0, -3.0]], dtype=torch.float64), basis).tolist() == [[0.0, 2.0, -3.0]]


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, (3, 6), elements=st.floats(-10, 10)), arrays(np.float64, (2, 6), elements=st.floats(-1, 1)))
def test_projection_properties(x, raw):
    q, r = np.linalg.qr(raw.T)
    if np.min(np.abs(np.diag(r))) < 1e-3:
        return  # nearly dependent rows: no 2-d subspace
    basis = torch.tensor(q.T)
    y = project_out(torch.tensor(x), basis)
    assert torch.allclose(y @ basis.T, torch.zeros(3, 2, dtype=torch.float64), atol=1e-9)  # nothing left inside
    assert torch.allclose(project_out(y, basis), y, atol=1e-9)  # idempotent
    assert torch.allclose(torch.tensor(x) - y, (torch.tensor(x) @ basis.T) @ basis, atol=1e-9)  # only the inside goes


def test_gender_subspace_finds_the_pair_direction():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(20, 5)) * 0.01 + np.array([0.0, 0.0, 3.0, 0.0, 0.0])
    direction = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
    basis = gender_subspace(shared + direction, shared - direction, k=1)
    assert basis.shape == (1, 5)
    assert np.allclose(np.abs(basis[0]), direction, atol=1e-2) and basis[0, 1] > 0  # sign fixed
    assert np.allclose(basis @ basis.T, np.eye(1))


def test_leading_pairs_rule():
    pairs = default_pairs()
    n = len(pairs.all_pairs())
    assert leading_pairs(pairs, 0.001) == pairs.all_pairs()[:1]
    assert len(leading_pairs(pairs, 0.1)) == int(n * 0.1)
    assert leading_pairs(pairs, 1.0) == pairs.all_pairs()
    with pytest.raises(AuditUsageError, match="ratio"):
        leading_pairs(pairs, 0.0)


def test_defining_sentences():
    found = defining_sentences(["He ran.", "She and he ran.", "The cat ran."], [("he", "she")], GenderSwapper())
    assert [(d.male, d.female) for d in found] == [("He ran.", "She ran.")]  # a sentence holding both is left out


def _checksum(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


def test_hooked_causal_model_equals_hand_computation_and_is_removed(tiny_lm):
    basis, info = SubspaceEstimator(tiny_lm, SENTENCES).subspace(1.0)
    assert info["sentence_pairs"] >= 3 and basis.shape == (1, tiny_lm.engine.model.config.hidden_size)
    model = tiny_lm.engine.model
    ids = torch.tensor([tiny_lm.engine.encode("She is a nurse.")], device=model.device)
    before_sum = _checksum(model)
    with torch.no_grad():
        plain = model(input_ids=ids, output_hidden_states=True)
    b = torch.tensor(basis, dtype=torch.float32, device=model.device)
    with sentence_debiased(tiny_lm, basis) as handle, torch.no_grad():
        assert handle.fingerprint != tiny_lm.fingerprint and "sentence-debias" in handle.fingerprint
        hooked = model(input_ids=ids, output_hidden_states=True)
        final = plain.hidden_states[-1]
        by_hand = final - (final @ b.T) @ b
        sizes = Forward.of(tiny_lm, ["She is a nurse."])
        assert_close_rows(hooked.hidden_states[-1][0], by_hand[0], sizes.hidden_rtol(), kind="hidden states")
        assert_close(hooked.logits, model.lm_head(by_hand), sizes.logit_atol(), kind="logits")
        embedded = handle.embed(["She is a nurse."])
        assert abs((embedded @ basis.T).item()) < 1e-5  # SEAT's representation has no gender component
    with torch.no_grad():
        after = model(input_ids=ids, output_hidden_states=True)
    assert _checksum(model) == before_sum
    assert torch.equal(after.logits, plain.logits)
    assert not model.base_model._forward_hooks


def test_debiased_copy_leaves_the_base_handle_alone(tiny_lm):
    basis, _ = SubspaceEstimator(tiny_lm, SENTENCES).subspace(0.5)
    base_lp = tiny_lm.sentence_logprob(["He is a doctor."])
    copy_handle = debiased_copy(tiny_lm, basis)
    assert copy_handle.engine.model is not tiny_lm.engine.model
    assert not np.allclose(copy_handle.sentence_logprob(["He is a doctor."]), base_lp)
    assert np.array_equal(tiny_lm.sentence_logprob(["He is a doctor."]), base_lp)


def test_hooked_masked_model(tmp_path):
    from bias_core.models import LoadOptions, load_model, resolve_model

    from tiny_model import build_tiny_masked_lm

    folder = build_tiny_masked_lm(tmp_path / "bert")
    lm = load_model(resolve_model(str(folder)), LoadOptions(cache_dir=tmp_path / "c", use_cache=False, progress=False))
    sentences = ["the nurse said that she was tired .", "the doctor said that he was tired .", "he is a good person .",
                 "she is a good person ."]
    basis, _ = SubspaceEstimator(lm, sentences).subspace(1.0)
    before = _checksum(lm.engine.model)
    with sentence_debiased(lm, basis) as handle:
        assert abs((handle.embed(["he is a good person ."]) @ basis.T).item()) < 1e-5
    assert _checksum(lm.engine.model) == before and not lm.engine.model.base_model._forward_hooks


def test_subspace_must_fit_the_model(tiny_lm):
    with pytest.raises(AuditUsageError, match="hidden size"):
        with sentence_debiased(tiny_lm, np.ones((1, 7)) / np.sqrt(7)):
            pass
