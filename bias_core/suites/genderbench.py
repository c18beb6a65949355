"""The GenderBench audit (Pikuliak 2025; genderbench 1.1.0): its probes' prompts generated as its
harness generates them, each answer evaluated as its evaluators do, its metrics as its metric
calculators define them (bias_core/runners/genderbench.py, bias_core/metrics/genderbench.py).

The suite adds nothing to the base: each probe is loaded and run as its catalogue entries say, and
its runner gives every metric of the probe from one set of generations.
"""

from __future__ import annotations

from dataclasses import dataclass

from bias_core.suites.base import Suite


@dataclass
class GenderBenchAudit(Suite):
    """Probes and metrics of the ``genderbench`` family (bias_core.catalogue)."""
