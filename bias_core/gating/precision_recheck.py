"""Continuous metrics under ``--precision exact``: verdicts equal fp32's.

A continuous metric (GLD, ADD, Kurita's logprob_effect, SEAT_effect, GBM) computed from
half-precision values differs from its fp32 value. Its verdict can differ only when the
half-precision error could carry an endpoint of its confidence interval across a threshold of
its gate. So, by each metric's catalogue ``precision`` (bias_core/metric_spec.py):

- ``Propagated`` (GLD and ADD) are computed in half precision, their propagated error is derived
  from the calibrated per-word bound b (below, ``gld_error`` and ``add_error``), and the metric is
  recomputed in fp32 exactly when a CI endpoint lies within that error of a threshold
  (``needs_fp32``);
- ``"fp32"``, metrics without a derived propagation (logprob_effect, SEAT_effect, GBM: effect
  sizes over permutations, embeddings, top-k sets), are computed in fp32 straight away;
- ``"decisions"`` are counts of decisions or of continuations that exact mode already makes
  equal to fp32's, and ``"inputs"`` comparisons of results that follow their own rule: both are
  computed as they come;
- with ``--mitigation``, the propagated metrics are computed in fp32 too: mitigated variants are
  trained and audited in fp32, and their paired comparisons need the original's fp32 values.

Propagation, with every word log-probability within b of fp32's (each resample's mean, and so
each percentile-bootstrap endpoint, moves by at most the largest per-item change):

- GLD item |F - M| / (F + M) = tanh(|ln F/M| / 2) is 1/2-Lipschitz in ln F/M, which moves by at
  most 2b: the item moves by at most b.
- ADD item (1/2) sum_i f(a_i, b_i), f(a, b) = a ln(2a/s) + b ln(2b/s), s = a + b: df/d ln a =
  a ln(2a/s), and |a ln(2a/s)| + |b ln(2b/s)| <= s ln 2; along the path s grows by at most e^b,
  so the item moves by at most (b e^b ln 2 / 2) (sum_f + sum_m + 2 n eps).

``ExactGate`` wires this into the suites: a Suite built with ``precision_check=ExactGate(...)``
routes ``result(probe, metric)`` through it (suites/base.py).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from bias_core import catalogue
from bias_core.metric_spec import Precision, Propagated, resolve
from bias_core.metrics import MetricResult

ADD_EPS_SLACK = 1e-8  # 2 x 22 word pairs x the metric's eps of 1e-10, rounded up


def rule(metric: str) -> Precision | None:
    """The metric's catalogue ``precision``; None for a metric the catalogue does not know."""
    found = catalogue.BY_NAME.get(metric)
    return None if found is None else found.precision


def is_propagated(metric: str) -> bool:
    return isinstance(rule(metric), Propagated)


def gld_error(result: MetricResult, word_bound: float) -> float:
    return float(word_bound)


def add_error(result: MetricResult, word_bound: float) -> float:
    b = float(word_bound)
    mass = max((float(d["sum_female"]) + float(d["sum_male"]) for d in result.details), default=0.0)
    return b * math.exp(b) * math.log(2.0) / 2.0 * (mass + ADD_EPS_SLACK)


def propagated_error(result: MetricResult, word_bound: float, metric: str) -> float | None:
    """How far half precision can move ``result``'s CI endpoints, given every word log-probability
    is within ``word_bound`` of fp32's; None when no propagation is derived for ``metric``."""
    found = rule(metric)
    return resolve(found.error)(result, word_bound) if isinstance(found, Propagated) else None


def thresholds_of(gate: Any) -> list[float]:
    """The values where the gate's verdict changes as a CI endpoint crosses them."""
    if gate.ideal is not None:
        return [gate.ideal - gate.limit, gate.ideal + gate.limit]
    return [gate.limit]


def needs_fp32(result: MetricResult, gate: Any, error: float | None) -> bool:
    """Whether the verdict of a half-precision ``result`` could differ from fp32's: a CI endpoint
    lies within ``error`` of a threshold of ``gate`` (None: unknown error, always)."""
    if error is None or not all(math.isfinite(x) for x in (result.ci_low, result.ci_high)):
        return True
    return any(abs(x - t) <= error for x in (result.ci_low, result.ci_high) for t in thresholds_of(gate))


def fp32_twin(suite: Any) -> Any:
    """The same suite on ``suite.lm.fp32()``, with fresh memos and no precision check."""
    fresh = {f.name: f.default_factory() for f in dataclasses.fields(suite)
             if f.name.startswith("_") and f.default_factory is not dataclasses.MISSING}
    return dataclasses.replace(suite, lm=suite.lm.fp32(), precision_check=None, **fresh)


class ExactGate:
    """``precision_check`` for suites: computes a result so that its verdict equals fp32's.

    ``gate_for(metric, probe)`` returns the gate that will judge the result (thresholds lookup).
    """

    def __init__(self, gate_for: Callable[[str, str], Any], propagated_in_fp32: bool = False):
        self.gate_for = gate_for
        # With --mitigation the propagated metrics too are computed in fp32 straight away: the
        # paired comparisons with fp32 variants use their original values.
        self.propagated_in_fp32 = propagated_in_fp32
        self._twins: dict[int, Any] = {}
        self.recomputed: list[str] = []

    def _twin(self, suite: Any) -> Any:
        if id(suite) not in self._twins:
            self._twins[id(suite)] = fp32_twin(suite)
        return self._twins[id(suite)]

    def __call__(self, suite: Any, probe: str, metric: str) -> MetricResult:
        lm = suite.lm
        how = rule(metric)
        if getattr(lm, "precision", None) != "exact" or not (how == "fp32" or isinstance(how, Propagated)):
            return suite.compute(probe, metric)
        if how == "fp32" or self.propagated_in_fp32:
            with lm.rechecks.timed():
                result = self._twin(suite).result(probe, metric)
            why = ("no propagation of the half-precision error is derived for this metric" if how == "fp32"
                   else "--mitigation compares it with fp32 variants")
            result.breakdown["precision"] = {"computed_in": "fp32", "why": why}
            return result
        from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS

        half = suite.compute(probe, metric)
        error = propagated_error(half, lm.word_bound(list(FEMALE_WORDS) + list(MALE_WORDS)), metric)
        try:
            gate = self.gate_for(metric, probe)
        except Exception:  # no gate to judge by: keep the verdict safe
            gate = None
        info = {"half_dtype": lm.half_dtype, "half_value": half.value, "half_ci": [half.ci_low, half.ci_high],
                "propagated_error": error}
        recompute = gate is None or needs_fp32(half, gate, error)
        lm.rechecks.add("continuous_metrics", int(recompute), 1)
        if not recompute:
            half.breakdown["precision"] = {"computed_in": lm.half_dtype, **info}
            return half
        self.recomputed.append(f"{probe}-{metric}")
        with lm.rechecks.timed():
            result = self._twin(suite).result(probe, metric)
        result.breakdown["precision"] = {"computed_in": "fp32", "why": "a CI endpoint lies within the propagated "
                                         "half-precision error of the gate's threshold", **info}
        return result
