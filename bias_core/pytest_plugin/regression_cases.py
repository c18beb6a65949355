"""Which paired comparisons a run makes, and whether its baseline can make them.

``test_regression[<probe>-<metric>]`` (audits/test_regression.py) is parametrised by
``regression_cases``: every family with a suite, the project's and installed packages', × the
cases it selects for the run, where the metric's declaration pairs. Once the tests are collected,
``collection_problem`` checks the selected ones against the margins and a stored baseline, before
any model loads (``BaselineMismatch``, exit 4).
"""

from __future__ import annotations

from typing import Any

from bias_core.errors import AuditUsageError, DataSourceMissing, ProbeNotApplicable
from bias_core.gating.regression.items import probe_sha256
from bias_core.gating.regression.pairing import check_probes
from bias_core.gating.regression.spec import PAIRED
from bias_core.pytest_plugin.regression_items import probe_of
from bias_core.pytest_plugin.regression_options import RegressionOptions


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


def case_of(item) -> tuple[str, str, str] | None:
    """(family, probe, metric) of a regression test; None for any other test and the placeholder."""
    callspec = getattr(item, "callspec", None)
    if item.get_closest_marker("regression") is None or callspec is None:
        return None
    p = callspec.params
    return (p["family"], p["probe"], p["metric"]) if p.get("probe") else None


def selected(session) -> list[tuple[str, str, str]]:
    return [k for k in map(case_of, session.items) if k is not None]


def collection_problem(session, options: RegressionOptions, settings: Any) -> str | None:
    """Why the selected regression tests cannot run (a missing margin, a stored baseline without
    their items or with other probe content), or None."""
    keys = selected(session)
    if not keys or not options.active:  # a log comparison's margins were found when its logs were read
        return None
    margins = settings.thresholds.regression if settings.thresholds is not None else {}
    missing = sorted({m for _, _, m in keys} - set(margins))
    if missing:
        return (f"{settings.thresholds_path}: no regression margin for {', '.join(missing)}. Fix: add "
                + " ".join(f"[regression.{m}]" for m in missing)
                + ' with margin = <largest tolerated worsening> and note = "..." (see the repository\'s thresholds.toml).')
    stored = options.stored
    if stored is None:
        return None
    where = f"--baseline {options.baseline}"
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
