"""Audit suites: glue from probes through the model to metrics, one object per family.

What each family audits is read from ``bias_core.catalogue`` (each metric declared once), so
thresholds.toml can be validated before any model loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bias_core import catalogue
from bias_core.catalogue import ACROSS_GROUPS as ACROSS_GROUPS  # re-exported: the audits import them from here
from bias_core.catalogue import DISCLOSURE_PROBES as DISCLOSURE_PROBES
from bias_core.catalogue import GROUP_PROBES as GROUP_PROBES
from bias_core.catalogue import ROBUSTNESS as ROBUSTNESS

DISCLOSURE_METRICS = tuple(m.name for m in catalogue.metrics_of("disclosure"))

# probe -> its metrics; each pair is one gated test (test_association[<probe>-<metric>]).
ASSOCIATION_CASES: dict[str, tuple[str, ...]] = catalogue.cases("association")
# probe -> its metrics of GenderBench's probes (test_genderbench[<probe>-<metric>]).
GENDERBENCH_CASES: dict[str, tuple[str, ...]] = catalogue.cases("genderbench")


def regard_prefix(proxy: bool) -> str:
    return "regard_proxy" if proxy else "regard"


def genderpair_cases(proxy: bool) -> dict[str, tuple[str, ...]]:
    """probe -> metrics of the GenderPair audit, for the regard scorer in use (``proxy``: its
    offline VADER proxy): the other scorer's metrics are left out (``MetricSpec.audited_with``)."""
    return catalogue.cases("genderpair", exclude=lambda m: not m.audited_with(proxied(proxy)))


def proxied(regard_proxy: bool) -> tuple[str, ...]:
    """The classifier roles an offline proxy fills in a run (``MetricSpec.audited_with``): the
    regard scorer's where it is the VADER proxy (``is_proxy``); no toxicity classifier is one."""
    return ("regard",) if regard_proxy else ()


def regard_is_proxy(kind: str) -> bool:
    """Whether the regard scorer ``kind`` (``--regard-classifier``) resolves to the VADER proxy."""
    from bias_core.classifiers import get_regard

    return bool(get_regard(kind, progress=False).is_proxy)


# family -> (the run's settings -> probe -> metrics): the cases each project family's audit file
# (audits/test_<family>.py) parametrizes, from these tables; GenderPair's follow the regard scorer.
CASE_CHOICE: dict[str, Callable[[Any], dict[str, tuple[str, ...]]]] = {
    "disclosure": lambda settings: dict.fromkeys(DISCLOSURE_PROBES, DISCLOSURE_METRICS),
    "association": lambda settings: dict(ASSOCIATION_CASES),
    "genderpair": lambda settings: genderpair_cases(regard_is_proxy(settings.regard_classifier)),
    "genderbench": lambda settings: dict(GENDERBENCH_CASES),
}


def selected_cases(family: str, settings: Any) -> dict[str, tuple[str, ...]]:
    """probe -> metrics of the gated audit tests ``family`` runs under the run's ``settings`` (an
    ``AuditSettings``, or anything with the fields a choice reads): a project family's by its
    ``CASE_CHOICE``, any other (an installed package's) every case its catalogue entries declare
    (``catalogue.cases``, as ``audits/test_extensions.py`` runs them)."""
    choose = CASE_CHOICE.get(family)
    return catalogue.cases(family) if choose is None else choose(settings)


# Mitigation: guards against over-debiasing and damage, each on its own probe.
MITIGATION_GUARDS = catalogue.guards()


def _family(family: str) -> dict[str, tuple[str, ...]]:
    specs = catalogue.metrics_of(family)
    return {"probes": tuple(dict.fromkeys(p for m in specs for p in m.probes)), "metrics": tuple(m.name for m in specs)}


CATALOGUE: dict[str, dict[str, tuple[str, ...]]] = {family: _family(family) for family in catalogue.FAMILIES}


def known_probes() -> set[str]:
    """Every probe a gate may name, those of installed packages' metrics included."""
    return {p for m in catalogue.declared() for p in m.probes}


def known_metrics() -> set[str]:
    return {m.name for m in catalogue.declared()}
