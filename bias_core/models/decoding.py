"""How continuations are decoded: one ``DecodingConfig`` for every engine (no torch needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
