"""Hooks through which another installed package adds probes, metrics and suites to the audit.

A package declares a module (or object) in the entry-point group ``bias_core.suites``::

    [project.entry-points."bias_core.suites"]
    toy = "toy_bias"

The plugin loads every such entry point when pytest configures, registers it as a pytest plugin
and calls its ``pytest_bias_core_register``, before thresholds.toml is read, so the new metric has its
gate checked like the project's own. The audit's ``audits/test_extensions.py`` then runs one
gated test per (probe, metric) of each registered suite, with the suite's family as its
``audit`` marker. As pytest-xdist's ``newhooks.py``: registered with
``pluginmanager.add_hookspecs``.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("pytest")

ENTRY_POINT_GROUP = "bias_core.suites"


@hookspec
def pytest_bias_core_register(registry) -> None:
    """Add to the audit through ``registry`` (a ``bias_core.pytest_plugin.extensions.Registry``):

    - ``registry.add_metric(MetricSpec(...))``: a catalogue entry (its family may be new);
    - ``registry.add_probe(ProbeSpec(...))``: a probe declared as the project declares its own
      (its loader, family, data sources with each published file's hash and counts, sampling),
      into the catalogue's probe table; ``registry.add_probe(name, loader)`` still takes a bare
      loader. ``loader(data_dir)`` returns the probe (a suite built on
      ``bias_core.suites.base.Suite`` loads it with ``suite.probe(name)``);
    - ``registry.add_suite(family, factory)``: ``factory(lm, settings, probes)`` returns an object
      with ``result(probe, metric) -> MetricResult`` (e.g. a ``bias_core.suites.base.Suite``);
      ``probes`` maps the registered probe names to their loaders.
    """
