"""Probes, metrics and suites added by other installed packages (see bias_core.pytest_plugin.hookspec)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from bias_core import catalogue
from bias_core.catalogue import MetricSpec, ProbeSpec


@dataclass
class Registry:
    probes: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    suites: dict[str, Callable[..., Any]] = field(default_factory=dict)
    metrics: list[MetricSpec] = field(default_factory=list)

    def add_metric(self, spec: MetricSpec) -> None:
        catalogue.register(spec)
        if spec not in self.metrics:
            self.metrics.append(spec)

    def add_probe(self, probe: ProbeSpec | str, loader: Callable[..., Any] | str | None = None) -> None:
        """Into the catalogue's probe table, where the project's own probes are declared: a
        ``ProbeSpec`` (its loader, family, data and sampling, as the project declares its own), or
        a name and a bare loader (kept for packages written before declarations; wrapped into one
        with nothing else declared)."""
        spec = catalogue.register_probe(probe, loader)
        if spec.loader is not None:  # what a package's suite is handed: name -> the function that loads it
            self.probes[spec.name] = spec.loader if callable(spec.loader) else functools.partial(_load, spec.name)

    def add_suite(self, family: str, factory: Callable[..., Any]) -> None:
        if family in catalogue.FAMILIES:
            raise ValueError(f"suite {family!r}: the project's own family; a package adds a new one")
        self.suites[family] = factory

    def cases(self) -> list[tuple[str, str, str]]:
        """(family, probe, metric) of every registered suite's metrics: one gated test each."""
        return [(family, probe, metric) for family in self.suites
                for probe, metrics in catalogue.cases(family).items() for metric in metrics]


def _load(name: str, *args: Any, **kwargs: Any) -> Any:
    """A declared loader named as "module:function", imported when first called."""
    return catalogue.probe_loader(name)(*args, **kwargs)


EXTENSIONS = Registry()


def load_entry_points(pluginmanager) -> None:
    """Register each ``bias_core.suites`` entry point as a pytest plugin and let it register."""
    from importlib.metadata import entry_points

    from bias_core.pytest_plugin.hookspec import ENTRY_POINT_GROUP

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        name = f"{ENTRY_POINT_GROUP}.{ep.name}"
        if pluginmanager.get_plugin(name) is None and not pluginmanager.is_blocked(name):
            pluginmanager.register(ep.load(), name)
    pluginmanager.hook.pytest_bias_core_register(registry=EXTENSIONS)
