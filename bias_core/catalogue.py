"""Every metric of the audits, declared once.

A ``MetricSpec`` says what a metric is: its family and probes, which way is better (and its
ideal), its scale and possible values, whether a paired per-item difference between two models
is meaningful, and the pure function that computes it. The audits' parametrization, the gates'
known names, range and direction checks, the regression pairing table and the README's metric
table are all read from here; thresholds.toml holds only limits and their notes.

Compute functions are named as "module:function" and imported on use: the catalogue is read
when the plugin loads, and the metric modules pull in numpy and scipy.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from bias_core.probes.disclosure import PROBE_NAMES as DISCLOSURE_PROBES

Better = Literal["lower", "higher", "ideal"]
FAMILIES = ("disclosure", "association", "genderpair", "mitigation")

_LN2 = math.log(2.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    family: str
    probes: tuple[str, ...]
    better: Better
    scale: str
    value_range: tuple[float | None, float | None]  # None: unbounded on that side
    paired: bool  # a per-item difference of two models on the same items is meaningful
    compute: str  # "module:function", the pure function that computes it
    # The unbiased value. With better="ideal" the gate bounds |value - ideal|; lm_score's ideal
    # of 100 is its best value, gated the same way although higher is simply better.
    ideal: float | None = None
    # mitigation metrics: the metric they compare between the original and the mitigated model
    of: str | None = None
    # "module:function" that sends the probe through a model and returns this metric, where one
    # function does it for every model kind (association); other families' suites run the model
    runner: str | None = None
    # "module:function(data_dir)" that loads the metric's one probe, for association probes the
    # suite does not load itself: a new association metric declares its probe here
    probe_loader: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.family, str) and self.family):
            raise ValueError(f"{self.name}: family must be a name, got {self.family!r}")
        if self.better not in ("lower", "higher", "ideal"):
            raise ValueError(f"{self.name}: better must be lower, higher or ideal, got {self.better!r}")
        if (self.better == "ideal") and self.ideal is None:
            raise ValueError(f"{self.name}: better='ideal' needs an ideal")
        if not self.probes:
            raise ValueError(f"{self.name}: no probes")
        if self.probe_loader is not None and len(self.probes) != 1:
            raise ValueError(f"{self.name}: a probe_loader loads one probe, but it has {len(self.probes)}")

    @property
    def gate_direction(self) -> Literal["max", "min"]:
        """The direction a gate of this metric has in thresholds.toml."""
        return "min" if self.better == "higher" and self.ideal is None else "max"

    def compute_function(self) -> Callable[..., Any]:
        return _resolve(self.compute)

    def runner_function(self) -> Callable[..., Any] | None:
        return None if self.runner is None else _resolve(self.runner)

    def probe_loader_function(self) -> Callable[..., Any] | None:
        return None if self.probe_loader is None else _resolve(self.probe_loader)


def _resolve(reference: str) -> Callable[..., Any]:
    module, _, func = reference.partition(":")
    return getattr(importlib.import_module(module), func)


def _specs(names: Iterable[str], **common: Any) -> list[MetricSpec]:
    return [MetricSpec(name=n, **common) for n in names]


GROUP_PROBES = ("genderpair-group1", "genderpair-group2", "genderpair-group3")
ACROSS_GROUPS = "genderpair-groups"
ROBUSTNESS = "genderpair-robustness"
_GM = "bias_core.metrics.genderpair"
_GAP = "max - min across the three groups (0..1; 0 = groups alike)"

# Order matters: the audits are parametrized in this order (test ids, report rows).
METRICS: tuple[MetricSpec, ...] = (
    # ----- disclosure (Dong et al. 2024)
    MetricSpec("GAS", "disclosure", DISCLOSURE_PROBES, "lower", "share of continuations with a gender word (0..1)",
               (0.0, 1.0), True, "bias_core.metrics.disclosure:gas"),
    MetricSpec("GLD", "disclosure", DISCLOSURE_PROBES, "lower", "mean |Pf - Pm| / (Pf + Pm) over prompts (0..1)",
               (0.0, 1.0), True, "bias_core.metrics.disclosure:gld"),
    MetricSpec("ADD", "disclosure", DISCLOSURE_PROBES, "lower", "mean divergence of Pf and Pm, nats (0..ln 2)",
               (0.0, _LN2), True, "bias_core.metrics.disclosure:add"),
    # ----- association
    MetricSpec("DA_score", "association", ("da-gender",), "higher", "share of pairs where the factually right sentence wins (0..1)",
               (0.0, 1.0), True, "bias_core.metrics.association:da_score",
               runner="bias_core.runners.da_gender:run_da_score"),
    MetricSpec("logprob_effect", "association", ("logprob-professions",), "ideal", "effect size, male vs female targets (0 = none)",
               (None, None), False, "bias_core.metrics.association:association_effect", ideal=0.0,
               runner="bias_core.runners.kurita:run_logprob_effect"),
    # seat-v1 is a WEAT (weat_effect); seat-v2 uses association_effect on cosines
    MetricSpec("SEAT_effect", "association", ("seat-v1", "seat-v2"), "ideal", "effect size of sentence encodings (0 = none)",
               (None, None), False, "bias_core.metrics.association:weat_effect", ideal=0.0,
               runner="bias_core.runners.seat:run_seat_effect"),
    MetricSpec("stereo_score", "association", ("stereoset-gender",), "ideal", "percent stereotype preferred (0..100; 50 = none)",
               (0.0, 100.0), True, "bias_core.metrics.preference:stereoset_scores", ideal=50.0,
               runner="bias_core.runners.preference:run_stereoset"),
    MetricSpec("lm_score", "association", ("stereoset-gender",), "higher", "percent meaningful preferred over unrelated (0..100)",
               (0.0, 100.0), True, "bias_core.metrics.preference:stereoset_scores", ideal=100.0,
               runner="bias_core.runners.preference:run_stereoset"),
    MetricSpec("crows_stereo", "association", ("crows-pairs-gender",), "ideal",
               "percent more-stereotypical sentence preferred (0..100; 50 = none)",
               (0.0, 100.0), True, "bias_core.metrics.preference:crows_score", ideal=50.0,
               runner="bias_core.runners.preference:run_crows"),
    MetricSpec("GBM", "association", ("sentiment-templates",), "ideal", "gender skew by sentiment of top-k fills (-2..2; 0 = none)",
               (-2.0, 2.0), False, "bias_core.metrics.gbm:gbm", ideal=0.0,
               runner="bias_core.runners.gbm:run_gbm"),
    MetricSpec("pronoun_stereo", "association", ("occupation-pronouns",), "ideal",
               "share of pairs where the occupation's stereotyped pronoun is preferred (0..1; 0.5 = none)",
               (0.0, 1.0), True, "bias_core.metrics.association:pronoun_stereo", ideal=0.5,
               runner="bias_core.runners.occupation_pronoun:run_pronoun_stereo",
               probe_loader="bias_core.probes.occupation_pronoun:load_occupation_pronouns"),
    # ----- genderpair (GenderCARE): regard_* with the regard model, regard_proxy_* with its VADER stand-in
    MetricSpec("BPR", "genderpair", GROUP_PROBES, "ideal", "share of decided choices that are the biased descriptor (0..1; 0.5 = none)",
               (0.0, 1.0), True, f"{_GM}:bpr", ideal=0.5),
    MetricSpec("toxicity", "genderpair", GROUP_PROBES, "lower", "mean toxicity of a group's responses (0..1)",
               (0.0, 1.0), True, f"{_GM}:toxicity"),
    MetricSpec("regard_negative", "genderpair", GROUP_PROBES, "lower", "mean negative regard of a group's responses (0..1)",
               (0.0, 1.0), True, f"{_GM}:regard"),
    MetricSpec("regard_proxy_negative", "genderpair", GROUP_PROBES, "lower",
               "share of a group's responses with negative sentiment (0..1; a proxy)",
               (0.0, 1.0), True, f"{_GM}:regard"),
    MetricSpec("BPR_gap", "genderpair", (ACROSS_GROUPS,), "lower", _GAP, (0.0, 1.0), False, f"{_GM}:bpr_gap"),
    MetricSpec("toxicity_gap", "genderpair", (ACROSS_GROUPS,), "lower", _GAP, (0.0, 1.0), False, f"{_GM}:toxicity_gap"),
    *_specs(("regard_negative_gap", "regard_positive_gap", "regard_proxy_negative_gap", "regard_proxy_positive_gap"),
            family="genderpair", probes=(ACROSS_GROUPS,), better="lower", scale=_GAP, value_range=(0.0, 1.0),
            paired=False, compute=f"{_GM}:regard_gaps"),
    MetricSpec("BPR_spread", "genderpair", (ROBUSTNESS,), "lower", "max - min of BPR across rewordings (0..1)",
               (0.0, 1.0), False, f"{_GM}:bpr_spread"),
    # ----- mitigation: paired reductions of the disclosure metrics, and guards
    *[MetricSpec(f"{m}_reduction", "mitigation", DISCLOSURE_PROBES, "higher", f"original minus mitigated {m}, paired",
                 (-hi, hi), False, "bias_core.mitigation.compare:paired_reduction", of=m)
      for m, hi in (("GAS", 1.0), ("GLD", 1.0), ("ADD", _LN2))],
    MetricSpec("DA_score_drop", "mitigation", ("da-gender",), "lower", "original minus mitigated DA_score",
               (-1.0, 1.0), False, "bias_core.mitigation.guards:da_score_drop", of="DA_score"),
    # the damage guard scores held-out text with both models (guards.perplexity_rise_from is its pure part)
    MetricSpec("perplexity_rise", "mitigation", ("heldout-neutral-text",), "lower", "mitigated / original perplexity - 1",
               (-1.0, None), False, "bias_core.mitigation.guards:perplexity_rise_from"),
    MetricSpec("lm_score_drop", "mitigation", ("stereoset-gender",), "lower", "original minus mitigated lm_score, points",
               (-100.0, 100.0), False, "bias_core.mitigation.guards:lm_score_drop", of="lm_score"),
)

for _m in METRICS:  # an installed package may bring a family of its own (register), the project not
    if _m.family not in FAMILIES:  # pragma: no cover - caught by the tests at once
        raise ValueError(f"{_m.name}: family must be one of {FAMILIES}, got {_m.family!r}")

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}
if len(BY_NAME) != len(METRICS):  # pragma: no cover - caught by the tests at once
    raise RuntimeError("catalogue: a metric is declared twice")


def register(added: MetricSpec) -> None:
    """Add an installed package's metric (bias_core.extensions); the project's own are above."""
    known = BY_NAME.get(added.name)
    if known is not None and known != added:
        raise ValueError(f"catalogue: metric {added.name!r} is already declared")
    BY_NAME[added.name] = added


def declared() -> tuple[MetricSpec, ...]:
    """The project's metrics, then those installed packages registered."""
    return METRICS + tuple(m for m in BY_NAME.values() if m not in METRICS)


def spec(name: str) -> MetricSpec:
    return BY_NAME[name]


def reductions() -> tuple[MetricSpec, ...]:
    """The mitigation metrics that compare a disclosure metric item by item (re-audited variants)."""
    return tuple(m for m in metrics_of("mitigation") if m.of in BY_NAME and BY_NAME[m.of].family == "disclosure")


def guards() -> dict[str, str]:
    """Guard metric -> its probe: the mitigation metrics that are not reductions."""
    return {m.name: m.probes[0] for m in metrics_of("mitigation") if m not in reductions()}


def metrics_of(family: str) -> tuple[MetricSpec, ...]:
    return tuple(m for m in declared() if m.family == family)


def cases(family: str, exclude: Callable[[MetricSpec], bool] = lambda m: False) -> dict[str, tuple[str, ...]]:
    """probe -> metrics of a family, probes in their first-declared order: one gated test each."""
    out: dict[str, list[str]] = {}
    for m in metrics_of(family):
        if not exclude(m):
            for p in m.probes:
                out.setdefault(p, []).append(m.name)
    return {p: tuple(ms) for p, ms in out.items()}


def markdown_table() -> str:
    """The README's metric table."""
    lines = ["| metric | family | probes | better | scale | paired |", "|---|---|---|---|---|---|"]
    for m in METRICS:
        better = m.better if m.ideal is None else f"ideal {m.ideal:g}" if m.better == "ideal" else f"{m.better} (ideal {m.ideal:g})"
        probes = "the disclosure probes" if m.probes == DISCLOSURE_PROBES else ", ".join(f"`{p}`" for p in m.probes)
        scale = m.scale.replace("|", "\\|")
        lines.append(f"| {m.name} | {m.family} | {probes} | {better} | {scale} | {'yes' if m.paired else 'no'} |")
    return "\n".join(lines) + "\n"
