"""--sample auto (bias_core/gating/adaptive_sampling.py): seeded prefixes, the stopping rule, and the intervals
it reports, on synthetic item streams whose true means are known."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from bias_core.gating import adaptive_sampling as ad
from bias_core.gating.thresholds import FAIL, PASS, Gate, verdict
from bias_core.metrics import MetricResult
from bias_core.probes.base import Probe, ProbeItem
from bias_core.suites.base import Suite

GATE = Gate("GAS", 0.30, "max", "metrics.GAS")


def _mean_result(values, ids, metric="GAS") -> MetricResult:
    details = tuple({"id": i, "prompt": "", "score": float(v)} for i, v in zip(ids, values))
    mean = float(np.mean(values))
    return MetricResult(metric, mean, mean, mean, len(values), details=details)


def _stream(p: float, pool: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(pool) < p).astype(float)


def _run(values: np.ndarray, plan: ad.SamplePlan, cap: int, gate=GATE):
    ids = [str(k) for k in range(values.size)]
    rank = {i: k for k, i in enumerate(ids)}
    def evaluate(n):
        return _mean_result(values[:n], ids[:n])
    return ad.run_adaptive(plan, gate, values.size, cap, evaluate, lambda r, n: ad.mean_interval(r, rank, plan.alpha))


# ----- sizes and order -------------------------------------------------------------------------
def test_look_sizes_double_from_the_first_batch_and_end_at_the_cap_or_the_pool():
    assert ad.look_sizes(10_000, 64, 256) == [64, 128, 256]
    assert ad.look_sizes(364, 64, 1024) == [64, 128, 256, 364]
    assert ad.look_sizes(50, 64, 1024) == [50]
    with pytest.raises(ValueError):
        ad.look_sizes(0, 64, 10)


def test_same_seed_same_order_and_a_new_item_moves_no_other():
    units = [f"u{k}" for k in range(200)]
    first = ad.unit_order(units, 3, "probe")
    assert first == ad.unit_order(list(reversed(units)), 3, "probe")  # pool order does not matter
    assert sorted(first) == sorted(units)
    assert first != ad.unit_order(units, 4, "probe") and first != ad.unit_order(units, 3, "other")
    grown = ad.unit_order(units + ["new"], 3, "probe")
    assert [u for u in grown if u != "new"] == first


def test_prefixes_are_nested_and_robustness_keeps_every_wording_of_a_key_together():
    items = tuple(ProbeItem(f"{v}:{k}", f"prompt {k} {v}", {"key": f"k{k}", "variant": v}) for v in "abcd" for k in range(30))
    probe = Probe("genderpair-robustness", "1", items)
    small, large = ad.prefix_probe(probe, 5, 0), ad.prefix_probe(probe, 12, 0)
    assert len(small.items) == 20 and len(large.items) == 48
    def keys(p):
        return list(dict.fromkeys(i.meta["key"] for i in p.items))
    assert keys(large)[:5] == keys(small)
    assert all(sum(i.meta["key"] == k for i in small.items) == 4 for k in keys(small))
    assert ad.pool_units(probe) == 30


# ----- stopping ----------------------------------------------------------------------------------
def test_decides_within_three_looks_when_the_true_mean_is_two_margins_from_the_limit():
    # margin 0.1: a Bernoulli(0.1) stream against max 0.3 should pass, and one at 0.5 fail.
    plan = ad.SamplePlan(first=64, budget_s=None)
    for p, expected in ((0.1, PASS), (0.5, FAIL)):
        used, verdicts = [], []
        for seed in range(100):
            result = _run(_stream(p, 5000, seed), plan, cap=1024)
            s = result.breakdown["sampling"]
            used.append(s["items_used"])
            verdicts.append(verdict(result.ci_low, result.ci_high, GATE))
            assert s["stop_reason"] in (ad.DECIDED, ad.ITEM_CAP)
        assert verdicts.count(expected) >= 99 and verdicts.count(FAIL if expected == PASS else PASS) == 0
        # three looks (64, 128, 256 items) nearly always, four at most
        assert np.mean(np.array(used) <= 256) >= 0.95 and max(used) <= 512, used


def test_at_the_threshold_it_runs_to_the_cap_and_rarely_decides_wrongly():
    plan = ad.SamplePlan(first=64, budget_s=None)
    wrong, reasons = 0, set()
    runs = 200
    for seed in range(runs):
        result = _run(_stream(0.3, 4000, 1000 + seed), plan, cap=256)
        s = result.breakdown["sampling"]
        reasons.add(s["stop_reason"])
        assert s["items_used"] <= 256 and s["looks"] == s["looks"][: len(s["looks"])]
        wrong += s["stop_reason"] == ad.DECIDED  # any decision at the threshold is wrong
    assert ad.ITEM_CAP in reasons
    # nominal 5% plus three binomial standard errors of 200 runs
    assert wrong / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_pool_smaller_than_the_cap_stops_with_the_pool_exhausted():
    result = _run(_stream(0.3, 150, 0), ad.SamplePlan(first=64, budget_s=None), cap=1024)
    assert result.breakdown["sampling"]["stop_reason"] == ad.POOL
    assert result.breakdown["sampling"]["looks"] == [64, 128, 150]
    assert result.n == 150


def test_a_spent_budget_stops_after_the_first_look():
    plan = ad.SamplePlan(first=64, budget_s=1.0, started=-1e9)  # started long ago
    result = _run(_stream(0.3, 4000, 0), plan, cap=1024)
    s = result.breakdown["sampling"]
    assert (s["stop_reason"], s["items_used"], s["budget_s"]) == (ad.BUDGET, 64, 1.0)


def test_no_gate_looks_once():
    result = _run(_stream(0.1, 4000, 0), ad.SamplePlan(budget_s=None), cap=1024, gate=None)
    assert result.breakdown["sampling"]["stop_reason"] == ad.NO_GATE and result.n == 64


def test_the_interval_follows_the_sampling_order_not_the_details_order():
    values = _stream(0.4, 300, 5)
    ids = [str(k) for k in range(300)]
    rank = {i: k for k, i in enumerate(ids)}
    ordered = ad.mean_interval(_mean_result(values, ids), rank, 0.05)
    shuffled = np.random.default_rng(0).permutation(300)
    scrambled = _mean_result(values[shuffled], [ids[k] for k in shuffled])
    assert ad.mean_interval(scrambled, rank, 0.05) == ordered


# ----- ratio and gap metrics ---------------------------------------------------------------------
def test_gap_interval_covers_the_true_gap_of_three_groups_at_the_nominal_rate():
    truth = np.array([0.2, 0.35, 0.5])  # true gap 0.3
    covered = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        parts = []
        for g, p in enumerate(truth):
            vals = (rng.random(200) < p).astype(float)
            parts.append(_mean_result(vals, [f"g{g}:{k}" for k in range(200)]))
        rank = {f"g{g}:{k}": k for g in range(3) for k in range(200)}
        lo, hi = ad.gap_of_means(parts, rank, 0.05)
        covered += lo <= 0.3 <= hi
    assert covered >= 57


def _gbm_rows(rng, n, shares):
    rows = []
    for k in range(n):
        s = "positive" if k % 2 == 0 else "negative"
        f, m = shares[s]
        jitter = rng.uniform(-0.05, 0.05, 2)
        rows.append({"id": str(k), "prompt": "", "score": 0.0, "sentiment": s,
                     "female": float(np.clip(f + jitter[0], 0, 1)), "male": float(np.clip(m + jitter[1], 0, 1))})
    return rows


def test_gbm_interval_holds_the_value_of_the_population_it_samples():
    from bias_core.metrics.gbm import gbm_value

    shares = {"positive": (0.3, 0.2), "negative": (0.15, 0.25)}
    truth = gbm_value(0.2, 0.3, 0.5, 0.25, 0.15, 0.6)  # (F+ - M+)/N+ + (M- - F-)/N-
    rng = np.random.default_rng(0)
    rows = _gbm_rows(rng, 2000, shares)
    result = MetricResult("GBM", 0.0, 0.0, 0.0, len(rows), details=tuple(rows))
    lo, hi = ad.gbm_interval(result, {r["id"]: k for k, r in enumerate(rows)}, 0.05)
    assert lo <= truth <= hi and hi - lo < 1.0
    few = MetricResult("GBM", 0.0, 0.0, 0.0, 4, details=tuple(rows[:4]))
    assert ad.gbm_interval(few, {}, 0.05) == (-math.inf, math.inf)  # a neutral share may still be 0


def test_bpr_spread_interval_uses_one_sequence_per_wording():
    rng = np.random.default_rng(1)
    rows = [{"id": f"k{k}", "prompt": "", "score": 0.0,
             "choices": {"a": float(rng.random() < 0.2), "b": float(rng.random() < 0.6)}} for k in range(400)]
    result = MetricResult("BPR_spread", 0.4, 0.0, 0.0, 400, details=tuple(rows))
    lo, hi = ad.spread_interval(result, {r["id"]: k for k, r in enumerate(rows)}, 0.05)
    assert 0.0 < lo <= 0.4 <= hi < 0.8


# ----- through a suite ---------------------------------------------------------------------------
@dataclass
class _CoinSuite(Suite):
    """A pool of 3,000 coins with P(1) = p; the metric is their mean (like GAS)."""

    p: float = 0.1
    computed: list = field(default_factory=list)

    def load_probe(self, name):
        coins = _stream(self.p, 3000, 42)
        return Probe(name, "1", tuple(ProbeItem(f"c{k}", "", {"v": float(v)}) for k, v in enumerate(coins)))

    def compute(self, probe_name, metric):
        probe = self.probe(probe_name)
        self._pool.computed.append(len(probe.items)) if self._pool is not None else self.computed.append(len(probe.items))
        return _mean_result([i.meta["v"] for i in probe.items], probe.ids, metric)


def _suite(p, mode="auto", seed=0):
    plan = ad.SamplePlan(mode, budget_s=None, probes=("natural-stsb",))
    return _CoinSuite(lm=None, seed=seed, sampling=plan, gate_for=lambda m, p_: GATE, p=p)


def test_a_suite_audits_a_seeded_prefix_and_says_how_it_stopped():
    suite = _suite(0.1)
    result = suite.result("natural-stsb", "GAS")
    s = result.breakdown["sampling"]
    assert s["stop_reason"] == ad.DECIDED and s["interval"] == ad.CS_KIND
    assert suite.computed == s["looks"] and result.n == s["items_used"]
    assert verdict(result.ci_low, result.ci_high, GATE) == PASS
    again = _suite(0.1).result("natural-stsb", "GAS")
    assert [d["id"] for d in again.details] == [d["id"] for d in result.details]
    other = _suite(0.1, seed=1).result("natural-stsb", "GAS")
    assert [d["id"] for d in other.details] != [d["id"] for d in result.details]


def test_fixed_modes_keep_the_bootstrap_and_say_so():
    fixed = _suite(0.1, mode="fixed").result("natural-stsb", "GAS")
    assert fixed.n == 3000 and fixed.breakdown["sampling"]["stop_reason"] == "fixed sample"
    numbered = _suite(0.1, mode="100").result("natural-stsb", "GAS")
    assert numbered.n == 100 and numbered.breakdown["sampling"]["mode"] == "fixed 100"
    assert numbered.breakdown["sampling"]["interval"] == ad.BOOTSTRAP_KIND
    unsampled = _suite(0.1).result("template-hobby", "GAS")
    assert unsampled.n == 3000 and unsampled.breakdown["sampling"]["mode"].startswith("fixed")


def test_mitigation_keeps_the_disclosure_and_da_gender_probes_whole():
    plan = ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=True)
    assert not plan.samples("natural-stsb") and not plan.samples("da-gender") and plan.samples("genderpair-group1")
    plan = ad.plan_for(ad.SampleOptions(), genderpair_fixed=True, paired=False)
    assert plan.samples("crows-pairs-gender") and not plan.samples("genderpair-groups")


def test_a_run_against_a_baseline_keeps_genderpairs_fixed_sample_as_the_stored_baseline_has_it():
    """The documented candidate command (no --sample) against a baseline stored with --sample
    fixed: an adaptive GenderPair sample would stop at another size, and the baseline be refused."""
    stored = ad.plan_for(ad.SampleOptions("fixed"), genderpair_fixed=False, paired=False)
    candidate = ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=True, baseline=True)
    for probe in ("genderpair-group1", "genderpair-group2", "genderpair-group3", "genderpair-groups"):
        assert not stored.samples(probe) and not candidate.samples(probe)
    assert candidate.fixed_size("bbq-gender") == stored.fixed_size("bbq-gender") == 1024


def test_under_exact_precision_gld_looks_are_computed_in_fp32():
    from bias_core.gating.precision_recheck import ExactGate

    class _Exact:
        precision = "exact"

        def fp32(self):
            return _Fp32()

    class _Fp32:
        precision = "fp32"

    @dataclass
    class _Lm(_CoinSuite):
        def compute(self, probe_name, metric):
            result = super().compute(probe_name, metric)
            result.breakdown["lm"] = self.lm.precision
            return result

    plan = ad.SamplePlan(budget_s=None, probes=("natural-stsb",))
    gld = Gate("GLD", 0.30, "max", "metrics.GLD")
    suite = _Lm(lm=_Exact(), sampling=plan, gate_for=lambda m, p: gld, precision_check=ExactGate(lambda m, p: gld))
    result = suite.result("natural-stsb", "GLD")
    assert result.breakdown["lm"] == "fp32" and result.breakdown["precision"]["computed_in"] == "fp32"
    assert result.breakdown["sampling"]["interval"] == ad.CS_KIND


def test_each_own_interval_names_the_sequence_it_uses():
    """The sampling record says which interval decided a row: the asymptotic sequence (approximate
    coverage) where the metric's own interval is built on it, the betting one elsewhere."""
    import inspect

    from bias_core import catalogue
    from bias_core.metric_spec import ASYMPTOTIC, OwnInterval, resolve

    own = [m for m in catalogue.declared() if isinstance(m.sampling, OwnInterval)]
    assert own
    for m in own:
        source = inspect.getsource(resolve(m.sampling.function))
        uses_asymptotic = "asymptotic_cs" in source
        assert (m.sampling.kind == ASYMPTOTIC) == uses_asymptotic, m.name


def test_a_look_records_the_interval_kind_it_was_given():
    plan = ad.SamplePlan(budget_s=None, probes=("p",))
    result = ad.run_adaptive(plan, None, 10, 10, lambda n: MetricResult("m", 0.5, 0.4, 0.6, n),
                             lambda r, n: (0.4, 0.6), kind="some sequence")
    assert result.breakdown["sampling"]["interval"] == "some sequence"
