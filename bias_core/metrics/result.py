"""The value object every metric returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MetricResult:
    """A metric value with its uncertainty and the per-item evidence behind it.

    ``details`` holds one dict per item, at least ``{"id", "prompt", "score"}``; metrics may add
    fields (for example ``continuation``). ``scale`` says how ``value`` should be read in reports
    (for example ADD is reported on its own scale, not the log scale of the paper's tables).
    """

    metric: str
    value: float
    ci_low: float
    ci_high: float
    n: int
    details: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    scale: str = ""

    def most_biased(self, k: int = 10) -> list[dict[str, Any]]:
        """The k items with the highest per-item score (ties broken by id for determinism)."""
        return sorted(self.details, key=lambda d: (-float(d["score"]), str(d["id"])))[:k]

    def to_dict(self, examples: int = 10) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "scale": self.scale,
            "examples": self.most_biased(examples),
        }
