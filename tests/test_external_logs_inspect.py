"""The inspect_ai reader of bias_core.gating.external_logs on small ``.eval`` logs built with
inspect's own classes and written with its ``write_eval_log``, and gate_logs on two of them.

Expected numbers are computed here: scores mapped C 1, I 0, P 0.5 by hand (what inspect's
``value_to_float`` does by default), a sample's epochs averaged, McNemar's p summed by hand.
"""

from __future__ import annotations

import math

import pytest
from external_log_files import LETTER, binary_samples, inspect_log, lm_eval_results, write_inspect, write_lm_eval

from bias_core.errors import AuditUsageError, BaselineMismatch, DataFileError
from bias_core.gating.external_logs import INSPECT, gate_logs, read_inspect, read_log

pytest.importorskip("inspect_ai.log", reason="inspect_ai is not installed (scripts/setup.sh --dev)")

_log, _write = inspect_log, write_inspect  # tests/external_log_files.py, shared with test_external_logs_pytest.py


BASE = [["C"], ["C"], ["I"], ["C"], ["C"], ["C"], ["I"], ["C"], ["C"], ["P"]]
CAND = [["I"], ["I"], ["I"], ["C"], ["C"], ["C"], ["C"], ["I"], ["C"], ["P"]]  # 3 worse, 1 better


def test_reads_samples_scores_and_settings_through_inspects_api(tmp_path):
    path = _write(tmp_path / "base.eval", _log(BASE))
    run = read_log(path)
    assert run.tool == INSPECT and run.tool_version == "0.3.285" and run.model == "mockllm/candidate"
    task = run.tasks["toy"]
    assert task.version == "1" and task.settings["epochs"] == 1 and task.n_samples == 10
    assert task.settings["plan"] == [["multiple_choice", {}]]
    acc = task.metrics[("choice/accuracy", "none")]
    assert [it.value for it in acc.items] == [LETTER[v[0]] for v in BASE]  # C 1, I 0, P 0.5
    assert acc.reported == pytest.approx(7.5 / 10) and acc.not_gatable == ""
    assert dict(acc.items[0].identity).keys() == {"input_hash"} and acc.items[0].prompt == "Which is right, 0?"
    assert "not a mean" in task.metrics[("choice/stderr", "none")].not_gatable
    json_log = _write(tmp_path / "base.json", _log(BASE))
    assert read_log(json_log).tasks["toy"].metrics[("choice/accuracy", "none")].reported == acc.reported


def test_epochs_are_averaged_per_sample_as_inspects_mean_reducer_does(tmp_path):
    values = [["C", "I"], ["C", "C"], ["I", "I"], ["P", "C"]]
    run = read_inspect(_write(tmp_path / "e.eval", _log(values)))
    acc = run.tasks["toy"].metrics[("choice/accuracy", "none")]
    assert [it.value for it in acc.items] == [0.5, 1.0, 0.0, 0.75]
    assert run.tasks["toy"].settings["epochs"] == 2
    other = read_inspect(_write(tmp_path / "max.eval", _log(values, reducer="max", accuracy=0.75)))
    assert "reduced over 2 epochs by max" in other.tasks["toy"].metrics[("choice/accuracy", "max")].not_gatable


def test_an_edited_accuracy_a_duplicate_sample_and_an_unfinished_run_are_refused(tmp_path):
    with pytest.raises(AuditUsageError, match=r"toy choice/accuracy: the log states 0.9, but the mean of its 10"):
        read_inspect(_write(tmp_path / "edited.eval", _log(BASE, accuracy=0.9)))
    # a .eval file keeps one entry per sample and epoch (a zip member each); its JSON form can list one twice
    with pytest.raises(DataFileError, match=r"sample 0 epoch 1 is listed twice"):
        read_inspect(_write(tmp_path / "dup.json", _log(BASE, duplicate=True)))
    with pytest.raises(AuditUsageError, match="ended with status 'error'"):
        read_inspect(_write(tmp_path / "error.eval", _log(BASE, status="error")))
    garbled = tmp_path / "garbled.eval"
    garbled.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataFileError, match="not readable as an inspect_ai log"):
        read_inspect(garbled)


def test_gating_two_inspect_logs_matches_a_hand_computation(tmp_path):
    c = _write(tmp_path / "c" / "toy.eval", _log(CAND))
    b = _write(tmp_path / "b" / "toy.eval", _log(BASE, model="mockllm/baseline"))
    row = gate_logs(c.parent, b.parent).row("toy", "choice/accuracy")
    cand = [LETTER[v[0]] for v in CAND]
    base = [LETTER[v[0]] for v in BASE]
    assert row.n_pairs == 10
    assert row.difference == pytest.approx(sum(cand) / 10 - sum(base) / 10, abs=1e-15)
    # a 0.5 (P) makes the samples not all 0/1: the paired sign-flip permutation test, exact for 10 pairs
    diffs = [b_ - c_ for c_, b_ in zip(cand, base)]  # harm per sample (higher is better)
    observed = sum(diffs)
    patterns = [sum(d if (k >> i) & 1 == 0 else -d for i, d in enumerate(diffs)) for k in range(2 ** len(diffs))]
    assert row.p_value == pytest.approx(sum(p >= observed - 1e-12 for p in patterns) / 2 ** len(diffs))
    assert "sign-flip" in row.test
    binary_c = _write(tmp_path / "c2" / "toy.eval", _log([["C" if v == ["P"] else v[0]] for v in CAND]))
    binary_b = _write(tmp_path / "b2" / "toy.eval", _log([["C" if v == ["P"] else v[0]] for v in BASE]))
    row2 = gate_logs(binary_c, binary_b).row("toy", "choice/accuracy")
    worse = 3  # of 4 discordant samples (3 worse, 1 better): P(X >= 3), X ~ Binomial(4, 1/2)
    assert row2.p_value == pytest.approx(sum(math.comb(4, k) for k in range(worse, 5)) / 16)
    assert "McNemar" in row2.test


def test_epochs_and_task_args_must_match_unless_allowed(tmp_path):
    b = _write(tmp_path / "b.eval", _log(BASE))
    two = _write(tmp_path / "two.eval", _log([v * 2 for v in CAND]))
    with pytest.raises(BaselineMismatch, match=r"toy: epochs differs \(candidate 2, baseline 1\)"):
        gate_logs(two, b)
    assert gate_logs(two, b, allow={"epochs"}).row("toy", "choice/accuracy").n_pairs == 10
    args = _write(tmp_path / "args.eval", _log(CAND, task_args={"shuffle": True}))
    with pytest.raises(BaselineMismatch, match="task_args differs"):
        gate_logs(args, b)
    version = _write(tmp_path / "v2.eval", _log(CAND, version=2))
    with pytest.raises(BaselineMismatch, match="version differs"):
        gate_logs(version, b)


def test_a_sample_with_another_input_does_not_pair(tmp_path):
    b = _write(tmp_path / "b.eval", _log(BASE * 3))
    c = _write(tmp_path / "c.eval", _log(BASE * 3, inputs={4: "another question"}))
    row = gate_logs(c, b).row("toy", "choice/accuracy")
    assert (row.n_pairs, row.unpaired.identity_differs) == (29, 1)


def test_an_inspect_log_is_not_gated_against_an_lm_eval_log(tmp_path):
    b = _write(tmp_path / "b.eval", _log(BASE))
    results, samples = lm_eval_results({"toy": binary_samples({"acc": [1, 0, 1]})})
    lm = write_lm_eval(tmp_path / "lm", results, samples)
    with pytest.raises(BaselineMismatch, match="gate two logs of one tool"):
        gate_logs(lm, b)
