"""LoRA plumbing shared by Debias Tuning and CDA fine-tuning: configuration, attaching and
detaching adapters, seeding, batch schedules, the optimiser loop and saving."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError
from bias_core.models.progress import progress_bar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoraTrainConfig:
    r: int = 64
    alpha: int = 16
    dropout: float = 0.1
    lr: float = 2e-4
    batch_size: int = 16
    steps: int = 500
    epochs: int = 0  # > 0: train this many passes over the data instead of ``steps``
    max_length: int = 512
    load_in_4bit: bool = False  # QLoRA: the base model must be loaded in 4-bit (CUDA only)
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    lr_scheduler: str = "constant"
    warmup_steps: int = 0
    # All linear layers of the blocks, as QLoRA does (peft's "all-linear" skips the output head).
    target_modules: str = "all-linear"

    def __post_init__(self) -> None:
        for name in ("r", "batch_size", "max_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{type(self).__name__}: {name} must be >= 1, got {getattr(self, name)}")
        if self.steps < 1 and self.epochs < 1:
            raise ValueError(f"{type(self).__name__}: set steps >= 1 or epochs >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1), got {self.dropout}")

    def hyperparameters(self) -> dict[str, Any]:
        """Everything that changes the trained weights, for the adapter cache key."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}

    def total_steps(self, n_examples: int) -> int:
        if self.epochs > 0:
            return self.epochs * math.ceil(n_examples / min(self.batch_size, n_examples))
        return self.steps


def check_quantization(config: LoraTrainConfig, model: Any | None = None) -> None:
    """QLoRA needs CUDA and a base model loaded in 4-bit: say so before anything trains."""
    if not config.load_in_4bit:
        return
    if not torch.cuda.is_available():
        raise AuditUsageError(
            "QLoRA (load_in_4bit=True) needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on this "
            "CPU-only machine. Fix: use the CPU quick configuration (plain LoRA, e.g. "
            "DebiasTuningConfig.cpu_quick()), or run on a CUDA machine."
        )
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        raise AuditUsageError("QLoRA (load_in_4bit=True) needs bitsandbytes. Fix: pip install bitsandbytes.") from exc
    if model is not None and not getattr(model, "is_loaded_in_4bit", False):
        raise AuditUsageError(
            "QLoRA (load_in_4bit=True) trains on a 4-bit base model, but this model is loaded in full "
            "precision. Fix: load it with --load-in-4bit, or train with load_in_4bit=False (plain LoRA)."
        )


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """A private torch RNG state seeded with ``seed`` (LoRA init, dropout); the caller's is restored."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def batch_schedule(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Indices of each step's batch: seeded shuffled passes over the data, no example repeated
    within a pass; a pass's short tail is dropped so every step sees ``batch_size`` examples."""
    if n < 1:
        raise ValueError("no training examples")
    size = min(batch_size, n)
    rng = np.random.default_rng(seed)
    out: list[list[int]] = []
    while len(out) < steps:
        order = rng.permutation(n).tolist()
        for start in range(0, n - size + 1, size):
            out.append(order[start : start + size])
            if len(out) == steps:
                break
    return out


class ParameterState:
    """The dtype and requires_grad flag of every parameter of a model, to put back later.

    Training must leave the session's model as it was audited: QLoRA's preparation casts the
    non-quantized weights (embeddings, norms, head) to float32 in place and freezes everything,
    and removing the LoRA layers undoes neither. A changed dtype also changes the base
    fingerprint, and the adapter would then be refused as "trained on another base model".
    Casting back is exact: the float32 copies were widened from these very values and are
    frozen while training.
    """

    def __init__(self, model: Any):
        self.flags = {name: (p.dtype, p.requires_grad) for name, p in model.named_parameters()}

    def restore(self, model: Any) -> None:
        for name, p in model.named_parameters():
            dtype, requires_grad = self.flags.get(name, (p.dtype, p.requires_grad))
            if p.dtype != dtype:
                p.data = p.data.to(dtype)
            p.requires_grad_(requires_grad)


@contextlib.contextmanager
def attached_lora(model: Any, config: LoraTrainConfig, task_type: str | None = "CAUSAL_LM") -> Iterator[Any]:
    """``model`` wrapped in fresh LoRA layers for training; on exit (also on Ctrl-C) the layers
    are removed again and every parameter's dtype and requires_grad flag put back, so the
    caller's model is left as it was (same modules, same weights, same dtypes).
    ``task_type=None`` for masked LMs and BART (a plain PeftModel that passes inputs through)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    was_training = model.training
    state = ParameterState(model)
    lora = LoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=config.target_modules,
        bias="none",
        task_type=task_type,
    )
    try:
        if config.load_in_4bit:
            # QLoRA's own preparation (float32 norms and embeddings while training); undone below.
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        peft_model = get_peft_model(model, lora)
    except BaseException:
        state.restore(model)
        raise
    try:
        peft_model.train()
        yield peft_model
    finally:
        base = peft_model.unload()
        state.restore(base)
        base.train(was_training)


def save_adapter(peft_model: Any, folder: Path) -> None:
    peft_model.save_pretrained(folder, safe_serialization=True)


def optimise(
    peft_model: Any,
    config: LoraTrainConfig,
    schedule: Sequence[Sequence[int]],
    step_loss: Callable[[Sequence[int]], tuple[torch.Tensor, dict[str, float]]],
    desc: str,
    progress: bool,
) -> list[dict[str, float]]:
    """Run the optimiser over ``schedule`` on the parameters that require gradients (a LoRA
    adapter's, or every weight of a model being fully fine-tuned); ``step_loss(batch_indices)``
    gives (loss, parts). Returns one record of logged values per step."""
    from transformers import get_scheduler

    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    scheduler = get_scheduler(
        config.lr_scheduler, optimiser, num_warmup_steps=config.warmup_steps, num_training_steps=len(schedule)
    )
    history = []
    bar = progress_bar(total=len(schedule), desc=desc, enabled=progress)
    every = max(1, len(schedule) // 10)
    try:
        for step, batch in enumerate(schedule):
            loss, parts = step_loss(batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc}: loss became {float(loss)} at step {step}; lower the learning rate")
            loss.backward()
            if getattr(config, "max_grad_norm", None):  # the DA-Gender paper's schedule clips at norm 1.0
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimiser.step()
            scheduler.step()
            optimiser.zero_grad(set_to_none=True)
            record = {"step": step, "loss": float(loss.detach()), **parts}
            history.append(record)
            bar.set_postfix(loss=f"{record['loss']:.4g}")
            bar.update(1)
            if progress and (step % every == 0 or step == len(schedule) - 1):
                log.info("%s: step %d/%d loss %.5g", desc, step + 1, len(schedule), record["loss"])
    finally:
        bar.close()
    return history
