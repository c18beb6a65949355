"""The mitigation audit (issue 4): each ``--mitigation`` variant re-runs the disclosure audit on
the same items, is compared with the original by paired tests, and (when its weights changed)
is checked against over-debiasing and damage. ``gendercare-cda`` is also re-audited on the
benchmarks GenderCARE re-runs after its debiasing: GenderPair per group, StereoSet and BOLD
(``reaudit``; bias_core/mitigation/evaluation/gendercare_reaudit.py).

The original's results come from the session's own suites, so a run with both the plain audits
and ``--mitigation`` computes the original once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import MetricResult
from bias_core.probes import bold
from bias_core.probes.genderpair import DEFAULT_SAMPLE as GENDERPAIR_SAMPLE
from bias_core.suites import MITIGATION_GUARDS as GUARDS
from bias_core.suites import proxied, regard_prefix
from bias_core.suites.base import Suite, call_with


@dataclass
class MitigationAudit(Suite):
    original: Any = None              # the session's DisclosureAudit
    original_association: Any = None  # the session's AssociationAudit (guards)
    cache_dir: Path = Path(".")
    instruction: str | None = None
    steps: int | None = None
    progress: bool = True
    # GenderCARE's re-audit: GenderPair's prompts (as --genderpair-sample), its classifiers, BOLD's sample per group
    genderpair_sample: int | None = GENDERPAIR_SAMPLE
    toxicity: str = "auto"
    regard: str = "auto"
    bold_sample: int | None = bold.SAMPLE
    _variants: dict[str, Any] = field(default_factory=dict, repr=False)
    _suites: dict[str, Any] = field(default_factory=dict, repr=False)
    _grids: dict[str, Any] = field(default_factory=dict, repr=False)
    _associations: dict[str, Any] = field(default_factory=dict, repr=False)
    _genderpairs: dict[str | None, Any] = field(default_factory=dict, repr=False)
    _bold: dict[str | None, Any] = field(default_factory=dict, repr=False)
    _scorers: dict[str, Any] = field(default_factory=dict, repr=False)  # shared by every GenderPair suite made here

    def probe_options(self) -> dict[str, Any]:
        return {"sample": self.bold_sample}

    def variant(self, name: str) -> Any:
        from bias_core.mitigation.methods.variants import build_variant

        return self._remembered(self._variants, name, lambda: build_variant(
            name, self.lm, data_dir=self.data_dir, seed=self.seed, cache_dir=self.cache_dir,
            progress=self.progress, instruction=self.instruction, steps=self.steps, pairs=self.original.lexicon.pairs))

    def disclosure(self, name: str) -> Any:
        """The disclosure suite of a variant (its own model, prompts and decoding)."""
        from bias_core.suites.disclosure import DisclosureAudit

        def make():
            v = self.variant(name)
            kwargs = {"decoding": v.decoding} if v.decoding is not None else {}
            return DisclosureAudit(v.lm, data_dir=self.data_dir, seed=self.seed, prompt_transform=v.prompt_transform,
                                   **self._definition(), **kwargs)

        return self._remembered(self._suites, name, make)

    def _definition(self) -> dict[str, Any]:
        """The original audit's lexicon and articles: a variant is measured exactly as it was."""
        return {"lexicon": self.original.lexicon, "articles": self.original.articles}

    # ----- paired comparisons --------------------------------------------------------------------
    def reduction(self, name: str, probe: str, metric: str) -> MetricResult:
        from bias_core.mitigation.evaluation.bias_reduction import paired_reduction

        key = (f"{name}:{probe}", metric)
        if key not in self._results:
            if name == "hyperparameter":
                self._results[key] = self._grid_reduction(probe, metric)
            else:
                mitigated = self.disclosure(name).result(probe, metric)
                self._results[key] = paired_reduction(self.original.result(probe, metric), mitigated,
                                                      seed=self.seed, metric=f"{metric}_reduction")
            # how the variant was made (adapter, training data and time, configuration) travels with it
            self._results[key].breakdown["variant"] = dict(self.variant(name).info)
        return self._results[key]

    def grid(self, probe: str, metric: str) -> dict[str, MetricResult]:
        """``metric`` (a disclosure metric of generated text: GAS) at every sampled decoding setting
        of Dong et al.'s grid on one probe."""
        from bias_core.mitigation.methods.decoding_variants import decoding_grid
        from bias_core.suites.disclosure import DisclosureAudit

        def make():
            out = {}
            for setting in decoding_grid(include_greedy=False):
                suite = DisclosureAudit(self.lm, data_dir=self.data_dir, seed=self.seed, decoding=setting.config,
                                        **self._definition())
                out[setting.name] = suite.result(probe, metric)
            return out

        return self._remembered(self._grids, (probe, metric), make)

    def _grid_reduction(self, probe: str, metric: str) -> MetricResult:
        from bias_core.mitigation.evaluation.bias_reduction import paired_reduction
        from bias_core.mitigation.methods.decoding_variants import best_setting

        if not catalogue.spec(metric).decoded:
            raise ProbeNotApplicable(f"decoding settings cannot change {metric}: implicit metrics are computed on raw "
                                     "logits, never on a warped sampling distribution")
        grid = self.grid(probe, metric)
        best = best_setting({k: r.value for k, r in grid.items()})
        [reduction] = [m.name for m in catalogue.reductions() if m.of == metric]
        result = paired_reduction(self.original.result(probe, metric), grid[best], seed=self.seed, metric=reduction)
        # The whole grid goes into the report; choosing the best on the audited items is the
        # paper's protocol and flatters the method (no held-out selection).
        result.breakdown.update({"best_setting": best, f"grid_{metric}": {k: r.value for k, r in grid.items()},
                                 "selection": "best of the grid on these same items (optimistic, as in the paper)"})
        return result

    # ----- guards ------------------------------------------------------------------------------
    def guard(self, name: str, metric: str) -> MetricResult:
        """A guard compares the association metric it is ``of`` between the original and the
        variant; one of no metric (the damage guard) has a runner that scores its own probe (the
        held-out text) with both models."""
        key = (f"{name}:guard", metric)
        if key in self._results:
            return self._results[key]
        variant = self.variant(name)
        if not variant.changes_weights:
            raise ProbeNotApplicable(f"{name} leaves the weights unchanged; the over-debiasing guards apply to fine-tuning")
        spec, probe = catalogue.spec(metric), GUARDS[metric]
        if spec.of is None:
            offered = {"lm_original": lambda: self.lm, "lm_mitigated": lambda: variant.lm,
                       "probe": lambda: self.probe(probe), "seed": lambda: self.seed}
            result = call_with(spec.runner_function(), offered, f"{metric}'s runner")
        else:
            before = self.original_association.result(probe, spec.of)
            after = self.association(name).result(probe, spec.of)
            result = spec.compute_function()(before, after, seed=self.seed)
        self._results[key] = result
        return result

    def association(self, name: str) -> Any:
        """The association suite of a variant, measured as the original's (guards, StereoSet)."""
        from bias_core.suites.association import AssociationAudit

        return self._remembered(self._associations, name, lambda: AssociationAudit(
            self.variant(name).lm, data_dir=self.data_dir, seed=self.seed,
            causal_likelihood=self.original_association.causal_likelihood,
            articles=self.original_association.articles))

    # ----- GenderCARE's re-audit ------------------------------------------------------------------
    def reaudit(self, name: str, probe: str, metric: str) -> MetricResult:
        """A metric of GenderCARE's re-audit (``catalogue.reaudits()``) of variant ``name``: the
        original and the variant on the same items, paired (gendercare_reaudit's module doc)."""
        key = (f"{name}:{probe}", metric)
        if key not in self._results:
            self._results[key] = self._reaudit(name, probe, metric)
            self._results[key].breakdown["variant"] = dict(self.variant(name).info)
        return self._results[key]

    def _reaudit(self, name: str, probe: str, metric: str) -> MetricResult:
        from bias_core.mitigation.evaluation import gendercare_reaudit as gc
        from bias_core.mitigation.evaluation.bias_reduction import paired_reduction

        spec = catalogue.spec(metric)
        if spec not in catalogue.reaudits() or probe not in spec.probes:
            raise KeyError(f"{metric} on {probe} is not a metric of GenderCARE's re-audit")
        # only a metric of the regard scorer asks which one this run has (loading it if need be)
        if spec.scorer == "regard" and not spec.audited_with(proxied(self._regard_is_proxy())):
            raise ProbeNotApplicable(f"{metric} is not what this run's regard scorer produces; its metrics are named "
                                     f"{self._regard_prefix()}_*")
        of = catalogue.spec(spec.of) if spec.of is not None else None
        if of is not None and of.family == "genderpair":
            before, after = self.genderpair(None).result(probe, spec.of), self.genderpair(name).result(probe, spec.of)
            dropped = None
            if spec.of == "BPR":  # a prompt counts when both models' responses decide it
                before, after, dropped = gc.decided_in_both(before, after)
            result = paired_reduction(before, after, seed=self.seed, metric=metric)
            if dropped is not None:
                result.breakdown["decided_by_one_model_only"] = dropped
            if "classifier" in before.breakdown:  # the classifier that scored both models' responses
                result.breakdown["classifier"] = before.breakdown["classifier"]
            return result
        if of is not None and of.family == "association":  # StereoSet: GenderCARE's Δ, the stereotype's margin
            before = gc.stereo_margin(self.original_association.result(probe, spec.of))
            after = gc.stereo_margin(self.association(name).result(probe, spec.of))
            result = paired_reduction(before, after, seed=self.seed, metric=metric)
            result.breakdown["data"] = self.original_association.result(probe, spec.of).breakdown.get("data", {})
            return result
        offered = {"bold_original": lambda: self.bold(None), "bold_mitigated": lambda: self.bold(name),
                   "regard_prefix": self._regard_prefix, "seed": lambda: self.seed}
        out = self._remembered(self._bold, (name, "gaps"),
                               lambda: call_with(spec.runner_function(), offered, f"{metric}'s runner"))
        result, scorer = out[metric], self._scorers.get("regard")
        if isinstance(result, MetricResult) and scorer is not None and not isinstance(scorer, Exception):
            from bias_core.classifiers.base import classifier_record  # what scored both models' continuations

            result.breakdown.setdefault("classifier", classifier_record("regard", scorer))
        return result

    def genderpair(self, name: str | None) -> Any:
        """The GenderPair suite of the original (None) or a variant: the same seeded prompts,
        classifiers and greedy decoding, never adaptively sampled, so the items pair."""
        from bias_core.suites.genderpair import GenderPairAudit

        return self._remembered(self._genderpairs, name, lambda: GenderPairAudit(
            self.lm if name is None else self.variant(name).lm, data_dir=self.data_dir, seed=self.seed,
            sample=self.genderpair_sample, toxicity=self.toxicity, regard=self.regard, _scorers=self._scorers))

    def _regard_scorer(self) -> Any:
        from bias_core import classifiers

        return self._remembered(self._scorers, "regard", lambda: classifiers.get_regard(self.regard))

    def _regard_is_proxy(self) -> bool:
        return bool(getattr(self._regard_scorer(), "is_proxy", False))

    def _regard_prefix(self) -> str:
        return regard_prefix(self._regard_is_proxy())

    def bold(self, name: str | None) -> dict[str, list[dict]]:
        """group -> the original's (None) or a variant's BOLD continuations, scored for regard."""
        from bias_core.classifiers import REGARD_COLUMNS
        from bias_core.mitigation.evaluation.gendercare_reaudit import bold_regard

        return self._remembered(self._bold, name, lambda: bold_regard(
            self.lm if name is None else self.variant(name).lm, self.probe(bold.NAME), self._regard_scorer(),
            REGARD_COLUMNS, seed=self.seed))
