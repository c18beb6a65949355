"""The half-precision copy of a causal LM that ``--precision half`` and ``exact`` compute with.

What runs in half precision: the matrix products of every linear layer (weights and inputs in
bf16/fp16, accumulated in fp32 by the kernels), which are nearly all of the arithmetic. What
stays fp32: embeddings, norms, attention softmax, the residual stream and the KV cache, so the
half-precision error does not compound along the residual stream.

And the first columns of every padded batch run on the fp32 model. Measured on SmolLM2-135M
(CrowS-Pairs sentences, fp32 vs bf16): the first tokens of a text are attention sinks whose
hidden states reach norms of ~25,000, and bf16's 8-bit mantissa moves the log-probability read
there by up to 7 nats, against ~0.2 at later tokens. With the first FP32_POSITIONS positions in
fp32 the largest sentence error fell from 4.1 to 0.27 nats (linear layers in bf16: 4.1 to
0.26 from 2 to 3 positions). The boundary is a column of the padded layout (pad multiple - 1 +
FP32_POSITIONS), not a position: a row's left padding is fixed by its own length, so every row
gets the same precision at each position whatever it is batched with (results stay batch-size
invariant), and each row has at least FP32_POSITIONS positions in fp32.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from bias_core.models.engines.hf.causal import PAD_MULTIPLE, CausalLM, _new_cache
from bias_core.models.protocol import EngineInfo

# Positions computed in fp32 at the start of every text (the attention sinks, see above).
FP32_POSITIONS = 3
# Whether the output projection computes in half precision too (see the module doc).
HALF_HEAD = False


class HalfLinear(torch.nn.Module):
    """A linear layer whose product runs in ``dtype``; input and output stay fp32."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(weight.detach().to(dtype), requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().to(dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x.to(self.weight.dtype), self.weight, self.bias).float()


def half_copy(model: Any, dtype: torch.dtype, head: bool = HALF_HEAD) -> Any:
    """A copy of ``model`` whose linear layers (and GPT-2's Conv1D) compute in ``dtype``; the
    output projection too when ``head``."""
    from transformers.pytorch_utils import Conv1D

    # Tensors are shared with ``model``, not copied: only the half-precision linear weights are
    # new memory (SmolLM2-135M: 212 MB beside the 540 MB fp32 model).
    shared = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    half = copy.deepcopy(model, memo=shared)
    out = half.get_output_embeddings()
    for module in list(half.modules()):
        for name, child in list(module.named_children()):
            if child is out and not head:
                continue
            if isinstance(child, torch.nn.Linear):
                setattr(module, name, HalfLinear(child.weight, child.bias, dtype))
            elif isinstance(child, Conv1D):  # y = x W + b, W stored (in, out)
                setattr(module, name, HalfLinear(child.weight.t(), child.bias, dtype))
    half.eval()
    return half


def half_dtype(device: str) -> tuple[torch.dtype | None, str]:
    """(the half dtype this device computes fast, why), or (None, why not)."""
    if str(device).startswith("cuda"):
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "CUDA with bf16 support"
        return torch.float16, "CUDA without bf16 support: fp16"
    if _cpu_has_bf16():
        return torch.bfloat16, "CPU with AVX512-BF16 or AMX-BF16"
    return None, ("this CPU has neither AVX512-BF16 nor AMX-BF16, so bf16 is slower than fp32 here; "
                  "everything runs in fp32")


def _cpu_has_bf16() -> bool:
    probes = [getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None)]
    if any(p is not None for p in probes):
        return any(bool(p()) for p in probes if p is not None)
    try:
        flags = open("/proc/cpuinfo", encoding="ascii", errors="ignore").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


@dataclass
class HalfCausalLM(CausalLM):
    """A CausalLM on a ``half_copy`` model, with the first columns of each batch on ``reference``.

    Cache keys carry the half dtype and the fp32 boundary, so half values never mix with fp32
    ones (the copy's ``model.dtype`` still reads float32: its embeddings are fp32).
    """

    reference: Any = None  # the fp32 model the first columns run on
    half: str = "bfloat16"
    fp32_positions: int = FP32_POSITIONS

    @property
    def fp32_columns(self) -> int:
        """fp32 columns of a scoring batch (generation batches, padded coarser, have more)."""
        return PAD_MULTIPLE - 1 + self.fp32_positions

    def _left_pad(self, seqs, multiple: int = PAD_MULTIPLE):
        self._multiple = multiple  # the next first pass sets its fp32 boundary from it
        return super()._left_pad(seqs, multiple)

    def cache_identity(self) -> dict[str, str]:
        return {**super().cache_identity(),
                "dtype": f"{self.half} linear layers, fp32 first {self.fp32_positions} positions"}

    def info(self) -> EngineInfo:
        return self.hf_info(self.half)

    def _run(self, model, ids, mask, positions, keep, past):
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": past is not None}
        if self._takes_position_ids:
            kwargs["position_ids"] = positions
        if self._takes_logits_to_keep:
            kwargs["logits_to_keep"] = keep
        if past is not None:
            kwargs["past_key_values"] = past
        return model(**kwargs)

    def _forward(self, ids, mask, positions, keep: int = 0, past=None):
        """CausalLM._forward, with the columns before ``fp32_columns`` run on the fp32 model."""
        done = past.get_seq_length() if past is not None else 0
        if done == 0:
            boundary = getattr(self, "_multiple", PAD_MULTIPLE) - 1 + self.fp32_positions
            if past is not None:
                past.fp32_boundary = boundary  # later passes on this cache continue its layout
        else:
            boundary = getattr(past, "fp32_boundary", self.fp32_columns)
        width = ids.shape[1]
        split = min(max(boundary - done, 0), width)
        if split == 0:
            return super()._forward(ids, mask, positions, keep, past)
        wanted = width if not keep else min(keep, width)  # logits of the last `wanted` columns
        from_half = min(wanted, width - split)
        from_full = wanted - from_half
        cache = past if past is not None else (_new_cache() if split < width else None)
        if cache is not None and past is None:
            cache.fp32_boundary = boundary
        # logits_to_keep=0 means all: a part none of whose logits are wanted still computes one.
        head = self._run(self.reference, ids[:, :split], mask[:, : done + split], positions[:, :split],
                         max(from_full, 1), cache)
        logits = [head.logits[:, -from_full:, :].float()] if from_full else []
        if split < width:
            tail = self._run(self.model, ids[:, split:], mask, positions[:, split:], max(from_half, 1), cache)
            if from_half:
                logits.append(tail.logits[:, -from_half:, :].float())
        return SimpleNamespace(logits=torch.cat(logits, dim=1), past_key_values=past)
