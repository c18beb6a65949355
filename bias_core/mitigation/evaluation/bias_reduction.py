"""Did mitigation lower bias? A paired test of the original and the mitigated model on the same items.

Both models are audited on the same probe, so every item has a score under each. The unit of
comparison is the item: d_i = original score − mitigated score (> 0 = less biased after
mitigation), and the effect is mean(d). Pairing removes the item-to-item spread that two
independent CIs would carry, which is what makes a small reduction detectable on a few hundred
prompts.

This only works for metrics whose value IS the mean of the per-item ``score`` and where a
lower score means less bias: GAS (0/1 per continuation), GLD and ADD (bias amount per prompt),
BPR (0/1 per choice). Other metrics are refused unless the caller passes ``allow_non_mean=True``:

- macro averages and percentages (StereoSet's ``stereo_score``/``lm_score`` average per target
  term on a 0-100 scale; ``crows_stereo`` is a percentage of 0/1 item scores): mean(d) is then
  on the item-score scale and is not the difference of the two metric values;
- two-sided metrics whose ideal is not 0 (``stereo_score`` and ``crows_stereo`` are ideal at
  50): a lower value is not "less biased", so a one-sided reduction test answers the wrong
  question whatever the scale;
- effect sizes (``SEAT_effect``, ``logprob_effect``, ``GBM``) are not means of item scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bias_core.metrics.result import MetricResult
from bias_core.stats.resampling import EXACT_MAX_N, bootstrap_ci, paired_permutation_pvalue

#: Minimum Monte Carlo draws of the permutation test for n > EXACT_MAX_N.
MIN_PERMUTATIONS = 10_000
# The mean of float64 item scores differs from a metric's value only by summation order (~1e-16
# relative); anything beyond this tolerance means the value is another statistic.
_MEAN_RTOL = 1e-6
_MEAN_ATOL = 1e-9
_SHOW_IDS = 10


def _show(ids: Sequence[Any]) -> str:
    shown = ", ".join(repr(i) for i in list(ids)[:_SHOW_IDS])
    more = len(ids) - _SHOW_IDS
    return shown + (f" and {more} more" if more > 0 else "")


def _by_id(result: MetricResult, role: str, what: str) -> dict[Any, dict[str, Any]]:
    if not result.details:
        raise ValueError(
            f"{what}: the {role} {result.metric} result has no per-item details, so items cannot be paired. "
            "Fix: pass results as the metric functions return them (with details)."
        )
    out: dict[Any, dict[str, Any]] = {}
    dupes = []
    for d in result.details:
        if d["id"] in out:
            dupes.append(d["id"])
        out[d["id"]] = d
    if dupes:
        raise ValueError(f"{what}: the {role} {result.metric} result repeats item ids {_show(dupes)}; "
                         "pairing needs one score per item id")
    return out


def pair_items(original: MetricResult, mitigated: MetricResult, what: str):
    """(ids in the original's item order, original details, mitigated details) for the same items.

    Raises ``ValueError`` naming the ids only one side has: a comparison on different items
    would mix a change of the model with a change of the sample.
    """
    orig = _by_id(original, "original", what)
    mit = _by_id(mitigated, "mitigated", what)
    only_orig = [i for i in orig if i not in mit]
    only_mit = [i for i in mit if i not in orig]
    if only_orig or only_mit:
        parts = []
        if only_orig:
            parts.append(f"{len(only_orig)} id(s) only in the original result: {_show(only_orig)}")
        if only_mit:
            parts.append(f"{len(only_mit)} id(s) only in the mitigated result: {_show(only_mit)}")
        raise ValueError(f"{what}: the two results are not on the same items ({'; '.join(parts)}). "
                         "Fix: audit both models on the same probe version and item limit.")
    ids = list(orig)
    return ids, [orig[i] for i in ids], [mit[i] for i in ids]


def _check_mean(result: MetricResult, role: str, what: str) -> None:
    scores = np.asarray([float(d["score"]) for d in result.details])
    mean = float(scores.mean())
    if not math.isclose(mean, float(result.value), rel_tol=_MEAN_RTOL, abs_tol=_MEAN_ATOL):
        raise ValueError(
            f"{what}: the {role} {result.metric} value {result.value!r} is not the mean of its per-item scores "
            f"({mean!r}), so per-item differences do not add up to the change of the metric (a macro average, a "
            "percentage, an effect size or a two-sided metric). Fix: compare a per-item-mean metric (GAS, GLD, "
            "ADD, BPR), or pass allow_non_mean=True to test the item scores themselves (the effect is then on "
            "the item-score scale, not the metric's)."
        )


def relative_change(original: float, mitigated: float) -> float | None:
    """(mitigated − original) / |original|; None when the original is 0 (no finite ratio)."""
    return None if original == 0 else (mitigated - original) / abs(original)


def paired_reduction(
    original: MetricResult,
    mitigated: MetricResult,
    seed: int = 0,
    metric: str | None = None,
    allow_non_mean: bool = False,
    n_resamples: int = MIN_PERMUTATIONS,
) -> MetricResult:
    """How much lower the mitigated model's per-item scores are, with a paired test.

    - value = mean over items of d_i = original score − mitigated score (the effect; > 0 means
      the mitigated model is less biased); for a per-item-mean metric this equals
      original.value − mitigated.value;
    - CI = seeded percentile bootstrap of mean(d) over items;
    - p_value = one-sided sign-flip permutation test of mean(d) > 0: exact for n <= 16, else
      ``max(n_resamples, 10,000)`` seeded draws;
    - details: per item {id, prompt, score=d, original, mitigated}, in the original's order;
    - breakdown: both metric values, the relative change (mitigated − original) / |original|
      (negative = bias fell), n_pairs and the test used.

    Items are matched by ``id`` (``ValueError`` naming the unmatched ids). Metrics whose value
    is not the mean of the item scores are refused unless ``allow_non_mean`` (module doc).
    Example: d = [1, 2, 3] -> value 2, p = 1/8 (only the all-plus sign pattern reaches mean 2).
    """
    name = metric or f"{original.metric}_reduction"
    if original.metric != mitigated.metric:
        raise ValueError(f"{name}: cannot compare {original.metric!r} with {mitigated.metric!r}; "
                         "pass results of the same metric")
    ids, orig, mit = pair_items(original, mitigated, name)
    if not allow_non_mean:
        _check_mean(original, "original", name)
        _check_mean(mitigated, "mitigated", name)
    s_orig = np.asarray([float(d["score"]) for d in orig])
    s_mit = np.asarray([float(d["score"]) for d in mit])
    diffs = s_orig - s_mit
    low, high = bootstrap_ci(diffs, seed=seed)
    draws = max(int(n_resamples), MIN_PERMUTATIONS)
    p = paired_permutation_pvalue(diffs, n_resamples=draws, seed=seed, alternative="greater")
    test = ("one-sided paired sign-flip permutation test of mean(original − mitigated) > 0, "
            + ("exact (all 2^n sign patterns)" if diffs.size <= EXACT_MAX_N else f"{draws} seeded draws")
            + "; CI: seeded percentile bootstrap of the mean difference over items")
    breakdown: dict[str, Any] = {
        "original": float(original.value),
        "mitigated": float(mitigated.value),
        "relative_change": relative_change(float(original.value), float(mitigated.value)),
        "n_pairs": int(diffs.size),
        "test": test,
    }
    if allow_non_mean:
        breakdown["item_scale_note"] = ("value is the mean difference of per-item scores, which need not be "
                                        "the difference of the two metric values")
    details = tuple(
        {"id": i, "prompt": o.get("prompt", ""), "score": float(d), "original": float(a), "mitigated": float(b)}
        for i, o, d, a, b in zip(ids, orig, diffs, s_orig, s_mit)
    )
    unit = f" ({original.scale})" if original.scale else ""
    scale = f"original − mitigated{unit}; > 0 = less biased after mitigation"
    return MetricResult(metric=name, value=float(diffs.mean()), ci_low=low, ci_high=high, n=int(diffs.size),
                        details=details, scale=scale, p_value=float(p), breakdown=breakdown)
