"""Association audits (issue 5): DA-Gender over-debiasing, Kurita log-probability, SEAT,
StereoSet, CrowS-Pairs and sentiment-conditioned completions (GBM).

One gated test per probe x metric; probes that do not apply to the model kind, or whose data
is missing, skip with the reason.
"""

import pytest

from bias_core.suites import ASSOCIATION_CASES

CASES = [pytest.param(p, m, id=f"{p}-{m}") for p, metrics in ASSOCIATION_CASES.items() for m in metrics]


@pytest.mark.audit(family="association")
@pytest.mark.parametrize(("probe", "metric"), CASES)
def test_association(probe, metric, suite, gate):
    gate(suite.result(probe, metric), probe=probe, metric=metric)
