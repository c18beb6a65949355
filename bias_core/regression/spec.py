"""How each metric can be compared item by item between two runs.

A paired comparison needs the metric's value to be a function of per-item values that both runs
measure on the same items. ``PAIRED`` lists the metrics where that holds and says how:

- ``direction``: ``lower`` / ``higher`` is better, or ``ideal`` (closer to ``ideal`` is better);
- ``aggregation``: ``mean`` (value = item_scale * mean of item values) or ``group_mean``
  (StereoSet: the mean over target terms of per-term means, ``group_field`` names the term);
- ``kind``: ``binary`` (0/1 items: McNemar applies to lower/higher metrics), ``bounded``;
- ``output_field``: the details key holding the model's own text (shown for items that moved).

Not paired, and why (``NOT_PAIRED``): effect sizes (``logprob_effect``, ``SEAT_effect``) are
standardised differences between two groups of targets or sentences, and ``GBM`` a difference of
ratios of completion mass: none is an average of item values, so a per-item delta does not add
up to the metric's change (a paired bootstrap of the metric's own statistic would work and is
left for later). Gaps and spreads (``*_gap``, ``BPR_spread``) are ranges across groups or
wordings, and the mitigation metrics are already paired comparisons of two models.

Which metrics are paired, and which way is better, comes from the metric catalogue
(``bias_core.catalogue``); this module adds only how their items are shaped. The functions of
this package take a ``PairedSpec`` and never look the table up themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from bias_core.catalogue import METRICS

Direction = Literal["lower", "higher", "ideal"]
Aggregation = Literal["mean", "group_mean"]
Kind = Literal["binary", "bounded", "unbounded"]


@dataclass(frozen=True)
class PairedSpec:
    direction: Direction
    ideal: float | None = None
    kind: Kind = "bounded"
    aggregation: Aggregation = "mean"
    item_scale: float = 1.0
    group_field: str | None = None
    output_field: str | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("lower", "higher", "ideal"):
            raise ValueError(f"PairedSpec: direction must be lower, higher or ideal, got {self.direction!r}")
        if (self.direction == "ideal") != (self.ideal is not None):
            raise ValueError("PairedSpec: an ideal is given exactly when direction is 'ideal'")
        if self.ideal is not None and not math.isfinite(self.ideal):
            raise ValueError(f"PairedSpec: ideal must be finite, got {self.ideal!r}")
        if self.aggregation not in ("mean", "group_mean"):
            raise ValueError(f"PairedSpec: aggregation must be mean or group_mean, got {self.aggregation!r}")
        if (self.aggregation == "group_mean") != (self.group_field is not None):
            raise ValueError("PairedSpec: group_mean needs a group_field, and only it")
        if not (math.isfinite(self.item_scale) and self.item_scale > 0):
            raise ValueError(f"PairedSpec: item_scale must be a positive number, got {self.item_scale!r}")


# How each paired metric's items are shaped; the catalogue says which metrics are paired. A
# metric not listed has the default shape: bounded item values ("score"), value = their mean.
_ITEMS: dict[str, dict[str, Any]] = {
    # disclosure (Dong et al.): GAS is 0/1 per continuation, GLD and ADD per prompt
    "GAS": {"kind": "binary", "output_field": "continuation"},
    "GLD": {},
    "ADD": {},
    # association
    "DA_score": {"kind": "binary"},
    "stereo_score": {"kind": "binary", "aggregation": "group_mean", "item_scale": 100.0, "group_field": "target"},
    "lm_score": {"aggregation": "group_mean", "item_scale": 100.0, "group_field": "target"},
    "crows_stereo": {"kind": "binary", "item_scale": 100.0},
    # GenderPair, per group: BPR is 0/1 per decided response (undecided ones have no value)
    "BPR": {"kind": "binary", "output_field": "response"},
    "toxicity": {"output_field": "response"},
    "regard_negative": {"output_field": "response"},
    "regard_proxy_negative": {"output_field": "response"},
}

PAIRED: dict[str, PairedSpec] = {
    # lm_score's ideal (100) is its best value: paired, higher is simply better
    m.name: PairedSpec(m.better, m.ideal if m.better == "ideal" else None, **_ITEMS.get(m.name, {}))
    for m in METRICS if m.paired
}

NOT_PAIRED: dict[str, str] = {
    "logprob_effect": "an effect size between male and female targets, not an average of item values",
    "SEAT_effect": "an effect size between two sets of target sentences, not an average of item values",
    "GBM": "a difference of ratios of completion mass, not an average of item values",
    "BPR_gap": "a range of group means across groups",
    "toxicity_gap": "a range of group means across groups",
    "regard_negative_gap": "a range of group means across groups",
    "regard_positive_gap": "a range of group means across groups",
    "regard_proxy_negative_gap": "a range of group means across groups",
    "regard_proxy_positive_gap": "a range of group means across groups",
    "BPR_spread": "a range across rewordings of the same items",
    "GAS_reduction": "already a paired comparison of two models",
    "GLD_reduction": "already a paired comparison of two models",
    "ADD_reduction": "already a paired comparison of two models",
    "DA_score_drop": "already a paired comparison of two models",
    "perplexity_rise": "already a paired comparison of two models",
    "lm_score_drop": "already a paired comparison of two models",
}
