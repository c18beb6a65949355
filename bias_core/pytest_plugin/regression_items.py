"""The per-item blocks of the regression gate: which probe keys a suite's per-item values, a
metric's block from a suite's result, and the block as JSON (it travels from an xdist worker to
the controller on the test report, which pytest serialises)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bias_core.gating.regression.items import ItemValue, MetricItems, items_from_result
from bias_core.gating.regression.spec import PAIRED


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


def consistency_fix(family: str, metric: str) -> str:
    """Who can fix a block that does not add up: bias-core for its own families, else the package."""
    from bias_core.pytest_plugin.suite_factory import BUILTIN

    if family in BUILTIN:
        return ("report this as a bias-core bug with the probe's data source (a data file with repeated or missing "
                "items can cause it; --data-dir files are checked for both).")
    return (f"the package that registers the {family!r} suite must list one detail per probe item in {metric}'s "
            "result, keyed by the item's id (\"id\") with its per-item value (\"score\"), whose mean (x the pairing's "
            f"item_scale) is the value; or declare {metric} NotPaired (docs/extending/suite.md).")
