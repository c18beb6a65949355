"""The run card: what a run audited and how (model, engine, device, dtype, what loading chose,
the paper-or-project definitions, sampling), for the terminal header, JUnit and results.json."""

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


def run_info(config) -> dict[str, Any]:
    run = run_state(config)
    settings = run.settings
    versions = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "bias_core"):
        if mod in sys.modules:
            versions[mod] = getattr(sys.modules[mod], "__version__", "")
    return {
        "run_id": run.run_id, "model": settings.model_value, "seed": settings.seed,
        "started": run.started, "argv": list(sys.argv), "data_dir": str(settings.data_dir or ""),
        "thresholds": str(settings.thresholds_path), "strict": settings.strict, **target(config),
        "precision": {"mode": settings.load.precision}, "model_card": model_card(config),
        "versions": versions, **definitions(settings), "sampling": plan(config).describe(),
    }
