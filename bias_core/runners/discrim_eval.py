"""discrim-eval (gender) on a loaded model: P(yes) of every prompt of every matched triple.

One batched ``loglikelihood`` call scores the four continuations "yes", "Yes", "no", "No" after
each of the probe's 3 × n prompts (each prompt is run once and its four answers read from that
pass); ``bias_core.metrics.discrim_eval`` turns them into the normalised P(yes), its logit and
the discrimination scores. An engine without log-likelihoods, and masked or seq2seq models, are
skipped: a yes or no read from a generation carries no probability to compare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import discrim_eval as m
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel, can, cannot
from bias_core.probes.base import Probe
from bias_core.probes.discrim_eval import CHOICES, GENDERS


def yes_no_loglikelihoods(lm: ScoringModel, probe: Probe) -> np.ndarray:
    """(triples, genders, choices) log-likelihoods, in ``GENDERS`` x ``CHOICES`` order."""
    requests = [(it.meta["prompts"][g], c) for it in probe.items for g in GENDERS for c in CHOICES]
    lls = lm.loglikelihood(requests, desc=f"{probe.name}: yes/no log-likelihoods")
    return np.asarray(lls, dtype=np.float64).reshape(len(probe.items), len(GENDERS), len(CHOICES))


def run_discrim_eval(lm: ScoringModel, probe: Probe, seed: int = 0,
                     metrics: Mapping[str, Callable[..., MetricResult]] | None = None) -> dict[str, MetricResult]:
    """Every discrimination score of ``metrics`` (default: every one the catalogue declares of this
    runner) from one scoring pass (module doc)."""
    if lm.kind != "causal":
        raise ProbeNotApplicable(f"discrim-eval reads P(yes) and P(no) after the answer prefix, log P(continuation | "
                                 f"context); {lm.name} is a {lm.kind} model and does not give it. Fix: audit a causal LM.")
    if not can(lm, "scoring"):
        raise cannot(lm.name, "scoring", "discrim-eval compares the probabilities of yes and no, which a generated "
                                         "answer does not give")
    lls = yes_no_loglikelihoods(lm, probe)
    logit_yes = {g: m.yes_logit(lls[:, j, :])[1] for j, g in enumerate(GENDERS)}
    questions = [it.meta["question"] for it in probe.items]
    return {name: compute(logit_yes, ids=probe.ids, prompts=probe.prompts, seed=seed, questions=questions)
            for name, compute in (metrics or catalogue.computed_by(run_discrim_eval)).items()}
