"""What a catalogue entry says about a metric: ``MetricSpec`` and the kinds of its fields.

Every field but the name is keyword-only, and the four that say how the rest of the project
treats the metric have no default, so an entry that leaves one out fails where it is written:

- ``sampling``: how ``--sample auto`` bounds it at every look (``bias_core/gating/adaptive_sampling.py``);
- ``pairing``: whether two runs can be compared item by item, and how its items are shaped
  (``bias_core/gating/regression/spec.py``);
- ``precision``: how ``--precision exact`` keeps its verdict fp32's (``bias_core/gating/precision_recheck.py``);
- ``examples``: the report's table of its most biased items (``bias_core/reports/examples.py``).

Code is named as "module:function" and imported on use: the catalogue is read when the plugin
loads, and the modules it names pull in numpy, scipy and torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal, Union

Better = Literal["lower", "higher", "ideal"]


def resolve(reference: str) -> Callable[..., Any]:
    """The function a "module:function" reference names."""
    module, _, func = reference.partition(":")
    return getattr(importlib.import_module(module), func)


# ----- sampling ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanOfItems:
    """The value is ``scale`` times the mean of per-item ``column`` values, each within
    [low, high]: one confidence sequence bounds it."""

    high: float = 1.0
    scale: float = 1.0
    low: float = 0.0
    column: str = "score"


@dataclass(frozen=True)
class GapOfGroups:
    """max - min across the sampled groups of the metric ``of``'s means of per-item ``column``
    values: one confidence sequence per group, then interval arithmetic."""

    of: str
    column: str = "score"


@dataclass(frozen=True)
class OwnInterval:
    """A form of its own: ``function(result, rank, alpha) -> (low, high)``, as "module:function"."""

    function: str


@dataclass(frozen=True)
class FixedSample:
    """No bounded per-item form: the whole pool with a bootstrap CI, for the reason ``why``."""

    why: str


Sampling = Union[MeanOfItems, GapOfGroups, OwnInterval, FixedSample]


# ----- regression pairing ------------------------------------------------------------------------
@dataclass(frozen=True)
class Paired:
    """Two runs' values on the same items compare item by item: the value is ``item_scale``
    times the mean of per-item values of ``kind`` (``binary``: 0/1, where McNemar applies), or
    with ``aggregation="group_mean"`` the mean over ``group_field`` of per-group means.
    ``output_field`` names the details key with the model's own text (shown for moved items)."""

    kind: Literal["binary", "bounded", "unbounded"] = "bounded"
    aggregation: Literal["mean", "group_mean"] = "mean"
    item_scale: float = 1.0
    group_field: str | None = None
    output_field: str | None = None


@dataclass(frozen=True)
class NotPaired:
    """No per-item paired form, for the reason ``why`` (the release gate says it)."""

    why: str


# ----- precision ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Propagated:
    """Computed in half precision, and again in fp32 when a CI endpoint lies within
    ``error(result, word_bound)`` ("module:function") of a threshold of its gate."""

    error: str


# "decisions": a share or count of decisions and greedy continuations, which --precision exact
#     already makes fp32's: computed as it comes;
# "fp32": continuous, with no propagation of the half-precision error derived: computed in fp32;
# "inputs": a comparison of two models' results (mitigation), each computed by its own rule.
Precision = Union[Propagated, Literal["decisions", "fp32", "inputs"]]
PRECISION_RULES = ("decisions", "fp32", "inputs")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    _: KW_ONLY
    family: str
    probes: tuple[str, ...]
    better: Better
    scale: str
    value_range: tuple[float | None, float | None]  # None: unbounded on that side
    compute: str  # "module:function", the pure function that computes it
    sampling: Sampling
    pairing: Paired | NotPaired
    precision: Precision
    examples: str  # "module:function(row, examples) -> ExampleTable", the report's examples table
    # The unbiased value. With better="ideal" the gate bounds |value - ideal|; lm_score's ideal
    # of 100 is its best value, gated the same way although higher is simply better.
    ideal: float | None = None
    # mitigation metrics: the metric they compare between the original and the mitigated model
    of: str | None = None
    # "module:function" that sends a probe through a model and returns this metric (or a dict
    # with it, when one run gives several); its parameters name what it needs of the suite
    # (bias_core/suites/base.py). None for a mitigation metric ``of`` another: the mitigation
    # suite compares that metric's results of the two models.
    runner: str | None = None

    def __post_init__(self) -> None:
        def bad(field: str, got: Any, want: str) -> ValueError:
            return ValueError(f"{self.name}: {field} must be {want}, got {got!r} (bias_core/metric_spec.py)")

        if not (isinstance(self.family, str) and self.family):
            raise bad("family", self.family, "a name")
        if self.better not in ("lower", "higher", "ideal"):
            raise bad("better", self.better, "lower, higher or ideal")
        if (self.better == "ideal") and self.ideal is None:
            raise ValueError(f"{self.name}: better='ideal' needs an ideal")
        if not self.probes:
            raise ValueError(f"{self.name}: no probes")
        if not isinstance(self.sampling, (MeanOfItems, GapOfGroups, OwnInterval, FixedSample)):
            raise bad("sampling", self.sampling, "MeanOfItems, GapOfGroups, OwnInterval or FixedSample")
        if not isinstance(self.pairing, (Paired, NotPaired)):
            raise bad("pairing", self.pairing, "Paired or NotPaired")
        if not (isinstance(self.precision, Propagated) or self.precision in PRECISION_RULES):
            raise bad("precision", self.precision, f"Propagated or one of {PRECISION_RULES}")
        for field in ("compute", "examples", "runner"):
            reference = getattr(self, field)
            if reference is not None and not (isinstance(reference, str) and ":" in reference):
                raise bad(field, reference, '"module:function"')

    @property
    def paired(self) -> bool:
        """A per-item difference of two models on the same items is meaningful."""
        return isinstance(self.pairing, Paired)

    @property
    def gate_direction(self) -> Literal["max", "min"]:
        """The direction a gate of this metric has in thresholds.toml."""
        return "min" if self.better == "higher" and self.ideal is None else "max"

    def compute_function(self) -> Callable[..., Any]:
        return resolve(self.compute)

    def runner_function(self) -> Callable[..., Any] | None:
        return None if self.runner is None else resolve(self.runner)

    def examples_function(self) -> Callable[..., Any]:
        return resolve(self.examples)
