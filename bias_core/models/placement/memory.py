"""How many rows one forward pass may hold on a GPU: from free memory and what a token costs.

A decoding step of a 7B model reads all its weights once (13.5 GB of bf16 at ~3 TB/s: ~4.5 ms)
whatever the number of rows, so rows are nearly free until memory runs out; and what fills
memory in a decoding batch is the KV cache, not the weights. The batch is therefore sized from
the free memory left after loading and the bytes each token of a row holds (KV cache, the
transient activations of a forward pass, the last position's logits), per padded width: short
prompts get more rows than long ones. Parameter counts say nothing about that (the old rule,
``free // (8 * n_params)``, gave a 7B model 8 rows on an 80 GB GPU).

The plan depends on free memory at load time: two runs on GPUs with different free memory may
batch differently, which on a GPU can move the last bits (docs/gpu.md). ``--batch-size N``
fixes the rows for bitwise repeatable runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GiB = 2**30
# Share of the free memory a forward pass may fill; the rest is headroom for the allocator's
# fragmentation, kernels' workspaces and what this arithmetic leaves out.
USE_FRACTION = 0.5
MAX_ROWS = 1024
# Decoding drops finished rows once this share of the batch has finished: each drop copies the
# surviving KV cache, so on a GPU it pays to wait for several.
GPU_COMPACT_FRACTION = 0.25


@dataclass(frozen=True)
class TokenCosts:
    """Bytes per token of a forward pass, and per row for the last position's logits."""

    kv: int  # keys and values of every layer
    activation: int  # transient: hidden states, attention projections, MLP intermediates
    logits_row: int  # one position's logits in the model dtype, their float32 copy and log-softmax


def token_costs(config: Any, dtype_bytes: int) -> TokenCosts:
    """TokenCosts of a decoder from its Hugging Face config (Llama names, with GPT-2/OPT/Falcon
    fallbacks)."""
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _first(config, "num_attention_heads", "n_head")
    kv_heads = _first(config, "num_key_value_heads", "num_kv_heads", default=heads)
    if getattr(config, "multi_query", False):
        kv_heads = 1
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    intermediate = _first(config, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden) or 4 * hidden
    vocab = _first(config, "vocab_size")
    return TokenCosts(
        kv=2 * layers * kv_heads * head_dim * dtype_bytes,
        activation=dtype_bytes * (3 * intermediate + 2 * (heads + 2 * kv_heads) * head_dim + 4 * hidden),
        logits_row=vocab * (dtype_bytes + 4 + 4),
    )


def _first(config: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value:
            return int(value)
    if default is None:
        raise ValueError(f"model config has none of {', '.join(names)}")
    return default


@dataclass(frozen=True)
class BatchPlan:
    """Rows per forward pass for a given number of tokens per row, within a memory budget."""

    budget: int  # bytes one forward pass (with its KV cache) may fill
    costs: TokenCosts
    max_rows: int = MAX_ROWS

    def rows(self, tokens_per_row: int) -> int:
        """Rows of ``tokens_per_row`` padded tokens each (prompt width, plus new tokens when
        decoding) that fit: KV counted twice (dropping finished rows, or selecting the rows an
        extension pass scores, copies it), a multiple of 8 when more than 8 fit."""
        per_row = tokens_per_row * (2 * self.costs.kv + self.costs.activation) + self.costs.logits_row
        rows = min(self.max_rows, self.budget // max(1, per_row))
        return int(rows // 8 * 8 if rows >= 8 else max(1, rows))


def plan_for(free_bytes: int, costs: TokenCosts, fraction: float = USE_FRACTION, max_rows: int = MAX_ROWS) -> BatchPlan:
    """The plan for ``free_bytes`` of free memory. The budget is rounded down to whole GiB, so
    small differences in free memory between runs give the same batches."""
    budget = int(free_bytes * fraction) // GiB * GiB
    return BatchPlan(budget=max(budget, GiB // 4), costs=costs, max_rows=max_rows)


def gpu_plan(model: Any) -> BatchPlan:
    """The plan for a loaded model on its (first) GPU, from the memory free now."""
    import torch

    device = next(model.parameters()).device
    free, _ = torch.cuda.mem_get_info(device)
    dtype = getattr(model, "dtype", torch.float32)
    dtype_bytes = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else 2
    return plan_for(free, token_costs(model.config, dtype_bytes))
