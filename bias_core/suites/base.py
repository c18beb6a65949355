"""What every audit suite shares: probes and results computed once per session, failures remembered.

A suite loads a probe with the loader the catalogue names for it (``catalogue.PROBES``) and
computes a metric with the runner its catalogue entry names. Loaders and runners say what they
need by their parameters' names, as pytest fixtures do: a loader may name ``data_dir``, ``name``,
``seed`` and the family's ``probe_options()``; a runner ``lm``, ``probe``, ``seed``, ``metrics``
(name -> pure function of every metric naming that runner on the probe: a runner that computes
numbers several metrics share hands them to each) and the family's ``runner_inputs()``. A runner
returning several metrics may give one of them as an exception (BBQ on a sample without one of
its contexts): it is raised for that metric alone.
``call_with`` hands each exactly what it names.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from bias_core import catalogue
from bias_core.metrics import MetricResult


def call_with(function: Callable[..., Any], offered: Mapping[str, Callable[[], Any]], what: str) -> Any:
    """``function`` called with the ``offered`` inputs its parameters name, each made only then."""
    parameters = inspect.signature(function).parameters.values()
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in offered
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        raise TypeError(f"{what} {getattr(function, '__qualname__', function)} needs {', '.join(missing)}, which its "
                        f"suite does not offer (it offers {', '.join(sorted(offered))}). Fix: rename the parameter to "
                        "one offered, give it a default, or offer it in the suite (probe_options / runner_inputs)")
    return function(**{p.name: offered[p.name]() for p in parameters if p.name in offered})


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
    # that a half-precision result has fp32's verdict (bias_core/gating/precision_recheck.py).
    precision_check: Callable[[Any, str, str], MetricResult] | None = None
    # --sample auto (bias_core/gating/adaptive_sampling.py): the plan, and gate_for(metric, probe) for its looks.
    sampling: Any = None
    gate_for: Callable[[str, str], Any] | None = None
    # A look's copy of the suite: its sampled probes are the first _size units of _pool's probes.
    _pool: Any = field(default=None, repr=False)
    _size: int | None = field(default=None, repr=False)
    _sizes: dict[int, Any] = field(default_factory=dict, repr=False)
    _probes: dict[str, Any] = field(default_factory=dict, repr=False)
    _runs: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)  # (probe, runner) -> its output
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
            from bias_core.gating.adaptive_sampling import prefix_probe

            return self._remembered(self._probes, name, lambda: prefix_probe(self._pool.probe(name), self._size, self.seed))
        return self._remembered(self._probes, name, lambda: self._fixed_size(self.load_probe(name)))

    def _fixed_size(self, probe: Any) -> Any:
        """A probe too large to audit whole, cut to its fixed size when the plan does not sample it
        adaptively (its declaration's ``Sampled.fixed``); without a plan (outside pytest), whole."""
        size = self.sampling.fixed_size(probe.name) if self.sampling is not None else None
        if size is None:
            return probe
        from bias_core.gating.adaptive_sampling import pool_units, prefix_probe

        pool = pool_units(probe)
        if size >= pool:
            return probe
        cut = prefix_probe(probe, size, self.seed)
        note = (f"the first {size} of {pool} units in the seeded order (a fixed sample; --sample auto sizes it by its "
                f"gate, --sample N takes N)")
        return dataclasses.replace(cut, provenance={**cut.provenance, "fixed_sample": note})

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
        """The sampled probes a probe's metrics are computed from: itself, or the parts its
        declaration names (a probe with no items of its own, e.g. GenderPair's groups compared)."""
        declared = catalogue.PROBES.get(probe_name)
        return declared.parts if declared is not None and declared.parts else (probe_name,)

    def result(self, probe_name: str, metric: str) -> MetricResult:
        key = (probe_name, metric)
        if key not in self._results:
            plan = self.sampling
            parts = self.sampled_parts(probe_name)
            if plan is not None and self._size is None and all(plan.samples(p) for p in parts):
                from bias_core.gating.adaptive_sampling import adapt

                result = adapt(self, probe_name, metric, parts)
            else:
                result = self.checked(probe_name, metric)
                if plan is not None and self._size is None:
                    from bias_core.gating.adaptive_sampling import fixed_sampling

                    fixed_sampling(result, plan.mode if not plan.adaptive else "fixed (not a sampled probe)")
            # Where the items came from, so a report can flag a stand-in data set beside the verdict.
            provenance = getattr(self._probes.get(probe_name), "provenance", None)
            if isinstance(provenance, dict) and provenance:
                result.breakdown.setdefault("data", {str(k): str(v) for k, v in provenance.items()})
            self._results[key] = result
        return self._results[key]

    # ----- what a family offers its loaders and runners ----------------------------------------
    def probe_options(self) -> dict[str, Any]:
        """What this family's probe loaders may name besides data_dir, name and seed."""
        return {}

    def runner_inputs(self, probe_name: str) -> dict[str, Callable[[], Any]]:
        """What this family's runners may name besides lm, probe and seed (each made when named)."""
        return {}

    def load_probe(self, name: str) -> Any:
        offered = {"data_dir": self.data_dir, "name": name, "seed": self.seed, "select": self._select(name),
                   **self.probe_options()}
        return call_with(catalogue.probe_loader(name), {k: (lambda v=v: v) for k, v in offered.items()},
                         f"the loader of probe {name!r},")

    def _select(self, name: str) -> Any:
        """What a loader of a large pool may keep of it (``select``, probes/base.py ``pooled_probe``):
        under --sample auto, what the run's looks can reach (gating/adaptive_sampling.py ``pool_select``)."""
        if self.sampling is None or self._size is not None:
            return None
        from bias_core.gating.adaptive_sampling import pool_select

        # The mitigation family's comparisons (GenderCARE's *_reduction on GenderPair's groups) are
        # computed by the mitigation suite, which loads its probes whole: they never read this pool.
        on_pool = [m for m in catalogue.declared() if m.family != "mitigation"
                   and any(p == name or name in self.sampled_parts(p) for p in m.probes)]
        return pool_select(self.sampling, name, self.seed, on_pool)

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        """The metric from the runner its catalogue entry names; one run per probe and runner
        gives every metric it returns (StereoSet's stereo_score and lm_score, GLD and ADD)."""
        spec = catalogue.spec(metric)
        if probe_name not in spec.probes:
            raise KeyError(f"{metric} is not measured on {probe_name} (its probes: {', '.join(spec.probes)})")
        if spec.runner is None:
            raise NotImplementedError(f"{metric} names no runner in the catalogue; its {spec.family} suite computes it")
        offered = {"lm": lambda: self.lm, "probe": lambda: self.probe(probe_name), "seed": lambda: self.seed,
                   "metrics": lambda: catalogue.computed_by(spec.runner, probe_name),
                   **self.runner_inputs(probe_name)}
        out = self._remembered(self._runs, (probe_name, spec.runner),
                               lambda: call_with(spec.runner_function(), offered, f"{metric}'s runner"))
        if isinstance(out, Mapping):
            if metric not in out:
                raise KeyError(f"{spec.runner} on {probe_name} gives {', '.join(sorted(out))}, not {metric}")
            if isinstance(out[metric], Exception):  # the runner could not compute this one metric (a skip)
                raise out[metric]
            return out[metric]
        return out
