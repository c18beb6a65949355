"""The plugin's hooks: options, the run folder, the gate check before any model loads, test
outcomes (skips for missing data and engine capabilities, errors, inconclusive verdicts) and
result rows.

Registered through the ``pytest11`` entry point ``bias_core.plugin`` with ``fixtures`` (the
``gate`` fixture judges a MetricResult and hands a row to the report). Rows travel from xdist
workers to the controller as an attribute of the test report (pytest serialises report
attributes), and the controller's ``reporter`` rewrites the results table after every test so an
interrupted run stays readable.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import secrets
import shutil
import signal
import threading
from pathlib import Path

import pytest

from bias_core.errors import AuditUsageError, DataSourceMissing, EngineUnavailable, NonFiniteScores, ProbeNotApplicable
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.pytest_plugin import cache_card, precision_session, run_card
from bias_core.pytest_plugin.fixtures import audit_params
from bias_core.pytest_plugin.options import add_options, build_settings
from bias_core.pytest_plugin.report_redaction import redact_report
from bias_core.pytest_plugin.reporter import Reporter
from bias_core.pytest_plugin.session_state import ROW, USAGE_STOP, find_run, register_run, run_state
from bias_core.storage.redaction import has_secrets, redact
from bias_core.storage.visible import visible


def pytest_addoption(parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager) -> None:
    from bias_core.pytest_plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


class AuditWarning(pytest.PytestWarning):
    """Something the audit worked around (a read-only cache, a data file that is not the published one)."""


def _new_run_id(report_dir: Path | None, model: str) -> str:
    """A run id (time, model, random suffix) whose folder this call created.

    The folder is made with an exclusive mkdir, so two runs started in the same second, in
    parallel CI jobs or on a shared report dir, never share (and overwrite) one.
    """
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{stamp}-{re.sub(r'[^A-Za-z0-9._-]+', '_', Path(model).name or model)[:40]}"
    for _ in range(100):
        run_id = f"{base}-{secrets.token_hex(2)}"
        if report_dir is None:
            return run_id
        try:
            (report_dir / run_id).mkdir()
            return run_id
        except FileExistsError:
            continue
    raise AuditUsageError(f"--report-dir {report_dir}: no free run folder name after 100 tries. Fix: clean the folder.")


def _make_run_folder(report_dir: Path, model: str) -> str:
    """Validate --report-dir before anything loads and create this run's folder in it."""
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        return _new_run_id(report_dir, model)
    except OSError as exc:
        if report_dir.is_file() or isinstance(exc, FileExistsError):
            what = "is a file, not a folder"
        elif isinstance(exc, NotADirectoryError):
            what = "lies under a file, not a folder"
        else:
            what = f"cannot be written ({exc.strerror or exc})"
        raise AuditUsageError(
            f"--report-dir {report_dir}: {what}, so no run report could be written. Fix: point --report-dir at "
            "a writable folder (it is created if missing), or pass --no-report.") from None


def _interrupt_on_sigterm(config) -> None:
    """SIGTERM (a CI job's timeout, `kill`) ends the run as Ctrl-C does: reports say partial."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "audit(family): an audit test gated by thresholds.toml")
    from bias_core.pytest_plugin.extensions import load_entry_points

    load_entry_points(config.pluginmanager)  # installed packages' metrics, before thresholds.toml is read
    try:
        settings = build_settings(config)
    except AuditUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    run = register_run(config, settings)
    config.pluginmanager.register(precision_session, "bias_core.pytest_plugin.precision_session")
    from bias_core.pytest_plugin import regression_fixtures
    from bias_core.pytest_plugin.regression_session import configure as configure_regression

    regression = configure_regression(config, settings)  # --baseline etc.: checked before any model loads
    config.pluginmanager.register(regression_fixtures, "bias_core.pytest_plugin.regression_fixtures")
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        run.run_id = worker.get("bias_run_id", "")
        _share_cores(int(worker.get("workercount", 1)))
        from bias_core.models.placement.devices import take_worker_gpu

        take_worker_gpu(worker.get("workerid"), settings.load)
        return
    from bias_core.pytest_plugin.rootdir_check import rootdir_notice

    for notice in (*settings.notices, rootdir_notice(config)):
        if notice:
            config.issue_config_time_warning(AuditWarning(notice), stacklevel=2)
    from bias_core.pytest_plugin import outputs

    outputs.check_destinations(config, regression.options.summary_md)
    try:
        name = regression.candidate  # --model, or the candidate log's model
        if settings.report_dir is not None:
            run_id = _make_run_folder(settings.report_dir, name)
        else:
            run_id = _new_run_id(None, name)
    except AuditUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    run_dir = settings.report_dir / run_id if settings.report_dir else None
    if run_dir is not None:
        try:
            outputs.check_report_folder(run_dir)
        except pytest.UsageError:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
    _interrupt_on_sigterm(config)
    run.run_id, run.run_dir = run_id, run_dir
    run.started = _dt.datetime.now().isoformat(timespec="seconds")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistRunId(run_id), "bias_core.xdist_run_id")
        config.pluginmanager.register(_WorkerUsageError(), "bias_core.worker_usage_error")
    config.pluginmanager.register(outputs.OutputsPlugin(config), "bias_core.pytest_plugin.outputs")
    if run_dir is not None and not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(run_dir / "junit.xml")
        run.auto_junit = True
    if getattr(config.option, "xmlpath", None):
        outputs.redirect_junit(config, Path(config.option.xmlpath).expanduser())
    if run_dir is not None:
        config.pluginmanager.register(Reporter(config), "bias_core.reporter")


def pytest_report_header(config) -> list[str] | None:
    run = find_run(config)
    if run is None:
        return None
    settings = run.settings
    if run_card.log_plan(config) is not None:  # two logs compared: no model, device or definitions
        return run_card.log_header(config)
    target = run_card.target(config)
    batch = settings.load.batch_size or "auto"
    engine = f"engine {target['engine']}, " if target["engine"] != "transformers" else ""
    return [f"bias-core: model {settings.model_value}, {engine}device {target.get('device', '?')}, "
            f"dtype {target.get('dtype', '?')}, batch {batch}",
            *(f"bias-core: model card: {line}" for line in run_card.model_card(config)),
            f"bias-audit definitions: {run_card.definitions_line(settings)}",
            f"bias-audit sampling: {run_card.sampling_line(settings)}"]


def pytest_sessionstart(session) -> None:
    """Device, dtype and metric definitions as suite-level JUnit properties (each audit test also
    carries its own)."""
    from _pytest.junitxml import xml_key

    run = find_run(session.config)
    if run is not None:
        cache_card.start(session.config)  # the run card counts the result cache from here
    xml = session.config.stash.get(xml_key, None)
    if xml is None or run is None:
        return
    settings = run.settings
    if run_card.log_plan(session.config) is not None:
        for name, value in run_card.log_properties(session.config):
            xml.add_global_property(name, value)
        return
    for name, value in run_card.target(session.config).items():
        xml.add_global_property(name, value)
    # the paper-or-project definition choices (docs/audits/: departures from the papers)
    definitions = run_card.definitions(settings)
    xml.add_global_property("lexicon", settings.lexicon)
    xml.add_global_property("lexicon_pairs", " ".join(f"{f}/{m}" for f, m in definitions["lexicon"]["pairs"]))
    xml.add_global_property("articles", settings.articles)
    xml.add_global_property("causal_likelihood", settings.causal_likelihood)
    xml.add_global_property("sampling", run_card.sampling_line(settings))


def pytest_collection_modifyitems(session, config, items) -> None:
    """A probe whose data is free for non-commercial use only is off by default: its tests skip,
    naming the licence and the option, before any model loads."""
    run = find_run(config)
    settings = run.settings if run is not None else None
    if settings is None or settings.noncommercial_data:
        return
    from bias_core import catalogue

    for item in items:
        probe = audit_params(item)["probe"] if item.get_closest_marker("audit") else ""
        spec = catalogue.PROBES.get(probe) if probe else None
        if spec is not None and spec.noncommercial:
            item.add_marker(pytest.mark.skip(reason=f"off by default: {spec.noncommercial}. Fix: pass "
                                                    "--noncommercial-data if your use is non-commercial"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session) -> None:
    """Every selected audit must have a gate: a missing file or gate is a usage error now,
    before any model loads, not a failure in the middle of the run. Checked once -k/-m and
    other plugins have deselected what they will, so deselecting a metric's tests suffices."""
    problem = _gate_problem(session)
    if problem is None:
        return
    if getattr(session.config, "workerinput", None) is None:
        raise pytest.UsageError(problem)
    # An xdist worker cannot end the session with a usage error (the controller would see a
    # crashed worker): it runs nothing and asks the controller to stop, which exits with 4.
    session.items[:] = []
    session.shouldstop = f"{USAGE_STOP}{problem}"


def _gate_problem(session) -> str | None:
    run = find_run(session.config)
    settings = run.settings if run is not None else None
    audits = [item for item in session.items if item.get_closest_marker("audit")]
    if settings is None or not audits:
        return None
    if settings.thresholds is None:
        return (f"no thresholds file: {settings.thresholds_path} does not exist. Fix: pass --thresholds PATH "
                "or create thresholds.toml at the project root (see the repository's own file for the layout).")
    missing = sorted({audit_params(item)["metric"] for item in audits} - set(settings.thresholds.defaults) - {"", None})
    if not missing:
        return None
    tables = " ".join(f"[metrics.{m}]" for m in missing)
    return (f"{settings.thresholds_path}: no default gate for the collected metric(s) {', '.join(missing)}. "
            f"Fix: add {tables} with max = ... or min = ... (see the repository's thresholds.toml), "
            f"or deselect those tests (e.g. -k \"not {missing[0]}\").")


class _WorkerUsageError:
    """In the xdist controller: a worker's usage error arrives as an interruption; exit with 4."""

    def __init__(self):
        self.stopped = False

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.stopped = str(excinfo.value).startswith(USAGE_STOP)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self.stopped:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def _share_cores(workers: int) -> None:
    """Give each xdist worker its share of the cores: oversubscribed OpenMP threads spin against
    each other and made single forward passes 10-20x slower here."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, workers)))


class _XdistRunId:
    def __init__(self, run_id: str):
        self.run_id = run_id

    def pytest_configure_node(self, node) -> None:
        node.workerinput["bias_run_id"] = self.run_id


# ----- test outcome hooks ----------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except DataSourceMissing as exc:
        pytest.skip(visible(f"data missing: {exc}"))  # outside text (a data file's) never drives the terminal
    except ProbeNotApplicable as exc:  # an engine lacking a capability too (models.protocol.EngineCannot)
        pytest.skip(visible(f"not applicable: {exc}"))
    except EngineUnavailable as exc:  # a server gone away: every later test would wait for it too
        state = find_run(item.config)
        lm = state.model if state is not None else None
        pytest.exit(visible(redact(f"engine error in {item.nodeid}: {exc} {_what_is_kept(lm)}")),
                    returncode=pytest.ExitCode.INTERRUPTED)
    except (NonFiniteScores, AuditUsageError) as exc:  # NaN outputs, a broken data file, a prompt too long...
        if item.get_closest_marker("audit") is None:
            raise
        pytest.fail(visible(f"ERROR in {audit_params(item)['probe'] or item.nodeid}: {exc}"), pytrace=False)


def _what_is_kept(lm) -> str:
    """What a re-run can reuse, as it is: the result cache may be off (--no-cache)."""
    if lm is not None and lm.cache_stats().get("enabled"):
        return "The answers received before are in the result cache, so a re-run continues where this one stopped."
    return "No result cache is kept this run (--no-cache), so a re-run starts over."


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    counts = cache_card.for_report(item.config)
    if counts is not None:  # an xdist worker whose cache counts changed: they travel as rows do
        report.bias_cache = counts
    if has_secrets():  # the last line: a failure's text never shows or records a registered secret
        redact_report(report)
    if item.get_closest_marker("audit") is None:
        return report
    row = item.stash.get(ROW, None)
    if report.when == "call" and row is not None:
        row = dict(row, duration_s=report.duration)
        if report.failed and row["verdict"] not in (FAIL, INCONCLUSIVE):
            row["verdict"] = "error"
        report.bias_row = row
    elif report.skipped or (report.failed and row is None):
        p = audit_params(item)
        if not p["probe"]:  # a placeholder (e.g. no --mitigation given), not an audit of anything
            return report
        variant = (getattr(item, "callspec", None) and item.callspec.params.get("variant")) or None
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else str(report.longrepr)[-500:]
        from bias_core.pytest_plugin.result_row import result_row

        report.bias_row = dict(result_row(
            run_id=run_state(item.config).run_id, nodeid=item.nodeid, **p, variant=variant,
            model=run_state(item.config).settings.model_value, verdict="skipped" if report.skipped else "error",
            reason=reason).as_dict(), duration_s=report.duration)
    return report


def pytest_report_teststatus(report, config):
    row = getattr(report, "bias_row", None)
    if report.when == "call" and report.passed and row and row.get("verdict") == INCONCLUSIVE:
        return "inconclusive", "I", ("INCONCLUSIVE", {"yellow": True})
    return None


