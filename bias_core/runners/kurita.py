"""Kurita et al.'s log probability score (``logprob_effect``) on a loaded model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bias_core.metrics.association import PAPER_ALTERNATIVE, association_effect, kurita_association
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.probes.base import Probe

# Model kinds that fill a [MASK] (the paper's BERT path); causal models score whole sentences.
MASKED_KINDS = ("masked", "seq2seq")


def fill_each(lm: ScoringModel, texts: Sequence[str], words: Sequence[str], desc: str) -> np.ndarray:
    """P(words[i] at the [MASK] of texts[i]) with one ``fill_probs`` call over unique texts."""
    utexts = list(dict.fromkeys(texts))
    uwords = list(dict.fromkeys(words))
    probs = np.asarray(lm.fill_probs(utexts, uwords, desc=desc), dtype=float)
    ti = {t: i for i, t in enumerate(utexts)}
    wi = {w: i for i, w in enumerate(uwords)}
    return np.array([probs[ti[t], wi[w]] for t, w in zip(texts, words)])


def logprob_associations(lm: ScoringModel, probe: Probe) -> np.ndarray:
    metas = [it.meta for it in probe.items]
    if lm.kind in MASKED_KINDS:
        words = [m["word"] for m in metas]
        p_t = fill_each(lm, [m["tm"] for m in metas], words, "Kurita: target, attribute shown")
        p_prior = fill_each(lm, [m["tam"] for m in metas], words, "Kurita: target, attribute masked")
        return kurita_association(p_t, p_prior)
    if lm.kind == "causal":
        return np.asarray(lm.sentence_logprob(probe.prompts, desc="Kurita: sentence log-likelihood"), dtype=float)
    raise ValueError(f"logprob_effect: unsupported model kind {lm.kind!r}; expected causal, masked or seq2seq")


def run_logprob_effect(lm: ScoringModel, probe: Probe, seed: int = 0, alternative: str = PAPER_ALTERNATIVE) -> MetricResult:
    """``logprob_effect``: the paper's effect size of Kurita associations, male vs female
    targets, with a permutation p-value (one-sided as the paper's Appendix A; ``alternative=
    "two-sided"`` as its code) and bootstrap CI over targets."""
    values = logprob_associations(lm, probe)
    metas = [it.meta for it in probe.items]
    result = association_effect(
        "logprob_effect", values, [m["target"] for m in metas], [m["target_gender"] for m in metas],
        [m["profession_gender"] for m in metas], ids=probe.ids, prompts=probe.prompts, seed=seed,
        attributes=[m["profession"] for m in metas], alternative=alternative)
    basis = "log P(target|attribute)/P(target|attribute masked)" if lm.kind in MASKED_KINDS else "log P(sentence) (causal)"
    result.breakdown["association"] = basis
    return result
