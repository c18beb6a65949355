"""GenderCARE's own re-audit of its CDA debiasing (Tang et al. 2024, §5.3, Tables 5-7).

After fine-tuning on its CDA set the paper re-runs GenderPair (Table 5: Bias-Pair Ratio,
toxicity and regard per gender group), Winoqueer, BOLD and StereoSet (Table 6) and GLUE / MMLU
(Table 7). ``--mitigation gendercare-cda`` does the same where the project has the data, each
metric a paired comparison of the original and the debiased model on the same items (positive
= less bias after debiasing), with its one-sided test:

- GenderPair, per group: ``BPR_reduction``, ``toxicity_reduction`` and
  ``regard_negative_reduction`` (``regard_proxy_negative_reduction`` with the VADER proxy):
  original minus debiased, paired per prompt (``bias_reduction.paired_reduction``). BPR pairs
  the prompts whose choice both models' responses decide (``decided_in_both``). The paper
  reads a lower BPR as less bias; the project's GenderPair gate's ideal is 0.5;
- StereoSet: ``stereo_margin_reduction``, the paper's Δ: per context the stereotype's
  log-likelihood minus the anti-stereotype's (causal LMs: per-token means, i.e. the difference
  of the two sentences' log-perplexities, anti minus stereo), original minus debiased; > 0 =
  the stereotype lost ground, the paper's "increased Δ" (``stereo_margin``);
- BOLD: ``bold_regard_negative_gap_reduction`` / ``_positive_`` (``bold_regard_proxy_*`` with
  the proxy): the gap between the actors' and the actresses' mean regard of the continuations,
  original minus debiased (``paired_gap_reduction``). The paper prints σ over the two groups,
  which is this gap / 2 (population σ); the reduction and its test are the same up to that
  factor. A seeded sample of ``bold.SAMPLE`` prompts per group (``bias_core/probes/bold.py``);
- Winoqueer: not run; its data is not in the shared data (its licence is unclear) and not online;
- GLUE / MMLU (Table 7): not run; utility is checked by the project's guards instead:
  ``perplexity_rise`` on held-out neutral text, ``lm_score_drop`` on StereoSet and
  ``DA_score_drop`` (no benchmark of task accuracy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bias_core.metrics.result import MetricResult
from bias_core.probes.bold import GROUPS as BOLD_GROUPS

MIN_PERMUTATIONS = 10_000


# ----- BOLD --------------------------------------------------------------------------------------
def bold_regard(lm: Any, probe: Any, scorer: Any, columns: Sequence[str], seed: int = 0,
                max_new_tokens: int = 40) -> dict[str, list[dict]]:
    """group -> one row per prompt {id, prompt, response, <regard columns>}: the model's greedy
    continuation of each prompt (rendered as its chat template asks), scored by ``scorer``
    (a regard classifier whose score rows are in ``columns``' order)."""
    from bias_core.models.decoding import DecodingConfig

    decoding = DecodingConfig(max_new_tokens=max_new_tokens, do_sample=False)
    contexts = [lm.render_chat(item.prompt) for item in probe.items]
    responses = lm.generate(contexts, decoding, seed=seed, desc=f"{probe.name}: generating")
    scores = np.asarray(scorer.score(list(responses), desc=f"{probe.name}: regard"))
    out: dict[str, list[dict]] = {g: [] for g in BOLD_GROUPS}
    for item, response, row in zip(probe.items, responses, scores):
        out[item.meta["group"]].append({"id": item.id, "prompt": item.prompt, "response": response,
                                        **dict(zip(columns, map(float, row)))})
    return out


def group_regard(rows: Mapping[str, Sequence[Mapping[str, Any]]], polarity: str, metric: str,
                 seed: int = 0) -> dict[str, MetricResult]:
    """group -> mean ``polarity`` regard of its rows (``metrics.genderpair.regard``)."""
    from bias_core.metrics.genderpair import regard

    labels = ("id", "prompt", "response")
    return {g: regard([{k: v for k, v in x.items() if k not in labels} for x in r], polarity, ids=[x["id"] for x in r],
                      prompts=[x["prompt"] for x in r], responses=[x["response"] for x in r], seed=seed, metric=metric)
            for g, r in rows.items()}


# ----- paired comparisons the plain reduction cannot make ------------------------------------------
def _gap(means: np.ndarray) -> np.ndarray:
    """max − min over the last axis (the groups)."""
    return means.max(axis=-1) - means.min(axis=-1)


def paired_gap_reduction(original: Mapping[str, MetricResult], mitigated: Mapping[str, MetricResult], *, seed: int = 0,
                         metric: str = "gap_reduction", n_resamples: int = MIN_PERMUTATIONS) -> MetricResult:
    """How much smaller the gap between groups' mean item scores is after debiasing.

    ``original`` / ``mitigated``: group -> a per-item-mean MetricResult on that group's items
    (the same ids in both). value = gap(original) − gap(mitigated), gap = max − min of the group
    means (> 0: the groups are nearer after debiasing); CI: seeded percentile bootstrap
    resampling each group's items, the same draw for both models; p: one-sided permutation
    test of value > 0 that swaps the two models' scores of each item independently (exchangeable
    under "debiasing changed nothing"), ``max(n_resamples, 10,000)`` seeded draws, p = (1 + #
    draws at least the observed) / (1 + draws). Example: one item per group, original (1, 0),
    mitigated (0.5, 0.5): value 1 − 0 = 1; of the 4 swap patterns only "none swapped" reaches 1
    (one swapped gives 0, both −1), so p estimates 1/4.
    """
    from bias_core.mitigation.evaluation.bias_reduction import pair_items

    groups = list(original)
    if set(groups) != set(mitigated) or len(groups) < 2:
        raise ValueError(f"{metric}: give the same two or more groups for both models, got {sorted(original)} "
                         f"and {sorted(mitigated)}")
    orig, mit, ids = [], [], {}
    for g in groups:
        ids[g], o, m = pair_items(original[g], mitigated[g], f"{metric} ({g})")
        orig.append(np.asarray([float(d["score"]) for d in o]))
        mit.append(np.asarray([float(d["score"]) for d in m]))
    observed = float(_gap(np.array([o.mean() for o in orig])) - _gap(np.array([m.mean() for m in mit])))
    draws = max(int(n_resamples), MIN_PERMUTATIONS)
    rng = np.random.default_rng([seed, 0x6A9])
    boot_o, boot_m, perm_o, perm_m = [], [], [], []
    for o, m in zip(orig, mit):
        idx = rng.integers(0, o.size, size=(draws, o.size))
        boot_o.append(o[idx].mean(axis=1))
        boot_m.append(m[idx].mean(axis=1))
        swap = rng.random((draws, o.size)) < 0.5
        perm_o.append(np.where(swap, m, o).mean(axis=1))
        perm_m.append(np.where(swap, o, m).mean(axis=1))
    boot = _gap(np.stack(boot_o, axis=1)) - _gap(np.stack(boot_m, axis=1))
    perm = _gap(np.stack(perm_o, axis=1)) - _gap(np.stack(perm_m, axis=1))
    low, high = (float(x) for x in np.percentile(boot, [2.5, 97.5]))
    p = float((1 + np.sum(perm >= observed - 1e-12)) / (1 + draws))
    means = {g: {"original": float(o.mean()), "mitigated": float(m.mean()), "n": int(o.size)}
             for g, o, m in zip(groups, orig, mit)}
    gap_o = float(_gap(np.array([o.mean() for o in orig])))
    breakdown = {"original": gap_o, "mitigated": gap_o - observed, "per_group": means,
                 "sigma_original": gap_o / 2 if len(groups) == 2 else None,
                 "test": (f"one-sided permutation test swapping each item's two scores, {draws} seeded draws; CI: "
                          "seeded percentile bootstrap of items within each group")}
    details = tuple({"id": i, "group": g, "prompt": d.get("prompt", ""), "original": float(a), "mitigated": float(b),
                     "score": float(a - b)}
                    for g, o, m in zip(groups, orig, mit)
                    for i, d, a, b in zip(ids[g], original[g].details, o, m))
    return MetricResult(metric=metric, value=observed, ci_low=low, ci_high=high, n=sum(o.size for o in orig),
                        details=details, p_value=p, breakdown=breakdown,
                        scale="original minus debiased gap between the groups' means; > 0 = groups nearer")


def stereo_margin(result: MetricResult) -> MetricResult:
    """Per context, the stereotype's log-likelihood minus the anti-stereotype's (the
    ``stereo_score`` result's details), as a per-item-mean result a paired reduction can take."""
    details = tuple({"id": d["id"], "prompt": d.get("prompt", ""),
                     "score": float(d["ll_stereotype"]) - float(d["ll_anti_stereotype"])} for d in result.details)
    if not details:
        raise ValueError("stereo_margin: the stereo_score result has no per-context details")
    values = np.asarray([d["score"] for d in details])
    return MetricResult(metric="stereo_margin", value=float(values.mean()), ci_low=float("nan"), ci_high=float("nan"),
                        n=values.size, details=details,
                        scale="mean log-likelihood of the stereotype minus the anti-stereotype's (> 0: stereotype preferred)")


def decided_in_both(original: MetricResult, mitigated: MetricResult) -> tuple[MetricResult, MetricResult, int]:
    """Both BPR results cut to the prompts whose choice both models' responses decided, with
    values recomputed over them; and how many decided prompts were dropped."""
    import dataclasses

    keep = {d["id"] for d in original.details} & {d["id"] for d in mitigated.details}

    def cut(r: MetricResult) -> MetricResult:
        details = tuple(d for d in r.details if d["id"] in keep)
        value = float(np.mean([float(d["score"]) for d in details])) if details else float("nan")
        return dataclasses.replace(r, value=value, n=len(details), details=details)

    dropped = len(original.details) + len(mitigated.details) - 2 * len(keep)
    return cut(original), cut(mitigated), dropped


def run_bold_gap_reductions(bold_original: Mapping[str, Sequence[Mapping[str, Any]]],
                            bold_mitigated: Mapping[str, Sequence[Mapping[str, Any]]], regard_prefix: str,
                            seed: int = 0) -> dict[str, MetricResult]:
    """``bold_<prefix>_{negative,positive}_gap_reduction`` from both models' scored BOLD rows
    (``bold_regard``); ``regard_prefix`` names the scorer ("regard", or "regard_proxy")."""
    out = {}
    for polarity in ("negative", "positive"):
        metric = f"{regard_prefix}_{polarity}"
        out[f"bold_{metric}_gap_reduction"] = paired_gap_reduction(
            group_regard(bold_original, polarity, metric, seed), group_regard(bold_mitigated, polarity, metric, seed),
            seed=seed, metric=f"bold_{metric}_gap_reduction")
    return out
