"""Release gate: the candidate (``--model``, ``--adapter``) against a baseline (``--baseline``).

One paired test per probe x metric that can be compared item by item: per-item candidate minus
baseline on the same items, prompts and decoding; a non-inferiority gate on the metric's margin
(``[regression.<metric>]`` in thresholds.toml); p-values adjusted across the run. Without
``--baseline`` there is nothing to compare and the placeholder skips.

With ``--candidate-log`` and ``--baseline-log`` (two logs of lm-evaluation-harness or inspect_ai),
one test per task x metric of the logs, ``test_regression[<task>-<metric>]``, and no other test.
"""

import pytest

NO_BASELINE = pytest.param(None, None, None, marks=pytest.mark.skip(reason="no --baseline given"),
                           id="no-baseline")


def pytest_generate_tests(metafunc):
    from bias_core.pytest_plugin.regression_cases import regression_cases
    from bias_core.pytest_plugin.regression_session import log_cases
    from bias_core.pytest_plugin.session_state import run_state

    logs = log_cases(metafunc.config)
    if logs is not None:
        metafunc.parametrize(("family", "probe", "metric"), [pytest.param(f, t, m, id=f"{t}-{m}") for f, t, m in logs])
        return
    if metafunc.config.getoption("--baseline") is None:
        metafunc.parametrize(("family", "probe", "metric"), [NO_BASELINE])
        return
    cases = regression_cases(run_state(metafunc.config).settings)  # every family's pairable cases, packages' included
    metafunc.parametrize(("family", "probe", "metric"), [pytest.param(f, p, m, id=f"{p}-{m}") for f, p, m in cases])


@pytest.mark.regression
@pytest.mark.xdist_group("regression")
def test_regression(family, probe, metric, regression_gate):
    regression_gate(family, probe, metric)
