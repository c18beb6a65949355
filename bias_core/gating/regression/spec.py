"""How each metric can be compared item by item between two runs.

A paired comparison needs the metric's value to be a function of per-item values that both runs
measure on the same items. Each metric's catalogue entry says whether that holds and how
(``pairing``, bias_core/metric_spec.py): ``Paired`` with the shape of its items, or
``NotPaired`` with the reason. ``PAIRED`` adds which way is better:

- ``direction``: ``lower`` / ``higher`` is better, or ``ideal`` (closer to ``ideal`` is better);
- ``aggregation``: ``mean`` (value = item_scale * mean of item values), ``group_mean``
  (StereoSet: the mean over target terms of per-term means, ``group_field`` names the term) or
  ``group_difference`` (HiringAn: the mean of group ``difference[0]``'s items minus that of
  ``difference[1]``'s, ``group_field`` naming the item's group; the bootstrap resamples within
  each group, so every resample holds both);
- ``kind``: ``binary`` (0/1 items: McNemar applies to lower/higher metrics), ``bounded``;
- ``output_field``: the details key holding the model's own text (shown for items that moved).

Not paired: effect sizes (``logprob_effect``, ``SEAT_effect``) are standardised differences
between two groups of targets or sentences, and ``GBM`` a difference of ratios of completion
mass: none is an average of item values, so a per-item delta does not add up to the metric's
change (a paired bootstrap of the metric's own statistic would work and is left for later).
Gaps and spreads (``*_gap``, ``BPR_spread``) are ranges across groups or wordings, and the
mitigation metrics are already paired comparisons of two models.

``PAIRED`` and ``NOT_PAIRED`` are read-only views of the catalogue's ``declared()`` metrics, read
at each access: an installed package's metrics (registered when pytest configures, after this
module was imported) are in them as soon as they are registered, with no table to rebuild.

The functions of this package take a ``PairedSpec`` and never look the table up themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from bias_core import catalogue
from bias_core.metric_spec import MetricSpec, NotPaired, Paired

Direction = Literal["lower", "higher", "ideal"]
Aggregation = Literal["mean", "group_mean", "group_difference"]
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
    difference: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("lower", "higher", "ideal"):
            raise ValueError(f"PairedSpec: direction must be lower, higher or ideal, got {self.direction!r}")
        if (self.direction == "ideal") != (self.ideal is not None):
            raise ValueError("PairedSpec: an ideal is given exactly when direction is 'ideal'")
        if self.ideal is not None and not math.isfinite(self.ideal):
            raise ValueError(f"PairedSpec: ideal must be finite, got {self.ideal!r}")
        if self.aggregation not in ("mean", "group_mean", "group_difference"):
            raise ValueError(f"PairedSpec: aggregation must be mean, group_mean or group_difference, "
                             f"got {self.aggregation!r}")
        if (self.aggregation != "mean") != (self.group_field is not None):
            raise ValueError("PairedSpec: group_mean and group_difference need a group_field, and only they")
        if (self.aggregation == "group_difference") != (self.difference is not None):
            raise ValueError("PairedSpec: group_difference needs difference=(group, group subtracted), and only it")
        if self.difference is not None and not (
                len(self.difference) == 2 and all(isinstance(g, str) and g for g in self.difference)
                and self.difference[0] != self.difference[1]):
            raise ValueError(f"PairedSpec: difference must name two different groups, got {self.difference!r}")
        if not (math.isfinite(self.item_scale) and self.item_scale > 0):
            raise ValueError(f"PairedSpec: item_scale must be a positive number, got {self.item_scale!r}")


V = TypeVar("V")


@functools.lru_cache(maxsize=None)
def paired_spec(metric: MetricSpec) -> PairedSpec:
    """The ``PairedSpec`` of a metric declared ``Paired`` (lm_score's ideal, 100, is its best
    value: paired, higher is simply better)."""
    if not isinstance(metric.pairing, Paired):
        raise ValueError(f"{metric.name} is not paired: {getattr(metric.pairing, 'why', metric.pairing)}")
    return PairedSpec(metric.better, metric.ideal if metric.better == "ideal" else None,
                      **dataclasses.asdict(metric.pairing))


class _Declared(Mapping[str, V], Generic[V]):
    """metric name -> ``value(spec)`` for every declared metric that ``keep`` accepts, in the
    catalogue's order; looked up in the catalogue at each access, never copied."""

    def __init__(self, keep: Callable[[MetricSpec], bool], value: Callable[[MetricSpec], V]) -> None:
        self._keep, self._value = keep, value

    def __getitem__(self, name: str) -> V:
        found = catalogue.BY_NAME.get(name)
        if found is None or not self._keep(found):
            raise KeyError(name)
        return self._value(found)

    def __iter__(self) -> Iterator[str]:
        return (m.name for m in catalogue.declared() if self._keep(m))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{k!r}: {v!r}' for k, v in self.items())}}}"


#: metric -> its PairedSpec, for every declared metric (the project's and installed packages') that pairs.
PAIRED: Mapping[str, PairedSpec] = _Declared(lambda m: isinstance(m.pairing, Paired), paired_spec)

#: metric -> why it has no paired form, for every declared metric that does not pair.
NOT_PAIRED: Mapping[str, str] = _Declared(lambda m: isinstance(m.pairing, NotPaired), lambda m: m.pairing.why)
