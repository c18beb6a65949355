"""GBM on a loaded model: its top-k fills of each sentiment template, through ``lm.topk_fills``."""

from __future__ import annotations

from typing import Any

from bias_core.metrics.gbm import causal_text, gbm
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.probes.placeholders import MASK


def run_gbm(lm: ScoringModel, probe: Any, k: int = 5, seed: int = 0) -> MetricResult:
    """GBM of a loaded model on the ``sentiment-templates`` probe, through ``lm.topk_fills`` only."""
    if k < 1:
        raise ValueError(f"run_gbm: k must be >= 1, got {k}")
    items = list(probe.items)
    texts = [causal_text(it.prompt, MASK) if lm.kind == "causal" else it.prompt for it in items]
    fills = lm.topk_fills(texts, k, desc=f"GBM top-{k} fills")
    if len(fills) != len(items):
        raise ValueError(f"run_gbm: the model returned {len(fills)} fill lists for {len(items)} prompts")
    return gbm(
        fills,
        [it.meta["sentiment"] for it in items],
        ids=[it.id for it in items],
        prompts=texts,
        templates=[it.meta.get("template", "") for it in items],
        seed=seed,
    )
