"""Debiasing / over-debiasing trade-off (DA-Gender, issue 15): ``pytest audits --mitigation-sweep quick``.

CDS, ER and SentenceDebias run over a strength grid; every point's over-debiasing guards are
gated like any mitigation's. The curves (bias vs 1 − DA_score) and the point to take are in
the run folder (tradeoff.csv, tradeoff_<metric>.svg) and the HTML report.
"""

import pytest

from bias_core.suites import MITIGATION_GUARDS

NO_SWEEP = pytest.param(None, None, None, marks=pytest.mark.skip(reason="no --mitigation-sweep given"), id="no-sweep")


def pytest_generate_tests(metafunc):
    from bias_core.mitigation.evaluation.tradeoff_curves import parse_grid, variant_name

    grid = parse_grid(metafunc.config.getoption("--mitigation-sweep")) or {}
    # One group: under `-n N --dist loadgroup` the sweep runs once, on one worker.
    group = pytest.mark.xdist_group("tradeoff-sweep")
    cases = [pytest.param(variant_name(m, s), p, g, id=f"{variant_name(m, s)}-{g}", marks=group)
             for m, strengths in grid.items() for s in strengths for g, p in MITIGATION_GUARDS.items()]
    metafunc.parametrize(("variant", "probe", "metric"), cases or [NO_SWEEP])


@pytest.mark.audit(family="mitigation")
def test_tradeoff_point_guard(variant, probe, metric, tradeoff_sweep, gate):
    gate(tradeoff_sweep.guard(variant, metric), probe=probe, metric=metric, variant=variant)
