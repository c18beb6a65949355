"""DA-Gender's ``DA_score`` on a loaded model: does it prefer the factually right sentence?"""

from __future__ import annotations

import numpy as np

from bias_core.metrics.association import da_score, kurita_association
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD, sentence_scores
from bias_core.probes.base import Probe
from bias_core.runners.kurita import MASKED_KINDS, fill_each


def da_margins(lm: ScoringModel, probe: Probe, causal: str = DEFAULT_CAUSAL_LIKELIHOOD) -> np.ndarray:
    """Per pair, how much more the model prefers the correct sentence (> 0 = right)."""
    metas = [it.meta for it in probe.items]
    if lm.kind in MASKED_KINDS:
        # The paper's add_predicts: pref_g = log P(target_g | TM) / P(target_g | TAM).
        pref = {}
        for g in ("male", "female"):
            words = [m[g]["word"] for m in metas]
            p_t = fill_each(lm, [m[g]["tm"] for m in metas], words, f"DA-Gender: {g} target, attribute shown")
            p_prior = fill_each(lm, [m[g]["tam"] for m in metas], words, f"DA-Gender: {g} target, attribute masked")
            pref[g] = kurita_association(p_t, p_prior)
        sign = np.array([1.0 if m["correct"] == "male" else -1.0 for m in metas])
        return sign * (pref["male"] - pref["female"])
    if lm.kind == "causal":
        # The paper's GPT-2 code compares the two sentences' per-token mean log-likelihoods (the
        # geometric mean probability; causal="mean"). causal="total" compares joint
        # log-likelihoods instead: the verdict is the same whenever the two targets have as many
        # tokens, and a longer target is not rewarded for spreading its probability over more
        # tokens.
        n = len(metas)
        sentences = [*probe.prompts, *(m["wrong_sentence"] for m in metas)]
        lp = sentence_scores(lm, sentences, causal, desc="DA-Gender: sentence log-likelihoods",
                             pairs=[(k, n + k) for k in range(n)])
        return lp[:n] - lp[n:]
    raise ValueError(f"DA_score: unsupported model kind {lm.kind!r}; expected causal, masked or seq2seq")


def run_da_score(lm: ScoringModel, probe: Probe, seed: int = 0, causal: str = DEFAULT_CAUSAL_LIKELIHOOD) -> MetricResult:
    """``DA_score`` with a bootstrap CI over pairs and ``breakdown["per_template"]``.

    ``causal`` ("mean" or "total") says how a causal LM's sentences are compared; the breakdown
    names it (``definition``)."""
    margins = da_margins(lm, probe, causal)
    metas = [it.meta for it in probe.items]
    extra = [{"attribute": m["attribute"], "correct": m["correct"], "wrong_sentence": m["wrong_sentence"]} for m in metas]
    result = da_score(margins, [m["template"] for m in metas], ids=probe.ids, prompts=probe.prompts, seed=seed, extra=extra)
    definition = {"articles": probe.provenance["articles"]} if "articles" in probe.provenance else {}
    if lm.kind == "causal":
        definition["causal_likelihood"] = causal
    if definition:
        result.breakdown["definition"] = definition
    return result
