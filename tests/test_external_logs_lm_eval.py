"""The lm-evaluation-harness reader of bias_core.gating.external_logs on small logs written here,
and the integrity checks that refuse a damaged or inconsistent one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from external_log_files import binary_samples, lm_eval_results, sample, write_lm_eval, write_with_lm_eval

from bias_core.errors import AuditUsageError, DataFileError
from bias_core.gating.external_logs import LM_EVAL, locate_results, read_lm_eval, read_log
from bias_core.gating.external_logs.lm_eval_log import aggregation

ACC = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1]
ACC_NORM = [1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1]


def _run(tmp_path: Path, **kw) -> Path:
    results, samples = lm_eval_results({"toy_mc": binary_samples({"acc": ACC, "acc_norm": ACC_NORM})}, **kw)
    return write_lm_eval(tmp_path / "out", results, samples)


def _samples_file(results_json: Path) -> Path:
    return next(results_json.parent.glob("samples_*.jsonl"))


def test_reads_tasks_metrics_items_and_settings(tmp_path):
    results_json = _run(tmp_path, n_shot=5, version=2.0)
    run = read_lm_eval(tmp_path / "out")  # the --output_path folder: the model subfolder is found
    assert run.tool == LM_EVAL and run.tool_version == "0.4.13" and run.model == "org/candidate"
    assert run.source == results_json
    task = run.tasks["toy_mc"]
    assert task.version == "2.0" and task.settings["num_fewshot"] == 5 and task.n_samples == 12
    # the memory address lm-eval writes into a function's repr is not a setting
    assert task.settings["doc_to_choice"] == "<function doc_to_choice>"
    assert "dataset_kwargs" in task.info and "dataset_kwargs" not in task.settings
    assert set(task.metrics) == {("acc", "none"), ("acc_norm", "none")}
    acc = task.metrics[("acc", "none")]
    assert acc.reported == sum(ACC) / 12 and acc.not_gatable == "" and acc.tool_direction == "higher"
    assert [it.value for it in acc.items] == [float(v) for v in ACC]
    assert [it.id for it in acc.items] == [str(i) for i in range(12)]
    first = acc.items[0]
    assert dict(first.identity).keys() == {"doc_hash", "prompt_hash", "target_hash"}
    assert first.prompt.startswith("Question: Is statement 0") and first.where.endswith(".jsonl:1")
    block = acc.metric_items("2.0", task.content_sha256)
    assert block.key == ("toy_mc", "acc") and len(block.items) == 12 and block.value == acc.reported
    assert run.settings["fewshot_seed"] == 1234 and run.settings["chat_template"] == "none"


def test_locates_the_results_file_and_refuses_two_runs_in_one_folder(tmp_path):
    results_json = _run(tmp_path)
    assert locate_results(results_json) == results_json
    assert locate_results(results_json.parent) == results_json
    assert read_log(results_json).tool == LM_EVAL
    results, samples = lm_eval_results({"toy_mc": binary_samples({"acc": ACC})})
    write_lm_eval(tmp_path / "out", results, samples, date="2026-01-03T00-00-00.000000")
    with pytest.raises(AuditUsageError, match="2 lm-eval runs.*Fix: pass the results_<date>.json"):
        locate_results(tmp_path / "out")


def test_an_edited_aggregate_is_refused_naming_file_task_and_metric(tmp_path):
    results, samples = lm_eval_results({"toy_mc": binary_samples({"acc": ACC})},
                                       aggregates={("toy_mc", "acc,none"): 0.9})
    path = write_lm_eval(tmp_path / "out", results, samples)
    with pytest.raises(AuditUsageError) as err:
        read_lm_eval(path)
    text = str(err.value)
    assert str(path) in text and "toy_mc acc (filter none)" in text and "0.9" in text
    assert repr(sum(ACC) / 12) in text and "Fix:" in text


def test_a_truncated_last_line_is_an_error_naming_the_line(tmp_path):
    samples = _samples_file(_run(tmp_path))
    data = samples.read_bytes()
    samples.write_bytes(data[: len(data) - 40])  # cut inside the 12th line
    with pytest.raises(DataFileError, match=r"line 12: the last line is cut short"):
        read_lm_eval(tmp_path / "out")


def test_a_garbled_line_is_an_error_naming_the_line(tmp_path):
    samples = _samples_file(_run(tmp_path))
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4] = lines[4][:30] + "\n"
    samples.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"{samples.name}: line 5: not JSON"):
        read_lm_eval(tmp_path / "out")


def test_a_sample_without_its_fields_is_an_error_naming_the_line(tmp_path):
    samples = _samples_file(_run(tmp_path))
    rows = [json.loads(ln) for ln in samples.read_text(encoding="utf-8").splitlines()]
    del rows[2]["prompt_hash"]
    del rows[6]["acc"]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"line 3: a sample without prompt_hash"):
        read_lm_eval(tmp_path / "out")
    rows[2]["prompt_hash"] = "0" * 64
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"line 7: doc 6: no value for acc"):
        read_lm_eval(tmp_path / "out")


def test_a_whole_line_removed_is_caught_by_lm_evals_own_counts(tmp_path):
    samples = _samples_file(_run(tmp_path))
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    samples.write_text("".join(lines[:-1]), encoding="utf-8")  # cut at a line's end: every line reads
    with pytest.raises(AuditUsageError, match="task_hashes|n-samples"):
        read_lm_eval(tmp_path / "out")


def test_reordered_or_edited_hashes_do_not_match_task_hashes(tmp_path):
    samples = _samples_file(_run(tmp_path))
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    samples.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(AuditUsageError, match="task_hashes entry"):
        read_lm_eval(tmp_path / "out")


def test_a_duplicated_doc_id_is_an_error_naming_both_lines(tmp_path):
    docs = binary_samples({"acc": ACC})
    docs[7] = sample(3, {"acc": float(ACC[7])})
    results, samples = lm_eval_results({"toy_mc": docs})
    write_lm_eval(tmp_path / "out", results, samples)
    with pytest.raises(DataFileError, match=r"sample 3 \(filter none\) is listed twice \(line 4 and line 8\)"):
        read_lm_eval(tmp_path / "out")


def test_a_missing_samples_file_asks_for_log_samples(tmp_path):
    _samples_file(_run(tmp_path)).unlink()
    with pytest.raises(AuditUsageError, match="--log_samples"):
        read_lm_eval(tmp_path / "out")


def test_metrics_that_are_not_means_of_their_items_are_kept_with_the_reason(tmp_path):
    # lm-eval's registered f1 is a corpus-level F1 over (gold, prediction) pairs; BBQ's bias scores
    # are its own functions over tuples: neither is a mean of per-sample values.
    docs = [sample(i, {"acc": float(ACC[i]), "f1": [ACC[i], 1], "amb_bias_score": [ACC[i], 1.0, 1.0, False]})
            for i in range(12)]
    agg_src = "def agg_amb_bias_scores(arr):\n    return 0.1\n"
    results, samples = lm_eval_results({"toy_mc": docs}, aggregations={"f1": "f1", "amb_bias_score": agg_src},
                                       aggregates={("toy_mc", "f1,none"): 0.8, ("toy_mc", "amb_bias_score,none"): 0.1})
    write_lm_eval(tmp_path / "out", results, samples)
    task = read_lm_eval(tmp_path / "out").tasks["toy_mc"]
    assert task.metrics[("acc", "none")].not_gatable == ""
    assert "by f1, not by the mean" in task.metrics[("f1", "none")].not_gatable
    assert "by function agg_amb_bias_scores" in task.metrics[("amb_bias_score", "none")].not_gatable
    assert all(it.value is None for it in task.metrics[("f1", "none")].items)


def test_a_mean_aggregated_metric_with_non_numeric_values_is_not_gated(tmp_path):
    docs = [sample(i, {"acc": float(ACC[i]), "pair": [1, 2]}) for i in range(12)]
    results, samples = lm_eval_results({"toy_mc": docs}, aggregates={("toy_mc", "pair,none"): 0.5})
    write_lm_eval(tmp_path / "out", results, samples)
    why = read_lm_eval(tmp_path / "out").tasks["toy_mc"].metrics[("pair", "none")].not_gatable
    assert "not numbers (line 1: [1, 2])" in why


def test_aggregation_follows_lm_evals_own_rules():
    assert aggregation({}, "acc") == "mean"  # no metric_list: the output type's registered metrics
    assert aggregation({}, "word_perplexity") == "weighted_perplexity"
    assert aggregation({"metric_list": [{"metric": "f1"}]}, "f1") == "f1"  # listed without one: registered
    assert aggregation({"metric_list": [{"metric": "acc"}]}, "pct") == "mean"  # returned, not listed: averaged
    assert aggregation({"metric_list": [{"metric": "x", "aggregation": "<function agg_x at 0x1>"}]}, "x") == "function agg_x"


@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm_eval is not installed (scripts/setup.sh --dev)")
def test_files_written_by_lm_evals_own_tracker_read_the_same(tmp_path):
    results, samples = lm_eval_results({"toy_mc": binary_samples({"acc": ACC, "acc_norm": ACC_NORM})})
    ours = read_lm_eval(write_lm_eval(tmp_path / "ours", results, samples))
    theirs = read_lm_eval(write_with_lm_eval(tmp_path / "theirs", results, samples))
    for key, block in ours.tasks["toy_mc"].metrics.items():
        other = theirs.tasks["toy_mc"].metrics[key]
        assert [(i.id, i.value, i.identity) for i in other.items] == [(i.id, i.value, i.identity) for i in block.items]
        assert other.reported == block.reported
    assert theirs.tasks["toy_mc"].content_sha256 == ours.tasks["toy_mc"].content_sha256
    assert theirs.model == ours.model == "org/candidate"
