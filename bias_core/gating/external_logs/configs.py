"""The two runs' configurations, side by side: what must be equal, what may differ, what is said.

A per-item difference means "the model changed" only when everything else is the same: the task's
version, its few-shot count and prompt, its scoring (lm-eval's task config; inspect's task
arguments, epochs, reducer, solvers and generation settings), the run's seeds, limit and
generation options. Each of those that differs is a ``BaselineMismatch`` (a usage error, exit 4)
naming it, unless ``allow`` names it (``allow={"num_fewshot"}``): then the run card says it
differed and was allowed. The model differing is the comparison itself and is reported, as are
the tools' versions and where the data was read from.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from bias_core.errors import AuditUsageError, BaselineMismatch
from bias_core.gating.external_logs.records import ExternalRun

# Allow names that are not settings: pairing across two filters (lm-eval), and pairing samples whose
# prompt or target hash differ (another chat template formats the same documents differently).
PAIRING_ALLOWS = ("filter", "prompt_hash", "target_hash")
# Said of one run only (when, which id): on the run card, never listed as a difference.
VOLATILE = ("created", "run_id")


def brief(value: Any, width: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class Difference:
    scope: str  # "run", or the task it belongs to
    name: str
    candidate: Any
    baseline: Any
    allowed: bool = False

    def describe(self) -> str:
        where = "" if self.scope == "run" else f"{self.scope}: "
        return (f"{where}{self.name} differs (candidate {brief(self.candidate)}, baseline {brief(self.baseline)})"
                + (", allowed" if self.allowed else ""))


def _differences(scope: str, c: Mapping[str, Any], b: Mapping[str, Any], allow: Collection[str]) -> list[Difference]:
    return [Difference(scope, k, c.get(k), b.get(k), k in allow) for k in dict.fromkeys([*c, *b]) if c.get(k) != b.get(k)]


def known_allows(candidate: ExternalRun, baseline: ExternalRun) -> set[str]:
    names = set(PAIRING_ALLOWS) | set(candidate.settings) | set(baseline.settings)
    for run in (candidate, baseline):
        for task in run.tasks.values():
            names |= set(task.settings)
    return names


def compare_runs(candidate: ExternalRun, baseline: ExternalRun, allow: Collection[str] = (),
                 where: str = "baseline") -> tuple[list[Difference], list[str]]:
    """(allowed differences, lines to report); ``BaselineMismatch`` for any other difference."""
    allow = set(allow)
    unknown = sorted(allow - known_allows(candidate, baseline))
    if unknown:
        raise AuditUsageError(f"allow names {', '.join(map(repr, unknown))}, which is no setting of these logs. Fix: use "
                              f"one of {', '.join(sorted(known_allows(candidate, baseline)))}.")
    if candidate.tool != baseline.tool:
        raise BaselineMismatch(f"the candidate ({candidate.source}) is a {candidate.tool} log and the {where} "
                               f"({baseline.source}) a {baseline.tool} log: their scores are computed differently. "
                               "Fix: gate two logs of one tool.")
    missing = [t for t in candidate.tasks if t not in baseline.tasks]
    if missing:
        raise BaselineMismatch(f"the {where} ({baseline.source}) has no log of task(s) {', '.join(missing)} of the "
                               f"candidate ({candidate.source}). Fix: run the {where} on the same tasks.")
    diffs = _differences("run", candidate.settings, baseline.settings, allow)
    for name, task in candidate.tasks.items():
        diffs += _differences(name, task.settings, baseline.tasks[name].settings, allow)
    refused = [d for d in diffs if not d.allowed]
    if refused:
        names = sorted({d.name for d in refused})
        raise BaselineMismatch(
            f"the candidate ({candidate.source}) and the {where} ({baseline.source}) were run with other settings: "
            + "; ".join(d.describe() for d in refused)
            + f". Fix: re-run one side with the other's settings; if the difference is intended, allow it "
            f"(allow={{{', '.join(map(repr, names))}}}).")
    notes = [f"model: candidate {candidate.model}, {where} {baseline.model}" if candidate.model != baseline.model
             else f"the same model name on both sides ({candidate.model}): a re-run, or a model changed in place"]
    if candidate.tool_version != baseline.tool_version:
        notes.append(f"{candidate.tool} version: candidate {candidate.tool_version}, {where} {baseline.tool_version}")
    extra = [t for t in baseline.tasks if t not in candidate.tasks]
    if extra:
        notes.append(f"task(s) only in the {where}, not compared: {', '.join(extra)}")
    said = lambda d: d.name not in VOLATILE and not _only_the_model(d, candidate.model, baseline.model)  # noqa: E731
    notes += [d.describe() for d in _differences("run", candidate.info, baseline.info, ()) if said(d)]
    for name, task in candidate.tasks.items():
        notes += [d.describe() for d in _differences(name, task.info, baseline.tasks[name].info, ()) if said(d)]
    return [d for d in diffs if d.allowed], notes


def _only_the_model(d: Difference, candidate_model: str, baseline_model: str) -> bool:
    """A difference that is the models' names and nothing else (lm-eval's ``model_args``
    "pretrained=A,dtype=float32" against "pretrained=B,dtype=float32", inspect's model name):
    already on the card's "model" line, so not said twice. Any other part differing is said."""
    if candidate_model == baseline_model or not candidate_model or not baseline_model:
        return False
    masked = [json.dumps(v, sort_keys=True, default=str).replace(json.dumps(m)[1:-1], "<model>")
              for v, m in ((d.candidate, candidate_model), (d.baseline, baseline_model))]
    return masked[0] == masked[1]
