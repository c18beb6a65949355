"""The value object every metric returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MetricResult:
    """A metric value with its uncertainty and the per-item evidence behind it.

    ``details`` holds one dict per item, at least ``{"id", "prompt", "score"}``; metrics may add
    fields (for example ``continuation``), and ``rank``: the item's bias in the direction its gate
    penalises, when the score alone does not order items by it (CrowS-Pairs' score is 0 or 1;
    its log-likelihood margin ranks the pairs). ``scale`` says how ``value`` should be read in reports
    (for example ADD is reported on its own scale, not the log scale of the paper's tables).
    ``p_value`` is set where the method's paper tests significance (permutation tests);
    ``breakdown`` holds named sub-results a report shows beside the value (per template, per
    sentiment, per group), as plain JSON-able values.
    """

    metric: str
    value: float
    ci_low: float
    ci_high: float
    n: int
    details: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    scale: str = ""
    p_value: float | None = None
    breakdown: dict[str, Any] = field(default_factory=dict, compare=False)

    def most_biased(self, k: int = 10) -> list[dict[str, Any]]:
        """The k items with the highest ``rank`` (else score); ties broken by id for determinism."""
        return sorted(self.details, key=lambda d: (-float(d.get("rank", d["score"])), str(d["id"])))[:k]

    def to_dict(self, examples: int = 10) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "scale": self.scale,
            "p_value": self.p_value,
            "breakdown": self.breakdown,
            "examples": self.most_biased(examples),
        }


def item_labels(n: int, ids: Sequence[Any] | None, prompts: Sequence[str] | None, metric: str):
    """Item ids (default 0..n-1) and prompts (default empty) checked against n items."""
    if n == 0:
        raise ValueError(f"{metric}: no items (n == 0); nothing to measure")
    ids = list(range(n)) if ids is None else list(ids)
    prompts = [""] * n if prompts is None else list(prompts)
    for name, seq in (("ids", ids), ("prompts", prompts)):
        if len(seq) != n:
            raise ValueError(f"{metric}: {name} has {len(seq)} entries but there are {n} items")
    return ids, prompts
