"""What a reader makes of another tool's log, the same for every tool: a run, its tasks, and per
task x metric x filter the per-sample values with what identifies each sample."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bias_core.gating.regression.items import ItemValue, MetricItems

LM_EVAL = "lm-evaluation-harness"
INSPECT = "inspect_ai"


@dataclass(frozen=True)
class ExternalItem:
    """One sample's value of one metric (None: the log gives it none), and its identity: named
    digests (lm-eval's doc/prompt/target hashes; inspect's hash of the sample's input) that must be
    equal on both sides for the two values to be a pair."""

    id: str
    value: float | None
    identity: tuple[tuple[str, str], ...]
    prompt: str = ""
    output: str | None = None
    where: str = ""  # "file:line", for messages


@dataclass(frozen=True)
class MetricLog:
    """One task x metric x filter of a log. ``not_gatable`` says why its value is not the mean of
    its per-sample values ("" when it is: only then can it be compared item by item)."""

    task: str
    metric: str
    filter: str
    reported: float | None  # the aggregate as the log states it
    items: tuple[ExternalItem, ...]
    source: Path
    not_gatable: str = ""
    tool_direction: str = ""  # what the tool itself declares ("higher"/"lower"), shown in fixes, never used

    @property
    def key(self) -> tuple[str, str, str]:
        return self.task, self.metric, self.filter

    def metric_items(self, version: str = "", content_sha256: str = "") -> MetricItems:
        """The block as the project's own regression gate holds one (probe = the task)."""
        if self.not_gatable or self.reported is None:
            raise ValueError(f"{self.task} {self.metric} ({self.filter}): {self.not_gatable or 'no aggregate'}")
        return MetricItems(self.task, self.metric, version, content_sha256, float(self.reported),
                           tuple(ItemValue(it.id, it.value, it.prompt, it.output) for it in self.items))


@dataclass(frozen=True)
class TaskLog:
    """One task of a run. ``settings`` must be equal on both sides (unless allowed); ``info`` is
    only reported."""

    task: str
    version: str
    metrics: Mapping[tuple[str, str], MetricLog]  # (metric, filter) -> its items
    settings: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    files: tuple[Path, ...] = ()
    content_sha256: str = ""
    n_samples: int = 0


@dataclass(frozen=True)
class ExternalRun:
    """A run of another tool, read from its files alone."""

    tool: str
    tool_version: str
    source: Path
    model: str
    tasks: Mapping[str, TaskLog]
    settings: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> tuple[Path, ...]:
        seen: dict[Path, None] = {self.source: None}
        for task in self.tasks.values():
            seen.update(dict.fromkeys(task.files))
        return tuple(seen)
