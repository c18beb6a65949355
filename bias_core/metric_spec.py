"""What a catalogue entry says about a metric (``MetricSpec``) or a probe (``ProbeSpec``), and the
kinds of their fields.

Every field but the name is keyword-only, and the four that say how the rest of the project
treats the metric have no default, so an entry that leaves one out fails where it is written:

- ``sampling``: how ``--sample auto`` bounds it at every look (``bias_core/gating/adaptive_sampling.py``);
- ``pairing``: whether two runs can be compared item by item, and how its items are shaped
  (``bias_core/gating/regression/spec.py``);
- ``precision``: how ``--precision exact`` keeps its verdict fp32's (``bias_core/gating/precision_recheck.py``);
- ``examples``: the report's table of its most biased items (``bias_core/reports/examples.py``).

A ``ProbeSpec`` says which loader makes the probe's items, the family whose suite loads it, where
its data comes from (the kinds of ``bias_core/probes/published.py``: a shipped file, a
``--data-dir`` file, a package's file, online), whether ``--sample auto`` samples it from a pool
(``Sampled``: its item cap, its unit, its size when not sampled adaptively) and, for the reports,
the name papers give its data set.

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


#: ``OwnInterval.kind`` of the intervals from bias_core.stats.asymptotic (unbounded or linearised values).
ASYMPTOTIC = "asymptotic confidence sequence (Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas 2024; approximate coverage)"


@dataclass(frozen=True)
class OwnInterval:
    """A form of its own: ``function(result, rank, alpha) -> (low, high)``, as "module:function";
    ``kind`` names the interval it gives where it is not a bounded-mean betting sequence (the
    run's sampling record says which interval decided the row)."""

    function: str
    kind: str | None = None


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
    with ``aggregation="group_mean"`` the mean over ``group_field`` of per-group means, or with
    ``aggregation="group_difference"`` the mean of the items of group ``difference[0]`` minus
    the mean of those of ``difference[1]`` (HiringAn's male minus female acceptance rate, over
    unequal numbers of items; the paired bootstrap resamples within each group).
    ``output_field`` names the details key with the model's own text (shown for moved items)."""

    kind: Literal["binary", "bounded", "unbounded"] = "bounded"
    aggregation: Literal["mean", "group_mean", "group_difference"] = "mean"
    item_scale: float = 1.0
    group_field: str | None = None
    output_field: str | None = None
    difference: tuple[str, str] | None = None  # group_difference: (the group minus, the group subtracted)


@dataclass(frozen=True)
class NotPaired:
    """No per-item paired form, for the reason ``why`` (the release gate says it)."""

    why: str


# ----- an outside grading scale ---------------------------------------------------------------------
@dataclass(frozen=True)
class Marks:
    """The grades a published suite gives this metric (GenderBench's A-D ``mark_definitions``):
    ``ranges`` is (grade, ((low, high), ...)) from the best grade to the worst. ``of(low, high)``
    is the suite's rule for an interval: the best grade any of whose ranges it overlaps, closed
    at both ends (GenderBench's ``MarkDefinition.calculate_mark``), so a report can set a run's
    rows beside the suite's published results."""

    source: str
    ranges: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]

    def __post_init__(self) -> None:
        if not self.ranges or any(not spans or any(lo > hi for lo, hi in spans) for _, spans in self.ranges):
            raise ValueError(f"Marks({self.source!r}): every grade needs ranges with low <= high, got {self.ranges!r}")

    @classmethod
    def steps(cls, source: str, grades: str, edges: tuple[float, ...]) -> Marks:
        """Grades over consecutive ranges: ``edges`` e0 < e1 < ... give grade k the range [e_k, e_k+1]."""
        if len(edges) != len(grades) + 1:
            raise ValueError(f"Marks.steps: {len(grades)} grades need {len(grades) + 1} edges, got {len(edges)}")
        return cls(source, tuple((g, ((edges[k], edges[k + 1]),)) for k, g in enumerate(grades)))

    def of(self, low: float, high: float) -> str | None:
        """The best grade whose range overlaps [low, high] (None: outside every range)."""
        for grade, spans in self.ranges:
            if any(high >= lo and low <= hi for lo, hi in spans):
                return grade
        return None


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
    # computed from text the model generates, so a decoding setting (temperature, top-p) changes
    # it: the hyperparameter mitigation searches Dong et al.'s decoding grid on these
    decoded: bool = False
    # its place in the trade-off sweep (--mitigation-sweep, DA-Gender's Figure 2): "bias", an axis
    # of bias left (its distance from ``ideal``, one axis per probe), or "knowledge", the axis of
    # genuine knowledge lost (1 - value, a share)
    tradeoff: Literal["bias", "knowledge"] | None = None
    # the role of the classifier whose scores it is computed from ("toxicity", "regard": the
    # suite's scorer of that name), or of the metric it compares; None when none scores it. The
    # report records that classifier beside its numbers.
    scorer: str | None = None
    # what stands in, offline, for the paper's ``scorer`` classifier when it is computed
    # ("VADER sentiment" for regard). Its numbers measure something else than the paper's, so a
    # run audits it only when its ``scorer`` classifier is that proxy, and the paper's metric
    # otherwise (``audited_with``); the report says so beside it.
    stand_in: str | None = None
    # the paper's metric this stand-in's metric takes the place of (regard_proxy_negative of
    # regard_negative): where a report shows the paper's, it shows this one from a proxy's run
    variant_of: str | None = None
    # a published suite's grades of this metric, shown beside the verdict (GenderBench's A-D)
    marks: Marks | None = None

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
        if self.tradeoff not in (None, "bias", "knowledge"):
            raise bad("tradeoff", self.tradeoff, "None, bias or knowledge")
        if self.tradeoff == "bias" and self.ideal is None:
            raise ValueError(f"{self.name}: a trade-off bias axis is its distance from its ideal: give the ideal")
        if self.tradeoff == "knowledge" and (self.better, self.value_range) != ("higher", (0.0, 1.0)):
            raise ValueError(f"{self.name}: the trade-off's knowledge axis is 1 - value: a share where higher is better")
        for field in ("compute", "examples", "runner"):
            reference = getattr(self, field)
            if reference is not None and not (isinstance(reference, str) and ":" in reference):
                raise bad(field, reference, '"module:function"')
        for field in ("scorer", "stand_in", "variant_of"):
            value = getattr(self, field)
            if value is not None and not (isinstance(value, str) and value.strip()):
                raise bad(field, value, "None or a name")
        if self.stand_in is not None and self.scorer is None:
            raise ValueError(f"{self.name}: stand_in says what replaces its scorer's classifier: give the scorer")
        if self.variant_of is not None and self.stand_in is None:
            raise ValueError(f"{self.name}: variant_of is the paper's metric a stand-in's takes the place of: "
                             "give the stand_in")
        if self.variant_of == self.name:
            raise ValueError(f"{self.name}: variant_of names another metric, not itself")

    def audited_with(self, proxies: set[str] | frozenset[str] | tuple[str, ...]) -> bool:
        """Whether a run whose classifiers of the roles ``proxies`` are offline proxies (their
        ``is_proxy``) audits this metric: a stand-in's metric only with its proxy, the paper's
        only without; a metric no classifier scores, always."""
        return self.scorer is None or (self.stand_in is not None) == (self.scorer in proxies)

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


# ----- probes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sampled:
    """The probe's items are a pool of which ``--sample auto`` audits a seeded sample, grown until
    the gate decides (``bias_core/gating/adaptive_sampling.py``), of at most ``cap`` items (None:
    the default cap; ``--sample-cap`` sets every cap). ``unit``: what one draw takes, an item or,
    with ``"key"``, every item sharing ``meta["key"]`` (one prompt in all its wordings).

    ``own_sample``: the family's suite draws a fixed sample of its own (``--genderpair-sample``),
    so the probe is sampled only under ``--sample auto`` with no size given; every other sampled
    probe is kept whole under ``--mitigation``, whose paired comparisons need the original's
    results on every item.

    ``fixed``: a pool too large to audit whole by default (BBQ's 5,672 questions): when the run's
    plan does not sample it adaptively (``--sample fixed``, ``--baseline``, ``--mitigation``), it
    is audited on the first ``fixed`` units of its seeded order, as GenderPair on its fixed
    stratified sample (None: whole). Outside a plan (a suite used without pytest) it is whole."""

    cap: int | None = None
    unit: Literal["item", "key"] = "item"
    own_sample: bool = False
    fixed: int | None = None

    def __post_init__(self) -> None:
        for name in ("cap", "fixed"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"Sampled: {name} must be a whole number >= 1 or None, got {value!r}")
        if self.unit not in ("item", "key"):
            raise ValueError(f"Sampled: unit must be 'item' or 'key', got {self.unit!r}")
        if self.fixed is not None and self.own_sample:
            raise ValueError("Sampled: fixed and own_sample exclude each other: a family that draws a sample of its "
                             "own sizes it when the probe is not sampled adaptively")


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    _: KW_ONLY
    # the family whose suite loads it and offers its loader's parameters; None only for a bare
    # loader an installed package registered (bias_core.catalogue.register_probe wraps it)
    family: str | None
    # "module:function" (or a function) that returns its Probe, called with what its parameters
    # name (bias_core/suites/base.py); None for a probe with no items of its own (``parts``)
    loader: str | Callable[..., Any] | None
    # where its items come from, in the order the loader tries them (the kinds of
    # bias_core/probes/published.py: Shipped, DataDirFile, PackageFile, Online)
    data: tuple[Any, ...] = ()
    sampled: Sampled | None = None  # None: always audited whole
    # the probes a probe with no items of its own compares (genderpair-groups: the three groups)
    parts: tuple[str, ...] = ()
    # the name papers give its data set, where a report shows one (the mitigation table's
    # columns, the trade-off's axes); several probes with one title make one column
    title: str | None = None
    # the licence of data free for non-commercial use only (ISEAR's CC BY-NC-SA): its tests skip,
    # saying this, unless the run passes --noncommercial-data
    noncommercial: str | None = None

    def __post_init__(self) -> None:
        def bad(field: str, got: Any, want: str) -> ValueError:
            return ValueError(f"probe {self.name}: {field} must be {want}, got {got!r} (bias_core/metric_spec.py)")

        if not (isinstance(self.name, str) and self.name):
            raise bad("name", self.name, "a name")
        if self.family is not None and not (isinstance(self.family, str) and self.family):
            raise bad("family", self.family, "a family's name")
        if (self.loader is None) == (not self.parts):
            raise ValueError(f"probe {self.name}: give a loader, or the parts of a probe with no items of its own")
        if isinstance(self.loader, str) and ":" not in self.loader:
            raise bad("loader", self.loader, '"module:function" or a function')
        if not isinstance(self.data, tuple):
            raise bad("data", self.data, "a tuple of sources (bias_core/probes/published.py)")
        if self.sampled is not None and not isinstance(self.sampled, Sampled):
            raise bad("sampled", self.sampled, "Sampled(...) or None")

    def loader_function(self) -> Callable[..., Any]:
        if self.loader is None:
            raise KeyError(f"probe {self.name} has no items of its own: it compares {', '.join(self.parts)}")
        return resolve(self.loader) if isinstance(self.loader, str) else self.loader
