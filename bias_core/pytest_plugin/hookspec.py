"""Hooks through which another installed package adds probes, metrics and suites to the audit
(``pytest_bias_core_register``) and sees each gated result (``pytest_bias_core_gate_result``, which
the release gate and ``--precision`` implement too).

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


@hookspec
def pytest_bias_core_gate_result(request, result, row: dict) -> None:
    """The ``gate`` fixture judged an audit test's result; called in the process that ran the test
    (an xdist worker's), before the test passes or fails by its verdict.

    - ``request``: the test's ``pytest.FixtureRequest`` (``request.node`` is its item);
    - ``result``: the ``bias_core.metrics.result.MetricResult`` judged;
    - ``row``: its result row, a JSON-plain dict as results.json holds it (``family``, ``probe``,
      ``metric``, ``variant`` where the test has one, ``value``, ``ci_low``, ``ci_high``, ``n``,
      the gate's ``limit`` and ``direction``, ``verdict``...). A field an implementation adds
      goes into the run's files with the row; an exception (``pytest.fail``) fails the test.

    bias_core implements it twice: the release gate (``tryfirst``) stores the test's per-item
    values and adds ``probe_sha256`` and ``items_sha256``; ``--precision`` (``trylast``) adds
    ``precision``, ``precision_bound`` and ``rechecked``. The row as the controller finally
    records it (a failed test's verdict "error", its ``duration_s``) is the ``bias_row`` attribute
    of the test's report (``pytest_runtest_logreport``).
    """
