"""lm-evaluation-harness (0.4.x) runs written with ``--output_path DIR --log_samples``, read from
their files alone (lm-eval need not be installed).

lm-eval writes, in ``DIR/<model_name_sanitized>/`` (or beside ``--output_path x.json``):

- ``results_<date>.json``: per task the aggregates (``results[task]["<metric>,<filter>"]``), the
  task's ``versions``, ``n-shot``, ``configs`` (its YAML, functions as source text), ``n-samples``,
  ``higher_is_better``, ``task_hashes`` (SHA-256 of every sample's doc+prompt+target hashes, in
  file order), the run's ``config`` (model, model_args, seeds, gen_kwargs, limit) and
  ``lm_eval_version``/``git_hash``;
- ``samples_<task>_<date>.jsonl``: one line per document and filter with ``doc_id``, ``filter``,
  ``metrics`` (the names), ``doc_hash``, ``prompt_hash``, ``target_hash`` and each metric's value
  under its name (``lm_eval/evaluator.py``, ``loggers/evaluation_tracker.py``).

Only a metric lm-eval aggregates by ``mean`` (or ``nanmean``) of numeric per-sample values can be
gated item by item; the others (``f1``, ``bleu``, perplexities, BBQ's bias scores) are kept with
the reason. Every check of ``integrity`` runs here, plus two of lm-eval's own records: the number
of documents (``n-samples``) and ``task_hashes``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.gating.external_logs.integrity import COPY_AGAIN, broken_line, check_mean, check_unique, damaged
from bias_core.gating.external_logs.records import LM_EVAL, ExternalItem, ExternalRun, MetricLog, TaskLog

_DATE = re.compile(r"_(\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.json$")
_FIELDS = ("doc_id", "filter", "metrics", "doc_hash", "prompt_hash", "target_hash")
IDENTITY = ("doc_hash", "prompt_hash", "target_hash")
# The aggregation lm-eval 0.4.13 registers for its built-in metrics (lm_eval/api/metrics.py): what a
# task without a metric_list, or a metric_list entry naming no aggregation, is aggregated by.
REGISTERED_AGGREGATION = {
    "acc": "mean", "acc_norm": "mean", "acc_mutual_info": "mean", "acc_bytes": "mean", "exact_match": "mean",
    "likelihood": "mean", "acc_all": "mean", "perplexity": "perplexity", "word_perplexity": "weighted_perplexity",
    "byte_perplexity": "weighted_perplexity", "bits_per_byte": "bits_per_byte", "f1": "f1", "mcc": "matthews_corrcoef",
    "bleu": "bleu", "chrf": "chrf", "chrf++": "chrf++", "ter": "ter", "brier_score": "brier_score", "bypass": "bypass",
}
MEANS = ("mean", "nanmean")
# Task config keys that say where the data lives or what the run was called, not what was asked or
# how it was scored: reported, never refused (the per-sample hashes check the documents themselves).
# lm-eval copies the model's arguments into "metadata"; its "version" is compared as the task version.
INFO_KEYS = ("task", "task_alias", "tag", "group", "dataset_path", "dataset_name", "dataset_kwargs", "metadata")
# The run's options that change what is asked or generated (results.json "config"); a seed matters
# for sampled generation and few-shot selection.
RUN_SETTINGS = ("gen_kwargs", "limit", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
RUN_INFO = ("model_args", "model_dtype", "model_num_parameters", "model_revision", "model_sha", "batch_size", "device",
            "bootstrap_iters")
TOP_INFO = ("git_hash", "transformers_version", "chat_template_sha", "max_length")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def locate_results(path: str | Path) -> Path:
    """The ``results_<date>.json`` of a run: the file itself, or the one in a folder (lm-eval's
    ``--output_path``, or its model subfolder). Several runs in one folder: an error listing them."""
    p = Path(path)
    if p.is_file():
        return p
    if not p.is_dir():
        raise AuditUsageError(f"{p}: no such file or folder. Fix: pass an lm-eval --output_path folder or its "
                              "results_<date>.json.")
    found = sorted(p.glob("results_*.json")) or sorted(p.glob("*/results_*.json"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise AuditUsageError(f"{p}: no results_<date>.json here or in a model subfolder: not an lm-eval output folder. "
                              "Fix: pass the --output_path of an lm-eval run made with --log_samples.")
    raise AuditUsageError(f"{p}: {len(found)} lm-eval runs ({', '.join(str(f.relative_to(p)) for f in found[:5])}): "
                          "which one is meant is not known. Fix: pass the results_<date>.json of the run to gate.")


def _normalized(value: Any) -> Any:
    """A task config with the memory addresses lm-eval writes for some functions taken out, so two
    runs of one task compare equal."""
    if isinstance(value, str):
        return _ADDRESS.sub(">", value)
    if isinstance(value, Mapping):
        return {k: _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def aggregation(config: Mapping[str, Any], metric: str) -> str:
    """How lm-eval aggregated ``metric`` of a task: a registered name ("mean", "f1", ...) or
    "function <name>" for a task's own function (its config holds the source)."""
    metric_list = config.get("metric_list")
    if not isinstance(metric_list, list):
        return REGISTERED_AGGREGATION.get(metric, "mean")
    for entry in metric_list:
        if isinstance(entry, Mapping) and entry.get("metric") == metric:
            agg = entry.get("aggregation")
            if agg is None:
                return REGISTERED_AGGREGATION.get(metric, "unknown")
            text = str(agg)
            named = re.match(r"\s*(?:def\s+(\w+)|<function\s+([\w.]+))", text)
            return f"function {named.group(1) or named.group(2)}" if named else text
    # a metric that process_results returns and metric_list does not name: lm-eval averages it
    return "mean"


def _load_results(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise damaged(path, f"not readable as JSON ({exc})") from None
    if not (isinstance(doc, dict) and all(isinstance(doc.get(k), dict) for k in ("results", "configs", "versions"))):
        raise damaged(path, "not an lm-eval results file (no results, configs and versions)")
    if not doc["configs"]:
        raise damaged(path, "names no task")
    return doc


def _samples_path(results: Path, task: str) -> Path:
    date = _DATE.search(results.name)
    if not date:
        raise AuditUsageError(f"{results}: its name does not end with lm-eval's _<date>.json, so its per-sample files "
                              "cannot be found. Fix: keep the names lm-eval gave the files.")
    samples = results.with_name(f"samples_{task}_{date.group(1)}.jsonl")
    if not samples.is_file():
        raise AuditUsageError(f"{results}: task {task} has no per-sample log ({samples.name} is missing beside it), so "
                              "it cannot be compared item by item. Fix: re-run lm-eval with --log_samples, or copy that "
                              "file too.")
    return samples


def _read_samples(path: Path, task: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, sample) for every line; errors name the line."""
    data = path.read_bytes()
    if not data.strip():
        raise damaged(path, f"{task}: the per-sample log is empty")
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] != "":
        raise broken_line(path, len(lines), "the last line is cut short (it has no end of line)")
    rows = []
    for number, text in enumerate(lines[:-1], start=1):
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise broken_line(path, number, f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise broken_line(path, number, f"not a sample (a JSON {type(row).__name__})")
        missing = [k for k in _FIELDS if k not in row]
        if missing:
            raise broken_line(path, number, f"a sample without {', '.join(missing)}")
        if isinstance(row["doc_id"], bool) or not isinstance(row["doc_id"], (int, str)):
            raise broken_line(path, number, f"doc_id is {json.dumps(row['doc_id'])[:40]}, not an index")
        if not (isinstance(row["metrics"], list) and all(isinstance(m, str) for m in row["metrics"])):
            raise broken_line(path, number, "metrics is not a list of names")
        bad = [k for k in ("filter", *IDENTITY) if not isinstance(row[k], str)]
        absent = [m for m in row["metrics"] if m not in row]
        if bad or absent:
            raise broken_line(path, number, f"doc {row['doc_id']}: " + "; ".join(
                ([f"{', '.join(bad)} not text"] if bad else []) + ([f"no value for {', '.join(absent)}"] if absent else [])))
        rows.append((number, row))
    return rows


def _prompt(row: Mapping[str, Any]) -> str:
    """The context lm-eval sent (its first request), or for a multiple-choice task with an empty
    context (CrowS-Pairs) its choices."""
    args = row.get("arguments")
    if not isinstance(args, Mapping):
        return ""
    first = args.get("gen_args_0", {})
    context = first.get("arg_0") if isinstance(first, Mapping) else None
    if isinstance(context, str) and context:
        return context[:500]
    choices = [a.get("arg_1") for a in args.values() if isinstance(a, Mapping) and isinstance(a.get("arg_1"), str)]
    return " / ".join(choices)[:500]


def _output(row: Mapping[str, Any]) -> str | None:
    resps = row.get("filtered_resps")
    return resps[0][:500] if isinstance(resps, list) and resps and isinstance(resps[0], str) else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float))  # bools too: lm-eval averages True/False as 1/0


def _metric_log(results: Path, samples: Path, task: str, metric: str, filter_key: str, rows, doc: Mapping[str, Any],
                config: Mapping[str, Any]) -> MetricLog:
    agg = aggregation(config, metric)
    reported = doc["results"].get(task, {}).get(f"{metric},{filter_key}")
    higher = (doc.get("higher_is_better") or {}).get(task, {}).get(metric)
    tool_direction = {True: "higher", False: "lower"}.get(higher, "")
    raw = [(number, row, row[metric]) for number, row in rows if metric in row["metrics"]]
    not_gatable = ""
    if agg not in MEANS:
        not_gatable = (f"lm-eval aggregates {metric} by {agg}, not by the mean of its per-sample values (a corpus-level "
                       "score, a ratio of counts or a perplexity): a paired per-item comparison would test another "
                       "quantity, so it is not gated")
    else:
        odd = next(((n, v) for n, _, v in raw if not _number(v)), None)
        if odd is not None:
            not_gatable = (f"its per-sample values are not numbers (line {odd[0]}: {json.dumps(odd[1])[:60]}), so it is "
                           "not a mean of per-sample values and is not gated")
        elif agg == "mean" and any(v != v or v in (float("inf"), float("-inf")) for _, _, v in raw):
            not_gatable = "some per-sample values are NaN or infinite, so its mean is not a number and is not gated"
    items = []
    for number, row, value in raw:
        usable = not not_gatable and value == value  # NaN (nanmean leaves it out) has no value
        items.append(ExternalItem(
            id=str(row["doc_id"]), value=float(value) if usable else None,
            identity=tuple((k, row[k]) for k in IDENTITY), prompt=_prompt(row), output=_output(row),
            where=f"{samples.name}:{number}"))
    if not not_gatable:
        if reported is None:
            raise AuditUsageError(f"{results}: {task} has no aggregate {metric},{filter_key} although {samples.name} "
                                  f"holds its per-sample values. {COPY_AGAIN}")
        reported = check_mean(f"{results} ({samples.name})", task, f"{metric} (filter {filter_key})", reported,
                              [it.value for it in items if it.value is not None])
    number_or_none = float(reported) if isinstance(reported, (int, float)) and not isinstance(reported, bool) else None
    return MetricLog(task, metric, filter_key, number_or_none, tuple(items), samples, not_gatable, tool_direction)


def _task_hash(rows) -> str:
    """lm-eval's ``task_hashes`` entry (loggers/evaluation_tracker.py: hash_string of the joined
    doc+prompt+target hashes of every sample, in order)."""
    joined = "".join(row["doc_hash"] + row["prompt_hash"] + row["target_hash"] for _, row in rows)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def _read_task(results: Path, doc: Mapping[str, Any], task: str, config: Mapping[str, Any]) -> TaskLog:
    samples = _samples_path(results, task)
    rows = _read_samples(samples, task)
    check_unique(samples, task, ((f"{row['doc_id']} (filter {row['filter']})", f"line {n}") for n, row in rows))
    stated = (doc.get("task_hashes") or {}).get(task)
    content = _task_hash(rows)
    if stated and stated != content:
        raise AuditUsageError(f"{samples}: {task}: its samples' hashes do not give the task_hashes entry of {results.name} "
                              f"({content[:12]} here, {str(stated)[:12]} there): lines were edited, removed or "
                              f"reordered, or the two files come from different runs. {COPY_AGAIN}")
    by_filter: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for number, row in rows:
        by_filter.setdefault(row["filter"], []).append((number, row))
    counts = {(m, f): sum(m in row["metrics"] for _, row in fr) for f, fr in by_filter.items()
              for m in dict.fromkeys(m for _, row in fr for m in row["metrics"])}
    effective = ((doc.get("n-samples") or {}).get(task) or {}).get("effective")
    if isinstance(effective, int) and counts and max(counts.values()) != effective:
        raise damaged(samples, f"{task}: {max(counts.values())} documents per filter, but {results.name} says lm-eval "
                               f"evaluated {effective} (n-samples): the per-sample log is cut short or was edited")
    metrics = {(m, f): _metric_log(results, samples, task, m, f, by_filter[f], doc, config) for m, f in counts}
    settings: dict[str, Any] = {"version": str(doc["versions"].get(task)), "num_fewshot": (doc.get("n-shot") or {}).get(task)}
    # "filter": the filter_list, under the name ``allow`` uses for pairing across filters too
    settings.update({("filter" if k == "filter_list" else k): _normalized(v) for k, v in config.items()
                     if k not in INFO_KEYS and k != "num_fewshot"})
    info = {k: config[k] for k in INFO_KEYS if k in config and k != "task"}
    return TaskLog(task=task, version=settings["version"], metrics=metrics, settings=settings, info=info,
                   files=(samples,), content_sha256=content, n_samples=len({row["doc_id"] for _, row in rows}))


def _model_name(doc: Mapping[str, Any]) -> str:
    if doc.get("model_name"):
        return str(doc["model_name"])
    args = (doc.get("config") or {}).get("model_args")
    if isinstance(args, Mapping) and args.get("pretrained"):
        return str(args["pretrained"])
    match = re.search(r"pretrained=([^,]+)", args) if isinstance(args, str) else None
    return match.group(1) if match else str((doc.get("config") or {}).get("model", "unknown"))


def read_lm_eval(path: str | Path) -> ExternalRun:
    """An lm-eval run (its output folder or results json) with every task's per-sample values;
    usage errors for a damaged or inconsistent log (module doc)."""
    results = locate_results(path)
    doc = _load_results(results)
    run_config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    tasks = {task: _read_task(results, doc, task, cfg if isinstance(cfg, Mapping) else {})
             for task, cfg in doc["configs"].items()}
    settings = {k: _normalized(run_config.get(k)) for k in RUN_SETTINGS}
    settings["model_source"] = run_config.get("model", doc.get("model_source"))
    settings["system_instruction_sha"] = doc.get("system_instruction_sha")
    settings["fewshot_as_multiturn"] = doc.get("fewshot_as_multiturn")
    settings["chat_template"] = "applied" if doc.get("chat_template") or doc.get("chat_template_sha") else "none"
    info = {k: run_config[k] for k in RUN_INFO if k in run_config}
    info.update({k: doc[k] for k in TOP_INFO if doc.get(k) is not None})
    version = doc.get("lm_eval_version") or (f"git {doc['git_hash']}" if doc.get("git_hash") else "unknown")
    return ExternalRun(tool=LM_EVAL, tool_version=str(version), source=results, model=_model_name(doc), tasks=tasks,
                       settings=settings, info=info)
