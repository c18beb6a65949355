"""SentenceDebias (Liang et al. 2020), as DA-Gender ("Unmasking the Trade-off") applies it.

Estimation: take a leading share (the *ratio*) of the gender word pairs (``SwapPairs.all_pairs``:
the lexicon's pairs first, then the project's word pairs, names, his/her and him/her); for every
corpus sentence holding a word of such a pair, make its counterpart with only that pair swapped
(a "defining" sentence pair). Represent both sentences, scale each representation to unit
length, subtract each pair's mean, and take the top principal direction(s) of the result: the
gender subspace B (k orthonormal rows; the paper and bias-bench use k = 1).

Removal, at inference: x -> x − (x Bᵀ) B on every token's final hidden state, before anything
reads it. It is applied by a forward hook on the model's body (``model.base_model``: the
decoder stack of a causal LM, BERT's encoder, BART's encoder-decoder), so:

- causal LMs: the final (normed) hidden state of every position, i.e. the input of the LM head
  (every score: sentence log-likelihoods, word probabilities, generation) and the last-token
  state ``CausalLM.embed`` returns (SEAT);
- masked LMs: the encoder's final states, i.e. the input of the MLM head and the states
  ``MaskedLM.embed`` averages (SEAT);
- BART: the decoder's final states, the input of the LM head, as the paper's code does (the
  subspace is then estimated on decoder representations). ``MaskedLM.embed`` reads BART's
  encoder, which the hook leaves alone, so SEAT on BART is not debiased.

Unlike the paper's evaluation code, the debiased state is not re-scaled to unit length before
the LM head (bias-bench and Liang et al. do not re-scale; unit states would flatten every
next-token distribution, a change unrelated to gender).

``sentence_debiased(lm, B)`` hooks a loaded handle for a ``with`` block and removes the hook on
exit, leaving the model as it was; ``debiased_copy(lm, B)`` gives an independent handle on a
copy of the model, for variants that live as long as a test session.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.swap import GenderSwapper, SwapPairs


@dataclass(frozen=True)
class DefiningPair:
    male: str
    female: str
    pair: tuple[str, str]


def leading_pairs(pairs: SwapPairs, ratio: float) -> list[tuple[str, str]]:
    """The leading max(1, int(ratio · n)) pairs of ``pairs.all_pairs()`` (the paper's rule)."""
    if not 0.0 < ratio <= 1.0:
        raise AuditUsageError(f"SentenceDebias ratio of pairs must be in (0, 1], got {ratio}.")
    every = pairs.all_pairs()
    return every[: max(1, int(len(every) * ratio))]


def defining_sentences(sentences: Sequence[str], word_pairs: Sequence[tuple[str, str]],
                       swapper: GenderSwapper) -> list[DefiningPair]:
    """(male version, female version) of each corpus sentence holding one word of a pair; a
    sentence holding both words of a pair gives none for that pair (no clean counterpart)."""
    from bias_core.mitigation.methods.swap import words_of

    vocab = [words_of(s) for s in sentences]
    out = []
    for pair in word_pairs:
        male, female = pair[0].lower(), pair[1].lower()
        for sentence, words in zip(sentences, vocab):
            if (male in words) == (female in words):
                continue
            swapped = swapper.swap_pair(sentence, pair)
            if swapped is None:
                continue
            m, f = (sentence, swapped) if male in words else (swapped, sentence)
            out.append(DefiningPair(m, f, pair))
    return out


def gender_subspace(male: np.ndarray, female: np.ndarray, k: int = 1) -> np.ndarray:
    """The top-k principal directions of the pair-centred unit representations, [k, hidden].

    Each row is scaled to unit length, each pair's mean is subtracted from both of its rows,
    and the 2n rows' top right singular vectors are returned (the principal axes: the rows
    already have mean 0). Signs are fixed so each direction's largest-magnitude entry is
    positive, which makes the result deterministic (the projection does not depend on sign).
    """
    male, female = np.asarray(male, dtype=np.float64), np.asarray(female, dtype=np.float64)
    if male.shape != female.shape or male.ndim != 2 or male.shape[0] < 1:
        raise ValueError(f"gender_subspace: need two [n, hidden] arrays of one shape, got {male.shape} and {female.shape}")
    if not 1 <= k <= male.shape[1]:
        raise ValueError(f"gender_subspace: k must be in [1, {male.shape[1]}], got {k}")
    male = male / np.linalg.norm(male, axis=1, keepdims=True)
    female = female / np.linalg.norm(female, axis=1, keepdims=True)
    mean = (male + female) / 2.0
    rows = np.concatenate([male - mean, female - mean], axis=0)
    _, _, vt = np.linalg.svd(rows, full_matrices=False)
    basis = vt[:k]
    signs = np.sign(basis[np.arange(k), np.argmax(np.abs(basis), axis=1)])
    return basis * signs[:, None]


def project_out(x: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """x − (x Bᵀ) B over the last dimension; B has orthonormal rows."""
    b = basis.to(device=x.device, dtype=x.dtype)
    return x - (x @ b.T) @ b


def subspace_digest(basis: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(basis, dtype=np.float64).tobytes()).hexdigest()[:16]


# ----- representations ---------------------------------------------------------------------------
def _decoder_means(lm: Any, sentences: Sequence[str]) -> np.ndarray:
    """BART: the mean of the decoder's final layer over each sentence (teacher-forced on the
    sentence itself, as the paper reads ``decoder_hidden_states[-1]``)."""
    from bias_core.models.training import width_batches

    t = lm.training()
    encoded = [t.encode_special(s)[0] for s in sentences]
    out = np.zeros((len(sentences), t.model.config.d_model), dtype=np.float64)
    with torch.inference_mode():
        for batch in width_batches([len(e) for e in encoded], t.batch_size):
            ids, mask = t.right_pad([encoded[i] for i in batch])
            hidden = t.model(input_ids=ids, attention_mask=mask, output_hidden_states=True,
                              use_cache=False).decoder_hidden_states[-1].double().cpu()
            keep = mask.double().cpu()[..., None]
            means = (hidden * keep).sum(1) / keep.sum(1)
            for row, i in enumerate(batch):
                out[i] = means[row].numpy()
    return out


def representations(lm: Any, sentences: Sequence[str]) -> np.ndarray:
    """What the hook acts on, pooled per sentence: ``lm.embed`` for causal and masked LMs
    (last token / mean of the final layer), the decoder mean for BART."""
    if lm.kind == "seq2seq":
        return _decoder_means(lm, sentences)
    return np.asarray(lm.embed(list(sentences), desc="SentenceDebias: defining sentences"), dtype=np.float64)


class SubspaceEstimator:
    """Gender subspaces of one base model at several ratios, each sentence represented once.

    ``max_pairs`` caps the defining sentence pairs per ratio (a seeded subset) for CPU runs.
    """

    def __init__(self, lm: Any, sentences: Sequence[str], swapper: GenderSwapper | None = None,
                 max_pairs: int | None = None, seed: int = 0, k: int = 1):
        self.lm, self.sentences = lm, list(sentences)
        self.swapper = swapper or GenderSwapper()
        self.max_pairs, self.seed, self.k = max_pairs, seed, k
        self._reps: dict[str, np.ndarray] = {}

    def defining(self, ratio: float) -> list[DefiningPair]:
        found = defining_sentences(self.sentences, leading_pairs(self.swapper.pairs, ratio), self.swapper)
        if self.max_pairs is not None and len(found) > self.max_pairs:
            keep = np.sort(np.random.default_rng(self.seed).permutation(len(found))[: self.max_pairs])
            found = [found[i] for i in keep]
        return found

    def subspace(self, ratio: float) -> tuple[np.ndarray, dict[str, Any]]:
        """(B, provenance) for ``ratio``."""
        found = self.defining(ratio)
        if not found:
            raise AuditUsageError(
                f"SentenceDebias at ratio {ratio}: no corpus sentence holds a word of the leading "
                f"{len(leading_pairs(self.swapper.pairs, ratio))} pair(s). Fix: raise the ratio or use a larger corpus.")
        todo = list(dict.fromkeys(s for d in found for s in (d.male, d.female) if s not in self._reps))
        if todo:
            self._reps.update(zip(todo, representations(self.lm, todo)))
        male = np.stack([self._reps[d.male] for d in found])
        female = np.stack([self._reps[d.female] for d in found])
        basis = gender_subspace(male, female, self.k)
        info = {"ratio": ratio, "word_pairs": len(leading_pairs(self.swapper.pairs, ratio)),
                "sentence_pairs": len(found), "components": self.k, "subspace": subspace_digest(basis)}
        return basis, info


# ----- the hook ----------------------------------------------------------------------------------
def _hook(basis: torch.Tensor):
    def hook(module: Any, args: Any, output: Any) -> Any:
        if isinstance(output, tuple):
            return (project_out(output[0], basis), *output[1:])
        x = output.last_hidden_state
        y = project_out(x, basis)
        for field in ("hidden_states", "decoder_hidden_states"):
            states = getattr(output, field, None)
            if isinstance(states, tuple) and states and states[-1] is x:
                setattr(output, field, (*states[:-1], y))
        output.last_hidden_state = y
        return output

    return hook


def install(model: Any, basis: np.ndarray) -> Any:
    """Hook the projection onto ``model``'s body; returns the handle whose ``remove()`` undoes it."""
    body = model.base_model
    if body is model:
        raise AuditUsageError(f"SentenceDebias: {type(model).__name__} has no separate body before its LM head.")
    b = torch.as_tensor(np.asarray(basis), dtype=torch.float32)
    hidden = int(getattr(model.config, "hidden_size", 0) or getattr(model.config, "d_model", 0))
    if b.ndim != 2 or b.shape[1] != hidden:
        raise AuditUsageError(f"SentenceDebias: subspace of shape {tuple(b.shape)} does not fit hidden size {hidden}.")
    return body.register_forward_hook(_hook(b))


def _debiased_handle(t: Any, model: Any, basis: np.ndarray) -> Any:
    # A new fingerprint, so result-cache entries of the base and the debiased model never mix.
    return t.with_model(model, f"{t.fingerprint}:sentence-debias:{subspace_digest(basis)}")


@contextlib.contextmanager
def sentence_debiased(lm: Any, basis: np.ndarray) -> Iterator[Any]:
    """A handle whose outputs have the subspace removed, for the ``with`` block; it shares
    ``lm``'s model, so ``lm`` itself must not be used inside the block. The hook is removed on
    exit (also on errors)."""
    t = lm.training()
    handle = install(t.model, basis)
    try:
        yield _debiased_handle(t, t.model, basis)
    finally:
        handle.remove()


def debiased_copy(lm: Any, basis: np.ndarray) -> Any:
    """An independent handle on a copy of ``lm``'s model with the projection hooked in."""
    t = lm.training()
    model = copy.deepcopy(t.model)
    install(model, basis)
    return _debiased_handle(t, model, basis)
