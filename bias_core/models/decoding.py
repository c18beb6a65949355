"""How continuations are decoded: one ``DecodingConfig`` for every engine (no torch needed)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: A generation's seed: one for every prompt, or one per prompt (a prompt's repetitions, each
#: under its own seed, decoded in one batch).
Seeds = int | Sequence[int]


def row_seeds(seed: Seeds, n: int) -> list[int]:
    """One seed per prompt of ``n``: ``seed`` repeated, or the sequence given (its length checked)."""
    if isinstance(seed, numbers.Integral):
        return [int(seed)] * n
    seeds = [int(s) for s in seed]
    if len(seeds) != n:
        raise ValueError(f"{len(seeds)} seeds for {n} prompts: give one seed, or one per prompt")
    return seeds


@dataclass(frozen=True)
class DecodingConfig:
    """How continuations are decoded. Greedy unless do_sample."""

    max_new_tokens: int = 50
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    def as_key(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("max_new_tokens", "do_sample", "temperature", "top_p", "top_k")}
