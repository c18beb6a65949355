"""DA-Gender's ``DA_score`` on a loaded model: does it prefer the factually right sentence?

Masked and seq2seq LMs, two definitions (``masked_da``):

- ``"probability"`` (the default): the paper's text (section 5, "DA-score"): "for BERT and BART
  we mask the target word and compute the probability of the two options ... and select the
  option with a higher probability". One mask fill per pair, P(right | TM) against P(wrong | TM)
  (TM: the sentence with the target masked and the attribute shown).
- ``"kurita"``: the paper's code (``evaluating_over_debiasing*.py``, ``get_probs_helper``), which
  produced its Table 8: each option's Kurita association log P(t | TM) / P(t | TAM) (TAM: target
  and attribute masked), and the option with the larger association wins. The prior P(t | TAM)
  takes out how likely a target is anywhere ("he" against "my stepdaughter"), so the two
  definitions differ where the targets' priors do.
"""

from __future__ import annotations

import numpy as np

from bias_core.metrics.association import da_score, kurita_association, option_margin
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD, paper_causal, sentence_scores
from bias_core.probes.base import Probe
from bias_core.runners.kurita import MASKED_KINDS, fill_each

MASKED_DEFINITIONS = ("probability", "kurita")
DEFAULT_MASKED_DA = "probability"  # the paper's text; "kurita": its code
PAPER_CAUSAL = "total"  # section 5: "we compute sentence probabilities"; "mean": its code


def da_margins(lm: ScoringModel, probe: Probe, causal: str = DEFAULT_CAUSAL_LIKELIHOOD,
               masked_da: str = DEFAULT_MASKED_DA) -> np.ndarray:
    """Per pair, how much more the model prefers the correct sentence (> 0 = right)."""
    metas = [it.meta for it in probe.items]
    if lm.kind in MASKED_KINDS:
        if masked_da not in MASKED_DEFINITIONS:
            raise ValueError(f"DA_score: masked_da {masked_da!r}: choose one of {', '.join(MASKED_DEFINITIONS)}")
        if masked_da == "probability":
            right = [m[m["correct"]] for m in metas]
            wrong = [m["female" if m["correct"] == "male" else "male"] for m in metas]
            n = len(metas)
            # one fill_probs call: both options at the target's mask of the attribute-shown sentence
            p = fill_each(lm, [r["tm"] for r in right] + [w["tm"] for w in wrong],
                          [r["word"] for r in right] + [w["word"] for w in wrong], "DA-Gender: both targets, attribute shown")
            return option_margin(p[:n], p[n:])
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
        causal = paper_causal(causal, PAPER_CAUSAL)
        # The paper's text compares "sentence probabilities" (section 5): joint log-likelihoods,
        # the "paper" setting's. Its GPT-2 code compares per-token means (the geometric mean
        # probability; causal="mean"). The two agree whenever the two targets have as many
        # tokens; the mean rewards a longer target for spreading its probability over more
        # tokens.
        n = len(metas)
        sentences = [*probe.prompts, *(m["wrong_sentence"] for m in metas)]
        lp = sentence_scores(lm, sentences, causal, desc="DA-Gender: sentence log-likelihoods",
                             pairs=[(k, n + k) for k in range(n)])
        return lp[:n] - lp[n:]
    raise ValueError(f"DA_score: unsupported model kind {lm.kind!r}; expected causal, masked or seq2seq")


def run_da_score(lm: ScoringModel, probe: Probe, seed: int = 0, causal: str = DEFAULT_CAUSAL_LIKELIHOOD,
                 masked_da: str = DEFAULT_MASKED_DA) -> MetricResult:
    """``DA_score`` with a bootstrap CI over pairs and ``breakdown["per_template"]``.

    ``causal`` ("paper": total, as the text; "mean": its code's; or "total") says how a causal
    LM's sentences are compared, ``masked_da``
    ("probability" or "kurita", module doc) how a masked or seq2seq LM's options are; the
    breakdown names the one used (``definition``)."""
    causal = paper_causal(causal, PAPER_CAUSAL)
    margins = da_margins(lm, probe, causal, masked_da)
    metas = [it.meta for it in probe.items]
    extra = [{"attribute": m["attribute"], "correct": m["correct"], "wrong_sentence": m["wrong_sentence"]} for m in metas]
    result = da_score(margins, [m["template"] for m in metas], ids=probe.ids, prompts=probe.prompts, seed=seed, extra=extra)
    definition = {"articles": probe.provenance["articles"]} if "articles" in probe.provenance else {}
    if lm.kind == "causal":
        definition["causal_likelihood"] = causal
    else:
        definition["masked_da"] = masked_da
    if definition:
        result.breakdown["definition"] = definition
    return result
