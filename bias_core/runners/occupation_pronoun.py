"""``pronoun_stereo`` on a loaded model: the occupation-pronoun probe's two sentences per pair."""

from __future__ import annotations

from bias_core.metrics.association import pronoun_stereo
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD, paper_causal, sentence_scores
from bias_core.probes.base import Probe


def run_pronoun_stereo(lm: ScoringModel, probe: Probe, seed: int = 0, causal: str = DEFAULT_CAUSAL_LIKELIHOOD) -> MetricResult:
    """Score each pair's pro- and anti-stereotypical sentence with one batched
    ``sentence_scores`` call (per-token mean log-likelihood for a causal LM by default, as
    DA-Gender and StereoSet; pseudo-log-likelihood for a masked LM); ``--precision exact``
    decides every compared pair as fp32 does."""
    causal = paper_causal(causal, "mean")
    metas = [it.meta for it in probe.items]
    n = len(metas)
    sentences = [*(m["pro"] for m in metas), *(m["anti"] for m in metas)]
    scores = sentence_scores(lm, sentences, causal, desc=f"{probe.name}: sentence scores",
                             pairs=[(k, n + k) for k in range(n)])
    result = pronoun_stereo(scores[:n], scores[n:], [m["occupation_gender"] for m in metas],
                            ids=probe.ids, prompts=probe.prompts, seed=seed)
    if lm.kind == "causal":
        result.breakdown["definition"] = {"causal_likelihood": causal}
    return result
