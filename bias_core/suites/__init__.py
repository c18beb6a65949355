"""Audit suites: glue from probes through the model to metrics, one object per family.

The catalogue lists every family's probes and metrics, so thresholds.toml can be validated
before any model loads.
"""

from __future__ import annotations

from bias_core.probes.disclosure import PROBE_NAMES as DISCLOSURE_PROBES

DISCLOSURE_METRICS = ("GAS", "GLD", "ADD")

CATALOGUE: dict[str, dict[str, tuple[str, ...]]] = {
    "disclosure": {"probes": DISCLOSURE_PROBES, "metrics": DISCLOSURE_METRICS},
}


def known_probes() -> set[str]:
    return {p for fam in CATALOGUE.values() for p in fam["probes"]}


def known_metrics() -> set[str]:
    return {m for fam in CATALOGUE.values() for m in fam["metrics"]}
