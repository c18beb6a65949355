"""The run card of a gate on other tools' logs: both sides' files, tools, models and settings, and
what differed between them (allowed, or only reported)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bias_core.gating.external_logs.configs import brief
from bias_core.gating.external_logs.records import ExternalRun


@dataclass(frozen=True)
class SideCard:
    tool: str
    tool_version: str
    source: str
    files: tuple[str, ...]
    model: str
    tasks: Mapping[str, str]  # task -> version
    settings: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, run: ExternalRun) -> "SideCard":
        return cls(run.tool, run.tool_version, str(run.source), tuple(str(f) for f in run.files), run.model,
                   {t: log.version for t, log in run.tasks.items()}, dict(run.settings), dict(run.info))

    def lines(self, name: str) -> list[str]:
        tasks = ", ".join(f"{t} (version {v})" for t, v in self.tasks.items())
        out = [f"{name}: {self.tool} {self.tool_version}, model {self.model}", f"  tasks: {tasks}",
               *(f"  file: {f}" for f in self.files)]
        if self.info:
            out.append("  " + "; ".join(f"{k} {brief(v, 80)}" for k, v in self.info.items()))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "tool_version": self.tool_version, "source": self.source, "files": list(self.files),
                "model": self.model, "tasks": dict(self.tasks), "settings": _plain(self.settings),
                "info": _plain(self.info)}


def _plain(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)) for k, v in mapping.items()}


@dataclass(frozen=True)
class RunCard:
    candidate: SideCard
    baseline: SideCard
    allowed: tuple[str, ...] = ()  # differences the caller allowed
    notes: tuple[str, ...] = ()  # differences that are the comparison, or only reported

    # the regression rows' configuration note, as the project's ConfigComparison gives it: the tools
    # report no dtype of their own that pairing compares
    dtype_differs = False

    def lines(self) -> list[str]:
        out = self.candidate.lines("candidate") + self.baseline.lines("baseline")
        out += [f"allowed difference: {a}" for a in self.allowed]
        out += [f"note: {n}" for n in self.notes]
        return out

    def tools(self) -> str:
        """"lm-evaluation-harness 0.4.13", or each side's version where they differ."""
        c, b = self.candidate, self.baseline
        if (c.tool, c.tool_version) == (b.tool, b.tool_version):
            return f"{c.tool} {c.tool_version}"
        return f"{c.tool} {c.tool_version} (candidate), {b.tool} {b.tool_version} (baseline)"

    def differences(self) -> list[str]:
        """What differs between the two sides: the differences allowed, then those only reported
        (the model, the tool's version, what each side read); "none" when nothing does."""
        return [*(f"{a}" for a in self.allowed), *self.notes] or ["none"]

    def describe(self) -> str:
        """One line for each regression row ("config"): the tool, the two models, what was allowed."""
        c, b = self.candidate, self.baseline
        models = (f"candidate model {c.model}, baseline model {b.model}" if c.model != b.model
                  else f"the same model name on both sides ({c.model})")
        allowed = f"; allowed to differ: {', '.join(self.allowed)}" if self.allowed else ""
        return f"{self.tools()} per-sample logs; {models}; paired by sample id and content hashes{allowed}"

    def side_line(self, name: str) -> str:
        """"<path> (lm-evaluation-harness 0.4.13, model org/x, tasks a (version 1))" for one side."""
        side = self.candidate if name == "candidate" else self.baseline
        tasks = ", ".join(f"{t} (version {v})" for t, v in side.tasks.items())
        return f"{side.source} ({side.tool} {side.tool_version}, model {side.model}; tasks {tasks})"

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_json(), "baseline": self.baseline.to_json(),
                "allowed_differences": list(self.allowed), "notes": list(self.notes)}
