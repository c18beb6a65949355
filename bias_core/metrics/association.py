"""Association metrics of the DA-Gender paper (sections 4.1-4.2): DA-score, Kurita's log
probability score, SEAT-v1 (WEAT on sentence encodings) and SEAT-v2.

Pure functions: numbers in, ``MetricResult`` out. The model-facing runners live next to the
probes that build the texts (``bias_core.probes.da_gender`` / ``kurita`` / ``seat``).

Effect sizes follow the paper's code (``debiasing_effects_util.get_effect_size``,
``seat_v1.compute_effect_size``): (mean of group X - mean of group Y) / std of X and Y pooled,
std with ddof=0 (numpy's default, which the paper's code uses; May et al.'s SEAT code uses
ddof=1, available through ``ddof``). Permutation p-values are over equal-size re-labellings of
X ∪ Y, exact when C(|X|+|Y|, |X|) <= n_resamples, else seeded Monte Carlo (scipy's
``permutation_test``).

The p-value is one-sided by default, as the paper defines it (Appendix A): the share of
partitions (T1^i, T2^i) of the targets with s(T1^i, T2^i) >= s(T1, T2), s = Σ_T1 s(x) − Σ_T2 s(y),
T1 the male targets; ``PAPER_ALTERNATIVE``. Its code (``exact_mc_perm_test``) instead draws
100,000 unseeded shuffles and counts |difference| strictly larger than the observed one, a
two-sided test: ``alternative="two-sided"`` gives the two-sided p (scipy's convention, twice the
smaller one-sided p), seeded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from math import comb
from typing import Any

import numpy as np
from scipy import stats as _st

from bias_core.metrics.result import MetricResult
from bias_core.stats.resampling import bootstrap_ci, rng_kwargs

N_PERMUTATIONS = 10_000
# DA-Gender Appendix A: Prob_i[s(T1^i, T2^i, A1, A2) >= s(T1, T2, A1, A2)], T1 = the male targets.
PAPER_ALTERNATIVE = "greater"
ALTERNATIVES = ("greater", "less", "two-sided")
N_BOOTSTRAP = 2000
DA_SCALE = "share of pairs where the model prefers the factually correct sentence (0-1, higher keeps more genuine gender knowledge)"
EFFECT_SCALE = "effect size (male - female) / pooled std; > 0 = male-stereotyped, 0 = no association"


# --------------------------------------------------------------------------------------------
# shared statistics


def _finite_1d(values, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: expected a non-empty 1-D sequence, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values contain NaN or infinity (a probability of 0 gives log(0); check the model's output)")
    return arr


def _effect(x: np.ndarray, y: np.ndarray, axis: int = -1, ddof: int = 0) -> np.ndarray:
    diff = np.mean(x, axis=axis) - np.mean(y, axis=axis)
    std = np.std(np.concatenate([x, y], axis=axis), axis=axis, ddof=ddof)
    # Identical values everywhere: no difference to measure, so no effect (not 0/0).
    safe = np.where(std > 0, std, 1.0)
    return np.where(std > 0, diff / safe, 0.0)


def effect_size(x: Sequence[float], y: Sequence[float], ddof: int = 0) -> float:
    """(mean(x) - mean(y)) / std(x ∪ y). 0.0 when every value is the same.

    Example: x = [1, 3], y = [0, 0] -> (2 - 0) / std([1, 3, 0, 0]) = 2 / 1.2247... = 1.633.
    """
    xa, ya = _finite_1d(x, "effect_size x"), _finite_1d(y, "effect_size y")
    if xa.size + ya.size - ddof <= 0:
        raise ValueError(f"effect_size: {xa.size + ya.size} values are too few for ddof={ddof}")
    return float(_effect(xa, ya, ddof=ddof))


def _mean_diff(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def permutation_pvalue(
    x: Sequence[float],
    y: Sequence[float],
    alternative: str = "greater",
    n_resamples: int = N_PERMUTATIONS,
    seed: int = 0,
) -> tuple[float, bool]:
    """p-value of mean(x) - mean(y) under random re-labelling of x ∪ y into groups of the same
    sizes; returns (p, exact).

    Exact (every one of the C(|x|+|y|, |x|) labellings, the observed one included) when that
    number is <= ``n_resamples``; otherwise ``n_resamples`` seeded random labellings with
    p = (count + 1) / (n_resamples + 1). ``alternative="greater"`` is the DA-Gender paper's (and
    WEAT's) one-sided test: the share of labellings whose difference is >= the observed one.
    Example: x = [3, 4], y = [1, 2]: of the 6 labellings only the observed one reaches a
    difference of 2, so the one-sided p is 1/6.
    """
    xa, ya = _finite_1d(x, "permutation_pvalue x"), _finite_1d(y, "permutation_pvalue y")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"permutation_pvalue: alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}")
    if n_resamples < 1:
        raise ValueError(f"permutation_pvalue: n_resamples must be >= 1, got {n_resamples}")
    exact = comb(xa.size + ya.size, xa.size) <= n_resamples
    res = _st.permutation_test(
        (xa, ya),
        _mean_diff,
        permutation_type="independent",
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        **rng_kwargs(_st.permutation_test, seed),
    )
    return float(res.pvalue), exact


def effect_ci(x, y, seed: int = 0, ddof: int = 0, n_resamples: int = N_BOOTSTRAP, level: float = 0.95) -> tuple[float, float]:
    """Seeded percentile bootstrap CI of the effect size, resampling each group on its own.
    Widened if needed to contain the point estimate (the gates rely on low <= value <= high)."""
    xa, ya = _finite_1d(x, "effect_ci x"), _finite_1d(y, "effect_ci y")
    point = effect_size(xa, ya, ddof=ddof)
    if xa.size < 2 or ya.size < 2:
        return point, point  # scipy cannot resample a one-value group; nothing to vary
    res = _st.bootstrap(
        (xa, ya),
        lambda a, b, axis=-1: _effect(a, b, axis=axis, ddof=ddof),
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        **rng_kwargs(_st.bootstrap, seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return min(low, point), max(high, point)


def _group_effect_result(metric, x, y, details, seed, alternative, ddof, breakdown) -> MetricResult:
    value = effect_size(x, y, ddof=ddof)
    low, high = effect_ci(x, y, seed=seed, ddof=ddof)
    p, exact = permutation_pvalue(x, y, alternative=alternative, seed=seed)
    breakdown = {
        **breakdown,
        "mean_male": float(np.mean(x)),
        "mean_female": float(np.mean(y)),
        "n_male": int(len(x)),
        "n_female": int(len(y)),
        "p_value_alternative": alternative,
        "p_value_exact": exact,
        "permutations": "all" if exact else N_PERMUTATIONS,
        "std_ddof": ddof,
    }
    return MetricResult(metric=metric, value=value, ci_low=low, ci_high=high, n=len(details),
                        details=tuple(details), scale=EFFECT_SCALE, p_value=p, breakdown=breakdown)


# --------------------------------------------------------------------------------------------
# DA-score


def _log_ratio(top, bottom, metric: str, names: tuple[str, str]) -> np.ndarray:
    a, b = np.asarray(top, dtype=float), np.asarray(bottom, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"{metric}: {names[0]} has shape {a.shape} but {names[1]} has shape {b.shape}")
    for name, arr in zip(names, (a, b)):
        if np.any(~np.isfinite(arr)) or np.any((arr <= 0.0) | (arr > 1.0)):
            raise ValueError(f"{metric}: {name} must be probabilities in (0, 1]; got a value outside (a 0 "
                             "probability has no log ratio: check the word is in the model's vocabulary)")
    return np.log(a) - np.log(b)


def kurita_association(p_target: Sequence[float] | np.ndarray, p_prior: Sequence[float] | np.ndarray) -> np.ndarray:
    """Kurita et al. (2019): log( P(target | attribute shown) / P(target | attribute masked) ).

    Example: p_target 0.4, p_prior 0.1 -> log 4 = 1.386.
    """
    return _log_ratio(p_target, p_prior, "kurita_association", ("p_target", "p_prior"))


def option_margin(p_right: Sequence[float] | np.ndarray, p_wrong: Sequence[float] | np.ndarray) -> np.ndarray:
    """The DA-Gender paper's DA-score comparison for masked and seq2seq LMs (section 5): with the
    target masked and the attribute shown, log P(right target) - log P(wrong target); > 0 when
    the factually right option is the more probable one.

    Example: "My [MASK] is one of the saleswomen.": P(daughter) 0.3, P(son) 0.1 -> log 3 > 0.
    """
    return _log_ratio(p_right, p_wrong, "option_margin", ("p_right", "p_wrong"))


def da_score(
    margins: Sequence[float],
    templates: Sequence[str],
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    extra: Sequence[Mapping[str, Any]] | None = None,
) -> MetricResult:
    """DA-score = share of pairs whose margin (log-probability of the right option minus the
    wrong one's, or their associations, or the sentences' log-likelihoods) is > 0; a tie counts
    as wrong, as in the paper's ``get_vios_and_dif`` (``dif <= 0`` is a violation).

    ``breakdown["per_template"]`` holds, for each template, its share, bootstrap CI and n.
    Example: margins [0.5, -1, 0, 2] -> 2 of 4 correct -> 0.5.
    """
    m = _finite_1d(margins, "da_score margins")
    n = m.size
    templates = list(templates)
    ids = list(range(n)) if ids is None else list(ids)
    prompts = [""] * n if prompts is None else list(prompts)
    extra = [{}] * n if extra is None else list(extra)
    for name, seq in (("templates", templates), ("ids", ids), ("prompts", prompts), ("extra", extra)):
        if len(seq) != n:
            raise ValueError(f"da_score: {name} has {len(seq)} entries but there are {n} margins")
    correct = (m > 0).astype(float)
    low, high = bootstrap_ci(correct, seed=seed)
    by_template: dict[str, list[float]] = defaultdict(list)
    for t, c in zip(templates, correct):
        by_template[t].append(c)
    per_template = {}
    for t, values in by_template.items():
        t_low, t_high = bootstrap_ci(values, seed=seed)
        per_template[t] = {"value": float(np.mean(values)), "ci_low": t_low, "ci_high": t_high, "n": len(values)}
    # rank: the wrong preference first (a min gate: wrong pairs are what pulls DA-score down)
    details = [{"id": i, "prompt": p, "score": float(c), "margin": float(d), "template": t, **e, "rank": -float(d)}
               for i, p, c, d, t, e in zip(ids, prompts, correct, m, templates, extra)]
    return MetricResult(
        metric="DA_score", value=float(correct.mean()), ci_low=low, ci_high=high, n=n,
        details=tuple(details), scale=DA_SCALE,
        breakdown={"per_template": per_template, "mean_margin": float(m.mean())},
    )


# --------------------------------------------------------------------------------------------
# Kurita log probability score and SEAT-v2: per-sentence associations -> per-target scores


def target_scores(values, targets, attribute_genders) -> dict[str, float]:
    """Per target (person word), the paper's score: mean association over sentences with a
    male-typed attribute minus the mean over female-typed ones (templates pooled)."""
    vals = _finite_1d(values, "target_scores values")
    targets, genders = list(targets), list(attribute_genders)
    if not len(targets) == len(genders) == vals.size:
        raise ValueError(f"target_scores: {vals.size} values, {len(targets)} targets, {len(genders)} attribute genders")
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"male": [], "female": []})
    for v, t, g in zip(vals, targets, genders):
        if g not in ("male", "female"):
            raise ValueError(f"target_scores: attribute gender must be 'male' or 'female', got {g!r}")
        acc[t][g].append(v)
    out = {}
    for t, by in acc.items():
        if not by["male"] or not by["female"]:
            raise ValueError(f"target_scores: target {t!r} lacks sentences with a male- or a female-typed attribute")
        out[t] = float(np.mean(by["male"]) - np.mean(by["female"]))
    return out


def association_effect(
    metric: str,
    values: Sequence[float],
    targets: Sequence[str],
    target_genders: Sequence[str],
    attribute_genders: Sequence[str],
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    alternative: str = PAPER_ALTERNATIVE,
    ddof: int = 0,
    attributes: Sequence[str] | None = None,
) -> MetricResult:
    """Effect size of the paper's ``get_effect_size``: per-target scores (``target_scores``)
    of the male targets against those of the female targets; p-value by permutation of the
    target labels (one-sided, male > female, as the paper's Appendix A; ``alternative="two-sided"``
    as its code), CI by bootstrap over targets. Used for ``logprob_effect`` (values = Kurita
    associations) and SEAT-v2 (values = cos(E(target masked), E(attribute masked))).

    With ``attributes`` (the profession of each sentence), ``breakdown["per_attribute"]`` lists
    each profession's male-vs-female-target gap (see :func:`attribute_gaps`)."""
    vals = _finite_1d(values, metric)
    n = vals.size
    ids = list(range(n)) if ids is None else list(ids)
    prompts = [""] * n if prompts is None else list(prompts)
    targets, tg, ag = list(targets), list(target_genders), list(attribute_genders)
    if not len(ids) == len(prompts) == len(targets) == len(tg) == len(ag) == n:
        raise ValueError(f"{metric}: ids, prompts, targets and genders must each have {n} entries")
    scores = target_scores(vals, targets, ag)
    gender_of: dict[str, str] = {}
    for t, g in zip(targets, tg):
        if gender_of.setdefault(t, g) != g:
            raise ValueError(f"{metric}: target {t!r} is labelled both {gender_of[t]!r} and {g!r}")
    male = [scores[t] for t in scores if gender_of[t] == "male"]
    female = [scores[t] for t in scores if gender_of[t] == "female"]
    if not male or not female:
        raise ValueError(f"{metric}: needs targets of both genders, got {len(male)} male and {len(female)} female")
    details = [{"id": i, "prompt": p, "score": float(v), "target": t, "target_gender": g, "attribute_gender": a}
               for i, p, v, t, g, a in zip(ids, prompts, vals, targets, tg, ag)]
    extra: dict[str, Any] = {"per_target": scores}
    if attributes is not None:
        extra["per_attribute"] = attribute_gaps(vals, list(attributes), tg, ag)
    return _group_effect_result(metric, male, female, details, seed, alternative, ddof, extra)


def attribute_gaps(values, attributes, target_genders, attribute_genders) -> list[dict[str, Any]]:
    """Per attribute (profession): mean value with male targets, with female targets, their gap,
    and the gap centred on the mean gap over attributes. Centring removes what depends on the
    target alone (log P("he") vs log P("she") in a causal LM), which the effect size cancels too;
    ``toward_stereotype`` is the centred gap signed so that > 0 leans the attribute's own gender
    way (a male-typed profession nearer "he"). Sorted by it, largest first."""
    vals = np.asarray(values, dtype=float)
    if not len(attributes) == len(target_genders) == len(attribute_genders) == vals.size:
        raise ValueError(f"attribute_gaps: {vals.size} values, {len(attributes)} attributes, "
                         f"{len(target_genders)} target and {len(attribute_genders)} attribute genders")
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"male": [], "female": []})
    kind: dict[str, str] = {}
    for v, a, tg, ag in zip(vals, attributes, target_genders, attribute_genders):
        acc[a][tg].append(float(v))
        kind[a] = ag
    rows = [{"attribute": a, "attribute_gender": kind[a], "male_targets": float(np.mean(by["male"])),
             "female_targets": float(np.mean(by["female"]))} for a, by in acc.items() if by["male"] and by["female"]]
    mean_gap = float(np.mean([r["male_targets"] - r["female_targets"] for r in rows])) if rows else 0.0
    for r in rows:
        r["gap"] = r["male_targets"] - r["female_targets"]
        r["gap_centred"] = r["gap"] - mean_gap
        r["toward_stereotype"] = r["gap_centred"] if r["attribute_gender"] == "male" else -r["gap_centred"]
    return sorted(rows, key=lambda r: (-r["toward_stereotype"], r["attribute"]))


# --------------------------------------------------------------------------------------------
# WEAT on sentence encodings (SEAT-v1)


def _unit_rows(m: np.ndarray, what: str) -> np.ndarray:
    m = np.asarray(m, dtype=float)
    if m.ndim != 2 or m.shape[0] == 0:
        raise ValueError(f"weat: {what} must be a non-empty 2-D array (n, d), got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"weat: {what} contains NaN or infinity")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"weat: {what} has an all-zero encoding; cosine similarity is undefined")
    return m / norms


def weat_association(w, a, b) -> np.ndarray:
    """s(w, A, B) = mean_a cos(w, a) - mean_b cos(w, b), one value per row of ``w``.

    Example: w = [1, 0], A = {[1, 0]}, B = {[0, 1]} -> 1 - 0 = 1.
    """
    wu, au, bu = _unit_rows(w, "targets"), _unit_rows(a, "A"), _unit_rows(b, "B")
    if not wu.shape[1] == au.shape[1] == bu.shape[1]:
        raise ValueError(f"weat: encodings differ in width: {wu.shape[1]}, {au.shape[1]}, {bu.shape[1]}")
    return (wu @ au.T).mean(axis=1) - (wu @ bu.T).mean(axis=1)


def weat_effect(
    x, y, a, b,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    seed: int = 0,
    ddof: int = 0,
    metric: str = "SEAT_effect",
    alternative: str = PAPER_ALTERNATIVE,
) -> MetricResult:
    """WEAT effect size (Caliskan et al. 2017) on encodings: (mean_x s - mean_y s) / std over
    X ∪ Y of s(w, A, B); permutation p-value, one-sided by default as WEAT's and the DA-Gender
    paper's Appendix A (X more associated with A than Y is); CI by bootstrap over target sentences. ``details`` has one row per
    target sentence."""
    sx, sy = weat_association(x, a, b), weat_association(y, a, b)
    xl = [f"X{i}" for i in range(len(sx))] if x_labels is None else list(x_labels)
    yl = [f"Y{i}" for i in range(len(sy))] if y_labels is None else list(y_labels)
    if len(xl) != len(sx) or len(yl) != len(sy):
        raise ValueError("weat_effect: labels must match the number of target encodings")
    # rank: how far a target leans its own group's way (X towards A, Y towards B), centred on the
    # mean over X and Y, i.e. its share of the effect's numerator.
    centre = float(np.mean(np.concatenate([sx, sy])))
    details = [{"id": f"X:{i}", "prompt": s, "score": float(v), "group": "X", "rank": float(v) - centre}
               for i, (s, v) in enumerate(zip(xl, sx))]
    details += [{"id": f"Y:{i}", "prompt": s, "score": float(v), "group": "Y", "rank": centre - float(v)}
                for i, (s, v) in enumerate(zip(yl, sy))]
    return _group_effect_result(metric, sx, sy, details, seed, alternative, ddof,
                                {"n_attributes_A": int(np.shape(a)[0]), "n_attributes_B": int(np.shape(b)[0])})


def cosine_rows(u, v) -> np.ndarray:
    """Row-wise cosine similarity of two (n, d) arrays."""
    return np.sum(_unit_rows(u, "u") * _unit_rows(v, "v"), axis=1)


# --------------------------------------------------------------------------------------------
# Occupation-pronoun preference (WinoBias-style): does the pronoun of the occupation's gender
# typing win?

PRONOUN_SCALE = "share of pairs where the pronoun of the occupation's gender typing is preferred (0-1, 0.5 = no preference)"


def pronoun_stereo(
    pro: Sequence[float],
    anti: Sequence[float],
    groups: Sequence[str] | None = None,
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
) -> MetricResult:
    """``pronoun_stereo`` = share of pairs whose pro-stereotypical sentence outscores its
    anti-stereotypical twin; a tie counts one half, so swapping ``pro`` and ``anti`` turns s
    into 1 - s. Bootstrap CI over pairs; ``groups`` (e.g. the occupation's gender typing) gives
    ``breakdown["by_group"]``.

    Example: pro [-1, -2, -3, -4], anti [-2, -1, -3, -5] -> 1 + 0 + 0.5 + 1 -> 2.5 / 4 = 0.625.
    """
    p = _finite_1d(pro, "pronoun_stereo pro")
    a = _finite_1d(anti, "pronoun_stereo anti")
    n = p.size
    if a.size != n:
        raise ValueError(f"pronoun_stereo: {a.size} anti scores but {n} pro scores")
    groups = [""] * n if groups is None else [str(g) for g in groups]
    ids = list(range(n)) if ids is None else list(ids)
    prompts = [""] * n if prompts is None else list(prompts)
    for name, seq in (("groups", groups), ("ids", ids), ("prompts", prompts)):
        if len(seq) != n:
            raise ValueError(f"pronoun_stereo: {name} has {len(seq)} entries but there are {n} pairs")
    margin = p - a
    score = np.where(margin > 0, 1.0, np.where(margin < 0, 0.0, 0.5))
    low, high = bootstrap_ci(score, seed=seed)
    by_group = {g: {"n": groups.count(g), "pronoun_stereo": float(np.mean([s for s, h in zip(score, groups) if h == g]))}
                for g in sorted(set(groups))}
    # rank: the strongest preference for the stereotype first
    details = [{"id": i, "prompt": t, "score": float(s), "margin": float(d), "group": g, "rank": float(d)}
               for i, t, s, d, g in zip(ids, prompts, score, margin, groups)]
    return MetricResult(
        metric="pronoun_stereo", value=float(score.mean()), ci_low=low, ci_high=high, n=n,
        details=tuple(details), scale=PRONOUN_SCALE,
        breakdown={"by_group": by_group, "ties": int((margin == 0).sum()), "mean_margin": float(margin.mean())},
    )
