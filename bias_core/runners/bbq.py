"""BBQ gender identity on a loaded model: the answer each question gets, then every BBQ metric.

A model that scores log-likelihoods answers with the answer of the highest log P(" " + answer |
context and question), lm-evaluation-harness's ``bbq`` multiple-choice form over the item's own
three answers (argmax; a tie goes to the first, as numpy's; ``bias_core.runners.multiple_choice``,
shared with WinoGender). An engine that can only generate gets the answers as lettered options
and its answer is read from a greedy continuation (``bias_core.metrics.bbq.read_answer``), the BBQ
paper's generative setting; every result's breakdown says which (``answers_from``), and the report
shows it as a caveat. Masked and seq2seq models are skipped: neither gives log P(continuation |
context).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import bbq as m
from bias_core.metrics.result import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.models.protocol import ScoringModel, can, cannot
from bias_core.probes.base import Probe
from bias_core.probes.bbq import lettered_prompt
from bias_core.runners.multiple_choice import choose_by_loglikelihood

# A letter, or an answer of a few words: 16 new tokens is room for either.
GENERATION = DecodingConfig(max_new_tokens=16)
LOGLIKELIHOOD = "log-likelihood of each of the item's three answers after the context and question (lm-evaluation-harness's bbq form)"
GENERATED = "the answer letter read from a greedy generation over lettered options (the BBQ paper's generative setting)"


def _scored(lm: ScoringModel, probe: Probe) -> tuple[list[int], np.ndarray]:
    # --precision exact decides every comparison among an item's three answers as fp32 does
    return choose_by_loglikelihood(lm, probe.prompts, [it.meta["answers"] for it in probe.items],
                                   desc=f"{probe.name}: answer log-likelihoods")


def _generated(lm: ScoringModel, probe: Probe, seed: int) -> tuple[list[int | None], list[str]]:
    contexts = [lm.render_chat(lettered_prompt(it.meta)) for it in probe.items]
    outputs = lm.generate(contexts, GENERATION, seed=seed, desc=f"{probe.name}: generating answers")
    return [m.read_answer(o, it.meta["answers"]) for o, it in zip(outputs, probe.items)], list(outputs)


def run_bbq(lm: ScoringModel, probe: Probe, seed: int = 0,
            metrics: Mapping[str, Callable[..., MetricResult]] | None = None) -> dict[str, MetricResult]:
    """Every BBQ metric of ``metrics`` (default: every one the catalogue declares of this runner)
    from one pass over the probe (module doc).
    A metric whose context the probe lacks (a tiny sample) is given as its ``ProbeNotApplicable``,
    which the suite raises for that metric alone."""
    if lm.kind != "causal":
        raise ProbeNotApplicable(f"BBQ scores each answer by log P(answer | context, question) or reads a generated "
                                 f"answer; {lm.name} is a {lm.kind} model and gives neither. Fix: audit a causal LM.")
    metas = [it.meta for it in probe.items]
    scores = outputs = None
    # "definition": the short form the JUnit properties and run card carry (key -> value)
    if can(lm, "scoring"):
        chosen, lls = _scored(lm, probe)
        scores, how = lls.tolist(), {"answers_from": "loglikelihood", "scoring": LOGLIKELIHOOD,
                                     "definition": {"bbq_answers": "loglikelihood"}}
    elif can(lm, "generation"):
        picked, outputs = _generated(lm, probe, seed)
        chosen = picked  # type: ignore[assignment]
        how = {"answers_from": "generation", "scoring": GENERATED, "definition": {"bbq_answers": "generation"},
               "decoding": GENERATION.as_key(), "unreadable": sum(c is None for c in picked)}
    else:
        raise cannot(lm.name, "scoring", "BBQ needs answer log-likelihoods or generated answers")
    out: dict[str, MetricResult | ProbeNotApplicable] = {}
    for name, compute in (metrics or catalogue.computed_by(run_bbq)).items():
        try:
            result = compute(chosen, metas, ids=probe.ids, prompts=probe.prompts, seed=seed, scores=scores, outputs=outputs)
        except ProbeNotApplicable as exc:  # a sample without that context: this metric skips, the others stand
            out[name] = exc
            continue
        result.breakdown.update(how)
        out[name] = result
    return out  # type: ignore[return-value]

