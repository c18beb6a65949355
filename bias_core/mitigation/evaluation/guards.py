"""Guards against over-debiasing and damage: did mitigation remove genuine knowledge or fluency?

Each guard compares the original and the mitigated model on the same items and returns a
MetricResult whose value is the damage (> 0 = worse after mitigation) with a paired bootstrap
CI over items, so a gate can say "must not drop by more than X":

- ``DA_score_drop``: DA-score (share of DA-Gender pairs where the model prefers the factually
  correct sentence) lost, original − mitigated, on the 0-1 scale;
- ``lm_score_drop``: StereoSet LM-score lost, in percentage points;
- ``perplexity_rise``: ppl_mitigated / ppl_original − 1 on the held-out neutral text (the
  ``heldout-neutral-text`` probe, bias_core/probes/heldout.py).

The p-values are one-sided paired sign-flip tests of "damage > 0"; the gates use the CIs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bias_core.errors import AuditUsageError
from bias_core.metrics.preference import _macro_statistic
from bias_core.metrics.result import MetricResult
from bias_core.mitigation.evaluation.bias_reduction import MIN_PERMUTATIONS, pair_items, paired_reduction
from bias_core.models.scored_tokens import scored_token_counts
from bias_core.stats.resampling import bootstrap_ci, paired_permutation_pvalue


def _require(result: MetricResult, metric: str, role: str, guard: str) -> None:
    if result.metric != metric:
        raise ValueError(f"{guard}: the {role} result is {result.metric!r}, expected a {metric!r} result")


# --------------------------------------------------------------------------------------------
# DA-score


def da_score_drop(original: MetricResult, mitigated: MetricResult, seed: int = 0) -> MetricResult:
    """DA-score lost by mitigation: original DA − mitigated DA (0-1 scale; > 0 = knowledge lost).

    DA_score's per-item score is 1 when the model prefers the correct sentence of the pair, and
    its value is their mean, so the drop is the mean of per-pair differences and the CI is a
    paired bootstrap over pairs. Breakdown: both DA-scores, the pairs lost (right before, wrong
    after) and gained, and the drop per template.
    """
    guard = "DA_score_drop"
    _require(original, "DA_score", "original", guard)
    _require(mitigated, "DA_score", "mitigated", guard)
    res = paired_reduction(original, mitigated, seed=seed, metric=guard)
    by_template: dict[str, list[float]] = {}
    for d, o in zip(res.details, original.details):  # paired details keep the original's item order
        by_template.setdefault(str(o.get("template", "")), []).append(d["score"])
    lost = sum(1 for d in res.details if d["score"] > 0)
    gained = sum(1 for d in res.details if d["score"] < 0)
    breakdown = {
        "original": res.breakdown["original"],
        "mitigated": res.breakdown["mitigated"],
        "pairs_lost": lost,
        "pairs_gained": gained,
        "n_pairs": res.n,
        "per_template_drop": {t: float(np.mean(v)) for t, v in sorted(by_template.items())},
        "test": res.breakdown["test"],
    }
    return MetricResult(metric=guard, value=res.value, ci_low=res.ci_low, ci_high=res.ci_high, n=res.n,
                        details=res.details, scale="share of DA-Gender pairs (0-1), original − mitigated; > 0 = "
                        "gender knowledge lost", p_value=res.p_value, breakdown=breakdown)


# --------------------------------------------------------------------------------------------
# StereoSet LM-score


def lm_score_drop(original: MetricResult, mitigated: MetricResult, seed: int = 0,
                  n_resamples: int = MIN_PERMUTATIONS) -> MetricResult:
    """StereoSet LM-score lost by mitigation, in percentage points (> 0 = fluency lost).

    LM-score is a macro average: the mean over target terms of each term's mean item score
    (``bias_core.metrics.preference``). With the same items under the same terms, the
    difference of two macro averages is the macro average of the per-item differences, so the
    CI is a paired bootstrap of exactly that statistic: resample items, recompute the mean over
    terms of the per-term mean difference (a term absent from a resample is left out, as
    StereoSet leaves out terms without contexts). The p-value flips the signs of the per-item
    differences weighted by 1/(terms × items of the term), i.e. of the macro average's terms.
    """
    guard = "lm_score_drop"
    _require(original, "lm_score", "original", guard)
    _require(mitigated, "lm_score", "mitigated", guard)
    ids, orig, mit = pair_items(original, mitigated, guard)
    for o, m in zip(orig, mit):
        if "target" not in o or "target" not in m:
            raise ValueError(f"{guard}: item {o['id']!r} has no 'target' term in its details; pass lm_score "
                             "results from bias_core.metrics.preference.stereoset_scores")
        if o["target"] != m["target"]:
            raise ValueError(f"{guard}: item {o['id']!r} has target {o['target']!r} in the original result "
                             f"but {m['target']!r} in the mitigated one; audit both on the same probe version")
    # Item scores are the share of the 2 comparisons won (0, 0.5, 1); x100 gives LM-score points.
    diffs = 100.0 * (np.asarray([float(o["score"]) for o in orig]) - np.asarray([float(m["score"]) for m in mit]))
    names, groups = np.unique(np.asarray([str(o["target"]) for o in orig], dtype=object), return_inverse=True)
    statistic = _macro_statistic(diffs, groups, len(names))
    indices = np.arange(diffs.size, dtype=np.float64)
    value = float(statistic(indices))
    expected = float(original.value) - float(mitigated.value)
    if not np.isclose(value, expected, rtol=1e-9, atol=1e-9):
        raise ValueError(f"{guard}: per-item scores give a drop of {value!r} points but the two lm_score values "
                         f"differ by {expected!r}; the results were not computed by stereoset_scores")
    low, high = bootstrap_ci(indices, statistic=statistic, seed=seed)
    counts = np.bincount(groups, minlength=len(names))
    weighted = diffs * diffs.size / (len(names) * counts[groups])  # mean(weighted) == macro mean of diffs
    p = paired_permutation_pvalue(weighted, n_resamples=max(int(n_resamples), MIN_PERMUTATIONS), seed=seed,
                                  alternative="greater")
    details = tuple({"id": i, "prompt": o.get("prompt", ""), "score": float(d), "target": o["target"],
                     "original": 100.0 * float(o["score"]), "mitigated": 100.0 * float(m["score"])}
                    for i, o, m, d in zip(ids, orig, mit, diffs))
    breakdown = {
        "original": float(original.value),
        "mitigated": float(mitigated.value),
        "n_pairs": int(diffs.size),
        "n_targets": len(names),
        "ci": "paired bootstrap over items of the macro (per-target) mean difference",
    }
    return MetricResult(metric=guard, value=value, ci_low=low, ci_high=high, n=int(diffs.size), details=details,
                        scale="LM-score percentage points, original − mitigated; > 0 = language modelling lost",
                        p_value=float(p), breakdown=breakdown)


# --------------------------------------------------------------------------------------------
# perplexity on held-out neutral text


def perplexity(lm, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(mean negative log-likelihood per scored token of each text, scored tokens per text).

    From ``lm.sentence_logprob`` (joint log-likelihood for causal LMs; pseudo-log-likelihood,
    hence pseudo-perplexity, for masked LMs). Corpus perplexity is
    exp(sum(nll * tokens) / sum(tokens)).
    """
    texts = list(texts)
    if not texts:
        raise ValueError("perplexity: no texts; nothing to score")
    logprob = np.asarray(lm.sentence_logprob(texts, desc="held-out text: perplexity"), dtype=np.float64)
    counts = scored_token_counts(lm, texts)
    if np.any(counts == 0):
        empty = texts[int(np.argmin(counts))]
        raise AuditUsageError(f"perplexity: text {empty!r} has no tokens. Fix: drop empty texts.")
    return -logprob / counts, counts


def _ratio_statistic(nll_orig: np.ndarray, nll_mit: np.ndarray, counts: np.ndarray):
    """Bootstrap statistic over resampled text indices: ppl_mit / ppl_orig − 1, token-weighted."""
    diff = nll_mit - nll_orig  # per text, total NLL difference

    def statistic(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(indices).astype(np.int64)
        return np.expm1(diff[idx].sum(axis=axis) / counts[idx].sum(axis=axis))

    return statistic


def perplexity_rise(lm_original, lm_mitigated, texts: Sequence[str], seed: int = 0,
                    n_resamples: int = MIN_PERMUTATIONS) -> MetricResult:
    """``perplexity_rise`` = ppl_mitigated / ppl_original − 1 on ``texts`` (> 0 = fluency lost).

    ppl = exp(total NLL / total scored tokens) over all texts (token-weighted, as perplexity is
    usually reported), so long texts weigh more. CI: paired bootstrap over texts (resample
    texts, recompute the ratio from both models' NLL on the same texts). p-value: one-sided
    sign-flip test of the per-text total NLL differences (their mean > 0 exactly when the
    ratio > 1). Per-item score: that text's rise in mean NLL per token (nats).
    Both models must tokenize alike (same token counts), or per-token NLL is not comparable.
    """
    texts = list(texts)
    return perplexity_rise_from(texts, perplexity(lm_original, texts), perplexity(lm_mitigated, texts),
                                pseudo=lm_original.kind != "causal", seed=seed, n_resamples=n_resamples)


def run_perplexity_rise(lm_original, lm_mitigated, probe, seed: int = 0) -> MetricResult:
    """``perplexity_rise`` on a probe's texts (its items' prompts): the catalogue's runner."""
    return perplexity_rise(lm_original, lm_mitigated, probe.prompts, seed=seed)


def perplexity_rise_from(texts: Sequence[str], original: tuple[np.ndarray, np.ndarray],
                         mitigated: tuple[np.ndarray, np.ndarray], *, pseudo: bool, seed: int = 0,
                         n_resamples: int = MIN_PERMUTATIONS) -> MetricResult:
    """``perplexity_rise`` from both models' ``perplexity()`` output, for callers that score the
    original once and several variants after it (the trade-off sweep)."""
    texts = list(texts)
    (mean_o, counts_o), (mean_m, counts_m) = original, mitigated
    if not np.array_equal(counts_o, counts_m):
        k = int(np.argmax(counts_o != counts_m))
        raise AuditUsageError(
            f"perplexity_rise: the two models tokenize {texts[k]!r} into {counts_o[k]} and {counts_m[k]} tokens; "
            "per-token perplexities of different tokenizers are not comparable. Fix: compare models that share "
            "a tokenizer (a mitigated model keeps its base model's)."
        )
    total_o, total_m = mean_o * counts_o, mean_m * counts_m
    tokens = int(counts_o.sum())
    statistic = _ratio_statistic(total_o, total_m, counts_o)
    indices = np.arange(len(texts), dtype=np.float64)
    value = float(statistic(indices))
    low, high = bootstrap_ci(indices, statistic=statistic, seed=seed)
    p = paired_permutation_pvalue(total_m - total_o, n_resamples=max(int(n_resamples), MIN_PERMUTATIONS),
                                  seed=seed, alternative="greater")
    ppl_o, ppl_m = float(np.exp(total_o.sum() / tokens)), float(np.exp(total_m.sum() / tokens))
    details = tuple({"id": k, "prompt": t, "score": float(mean_m[k] - mean_o[k]), "nll_original": float(mean_o[k]),
                     "nll_mitigated": float(mean_m[k]), "tokens": int(counts_o[k])} for k, t in enumerate(texts))
    breakdown = {
        "ppl_original": ppl_o,
        "ppl_mitigated": ppl_m,
        "texts": len(texts),
        "tokens": tokens,
        "kind": "pseudo-perplexity (masked LM)" if pseudo else "perplexity",
        "aggregation": "token-weighted: exp(total NLL / total scored tokens); CI by paired bootstrap over texts",
    }
    return MetricResult(metric="perplexity_rise", value=value, ci_low=low, ci_high=high, n=len(texts),
                        details=details, scale="relative: ppl_mitigated / ppl_original − 1; > 0 = fluency lost",
                        p_value=float(p), breakdown=breakdown)
