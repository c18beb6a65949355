"""Paired statistics of a candidate against a baseline on the same items (pure functions).

For one probe x metric, with c_i and b_i the two runs' values of item i and A(.) the metric's
aggregate of item values (mean, StereoSet's mean of per-term means, or HiringAn's mean of one
group's items minus the other's, times its scale):

- ``delta`` = A(c) - A(b), the change of the metric, with a paired bootstrap CI (items are
  resampled together, so both runs see the same resample; for a difference of two groups' means
  within each group, stratified, so every resample holds as many items of each as the pairs do);
- ``harm`` = how much worse the candidate is, in the metric's units: delta where lower is
  better, -delta where higher is better, and |A(c) - ideal| - |A(b) - ideal| where a value
  closer to an ideal is better. The non-inferiority gate judges harm's CI against a margin.

For an ideal metric the distance is taken of the aggregate, never averaged over items: a
stereo score of 50 made of half 0s and half 1s is ideal, while every 0/1 item lies 50 from it.
So harm's CI is a paired bootstrap of the aggregate distance difference over resampled items.

One-sided p-values test H0 "the candidate is no worse" against "worse" (harm > 0):

- lower/higher metrics with 0/1 items: exact McNemar, a binomial test on the discordant pairs
  (items worse in the candidate vs items better);
- other lower/higher metrics averaged by a plain mean: the paired sign-flip permutation test of
  mean(harm_i) (``bias_core.stats.resampling.paired_permutation_pvalue``; exact up to 16 items);
- ideal metrics and group means: the same permutation idea on the aggregate statistic, swapping
  the two runs' values within random pairs (for a plain mean this is exactly the sign flip).
  Exact enumeration up to 16 items, else seeded Monte Carlo with p = (count + 1) / (draws + 1).

``holm`` and ``benjamini_hochberg`` adjust a run's p-values for multiple comparisons.
Everything is seeded: the same input and seed give the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as _st

from bias_core.errors import MetricUndefined
from bias_core.stats.resampling import EXACT_MAX_N, _sign_patterns, bootstrap_ci, paired_permutation_pvalue

if TYPE_CHECKING:  # types only: stats never imports the gates at run time
    from bias_core.gating.regression.pairing import PairedItems
    from bias_core.gating.regression.spec import PairedSpec

N_PERMUTATIONS = 10_000
N_BOOTSTRAP = 2000
MOVED = 5  # items shown per direction
_CHUNK = 1 << 22  # values per permutation chunk (32 MB of float64)

# A statistic over many rows at once: (candidate values (k, n), baseline values (k, n)) -> (k,)
PairStatistic = Callable[[np.ndarray, np.ndarray], np.ndarray]


# ----- tests ----------------------------------------------------------------------------------------
def mcnemar_exact(worse: int, better: int) -> float:
    """One-sided exact McNemar p-value: P(X >= worse) for X ~ Binomial(worse + better, 1/2).

    ``worse``/``better`` count the discordant pairs (items whose 0/1 value changed for the worse
    or for the better); concordant pairs carry no information about the change. 1.0 when there
    are no discordant pairs.
    """
    if worse < 0 or better < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got worse={worse}, better={better}")
    n = int(worse) + int(better)
    if n == 0:
        return 1.0
    return float(_st.binomtest(int(worse), n, 0.5, alternative="greater").pvalue)


def swap_permutation_pvalue(candidate: np.ndarray, baseline: np.ndarray, statistic: PairStatistic,
                            n_resamples: int = N_PERMUTATIONS, seed: int = 0) -> float:
    """One-sided paired permutation p-value of ``statistic(candidate, baseline)`` being large.

    Under H0 the two values of each pair are exchangeable, so the null distribution comes from
    swapping them within each pair independently. Exact (all 2**n swap patterns, the observed
    one included) for n <= 16; else ``n_resamples`` seeded random patterns, p = (count + 1) /
    (n_resamples + 1). Null values within 1e-12 (relative) of the observed one count as ties.
    """
    c = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if c.shape != b.shape or c.ndim != 1 or c.size == 0:
        raise ValueError(f"swap_permutation_pvalue: need two 1-D arrays of one length, got {c.shape} and {b.shape}")
    if n_resamples < 1:
        raise ValueError(f"swap_permutation_pvalue: n_resamples must be >= 1, got {n_resamples}")
    observed = float(statistic(c[None, :], b[None, :])[0])
    exact = c.size <= EXACT_MAX_N
    rng = None if exact else np.random.default_rng(seed)
    total = 2 ** c.size if exact else n_resamples
    rows = max(1, _CHUNK // c.size)
    count = 0
    for start in range(0, total, rows):
        k = min(rows, total - start)
        swap = _sign_patterns(c.size)[start:start + k] < 0 if exact else rng.random((k, c.size)) < 0.5
        null = statistic(np.where(swap, b, c), np.where(swap, c, b))
        tol = 1e-12 * max(1.0, abs(observed), float(np.max(np.abs(null))))
        count += int(np.sum(null >= observed - tol))
    return count / total if exact else (count + 1) / (n_resamples + 1)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input's order.

    Sorted ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) p_(j)). Not in scipy;
    statsmodels' ``multipletests(method="holm")`` computes the same and is not a dependency.
    """
    p = _pvalues(pvalues, "holm")
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), in the input's order."""
    p = _pvalues(pvalues, "benjamini_hochberg")
    return p if p.size == 0 else np.asarray(_st.false_discovery_control(p, method="bh"), dtype=np.float64)


def _pvalues(pvalues: Sequence[float], what: str) -> np.ndarray:
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"{what}: p-values must be numbers in [0, 1]")
    return p


# ----- aggregates over many rows ----------------------------------------------------------------------
def _group_means(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Row-wise mean over groups of the group means; a group absent from a row is left out."""
    k = values.shape[0]
    flat = (groups + np.arange(k)[:, None] * n_groups).ravel()
    sums = np.bincount(flat, weights=values.ravel(), minlength=k * n_groups).reshape(k, n_groups)
    counts = np.bincount(flat, minlength=k * n_groups).reshape(k, n_groups)
    present = counts > 0
    means = np.where(present, sums / np.where(present, counts, 1), 0.0)
    return means.sum(axis=1) / present.sum(axis=1)


def _group_codes(paired: PairedItems, spec: PairedSpec) -> np.ndarray:
    """group_difference: +1 for the items of ``spec.difference[0]``, -1 for those of the group
    subtracted; ``MetricUndefined`` when the pairs lack one of them (the difference has no value)
    and ``ValueError`` for an item of another group."""
    assert spec.difference is not None
    groups = np.asarray(paired.groups if paired.groups is not None else ("",) * paired.candidate.size, dtype=object)
    first, second = spec.difference
    other = sorted({str(g) for g in groups} - {first, second})
    if other:
        raise ValueError(f"{paired.probe} {paired.metric}: items of {spec.group_field} {other[:3]}, the difference is "
                         f"of {first!r} minus {second!r} only")
    codes = np.where(groups == first, 1, -1).astype(np.int8)
    for g, code in ((first, 1), (second, -1)):
        if not np.any(codes == code):
            raise MetricUndefined(f"{paired.probe} {paired.metric}: none of the {codes.size} items with a value in both "
                                  f"runs is of {spec.group_field} {g!r}, so the {first}-minus-{second} difference has "
                                  "no paired value")
    return codes


def _group_difference(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Row-wise mean of the items coded +1 minus the mean of those coded -1 (NaN where a row has none)."""
    first, second = codes == 1, codes == -1
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(first, values, 0.0).sum(axis=1) / first.sum(axis=1)
                - np.where(second, values, 0.0).sum(axis=1) / second.sum(axis=1))


def _aggregator(paired: PairedItems, spec: PairedSpec) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A(values (k, n), item indices (k, n)) -> (k,): the metric over each row's items."""
    if spec.aggregation == "mean":
        return lambda values, idx: spec.item_scale * values.mean(axis=1)
    if spec.aggregation == "group_difference":
        signs = _group_codes(paired, spec)
        return lambda values, idx: spec.item_scale * _group_difference(values, signs[idx])
    _, codes = np.unique(np.asarray(paired.groups, dtype=object), return_inverse=True)
    n_groups = int(codes.max()) + 1
    return lambda values, idx: spec.item_scale * _group_means(values, codes[idx], n_groups)


def _harm(spec: PairedSpec, a_cand: np.ndarray, a_base: np.ndarray) -> np.ndarray:
    if spec.direction == "lower":
        return a_cand - a_base
    if spec.direction == "higher":
        return a_base - a_cand
    return np.abs(a_cand - spec.ideal) - np.abs(a_base - spec.ideal)


def _index_statistic(paired: PairedItems, spec: PairedSpec, which: str):
    """A bootstrap statistic over resampled item indices (scipy passes indices as the data)."""
    aggregate = _aggregator(paired, spec)
    c, b = paired.candidate, paired.baseline

    def statistic(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.moveaxis(np.asarray(indices), axis, -1).astype(np.int64)
        flat = idx.reshape(-1, idx.shape[-1])
        ac, ab = aggregate(c[flat], flat), aggregate(b[flat], flat)
        out = ac - ab if which == "delta" else _harm(spec, ac, ab)
        return out.reshape(idx.shape[:-1])

    return statistic


def _stratified_cis(paired: PairedItems, spec: PairedSpec, n_bootstrap: int, level: float, seed: int,
                    ) -> tuple[tuple[float, float], tuple[float, float]]:
    """Percentile bootstrap CIs of delta and harm for a difference of two groups' means: each
    resample draws, with replacement, as many pairs of each group as there are (seeded), both runs
    together; each interval is widened to hold its point (identical runs: exactly [0, 0])."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"bootstrap: level must be in (0, 1), got {level}")
    if n_bootstrap < 1:
        raise ValueError(f"bootstrap: n_bootstrap must be >= 1, got {n_bootstrap}")
    codes = _group_codes(paired, spec)
    aggregate = _aggregator(paired, spec)
    c, b = paired.candidate, paired.baseline
    strata = [np.flatnonzero(codes == 1), np.flatnonzero(codes == -1)]
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // max(1, c.size))
    deltas, harms = [], []
    for start in range(0, n_bootstrap, rows):
        k = min(rows, n_bootstrap - start)
        idx = np.concatenate([s[rng.integers(0, s.size, size=(k, s.size))] for s in strata], axis=1)
        ac, ab = aggregate(c[idx], idx), aggregate(b[idx], idx)
        deltas.append(ac - ab)
        harms.append(_harm(spec, ac, ab))
    everything = np.arange(c.size)[None, :]
    a_cand, a_base = aggregate(c[None, :], everything), aggregate(b[None, :], everything)
    points = (float((a_cand - a_base)[0]), float(_harm(spec, a_cand, a_base)[0]))
    tail = 100 * (1 - level) / 2
    out = []
    for values, point in zip((np.concatenate(deltas), np.concatenate(harms)), points):
        low, high = np.percentile(values, [tail, 100 - tail])
        out.append((min(float(low), point), max(float(high), point)))
    return out[0], out[1]


# ----- one comparison -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedComparison:
    """Candidate vs baseline on one probe x metric. ``harm`` > 0 means the candidate is worse."""

    probe: str
    metric: str
    n: int
    n_dropped: int
    baseline_value: float
    candidate_value: float
    delta: float
    delta_ci: tuple[float, float]
    harm: float
    harm_ci: tuple[float, float]
    p_value: float
    test: str
    direction: str
    ideal: float | None = None
    moved_up: tuple[dict[str, Any], ...] = field(default=(), repr=False)  # largest c_i - b_i > 0
    moved_down: tuple[dict[str, Any], ...] = field(default=(), repr=False)  # largest decreases
    # filled in for the whole run by ``adjust`` and the gate
    p_holm: float | None = None
    p_bh: float | None = None
    margin: float | None = None
    margin_rule: str | None = None  # how the margin was set ("0.03", "25% of the baseline, at least 0.002")
    verdict: str | None = None

    @property
    def test_id(self) -> str:
        return f"{self.probe}-{self.metric}"


def _moved(paired: PairedItems, k: int) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    d = paired.candidate - paired.baseline

    def row(i: int) -> dict[str, Any]:
        return {"id": paired.ids[i], "prompt": paired.prompts[i], "baseline": float(paired.baseline[i]),
                "candidate": float(paired.candidate[i]), "baseline_output": paired.baseline_output[i],
                "candidate_output": paired.candidate_output[i]}

    up = sorted((i for i in range(d.size) if d[i] > 0), key=lambda i: (-d[i], paired.ids[i]))[:k]
    down = sorted((i for i in range(d.size) if d[i] < 0), key=lambda i: (d[i], paired.ids[i]))[:k]
    return tuple(map(row, up)), tuple(map(row, down))


def compare_to_baseline(paired: PairedItems, spec: PairedSpec, seed: int = 0, n_resamples: int = N_PERMUTATIONS,
            n_bootstrap: int = N_BOOTSTRAP, level: float = 0.95, moved: int = MOVED) -> PairedComparison:
    """Delta, harm (both with paired bootstrap CIs) and the one-sided p-value of harm > 0."""
    c, b = paired.candidate, paired.baseline
    everything = np.arange(c.size)[None, :]
    aggregate = _aggregator(paired, spec)
    a_cand, a_base = float(aggregate(c[None, :], everything)[0]), float(aggregate(b[None, :], everything)[0])
    delta = a_cand - a_base
    harm = float(_harm(spec, np.array([a_cand]), np.array([a_base]))[0])
    plain = spec.aggregation == "mean" and spec.direction != "ideal"
    sign = 1.0 if spec.direction == "lower" else -1.0
    if plain:
        diffs = spec.item_scale * (c - b)
        delta_ci = bootstrap_ci(diffs, n_resamples=n_bootstrap, level=level, seed=seed)
        harm_ci = delta_ci if sign > 0 else (-delta_ci[1], -delta_ci[0])
        per_item = sign * (c - b)
        if spec.kind == "binary" and np.all(np.isin(c, (0.0, 1.0))) and np.all(np.isin(b, (0.0, 1.0))):
            worse, better = int(np.sum(per_item > 0)), int(np.sum(per_item < 0))
            p = mcnemar_exact(worse, better)
            test = f"exact McNemar, one-sided ({worse} items worse, {better} better)"
        else:
            p = paired_permutation_pvalue(per_item, n_resamples=n_resamples, seed=seed, alternative="greater")
            test = "paired sign-flip permutation, one-sided, " + (
                "exact" if c.size <= EXACT_MAX_N else f"{n_resamples} seeded draws")
    else:
        if spec.aggregation == "group_difference":
            delta_ci, harm_ci = _stratified_cis(paired, spec, n_bootstrap, level, seed)
        else:
            indices = np.arange(c.size, dtype=np.float64)
            delta_ci = bootstrap_ci(indices, statistic=_index_statistic(paired, spec, "delta"),
                                    n_resamples=n_bootstrap, level=level, seed=seed)
            harm_ci = bootstrap_ci(indices, statistic=_index_statistic(paired, spec, "harm"),
                                   n_resamples=n_bootstrap, level=level, seed=seed)
        p = swap_permutation_pvalue(c, b, lambda cc, bb: _harm(spec, aggregate(cc, _tile(cc)), aggregate(bb, _tile(bb))),
                                    n_resamples=n_resamples, seed=seed)
        what = "distance from the ideal" if spec.direction == "ideal" else "aggregate"
        test = f"paired swap permutation of the {what}, one-sided, " + (
            "exact" if c.size <= EXACT_MAX_N else f"{n_resamples} seeded draws")
    up, down = _moved(paired, moved)
    return PairedComparison(
        probe=paired.probe, metric=paired.metric, n=int(c.size), n_dropped=paired.n_dropped,
        baseline_value=a_base, candidate_value=a_cand, delta=delta, delta_ci=_pair(delta_ci),
        harm=harm, harm_ci=_pair(harm_ci), p_value=float(p),
        test=test + "; CIs: paired percentile bootstrap" + (
            f", resampled within each {spec.group_field}" if spec.aggregation == "group_difference" else ""),
        direction=spec.direction, ideal=spec.ideal, moved_up=up, moved_down=down,
    )


def _tile(values: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.arange(values.shape[1]), values.shape)


def _pair(ci: tuple[float, float]) -> tuple[float, float]:
    return float(ci[0]), float(ci[1])


def adjust(comparisons: Sequence[PairedComparison]) -> list[PairedComparison]:
    """The run's comparisons with Holm and Benjamini-Hochberg adjusted p-values filled in."""
    raw = [c.p_value for c in comparisons]
    return [dataclasses.replace(c, p_holm=float(h), p_bh=float(q))
            for c, h, q in zip(comparisons, holm(raw), benjamini_hochberg(raw))]
