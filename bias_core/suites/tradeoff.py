"""The trade-off sweep in the audit run (``--mitigation-sweep``, DA-Gender's Figure 2).

The whole sweep runs once, on the first test that needs it (``sweep.run_sweep``: the base model,
then every method at every strength of the grid, one debiased model held at a time). Each
point is measured on the association probes: SEAT-v1, SEAT-v2, logprob_effect and stereo_score
(the bias axes; a probe whose data is missing is left out and named in the report) and DA_score
(the knowledge axis), plus the over-debiasing guards DA_score_drop, perplexity_rise and
lm_score_drop against the base model. The audit gates every point's guards like any
mitigation's (``audits/test_tradeoff.py``); "within the guards" for the point to take means
every measured guard's value at most its thresholds.toml limit.

Schedules: ``quick`` (and a plain ``METHOD=...`` grid) train CDS and ER as LoRA adapters on the
project's configuration, one seed (the CPU quick sweep); ``paper`` (and ``paper:METHOD=...``)
runs the paper's schedule: every weight fine-tuned with Table 12's settings for the model's
column, five training seeds averaged per point with their spread (CUDA only,
``strength_sweep.check_paper_schedule``).

Outputs, in the run folder: ``tradeoff.csv``, ``tradeoff_<metric>.svg`` per bias metric and
``tradeoff_info.json`` (the corpus, and per point how it was made and how long it took), which
the HTML report embeds (``reports.render.tradeoff_sections``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from bias_core import catalogue
from bias_core.errors import AuditUsageError, DataSourceMissing, ProbeNotApplicable
from bias_core.metrics import MetricResult
from bias_core.suites import MITIGATION_GUARDS

# A bias axis or the LM-score guard that cannot be measured (data missing, a prompt longer than
# the model's context) is left out and named, rather than ending the whole sweep.
OPTIONAL_FAILURES = (DataSourceMissing, ProbeNotApplicable, AuditUsageError)
INFO_FILE = "tradeoff_info.json"


@dataclass
class TradeoffSweep:
    lm: Any
    grid: Mapping[str, tuple[float, ...]]
    data_dir: Path | None = None
    seed: int = 0
    cache_dir: Path = Path(".")
    steps: int | None = None  # --mitigation-steps: CDS / ER training steps
    schedule: str = "quick"  # "quick" (LoRA, one seed) or "paper" (tradeoff_curves.SCHEDULES)
    progress: bool = True
    causal_likelihood: str | None = None
    articles: str | None = None
    limit: Callable[[str, str], float] | None = None  # (guard metric, its probe) -> thresholds.toml limit
    out_dir: Path | None = None  # the run folder; None with --no-report
    _outcome: Any = field(default=None, repr=False)
    _guards: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _base: dict[str, Any] = field(default_factory=dict, repr=False)
    missing: dict[str, str] = field(default_factory=dict)

    # ----- what the audit asks -----------------------------------------------------------------
    def guard(self, variant: str, metric: str) -> MetricResult:
        """The guard ``metric`` of the sweep point ``variant`` (``cds@0.6``); runs the sweep once."""
        self.points()
        found = self._guards.get((variant, metric))
        if found is None:
            raise KeyError(f"trade-off sweep: no point {variant} in the grid")
        if isinstance(found, Exception):
            raise found
        return found

    def points(self) -> list[Any]:
        if self._outcome is None:
            try:
                self._outcome = self._run()
            except Exception as exc:  # remembered: every other test of the sweep reports the same cause
                self._outcome = exc
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def limits(self) -> dict[str, float]:
        if self.limit is None:
            return {}
        return {metric: float(self.limit(metric, probe)) for metric, probe in MITIGATION_GUARDS.items()}

    # ----- the sweep ---------------------------------------------------------------------------
    def _run(self) -> list[Any]:
        import dataclasses

        from bias_core.mitigation.evaluation.strength_sweep import check_paper_schedule, default_config, paper_config, run_sweep
        from bias_core.mitigation.evaluation.tradeoff_curves import BASE, write_outputs
        from bias_core.mitigation.methods.paper_settings import model_column, paper_seeds
        from bias_core.mitigation.methods.variants import corpus_label
        from bias_core.mitigation.training.corpus import load_debias_corpus

        started = time.perf_counter()
        if self.schedule == "paper":
            check_paper_schedule(self.lm)
        corpus = load_debias_corpus(self.data_dir)
        paper = self.schedule == "paper"
        config = paper_config(self.lm) if paper else default_config(self.lm)
        seeds = paper_seeds(self.seed) if paper else (self.seed,)
        if self.steps is not None:
            config = dataclasses.replace(config, steps=self.steps, epochs=0)

        def record(name: str, results: Mapping[str, Any], guards: Mapping[str, Any]) -> None:
            if name != BASE:
                for metric in MITIGATION_GUARDS:
                    self._guards[(name, metric)] = guards.get(metric, ProbeNotApplicable(f"{metric}: not measured"))

        points = run_sweep(self.lm, dict(self.grid), self._measure, corpus=corpus, cache_dir=self.cache_dir,
                           seed=self.seed, config=config, progress=self.progress, seeds=seeds, on_point=record)
        # A guard no point could measure (StereoSet missing) is left out of "within the guards",
        # or no point would ever qualify; the report names it.
        measured_guards = {name for p in points for name in p.guards}
        limits = {k: v for k, v in self.limits().items() if k in measured_guards}
        for guard in _compared_guards():  # a guard whose metric the base model could not measure
            if isinstance(self._base.get("results", {}).get(guard.of), Exception):
                self.missing[guard.name] = str(self._base["results"][guard.of])
        if self.out_dir is not None:
            label = corpus_label(corpus)
            write_outputs(points, self.out_dir, limits, note=f"corpus: {label}")
            schedule = (f"the paper's (Table 12, column {model_column(self.lm)}: full fine-tuning, {len(seeds)} seeds "
                        "averaged)" if paper else "quick (LoRA, one seed; not the paper's schedule)")
            info = {"corpus": {**corpus.provenance(), "label": label}, "grid": {k: list(v) for k, v in self.grid.items()},
                    "schedule": schedule, "seeds": list(seeds),
                    "limits": limits, "config": config.hyperparameters(), "missing": self.missing,
                    "seconds": round(time.perf_counter() - started, 1),
                    "points": [{"variant": p.variant, **p.info} for p in points]}
            (Path(self.out_dir) / INFO_FILE).write_text(json.dumps(info, indent=1, default=str), encoding="utf-8")
        return points

    def _measure(self, handle: Any, base: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """One point: the knowledge axis's metric and every bias axis (catalogue.tradeoff_axes) by the
        association audit, and every guard against the base model (the base: its results only)."""
        from bias_core.mitigation.evaluation import guards as g
        from bias_core.suites.association import AssociationAudit

        options = {k: v for k, v in (("causal_likelihood", self.causal_likelihood), ("articles", self.articles)) if v}
        suite = AssociationAudit(handle, data_dir=self.data_dir, seed=self.seed, **options)
        knowledge = catalogue.tradeoff_knowledge()
        results: dict[str, Any] = {knowledge.name: suite.result(knowledge.probes[0], knowledge.name)}
        for axis in catalogue.tradeoff_axes():
            try:
                results[axis.name] = suite.result(axis.probe, axis.metric)
            except OPTIONAL_FAILURES as exc:
                self.missing[axis.name] = str(exc)
        for guard in _compared_guards():  # the metrics the guards compare (lm_score), where measurable
            if guard.of not in results:
                try:
                    results[guard.of] = suite.result(guard.probes[0], guard.of)
                except OPTIONAL_FAILURES as exc:
                    results[guard.of] = exc
        # the damage guard (no metric of its own to compare): its probe's texts scored by both models
        damage = _damage_guard()
        texts = suite.probe(damage.probes[0]).prompts
        nll = g.perplexity(handle, texts)
        if base is None:  # the base model: what every point's guards compare against
            self._base = {"nll": nll, "results": results}
            return results, {}
        before = self._base["results"]
        guards: dict[str, Any] = {}
        for guard in map(catalogue.spec, MITIGATION_GUARDS):
            if guard is damage:
                guards[guard.name] = guard.compute_function()(texts, self._base["nll"], nll,
                                                              pseudo=handle.kind != "causal", seed=self.seed)
            elif isinstance(results[guard.of], Exception):
                guards[guard.name] = results[guard.of]
            else:
                guards[guard.name] = guard.compute_function()(before[guard.of], results[guard.of], seed=self.seed)
        return results, guards


def _compared_guards() -> list[Any]:
    """The guards that compare a metric of the association audit between two models (DA_score_drop, lm_score_drop)."""
    return [catalogue.spec(name) for name in MITIGATION_GUARDS if catalogue.spec(name).of is not None]


def _damage_guard() -> Any:
    """The guard with no metric of its own to compare, which scores its probe with both models (perplexity_rise)."""
    [found] = [catalogue.spec(name) for name in MITIGATION_GUARDS if catalogue.spec(name).of is None]
    return found
