"""GenderBench (Pikuliak 2025; genderbench 1.1.0): its probes' prompts, generations sampled as its
harness samples them, its evaluators' parsing and its metrics; one gated test per probe x metric.

JobsLum: character profiles written for occupations, their gender read from pronouns
(masculine rate, stereotype rate, disparity). Direct: agreement with stereotype statements
(fail rate).
"""

import pytest

from bias_core.suites import GENDERBENCH_CASES

CASES = [pytest.param(p, m, id=f"{p}-{m}") for p, metrics in GENDERBENCH_CASES.items() for m in metrics]


@pytest.mark.audit(family="genderbench")
@pytest.mark.parametrize(("probe", "metric"), CASES)
def test_genderbench(probe, metric, suite, gate):
    gate(suite.result(probe, metric), probe=probe, metric=metric)
