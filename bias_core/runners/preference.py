"""StereoSet, CrowS-Pairs and WinoBias's pronoun pairs on a loaded model: one batched scoring
call per probe.

The scores' metrics (``stereoset_scores``, ``crows_score``; ``winobias_stereo``,
``winobias_gap``) are pure functions in ``bias_core.metrics.preference`` and
``bias_core.metrics.winobias``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from bias_core import catalogue
from bias_core.metrics.preference import crows_score, stereoset_scores
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD, paper_causal, sentence_scores


def run_stereoset(lm: ScoringModel, probe, seed: int = 0, causal: str = DEFAULT_CAUSAL_LIKELIHOOD) -> dict[str, MetricResult]:
    """Score a stereoset probe's three sentences per item with ``lm.sentence_logprob``.

    Causal LMs: per-token mean log-likelihood by default, as StereoSet's own GPT-2 evaluation
    (``eval_generative_models.py``: the geometric mean of the token probabilities);
    ``causal="total"`` compares joint log-likelihoods."""
    causal = paper_causal(causal, "mean")
    items = probe.items
    sentences = [i.meta[k] for i in items for k in ("stereotype", "anti_stereotype", "unrelated")]
    # every comparison the metric makes: stereotype-anti, stereotype-unrelated, anti-unrelated
    pairs = [(3 * k + a, 3 * k + b) for k in range(len(items)) for a, b in ((0, 1), (0, 2), (1, 2))]
    scores = sentence_scores(lm, sentences, causal, desc=f"{probe.name}: sentence scores", pairs=pairs)
    s, a, u = scores[0::3], scores[1::3], scores[2::3]
    out = stereoset_scores(s, a, u, [i.meta["target"] for i in items], ids=probe.ids, prompts=probe.prompts, seed=seed,
                            sentences=[sentences[3 * k: 3 * k + 3] for k in range(len(items))])
    if lm.kind == "causal":
        for result in out.values():
            result.breakdown["definition"] = {"causal_likelihood": causal}
    return out


def _pair_scores(lm: ScoringModel, probe, first: str, second: str) -> tuple[list[str], np.ndarray]:
    """Both sentences of every pair, scored in one call; ``--precision exact`` decides each pair's
    comparison as fp32 does."""
    from bias_core.models.precision.modes import compared_sentence_logprob

    sentences = [i.meta[k] for i in probe.items for k in (first, second)]
    pairs = [(2 * k, 2 * k + 1) for k in range(len(probe.items))]
    scores = np.asarray(compared_sentence_logprob(lm, sentences, pairs, desc=f"{probe.name}: sentence scores"),
                        dtype=np.float64)
    return sentences, scores


def run_crows(lm: ScoringModel, probe, seed: int = 0) -> MetricResult:
    """Score a CrowS-Pairs probe's two sentences per pair with ``lm.sentence_logprob``."""
    items = probe.items
    sentences, scores = _pair_scores(lm, probe, "sent_more", "sent_less")
    return crows_score(scores[0::2], scores[1::2], [i.meta["direction"] for i in items],
                       ids=probe.ids, prompts=probe.prompts, seed=seed,
                       sentences=[sentences[2 * k: 2 * k + 2] for k in range(len(items))])


def run_winobias(lm: ScoringModel, probe, seed: int = 0,
                 metrics: Mapping[str, Callable[..., MetricResult]] | None = None) -> dict[str, MetricResult]:
    """Every WinoBias metric of ``metrics`` (default: every one the catalogue declares of this
    runner) from one scoring pass over each pair's
    pro- and anti-stereotyped sentence, scored as CrowS-Pairs' (joint log-likelihood for a causal
    LM, pseudo-log-likelihood for a masked one)."""
    items = probe.items
    sentences, scores = _pair_scores(lm, probe, "pro", "anti")
    common = dict(ids=probe.ids, prompts=probe.prompts, seed=seed, genders=[i.meta["pro_gender"] for i in items],
                  sentences=[sentences[2 * k: 2 * k + 2] for k in range(len(items))])
    out = {}
    for name, compute in (metrics or catalogue.computed_by(run_winobias)).items():
        out[name] = compute(scores[0::2], scores[1::2], **common)
        out[name].breakdown["definition"] = {"winobias_likelihood": "joint" if lm.kind == "causal" else "pseudo"}
    return out
