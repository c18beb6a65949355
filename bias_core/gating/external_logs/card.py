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

    def lines(self) -> list[str]:
        out = self.candidate.lines("candidate") + self.baseline.lines("baseline")
        out += [f"allowed difference: {a}" for a in self.allowed]
        out += [f"note: {n}" for n in self.notes]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_json(), "baseline": self.baseline.to_json(),
                "allowed_differences": list(self.allowed), "notes": list(self.notes)}
