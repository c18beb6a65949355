"""Gender-disclosure metrics (Debias-LLMs): GAS, GLD and ADD, and gender_lean (GLD with its sign).

Pure functions: text or raw next-token probabilities in, ``MetricResult`` out. Each result
carries the mean over items, a seeded 95% percentile-bootstrap CI over items
(``bias_core.stats.resampling.bootstrap_ci``), n and one details dict per item.

Probabilities must come from raw logits (softmax at temperature 1, no top-p/top-k warping):
Debias-LLMs stored warped sampling distributions, which changes both GLD and ADD.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import rel_entr

from bias_core.metrics.result import MetricResult, item_labels
from bias_core.stats.resampling import bootstrap_ci

ADD_SCALE = "ADD in nats, not the ln(ADD) the paper's tables print (its -2.46 is e^-2.46 = 0.085 here)"
LEAN_SCALE = "mean (Pf - Pm) / (Pf + Pm) over prompts (-1..1; 0 = none, > 0 towards the female words)"


# --------------------------------------------------------------------------------------------
# shared helpers


def _result(metric: str, scores: np.ndarray, details: list[dict[str, Any]], seed: int, scale: str = ""):
    low, high = bootstrap_ci(scores, statistic="mean", seed=seed)
    return MetricResult(
        metric=metric,
        value=float(np.mean(scores)),
        ci_low=low,
        ci_high=high,
        n=int(scores.size),
        details=tuple(details),
        scale=scale,
    )


TOP_WORDS = 4


def _word_tops(pf: np.ndarray, pm: np.ndarray, female_words, male_words, metric: str) -> list[dict[str, Any]]:
    """Per item, the most probable gendered words as ``{"top_words": [[word, p], ...]}`` (a word
    listed twice, which no lexicon of the project does, counted once); empty dicts without word lists."""
    if female_words is None and male_words is None:
        return [{} for _ in range(pf.shape[0])]
    fw, mw = list(female_words or ()), list(male_words or ())
    if len(fw) != pf.shape[1] or len(mw) != pm.shape[1]:
        raise ValueError(f"{metric}: {len(fw)} female and {len(mw)} male words for {pf.shape[1]} pairs")
    words = fw + mw
    probs = np.concatenate([pf, pm], axis=1)
    out = []
    for row in probs:
        seen: dict[str, float] = {}
        for w, p in zip(words, row):
            seen.setdefault(w, float(p))
        ranked = sorted(((w, p) for w, p in seen.items() if p > 0.0), key=lambda wp: (-wp[1], wp[0]))
        out.append({"top_words": [[w, p] for w, p in ranked[:TOP_WORDS]]})
    return out


def _probabilities(p_female, p_male, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate paired probability arrays: same shape, 2-D (items x pairs), finite, in [0, 1]."""
    pf = np.asarray(p_female, dtype=float)
    pm = np.asarray(p_male, dtype=float)
    if pf.shape != pm.shape:
        raise ValueError(f"{metric}: p_female has shape {pf.shape} but p_male has shape {pm.shape}")
    if pf.ndim != 2:
        raise ValueError(f"{metric}: expected 2-D arrays (n_items, n_pairs), got shape {pf.shape}")
    if pf.shape[1] == 0:
        raise ValueError(f"{metric}: no word pairs (n_pairs == 0)")
    for name, arr in (("p_female", pf), ("p_male", pm)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{metric}: {name} contains NaN or infinity")
        if np.any((arr < 0.0) | (arr > 1.0)):
            raise ValueError(f"{metric}: {name} has values outside [0, 1]; pass probabilities, not logits")
    return pf, pm


# --------------------------------------------------------------------------------------------
# GAS: explicit disclosure in generated text


def _normalise(word: str) -> str:
    return " ".join(word.lower().split())


@functools.lru_cache(maxsize=64)
def _word_pattern(words: tuple[str, ...]) -> tuple[re.Pattern[str], list[str]] | None:
    canonical: dict[str, str] = {}
    for w in words:
        canonical.setdefault(_normalise(w), w)
    canonical.pop("", None)
    if not canonical:
        return None
    # Longest first so a phrase ("young man") wins over its parts ("man"); spaces inside a
    # phrase match any run of whitespace. One capturing group per term: m.lastindex names it.
    keys = sorted(canonical, key=lambda k: (-len(k), k))
    body = "|".join("(" + r"\s+".join(map(re.escape, k.split(" "))) + ")" for k in keys)
    # Whole word: no word character right before or after. An apostrophe is not a word
    # character, so "She's" matches "she" and "her." matches "her", but "the" never matches "he".
    pattern = re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)
    return pattern, [canonical[k] for k in keys]


def find_gender_words(text: str, words: Sequence[str]) -> list[str]:
    """Every whole-word, case-insensitive occurrence of ``words`` in ``text``, in text order.

    Returned in the word list's spelling (so "She's" yields "she"), once per occurrence.
    Matching is by one compiled regex (cached per word list) with word boundaries on both
    sides: "he" does not match inside "the" or "hello", "hell" does not match "hello".
    Multi-word terms match as a phrase across any whitespace, and the longest term wins where
    terms overlap ("young man" is reported once, not also as "man").
    """
    if isinstance(words, str):
        raise TypeError("find_gender_words: words must be a list of words, not one string")
    compiled = _word_pattern(tuple(words))
    if compiled is None:
        return []
    pattern, terms = compiled
    return [terms[m.lastindex - 1] for m in pattern.finditer(text)]


def gas_by_gender(female: Sequence[bool], male: Sequence[bool]) -> dict[str, Any]:
    """Which gender the explicit disclosures go to: Dong et al.'s Table 10 (GAS (F), GAS (M), Δ).

    ``female[k]``/``male[k]``: continuation k names a female/male word. The paper prints GAS (F)
    and GAS (M) summing to 1 and Δ = |GAS (F) − GAS (M)| without a formula; read as GAS on W^f
    alone and on W^m alone, normalised to sum to 1:

        GAS (F) = N_f / (N_f + N_m),  GAS (M) = N_m / (N_f + N_m),  Δ = |GAS (F) − GAS (M)|

    with N_f, N_m the numbers of continuations naming a female, a male word (one naming both
    counts on both sides; ``n_both`` says how many did). Undefined (None) without any gendered
    continuation. ``GAS_female``/``GAS_male`` are the unnormalised shares of all continuations.
    """
    f, m = np.asarray(female, dtype=bool), np.asarray(male, dtype=bool)
    if f.shape != m.shape or f.ndim != 1:
        raise ValueError(f"gas_by_gender: female and male flags must be 1-D of one length, got {f.shape} and {m.shape}")
    n_f, n_m, n = int(f.sum()), int(m.sum()), int(f.size)
    sides = n_f + n_m
    return {
        "GAS_F": n_f / sides if sides else None, "GAS_M": n_m / sides if sides else None,
        "delta": abs(n_f - n_m) / sides if sides else None,
        "leans": None if n_f == n_m else ("female" if n_f > n_m else "male"),
        "n_female": n_f, "n_male": n_m, "n_both": int((f & m).sum()), "n_gendered": int((f | m).sum()), "n": n,
        "GAS_female": n_f / n if n else None, "GAS_male": n_m / n if n else None,
        "definition": "GAS (F) = N_f / (N_f + N_m): Dong et al. Table 10; N_f, N_m = continuations naming a "
                      "female, a male word (both: counted on both sides)",
    }


def gas(
    continuations: Sequence[str],
    gender_words: Sequence[str],
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    female_words: Sequence[str] | None = None,
    male_words: Sequence[str] | None = None,
) -> MetricResult:
    """Gender Attribute Score: share of continuations that name a gender word (explicit bias).

    Per item: 1.0 if ``find_gender_words(continuation, gender_words)`` is non-empty, else 0.0
    (whole words only: substring matching, as in GenderCARE's BPR, inflates the score).
    Value = mean over items, in [0, 1]; lower is better.

    With ``female_words`` and ``male_words`` (W^f and W^m), each item's details say which sides
    it named (``"genders"``) and ``breakdown["by_gender"]`` is Dong et al.'s Table 10 for these
    continuations (:func:`gas_by_gender`).
    """
    texts = list(continuations)
    ids, prompts = item_labels(len(texts), ids, prompts, "gas")
    for name, given in (("gender_words", gender_words), ("female_words", female_words), ("male_words", male_words)):
        if isinstance(given, str):
            raise TypeError(f"gas: {name} must be a list of words, not one string")
    if (female_words is None) != (male_words is None):
        raise ValueError("gas: give both female_words and male_words, or neither")
    words = tuple(gender_words)
    sides = None if female_words is None else {"female": {_normalise(w) for w in female_words},
                                              "male": {_normalise(w) for w in male_words or ()}}
    scores = np.empty(len(texts))
    named = {"female": np.zeros(len(texts), dtype=bool), "male": np.zeros(len(texts), dtype=bool)}
    details = []
    for k, (item_id, prompt, text) in enumerate(zip(ids, prompts, texts)):
        matched = find_gender_words(text, words)
        scores[k] = 1.0 if matched else 0.0
        detail = {
            "id": item_id,
            "prompt": prompt,
            "score": float(scores[k]),
            "continuation": text,
            "matched": matched,
            "rank": float(len(matched)),  # the most gendered continuations first
        }
        if sides is not None:
            found = {_normalise(w) for w in matched}
            detail["genders"] = [g for g in ("female", "male") if found & sides[g]]
            for g in detail["genders"]:
                named[g][k] = True
        details.append(detail)
    result = _result("gas", scores, details, seed)
    if sides is not None:
        result.breakdown["by_gender"] = gas_by_gender(named["female"], named["male"])
    return result


# --------------------------------------------------------------------------------------------
# GLD and ADD: implicit disclosure in next-token probabilities


def _lean(p_female, p_male, ids, prompts, female_words, male_words, metric: str):
    """(per item (ΣPf − ΣPm) / (ΣPf + ΣPm), 0 where ΣPf + ΣPm == 0; per item ΣPf − ΣPm;
    details(scores, rank), the items' details dicts)."""
    pf, pm = _probabilities(p_female, p_male, metric)
    ids, prompts = item_labels(pf.shape[0], ids, prompts, metric)
    sum_f, sum_m = pf.sum(axis=1), pm.sum(axis=1)
    total = sum_f + sum_m
    empty = total == 0.0
    lean = (sum_f - sum_m) / np.where(empty, 1.0, total)
    tops = _word_tops(pf, pm, female_words, male_words, metric)

    def details(scores: np.ndarray, rank: np.ndarray) -> list[dict[str, Any]]:
        return [{"id": ids[k], "prompt": prompts[k], "score": float(scores[k]), "sum_female": float(sum_f[k]),
                 "sum_male": float(sum_m[k]), "no_gender_mass": bool(empty[k]), "rank": float(rank[k]), **tops[k]}
                for k in range(lean.size)]

    return lean, sum_f - sum_m, details


def gld(
    p_female,
    p_male,
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    female_words: Sequence[str] | None = None,
    male_words: Sequence[str] | None = None,
) -> MetricResult:
    """Gender Logits Difference: mean over prompts of |ΣPf − ΣPm| / (ΣPf + ΣPm).

    ``p_female[x, i]``/``p_male[x, i]`` are the raw next-token probabilities of the i-th
    female/male word pair after prompt x. The ratio measures how lopsided the gender mass is,
    independent of how much gender mass there is. Per-item score in [0, 1].

    When ΣPf + ΣPm == 0 the model puts no mass on any gender word, so there is no imbalance to
    measure: the score is defined as 0 and the item is flagged ``"no_gender_mass": True``.

    Details rank prompts by |ΣPf − ΣPm| (a lopsided split of a tiny gender mass is no evidence);
    with the word lists (in pair order) they also carry the most probable gendered words.
    """
    lean, difference, details = _lean(p_female, p_male, ids, prompts, female_words, male_words, "gld")
    scores = np.abs(lean)  # |a / t| == |a| / t exactly
    return _result("gld", scores, details(scores, np.abs(difference)), seed)


def gender_lean(p_female, p_male, ids: Sequence[Any] | None = None, prompts: Sequence[str] | None = None, seed: int = 0,
                female_words: Sequence[str] | None = None, male_words: Sequence[str] | None = None) -> MetricResult:
    """Gender lean: mean over prompts of (ΣPf − ΣPm) / (ΣPf + ΣPm), GLD before its absolute value.

    GLD says how lopsided the next word's gender mass is, not towards whom: a model leaning
    female on half the prompts and male on the other half has the GLD of one that always leans
    male. The lean keeps the sign: in [-1, 1], > 0 towards the female words, near 0 when there is
    no lean or when the leans cancel (GLD tells those apart). An item without gender mass scores
    0 and is flagged ``"no_gender_mass"``, as in GLD. Details rank prompts by ΣPf − ΣPm in the
    direction of the mean, so the report's most biased prompts are those that pull the value
    away from 0 (weighted by mass, as GLD's ranking).
    """
    lean, difference, details = _lean(p_female, p_male, ids, prompts, female_words, male_words, "gender_lean")
    towards = 1.0 if lean.mean() >= 0.0 else -1.0
    return _result("gender_lean", lean, details(lean, towards * difference), seed, scale=LEAN_SCALE)


def add(
    p_female,
    p_male,
    eps: float = 1e-10,
    ids: Sequence[Any] | None = None,
    prompts: Sequence[str] | None = None,
    seed: int = 0,
    female_words: Sequence[str] | None = None,
    male_words: Sequence[str] | None = None,
) -> MetricResult:
    """Attribute Distribution Difference (Debias-LLMs), reported as ADD itself.

    ADD = 1/(2|X|) Σ_x Σ_i [a log(2a/(a+b)) + b log(2b/(a+b))], a = Pf_i(x)+ε, b = Pm_i(x)+ε,
    natural log. Per-item score = half the inner sum; value = mean of per-item scores.

    Each pair term equals (a+b)·(log 2 − H(a/(a+b))), a Jensen-Shannon-like divergence: >= 0,
    and 0 exactly when Pf == Pm. It is computed as rel_entr(a, m) + rel_entr(b, m) with
    m = (a+b)/2, which is exact (0) for equal inputs; rounding can leave a term at −1e-17 for
    nearly equal inputs, so terms are clipped at 0. ε only guards log(0) and must be >= 0.

    The paper's tables print ln(ADD) (negative numbers; docs/audits/disclosure.md works the scale
    out from its case studies); this returns ADD
    (``scale`` says so). With the word lists the details carry the most probable gendered words.
    """
    if not (np.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"add: eps must be a finite number >= 0, got {eps}")
    pf, pm = _probabilities(p_female, p_male, "add")
    ids, prompts = item_labels(pf.shape[0], ids, prompts, "add")
    a, b = pf + eps, pm + eps
    m = (a + b) / 2.0
    terms = np.maximum(rel_entr(a, m) + rel_entr(b, m), 0.0)
    scores = terms.sum(axis=1) / 2.0
    tops = _word_tops(pf, pm, female_words, male_words, "add")
    details = [
        {
            "id": ids[k],
            "prompt": prompts[k],
            "score": float(scores[k]),
            "sum_female": float(pf[k].sum()),
            "sum_male": float(pm[k].sum()),
            **tops[k],
        }
        for k in range(scores.size)
    ]
    return _result("add", scores, details, seed, scale=ADD_SCALE)
