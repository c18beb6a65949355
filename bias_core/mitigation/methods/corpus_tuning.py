"""CDS and ER fine-tuning (DA-Gender, "Unmasking the Trade-off", after Hall Maudslay et al. 2019
and Huang et al. 2020), as LoRA adapters in the adapter cache.

- ``cds``: a seeded random subset of round(swap_rate · n) corpus sentences is gender-swapped
  (``swap.GenderSwapper``), the rest left as they are, and the model is tuned on the result
  with its own pretraining objective (``objectives``). The paper's code swapped the first
  swap_rate · n sentences of its list; a seeded random subset is the same in expectation and
  does not depend on the corpus order.
- ``er``: the model is tuned on the corpus with L_LM + λ · mean(1 − cos(r, r')), r' the
  representation of the sentence's gender-swapped copy (``objectives.er_loss``).

The paper fine-tunes all weights of GPT-2 / BERT / BART (lr 5e-5, batch 8, 8 epochs, length
128). Here a LoRA adapter is trained instead, like the project's other mitigations, so a
variant is a small cached file and the base model stays untouched (``CorpusTuningConfig``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.swap import GenderSwapper
from bias_core.mitigation.training.adapter_cache import AdapterCache, adapter_key, data_hash
from bias_core.mitigation.training.corpus import DebiasCorpus
from bias_core.mitigation.training.lora import (
    LoraTrainConfig,
    attached_lora,
    batch_schedule,
    check_quantization,
    optimise,
    save_adapter,
    seeded,
)
from bias_core.mitigation.training.objectives import encode, er_loss, lm_loss, make_batch, representation, sentence_representations

# Bump when the swap rules change what a swapped sentence is, so cached adapters stop matching.
# 2: the swapped subset is drawn from its own random stream (version 1 drew it from the training
# schedule's: the first pass trained on the subset's prefix, so every rate above 60 steps x 8 /
# n gave the same adapter).
SWAP_RULES_VERSION = 2
# Second word of the swap subset's seed: a stream of its own, independent of batch_schedule's,
# which draws from default_rng(seed).
_SUBSET_STREAM = 0xCD5


@dataclass(frozen=True)
class CorpusTuningConfig(LoraTrainConfig):
    mlm_probability: float = 0.15

    @classmethod
    def paper(cls) -> "CorpusTuningConfig":
        """The paper's schedule (batch 8, 8 epochs, length 128, linear decay with 100 warmup
        steps) on a LoRA adapter (r=64, alpha=16 as the project's QLoRA runs, lr 2e-4 since a
        LoRA adapter needs a larger rate than the paper's full fine-tuning at 5e-5)."""
        return cls(r=64, alpha=16, dropout=0.1, lr=2e-4, batch_size=8, steps=0, epochs=8, max_length=128,
                   lr_scheduler="linear", warmup_steps=100)

    @classmethod
    def cpu_quick(cls) -> "CorpusTuningConfig":
        """Plain LoRA sized for SmolLM2-135M on 2 CPU cores: r=8, alpha=16, lr 5e-4, 60 steps
        of 8 sentences cut at 64 tokens (see benchmarks/RESULTS.md for the measured step time)."""
        return cls(r=8, alpha=16, dropout=0.05, lr=5e-4, batch_size=8, steps=60, max_length=64)


def cds_sentences(sentences: Sequence[str], swap_rate: float, seed: int, swapper: GenderSwapper) -> list[str]:
    """The corpus with a seeded random subset of round(swap_rate · n) sentences swapped."""
    if not 0.0 <= swap_rate <= 1.0:
        raise AuditUsageError(f"CDS swap rate must be in [0, 1], got {swap_rate}. Fix: pass a share of sentences.")
    out = list(sentences)
    chosen = np.random.default_rng([seed, _SUBSET_STREAM]).permutation(len(out))[: int(round(swap_rate * len(out)))]
    for i in sorted(chosen.tolist()):
        out[i] = swapper.swap(out[i])[0]
    return out


def _pairs_record(swapper: GenderSwapper) -> list[Any]:
    p = swapper.pairs
    return [SWAP_RULES_VERSION, sorted(map(list, p.words)), sorted(map(list, p.names)), sorted(p.ambiguous_names)]


def _task_type(lm: Any) -> str | None:
    return "CAUSAL_LM" if lm.kind == "causal" else None


def _train(lm: Any, method: str, extra_hp: dict[str, Any], records: list[Any], config: CorpusTuningConfig,
           seed: int, cache_dir: Path | str, progress: bool,
           make_step: Callable[[Any, torch.Generator], Callable[[Sequence[int]], Any]], n_examples: int) -> Path:
    tr = lm.training()  # the torch module and tokenizer (the "training" capability)
    check_quantization(config, tr.model)
    hp = {**config.hyperparameters(), **extra_hp}
    key = adapter_key(tr, method, hp, data_hash(records), seed)

    def build(folder: Path) -> None:
        schedule = batch_schedule(n_examples, config.batch_size, config.total_steps(n_examples), seed)
        with seeded(seed), attached_lora(tr.model, config, task_type=_task_type(tr)) as peft_model:
            gen = torch.Generator().manual_seed(seed)
            history = optimise(peft_model, config, schedule, make_step(peft_model, gen), f"{method} {tr.name}", progress)
            save_adapter(peft_model, folder)
        (folder / "training_log.json").write_text(json.dumps({"key": key, "history": history}, indent=1))

    return AdapterCache(cache_dir).get_or_build(key, build)


def train_cds_adapter(lm: Any, corpus: DebiasCorpus, swap_rate: float, config: CorpusTuningConfig, seed: int,
                      cache_dir: Path | str, progress: bool = True, swapper: GenderSwapper | None = None) -> Path:
    """Train (or reuse) a CDS adapter at ``swap_rate``; returns its cache folder."""
    tr = lm.training()
    swapper = swapper or GenderSwapper()
    texts = cds_sentences(corpus.sentences, swap_rate, seed, swapper)
    encoded = [encode(tr, t, config.max_length) for t in texts]
    records = [corpus.sha256, _pairs_record(swapper)]

    def make_step(model: Any, gen: torch.Generator):
        def step(batch_idx: Sequence[int]):
            batch = make_batch(tr, [encoded[i] for i in batch_idx], mlm_probability=config.mlm_probability, gen=gen)
            return lm_loss(model, tr.kind, batch, tr.device)[0], {}
        return step

    return _train(lm, "cds", {"swap_rate": float(swap_rate)}, records, config, seed, cache_dir, progress,
                  make_step, len(encoded))


def train_er_adapter(lm: Any, corpus: DebiasCorpus, lam: float, config: CorpusTuningConfig, seed: int,
                     cache_dir: Path | str, progress: bool = True, swapper: GenderSwapper | None = None) -> Path:
    """Train (or reuse) an ER adapter with weight ``lam``; returns its cache folder."""
    tr = lm.training()
    if lam < 0:
        raise AuditUsageError(f"ER weight λ must be >= 0, got {lam}. Fix: pass a non-negative λ.")
    swapper = swapper or GenderSwapper()
    originals = [encode(tr, t, config.max_length) for t in corpus.sentences]
    swapped = [encode(tr, swapper.swap(t)[0], config.max_length) for t in corpus.sentences]
    records = [corpus.sha256, _pairs_record(swapper)]

    def make_step(model: Any, gen: torch.Generator):
        def step(batch_idx: Sequence[int]):
            batch = make_batch(tr, [originals[i] for i in batch_idx], mlm_probability=config.mlm_probability, gen=gen)
            loss, out = lm_loss(model, tr.kind, batch, tr.device)
            if tr.kind == "causal":  # the LM pass saw the sentences as they are
                rep = representation(out, tr.kind, batch)
            else:
                rep = sentence_representations(model, tr.kind, make_batch(tr, [originals[i] for i in batch_idx],
                                                                          corrupt=False), tr.device)
            rep_swapped = sentence_representations(model, tr.kind, make_batch(tr, [swapped[i] for i in batch_idx],
                                                                              corrupt=False), tr.device)
            total = er_loss(loss, rep, rep_swapped, lam)
            return total, {"lm_loss": float(loss.detach()), "distance": float((total - loss).detach()) / max(lam, 1e-12)}
        return step

    return _train(lm, "er", {"lambda": float(lam)}, records, config, seed, cache_dir, progress,
                  make_step, len(originals))
