"""inspect_ai evaluation logs (``.eval``, or its ``.json`` format), read through inspect's own API
(``inspect_ai.log.read_eval_log``): the format is inspect's to change, not ours to parse.

One log is one task. Per sample (``id``, ``epoch``): each scorer's value, mapped to a number by
inspect's own ``value_to_float`` (C 1, I 0, P 0.5, N 0, numbers as they are), as its ``accuracy``
and ``mean`` metrics do. With several epochs inspect reduces a sample's epochs before its metrics
(by ``mean`` unless the task names another reducer), so the item compared is the sample: its value
is the mean over its epochs, which is what the metric averages, and its epochs are not counted as
independent items (they are not: they share the sample). Only ``accuracy`` and ``mean`` under the
mean reducer (or any of mode/median/max/min of a single epoch) are means of per-sample values;
``stderr``, ``std``, ``var`` and the rest are kept with the reason.

The identity of a sample is a hash of its input text, choices and target: a sample id that holds
another question on the other side does not pair.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.gating.external_logs.integrity import COPY_AGAIN, check_mean, check_unique, damaged, mean
from bias_core.gating.external_logs.records import INSPECT, ExternalItem, ExternalRun, MetricLog, TaskLog

MEAN_METRICS = ("accuracy", "mean")
# Reducers that give back a single epoch's value unchanged.
SINGLE_EPOCH_SAME = (None, "mean", "mode", "median", "max", "min")
# GenerateConfig fields that say how the model was reached, not what it was asked: reported only.
TRANSPORT = ("max_retries", "timeout", "attempt_timeout", "max_connections", "cache_prompt", "batch", "cache")
IDENTITY = "input_hash"


def _api():
    try:
        from inspect_ai.log import read_eval_log
        from inspect_ai.scorer import value_to_float
    except ImportError as exc:
        raise AuditUsageError(f"reading inspect_ai logs needs inspect_ai ({exc}). Fix: pip install inspect_ai "
                              "(scripts/setup.sh --dev installs the pinned version).") from None
    return read_eval_log, value_to_float


def locate_logs(path: str | Path) -> list[Path]:
    """The ``.eval`` logs of a run: the file itself, or every ``*.eval`` in a folder."""
    p = Path(path)
    if p.is_file():
        return [p]
    found = sorted(p.glob("*.eval")) if p.is_dir() else []
    if not found:
        raise AuditUsageError(f"{p}: no inspect_ai log (*.eval) here. Fix: pass an inspect log file or its log folder.")
    return found


def _text(value: Any) -> Any:
    """A sample's input as text: a string, or each chat message's role and text."""
    if isinstance(value, str):
        return value
    return [[getattr(m, "role", ""), getattr(m, "text", str(m))] for m in value]


def identity(sample: Any) -> str:
    """SHA-256 of the sample's input text, choices and target."""
    text = json.dumps([_text(sample.input), sample.choices, sample.target], ensure_ascii=False, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    """A pydantic model or mapping as JSON-ready data without the unset fields."""
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True, mode="json")
    return value


def _score_value(sample: Any, name: str, scorer: str) -> Any:
    scores = sample.scores or {}
    if name in scores:
        return scores[name].value
    parent = scores.get(scorer)
    if parent is not None and isinstance(parent.value, Mapping):
        return parent.value.get(name)  # a scorer of several values: one EvalScore per key
    return None


def _unscored(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _metric_logs(path: Path, log: Any, task: str, samples: list[Any], to_float) -> dict[tuple[str, str], MetricLog]:
    out: dict[tuple[str, str], MetricLog] = {}
    epochs = int(log.eval.config.epochs or 1)
    by_id = _groups(samples)
    for es in log.results.scores:
        values: dict[str, list[float]] = {k: [] for k in by_id}
        odd = ""
        for key, group in by_id.items():
            for s in group:
                v = _score_value(s, es.name, es.scorer)
                if _unscored(v):
                    continue
                if isinstance(v, (list, Mapping)):
                    odd = odd or f"sample {key} epoch {s.epoch}: {json.dumps(v, default=str)[:60]}"
                    continue
                values[key].append(float(to_float(v)))
        per_id = {k: mean(v) for k, v in values.items()}
        filter_key = es.reducer or "none"
        for mname, em in es.metrics.items():
            why = ""
            if mname not in MEAN_METRICS:
                why = (f"inspect's {mname} of {es.name} is not a mean of per-sample scores (a spread or another "
                       "statistic), so it is not gated")
            elif odd:
                why = f"{es.name}'s scores are lists or dicts ({odd}), not one number per sample, so it is not gated"
            elif not (es.reducer in (None, "mean") or (epochs == 1 and es.reducer in SINGLE_EPOCH_SAME)):
                why = (f"{es.name} is reduced over {epochs} epochs by {es.reducer}, so its {mname} is not a mean of "
                       "per-sample scores, and it is not gated")
            items = tuple(ExternalItem(id=k, value=None if why else per_id[k], identity=((IDENTITY, identity(g[0])),),
                                       prompt=str(_text(g[0].input))[:500],
                                       output=(g[0].output.completion[:500] if g[0].output and g[0].output.completion
                                               else None),
                                       where=f"{path.name}: sample {k}") for k, g in by_id.items())
            reported = float(em.value) if isinstance(em.value, (int, float)) else None
            if not why:
                reported = check_mean(str(path), task, f"{es.name}/{mname}", em.value,
                                      [it.value for it in items if it.value is not None])
            out[(f"{es.name}/{mname}", filter_key)] = MetricLog(task, f"{es.name}/{mname}", filter_key, reported, items,
                                                                path, why)
    return out


def _read_one(path: Path) -> tuple[TaskLog, Any]:
    read_eval_log, value_to_float = _api()
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises many kinds for a damaged file (zip, JSON, validation)
        raise damaged(path, f"not readable as an inspect_ai log ({type(exc).__name__}: {str(exc)[:300]})") from None
    task = log.eval.task
    if log.status != "success":
        raise AuditUsageError(f"{path}: {task}: the evaluation ended with status {log.status!r}, so its results do not "
                              "cover every sample. Fix: gate a log of a run that completed.")
    if not log.samples:
        raise AuditUsageError(f"{path}: {task}: the log holds no samples (written with log_samples off, or only its "
                              "header was kept), so it cannot be compared item by item. Fix: re-run with samples logged.")
    if log.results is None or not log.results.scores:
        raise damaged(path, f"{task}: the log has samples but no results")
    # keyed as the samples are grouped (str of the id): 1 and "1" would be one sample
    check_unique(path, task, ((f"{s.id} epoch {s.epoch}", f"sample {i + 1}") for i, s in enumerate(log.samples)))
    groups = _groups(log.samples)
    for key, group in groups.items():
        if len({identity(s) for s in group}) > 1:
            raise damaged(path, f"{task}: sample {key} holds different inputs in different epochs")
    metrics = _metric_logs(path, log, task, list(log.samples), value_to_float())
    spec, config = log.eval, log.eval.config
    settings = {
        "version": str(spec.task_version), "task_args": _plain(spec.task_args), "epochs": int(config.epochs or 1),
        "epochs_reducer": config.epochs_reducer, "limit": _plain(config.limit), "sample_id": _plain(config.sample_id),
        "message_limit": config.message_limit, "token_limit": config.token_limit,
        "generate_config": {k: v for k, v in _plain(spec.model_generate_config).items() if k not in TRANSPORT},
        "plan": [[step.solver, _plain(step.params)] for step in log.plan.steps],
        "scorers": sorted({es.scorer for es in log.results.scores}),
    }
    info = {"model": spec.model, "model_args": _plain(spec.model_args), "model_base_url": spec.model_base_url,
            "dataset": _plain(spec.dataset), "created": str(spec.created), "run_id": spec.run_id,
            "revision": _plain(spec.revision), "task_file": spec.task_file}
    content = hashlib.sha256("".join(f"{k}:{identity(g[0])}" for k, g in groups.items()).encode()).hexdigest()
    task_log = TaskLog(task=task, version=settings["version"], metrics=metrics, settings=settings,
                       info={k: v for k, v in info.items() if v not in (None, {}, "")}, files=(path,),
                       content_sha256=content, n_samples=len(groups))
    return task_log, log


def _groups(samples: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in samples:
        out.setdefault(str(s.id), []).append(s)
    return out


def read_inspect(path: str | Path) -> ExternalRun:
    """An inspect_ai run (a log file, or a folder of logs, one per task) with per-sample scores."""
    files = locate_logs(path)
    tasks: dict[str, TaskLog] = {}
    logs = []
    for f in files:
        task_log, log = _read_one(f)
        if task_log.task in tasks:
            raise AuditUsageError(f"{Path(path)}: two logs of task {task_log.task} ({tasks[task_log.task].files[0].name} "
                                  f"and {f.name}): which one is meant is not known. Fix: pass the log file to gate.")
        tasks[task_log.task] = task_log
        logs.append(log)
    models = sorted({log.eval.model for log in logs})
    if len(models) > 1:
        raise AuditUsageError(f"{Path(path)}: the logs are of {len(models)} models ({', '.join(models)}), not one run. "
                              f"Fix: pass one model's logs on each side. {COPY_AGAIN}")
    versions = sorted({log.eval.packages.get("inspect_ai", "") for log in logs} - {""})
    source = Path(path)
    return ExternalRun(tool=INSPECT, tool_version=", ".join(versions) or "unknown", source=source, model=models[0],
                       tasks=tasks, settings={}, info={"model_args": _plain(logs[0].eval.model_args)})
