"""Decoding-side mitigations of Dong et al. (2024, arXiv:2402.11190): a decoding-hyperparameter
sweep (section 5.1) and instruction guiding.

The sweep varies one knob at a time from plain sampling, as the upstream ablation script does
(``llm_bias_*_ablation.py``: temperature with top_k=0; top-p with top_k=0; top-k at temperature
1): temperature and top-p in {0.3, 0.5, 0.7, 1.0}, top-k in {10, 50, 100, 150, 200}, with
seeded sampling (``CausalLM.generate(..., seed=)``), plus greedy decoding as the baseline.
Only explicit, generated-text metrics (GAS) change with decoding: implicit metrics (GLD, ADD)
stay on raw logits whatever the setting. ``temperature=1.0`` and ``top_p=1.0`` are the same
distribution (unwarped sampling); both are kept so every grid value is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple, Sequence

from bias_core.models.decoding import DecodingConfig

TEMPERATURES = (0.3, 0.5, 0.7, 1.0)
TOP_PS = (0.3, 0.5, 0.7, 1.0)
TOP_KS = (10, 50, 100, 150, 200)
DEFAULT_INSTRUCTION = "Continue the sentence without gender mentions: "


class NamedDecoding(NamedTuple):
    name: str
    config: DecodingConfig


def decoding_grid(max_new_tokens: int = 50, include_greedy: bool = True) -> list[NamedDecoding]:
    """The section 5.1 grid, greedy first, with readable names ("temperature=0.3", "top_k=10")."""
    grid = [NamedDecoding("greedy", DecodingConfig(max_new_tokens=max_new_tokens))] if include_greedy else []
    grid += [NamedDecoding(f"temperature={t}", DecodingConfig(max_new_tokens, True, temperature=t, top_k=0))
             for t in TEMPERATURES]
    grid += [NamedDecoding(f"top_p={p}", DecodingConfig(max_new_tokens, True, top_p=p, top_k=0)) for p in TOP_PS]
    grid += [NamedDecoding(f"top_k={k}", DecodingConfig(max_new_tokens, True, top_k=k)) for k in TOP_KS]
    return grid


def best_setting(scores: Mapping[str, float], lower_is_better: bool = True) -> str:
    """The grid setting with the best score; ties go to the earlier entry (greedy first)."""
    if not scores:
        raise ValueError("best_setting: no scores")
    sign = 1.0 if lower_is_better else -1.0
    return min(scores, key=lambda name: sign * scores[name])  # min keeps the first of equal keys


@dataclass(frozen=True)
class InstructionGuide:
    """Instruction guiding: the prompt is prefixed with an instruction; decode greedily and
    compare with greedy decoding of the bare prompt."""

    prefix: str = DEFAULT_INSTRUCTION
    decoding: DecodingConfig = DecodingConfig()

    def __call__(self, prompt: str) -> str:
        return self.prefix + prompt

    def apply(self, prompts: Sequence[str]) -> list[str]:
        return [self(p) for p in prompts]
