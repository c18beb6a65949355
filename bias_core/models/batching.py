"""Batching, padding and result-cache helpers shared by every model kind (models/engines/hf/causal.py, models/engines/hf/masked.py).

Each sequence is padded to a width fixed by its own length alone (the next multiple of
PAD_MULTIPLE) and a batch only holds sequences of one width, so a row is computed the same way
whatever it is batched with; every cached model call goes through ``cached_map`` (or
``cache_lookup`` where a call must compute its misses together).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError, NonFiniteScores
from bias_core.probes.placeholders import MASK
from bias_core.storage.result_cache import ResultCache, canonical_key

PAD_MULTIPLE = 4
# Generation pads to a coarser grid: decoding dominates its cost and is cheapest in full
# batches, while a few more pad tokens in its one prefill pass cost little.
GEN_PAD_MULTIPLE = 16
# Most logits one extension pass may hold (fp32: 256 MB, twice that with the log-softmax).
LOGIT_BUDGET = 2**26


def padded_width(n: int, multiple: int = PAD_MULTIPLE) -> int:
    return -(-n // multiple) * multiple


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, device: Any, multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention mask, position ids) of seqs left padded to a common width, a multiple of ``multiple``."""
    width = max(padded_width(len(s), multiple) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)


def width_batches(lengths: Sequence[int], batch_size: int, multiple: int = PAD_MULTIPLE,
                  rows_for_width: Callable[[int], int] | None = None) -> list[list[int]]:
    """Indices grouped into batches of one padded width, longest first, at most batch_size each
    (and at most ``rows_for_width(width)``: on a GPU, what fits in memory at that width)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        width = padded_width(lengths[i], multiple)
        cap = batch_size if rows_for_width is None else min(batch_size, rows_for_width(width))
        same_width = batches and padded_width(lengths[batches[-1][0]], multiple) == width
        if same_width and len(batches[-1]) < cap:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def result_key(lm: Any, op: str, **parts: Any) -> dict[str, Any]:
    """Cache key parts: everything besides the inputs that fixes a model's output."""
    return {
        "op": op,
        "model": lm.fingerprint,
        # The weight files as verified at load: values computed from other bytes never match.
        "weights": getattr(lm, "weights_sha256", ""),
        "tokenizer": lm.tokenizer_fingerprint,
        "dtype": str(lm.model.dtype),
        **parts,
    }


def cache_lookup(cache: ResultCache, keys: Sequence[dict[str, Any]]) -> tuple[list[Any], list[int], str]:
    """(cached value or None per key, indices to compute, the call's id) for one batched call.

    fp32 results move in the last bits with a row's batch mates, so a call computes its misses
    together with any hits that the same call stored before (a run killed while it was storing
    them): the misses then get exactly the batch mates they had in an uninterrupted run, and
    the numbers come out bit for bit the same. Hits stored by other calls are used as they are.
    """
    call = hashlib.sha256("\n".join(canonical_key(k) for k in keys).encode()).hexdigest()
    out: list[Any] = []
    todo: list[int] = []
    same_call: list[int] = []
    for i, key in enumerate(keys):
        value, stored_by = cache.lookup(key)
        out.append(value)
        if value is None:
            todo.append(i)
        elif stored_by == call:
            same_call.append(i)
    return out, sorted(todo + same_call) if todo else [], call


def cached_map(
    cache: ResultCache, keys: Sequence[dict[str, Any]], compute: Callable[[list[int]], Sequence[Any]]
) -> list[Any]:
    """Each key's cached value, computing the rest in one call to ``compute(indices)``.

    Repeated keys are computed once. Values must be JSON (they come back from the cache as such).
    """
    out, todo_all, call = cache_lookup(cache, keys)
    first: dict[str, int] = {}
    for i in todo_all:
        first.setdefault(canonical_key(keys[i]), i)
    todo = sorted(first.values())
    if todo:
        values = dict(zip(todo, compute(todo)))
        for i in todo:
            cache.put(keys[i], values[i], call)
        for i in todo_all:
            out[i] = values[first[canonical_key(keys[i])]]
    return out


def cached_map_chunked(cache: ResultCache, keys: Sequence[dict[str, Any]],
                       compute: Callable[[list[int]], Sequence[Any]], chunk: int) -> list[Any]:
    """``cached_map`` for an engine whose items are computed independently of each other (one
    request each to a server): the misses are computed ``chunk`` at a time and each chunk is
    stored as soon as it is done, so an engine that fails mid-call loses at most one chunk.
    (Hits stored by the same call need no recomputing: no item has batch mates.)"""
    out: list[Any] = []
    first: dict[str, int] = {}
    todo: list[int] = []
    for i, key in enumerate(keys):
        value, _ = cache.lookup(key)
        out.append(value)
        if value is None and first.setdefault(canonical_key(key), i) == i:
            todo.append(i)
    for start in range(0, len(todo), max(1, chunk)):
        part = todo[start:start + max(1, chunk)]
        for i, value in zip(part, compute(part)):
            cache.put(keys[i], value)
            out[i] = value
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = out[first[canonical_key(key)]]
    return out


def slot_split(text: str) -> tuple[str, str]:
    """(text before, text after) the single MASK placeholder, or a usage error."""
    if text.count(MASK) != 1:
        raise AuditUsageError(
            f"text {text[:80]!r} has {text.count(MASK)} {MASK} slots; fill-in scoring needs exactly one. "
            f"Fix: write the probe's text with one {MASK} where the word goes."
        )
    before, _, after = text.partition(MASK)
    return before, after


def non_finite(lm: Any, op: str, item: str) -> NonFiniteScores:
    """The error for NaN or infinite model outputs: never cached, never scored as a result."""
    return NonFiniteScores(
        f"{lm.name}: {op} gave NaN or infinity for the item {item[:160]!r}: the model's outputs are not "
        "finite numbers, so no metric computed from them can be trusted. Fix: check the weights (a corrupted "
        "file, a diverged fine-tune) and the dtype (float16 can overflow: try --dtype float32).")


def finite_rows(values: torch.Tensor) -> torch.Tensor:
    """Per row (first dimension): are all its values finite?"""
    return torch.isfinite(values.reshape(values.shape[0], -1)).all(dim=-1)


def top_whole_words(
    logprobs: torch.Tensor, k: int, tokenizer: Any, accept: Callable[[int, str], bool]
) -> list[list[Any]]:
    """[[word, probability], ...] for the k most probable tokens that ``accept`` takes as whole words.

    ``logprobs`` is one position's log-softmax. Candidates go by probability, ties by token id;
    a token is offered as (id, its decoded text stripped) and skipped when it is special or
    decodes to nothing.
    """
    if k < 1:
        raise AuditUsageError(f"top-k fills need k >= 1, got {k}.")
    lp = logprobs.double().cpu().numpy()
    order = np.lexsort((np.arange(lp.size), -lp))
    special = set(tokenizer.all_special_ids)
    found: list[list[Any]] = []
    for t in order.tolist():
        if t in special or t >= len(tokenizer):  # the head may have rows past the vocabulary
            continue
        word = tokenizer.decode([t]).strip()
        if word and accept(t, word):
            found.append([word, float(np.exp(lp[t]))])
            if len(found) == k:
                break
    return found
