"""What every audit suite shares: probes and results computed once per session, failures remembered."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bias_core.metrics import MetricResult


@dataclass
class Suite:
    """Base of the per-family suites: ``result(probe, metric)`` memoized for the session.

    A probe that failed to load (data missing, not applicable to this model kind) is remembered,
    so its other metrics skip at once instead of retrying the load.
    """

    lm: Any
    data_dir: Path | None = None
    seed: int = 0
    # (suite, probe, metric) -> MetricResult in place of compute(): --precision exact's check
    # that a half-precision result has fp32's verdict (bias_core/precision_gate.py).
    precision_check: Callable[[Any, str, str], MetricResult] | None = None
    _probes: dict[str, Any] = field(default_factory=dict, repr=False)
    _results: dict[tuple[str, str], MetricResult] = field(default_factory=dict, repr=False)

    def _remembered(self, memo: dict, key: Any, make: Callable[[], Any]) -> Any:
        if key not in memo:
            try:
                memo[key] = make()
            except Exception as exc:
                memo[key] = exc
        found = memo[key]
        if isinstance(found, Exception):
            raise found
        return found

    def probe(self, name: str) -> Any:
        return self._remembered(self._probes, name, lambda: self.load_probe(name))

    def result(self, probe_name: str, metric: str) -> MetricResult:
        key = (probe_name, metric)
        if key not in self._results:
            check = self.precision_check
            result = self.compute(probe_name, metric) if check is None else check(self, probe_name, metric)
            # Where the items came from, so a report can flag a stand-in data set beside the verdict.
            provenance = getattr(self._probes.get(probe_name), "provenance", None)
            if isinstance(provenance, dict) and provenance:
                result.breakdown.setdefault("data", {str(k): str(v) for k, v in provenance.items()})
            self._results[key] = result
        return self._results[key]

    def load_probe(self, name: str) -> Any:
        raise NotImplementedError

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        raise NotImplementedError
