"""Metrics: pure functions from numbers/text to a MetricResult. No model calls here."""

from bias_core.metrics.result import MetricResult

__all__ = ["MetricResult"]
