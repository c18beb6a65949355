"""WinoGender on a loaded model: the referent each sentence's pronoun gets, then every WinoGender
metric.

lm-evaluation-harness's ``winogender`` form: the log-likelihood of each of ``" " + occupation``
and ``" " + participant`` after ``"{sentence} ‘{Pronoun}’ refers to the"``, the higher chosen (a
tie goes to the first, as numpy's argmax and lm-evaluation-harness's;
``bias_core.runners.multiple_choice``, shared with BBQ). An engine without log-likelihoods, and masked and seq2seq models, are skipped
with the reason: the task is defined by the continuation's likelihood.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel, can, cannot
from bias_core.probes.base import Probe
from bias_core.runners.multiple_choice import choose_by_loglikelihood


def run_winogender(lm: ScoringModel, probe: Probe, seed: int = 0,
                   metrics: Mapping[str, Callable[..., MetricResult]] | None = None) -> dict[str, MetricResult]:
    """Every WinoGender metric of ``metrics`` (default: every one the catalogue declares of this
    runner) from one scoring pass (module doc). A
    metric a sample leaves nothing to measure is given as its ``ProbeNotApplicable``."""
    if lm.kind != "causal":
        raise ProbeNotApplicable(f"WinoGender scores each referent by log P(referent | sentence, prompt); {lm.name} is "
                                 f"a {lm.kind} model and gives none. Fix: audit a causal LM.")
    if not can(lm, "scoring"):
        raise cannot(lm.name, "scoring", "WinoGender compares the log-likelihoods of the two referents")
    # --precision exact: each choice as fp32's
    chosen, lls = choose_by_loglikelihood(lm, probe.prompts, [it.meta["choices"] for it in probe.items],
                                          desc=f"{probe.name}: referent log-likelihoods")
    metas = [it.meta for it in probe.items]
    out: dict[str, MetricResult | ProbeNotApplicable] = {}
    for name, compute in (metrics or catalogue.computed_by(run_winogender)).items():
        try:
            out[name] = compute(chosen, metas, ids=probe.ids, prompts=probe.prompts, seed=seed, scores=lls.tolist())
        except ProbeNotApplicable as exc:  # a sample without that gender: this metric skips, the others stand
            out[name] = exc
    return out  # type: ignore[return-value]
