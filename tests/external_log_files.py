"""Small lm-evaluation-harness logs written by hand, as lm-eval 0.4.13 writes them
(``lm_eval/evaluator.py`` builds each sample, ``loggers/evaluation_tracker.py`` writes
``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` in ``<output>/<model_sanitized>/``).

``lm_eval_results`` returns the results dict and per-task samples as lm-eval holds them in memory;
``write_lm_eval`` writes them the way the tracker does, and ``write_with_lm_eval`` hands them to
lm-eval's own ``EvaluationTracker`` (a check of the hand-written layout). ``inspect_log`` and
``write_inspect`` build and write a small inspect_ai log with inspect's own classes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DATE = "2026-01-02T03-04-05.123456"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sanitized(model: str) -> str:
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", model)


def sample(doc_id: int, values: Mapping[str, Any], *, doc: Mapping[str, Any] | None = None, prompt: str | None = None,
           target: str = "0", filter_key: str = "none") -> dict[str, Any]:
    """One line of a samples file: a two-choice question, its hashes and its metric values."""
    doc = dict(doc) if doc is not None else {"question": f"Is statement {doc_id} true?", "choices": ["yes", "no"]}
    prompt = prompt if prompt is not None else f"Question: {doc['question']}\nAnswer:"
    out = {
        "doc_id": doc_id, "doc": doc, "target": target,
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": " yes"}, "gen_args_1": {"arg_0": prompt, "arg_1": " no"}},
        "resps": [[["-1.5", "False"]], [["-2.5", "False"]]], "filtered_resps": [["-1.5", "False"], ["-2.5", "False"]],
        "filter": filter_key, "metrics": list(values),
        "doc_hash": sha(json.dumps(doc, indent=2, ensure_ascii=False)), "prompt_hash": sha(prompt),
        "target_hash": sha(str(target)),
    }
    out.update(values)
    return out


def binary_samples(values: Mapping[str, Sequence[float]], filter_key: str = "none") -> list[dict[str, Any]]:
    """One sample per position of the value lists (doc_id = position)."""
    n = len(next(iter(values.values())))
    return [sample(i, {m: float(v[i]) for m, v in values.items()}, filter_key=filter_key) for i in range(n)]


def lm_eval_results(tasks: Mapping[str, list[dict[str, Any]]], *, model: str = "org/candidate", version: Any = 1.0,
                    n_shot: int = 0, aggregations: Mapping[str, str] | None = None,
                    aggregates: Mapping[tuple[str, str], Any] | None = None, config: Mapping[str, Any] | None = None,
                    higher_is_better: Mapping[str, bool] | None = None) -> tuple[dict[str, Any], dict[str, list]]:
    """(results dict, samples per task) as lm-eval's evaluator returns them. Aggregates are
    ``sum / len`` per metric and filter (lm-eval's ``mean``) unless ``aggregates`` gives them."""
    aggregations = dict(aggregations or {})
    results: dict[str, Any] = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-shot": {},
                               "higher_is_better": {}, "n-samples": {}}
    for task, samples in tasks.items():
        metric_names = list(dict.fromkeys(m for s in samples for m in s["metrics"]))
        filters = list(dict.fromkeys(s["filter"] for s in samples))
        row: dict[str, Any] = {"name": task, "alias": task}
        counts = []
        for f in filters:
            for m in metric_names:
                values = [s[m] for s in samples if s["filter"] == f and m in s["metrics"]]
                counts.append(len(values))
                key = f"{m},{f}"
                if aggregates and (task, key) in aggregates:
                    row[key] = aggregates[(task, key)]
                else:
                    row[key] = sum(values) / len(values)
                row[f"{m}_stderr,{f}"] = "N/A"
        row["sample_len"] = max(counts)
        results["results"][task] = row
        results["configs"][task] = {
            "task": task, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": f"/data/{task}.jsonl"}},
            "test_split": "test", "doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": 0,
            "doc_to_choice": "<function doc_to_choice at 0x7f0123456789>", "description": "", "target_delimiter": " ",
            "fewshot_delimiter": "\n\n", "num_fewshot": n_shot, "output_type": "multiple_choice", "repeats": 1,
            "metric_list": [{"metric": m, "aggregation": aggregations.get(m, "mean"), "higher_is_better": True}
                            for m in metric_names],
            "metadata": {"version": version, "pretrained": model},
        }
        results["versions"][task] = version
        results["n-shot"][task] = n_shot
        results["higher_is_better"][task] = {m: (higher_is_better or {}).get(m, True) for m in metric_names}
        results["n-samples"][task] = {"original": row["sample_len"], "effective": row["sample_len"]}
    results["config"] = {"model": "hf", "model_args": {"pretrained": model, "dtype": "float32"}, "batch_size": "1",
                         "batch_sizes": [], "device": "cpu", "use_cache": None, "limit": None, "bootstrap_iters": 0,
                         "gen_kwargs": {}, "random_seed": 0, "numpy_seed": 1234, "torch_seed": 1234,
                         "fewshot_seed": 1234, **(config or {})}
    results["git_hash"] = "abc1234"
    results["lm_eval_version"] = "0.4.13"
    results["transformers_version"] = "5.24.0"
    return results, {task: copy.deepcopy(list(s)) for task, s in tasks.items()}


def write_lm_eval(output: Path, results: Mapping[str, Any], samples: Mapping[str, list], *, date: str = DATE) -> Path:
    """Write the files as lm-eval's tracker does (task_hashes and the model fields added to the
    results; one samples file per task); returns the results json."""
    model = results["config"]["model_args"]["pretrained"]
    doc = dict(results)
    doc["task_hashes"] = {t: sha("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in ss))
                          for t, ss in samples.items()}
    doc.update(model_source="hf", model_name=model, model_name_sanitized=sanitized(model), system_instruction=None,
               system_instruction_sha=None, fewshot_as_multiturn=None, chat_template=None, chat_template_sha=None,
               total_evaluation_time_seconds="1.0")
    folder = output / sanitized(model)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{date}.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    for task, ss in samples.items():
        with open(folder / f"samples_{task}_{date}.jsonl", "w", encoding="utf-8") as fh:
            for s in ss:
                fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    return path


# inspect's value_to_float of a score letter
LETTER = {"C": 1.0, "I": 0.0, "P": 0.5}


def inspect_log(values: list[list[str]], *, task: str = "toy", version: int | str = 1, model: str = "mockllm/candidate",
         task_args: dict | None = None, reducer: str | None = None, accuracy: float | None = None,
         inputs: dict[int, str] | None = None, status: str = "success", duplicate: bool = False):
    """An inspect_ai log of len(values) samples built with inspect's own classes (needs inspect_ai);
    values[i] holds sample i's score letter per epoch."""
    from inspect_ai import log as log_api
    from inspect_ai.scorer import Score

    epochs = len(values[0])
    samples = [log_api.EvalSample(id=i, epoch=e + 1, input=(inputs or {}).get(i, f"Which is right, {i}?"), target="A",
                                  choices=["A", "B"], scores={"choice": Score(value=v)})
               for i, per in enumerate(values) for e, v in enumerate(per)]
    if duplicate:
        samples.append(samples[0])
    per_id = [sum(LETTER[v] for v in per) / len(per) for per in values]
    score = log_api.EvalScore(name="choice", scorer="choice", reducer=reducer, metrics={
        "accuracy": log_api.EvalMetric(name="accuracy", value=sum(per_id) / len(per_id) if accuracy is None else accuracy),
        "stderr": log_api.EvalMetric(name="stderr", value=0.1)})
    spec = log_api.EvalSpec(created="2026-01-01T00:00:00+00:00", task=task, task_version=version,
                            task_args=task_args or {}, dataset=log_api.EvalDataset(name="toy", samples=len(values)),
                            model=model, config=log_api.EvalConfig(epochs=epochs), packages={"inspect_ai": "0.3.285"})
    return log_api.EvalLog(status=status, eval=spec,
                           plan=log_api.EvalPlan(steps=[log_api.EvalPlanStep(solver="multiple_choice", params={})]),
                           results=log_api.EvalResults(total_samples=len(values), completed_samples=len(values),
                                                       scores=[score]),
                           samples=samples)


def write_inspect(path: Path, log) -> Path:
    """Write it with inspect's ``write_eval_log`` (``.eval``, or its ``.json`` format)."""
    from inspect_ai import log as log_api

    path.parent.mkdir(parents=True, exist_ok=True)
    log_api.write_eval_log(log, str(path), format="json" if path.suffix == ".json" else "eval")
    return path


def write_with_lm_eval(output: Path, results: Mapping[str, Any], samples: Mapping[str, list]) -> Path:
    """The same, written by lm-eval's own EvaluationTracker (needs lm_eval)."""
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output))
    tracker.general_config_tracker.log_experiment_args(
        model_source="hf", model_args=results["config"]["model_args"], system_instruction=None, chat_template=None,
        fewshot_as_multiturn=False)
    # the tracker rewrites the samples' arguments in place when it saves them, as after a real run
    samples = {t: [dict(s, arguments=[(a["arg_0"], a["arg_1"]) for a in s["arguments"].values()]) for s in ss]
               for t, ss in samples.items()}
    tracker.save_results_aggregated(results=dict(results), samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    return next((output / sanitized(tracker.general_config_tracker.model_name)).glob("results_*.json"))
