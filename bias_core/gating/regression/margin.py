"""A regression margin: the largest worsening a candidate may show against its baseline.

A leaf of its own (no import of the gate), so that the margins of other tools' metrics
(``gating/external_logs/thresholds``) are the same objects without importing the gate that reads
thresholds.toml's ``[regression]`` table and hands them its ``external`` part.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Margin:
    """The largest tolerated worsening: ``margin`` in the metric's units, or with ``relative`` a
    share of the baseline's level, ``margin`` then being its floor."""

    metric: str
    margin: float
    note: str = ""
    source: str = ""
    relative: float | None = None

    def for_baseline(self, level: float) -> float:
        """The margin against a baseline whose level (value, or distance from the ideal) is ``level``."""
        if self.relative is None:
            return self.margin
        return max(self.margin, self.relative * abs(float(level)))

    def rule(self) -> str:
        """How the margin is set, as a reader says it: "0.03" or "25% of the baseline, at least 0.002"."""
        if self.relative is None:
            return f"{self.margin:g}"
        floor = f", at least {self.margin:g}" if self.margin > 0 else ""
        return f"{100 * self.relative:g}% of the baseline{floor}"

    def describe(self) -> str:
        return f"worsening of {self.metric} <= {self.rule()} ({self.source})"
