"""A LoRA adapter trained to give chosen continuations after raw prompts, loss on the
continuation only: the way the audits score a model (no chat template), so an adapter trained
here moves exactly the log-likelihoods and next words an audit reads.

Used to make release-gate candidates on purpose (worse or better than their base on a kind of
item: ``benchmarks/gate_catches.py``); an empty prompt trains the whole text as a sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
