"""Each model kind's own pretraining objective on plain sentences, its sentence representation,
and the embedding-regularization (ER) loss, for CDS and ER fine-tuning.

- causal LMs: next-token loss over every sentence token, scored after the model's prefix token
  (BOS, else EOS), as ``CausalLM.sentence_logprob`` scores a sentence; no EOS is appended
  (the stand-in corpus holds sentence openings, which must not learn to end there);
- masked LMs (BERT-like): masked-LM loss, 15% of the non-special tokens chosen (at least one),
  of which 80% become the mask token, 10% a random token, 10% stay (Devlin et al. 2019);
- BART ("seq2seq"): mask filling, the chosen tokens replaced by the mask token in the encoder
  input and the decoder reconstructing the whole sentence.

Sentence representation (ER, and SentenceDebias for BART): causal -> the final layer's hidden
state at the last real token (``CausalLM.embed``'s choice); masked -> the mean of the final
layer over non-special tokens (``MaskedLM.embed``'s); BART -> the mean of the decoder's final
layer over the sentence, as the paper says for encoders and BART's decoder. The paper's code
read position -1 of sequences padded to 128 (a pad token for most sentences) and averaged over
pads too; here pads are excluded.

ER loss (Huang et al. 2020, as the paper extends it): L = L_LM(original) + λ · mean_i
(1 − cos(r_i, r'_i)), r' the representation of the gender-swapped sentence. The paper writes
λ · (−cos); the two differ by the constant λ, so they have the same gradients, and this form is
0 when the two representations agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

IGNORE = -100


@dataclass
class Batch:
    """Model inputs (right padded) and what the objective and the representation read."""

    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor
    keep: torch.Tensor  # [batch, width] float: positions the sentence representation averages
    last: torch.Tensor  # [batch] long: position of each row's last real token


def er_distance(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Mean over rows of 1 − cos(a_i, b_i); a, b: [batch, hidden]."""
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)
    return (1.0 - cos).mean()


def er_loss(lm_loss: torch.Tensor, original: torch.Tensor, swapped: torch.Tensor, lam: float) -> torch.Tensor:
    """L_LM + λ · mean(1 − cos(original_i, swapped_i))."""
    return lm_loss + float(lam) * er_distance(original, swapped)


def token_loss(logits: torch.Tensor, labels: torch.Tensor, shift: bool) -> torch.Tensor:
    """Mean cross-entropy over labelled positions (``shift``: position t predicts token t+1)."""
    if shift:
        logits, labels = logits[:, :-1, :], labels[:, 1:]
    if not bool((labels != IGNORE).any()):
        raise ValueError("token_loss: the batch has no labelled tokens")
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=IGNORE)


def encode(t: Any, sentence: str, max_length: int) -> tuple[list[int], list[int]]:
    """(token ids, special-token flags) of one sentence as this model kind trains on it."""
    tok = t.tokenizer
    if t.kind == "causal":
        ids = [t.prefix_token_id()] + list(tok(sentence, add_special_tokens=False)["input_ids"])
        special = [1] + [0] * (len(ids) - 1)
    else:
        enc = tok(sentence, add_special_tokens=True, return_special_tokens_mask=True)
        ids, special = list(enc["input_ids"]), list(enc["special_tokens_mask"])
    if len(ids) > max_length:
        if t.kind != "causal" and special[-1]:  # keep the encoder's closing special token
            return ids[: max_length - 1] + ids[-1:], special[: max_length - 1] + special[-1:]
        return ids[:max_length], special[:max_length]
    return ids, special


def _choose_masked(special: Sequence[int], probability: float, gen: torch.Generator) -> list[int]:
    candidates = [i for i, s in enumerate(special) if not s]
    if not candidates:
        return []
    draws = torch.rand(len(candidates), generator=gen)
    chosen = [c for c, d in zip(candidates, draws.tolist()) if d < probability]
    if not chosen:  # at least one token carries loss
        chosen = [candidates[int(torch.randint(len(candidates), (1,), generator=gen))]]
    return chosen


def make_batch(t: Any, encoded: Sequence[tuple[list[int], list[int]]], *, mlm_probability: float = 0.15,
               gen: torch.Generator | None = None, corrupt: bool = True) -> Batch:
    """The training batch of the model kind's objective (module doc) for encoded sentences;
    ``corrupt=False``: the sentences as given, for their representations only."""
    tok = t.tokenizer
    pad = tok.pad_token_id
    width = max(len(ids) for ids, _ in encoded)
    n = len(encoded)
    ids = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    keep = torch.zeros((n, width), dtype=torch.float32)
    for row, (seq, special) in enumerate(encoded):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        keep[row, : len(seq)] = 1.0 - torch.tensor(special, dtype=torch.float32)
    last = mask.sum(1) - 1
    if t.kind == "causal":
        labels = ids.masked_fill(mask == 0, IGNORE)
        labels[:, 0] = IGNORE  # the prefix token is context, not a prediction target
        return Batch({"input_ids": ids, "attention_mask": mask}, labels, keep, last)
    if t.kind == "seq2seq":
        keep = mask.float()  # the decoder reads the sentence shifted right: average its real positions
    if not corrupt:
        return Batch({"input_ids": ids, "attention_mask": mask}, torch.full_like(ids, IGNORE), keep, last)
    gen = gen if gen is not None else torch.Generator().manual_seed(0)
    corrupted = ids.clone()
    if t.kind == "seq2seq":
        labels = ids.masked_fill(mask == 0, IGNORE)
        for row, (_, special) in enumerate(encoded):
            for pos in _choose_masked(special, mlm_probability, gen):
                corrupted[row, pos] = tok.mask_token_id
        return Batch({"input_ids": corrupted, "attention_mask": mask}, labels, keep, last)
    labels = torch.full_like(ids, IGNORE)
    vocab = len(tok)
    for row, (seq, special) in enumerate(encoded):
        for pos in _choose_masked(special, mlm_probability, gen):
            labels[row, pos] = seq[pos]
            roll = float(torch.rand(1, generator=gen))
            if roll < 0.8:
                corrupted[row, pos] = tok.mask_token_id
            elif roll < 0.9:
                corrupted[row, pos] = int(torch.randint(vocab, (1,), generator=gen))
    return Batch({"input_ids": corrupted, "attention_mask": mask}, labels, keep, last)


def lm_loss(model: Any, kind: str, batch: Batch, device: Any) -> tuple[torch.Tensor, Any]:
    """(the objective's loss, the model output with hidden states) for one batch."""
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    labels = batch.labels.to(device)
    if kind == "seq2seq":
        out = model(**inputs, labels=labels, output_hidden_states=True, use_cache=False)
        return token_loss(out.logits, labels, shift=False), out
    out = model(**inputs, output_hidden_states=True, **({"use_cache": False} if kind == "causal" else {}))
    return token_loss(out.logits, labels, shift=kind == "causal"), out


def representation(output: Any, kind: str, batch: Batch) -> torch.Tensor:
    """Sentence representations [batch, hidden] from a model output with hidden states."""
    if kind == "causal":
        hidden = output.hidden_states[-1]
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), batch.last.to(hidden.device)]
    hidden = output.decoder_hidden_states[-1] if kind == "seq2seq" else output.hidden_states[-1]
    keep = batch.keep.to(hidden.device, hidden.dtype)[..., None]
    return (hidden * keep).sum(1) / keep.sum(1).clamp_min(1.0)


def sentence_representations(model: Any, kind: str, batch: Batch, device: Any) -> torch.Tensor:
    """Representations of a batch's sentences as given (uncorrupted inputs, no loss)."""
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    if kind == "seq2seq":
        out = model(**inputs, output_hidden_states=True, use_cache=False)
    else:
        out = model(**inputs, output_hidden_states=True, **({"use_cache": False} if kind == "causal" else {}))
    return representation(out, kind, batch)
