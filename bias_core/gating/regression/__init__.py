"""Regression gate: a candidate model against a baseline, paired on the same items.

One module per step, each pure except the file I/O of ``items``:

- ``spec``: which metrics can be paired and how (direction or ideal, aggregation, item kind);
- ``items``: the per-item results file (``items.jsonl.gz`` next to results.json) and its
  run configuration;
- ``integrity``: a stored baseline's items against their own header and the run's results.json;
- ``pairing``: configuration, probe and item checks (``BaselineMismatch``), then pairing, the
  items left out of it, and what is known of the two runs' weights;
- ``stats``: paired delta and harm with bootstrap CIs, McNemar / permutation p-values, Holm and
  Benjamini-Hochberg adjustment;
- ``gate``: the non-inferiority verdict and the ``[regression.*]`` margins of thresholds.toml
  (``[regression.external]`` handed to ``gating/external_logs``); ``margin``: a margin, a leaf;
- ``summary``: the Markdown summary for CI pages.
"""

from bias_core.gating.regression.gate import Margin, judge, noninferiority_verdict, parse_regression_margins, regression_margins
from bias_core.gating.regression.items import (
    ITEMS_FILE,
    ItemsFile,
    ItemValue,
    MetricItems,
    RunConfig,
    append_block,
    items_from_result,
    lexicon_sha256,
    locate_items,
    probe_sha256,
    read_items,
    start_items,
    write_items,
)
from bias_core.gating.regression.pairing import ConfigComparison, PairedItems, check_configs, check_probes, pair, pair_runs
from bias_core.gating.regression.spec import NOT_PAIRED, PAIRED, PairedSpec
from bias_core.gating.regression.summary import render_summary, write_summary
from bias_core.stats.paired import (
    PairedComparison,
    adjust,
    benjamini_hochberg,
    compare_to_baseline,
    holm,
    mcnemar_exact,
    swap_permutation_pvalue,
)

__all__ = [
    "ITEMS_FILE", "NOT_PAIRED", "PAIRED", "ConfigComparison", "ItemValue", "ItemsFile", "Margin", "MetricItems",
    "PairedComparison", "PairedItems", "PairedSpec", "RunConfig", "adjust", "append_block", "benjamini_hochberg",
    "check_configs", "check_probes", "compare_to_baseline", "holm", "items_from_result", "judge", "lexicon_sha256",
    "locate_items", "mcnemar_exact", "noninferiority_verdict", "pair", "pair_runs", "parse_regression_margins",
    "probe_sha256", "read_items", "regression_margins", "render_summary", "start_items", "swap_permutation_pvalue",
    "write_items", "write_summary",
]
