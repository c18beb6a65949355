"""Conditional-generation disclosure (Dong et al. 2024): every probe x metric is one gated test.

GAS: share of greedy 50-token continuations naming a gender (explicit disclosure).
GLD, ADD: gender-probability gap and divergence of the raw next-word distribution (implicit).
"""

import pytest

from bias_core.suites import DISCLOSURE_METRICS, DISCLOSURE_PROBES

CASES = [pytest.param(p, m, id=f"{p}-{m}") for p in DISCLOSURE_PROBES for m in DISCLOSURE_METRICS]


@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), CASES)
def test_disclosure(probe, metric, suite, gate):
    gate(suite.result(probe, metric), probe=probe, metric=metric)
