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
import os
import platform
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bias_core.errors import AuditUsageError, DataSourceMissing, ProbeNotApplicable
from bias_core.gates import FAIL, INCONCLUSIVE
from bias_core.progress import interactive
from bias_core.settings import AuditSettings, add_options, build_settings

SETTINGS = pytest.StashKey[AuditSettings]()
MODEL = pytest.StashKey[Any]()
ROW = pytest.StashKey[dict]()
RUN = pytest.StashKey[dict]()
RECHECKS = pytest.StashKey[dict]()


def pytest_addoption(parser) -> None:
    add_options(parser)


def _new_run_id(report_dir: Path | None, model: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{stamp}-{re.sub(r'[^A-Za-z0-9._-]+', '_', Path(model).name or model)[:40]}"
    run_id, n = base, 1
    while report_dir is not None and (report_dir / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "audit(family): an audit test gated by thresholds.toml")
    try:
        settings = build_settings(config)
    except AuditUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS] = settings
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        config.stash[RUN] = {"run_id": worker.get("bias_run_id", ""), "run_dir": None}
        _share_cores(int(worker.get("workercount", 1)))
        return
    run_id = _new_run_id(settings.report_dir, settings.model_value)
    run_dir = settings.report_dir / run_id if settings.report_dir else None
    config.stash[RUN] = {"run_id": run_id, "run_dir": run_dir, "auto_junit": False,
                         "started": _dt.datetime.now().isoformat(timespec="seconds")}
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistRunId(run_id), "bias_core.xdist_run_id")
    if run_dir is None:
        return
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(run_dir / "junit.xml")
        config.stash[RUN]["auto_junit"] = True
    config.pluginmanager.register(_Reporter(config), "bias_core.reporter")


def pytest_collection_modifyitems(session, config, items) -> None:
    """Every collected audit must have a gate: a missing file or gate is a usage error now,
    before any model loads, not a failure in the middle of the run."""
    settings = config.stash.get(SETTINGS, None)
    audits = [item for item in items if item.get_closest_marker("audit")]
    if settings is None or not audits:
        return
    if settings.thresholds is None:
        raise pytest.UsageError(
            f"no thresholds file: {settings.thresholds_path} does not exist. Fix: pass --thresholds PATH "
            "or create thresholds.toml at the project root (see the repository's own file for the layout).")
    missing = sorted({_audit_params(item)["metric"] for item in audits} - set(settings.thresholds.defaults) - {"", None})
    if missing:
        tables = " ".join(f"[metrics.{m}]" for m in missing)
        raise pytest.UsageError(
            f"{settings.thresholds_path}: no default gate for the collected metric(s) {', '.join(missing)}. "
            f"Fix: add {tables} with max = ... or min = ... (see the repository's thresholds.toml), "
            "or deselect those tests.")


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
@contextlib.contextmanager
def _terminal(config):
    """Let progress bars reach the terminal while pytest captures test output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


@pytest.fixture(scope="session")
def audit_settings(pytestconfig) -> AuditSettings:
    return pytestconfig.stash[SETTINGS]


@pytest.fixture(scope="session")
def audit_model(pytestconfig, audit_settings):
    """The model under audit, loaded once per session (once per xdist worker)."""
    try:
        spec = audit_settings.model_spec()
        with _terminal(pytestconfig):
            if not interactive():
                _quiet_libraries()
            lm = _load(spec, audit_settings)
        pytestconfig.stash[MODEL] = lm
        return lm
    except AuditUsageError as exc:
        pytest.exit(f"usage error: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


def _load(spec, settings):
    from bias_core.models.loading import load_model

    return load_model(spec, settings.load)


def _quiet_libraries() -> None:
    with contextlib.suppress(Exception):
        import transformers

        transformers.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()


def _precision_check(lm, settings):
    """--precision exact: the suites' results must have fp32's verdicts (bias_core/precision_gate.py)."""
    if getattr(lm, "precision", None) != "exact" or settings.thresholds is None:
        return None
    from bias_core.precision_gate import PROPAGATED, ExactGate

    return ExactGate(lambda metric, probe: settings.thresholds.lookup(metric, probe, settings.model_value),
                     fp32_metrics=PROPAGATED if settings.mitigations else ())


@pytest.fixture(scope="session")
def disclosure_audit(pytestconfig, audit_model, audit_settings):
    from bias_core.suites.disclosure import DisclosureAudit

    return _WithTerminal(DisclosureAudit(audit_model, data_dir=audit_settings.data_dir, seed=audit_settings.seed,
                                         precision_check=_precision_check(audit_model, audit_settings)), pytestconfig)


@pytest.fixture(scope="session")
def association_audit(pytestconfig, audit_model, audit_settings):
    from bias_core.suites.association import AssociationAudit

    return _WithTerminal(AssociationAudit(audit_model, data_dir=audit_settings.data_dir, seed=audit_settings.seed,
                                          precision_check=_precision_check(audit_model, audit_settings)), pytestconfig)


@pytest.fixture(scope="session")
def genderpair_audit(pytestconfig, audit_model, audit_settings):
    from bias_core.suites.genderpair import GenderPairAudit

    suite = GenderPairAudit(audit_model, data_dir=audit_settings.data_dir, seed=audit_settings.seed,
                            sample=audit_settings.genderpair_sample,
                            toxicity=audit_settings.toxicity_classifier, regard=audit_settings.regard_classifier)
    return _WithTerminal(suite, pytestconfig)


class _WithTerminal:
    """Runs a suite's computations with capture suspended, so progress bars show."""

    def __init__(self, suite, config):
        self._suite, self._config = suite, config

    def __getattr__(self, name):
        found = getattr(self._suite, name)
        if not callable(found):
            return found

        def with_terminal(*args, **kwargs):
            with _terminal(self._config):
                return found(*args, **kwargs)

        return with_terminal


@pytest.fixture(scope="session")
def mitigation_audit(pytestconfig, audit_model, audit_settings, disclosure_audit, association_audit):
    from bias_core.suites.mitigation import MitigationAudit

    # Variants are trained and audited in fp32; in exact mode the original's numbers they are
    # paired with equal fp32's too (decisions and continuations by construction, GLD and ADD
    # computed in fp32 when --mitigation is given: _precision_check).
    lm = audit_model.fp32() if getattr(audit_model, "precision", None) == "exact" else audit_model
    suite = MitigationAudit(lm, data_dir=audit_settings.data_dir, seed=audit_settings.seed,
                            original=disclosure_audit._suite, original_association=association_audit._suite,
                            cache_dir=audit_settings.load.cache_dir, instruction=audit_settings.mitigation_instruction,
                            steps=audit_settings.mitigation_steps,
                            progress=interactive())
    return _WithTerminal(suite, pytestconfig)


@pytest.fixture
def gate(request, audit_settings):
    """gate(result, family=..., probe=..., metric=...): judge a MetricResult against its threshold."""

    def _gate(result, *, family: str, probe: str, metric: str, variant: str | None = None):
        if audit_settings.thresholds is None:
            raise pytest.UsageError(
                f"no thresholds file: {audit_settings.thresholds_path} does not exist. Fix: pass --thresholds PATH "
                "or create thresholds.toml at the project root (see the repository's own file for the layout)."
            )
        model = audit_settings.model_value
        g = audit_settings.thresholds.lookup(metric, probe, model)
        verdict = g.verdict(result.ci_low, result.ci_high)
        fingerprint = getattr(request.config.stash.get(MODEL, None), "fingerprint", "")
        row = {
            "run_id": request.config.stash[RUN]["run_id"],
            "nodeid": request.node.nodeid,
            "test_id": f"{variant}-{probe}-{metric}" if variant else f"{probe}-{metric}",
            "family": family,
            "probe": probe,
            "metric": metric,
            "model": model,
            "value": float(result.value),
            "ci_low": float(result.ci_low),
            "ci_high": float(result.ci_high),
            "n": int(result.n),
            "limit": float(g.limit),
            "direction": g.direction,
            "ideal": g.ideal,
            "gate_source": g.source,
            "gate_note": g.note,
            "verdict": verdict,
            "scale": result.scale,
            "p_value": None if result.p_value is None else float(result.p_value),
            "breakdown": _plain(result.breakdown),
            "examples": _plain(result.most_biased(10)),
            "model_fingerprint": fingerprint,
        }
        if variant:
            row["variant"] = variant
        request.node.stash[ROW] = row
        lm = request.config.stash.get(MODEL, None)
        if lm is not None:
            from bias_core.models.precision import test_precision_fields

            row.update(test_precision_fields(lm, request.node.stash.get(RECHECKS, {})))
        for key in ("value", "ci_low", "ci_high", "n", "limit", "direction", "verdict", "gate_source",
                    "precision", "precision_bound", "rechecked"):
            if key in row:
                request.node.user_properties.append((key, row[key]))
        if result.scale:
            request.node.user_properties.append(("scale", result.scale))
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
        from bias_core.models.precision import rechecks_snapshot

        item.stash[RECHECKS] = rechecks_snapshot(lm)  # the gate reports what this test re-checked
    try:
        return (yield)
    except DataSourceMissing as exc:
        pytest.skip(f"data missing: {exc}")
    except ProbeNotApplicable as exc:
        pytest.skip(f"not applicable: {exc}")


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
        test_id = f"{variant}-{p['probe']}-{p['metric']}" if variant else f"{p['probe']}-{p['metric']}"
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else str(report.longrepr)[-500:]
        report.bias_row = {
            "run_id": item.config.stash[RUN]["run_id"], "nodeid": item.nodeid, "test_id": test_id,
            **p, **({"variant": variant} if variant else {}),
            "model": item.config.stash[SETTINGS].model_value, "value": None, "ci_low": None, "ci_high": None,
            "n": None, "verdict": "skipped" if report.skipped else "error", "reason": reason, "examples": [],
            "duration_s": report.duration,
        }
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

    def _table(self):
        if self.table is None:
            from bias_core.reports.table import ResultsTable

            self.table = ResultsTable(self.run["run_dir"], _run_info(self.config))
        return self.table

    def pytest_runtest_logreport(self, report) -> None:
        row = getattr(report, "bias_row", None)
        if row is not None:
            table = self._table()
            table.add(row)
            table.write()  # after every test: an interrupted run keeps what it had

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self.table is None:
            # No audit ran (e.g. a unit-test session): leave no empty run folder behind.
            if self.run.get("auto_junit"):
                shutil.rmtree(self.run["run_dir"], ignore_errors=True)
                self._drop_auto_junit()
            return
        info = {"finished": _dt.datetime.now().isoformat(timespec="seconds"), "exitstatus": int(exitstatus)}
        lm = self.config.stash.get(MODEL, None)
        if lm is not None:  # in-process runs only; xdist workers keep their own counts
            info["model_fingerprint"] = lm.fingerprint
            info["cache"] = {"hits": lm.cache.hits, "misses": lm.cache.misses, "enabled": lm.cache.enabled}
            from bias_core.models.precision import precision_info

            info["precision"] = precision_info(lm)
        self.table.set_run_info(info)
        self.table.write(complete=True)
        self.table.write_html(extra_sections=self._mitigation_sections())

    def _mitigation_sections(self) -> list[tuple[str, str, str]]:
        """The papers' Tables 1-3 layout (methods x probe groups x GAS/GLD/ADD), as CSV and HTML."""
        cells = mitigation_cells(self.table.rows)
        if not cells:
            return []
        from bias_core.mitigation.results_table import mitigation_table, table_html, write_table_csv

        frame = mitigation_table(cells)
        write_table_csv(frame, Path(self.run["run_dir"]) / "mitigation_table.csv")
        note = ('<p class="note">Mean GAS, GLD and ADD per probe group (template, naturally sourced, '
                "LLM-generated) for the original model and each mitigation, on the same items; also in "
                "<code>mitigation_table.csv</code>. Significance of each change: the mitigation rows above.</p>")
        return [("mitigation", "Mitigation results", note + table_html(frame))]

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
        inconclusive = [r for r in self.table.rows if r.get("verdict") == INCONCLUSIVE]
        if inconclusive:
            terminalreporter.section("inconclusive audits (CI straddles the threshold)", yellow=True)
            for r in inconclusive:
                terminalreporter.line(f"INCONCLUSIVE {r['test_id']}: {r['value']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] "
                                      f"vs {r['direction']} {r['limit']} ({r['gate_source']})")
        run_dir = Path(self.run["run_dir"])
        try:
            shown = os.path.relpath(run_dir)
        except ValueError:
            shown = str(run_dir)
        terminalreporter.write_sep("-", f"audit report: {shown}/ (report.html, results.json, results.csv, junit.xml)")


def mitigation_cells(rows) -> list[dict[str, Any]]:
    """Original and mitigated values of every paired reduction, as table cells."""
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        b = r.get("breakdown") or {}
        if not (r.get("variant") and str(r.get("metric", "")).endswith("_reduction") and "mitigated" in b):
            continue
        metric = str(r["metric"]).removesuffix("_reduction")
        for variant, value in (("original", b["original"]), (r["variant"], b["mitigated"])):
            cells[(variant, r["probe"], metric)] = {"variant": variant, "probe": r["probe"], "metric": metric,
                                                    "value": value, "family": "disclosure"}
    return list(cells.values())


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
        "thresholds": str(settings.thresholds_path), "strict": settings.strict, "device": settings.load.device,
        "dtype": settings.load.dtype, "precision": {"mode": settings.load.precision}, "versions": versions,
    }
