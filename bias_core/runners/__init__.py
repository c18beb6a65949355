"""Runners: the only code that sends a probe's items through a model.

Probes (``bias_core.probes``) hold data only and metrics (``bias_core.metrics``) are pure
functions of numbers and text; a runner asks the model for the numbers a metric needs, in as
few batched calls as it can, and hands them to the metric. tests/test_import_rules.py keeps
probes and metrics from importing models or runners.
"""
