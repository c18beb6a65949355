"""``--sample auto``: grow a probe's sample in seeded batches until its gate decides.

A sampled probe's pool (its catalogue declaration says ``sampled``: GenderPair's prompts, the
natural STS-B/SNLI predicates, DA-Gender's pairs, CrowS-Pairs, the sentiment templates, BBQ's
questions, discrim-eval's matched triples) is put in one seeded order, ``unit_order``; the audit
computes a metric on the first n units of that order for n = ``first``, 2 ``first``, 4 ``first``,
... up to the probe's item cap, and after each look asks the metric's *confidence sequence*
(``bias_core.stats.sequential``) whether the gate has decided. It stops at the first look that
decides, at the cap (or the end of the pool), or once the run's time budget is spent. Because a
CS covers the mean at every look at once, the interval at the stop keeps its 95% coverage
whatever made it stop, which a bootstrap CI recomputed after every batch would not.

Determinism: the order depends only on the seed, the probe's name and its items' unit ids, and
the looks only on ``first`` and the cap, so the same seed gives the same items whatever the
model's batch size or the number of xdist workers. The time budget is the one exception: when it
binds, how far a probe got depends on the machine's speed, and the row says "budget".

Each metric's items are fed to its CS in the order of the units (never in the order a metric
sorts its details), so the intervals at successive looks are one confidence sequence. How each
metric's interval is formed is its catalogue entry's ``sampling`` (``bias_core/metric_spec.py``;
docs/sampling.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bias_core import catalogue
from bias_core.gating.thresholds import INCONCLUSIVE, Gate, verdict
from bias_core.metric_spec import FixedSample, GapOfGroups, MeanOfItems, OwnInterval, Sampling, resolve
from bias_core.stats.sequential import DEFAULT_ALPHA, confidence_sequence, gap_interval, split_alpha

if TYPE_CHECKING:
    from bias_core.stats.sequential import _BoundedMeanCS

# Stopping reasons, as the report shows them.
DECIDED, ITEM_CAP, BUDGET, POOL, NO_GATE = "decided", "item cap", "budget", "pool exhausted", "no gate"
CS_KIND = "confidence sequence (betting, Waudby-Smith & Ramdas 2023)"
BOOTSTRAP_KIND = "bootstrap percentile CI (fixed sample)"

DEFAULT_FIRST = 64
DEFAULT_CAP = 1024
# No time budget by default: a budget that binds makes the items used depend on the machine.
DEFAULT_BUDGET_S: float | None = None


#: Per-probe item caps where an item is expensive (a 64-token generation and two classifiers per
#: GenderPair prompt, a ~190-token prompt per discrim-eval gender), as the probes' catalogue
#: declarations give them (``Sampled.cap``; the rest take ``DEFAULT_CAP``), installed packages' included.
PROBE_CAPS: Mapping[str, int] = catalogue.Derived(
    lambda: {p.name: p.sampled.cap for p in catalogue.sampled_probes() if p.sampled.cap is not None})
#: The sampled probes a run's --sample N sizes itself (GenderPair draws its own sample).
SIZED_BY_N: Mapping[str, bool] = catalogue.Derived(
    lambda: {p.name: True for p in catalogue.sampled_probes() if not p.sampled.own_sample})
#: Probes too large to audit whole by default (``Sampled.fixed``): when a plan does not sample
#: them adaptively (--sample fixed, a run with a baseline or --mitigation) they are audited on the
#: first this-many units of their seeded order, as GenderPair on its fixed stratified sample.
FIXED_SIZES: Mapping[str, int] = catalogue.Derived(
    lambda: {p.name: p.sampled.fixed for p in catalogue.sampled_probes() if p.sampled.fixed is not None})


@dataclass(frozen=True)
class SampleOptions:
    """--sample (auto, fixed or a number), --sample-cap and --sample-budget as validated."""

    mode: str = "auto"
    cap: int | None = None
    budget_s: float | None = DEFAULT_BUDGET_S


@dataclass
class SamplePlan:
    """How sampled probes are sized: ``mode`` "auto" (adaptive) or "fixed" (today's samples)."""

    mode: str = "auto"
    first: int = DEFAULT_FIRST
    cap: int | None = None  # one cap for every probe; None: PROBE_CAPS, else DEFAULT_CAP
    budget_s: float | None = DEFAULT_BUDGET_S
    alpha: float = DEFAULT_ALPHA
    started: float = field(default_factory=time.monotonic)
    probes: tuple[str, ...] = ()  # the probes this plan samples adaptively
    whole: tuple[str, ...] = ()  # sampled probes this plan audits whole (--genderbench-full)

    @property
    def adaptive(self) -> bool:
        return self.mode == "auto"

    @property
    def fixed_n(self) -> int | None:
        return int(self.mode) if self.mode.isdigit() else None

    def samples(self, probe: str) -> bool:
        return self.mode != "fixed" and probe in self.probes and probe not in self.whole

    def fixed_size(self, probe: str) -> int | None:
        """The units a probe too large to audit whole keeps when this plan does not sample it
        adaptively (its declaration's ``Sampled.fixed``, ``FIXED_SIZES``); None: the whole probe.
        Under --sample N a sampled probe is its first N units in every run, paired (--baseline,
        --mitigation) or not: a baseline stored with --sample N holds the items, and the content
        hash, of a candidate run with it."""
        if probe in self.whole:
            return None
        if self.fixed_n is not None and probe in SIZED_BY_N:
            return self.fixed_n
        return None if self.samples(probe) else FIXED_SIZES.get(probe)

    def cap_for(self, probe: str) -> int:
        return self.cap if self.cap is not None else PROBE_CAPS.get(probe, DEFAULT_CAP)

    def spent(self) -> bool:
        return self.budget_s is not None and time.monotonic() - self.started >= self.budget_s

    def describe(self) -> dict[str, Any]:
        """The plan as the run header and the report show it (``fixed_size``: the probes cut to
        their declared fixed size because this plan does not sample them adaptively)."""
        fixed = {name: n for name in (*FIXED_SIZES, *SIZED_BY_N) if (n := self.fixed_size(name)) is not None}
        cut = {"fixed_size": fixed} if fixed else {}
        if self.whole:
            cut["whole"] = list(self.whole)
        if not self.adaptive:
            return {"mode": self.mode, **cut}
        return {"mode": "auto", "first_look": self.first,
                "item_cap": self.cap if self.cap is not None else {"default": DEFAULT_CAP, **PROBE_CAPS},
                "budget_s": self.budget_s, "alpha": self.alpha, "probes": list(self.probes), **cut}


def plan_for(options: SampleOptions, genderpair_fixed: bool, paired: bool, baseline: bool = False,
             whole_families: tuple[str, ...] = ()) -> SamplePlan:
    """The run's plan over the catalogue's sampled probes (``ProbeSpec.sampled``). A probe whose
    family draws a sample of its own (GenderPair's) keeps it when --genderpair-sample or --sample N
    sizes it (``genderpair_fixed``), and under ``baseline`` (a run with --baseline), whose rows pair
    with a baseline stored with --sample fixed: its fixed sample, never an adaptive one, which
    would stop at another size than the baseline's. ``paired`` (--mitigation, --baseline) keeps the
    others whole, because the variants' paired comparisons and guards need the original's results
    on the same items. ``whole_families``: families whose sampled probes are audited whole
    (--genderbench-full: GenderBench's own sample sizes), neither sampled nor cut."""
    def adaptive(p) -> bool:
        if p.sampled.own_sample:
            return not genderpair_fixed and not baseline and options.mode == "auto"
        return not paired

    probes = [p.name for p in catalogue.sampled_probes() if adaptive(p)]
    # the probes whose family samples them itself after the others (the run header's order)
    probes.sort(key=lambda name: catalogue.PROBES[name].sampled.own_sample)
    whole = tuple(p.name for p in catalogue.sampled_probes() if p.family in whole_families)
    return SamplePlan(options.mode, cap=options.cap, budget_s=options.budget_s, probes=tuple(probes), whole=whole)


def look_sizes(pool: int, first: int, cap: int) -> list[int]:
    """Prefix sizes at which the gate looks: first, 2 first, 4 first, ..., ending at min(cap, pool)."""
    if pool < 1 or first < 1 or cap < 1:
        raise ValueError(f"pool, first and cap must be >= 1, got {pool}, {first}, {cap}")
    last = min(pool, cap)
    sizes, n = [], first
    while n < last:
        sizes.append(n)
        n *= 2
    return sizes + [last]


def unit_order(units: Sequence[str], seed: int, name: str) -> list[str]:
    """The distinct units (first-seen order) in a seeded order that depends on seed, name and the
    unit ids only: sorting by a keyed hash, so adding an item to the pool moves no other unit."""
    distinct = list(dict.fromkeys(str(u) for u in units))
    key = f"{int(seed)}\x00{name}\x00".encode()
    return sorted(distinct, key=lambda u: hashlib.sha256(key + u.encode("utf-8")).digest())


def item_unit(probe_name: str, item: Any) -> str:
    """The sampling unit of an item: its key where the probe's declaration samples keys (GenderPair
    robustness: every wording of one prompt together), else the item."""
    declared = catalogue.PROBES.get(probe_name)
    if declared is not None and declared.sampled is not None and declared.sampled.unit == "key":
        return str(item.meta.get("key", item.id))
    return str(item.id)


def prefix_probe(probe: Any, n: int, seed: int) -> Any:
    """The items of the first ``n`` units of the probe's seeded order, in that order."""
    units = [item_unit(probe.name, it) for it in probe.items]
    chosen = unit_order(units, seed, probe.name)[:n]
    rank = {u: k for k, u in enumerate(chosen)}
    kept = sorted((k for k, u in enumerate(units) if u in rank), key=lambda k: (rank[units[k]], k))
    changes = {"pool": None} if getattr(probe, "pool", None) is not None else {}
    return dataclasses.replace(probe, items=tuple(probe.items[k] for k in kept), **changes)


def pool_units(probe: Any) -> int:
    """Sampling units in the probe's pool: the whole pool's when its loader kept only part of it."""
    pool = getattr(probe, "pool", None)
    if pool is not None:
        return int(pool.units)
    return len({item_unit(probe.name, it) for it in probe.items})


def pool_select(plan: SamplePlan, name: str, seed: int, metrics: Sequence[Any]) -> Any:
    """The ``select`` a suite offers the loader of probe ``name``: under --sample auto,
    ``reachable_units`` at the probe's item cap; None (the whole pool) when the plan does not
    sample it adaptively (--sample N keeps today's pool, and a fixed sample is not a pool), or when
    one of ``metrics`` (those computed from the probe) has no bounded form and so is computed on
    the whole pool."""
    if not plan.adaptive or not plan.samples(name) or any(isinstance(m.sampling, FixedSample) for m in metrics):
        return None
    return reachable_units(plan.cap_for(name), seed)


def reachable_units(n: int, seed: int) -> Callable[[str, Callable[[], Any]], tuple[tuple[Any, ...], int]]:
    """A loader's ``select`` (probes/base.py ``pooled_probe``): of a pool it keeps the items of the
    first ``n`` units of its seeded order, in pool order, and counts the pool's units. No look of
    the run reaches further (looks end at the item cap), and ``prefix_probe`` of what it keeps
    gives the same items in the same order as of the whole pool: the order is by a keyed hash of
    each unit alone. Two passes over the pool, which is never held: GenderPair's, whole, held
    ~0.6 GB beside the model while it generated."""

    def select(name: str, items: Callable[[], Any]) -> tuple[tuple[Any, ...], int]:
        units = list(dict.fromkeys(item_unit(name, it) for it in items()))
        chosen = set(unit_order(units, seed, name)[:n])
        return tuple(it for it in items() if item_unit(name, it) in chosen), len(units)

    return select


# ----- intervals ---------------------------------------------------------------------------------
def _cs(values: Sequence[float], low: float, high: float, alpha: float) -> tuple[float, float]:
    if len(values) == 0:
        return low, high
    return confidence_sequence(low, high, alpha).update(np.asarray(values, dtype=float)).interval()


def _ordered(details: Sequence[Mapping[str, Any]], rank: Mapping[str, int]) -> list[Mapping[str, Any]]:
    """Details in sampling order (a metric may sort them otherwise); ids unknown to the order last."""
    return sorted(details, key=lambda d: rank.get(str(d["id"]), len(rank)))


def mean_interval(result: Any, rank: Mapping[str, int], alpha: float, low: float = 0.0, high: float = 1.0,
                  scale: float = 1.0, column: str = "score") -> tuple[float, float]:
    """CS for a mean of per-item values ``column`` (in [low, high]) reported times ``scale``."""
    lo, hi = _cs([float(d[column]) for d in _ordered(result.details, rank)], low, high, alpha)
    return lo * scale, hi * scale


def gap_of_means(parts: Sequence[Any], rank: Mapping[str, int], alpha: float, column: str = "score") -> tuple[float, float]:
    """max - min of k group means: one CS per group at alpha / k, then ``gap_interval``."""
    level = split_alpha(alpha, len(parts))
    return gap_interval([mean_interval(p, rank, level, column=column) for p in parts])


def spread_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """BPR_spread: a CS per wording on the items decided under every wording, at alpha / k."""
    rows = _ordered(result.details, rank)
    variants = list(rows[0]["choices"]) if rows else []
    if len(variants) < 2:
        return 0.0, 1.0
    level = split_alpha(alpha, len(variants))
    return gap_interval([_cs([float(r["choices"][v]) for r in rows], 0.0, 1.0, level) for v in variants])


def _quotient(num: tuple[float, float], den: tuple[float, float]) -> tuple[float, float]:
    if den[0] <= 0.0:
        return -math.inf, math.inf
    corners = [a / b for a in num for b in den]
    return min(corners), max(corners)


def gbm_interval(result: Any, rank: Mapping[str, int], alpha: float) -> tuple[float, float]:
    """GBM = (F+ - M+)/N+ + (M- - F-)/N- with N = 1 - F - M: CSs for F and M under each sentiment
    (four means, alpha / 4 each) and interval arithmetic; infinite while a neutral share may be 0."""
    rows = _ordered(result.details, rank)
    level = split_alpha(alpha, 4)
    bounds = {}
    for s in ("positive", "negative"):
        mine = [r for r in rows if r.get("sentiment") == s]
        for c in ("female", "male"):
            bounds[s, c] = _cs([float(r[c]) for r in mine], 0.0, 1.0, level)
    terms = []
    for s, sign in (("positive", 1.0), ("negative", -1.0)):
        (fl, fh), (ml, mh) = bounds[s, "female"], bounds[s, "male"]
        num = (fl - mh, fh - ml) if sign > 0 else (ml - fh, mh - fl)
        terms.append(_quotient(num, (max(0.0, 1.0 - fh - mh), 1.0 - fl - ml)))
    return terms[0][0] + terms[1][0], terms[0][1] + terms[1][1]


def sampling_form(metric: str) -> Sampling:
    """The metric's catalogue ``sampling``; a metric the catalogue does not know has no form."""
    found = catalogue.BY_NAME.get(metric)
    return FixedSample("not in the catalogue") if found is None else found.sampling


# ----- the loop ---------------------------------------------------------------------------------
def run_adaptive(plan: SamplePlan, gate: Any, pool: int, cap: int, evaluate: Callable[[int], Any],
                 interval: Callable[[Any, int], tuple[float, float]], kind: str = CS_KIND) -> Any:
    """Look at n = look_sizes(pool, plan.first, cap): ``evaluate(n)`` gives the metric's result on
    the first n units, ``interval(result, n)`` its CS interval; stop at the first decided look,
    the last size, or when the plan's budget is spent. Returns the last result with the CS
    interval as its CI and ``breakdown["sampling"]`` saying what was used and why it stopped."""
    sizes = look_sizes(pool, plan.first, cap)
    looks = []
    for k, n in enumerate(sizes):
        result = evaluate(n)
        lo, hi = interval(result, n)
        decided = gate is not None and verdict(lo, hi, gate) != INCONCLUSIVE
        looks.append(n)
        if decided:
            reason = DECIDED
        elif gate is None:
            reason = NO_GATE
        elif k == len(sizes) - 1:
            reason = ITEM_CAP if n < pool else POOL
        elif plan.spent():
            reason = BUDGET
        else:
            continue
        break
    sampling = {"mode": "auto", "items_used": looks[-1], "pool": pool, "item_cap": cap, "looks": looks,
                "stop_reason": reason, "interval": kind, "alpha": plan.alpha, "budget_s": plan.budget_s}
    return dataclasses.replace(result, ci_low=float(lo), ci_high=float(hi),
                               breakdown={**result.breakdown, "sampling": sampling})


def fixed_sampling(result: Any, mode: str, items: int | None = None) -> Any:
    """Mark a fixed-sample result (bootstrap CI) the same way, so every row says how it was sized."""
    used = int(result.n) if items is None else int(items)
    result.breakdown.setdefault("sampling", {"mode": mode, "items_used": used, "stop_reason": "fixed sample",
                                             "interval": BOOTSTRAP_KIND})
    return result


def adapt(suite: Any, probe: str, metric: str, parts: Sequence[str]) -> Any:
    """``suite.result(probe, metric)`` under ``--sample auto``: looks at growing prefixes of the
    sampled probes ``parts`` (the probe itself, or the groups a gap compares)."""
    plan = suite.sampling
    if plan.fixed_n is not None:  # --sample N: the first N units, bootstrap CI
        n = min(plan.fixed_n, min(pool_units(suite.probe(p)) for p in parts))
        result = suite.at_size(n).checked(probe, metric)
        return fixed_sampling(result, f"fixed {plan.fixed_n}", items=n)
    form = sampling_form(metric)
    if isinstance(form, FixedSample):  # no bounded form: the whole pool, fixed
        return fixed_sampling(suite.checked(probe, metric), "fixed (no bounded per-item form)")
    pools = [suite.probe(p) for p in parts]
    pool = min(pool_units(p) for p in pools)
    cap = min(plan.cap_for(p) for p in parts)
    rank: dict[str, int] = {}
    for p in pools:
        units = [item_unit(p.name, it) for it in p.items]
        rank.update({u: k for k, u in enumerate(unit_order(units, suite.seed, p.name))})
    try:
        gate = suite.gate_for(metric, probe) if suite.gate_for is not None else None
    except Exception:  # no gate for it: one look, reported as such
        gate = None

    def interval(result: Any, n: int) -> tuple[float, float]:
        if isinstance(form, GapOfGroups):
            groups = [suite.at_size(n).checked(p, form.of) for p in parts]
            return gap_of_means(groups, rank, plan.alpha, column=form.column)
        if isinstance(form, MeanOfItems):
            return mean_interval(result, rank, plan.alpha, low=form.low, high=form.high, scale=form.scale,
                                 column=form.column)
        return resolve(form.function)(result, rank, plan.alpha)

    kind = (form.kind if isinstance(form, OwnInterval) else None) or CS_KIND
    return run_adaptive(plan, gate, pool, cap, lambda n: _look(suite.at_size(n), probe, metric), interval, kind)


def _look(copy: Any, probe: str, metric: str) -> Any:
    """One look's result. Under --precision exact, the metrics whose half-precision error is
    propagated (GLD, ADD) are computed in fp32: the derived error bounds a bootstrap endpoint, not
    a confidence sequence's (its bets are not Lipschitz in the items), so only fp32 values keep
    exact mode's promise of fp32's verdict."""
    from bias_core.gating.precision_recheck import is_propagated

    check = copy.precision_check
    if is_propagated(metric) and getattr(copy.lm, "precision", None) == "exact" and hasattr(check, "_twin"):
        result = check._twin(copy).result(probe, metric)
        result.breakdown["precision"] = {"computed_in": "fp32", "why": "--sample auto: confidence sequences are "
                                         "judged on fp32 values"}
        return result
    return copy.checked(probe, metric)


def look(cs: _BoundedMeanCS, gate: Gate) -> Any:
    """The gate's verdict ("pass", "fail", "inconclusive") on the CS's current interval; an array
    of verdicts when the CS tracks several streams. Valid at any look (bias_core.stats.sequential)."""
    lo, hi = cs.interval()
    if not cs.shape:
        return verdict(lo, hi, gate)
    out = np.empty(cs.shape, dtype=object)
    for index in np.ndindex(*cs.shape):
        out[index] = verdict(lo[index], hi[index], gate)
    return out
