"""What the pytest plugin keeps for a session and the modules it calls read back: the stash keys,
the run's sample plan, and a way to let progress bars through pytest's capture.

A leaf below the plugin, so the regression session and the suite factory need not import the
plugin (which imports them).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from bias_core.pytest_plugin.options import AuditSettings

SETTINGS = pytest.StashKey[AuditSettings]()
MODEL = pytest.StashKey[Any]()
ROW = pytest.StashKey[dict]()
RUN = pytest.StashKey[dict]()
RECHECKS = pytest.StashKey[dict]()

#: An xdist worker's usage error reaches the controller as an interruption with this prefix.
USAGE_STOP = "usage error: "


@contextlib.contextmanager
def terminal(config):
    """Let progress bars reach the terminal while pytest captures test output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


def plan(config):
    """The run's sample plan (one per process: its time budget counts from the session's start)."""
    run = config.stash[RUN]
    if "plan" not in run:
        from bias_core.gating.adaptive_sampling import plan_for

        settings = config.stash[SETTINGS]
        gp_fixed = config.getoption("--genderpair-sample") is not None or settings.sample.mode.isdigit()
        # paired comparisons (--mitigation variants, a --baseline) need both sides on the same items
        paired = bool(settings.mitigations) or config.getoption("--baseline", None) is not None
        run["plan"] = plan_for(settings.sample, genderpair_fixed=gp_fixed, paired=paired)
    return run["plan"]


def sampling(config, settings: AuditSettings) -> dict[str, Any]:
    """Suite arguments for --sample: the plan and the gate each look judges by."""
    thresholds = settings.thresholds
    gate_for = None if thresholds is None else (lambda metric, probe: thresholds.lookup(metric, probe, settings.model_value))
    return {"sampling": plan(config), "gate_for": gate_for}
