"""The run folder's files, kept current by the controller: results.json/.csv and report.html after
every test, marked partial from the start so a run killed at any point says so; the banner at
the end."""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from pathlib import Path

import pytest

from bias_core.pytest_plugin import cache_card
from bias_core.pytest_plugin.regression_cases import case_of
from bias_core.pytest_plugin.run_card import model_card, run_info
from bias_core.pytest_plugin.session_state import USAGE_STOP, run_state
from bias_core.storage.redaction import redact


class Reporter:
    """Collects result rows in the controller and keeps the run folder's files current."""

    def __init__(self, config):
        self.config = config
        self.run = run_state(config)
        self.table = None
        self.interrupted: BaseException | None = None

    def _table(self):
        if self.table is None:
            from bias_core.reports.table import ResultsTable

            self.table = ResultsTable(self.run.run_dir, run_info(self.config))
        return self.table

    # A run killed at any point (SIGKILL, a lost CI runner) must leave a report that says it is
    # partial: the files say so from the start and only the end of a normal session changes it.
    def pytest_collection_finish(self, session) -> None:
        if any(item.get_closest_marker("audit") or case_of(item) for item in session.items):
            self._start()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if ids:  # the controller does not see markers: any run under xdist gets the early files
            self._start()

    def _start(self) -> None:
        if self.table is not None:
            return
        from bias_core.pytest_plugin.outputs import junit_destination, output_log

        table, log = self._table(), output_log(self.config)
        xml = junit_destination(self.config)
        if xml is not None:
            from bias_core.reports.junit import write_unfinished

            log.attempt("junit.xml", lambda: write_unfinished(xml))
        log.attempt("report.html", table.write_html)
        log.attempt("results.json, results.csv", table.write)  # last: once it exists, every file of the run says "partial"

    def pytest_runtest_logreport(self, report) -> None:
        cache_card.record(self.config, getattr(report, "bias_cache", None))
        row = getattr(report, "bias_row", None)
        if row is not None:
            from bias_core.pytest_plugin.outputs import output_log

            table = self._table()
            table.add(row)
            # after every test: an interrupted run keeps what it had
            output_log(self.config).attempt("results.json, results.csv", table.write)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.interrupted = excinfo.value

    def _partial_reason(self, session, exitstatus) -> str | None:
        """Why the run did not finish normally, or None when it did (secrets redacted)."""
        reason = self._why_partial(session, exitstatus)
        return None if reason is None else redact(reason)

    def _why_partial(self, session, exitstatus) -> str | None:
        n = len(self.table.rows) if self.table is not None else 0
        exc = self.interrupted
        if isinstance(exc, KeyboardInterrupt) and str(exc).startswith(USAGE_STOP):
            return f"stopped after {n} result(s): {str(exc)[:1000]}"
        if isinstance(exc, KeyboardInterrupt):
            how = "SIGTERM" if "SIGTERM" in str(exc) else "SIGINT / Ctrl-C (KeyboardInterrupt)"
            return f"interrupted by {how} after {n} result(s)"
        if exc is not None:  # pytest.exit(): e.g. a usage error found while loading the model
            return f"stopped after {n} result(s): {str(exc)[:1000]}"
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            return f"stopped after {n} result(s) with exit status {int(exitstatus)} ({pytest.ExitCode(exitstatus).name})"
        early = getattr(session, "shouldfail", False) or getattr(session, "shouldstop", False)
        if early:
            return f"stopped early after {n} result(s): {early}"
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        reason = self._partial_reason(session, exitstatus)
        if self.table is None or (not self.table.rows and reason is None):
            # No audit ran (e.g. a unit-test session): leave no empty run folder behind.
            shutil.rmtree(self.run.run_dir, ignore_errors=True)
            self.table = None  # and point no summary line at it
            if self.run.auto_junit:
                self._drop_auto_junit()
            return
        info = {"finished": _dt.datetime.now().isoformat(timespec="seconds"), "exitstatus": int(exitstatus)}
        lm = self.run.model
        if lm is not None:  # in-process runs only; xdist workers keep their own counts
            info["model_fingerprint"] = lm.fingerprint
            info["model_load_s"] = self.run.load_seconds
            info["engine_card"] = lm.info().as_dict()  # name, version, dtype, device, parallelism
            info["engine_stats"] = {k: int(v) for k, v in dict(getattr(lm, "stats", {}) or {}).items()}
            from bias_core.models.precision.modes import precision_info

            info["precision"] = precision_info(lm)
            info["model_card"] = model_card(self.config)
        cache = cache_card.card(self.config)  # this process's counts and each xdist worker's
        if cache is not None:
            info["cache"] = cache
        # Each file on its own: one that cannot be written (a full disk) leaves the others whole,
        # and the banner and exit status still come (bias_core/pytest_plugin/outputs.py).
        from bias_core.pytest_plugin.outputs import finish_junit, output_log
        from bias_core.reports.render import run_sections

        finish_junit(self.config, reason)
        log = output_log(self.config)
        if log.failed:
            info["report_incomplete"] = log.lines()
        self.table.set_run_info(info)
        log.attempt("results.json, results.csv", lambda: self.table.write(complete=reason is None, partial_reason=reason))
        log.attempt("report.html", lambda: self.table.write_html(
            extra_sections=run_sections(self.table.rows, Path(self.run.run_dir), write_csv=True,
                                        run_info=self.table.header)))

    def _drop_auto_junit(self) -> None:
        # Its "generated xml file" line would point at the folder just removed.
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        if xml is not None:
            self.config.pluginmanager.unregister(xml)
            del self.config.stash[xml_key]

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.table is None:
            return
        from bias_core.reports.banner import BLOCKED, PASSED, banner_for_run

        # the run info as written (complete, partial_reason), so terminal and files agree; from
        # memory, as results.json may be the one file a full disk kept from being written
        banner = banner_for_run(self.table.rows, self.table.header)
        color = {BLOCKED: "red", PASSED: "green"}.get(banner.status, "yellow")
        terminalreporter.write_sep("=", banner.headline, bold=True, **{color: True})
        for line in banner.lines[1:]:
            terminalreporter.line(line)
        run_dir = Path(self.run.run_dir)
        try:
            shown = os.path.relpath(run_dir)
        except ValueError:
            shown = str(run_dir)
        terminalreporter.write_sep("-", f"audit report: {shown}/ (report.html, results.json, results.csv, junit.xml)")
