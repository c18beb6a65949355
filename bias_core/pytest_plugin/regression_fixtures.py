"""The regression gate's fixtures: a live baseline model, every selected comparison of the
session (computed at once, before the first verdict, because the multiple-comparison adjustment
needs every p-value), and ``regression_gate``, the verdict ``test_regression`` asks for.

They find the gate's state through the plugin manager (``REGRESSION_PLUGIN``), as the hooks
registered it, so they hold none of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pytest

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.gate import judge
from bias_core.gating.regression.items import NoItemValues
from bias_core.gating.regression.pairing import check_configs, missing_problem, pair
from bias_core.gating.regression.power import power_note
from bias_core.gating.regression.spec import PAIRED
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.pytest_plugin.regression_cases import selected
from bias_core.pytest_plugin.regression_config import run_config
from bias_core.pytest_plugin.regression_items import block_of
from bias_core.pytest_plugin.regression_options import EXTERNAL_FAMILY, cli_fix
from bias_core.pytest_plugin.regression_rows import error_row, paired_rows
from bias_core.pytest_plugin.regression_session import REGRESSION_PLUGIN, ROW, RegressionSession
from bias_core.pytest_plugin.session_state import run_state, terminal
from bias_core.stats.paired import PairedComparison, compare_to_baseline
from bias_core.storage.visible import visible

_PROPERTIES = ("baseline", "delta", "ci_low", "ci_high", "p_value", "p_adjusted", "adjustment", "harm",
               "harm_ci_low", "harm_ci_high", "margin", "margin_rule", "worse_within_margin", "verdict", "config")
# a log comparison's row also says where its numbers and margin come from
_LOG_PROPERTIES = ("tool", "task", "tool_metric", "filter", "gate_source", "n", "pairs")


def _session(config) -> RegressionSession:
    found = config.pluginmanager.get_plugin(REGRESSION_PLUGIN)
    assert isinstance(found, RegressionSession), "the plugin registers the gate before any fixture of it runs"
    return found


@contextlib.contextmanager
def _usage_exit():
    try:
        yield
    except AuditUsageError as exc:
        pytest.exit(visible(f"usage error: {exc}"), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def baseline_model(pytestconfig, audit_settings):
    """A live baseline (``--baseline MODEL``), loaded once per session with the audit's options."""
    from bias_core.models.loading import load_model
    options = _session(pytestconfig).options
    with _usage_exit(), terminal(pytestconfig):
        return load_model(options.live, dataclasses.replace(audit_settings.load, adapter=options.live_adapter),
                          option="--baseline")


@pytest.fixture(scope="session")
def regression_comparisons(request, audit_settings) -> dict[tuple[str, str, str], Any]:
    """Every selected comparison of the session, adjusted and judged: key -> row dict, or the
    exception that stopped it (re-raised by its test: a skip for missing data)."""
    from bias_core.pytest_plugin.suite_factory import make_suite

    options = _session(request.config).options
    keys = selected(request.session)
    if options.logs is not None:  # two logs: no model, no suite
        return _log_comparisons(options, keys, audit_settings.seed)
    baseline_lm = request.getfixturevalue("baseline_model") if options.live is not None else None
    baseline_suites: dict[str, Any] = {}
    out: dict[tuple[str, str, str], Any] = {}
    comparisons: dict[tuple[str, str, str], PairedComparison] = {}
    pairs: dict[tuple[str, str, str], Any] = {}
    powers: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key in keys:
        family, probe, metric = key
        try:
            candidate = block_of(request.getfixturevalue("audit_suites")(family), probe, metric, audit_settings)
            if options.stored is not None:
                baseline = options.stored.blocks[(probe, metric)]
            else:
                suite = baseline_suites.setdefault(family, make_suite(family, baseline_lm, audit_settings, request.config))
                baseline = block_of(suite, probe, metric, audit_settings)
            paired = pair(candidate, baseline, where="baseline")
            problem = missing_problem(paired, options.max_missing)
            if problem is not None:  # judged on what is left, the row would not stand for the metric
                out[key] = error_row(paired, family, options.label(), problem)
                continue
            pairs[key] = paired
            margin = audit_settings.thresholds.regression[metric]
            comparisons[key] = judge(compare_to_baseline(paired, PAIRED[metric], seed=audit_settings.seed), margin)
            # what the baseline's items can detect at this margin: a margin below it promises too much
            powers[key] = power_note(paired, PAIRED[metric], margin, seed=audit_settings.seed)
        except Exception as exc:  # noqa: BLE001 - handed to the test, which reports it
            out[key] = exc
    lm = run_state(request.config).model
    candidate_run = run_config(audit_settings, lm, compared=True)
    if options.stored is not None:
        baseline_run = options.stored.run
    else:
        baseline_run = run_config(audit_settings, baseline_lm, model=options.baseline, adapter=options.live_adapter,
                                  compared=True)
    with _usage_exit():  # another engine or dtype: refused, saying why
        configs = check_configs(candidate_run, baseline_run)
    return paired_rows(out, comparisons, pairs, powers, options.label(), configs)


def _log_comparisons(options, keys, seed: int) -> dict[tuple[str, str, str], Any]:
    """The selected comparisons of two logs (``options.logs``, a ``LogPlan``), as the rows of the
    project's own comparisons: paired (too many samples left out: the exception, which the test
    reports), judged against their margins, adjusted across the selected rows, with the power note."""
    plan = options.logs
    by_key = {(EXTERNAL_FAMILY, r.task, r.label): r for r in plan.rows}
    out: dict[tuple[str, str, str], Any] = {}
    comparisons: dict[tuple[str, str, str], PairedComparison] = {}
    pairs: dict[tuple[str, str, str], Any] = {}
    powers: dict[tuple[str, str, str], dict[str, Any]] = {}
    extra: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key in keys:
        row = by_key[key]
        try:
            paired, unpaired = plan.pair(row, options.max_missing)
        except AuditUsageError as exc:  # more left out than --baseline-max-missing: no verdict, said why
            out[key] = type(exc)(cli_fix(str(exc)))
            continue
        pairs[key] = paired
        comparisons[key] = plan.compare(row, paired, seed=seed)
        powers[key] = power_note(paired, row.gate.spec, row.gate.margin, seed=seed)
        extra[key] = {"task": row.task, "tool_metric": row.metric, "filter": row.filter, "tool": plan.candidate.tool,
                      "gate_source": row.gate.source, "unpaired": unpaired.describe(),
                      "logged_baseline": row.baseline.reported, "logged_candidate": row.candidate.reported}
    rows = paired_rows(out, comparisons, pairs, powers, options.label(), plan.card)
    for key, fields in extra.items():
        rows[key].update(fields)
    return rows


@pytest.fixture
def regression_gate(request, regression_comparisons):
    """regression_gate(family, probe, metric): the test's verdict from the session's comparisons."""
    def _gate(family: str, probe: str, metric: str) -> str:
        found = regression_comparisons[(family, probe, metric)]
        if isinstance(found, (AuditUsageError, NoItemValues)):  # nothing to pair: said, not a traceback
            pytest.fail(f"ERROR in regression-{probe}-{metric}: {found}", pytrace=False)
        if isinstance(found, BaseException):
            raise found
        gate = _session(request.config)
        settings = gate.settings
        row = dict(found, run_id=run_state(request.config).run_id, nodeid=request.node.nodeid, model=gate.candidate)
        request.node.stash[ROW] = row
        if row["verdict"] == "error":
            pytest.fail(f"ERROR in {row['test_id']}: {row['reason']}", pytrace=False)
        properties = {**row, "delta": row["value"]}
        request.node.user_properties.extend((key, properties[key]) for key in _PROPERTIES)
        request.node.user_properties.extend((key, row[key]) for key in _LOG_PROPERTIES if key in row)
        summary = (f"{metric} on {probe}: candidate {row['candidate_value']:.4g} vs baseline {row['baseline_value']:.4g}, "
                   f"delta {row['value']:+.4g} [{row['ci_low']:+.4g}, {row['ci_high']:+.4g}], harm CI "
                   f"[{row['harm_ci_low']:+.4g}, {row['harm_ci_high']:+.4g}] vs margin {row['margin']:g}, "
                   f"p={row['p_value']:.3g}, p_{row['adjustment']}={row['p_adjusted']:.3g}, n={row['pairs']}")
        if row["verdict"] == FAIL:
            pytest.fail(f"FAIL: {summary}: the candidate is worse than the baseline by more than the margin",
                        pytrace=False)
        if row["verdict"] == INCONCLUSIVE and settings.strict:
            pytest.fail(f"INCONCLUSIVE (--strict): {summary}", pytrace=False)
        return row["verdict"]

    return _gate
