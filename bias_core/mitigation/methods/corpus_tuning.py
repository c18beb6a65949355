"""CDS and ER fine-tuning (DA-Gender, "Unmasking the Trade-off", after Hall Maudslay et al. 2019
and Huang et al. 2020), as LoRA adapters in the adapter cache.

- ``cds``: a seeded random subset of round(swap_rate · n) corpus sentences is gender-swapped
  (``swap.GenderSwapper``), the rest left as they are, and the model is tuned on the result
  with its own pretraining objective (``objectives``). The paper's code swapped the first
  swap_rate · n sentences of its list; a seeded random subset is the same in expectation and
  does not depend on the corpus order.
- ``er``: the model is tuned on the corpus with L_LM + λ · mean(1 − cos(r, r')), r' the
  representation of the sentence's gender-swapped copy (``objectives.er_loss``).

Two ways to train (``CorpusTuningConfig``):

- the paper's schedule (``CorpusTuningConfig.paper(column)``, ``full_finetune=True``): every
  weight of a float32 copy of the model fine-tuned, with Table 12's batch size, learning rate
  and epochs for the model's column and the released code's AdamW, linear warm-up and gradient
  clipping (``paper_settings``). The tuned copy is a handle of its own (``fully_tuned``), held
  only while it is measured: a fully tuned copy is the size of the model, too large to cache
  per point and seed;
- a LoRA adapter (``cpu_quick()`` on CPU, ``cuda_lora()`` on CUDA), like the project's other
  mitigations: a variant is a small cached file and the base model stays untouched. Not the
  paper's schedule; what ``--mitigation cds|er`` and the ``quick`` sweep train.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.swap import GenderSwapper
from bias_core.mitigation.training.adapter_cache import AdapterCache, adapter_key, data_hash, key_hash
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
    full_finetune: bool = False  # every weight trained (the paper's schedule), no adapter
    max_grad_norm: float | None = None  # clip the gradient norm to this (the paper's code: 1.0)

    def hyperparameters(self) -> dict[str, Any]:
        """What changes the trained weights; the LoRA fields are left out of a full fine-tuning's,
        and the fields added for it out of an adapter's (so cached adapters keep their keys)."""
        hp = super().hyperparameters()
        if self.full_finetune:
            for name in ("r", "alpha", "dropout", "target_modules", "load_in_4bit"):
                hp.pop(name, None)
        else:
            hp.pop("full_finetune")
            if self.max_grad_norm is None:
                hp.pop("max_grad_norm")
        return hp

    @classmethod
    def paper(cls, column: str) -> "CorpusTuningConfig":
        """The paper's schedule for a Table 12 column ("gpt2", "bert-base", ...): full
        fine-tuning, Table 12's batch size, learning rate and epochs, the released code's linear
        decay after 100 warm-up steps, gradients clipped at norm 1.0, sentences cut at 128 tokens."""
        from bias_core.mitigation.methods import paper_settings as ps

        col = ps.TABLE12[column]
        return cls(lr=col.lr, batch_size=col.batch_size, steps=0, epochs=col.epochs, max_length=ps.MAX_LENGTH,
                   lr_scheduler="linear", warmup_steps=ps.WARMUP_STEPS, full_finetune=True,
                   max_grad_norm=ps.MAX_GRAD_NORM)

    @classmethod
    def cuda_lora(cls) -> "CorpusTuningConfig":
        """A LoRA adapter on CUDA (r=64, alpha=16 as the project's QLoRA runs, lr 2e-4, which a
        LoRA adapter needs where full fine-tuning takes 2e-5/5e-5) over the released code's
        batches of 8, 8 epochs, 128 tokens and 100 warm-up steps. Not the paper's schedule."""
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


@dataclass(frozen=True)
class TrainingJob:
    """What one CDS or ER training is: its data (as cache-key records) and its step's loss."""

    method: str
    extra_hp: dict[str, Any]
    records: list[Any]
    make_step: Callable[[Any, torch.Generator], Callable[[Sequence[int]], Any]]
    n_examples: int

    def key(self, tr: Any, config: CorpusTuningConfig, seed: int) -> dict[str, Any]:
        return adapter_key(tr, self.method, {**config.hyperparameters(), **self.extra_hp}, data_hash(self.records), seed)


def _train(lm: Any, job: TrainingJob, config: CorpusTuningConfig, seed: int, cache_dir: Path | str,
           progress: bool) -> Path:
    if config.full_finetune:
        raise AuditUsageError(f"{job.method}: a full fine-tuning configuration trains no adapter. Fix: use "
                              "fully_tuned() for the paper's schedule, or a LoRA configuration here.")
    tr = lm.training()  # the torch module and tokenizer (the "training" capability)
    check_quantization(config, tr.model)
    key = job.key(tr, config, seed)

    def build(folder: Path) -> None:
        schedule = batch_schedule(job.n_examples, config.batch_size, config.total_steps(job.n_examples), seed)
        with seeded(seed), attached_lora(tr.model, config, task_type=_task_type(tr)) as peft_model:
            gen = torch.Generator().manual_seed(seed)
            history = optimise(peft_model, config, schedule, job.make_step(peft_model, gen), f"{job.method} {tr.name}",
                               progress)
            save_adapter(peft_model, folder)
        (folder / "training_log.json").write_text(json.dumps({"key": key, "history": history}, indent=1))

    return AdapterCache(cache_dir).get_or_build(key, build)


def cds_job(lm: Any, corpus: DebiasCorpus, swap_rate: float, config: CorpusTuningConfig, seed: int,
            swapper: GenderSwapper | None = None) -> TrainingJob:
    """CDS at ``swap_rate``: the corpus with a seeded share swapped, the model's own objective."""
    tr = lm.training()
    swapper = swapper or GenderSwapper()
    texts = cds_sentences(corpus.sentences, swap_rate, seed, swapper)
    encoded = [encode(tr, t, config.max_length) for t in texts]

    def make_step(model: Any, gen: torch.Generator):
        def step(batch_idx: Sequence[int]):
            batch = make_batch(tr, [encoded[i] for i in batch_idx], mlm_probability=config.mlm_probability, gen=gen)
            return lm_loss(model, tr.kind, batch, tr.device)[0], {}
        return step

    return TrainingJob("cds", {"swap_rate": float(swap_rate)}, [corpus.sha256, _pairs_record(swapper)], make_step,
                       len(encoded))


def er_job(lm: Any, corpus: DebiasCorpus, lam: float, config: CorpusTuningConfig, seed: int,
           swapper: GenderSwapper | None = None) -> TrainingJob:
    """ER with weight ``lam``: L_LM + λ · mean(1 − cos) to each sentence's swapped copy."""
    tr = lm.training()
    if lam < 0:
        raise AuditUsageError(f"ER weight λ must be >= 0, got {lam}. Fix: pass a non-negative λ.")
    swapper = swapper or GenderSwapper()
    originals = [encode(tr, t, config.max_length) for t in corpus.sentences]
    swapped = [encode(tr, swapper.swap(t)[0], config.max_length) for t in corpus.sentences]

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

    return TrainingJob("er", {"lambda": float(lam)}, [corpus.sha256, _pairs_record(swapper)], make_step, len(originals))


def train_cds_adapter(lm: Any, corpus: DebiasCorpus, swap_rate: float, config: CorpusTuningConfig, seed: int,
                      cache_dir: Path | str, progress: bool = True, swapper: GenderSwapper | None = None) -> Path:
    """Train (or reuse) a CDS adapter at ``swap_rate``; returns its cache folder."""
    return _train(lm, cds_job(lm, corpus, swap_rate, config, seed, swapper), config, seed, cache_dir, progress)


def train_er_adapter(lm: Any, corpus: DebiasCorpus, lam: float, config: CorpusTuningConfig, seed: int,
                     cache_dir: Path | str, progress: bool = True, swapper: GenderSwapper | None = None) -> Path:
    """Train (or reuse) an ER adapter with weight ``lam``; returns its cache folder."""
    return _train(lm, er_job(lm, corpus, lam, config, seed, swapper), config, seed, cache_dir, progress)


def fully_tuned(lm: Any, job: TrainingJob, config: CorpusTuningConfig, seed: int,
                progress: bool = True) -> tuple[Any, dict[str, Any]]:
    """(a handle on a copy of ``lm``'s model with every weight fine-tuned, what was done): the
    paper's schedule. The copy trains in float32 and is cast back to each tensor's dtype, so it
    is audited at the session's precision; ``lm`` is untouched. The handle's fingerprint is the
    base's plus the training key's hash, so its result-cache entries never mix with another's."""
    if not config.full_finetune:
        raise AuditUsageError(f"{job.method}: fully_tuned() needs a full fine-tuning configuration "
                              "(CorpusTuningConfig.paper(column)).")
    tr = lm.training()
    key = job.key(tr, config, seed)
    model = copy.deepcopy(tr.model)
    dtypes = {name: t.dtype for name, t in itertools.chain(model.named_parameters(), model.named_buffers())}
    model.float()
    model.requires_grad_(True)
    model.train()
    schedule = batch_schedule(job.n_examples, config.batch_size, config.total_steps(job.n_examples), seed)
    with seeded(seed):
        gen = torch.Generator().manual_seed(seed)
        history = optimise(model, config, schedule, job.make_step(model, gen), f"{job.method} {tr.name} (full)", progress)
    model.requires_grad_(False)
    model.eval()
    for name, t in itertools.chain(model.named_parameters(), model.named_buffers()):
        if t.dtype != dtypes[name]:
            t.data = t.data.to(dtypes[name])
    digest = key_hash(key)
    info = {"training": "full fine-tuning (every weight)", "steps": len(schedule),
            "parameters": sum(p.numel() for p in model.parameters()), "final_loss": history[-1]["loss"] if history else None,
            "key": digest}
    return tr.with_model(model, f"{tr.fingerprint}:full:{digest}"), info
