"""GenderPair (GenderCARE, Tang et al. 2024): one gated test per group x metric, the spread
across the three gender groups, and BPR's robustness to reworded instructions.

The regard metrics are named for the scorer in use: ``regard_*`` (the paper's regard model) or
``regard_proxy_*`` (offline VADER sentiment, a proxy that is never reported as regard).
"""

import pytest

from bias_core.suites import genderpair_cases


def pytest_generate_tests(metafunc):
    from bias_core.classifiers import get_regard

    proxy = get_regard(metafunc.config.getoption("--regard-classifier")).is_proxy
    cases = genderpair_cases(proxy)
    metafunc.parametrize(("probe", "metric"), [pytest.param(p, m, id=f"{p}-{m}") for p, ms in cases.items() for m in ms])


@pytest.mark.audit(family="genderpair")
def test_genderpair(probe, metric, suite, gate):
    gate(suite.result(probe, metric), probe=probe, metric=metric)
