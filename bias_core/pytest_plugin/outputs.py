"""Where a run writes its reports: checked before any model loads, and written so that a failure
after the tests never loses the verdict.

- ``check_destinations``: every destination (``--report-dir``, ``--summary-md``,
  ``$GITHUB_STEP_SUMMARY``, ``--junitxml``, ``--html``) must be writable and have its folder
  (or be able to create it); a report dir also needs ``MIN_REPORT_FREE`` bytes free. A usage
  error names the option or variable and the fix.
- ``OutputLog.attempt``: one file's write; an OSError (a full disk, a folder removed mid-run) is
  recorded and the other files are still written. The banner is printed as usual, then what was
  not written, and the run exits with the gate's own non-zero code or ``REPORT_INCOMPLETE``.
- JUnit: pytest's junitxml plugin writes straight to its path (a full disk left a file cut at
  4,096 bytes). It writes to a temporary file beside the destination instead; the file is parsed
  (and marked partial where the run was) and moved into place, so the destination holds a whole
  XML file or none.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Exit status of a run whose gates all passed but one of whose report files was not written.
REPORT_INCOMPLETE = 6
#: Below this much free space a report dir is refused up front (a default audit's items file alone
#: takes 0.5-4 MB, benchmarks/RESULTS.md; report.html and results.json come on top).
MIN_REPORT_FREE = 16 * 2**20


@dataclass(eq=False)
class _JunitRedirect:
    """Where pytest's JUnit file goes: written to ``tmp``, moved to ``final`` once (``done``)."""

    final: Path
    tmp: Path
    done: bool = False


# This module's own state, in the config's stash: only its functions (output_log, redirect_junit,
# junit_destination, finish_junit) touch it.
OUTPUTS = pytest.StashKey["OutputLog"]()
_JUNIT = pytest.StashKey[_JunitRedirect]()
FIX_SPACE = "free space there or point the option elsewhere"


class ReportWriteWarning(pytest.PytestWarning):
    """A report file could not be written during the run; the next write tries again."""


# ----- before the model loads ------------------------------------------------------------------------
def destination_problem(path: Path, create_folders: bool) -> str | None:
    """Why ``path`` cannot be written (a file to create or replace), or None."""
    if path.is_dir():
        return "is a folder, not a file"
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if existing != folder and not create_folders:
        return f"its folder {folder} does not exist"
    try:  # what the writer will do: create (folders and) a file there
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".bias-core-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{existing} cannot be written ({exc.strerror or exc})"
    return None


def free_space_problem(folder: Path, needed: int | None = None) -> str | None:
    needed = MIN_REPORT_FREE if needed is None else needed
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        return f"its free space cannot be read ({exc.strerror or exc})"
    if free < needed:
        return f"only {free / 2**20:.2f} MiB free, {needed / 2**20:.0f} MiB needed for a run's reports"
    return None


def check_destinations(config, summary_md: Path | None) -> None:
    """Usage errors for output destinations, raised before any model loads (controller only)."""
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    checks = [("--summary-md", summary_md, True,
               "name a file in a writable folder (it is created if missing), or drop --summary-md"),
              ("$GITHUB_STEP_SUMMARY", Path(step) if step else None, False,
               "point GITHUB_STEP_SUMMARY at a file in an existing writable folder, or unset it (GitHub Actions sets "
               "it for each step)"),
              ("--junitxml", _given(config, "xmlpath"), True, "name a file in a writable folder, or drop --junitxml"),
              ("--html", _given(config, "htmlpath"), True, "name a file in a writable folder, or drop --html")]
    for option, path, create, fix in checks:
        found = destination_problem(path, create) if path is not None else None
        if found:
            raise pytest.UsageError(f"{option} {path}: {found}; the run could not write it after the tests. "
                                    f"Fix: {fix}.")


def check_report_folder(run_dir: Path) -> None:
    found = free_space_problem(run_dir)
    if found:
        raise pytest.UsageError(f"--report-dir {run_dir.parent}: {found}. Fix: {FIX_SPACE} (--report-dir), or pass "
                                "--no-report.")


def _given(config, dest: str) -> Path | None:
    value = getattr(config.option, dest, None)
    return Path(value).expanduser() if value else None


# ----- after the tests -------------------------------------------------------------------------------
class OutputLog:
    """What could not be written: {what: why}. A later successful write of the same file clears
    it (results.json is rewritten after every test) unless ``sticky`` (an appended file that
    missed a block stays incomplete)."""

    def __init__(self):
        self.failed: dict[str, str] = {}
        self._sticky: set[str] = set()

    def attempt(self, what: str, write: Callable[[], Any], sticky: bool = False) -> bool:
        try:
            write()
        except OSError as exc:
            self.record(what, exc, sticky)
            return False
        if what not in self._sticky:
            self.failed.pop(what, None)
        return True

    def record(self, what: str, exc: BaseException, sticky: bool = False) -> None:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if what not in self.failed:
            warnings.warn(ReportWriteWarning(f"{what}: could not be written ({reason}); the run goes on and writes "
                                             "the other report files."), stacklevel=3)
        self.failed[what] = reason
        if sticky:
            self._sticky.add(what)

    def lines(self) -> list[str]:
        return [f"{what}: not written ({why})" for what, why in sorted(self.failed.items())]


def output_log(config) -> OutputLog:
    log = config.stash.get(OUTPUTS, None)
    if log is None:
        log = config.stash[OUTPUTS] = OutputLog()
    return log


def redirect_junit(config, final: Path) -> None:
    """pytest's junitxml writes to a temporary file beside ``final`` (moved in by finish_junit)."""
    redirect = config.stash[_JUNIT] = _JunitRedirect(final, final.parent / f".{final.name}.{os.getpid()}.tmp")
    config.option.xmlpath = str(redirect.tmp)


def junit_destination(config) -> Path | None:
    redirect = config.stash.get(_JUNIT, None)
    return redirect.final if redirect else None


def guard_writers(config) -> None:
    """Report plugins that write at session end (junitxml, pytest-html) raise on a full disk, and a
    raising hook skips every later one (results.json, the summary): record their error instead."""
    from _pytest.junitxml import LogXML

    kinds: tuple[type, ...] = (LogXML,)
    with contextlib.suppress(ImportError):
        from pytest_html.basereport import BaseReport

        kinds += (BaseReport,)
    log = output_log(config)
    for impl in config.pluginmanager.hook.pytest_sessionfinish.get_hookimpls():
        if isinstance(impl.plugin, kinds) and not getattr(impl.function, "bias_core_guarded", False):
            what = "junit.xml" if isinstance(impl.plugin, LogXML) else f"--html {getattr(config.option, 'htmlpath', '')}"
            impl.function = _guarded(impl.function, log, what)


def _guarded(function, log: OutputLog, what: str):
    @functools.wraps(function)
    def call(*args, **kwargs):
        log.attempt(what, lambda: function(*args, **kwargs))

    call.bias_core_guarded = True
    return call


def finish_junit(config, partial_reason: str | None) -> None:
    """Move pytest's JUnit file into place once, whole (and marked partial where the run was)."""
    from _pytest.junitxml import xml_key

    from bias_core.reports.junit import finish, write_unfinished

    redirect = config.stash.get(_JUNIT, None)
    if redirect is None or redirect.done:
        return
    redirect.done = True
    log, tmp, final = output_log(config), redirect.tmp, redirect.final
    xml = config.stash.get(xml_key, None)
    if xml is None:  # dropped (no audit ran) or never configured
        return
    # pytest's own write failed (guard_writers recorded it), or its file is not whole XML
    if "junit.xml" not in log.failed and log.attempt("junit.xml", lambda: finish(tmp, final, partial_reason)):
        xml.logfile = os.path.abspath(final)  # pytest's "generated xml file" line names the real file
        return
    tmp.unlink(missing_ok=True)
    del config.stash[xml_key]  # as junitxml's own unconfigure does before it unregisters
    config.pluginmanager.unregister(xml)  # its "generated xml file" line would name a file that is not there
    with contextlib.suppress(OSError):  # a smaller file may still fit: CI then reads why
        write_unfinished(final, f"report incomplete: junit.xml could not be written ({log.failed.get('junit.xml')})")


class OutputsPlugin:
    """Controller only: finishes the JUnit file, sets the exit status and says what was not written."""

    def __init__(self, config):
        self.config = config

    def pytest_sessionstart(self, session) -> None:
        guard_writers(self.config)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        result = yield  # every writer has run (trylast: innermost wrapper)
        finish_junit(self.config, None)
        if output_log(self.config).failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = REPORT_INCOMPLETE
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus) -> None:
        lines = output_log(self.config).lines()
        if not lines:
            return
        code = REPORT_INCOMPLETE if exitstatus == pytest.ExitCode.OK else int(exitstatus)
        terminalreporter.write_sep("!", f"REPORT INCOMPLETE: {len(lines)} report file(s) not written", red=True, bold=True)
        for line in lines:
            terminalreporter.line(f"  {line}")
        why = f" ({REPORT_INCOMPLETE}: nothing blocked, but a report file is missing)" if code == REPORT_INCOMPLETE else ""
        terminalreporter.line(f"  The verdict above stands; exit status {code}{why}. Fix: free space or make the "
                              "destination writable, then "
                              "re-run (the result cache makes it fast) or rebuild report.html with "
                              "python -m bias_core.reports.render RUN_DIR.")
