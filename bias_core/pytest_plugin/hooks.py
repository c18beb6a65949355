"""The pytest plugin: options, session fixtures, the gate, verdict reporting and run reports.

Registered through the ``pytest11`` entry point ``bias_core.plugin``. Audit tests (marked
``audit``) call the ``gate`` fixture with a MetricResult; the gate looks the threshold up,
decides pass / fail / inconclusive, records JUnit properties and hands a result row to the
report. Rows travel from xdist workers to the controller as an attribute of the test report
(pytest serialises report attributes), and the controller rewrites the results table after
every test so an interrupted run stays readable.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import re
import secrets
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from bias_core.errors import AuditUsageError, DataSourceMissing, EngineUnavailable, NonFiniteScores, ProbeNotApplicable
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.models.progress import interactive
from bias_core.pytest_plugin.options import AuditSettings, add_options, build_settings
from bias_core.pytest_plugin.session_state import MODEL, RECHECKS, ROW, RUN, SETTINGS, USAGE_STOP, plan, terminal


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
    config.stash[SETTINGS] = settings
    from bias_core.pytest_plugin.regression_session import STATE as REGRESSION
    from bias_core.pytest_plugin.regression_session import configure as configure_regression

    configure_regression(config, settings)  # --baseline etc.: checked before any model loads
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        config.stash[RUN] = {"run_id": worker.get("bias_run_id", ""), "run_dir": None}
        _share_cores(int(worker.get("workercount", 1)))
        from bias_core.models.placement.devices import take_worker_gpu

        take_worker_gpu(worker.get("workerid"), settings.load)
        return
    for notice in settings.notices:
        config.issue_config_time_warning(AuditWarning(notice), stacklevel=2)
    from bias_core.pytest_plugin import outputs

    outputs.check_destinations(config, config.stash[REGRESSION].options.summary_md)
    try:
        if settings.report_dir is not None:
            run_id = _make_run_folder(settings.report_dir, settings.model_value)
        else:
            run_id = _new_run_id(None, settings.model_value)
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
    config.stash[REGRESSION].run_dir = run_dir  # the per-item file goes beside results.json
    config.stash[RUN] = {"run_id": run_id, "run_dir": run_dir, "auto_junit": False,
                         "started": _dt.datetime.now().isoformat(timespec="seconds")}
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistRunId(run_id), "bias_core.xdist_run_id")
        config.pluginmanager.register(_WorkerUsageError(), "bias_core.worker_usage_error")
    config.pluginmanager.register(outputs.OutputsPlugin(config), "bias_core.pytest_plugin.outputs")
    if run_dir is not None and not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(run_dir / "junit.xml")
        config.stash[RUN]["auto_junit"] = True
    if getattr(config.option, "xmlpath", None):
        outputs.redirect_junit(config, Path(config.option.xmlpath).expanduser())
    if run_dir is not None:
        config.pluginmanager.register(_Reporter(config), "bias_core.reporter")


def _definitions(settings: AuditSettings) -> dict[str, Any]:
    """Run-level record of the paper-or-project choices (docs/audits/: departures from the papers)."""
    from bias_core.probes.lexicon import get_lexicon

    lexicon = get_lexicon(settings.lexicon)
    return {"lexicon": {"name": lexicon.name, "pairs": [list(p) for p in lexicon.pairs]},
            "articles": settings.articles, "causal_likelihood": settings.causal_likelihood}


def _definitions_line(settings: AuditSettings) -> str:
    from bias_core.probes.lexicon import get_lexicon

    return (f"lexicon {get_lexicon(settings.lexicon).describe()}; articles {settings.articles}; "
            f"causal likelihood {settings.causal_likelihood}")


def _sampling_line(settings: AuditSettings) -> str:
    from bias_core.gating.adaptive_sampling import DEFAULT_CAP, PROBE_CAPS

    opts = settings.sample
    if opts.mode != "auto":
        return f"{opts.mode} (bootstrap CIs)"
    caps = opts.cap if opts.cap is not None else f"{DEFAULT_CAP} ({', '.join(f'{k} {v}' for k, v in PROBE_CAPS.items())})"
    budget = "none" if opts.budget_s is None else f"{opts.budget_s:g} s"
    return f"auto: item cap {caps}, budget {budget}, time-uniform confidence sequences"


def pytest_report_header(config) -> list[str] | None:
    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return None
    target = _target(config)
    batch = settings.load.batch_size or "auto"
    engine = f"engine {target['engine']}, " if target["engine"] != "transformers" else ""
    return [f"bias-core: model {settings.model_value}, {engine}device {target.get('device', '?')}, "
            f"dtype {target.get('dtype', '?')}, batch {batch}",
            *(f"bias-core: model card: {line}" for line in _model_card(config)),
            f"bias-audit definitions: {_definitions_line(settings)}",
            f"bias-audit sampling: {_sampling_line(settings)}"]


def _model_card(config) -> list[str]:
    """What was chosen for the user in loading the audited (and a live baseline) model: files, an
    adapter's base; once loaded in this process, what loading dropped (models/weights/load_report.py)."""
    from bias_core.pytest_plugin.regression_session import STATE as REGRESSION

    regression = config.stash.get(REGRESSION, None)
    lm = config.stash.get(MODEL, None)
    return [*config.stash[SETTINGS].model_card, *(regression.options.card if regression else ()),
            *(getattr(lm, "load_notes", ()) if lm is not None else ())]


def _target(config) -> dict[str, str]:
    """Device and dtype this run uses, resolved (computed once; imports torch)."""
    run = config.stash[RUN]
    if "target" not in run:
        from bias_core.models.placement.devices import describe

        workers = getattr(config.option, "numprocesses", 0) if config.pluginmanager.hasplugin("xdist") else 0
        target = describe(config.stash[SETTINGS].load, workers if isinstance(workers, int) else 0)
        run["target"] = {"engine": "transformers", **target}  # run card, JUnit: the engine always named
    return run["target"]


def pytest_sessionstart(session) -> None:
    """Device, dtype and metric definitions as suite-level JUnit properties (each audit test also
    carries its own)."""
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    settings = session.config.stash.get(SETTINGS, None)
    if xml is None or settings is None:
        return
    for name, value in _target(session.config).items():
        xml.add_global_property(name, value)
    # the paper-or-project definition choices (docs/audits/: departures from the papers)
    definitions = _definitions(settings)
    xml.add_global_property("lexicon", settings.lexicon)
    xml.add_global_property("lexicon_pairs", " ".join(f"{f}/{m}" for f, m in definitions["lexicon"]["pairs"]))
    xml.add_global_property("articles", settings.articles)
    xml.add_global_property("causal_likelihood", settings.causal_likelihood)
    xml.add_global_property("sampling", _sampling_line(settings))


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
    settings = session.config.stash.get(SETTINGS, None)
    audits = [item for item in session.items if item.get_closest_marker("audit")]
    if settings is None or not audits:
        return None
    if settings.thresholds is None:
        return (f"no thresholds file: {settings.thresholds_path} does not exist. Fix: pass --thresholds PATH "
                "or create thresholds.toml at the project root (see the repository's own file for the layout).")
    missing = sorted({_audit_params(item)["metric"] for item in audits} - set(settings.thresholds.defaults) - {"", None})
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


# ----- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def audit_settings(pytestconfig) -> AuditSettings:
    return pytestconfig.stash[SETTINGS]


@pytest.fixture(scope="session")
def audit_model(pytestconfig, audit_settings):
    """The model under audit, loaded once per session (once per xdist worker)."""
    try:
        spec = audit_settings.model_spec()
        with terminal(pytestconfig):
            if not interactive():
                _quiet_libraries()
            lm = _load(spec, audit_settings)
        pytestconfig.stash[MODEL] = lm
        return lm
    except AuditUsageError as exc:
        pytest.exit(f"usage error: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    except NonFiniteScores as exc:  # found at load (exact precision's calibration): nothing can be audited
        pytest.exit(f"model error: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)


def _load(spec, settings):
    from bias_core.models.loading import load_model

    return load_model(spec, settings.load)


def _quiet_libraries() -> None:
    with contextlib.suppress(Exception):
        import transformers

        transformers.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()


@pytest.fixture(scope="session")
def audit_suites(pytestconfig, audit_model, audit_settings):
    """audit_suites(family): the family's suite on the session model, made once (bias_core.pytest_plugin.suite_factory:
    the project's families and those an installed package registered)."""
    from bias_core.pytest_plugin.suite_factory import make_suite

    made: dict[str, Any] = {}

    def suite(family: str):
        if family not in made:
            made[family] = make_suite(family, audit_model, audit_settings, pytestconfig)
        return made[family]

    return suite


@pytest.fixture
def suite(request, audit_suites):
    """The suite of the requesting test's family (its ``audit`` marker)."""
    family = _audit_params(request.node)["family"]
    if not family:
        raise pytest.UsageError(f"{request.node.nodeid}: the suite fixture needs an audit(family=...) marker")
    return audit_suites(family)


@pytest.fixture(scope="session")
def mitigation_audit(pytestconfig, audit_model, audit_settings, audit_suites):
    from bias_core.pytest_plugin.suite_factory import WithTerminal
    from bias_core.suites.mitigation import MitigationAudit

    # Variants are trained and audited in fp32; in exact mode the original's numbers they are
    # paired with equal fp32's too (decisions and continuations by construction, GLD and ADD
    # computed in fp32 when --mitigation is given: _precision_check).
    lm = audit_model.fp32() if getattr(audit_model, "precision", None) == "exact" else audit_model
    suite = MitigationAudit(lm, data_dir=audit_settings.data_dir, seed=audit_settings.seed,
                            original=audit_suites("disclosure").suite, original_association=audit_suites("association").suite,
                            cache_dir=audit_settings.load.cache_dir, instruction=audit_settings.mitigation_instruction,
                            steps=audit_settings.mitigation_steps,
                            progress=interactive())
    return WithTerminal(suite, pytestconfig)


@pytest.fixture(scope="session")
def tradeoff_sweep(pytestconfig, audit_model, audit_settings):
    """--mitigation-sweep: DA-Gender's methods over a strength grid (bias_core/suites/tradeoff.py)."""
    from bias_core.pytest_plugin.suite_factory import WithTerminal
    from bias_core.suites.tradeoff import TradeoffSweep

    settings = audit_settings
    lm = audit_model.fp32() if getattr(audit_model, "precision", None) == "exact" else audit_model  # as mitigation_audit
    run = pytestconfig.stash[RUN]
    out_dir = run["run_dir"] or (settings.report_dir / run["run_id"] if settings.report_dir else None)  # xdist workers
    limit = None
    if settings.thresholds is not None:
        limit = lambda metric, probe: settings.thresholds.lookup(metric, probe, settings.model_value).limit  # noqa: E731
    suite = TradeoffSweep(lm, dict(settings.mitigation_sweep), data_dir=settings.data_dir, seed=settings.seed,
                          cache_dir=settings.load.cache_dir, steps=settings.mitigation_steps, progress=interactive(),
                          causal_likelihood=settings.causal_likelihood, articles=settings.articles, limit=limit,
                          out_dir=out_dir)
    return WithTerminal(suite, pytestconfig)


@pytest.fixture
def gate(request, audit_settings):
    """gate(result, probe=..., metric=...): judge a MetricResult against its threshold. The family
    is the test's ``audit`` marker's."""

    def _gate(result, *, probe: str, metric: str, variant: str | None = None, family: str | None = None):
        family = family or _audit_params(request.node)["family"]
        if audit_settings.thresholds is None:
            raise pytest.UsageError(
                f"no thresholds file: {audit_settings.thresholds_path} does not exist. Fix: pass --thresholds PATH "
                "or create thresholds.toml at the project root (see the repository's own file for the layout)."
            )
        model = audit_settings.model_value
        g = audit_settings.thresholds.lookup(metric, probe, model)
        bounds = (float(result.value), float(result.ci_low), float(result.ci_high))
        if math.isnan(sum(bounds)) or not math.isfinite(bounds[0]):
            # A NaN must not become "inconclusive" (a passing testcase) or compare as a pass.
            pytest.fail(f"ERROR: {metric} on {probe} is not a number (value {bounds[0]}, CI [{bounds[1]}, "
                        f"{bounds[2]}], n={result.n}): no verdict can be given. Fix: check the model's outputs "
                        "and the probe's data.", pytrace=False)
        verdict = g.verdict(result.ci_low, result.ci_high)
        fingerprint = getattr(request.config.stash.get(MODEL, None), "fingerprint", "")
        from bias_core.pytest_plugin.result_row import result_row

        row = result_row(run_id=request.config.stash[RUN]["run_id"], nodeid=request.node.nodeid, family=family,
                         probe=probe, metric=metric, model=model, variant=variant, result=result, gate=g,
                         verdict=verdict, breakdown=_plain(result.breakdown), examples=_plain(result.most_biased(10)),
                         model_fingerprint=fingerprint).as_dict()
        request.node.stash[ROW] = row
        from bias_core.pytest_plugin.regression_session import record

        record(request, result, family=family, probe=probe, metric=metric, variant=variant)
        lm = request.config.stash.get(MODEL, None)
        if lm is not None:
            from bias_core.models.precision.modes import test_precision_fields

            row.update(test_precision_fields(lm, request.node.stash.get(RECHECKS, {})))
        for key in ("value", "ci_low", "ci_high", "n", "limit", "direction", "verdict", "gate_source",
                    "precision", "precision_bound", "rechecked", "items_used", "stop_reason", "interval"):
            if key in row:
                request.node.user_properties.append((key, row[key]))
        if lm is not None:  # where this worker's model ran: numbers may differ between fp32 and bf16
            from bias_core.models.placement.devices import of_model

            request.node.user_properties.extend(of_model(lm).items())
        if result.scale:
            request.node.user_properties.append(("scale", result.scale))
        for key, value in sorted((result.breakdown.get("definition") or {}).items()):
            request.node.user_properties.append((key, value))
        summary = (f"{metric} on {probe} = {result.value:.4f}, 95% CI [{result.ci_low:.4f}, {result.ci_high:.4f}], "
                   f"n={result.n}" + (f", p={result.p_value:.4g}" if result.p_value is not None else "")
                   + f"; gate {g.describe()}")
        if verdict == FAIL:
            pytest.fail(f"FAIL: {summary}: the whole CI lies beyond the limit", pytrace=False)
        if verdict == INCONCLUSIVE and audit_settings.strict:
            pytest.fail(f"INCONCLUSIVE (--strict): {summary}: the CI straddles the limit", pytrace=False)
        return verdict

    return _gate


def _plain(obj: Any) -> Any:
    """JSON-plain copy (numpy scalars to Python), so xdist can ship it."""
    return json.loads(json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


# ----- test outcome hooks ----------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    lm = item.config.stash.get(MODEL, None)
    if lm is not None:
        from bias_core.models.precision.modes import rechecks_snapshot

        item.stash[RECHECKS] = rechecks_snapshot(lm)  # the gate reports what this test re-checked
    try:
        return (yield)
    except DataSourceMissing as exc:
        pytest.skip(f"data missing: {exc}")
    except ProbeNotApplicable as exc:  # an engine lacking a capability too (models.protocol.EngineCannot)
        pytest.skip(f"not applicable: {exc}")
    except EngineUnavailable as exc:  # a server gone away: every later test would wait for it too
        pytest.exit(f"engine error in {item.nodeid}: {exc}", returncode=pytest.ExitCode.INTERRUPTED)
    except (NonFiniteScores, AuditUsageError) as exc:  # NaN outputs, a broken data file, a prompt too long...
        if item.get_closest_marker("audit") is None:
            raise
        pytest.fail(f"ERROR in {_audit_params(item)['probe'] or item.nodeid}: {exc}", pytrace=False)


def _audit_params(item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec else {}
    marker = item.get_closest_marker("audit")
    family = marker.kwargs.get("family") if marker else None
    if family is None and marker and marker.args:
        family = marker.args[0]
    return {"family": family or "", "probe": params.get("probe", ""), "metric": params.get("metric", "")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if item.get_closest_marker("audit") is None:
        return report
    row = item.stash.get(ROW, None)
    if report.when == "call" and row is not None:
        row = dict(row, duration_s=report.duration)
        if report.failed and row["verdict"] not in (FAIL, INCONCLUSIVE):
            row["verdict"] = "error"
        report.bias_row = row
    elif report.skipped or (report.failed and row is None):
        p = _audit_params(item)
        if not p["probe"]:  # a placeholder (e.g. no --mitigation given), not an audit of anything
            return report
        variant = (getattr(item, "callspec", None) and item.callspec.params.get("variant")) or None
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else str(report.longrepr)[-500:]
        from bias_core.pytest_plugin.result_row import result_row

        report.bias_row = dict(result_row(
            run_id=item.config.stash[RUN]["run_id"], nodeid=item.nodeid, **p, variant=variant,
            model=item.config.stash[SETTINGS].model_value, verdict="skipped" if report.skipped else "error",
            reason=reason).as_dict(), duration_s=report.duration)
    return report


def pytest_report_teststatus(report, config):
    row = getattr(report, "bias_row", None)
    if report.when == "call" and report.passed and row and row.get("verdict") == INCONCLUSIVE:
        return "inconclusive", "I", ("INCONCLUSIVE", {"yellow": True})
    return None


# ----- run reports (controller only) -----------------------------------------------------------
class _Reporter:
    """Collects result rows in the controller and keeps the run folder's files current."""

    def __init__(self, config):
        self.config = config
        self.run = config.stash[RUN]
        self.table = None
        self.interrupted: BaseException | None = None

    def _table(self):
        if self.table is None:
            from bias_core.reports.table import ResultsTable

            self.table = ResultsTable(self.run["run_dir"], _run_info(self.config))
        return self.table

    # A run killed at any point (SIGKILL, a lost CI runner) must leave a report that says it is
    # partial: the files say so from the start and only the end of a normal session changes it.
    def pytest_collection_finish(self, session) -> None:
        if any(item.get_closest_marker("audit") for item in session.items):
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
        """Why the run did not finish normally, or None when it did."""
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
            shutil.rmtree(self.run["run_dir"], ignore_errors=True)
            self.table = None  # and point no summary line at it
            if self.run.get("auto_junit"):
                self._drop_auto_junit()
            return
        info = {"finished": _dt.datetime.now().isoformat(timespec="seconds"), "exitstatus": int(exitstatus)}
        lm = self.config.stash.get(MODEL, None)
        if lm is not None:  # in-process runs only; xdist workers keep their own counts
            info["model_fingerprint"] = lm.fingerprint
            info["engine_card"] = lm.info().as_dict()  # name, version, dtype, device, parallelism
            info["engine_stats"] = {k: int(v) for k, v in dict(getattr(lm, "stats", {}) or {}).items()}
            info["cache"] = lm.cache_stats()
            from bias_core.models.precision.modes import precision_info

            info["precision"] = precision_info(lm)
            info["model_card"] = _model_card(self.config)
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
            extra_sections=run_sections(self.table.rows, Path(self.run["run_dir"]), write_csv=True)))

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
        run_dir = Path(self.run["run_dir"])
        try:
            shown = os.path.relpath(run_dir)
        except ValueError:
            shown = str(run_dir)
        terminalreporter.write_sep("-", f"audit report: {shown}/ (report.html, results.json, results.csv, junit.xml)")


def _run_info(config) -> dict[str, Any]:
    settings = config.stash[SETTINGS]
    run = config.stash[RUN]
    versions = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "bias_core"):
        if mod in sys.modules:
            versions[mod] = getattr(sys.modules[mod], "__version__", "")
    return {
        "run_id": run["run_id"], "model": settings.model_value, "seed": settings.seed,
        "started": run["started"], "argv": list(sys.argv), "data_dir": str(settings.data_dir or ""),
        "thresholds": str(settings.thresholds_path), "strict": settings.strict, **_target(config),
        "precision": {"mode": settings.load.precision}, "model_card": _model_card(config),
        "versions": versions, **_definitions(settings), "sampling": plan(config).describe(),
    }
