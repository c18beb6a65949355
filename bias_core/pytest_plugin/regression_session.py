"""The regression gate inside a pytest audit run (registered by ``bias_core.plugin``).

- Every audit test of a pairable metric hands its per-item block to its test report (``record``,
  through the ``pytest_bias_core_gate_result`` hook the gate calls); the controller appends it to
  the run folder's ``items.jsonl.gz``, so any run can serve as a later run's stored baseline.
- ``--baseline RUN``: the stored run's configuration is checked when pytest configures, its
  probes once the tests are collected; both before any model loads (``BaselineMismatch``, exit 4).
- ``--baseline MODEL [--baseline-adapter DIR]``: the baseline is loaded once per session and
  audited on the same items by the same suites (the result cache makes re-runs free).
- ``test_regression[<probe>-<metric>]`` (audits/test_regression.py) asks ``regression_gate``; its
  cases (``regression_cases``) are every family with a suite, the project's and installed
  packages', × the cases it selects for the run, where the metric's declaration pairs.
  All of the session's selected comparisons are computed at once (``regression_comparisons``)
  before the first verdict, because the multiple-comparison adjustment needs every p-value.

Verdicts: the non-inferiority gate (``gating/regression/gate.py``) on the harm CI against the metric's margin; a
"fail" must also be significant after adjustment across the run (Holm, or Benjamini-Hochberg
for more than ``LARGE_FAMILY`` comparisons) at ``ALPHA``, else it is reported inconclusive.
Under xdist every worker that runs a regression test computes the whole family; ``--dist
loadgroup`` sends them all to one worker (they carry ``xdist_group("regression")``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bias_core.errors import AuditUsageError, DataSourceMissing, ProbeNotApplicable
from bias_core.gating.regression.gate import judge
from bias_core.gating.regression.items import (
    ITEMS_FILE,
    ItemValue,
    MetricItems,
    NoItemValues,
    RunConfig,
    append_block,
    block_sha256,
    items_from_result,
    lexicon_sha256,
    probe_sha256,
    start_items,
)
from bias_core.gating.regression.pairing import check_configs, check_probes, missing_problem, pair
from bias_core.gating.regression.power import power_note
from bias_core.gating.regression.spec import PAIRED
from bias_core.gating.regression.summary import FileMark, mark_file
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.pytest_plugin.regression_options import RegressionOptions, parse_options
from bias_core.pytest_plugin.session_state import USAGE_STOP, run_state, terminal
from bias_core.stats.paired import PairedComparison, adjust, compare_to_baseline
from bias_core.storage.visible import visible

LARGE_FAMILY = 20  # more comparisons than this: Benjamini-Hochberg (FDR) instead of Holm (FWER)
ALPHA = 0.05

# Per test, on the item (the session's state is ``RunState.regression``):
ITEMS = pytest.StashKey[dict]()  # the audit test's per-item block, for its report
ROW = pytest.StashKey[dict]()  # the regression test's row


@dataclass
class RegressionState:
    """The release gate's part of the run (``RunState.regression``)."""

    options: RegressionOptions
    settings: Any
    candidate_run: RunConfig | None = None
    items_started: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary_mark: FileMark | None = None  # --summary-md as this run found it (another run's write is kept)


# ----- what is compared ----------------------------------------------------------------------
def gated_families() -> tuple[str, ...]:
    """Every family with a suite: the project's (``suite_factory.BUILTIN``), then those installed
    packages registered (``extensions.EXTENSIONS``); their audit tests store per-item values."""
    from bias_core.pytest_plugin.extensions import EXTENSIONS
    from bias_core.pytest_plugin.suite_factory import BUILTIN

    return (*BUILTIN, *(f for f in EXTENSIONS.suites if f not in BUILTIN))


def regression_cases(settings: Any) -> list[tuple[str, str, str]]:
    """(family, probe, metric) of every pairable audit test: each gated family's cases as it
    selects them for this run (``suites.selected_cases``: GenderPair's regard metrics follow the
    scorer in use), those whose metric pairs (``spec.PAIRED``, packages' metrics included)."""
    from bias_core.suites import selected_cases

    return [(family, probe, metric) for family in gated_families()
            for probe, metrics in selected_cases(family, settings).items() for metric in metrics if metric in PAIRED]


_SCORERS: dict[tuple[str, str], str] = {}


def _scorer(role: str, kind: str) -> str:
    """The classifier ``kind`` resolves to (auto: hub or offline), by name; resolved once."""
    if (role, kind) not in _SCORERS:
        from bias_core import classifiers

        make = classifiers.get_toxicity if role == "toxicity" else classifiers.get_regard
        _SCORERS[(role, kind)] = make(kind, progress=False).name
    return _SCORERS[(role, kind)]


def run_config(settings: Any, lm: Any = None, model: str | None = None, adapter: str | None = None,
               compared: bool = False) -> RunConfig:
    """This run's ``RunConfig``; without ``lm`` (before loading) model, tokenizer and dtype are blank,
    which pairing never requires to match."""
    from bias_core.probes.lexicon import get_lexicon
    from bias_core.suites.disclosure import PAPER_DECODING
    from bias_core.suites.genderpair import GENERATION

    extra: dict[str, Any] = {"precision": settings.load.precision}
    fingerprint = tokenizer = dtype = weights = ""
    served: dict[str, str] = {}
    if lm is not None:
        from bias_core.models.placement.devices import of_model

        where = of_model(lm)
        fingerprint, tokenizer, dtype = lm.fingerprint, lm.tokenizer_fingerprint, where["dtype"]
        extra["device"] = where["device"]
        extra["engine"] = lm.info().as_dict()
        weights, served = _model_identity(lm)
    return RunConfig(
        model=model or settings.model_value, model_fingerprint=fingerprint, tokenizer_fingerprint=tokenizer,
        dtype=dtype, adapter=adapter if model else settings.load.adapter, seed=settings.seed,
        decoding={"disclosure": PAPER_DECODING.as_key(), "genderpair": GENERATION.as_key(),
                  "association": {"causal_likelihood": settings.causal_likelihood}},
        lexicon_sha256=lexicon_sha256(get_lexicon(settings.lexicon).pairs),
        # --sample auto sizes each run by its own gates, so two runs' items could differ: a run
        # compared with a baseline (and the baseline, stored with --sample fixed) uses whole samples.
        sample_sizes={"genderpair": settings.genderpair_sample, "sample": _sample_mode(settings, compared)},
        scorers={"toxicity": _scorer("toxicity", settings.toxicity_classifier),
                 "regard": _scorer("regard", settings.regard_classifier)},
        extra=extra,
        engine=settings.load.engine,
        weights_sha256=weights,
        served=served,
    )


def _model_identity(lm: Any) -> tuple[str, dict[str, str]]:
    """(SHA-256 of the weight files the engine read, what is known of a served model). An engine
    that reads weights names their hash in its cache identity ("weights"); a served model
    (an endpoint in its engine card) has none, and is known by its URL, its served name and its
    answers to the canary requests of loading (everything else its cache identity holds)."""
    import hashlib
    import json

    identity = dict(lm.cache_identity()) if hasattr(lm, "cache_identity") else {}
    endpoint = lm.info().endpoint
    if not endpoint:
        return str(identity.get("weights") or ""), {}
    answers = {k: v for k, v in identity.items() if k not in ("engine", "model", "tokenizer", "served", "weights")}
    digest = hashlib.sha256(json.dumps(answers, sort_keys=True, default=str).encode()).hexdigest() if answers else ""
    return "", {"endpoint": endpoint, "model": str(identity.get("served") or ""), "answers": digest}


def _sample_mode(settings: Any, compared: bool) -> str:
    """The sampling a run's items came from: runs with a baseline or --mitigation keep whole samples."""
    mode = getattr(getattr(settings, "sample", None), "mode", "fixed")
    return "fixed" if mode == "auto" and (compared or getattr(settings, "mitigations", ())) else mode


def block_to_json(block: MetricItems) -> dict[str, Any]:
    return dataclasses.asdict(block)


def block_from_json(data: dict[str, Any]) -> MetricItems:
    return MetricItems(**{**data, "items": tuple(ItemValue(**it) for it in data["items"])})


def block_of(suite: Any, probe: str, metric: str, settings: Any) -> MetricItems:
    return items_from_result(probe_of(suite, probe, settings), suite.result(probe, metric), PAIRED[metric],
                             metric=metric)


def probe_of(suite: Any, name: str, settings: Any) -> Any:
    """The probe whose item ids a suite's per-item values are keyed by: the suite's own
    ``probe(name)`` (every project suite has one, ``suites.base.Suite``), else, for a package's
    suite without one, the catalogue's loader of ``name`` with the data_dir, name and seed it names."""
    if hasattr(suite, "probe"):
        return suite.probe(name)
    from bias_core import catalogue
    from bias_core.suites.base import call_with

    offered = {"data_dir": settings.data_dir, "name": name, "seed": settings.seed}
    return call_with(catalogue.probe_loader(name), {k: (lambda v=v: v) for k, v in offered.items()},
                     f"the loader of probe {name!r},")


# ----- configure and collection: checks before any model loads -------------------------------
def configure(config, settings) -> None:
    """Parse and check the regression options (usage errors now) into ``RunState.regression``, and
    register the release gate's hooks and fixtures."""
    try:
        options = parse_options(config.getoption, settings.load.cache_dir)
        if options.stored is not None:
            check_configs(run_config(settings, compared=True), options.stored.run, where=f"--baseline {options.baseline}")
    except AuditUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    run_state(config).regression = RegressionState(options, settings, summary_mark=None if options.summary_md is None
                                                   else mark_file(options.summary_md))
    config.addinivalue_line("markers", "regression: a candidate-vs-baseline paired test (bias_core.gating.regression)")
    config.pluginmanager.register(_Hooks(config), "bias_core.gating.regression.hooks")
    config.pluginmanager.register(sys.modules[__name__], "bias_core.pytest_plugin.regression_fixtures")


def _params(item) -> tuple[str, str, str] | None:
    callspec = getattr(item, "callspec", None)
    if item.get_closest_marker("regression") is None or callspec is None:
        return None
    p = callspec.params
    return (p["family"], p["probe"], p["metric"]) if p.get("probe") else None


def _selected(session) -> list[tuple[str, str, str]]:
    return [k for k in map(_params, session.items) if k is not None]


def _collection_problem(session, state: RegressionState) -> str | None:
    keys = _selected(session)
    if not keys or not state.options.active:
        return None
    settings = state.settings
    margins = settings.thresholds.regression if settings.thresholds is not None else {}
    missing = sorted({m for _, _, m in keys} - set(margins))
    if missing:
        return (f"{settings.thresholds_path}: no regression margin for {', '.join(missing)}. Fix: add "
                + " ".join(f"[regression.{m}]" for m in missing)
                + ' with margin = <largest tolerated worsening> and note = "..." (see the repository\'s thresholds.toml).')
    stored = state.options.stored
    if stored is None:
        return None
    where = f"--baseline {state.options.baseline}"
    absent = [f"{p} {m}" for _, p, m in keys if (p, m) not in stored.blocks]
    identities = _probe_identities(session.config, settings, {(f, p) for f, p, _ in keys})
    try:
        check_probes(identities, stored, where=where)
    except AuditUsageError as exc:
        return str(exc)
    if absent:
        cut = " (its per-item file was cut short)" if stored.truncated else ""
        return (f"{where}{cut} has no items for {len(absent)} selected test(s): {', '.join(absent[:5])}"
                f"{' ...' if len(absent) > 5 else ''}. Fix: audit the baseline with the same families and probes, "
                "or deselect these (-k).")
    return None


def _probe_identities(config, settings, pairs) -> dict[str, tuple[str, str]]:
    """probe -> (version, content sha256) of the items this run will audit, loaded from the data
    alone (no model), under the run's sample plan: a probe cut to its fixed size (BBQ's first 1,024
    questions) is known by the cut, as its baseline stored it, not by its whole pool."""
    from bias_core.pytest_plugin.suite_factory import make_suite

    suites: dict[str, Any] = {}
    out = {}
    for family, probe in sorted(pairs):
        suite = suites.setdefault(family, make_suite(family, None, settings, config))
        try:
            loaded = probe_of(suite, probe, settings)
        except (DataSourceMissing, ProbeNotApplicable):
            continue  # its tests skip with the reason
        out[probe] = (str(loaded.version), probe_sha256(loaded))
    return out


# ----- per-item blocks of the audit tests ----------------------------------------------------------
def _state(config) -> RegressionState:
    state = run_state(config).regression
    assert state is not None, "configure() sets it before any hook or fixture of the release gate runs"
    return state


def record(request, result, row: dict[str, Any]) -> None:
    """The gate judged an audit test (``pytest_bias_core_gate_result``): its per-item block travels
    with its report to the controller, and ``row`` names the items it came from."""
    run = run_state(request.config)
    state = run.regression
    family, probe, metric = row["family"], row["probe"], row["metric"]
    if state is None or row.get("variant") or metric not in PAIRED or family not in gated_families():
        return
    if "suite" not in request.fixturenames:
        return  # a result the suite did not make (e.g. a synthetic gate test): no probe to key items by
    lm = run.model
    if state.candidate_run is None:
        state.candidate_run = run_config(state.settings, lm, compared=state.options.baseline is not None)
    suite = request.getfixturevalue("audit_suites")(family)
    try:
        block = items_from_result(probe_of(suite, probe, state.settings), result, PAIRED[metric], metric=metric)
    except ValueError as exc:
        # The items do not add up to the metric's value (or are not the probe's): the number the
        # gate judged is not the one the items describe, so there is no verdict, only an error.
        row.update(verdict="error", reason=f"internal consistency check failed: {exc}")
        pytest.fail(f"ERROR in {probe} {metric}: internal consistency check failed: {exc}. No per-item values are "
                    f"stored and no verdict is given. Fix: {_consistency_fix(family, metric)}", pytrace=False)
    request.node.stash[ITEMS] = {"run": state.candidate_run.to_json(), "block": block_to_json(block)}
    # results.json names the items it came from: a later edit of either shows
    row.update(probe_sha256=block.probe_sha256, items_sha256=block_sha256(block))


def _consistency_fix(family: str, metric: str) -> str:
    """Who can fix a block that does not add up: bias-core for its own families, else the package."""
    from bias_core.pytest_plugin.suite_factory import BUILTIN

    if family in BUILTIN:
        return ("report this as a bias-core bug with the probe's data source (a data file with repeated or missing "
                "items can cause it; --data-dir files are checked for both).")
    return (f"the package that registers the {family!r} suite must list one detail per probe item in {metric}'s "
            "result, keyed by the item's id (\"id\") with its per-item value (\"score\"), whose mean (x the pairing's "
            f"item_scale) is the value; or declare {metric} NotPaired (docs/extending/suite.md).")


# ----- the paired comparisons of the session ---------------------------------------------------------
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
    options = _state(pytestconfig).options
    with _usage_exit(), terminal(pytestconfig):
        return load_model(options.live, dataclasses.replace(audit_settings.load, adapter=options.live_adapter),
                          option="--baseline")


@pytest.fixture(scope="session")
def regression_comparisons(request, audit_settings) -> dict[tuple[str, str, str], Any]:
    """Every selected comparison of the session, adjusted and judged: key -> row dict, or the
    exception that stopped it (re-raised by its test: a skip for missing data)."""
    from bias_core.pytest_plugin.suite_factory import make_suite

    options = _state(request.config).options
    keys = _selected(request.session)
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
                out[key] = _error_row(paired, family, options.label(), problem)
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
    method = "bh" if len(comparisons) > LARGE_FAMILY else "holm"
    for key, c in zip(comparisons, adjust(list(comparisons.values()))):
        out[key] = {**_row(c, key[0], method, options.label(), configs), **_pair_counts(pairs[key]), **powers[key]}
    for key, found in out.items():
        if isinstance(found, dict) and found.get("verdict") == "error":
            found["config"] = configs.describe()
    return out


def _pair_counts(paired: Any) -> dict[str, Any]:
    """What a row stands on: pairs, the items the metric uses, those with a value in one run only (by
    side), and the probe's items with a value in neither run."""
    return {"n_items": paired.n_items, "missing_candidate": paired.missing_candidate,
            "missing_baseline": paired.missing_baseline, "n_unused": paired.n_unused, "pairs": paired.pairs_text()}


def _error_row(paired: Any, family: str, baseline: str, reason: str) -> dict[str, Any]:
    """A comparison that gives no verdict (too many items left out): its counts and why."""
    return {"kind": "regression", "test_id": f"regression-{paired.probe}-{paired.metric}", "family": family,
            "probe": paired.probe, "metric": paired.metric, "baseline": baseline, "value": None, "ci_low": None,
            "ci_high": None, "n": len(paired.ids), "n_dropped": paired.n_dropped, **_pair_counts(paired),
            "baseline_value": paired.baseline_value, "candidate_value": paired.candidate_value,
            "verdict": "error", "reason": reason}


def _row(c: PairedComparison, family: str, method: str, baseline: str, configs) -> dict[str, Any]:
    p_adjusted = c.p_bh if method == "bh" else c.p_holm
    verdict = c.verdict
    if verdict == FAIL and not p_adjusted < ALPHA:
        verdict = INCONCLUSIVE  # beyond the margin, but not significantly worse once adjusted
    # Significantly worse, by the test a fail needs, but not beyond the margin: reported, not blocking.
    worse = verdict != FAIL and c.harm > 0 and p_adjusted is not None and p_adjusted < ALPHA
    return {
        "kind": "regression", "test_id": f"regression-{c.test_id}", "family": family, "probe": c.probe,
        "metric": c.metric, "baseline": baseline, "value": c.delta, "ci_low": c.delta_ci[0], "ci_high": c.delta_ci[1],
        "n": c.n, "n_dropped": c.n_dropped, "baseline_value": c.baseline_value, "candidate_value": c.candidate_value,
        "harm": c.harm, "harm_ci_low": c.harm_ci[0], "harm_ci_high": c.harm_ci[1], "margin": c.margin,
        "margin_rule": c.margin_rule,
        "better": c.direction, "ideal": c.ideal, "verdict": verdict, "worse_within_margin": worse, "p_value": c.p_value, "p_holm": c.p_holm,
        "p_bh": c.p_bh, "p_adjusted": p_adjusted, "adjustment": method, "test": c.test,
        "config": configs.describe(), "dtypes_differ": configs.dtype_differs,
        "moved": {"up": list(c.moved_up), "down": list(c.moved_down)},
    }


def comparison_from_row(row: dict[str, Any]) -> PairedComparison:
    """A results.json regression row back as a ``PairedComparison`` (for the Markdown summary)."""
    return PairedComparison(
        probe=row["probe"], metric=row["metric"], n=int(row.get("n") or 0), n_dropped=int(row.get("n_dropped") or 0),
        baseline_value=row["baseline_value"], candidate_value=row["candidate_value"], delta=row["value"],
        delta_ci=(row["ci_low"], row["ci_high"]), harm=row["harm"], harm_ci=(row["harm_ci_low"], row["harm_ci_high"]),
        p_value=row["p_value"], test=row.get("test", ""), direction=row["better"], ideal=row.get("ideal"),
        p_holm=row.get("p_holm"), p_bh=row.get("p_bh"), margin=row.get("margin"), margin_rule=row.get("margin_rule"),
        verdict=row.get("verdict"))


_PROPERTIES = ("baseline", "delta", "ci_low", "ci_high", "p_value", "p_adjusted", "adjustment", "harm",
               "harm_ci_low", "harm_ci_high", "margin", "margin_rule", "worse_within_margin", "verdict", "config")


@pytest.fixture
def regression_gate(request, regression_comparisons):
    """regression_gate(family, probe, metric): the test's verdict from the session's comparisons."""
    def _gate(family: str, probe: str, metric: str) -> str:
        found = regression_comparisons[(family, probe, metric)]
        if isinstance(found, (AuditUsageError, NoItemValues)):  # nothing to pair: said, not a traceback
            pytest.fail(f"ERROR in regression-{probe}-{metric}: {found}", pytrace=False)
        if isinstance(found, BaseException):
            raise found
        settings = _state(request.config).settings
        row = dict(found, run_id=run_state(request.config).run_id, nodeid=request.node.nodeid,
                   model=settings.model_value)
        request.node.stash[ROW] = row
        if row["verdict"] == "error":
            pytest.fail(f"ERROR in {row['test_id']}: {row['reason']}", pytrace=False)
        properties = {**row, "delta": row["value"]}
        request.node.user_properties.extend((key, properties[key]) for key in _PROPERTIES)
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


# ----- hooks: rows, items, summary -----------------------------------------------------------------------
class _Hooks:
    def __init__(self, config):
        self.config = config

    def pytest_itemcollected(self, item) -> None:
        key = _params(item)
        if key is not None:
            item.extra_keyword_matches.add(key[0])  # -k disclosure selects its regression tests too

    # first: a block that does not add up fails the test before any other implementation reads the
    # row, and its fields come before precision's in the row, as they always have
    @pytest.hookimpl(tryfirst=True)
    def pytest_bias_core_gate_result(self, request, result, row) -> None:
        record(request, result, row)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session) -> None:
        problem = _collection_problem(session, _state(self.config))
        if problem is None:
            return
        if getattr(self.config, "workerinput", None) is None:
            raise pytest.UsageError(problem)
        session.items[:] = []  # as the gate check does: the controller ends the run with exit 4
        session.shouldstop = f"{USAGE_STOP}{problem}"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if report.when != "call":
            if report.skipped and _params(item) is not None:
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
        elif _params(item) is not None and (report.failed or report.skipped):
            report.bias_row = self._skipped_row(item, report)
        return report

    def _skipped_row(self, item, report) -> dict[str, Any]:
        family, probe, metric = _params(item)
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else str(report.longrepr)[-500:]
        return {"kind": "regression", "run_id": run_state(self.config).run_id, "nodeid": item.nodeid,
                "test_id": f"regression-{probe}-{metric}", "family": family, "probe": probe, "metric": metric,
                "model": _state(self.config).settings.model_value, "value": None, "ci_low": None,
                "ci_high": None, "n": None, "verdict": "skipped" if report.skipped else "error", "reason": reason,
                "duration_s": report.duration}

    def pytest_runtest_logreport(self, report) -> None:
        if getattr(self.config, "workerinput", None) is not None:
            return
        state, run_dir = _state(self.config), run_state(self.config).run_dir
        row = getattr(report, "bias_row", None)
        if row is not None:
            state.rows = [r for r in state.rows if r.get("nodeid") != row.get("nodeid")] + [row]
        payload = getattr(report, "bias_items", None)
        if payload is not None and run_dir is not None:
            from bias_core.pytest_plugin.outputs import output_log

            # sticky: a block that missed the file leaves it incomplete as a later baseline
            output_log(self.config).attempt(ITEMS_FILE, lambda: self._store_items(state, run_dir, payload),
                                         sticky=True)

    @staticmethod
    def _store_items(state: RegressionState, run_dir: Path, payload: dict[str, Any]) -> None:
        path = run_dir / ITEMS_FILE
        if not state.items_started:
            start_items(path, RunConfig.from_json(payload["run"]))
            state.items_started = True
        append_block(path, block_from_json(payload["block"]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        state = _state(self.config)
        judged = [r for r in state.rows if r.get("kind") == "regression" and r.get("config")]
        if not judged:
            return
        counts = {v: sum(r["verdict"] == v for r in judged) for v in (FAIL, INCONCLUSIVE, "pass", "error")}
        errored = f", {counts['error']} errored (too few pairs)" if counts["error"] else ""
        # the baseline's label and card come from a run folder (a downloaded artifact): shown escaped
        terminalreporter.write_sep("-", visible(f"candidate vs baseline ({state.options.label()}): {len(judged)} paired "
                                                f"comparisons, {counts[FAIL]} worse beyond the margin, "
                                                f"{counts[INCONCLUSIVE]} inconclusive, {counts['pass']} passed{errored}"))
        adjusted = next((r["adjustment"] for r in judged if r.get("adjustment")), "")
        terminalreporter.line(visible(f"  {judged[0]['config']}" + (f"; p-values adjusted by {adjusted}" if adjusted else "")))
        from bias_core.gating.regression.power import detect_text
        from bias_core.reports.fmt import pairs_of, worse_note

        width = max(len(r["test_id"]) for r in judged)
        for r in sorted(judged, key=lambda r: r["test_id"]):  # every row's n: what its verdict stands on
            short = r["verdict"] in (FAIL, "error") or bool(r.get("n_dropped"))
            terminalreporter.line(f"  {r['test_id']:<{width}}  {r['verdict']:<12} n = {pairs_of(r)}",
                                  red=r["verdict"] in (FAIL, "error"), yellow=short and r["verdict"] not in (FAIL, "error"))
        for r in judged:
            if worse_note(r):
                terminalreporter.line(visible(f"  {r['test_id']}: {worse_note(r)} (margin {r['margin']:.4g})"), yellow=True)
        for r in judged:
            if detect_text(r):
                terminalreporter.line(visible(f"  {r['test_id']}: {detect_text(r)}"), yellow=True)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if getattr(self.config, "workerinput", None) is not None:
            return
        state = _state(self.config)
        if state.options.summary_md is None and not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        if not state.rows:
            return
        from bias_core.pytest_plugin.outputs import output_log

        write_run_summary(state, exitstatus, output_log(self.config).attempt)


def write_run_summary(state: RegressionState, exitstatus: int, attempt=None) -> list[Path]:
    """Write the Markdown summary to --summary-md and $GITHUB_STEP_SUMMARY; with ``attempt``
    (``OutputLog.attempt``) a destination that cannot be written is recorded, not raised, and the
    other is still written."""
    from bias_core.gating.regression.power import detect_text
    from bias_core.gating.regression.summary import render_summary, write_summary
    from bias_core.reports.banner import banner_for_run
    from bias_core.reports.fmt import pairs_of, worse_note

    regression = [comparison_from_row(r) for r in state.rows if r.get("kind") == "regression" and r.get("harm") is not None]
    absolute = [r for r in state.rows if r.get("kind") != "regression"]
    banner = banner_for_run(state.rows, {"strict": state.settings.strict,
                                         "complete": int(exitstatus) in (0, 1)})
    note = next((r.get("config", "") for r in state.rows if r.get("kind") == "regression" and r.get("config")), "")
    compared = [r for r in state.rows if r.get("kind") == "regression"]
    # the banner's headline and its test lines, grouped as in the terminal and report.html
    markdown = render_summary(regression, absolute, banner=banner.markdown(),
                              baseline=state.options.label(), config_note=note,
                              title=f"Bias audit: {state.settings.model_value}",
                              worse={f"{r['probe']}-{r['metric']}": worse_note(r) for r in state.rows if worse_note(r)},
                              pairs={f"{r['probe']}-{r['metric']}": pairs_of(r) for r in compared if r.get("n") is not None},
                              errored={f"{r['probe']}-{r['metric']}": str(r.get("reason") or "the test raised an error")
                                       for r in compared if r.get("verdict") == "error"},
                              weak={f"{r['probe']}-{r['metric']}": detect_text(r) for r in compared if detect_text(r)})
    if attempt is None:
        return write_summary(markdown, state.options.summary_md, since=state.summary_mark)
    written: list[Path] = []
    path, step = state.options.summary_md, os.environ.get("GITHUB_STEP_SUMMARY")
    if path is not None:
        attempt(f"--summary-md {path}", lambda: written.extend(write_summary(markdown, path, environ={}, since=state.summary_mark)))
    if step:
        attempt(f"$GITHUB_STEP_SUMMARY {step}", lambda: written.extend(write_summary(markdown, None)))
    return written

