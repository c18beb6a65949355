"""The GenderBench audit (Pikuliak 2025; genderbench 1.1.0): its probes' prompts generated as its
harness generates them, each answer evaluated as its evaluators do, its metrics as its metric
calculators define them (bias_core/runners/genderbench.py, bias_core/metrics/genderbench.py).

Each probe is loaded and run as its catalogue entries say, and its runner gives every metric of
the probe from one set of generations; the suite hands the runners ``full`` (--genderbench-full).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bias_core.suites.base import Suite


@dataclass
class GenderBenchAudit(Suite):
    """Probes and metrics of the ``genderbench`` family (bias_core.catalogue). ``full``
    (--genderbench-full): GenderBench's own token limit (the plan audits the pools whole)."""

    full: bool = False

    def runner_inputs(self, probe_name: str) -> dict[str, Callable[[], Any]]:
        return {"full": lambda: self.full}
