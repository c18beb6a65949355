"""What every audit suite shares: probes and results computed once per session, failures remembered."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

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
    # --sample auto (bias_core/adaptive.py): the plan, and gate_for(metric, probe) for its looks.
    sampling: Any = None
    gate_for: Callable[[str, str], Any] | None = None
    # A look's copy of the suite: its sampled probes are the first _size units of _pool's probes.
    _pool: Any = field(default=None, repr=False)
    _size: int | None = field(default=None, repr=False)
    _sizes: dict[int, Any] = field(default_factory=dict, repr=False)
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

    # Memos a look's copy shares with its suite (loaded classifiers), not recomputed per look.
    SHARED_MEMOS: ClassVar[tuple[str, ...]] = ()

    def probe(self, name: str) -> Any:
        if self._size is not None and self.sampling.samples(name):
            from bias_core.adaptive import prefix_probe

            return self._remembered(self._probes, name, lambda: prefix_probe(self._pool.probe(name), self._size, self.seed))
        return self._remembered(self._probes, name, lambda: self.load_probe(name))

    def at_size(self, n: int) -> "Suite":
        """This suite with every sampled probe cut to the first n units of its seeded order."""
        if n not in self._sizes:
            fresh = {f.name: f.default_factory() for f in dataclasses.fields(self)
                     if f.name.startswith("_") and f.default_factory is not dataclasses.MISSING}
            fresh.update({name: getattr(self, name) for name in self.SHARED_MEMOS})
            self._sizes[n] = dataclasses.replace(self, _pool=self, _size=n, **fresh)
        return self._sizes[n]

    def checked(self, probe_name: str, metric: str) -> MetricResult:
        """compute(), through the precision check when there is one."""
        check = self.precision_check
        return self.compute(probe_name, metric) if check is None else check(self, probe_name, metric)

    def sampled_parts(self, probe_name: str) -> tuple[str, ...]:
        """The sampled probes a probe's metrics are computed from (itself, or e.g. GenderPair's groups)."""
        return (probe_name,)

    def result(self, probe_name: str, metric: str) -> MetricResult:
        key = (probe_name, metric)
        if key not in self._results:
            plan = self.sampling
            parts = self.sampled_parts(probe_name)
            if plan is not None and self._size is None and all(plan.samples(p) for p in parts):
                from bias_core.adaptive import adapt

                result = adapt(self, probe_name, metric, parts)
            else:
                result = self.checked(probe_name, metric)
                if plan is not None and self._size is None:
                    from bias_core.adaptive import fixed_sampling

                    fixed_sampling(result, plan.mode if not plan.adaptive else "fixed (not a sampled probe)")
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
