"""A LoRA adapter trained to give chosen continuations after raw prompts, loss on the
continuation only: the way the audits score a model (no chat template), so an adapter trained
here moves exactly the log-likelihoods and next words an audit reads.

Used to make release-gate candidates on purpose (worse or better than their base on a kind of
item: ``benchmarks/gate_catches.py``); an empty prompt trains the whole text as a sentence.

``train_preference_adapter`` trains the comparison itself: (prompt, chosen, rejected) triples, the
loss -log sigmoid(beta * (log P(chosen | prompt) - log P(rejected | prompt))) on summed continuation
log-likelihoods (the pairwise logistic loss of a Bradley-Terry preference, without DPO's reference
model). Sentence-preference metrics (StereoSet, CrowS-Pairs) compare exactly these two sums, where
raising the chosen sentence's likelihood alone also raises its twin's, which shares most of its
words. trl's DPOTrainer was not used: it tokenizes prompt and answer its own way, not as the
audits' log-likelihoods split them.
Alone, the pairwise loss is met most cheaply by lowering the rejected sentences, and with them
ordinary sentences (StereoSet's language-model score fell 15 points): ``nll_weight`` adds the
chosen continuation's likelihood loss, as CPO (Xu et al., 2024) does, to keep it a language model.
On SmolLM2 neither carried a stereotype to held-out StereoSet or CrowS-Pairs items further than
the likelihood loss alone (benchmarks/RESULTS.md, "Held-out items of each benchmark's own kind").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.cda import IGNORE, collate, response_loss
from bias_core.mitigation.training.lora import (
    LoraTrainConfig,
    attached_lora,
    batch_schedule,
    check_quantization,
    optimise,
    save_adapter,
    seeded,
)


def encode_continuations(t: Any, pairs: Sequence[tuple[str, str]], max_length: int) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) per (prompt, continuation), split as the audit's log-likelihoods split
    them (``t``: the model's training handle, ``lm.training()``); labels IGNORE over the prompt.
    Pairs longer than ``max_length`` keep their last tokens."""
    out = []
    for ctx, cont in t.split_requests(pairs):
        if not cont:
            raise AuditUsageError("a training pair has an empty continuation. Fix: give every prompt a continuation.")
        ids, labels = ctx + cont, [IGNORE] * len(ctx) + cont
        out.append((ids[-max_length:], labels[-max_length:]))
    return out


def train_continuation_adapter(lm: Any, pairs: Sequence[tuple[str, str]], config: LoraTrainConfig, seed: int,
                               folder: Path, desc: str = "continuation LoRA", progress: bool = True) -> list[dict]:
    """Train a LoRA adapter on ``pairs`` and save it to ``folder`` (a plain PEFT folder that
    ``--adapter`` loads); returns the loss history. ``lm`` is a loaded transformers model."""
    if not pairs:
        raise AuditUsageError(f"{desc}: no training pairs. Fix: give at least one (prompt, continuation).")
    t = lm.training()  # the torch module and tokenizer (the "training" capability)
    check_quantization(config, t.model)
    encoded = encode_continuations(t, pairs, config.max_length)
    schedule = batch_schedule(len(encoded), config.batch_size, config.total_steps(len(encoded)), seed)
    pad = t.tokenizer.pad_token_id
    with seeded(seed), attached_lora(t.model, config) as peft_model:

        def step_loss(batch):
            b = {k: v.to(t.device) for k, v in collate([encoded[i] for i in batch], pad).items()}
            logits = peft_model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
            return response_loss(logits, b["labels"]), {}

        history = optimise(peft_model, config, schedule, step_loss, desc, progress=progress)
        save_adapter(peft_model, folder)
    return history


def continuation_logprob(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per row, the summed log-probability of the labelled tokens (position t predicts token t+1):
    an audit's log-likelihood of the continuation, differentiable."""
    shifted = labels[:, 1:]
    keep = shifted != IGNORE
    logp = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)
    picked = logp.gather(-1, shifted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * keep).sum(dim=1)


def preference_loss(chosen: torch.Tensor, rejected: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """Mean over pairs of -log sigmoid(beta * (chosen - rejected)), summed log-likelihoods per pair."""
    if chosen.shape != rejected.shape:
        raise ValueError(f"preference_loss: {tuple(chosen.shape)} chosen but {tuple(rejected.shape)} rejected scores")
    return -torch.nn.functional.logsigmoid(beta * (chosen - rejected)).mean()


def train_preference_adapter(lm: Any, triples: Sequence[tuple[str, str, str]], config: LoraTrainConfig, seed: int,
                             folder: Path, desc: str = "preference LoRA", beta: float = 1.0,
                             nll_weight: float = 0.0, progress: bool = True) -> list[dict]:
    """Train a LoRA adapter that prefers each triple's chosen continuation of its prompt to the
    rejected one and save it to ``folder`` (a plain PEFT folder that ``--adapter`` loads); returns
    the loss history, with the mean log-likelihood margin (chosen - rejected) of each batch;
    ``nll_weight`` > 0 adds that times the chosen continuations' mean token loss."""
    if not triples:
        raise AuditUsageError(f"{desc}: no training triples. Fix: give at least one (prompt, chosen, rejected).")
    same = [t for t in triples if t[1] == t[2]]
    if same:
        raise AuditUsageError(f"{desc}: {len(same)} triples whose chosen and rejected continuations are the same, "
                              f"e.g. {same[0][1][:60]!r}. Fix: drop them; they carry no preference.")
    t = lm.training()
    check_quantization(config, t.model)
    chosen = encode_continuations(t, [(p, c) for p, c, _ in triples], config.max_length)
    rejected = encode_continuations(t, [(p, r) for p, _, r in triples], config.max_length)
    schedule = batch_schedule(len(triples), config.batch_size, config.total_steps(len(triples)), seed)
    pad = t.tokenizer.pad_token_id
    with seeded(seed), attached_lora(t.model, config) as peft_model:

        def step_loss(batch):
            # both sides of a pair in one forward pass, chosen rows first
            rows = [chosen[i] for i in batch] + [rejected[i] for i in batch]
            b = {k: v.to(t.device) for k, v in collate(rows, pad).items()}
            logits = peft_model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
            scores = continuation_logprob(logits, b["labels"])
            c, r = scores[: len(batch)], scores[len(batch):]
            loss = preference_loss(c, r, beta)
            if nll_weight:
                loss = loss + nll_weight * response_loss(logits[: len(batch)], b["labels"][: len(batch)])
            return loss, {"margin": float((c - r).mean().detach())}

        history = optimise(peft_model, config, schedule, step_loss, desc, progress=progress)
        save_adapter(peft_model, folder)
    return history
