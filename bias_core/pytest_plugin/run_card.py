"""The run card: what a run audited and how (model, engine, device, dtype, what loading chose,
the paper-or-project definitions, sampling), for the terminal header, JUnit and results.json.

A comparison of two logs (``--candidate-log``/``--baseline-log``) loads no model: its card names
the two logs, the tools' versions, both sides' models and settings, and what differs between them
(``gating/external_logs/card.RunCard``), and says nothing of devices, dtypes or definitions."""

from __future__ import annotations

import platform
import sys
from typing import Any

from bias_core.pytest_plugin.options import AuditSettings
from bias_core.pytest_plugin.regression_session import find_regression
from bias_core.pytest_plugin.session_state import plan, run_state


def definitions(settings: AuditSettings) -> dict[str, Any]:
    """Run-level record of the paper-or-project choices (docs/audits/: departures from the papers)."""
    from bias_core.probes.lexicon import get_lexicon

    lexicon = get_lexicon(settings.lexicon)
    return {"lexicon": {"name": lexicon.name, "pairs": [list(p) for p in lexicon.pairs]},
            "articles": settings.articles, "causal_likelihood": settings.causal_likelihood}


def definitions_line(settings: AuditSettings) -> str:
    from bias_core.probes.lexicon import get_lexicon

    causal = settings.causal_likelihood
    if causal == "paper":  # say what "paper" resolves to: DA-Gender's text and StereoSet's code differ
        causal = "paper (DA_score total, StereoSet and occupation pronouns per-token mean)"
    return (f"lexicon {get_lexicon(settings.lexicon).describe()}; articles {settings.articles}; "
            f"causal likelihood {causal}")


def sampling_line(settings: AuditSettings) -> str:
    from bias_core.gating.adaptive_sampling import DEFAULT_CAP, FIXED_SIZES, PROBE_CAPS

    opts = settings.sample
    if opts.mode == "fixed" and FIXED_SIZES:
        sizes = ", ".join(f"{k} {v}" for k, v in FIXED_SIZES.items())
        return f"fixed (bootstrap CIs; the first units of a seeded order: {sizes})"
    if opts.mode != "auto":
        return f"{opts.mode} (bootstrap CIs)"
    caps = opts.cap if opts.cap is not None else f"{DEFAULT_CAP} ({', '.join(f'{k} {v}' for k, v in PROBE_CAPS.items())})"
    budget = "none" if opts.budget_s is None else f"{opts.budget_s:g} s"
    return f"auto: item cap {caps}, budget {budget}, time-uniform confidence sequences"


def model_card(config) -> list[str]:
    """What was chosen for the user in loading the audited (and a live baseline) model: files, an
    adapter's base; once loaded in this process, what loading dropped (models/weights/load_report.py)."""
    run = run_state(config)
    regression, lm = find_regression(config), run.model
    return [*run.settings.model_card, *(regression.options.card if regression else ()),
            *(getattr(lm, "load_notes", ()) if lm is not None else ())]


def target(config) -> dict[str, str]:
    """Device and dtype this run uses, resolved (computed once; imports torch)."""
    run = run_state(config)
    if run.target is None:
        from bias_core.models.placement.devices import describe

        workers = getattr(config.option, "numprocesses", 0) if config.pluginmanager.hasplugin("xdist") else 0
        target = describe(run.settings.load, workers if isinstance(workers, int) else 0)
        run.target = {"engine": "transformers", **target}  # run card, JUnit: the engine always named
    return run.target


def log_plan(config) -> Any:
    """The comparison of two logs this run makes (a ``LogPlan``), or None."""
    regression = find_regression(config)
    return regression.options.logs if regression is not None else None


def log_header(config) -> list[str]:
    """The terminal header of a comparison of two logs: the logs, tools, models, differences."""
    card = log_plan(config).card
    settings = run_state(config).settings
    where = (f"{settings.thresholds_path} [regression.external] over the defaults" if settings.thresholds is not None
             else "the defaults (bias_core/gating/external_logs/defaults.py); no thresholds file")
    return [f"bias-core: release gate on two {card.candidate.tool} logs, candidate vs baseline; no model is loaded",
            f"bias-core: candidate log: {card.side_line('candidate')}",
            f"bias-core: baseline log: {card.side_line('baseline')}",
            *(f"bias-core: differs: {d}" for d in card.differences()),
            f"bias-core: margins: {where}"]


def log_properties(config) -> list[tuple[str, str]]:
    """JUnit's global properties of a comparison of two logs."""
    card = log_plan(config).card
    return [("candidate_log", card.candidate.source), ("baseline_log", card.baseline.source), ("tools", card.tools()),
            ("candidate_model", card.candidate.model), ("baseline_model", card.baseline.model),
            ("log_differences", "; ".join(card.differences()))]


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "bias_core"):
        if mod in sys.modules:
            versions[mod] = getattr(sys.modules[mod], "__version__", "")
    return versions


def _log_info(config, plan) -> dict[str, Any]:
    """results.json's run info of a comparison of two logs (report.html's run card reads it)."""
    run = run_state(config)
    settings = run.settings
    card = plan.card
    return {
        "run_id": run.run_id, "model": f"{card.candidate.model} (candidate log) vs {card.baseline.model} (baseline log)",
        "seed": settings.seed, "started": run.started, "argv": list(sys.argv),
        "thresholds": str(settings.thresholds_path), "strict": settings.strict,
        "candidate_log": card.side_line("candidate"), "baseline_log": card.side_line("baseline"),
        "tools": card.tools(), "log_differences": card.differences(), "logs": card.to_json(),
        "versions": _versions(),
    }


def run_info(config) -> dict[str, Any]:
    run = run_state(config)
    settings = run.settings
    plan_of_logs = log_plan(config)
    if plan_of_logs is not None:
        return _log_info(config, plan_of_logs)
    versions = _versions()
    return {
        "run_id": run.run_id, "model": settings.model_value, "seed": settings.seed,
        "started": run.started, "argv": list(sys.argv), "data_dir": str(settings.data_dir or ""),
        "thresholds": str(settings.thresholds_path), "strict": settings.strict, **target(config),
        "precision": {"mode": settings.load.precision}, "model_card": model_card(config),
        "versions": versions, **definitions(settings), "sampling": plan(config).describe(),
    }
