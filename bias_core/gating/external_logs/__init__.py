"""A release gated on other tools' per-sample logs: lm-evaluation-harness (``--log_samples``) and
inspect_ai (``.eval``), candidate against baseline, paired sample by sample and judged by the
project's own regression gate (``gating/regression``, ``stats/paired``).

- ``records``: what a reader makes of a log, the same for every tool;
- ``lm_eval_log`` / ``inspect_log``: the two readers (lm-eval's files alone; inspect's own API),
  ``reading``: which one a path needs;
- ``integrity``: aggregates recomputed from the samples, damaged lines, duplicated samples;
- ``configs``: the two runs' settings, what must match and what may differ (``allow``);
- ``pairing``: same sample id and same content digests, the rest counted;
- ``defaults`` / ``thresholds``: directions and margins, ``[regression.external]`` over defaults;
- ``card`` / ``gate``: ``plan_logs`` (every usage error, before anything is computed), ``gate_logs``
  and its result, rows and run card; the pytest run (``--candidate-log``/``--baseline-log``) makes
  its rows from the same ``LogPlan``.
"""

from bias_core.gating.external_logs.configs import Difference, compare_runs
from bias_core.gating.external_logs.defaults import Default, default_for
from bias_core.gating.external_logs.gate import GateResult, GateRow, LogPlan, NotGated, PlannedRow, gate_logs, plan_logs
from bias_core.gating.external_logs.inspect_log import read_inspect
from bias_core.gating.external_logs.lm_eval_log import locate_results, read_lm_eval
from bias_core.gating.external_logs.pairing import Unpaired, pair_metric
from bias_core.gating.external_logs.reading import detect_tool, read_log
from bias_core.gating.external_logs.records import INSPECT, LM_EVAL, ExternalItem, ExternalRun, MetricLog, TaskLog
from bias_core.gating.external_logs.thresholds import (
    ExternalGate,
    ExternalThresholds,
    external_problems,
    load_external,
    parse_external,
    toml_fix,
)

__all__ = [
    "INSPECT", "LM_EVAL", "Default", "Difference", "ExternalGate", "ExternalItem", "ExternalRun", "ExternalThresholds",
    "GateResult", "GateRow", "LogPlan", "MetricLog", "NotGated", "PlannedRow", "TaskLog", "Unpaired", "compare_runs",
    "default_for", "detect_tool", "external_problems", "gate_logs", "load_external", "locate_results", "pair_metric",
    "parse_external", "plan_logs", "read_inspect", "read_lm_eval", "read_log", "toml_fix",
]
