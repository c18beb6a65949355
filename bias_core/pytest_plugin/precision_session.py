"""``--precision`` in each audit test's row (registered by the plugin when pytest configures, in the
controller and in each xdist worker): the mode, the calibrated bound and the work re-checked in
fp32 while the test ran, attached through the ``pytest_bias_core_gate_result`` hook."""

from __future__ import annotations

from typing import Any

import pytest

from bias_core.pytest_plugin.session_state import find_run

RECHECKS = pytest.StashKey[tuple]()  # per test: the model's re-check counts and fp32 seconds when its call began


def _model(config) -> Any:
    run = find_run(config)
    return run.model if run is not None else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    lm = _model(item.config)
    if lm is not None:  # loaded by the session fixture, so before any test's call begins
        from bias_core.models.precision.modes import fp32_seconds, rechecks_snapshot  # imports torch: once loaded

        item.stash[RECHECKS] = (rechecks_snapshot(lm), fp32_seconds(lm))
    return (yield)


@pytest.hookimpl(trylast=True)  # after the release gate's fields: the row's columns keep their order
def pytest_bias_core_gate_result(request, row) -> None:
    lm = _model(request.config)
    if lm is not None:
        from bias_core.models.precision.modes import test_precision_fields

        before, seconds = request.node.stash.get(RECHECKS, ({}, None))
        row.update(test_precision_fields(lm, before, seconds))
