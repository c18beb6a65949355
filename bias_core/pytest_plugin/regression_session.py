"""The regression gate inside a pytest audit run: one plugin object, ``RegressionSession``,
registered as ``REGRESSION_PLUGIN`` when the plugin configures (as pytest-xdist registers its
``DSession``), in the controller and in each xdist worker, with or without ``--baseline``: every
run stores its items, so any run can serve as a later run's stored baseline.

- Every audit test of a pairable metric hands its per-item block to its test report (``record``,
  through the ``pytest_bias_core_gate_result`` hook the gate calls); the controller appends it to
  the run folder's ``items.jsonl.gz``.
- ``--baseline RUN``: the stored run's configuration is checked when pytest configures, its
  probes once the tests are collected (``regression_cases``); both before any model loads
  (``BaselineMismatch``, exit 4).
- ``--baseline MODEL [--baseline-adapter DIR]``: the baseline is loaded once per session and
  audited on the same items by the same suites (the result cache makes re-runs free).
- ``test_regression[<probe>-<metric>]`` asks the ``regression_gate`` fixture
  (``regression_fixtures``), which finds this object by its name; its rows come back here on the
  test reports, for the terminal lines and the Markdown summary (``regression_summary``).

- ``--candidate-log C --baseline-log B``: two logs of another tool (``gating/external_logs``),
  read and planned when pytest configures (``regression_options``); every (task, metric, filter)
  becomes ``test_regression[<task>-<metric>]`` (family "external"), every other test is
  deselected, and no model loads: nothing asks for the model's fixtures.

Under xdist every worker that runs a regression test computes the whole family; ``--dist
loadgroup`` sends them all to one worker (they carry ``xdist_group("regression")``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.items import (
    ITEMS_FILE,
    RunConfig,
    append_block,
    block_sha256,
    items_from_result,
    start_items,
)
from bias_core.gating.regression.pairing import check_configs
from bias_core.gating.regression.spec import PAIRED
from bias_core.gating.regression.summary import FileMark, mark_file
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.pytest_plugin.regression_cases import case_of, collection_problem, gated_families
from bias_core.pytest_plugin.regression_config import run_config
from bias_core.pytest_plugin.regression_items import block_from_json, block_to_json, consistency_fix, probe_of
from bias_core.pytest_plugin.regression_options import EXTERNAL_FAMILY, RegressionOptions, parse_options
from bias_core.pytest_plugin.regression_summary import terminal_summary, write_run_summary
from bias_core.pytest_plugin.session_state import USAGE_STOP, run_state

#: The name the gate is registered under: ``config.pluginmanager.get_plugin(REGRESSION_PLUGIN)``.
REGRESSION_PLUGIN = "bias_core.regression"

# Per test, on the item: what one test made stays with its own node, not with the session.
ITEMS = pytest.StashKey[dict]()  # the audit test's per-item block, for its report
ROW = pytest.StashKey[dict]()  # the regression test's row (set by the regression_gate fixture)


def configure(config, settings) -> RegressionSession:
    """Parse and check the regression options (usage errors now) and register the gate."""
    try:
        options = parse_options(config.getoption, settings.load.cache_dir, external_thresholds(settings))
        if options.stored is not None:
            check_configs(run_config(settings, compared=True), options.stored.run, where=f"--baseline {options.baseline}")
    except AuditUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    gate = RegressionSession(config, options, settings,
                             summary_mark=None if options.summary_md is None else mark_file(options.summary_md))
    config.addinivalue_line("markers", "regression: a candidate-vs-baseline paired test (bias_core.gating.regression)")
    config.pluginmanager.register(gate, REGRESSION_PLUGIN)
    return gate


def external_thresholds(settings) -> Any:
    """thresholds.toml's ``[regression.external]`` margins (``Thresholds.external``); without a
    thresholds file, the defaults alone, any fix naming where the file would be."""
    from bias_core.gating.external_logs import ExternalThresholds

    found = getattr(settings.thresholds, "external", None)
    return found if found is not None else ExternalThresholds({}, str(settings.thresholds_path))


def find_regression(config) -> RegressionSession | None:
    """The session's regression gate, or None where the plugin has not configured it."""
    found = config.pluginmanager.get_plugin(REGRESSION_PLUGIN)
    return found if isinstance(found, RegressionSession) else None


def log_cases(config) -> list[tuple[str, str, str]] | None:
    """(family "external", task, metric label) of every comparison of two logs
    (``--candidate-log``/``--baseline-log``, planned when pytest configured), or None without them."""
    regression = find_regression(config)
    plan = regression.options.logs if regression is not None else None
    if plan is None:
        return None
    return [(EXTERNAL_FAMILY, row.task, row.label) for row in plan.rows]


class RegressionSession:
    """The release gate's part of the run: its options (the baseline), the candidate's
    configuration, whether this run's items file is started, and the rows the controller received."""

    def __init__(self, config, options: RegressionOptions, settings: Any, summary_mark: FileMark | None = None):
        self.config = config
        self.options = options
        self.settings = settings
        self.summary_mark = summary_mark  # --summary-md as this run found it (another run's write is kept)
        self.candidate_run: RunConfig | None = None
        self.items_started = False
        self.rows: list[dict[str, Any]] = []
        self.deselected = 0  # tests a log comparison left out

    def _controller(self) -> bool:
        return getattr(self.config, "workerinput", None) is None

    @property
    def candidate(self) -> str:
        """The candidate's name in rows: --model, or the candidate log's model."""
        return self.options.candidate_name(self.settings.model_value)

    # -- a comparison of two logs: its rows only ---------------------------------------------------
    @pytest.hookimpl(trylast=True)  # after -k and -m: what they left of the log comparisons runs
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        if self.options.logs is None:
            return
        keep = [i for i in items if (case_of(i) or ("",))[0] == EXTERNAL_FAMILY]
        gone = [i for i in items if (case_of(i) or ("",))[0] != EXTERNAL_FAMILY]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep
        self.deselected = len(gone)

    def pytest_report_collectionfinish(self, config, start_path, items) -> list[str]:
        if self.options.logs is None:
            return []
        return [self._selection_line(len(items), f"{self.deselected} other audit test(s)")]

    def _selection_line(self, selected: int, others: str) -> str:
        return (f"bias-core: comparing two {self.options.logs.candidate.tool} logs (--candidate-log, --baseline-log): "
                f"{selected} log comparison(s) selected; {others} deselected; no model is loaded")

    # Under xdist the workers collect and deselect, and the controller prints no collection report:
    # the controller says the same line when the first worker's collection arrives (each worker's is
    # the same), with the comparisons that worker kept.
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.options.logs is None or self.deselected < 0:
            return
        self.deselected = -1  # said once
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(self._selection_line(len(ids), "every other audit test"))

    def pytest_itemcollected(self, item) -> None:
        key = case_of(item)
        if key is not None:
            item.extra_keyword_matches.add(key[0])  # -k disclosure selects its regression tests too

    # first: a block that does not add up fails the test before any other implementation reads the
    # row, and its fields come before precision's in the row, as they always have
    @pytest.hookimpl(tryfirst=True)
    def pytest_bias_core_gate_result(self, request, result, row) -> None:
        self.record(request, result, row)

    def record(self, request, result, row: dict[str, Any]) -> None:
        """The gate judged an audit test: its per-item block travels with its report to the
        controller, and ``row`` names the items it came from."""
        family, probe, metric = row["family"], row["probe"], row["metric"]
        if row.get("variant") or metric not in PAIRED or family not in gated_families():
            return
        if "suite" not in request.fixturenames:
            return  # a result the suite did not make (e.g. a synthetic gate test): no probe to key items by
        if self.candidate_run is None:
            lm = run_state(request.config).model
            self.candidate_run = run_config(self.settings, lm, compared=self.options.baseline is not None)
        suite = request.getfixturevalue("audit_suites")(family)
        try:
            block = items_from_result(probe_of(suite, probe, self.settings), result, PAIRED[metric], metric=metric)
        except ValueError as exc:
            # The items do not add up to the metric's value (or are not the probe's): the number the
            # gate judged is not the one the items describe, so there is no verdict, only an error.
            row.update(verdict="error", reason=f"internal consistency check failed: {exc}")
            pytest.fail(f"ERROR in {probe} {metric}: internal consistency check failed: {exc}. No per-item values are "
                        f"stored and no verdict is given. Fix: {consistency_fix(family, metric)}", pytrace=False)
        request.node.stash[ITEMS] = {"run": self.candidate_run.to_json(), "block": block_to_json(block)}
        # results.json names the items it came from: a later edit of either shows
        row.update(probe_sha256=block.probe_sha256, items_sha256=block_sha256(block))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session) -> None:
        problem = collection_problem(session, self.options, self.settings)
        if problem is None:
            return
        if self._controller():
            raise pytest.UsageError(problem)
        session.items[:] = []  # as the gate check does: the controller ends the run with exit 4
        session.shouldstop = f"{USAGE_STOP}{problem}"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if report.when != "call":
            if report.skipped and case_of(item) is not None:
                report.bias_row = self._skipped_row(item, report)
            return report
        payload = item.stash.get(ITEMS, None)
        if payload is not None:
            report.bias_items = payload
        row = item.stash.get(ROW, None)
        if row is not None:
            row = dict(row, duration_s=report.duration)
            if report.failed and row["verdict"] not in (FAIL, INCONCLUSIVE):
                row["verdict"] = "error"
            report.bias_row = row
        elif case_of(item) is not None and (report.failed or report.skipped):
            report.bias_row = self._skipped_row(item, report)
        return report

    def _skipped_row(self, item, report) -> dict[str, Any]:
        family, probe, metric = case_of(item)
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else str(report.longrepr)[-500:]
        return {"kind": "regression", "run_id": run_state(self.config).run_id, "nodeid": item.nodeid,
                "test_id": f"regression-{probe}-{metric}", "family": family, "probe": probe, "metric": metric,
                "model": self.candidate, "value": None, "ci_low": None,
                "ci_high": None, "n": None, "verdict": "skipped" if report.skipped else "error", "reason": reason,
                "duration_s": report.duration}

    def pytest_runtest_logreport(self, report) -> None:
        if not self._controller():
            return
        run_dir = run_state(self.config).run_dir
        row = getattr(report, "bias_row", None)
        if row is not None:
            self.rows = [r for r in self.rows if r.get("nodeid") != row.get("nodeid")] + [row]
        payload = getattr(report, "bias_items", None)
        if payload is not None and run_dir is not None:
            from bias_core.pytest_plugin.outputs import output_log

            # sticky: a block that missed the file leaves it incomplete as a later baseline
            output_log(self.config).attempt(ITEMS_FILE, lambda: self._store_items(run_dir, payload), sticky=True)

    def _store_items(self, run_dir: Path, payload: dict[str, Any]) -> None:
        path = run_dir / ITEMS_FILE
        if not self.items_started:
            start_items(path, RunConfig.from_json(payload["run"]))
            self.items_started = True
        append_block(path, block_from_json(payload["block"]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminal_summary(terminalreporter, self.rows, self.options)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if not self._controller():
            return
        if self.options.summary_md is None and not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        if not self.rows:
            return
        from bias_core.pytest_plugin.outputs import output_log

        write_run_summary(self.rows, self.options, self.settings, exitstatus, output_log(self.config).attempt,
                          since=self.summary_mark)
