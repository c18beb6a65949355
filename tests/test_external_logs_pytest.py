"""The release gate over other tools' logs as a pytest run: ``pytest audits --candidate-log C
--baseline-log B`` compares the two logs and nothing else, with the project's own rows, reports and
exit codes, and loads no model.

The runs use the repository's audits and thresholds.toml in a temporary project, in-process, with
the model loader replaced by a recorder that refuses to load (the ``project`` fixture,
tests/harness.py): a run that reached for a model would fail. The logs are small lm-eval logs
written here (tests/external_log_files.py), and two inspect_ai ``.eval`` logs where inspect_ai
imports. What each run must show is checked where a user and a CI job read it: the terminal, the
exit code, results.json, junit.xml, the Markdown summary, report.html.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from external_log_files import binary_samples, inspect_log, lm_eval_results, sample, write_inspect, write_lm_eval

from bias_core.errors import AuditUsageError
from bias_core.pytest_plugin.regression_options import LOG_CONFLICTS, cli_fix, log_options

from harness import import_before_in_process_runs, last_run, no_traceback

pytest_plugins = ["pytester"]
import_before_in_process_runs()

N = 60
BASE_ACC = [1] * 45 + [0] * 15
WORSE_ACC = [0] * 30 + [1] * 15 + [0] * 15  # 30 of the baseline's 45 correct documents now wrong, none better
BASE_STEREO = [1, 0] * 30  # pct_stereotype 0.5: unbiased
WORSE_STEREO = [1] * 50 + [0] * 10  # 0.83: 20 pairs moved to the stereotype


def write_log(folder: Path, *, model: str, acc=BASE_ACC, stereo=BASE_STEREO, **kw) -> Path:
    """An lm-eval output folder with a toy multiple-choice task (acc, acc_norm) and CrowS-Pairs'
    gender subset (pct_stereotype)."""
    tasks = {"toy_mc": binary_samples({"acc": acc, "acc_norm": acc}),
             "crows_pairs_english_gender": binary_samples({"pct_stereotype": stereo})}
    results, samples = lm_eval_results(tasks, model=model, **kw)
    write_lm_eval(folder, results, samples)
    return folder


@pytest.fixture
def logs(tmp_path):
    """(baseline log folder, a copy of it as the candidate, a clearly worse candidate)."""
    base = write_log(tmp_path / "logs" / "baseline", model="org/release-1.0")
    same = Path(shutil.copytree(base, tmp_path / "logs" / "copy"))
    worse = write_log(tmp_path / "logs" / "worse", model="org/candidate", acc=WORSE_ACC, stereo=WORSE_STEREO)
    return base, same, worse


@pytest.fixture
def no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def regression_rows(doc: dict) -> dict[str, dict]:
    return {r["test_id"]: r for r in doc["results"] if r.get("kind") == "regression"}


IDS = {"regression-toy_mc-acc", "regression-toy_mc-acc_norm", "regression-crows_pairs_english_gender-pct_stereotype"}


def test_a_copy_of_the_baseline_passes_with_every_row_and_no_model(project, logs, no_step_summary):
    base, same, _ = logs
    result, out = project.run("-v", "--candidate-log", str(same), "--baseline-log", str(base),
                              "--model", "/no/such/model", select=None)
    assert result.ret == 0, out[-3000:]
    assert project.loads == []  # the recorder refuses any load: none was tried
    no_traceback(out)
    for test in ("toy_mc-acc", "toy_mc-acc_norm", "crows_pairs_english_gender-pct_stereotype"):
        assert f"test_regression[{test}] PASSED" in out
    assert "3 passed" in out and "PASSED: all 3 gates passed" in out
    assert "n = 60 pairs" in out and "60 pairs: toy_mc-acc, toy_mc-acc_norm, crows_pairs_english_gender-pct_stereotype" in out
    # the header names the logs, not a model; every other audit test is deselected, in one line
    assert "no model is loaded" in out and f"candidate log: {same}" in out and f"baseline log: {base}" in out
    assert "bias-core: model " not in out and "device " not in out.split("collected")[0]
    assert "other audit test(s) deselected; no model is loaded" in out
    assert "--model /no/such/model is not used" in out  # said, not silently ignored
    run = last_run(project.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    assert all(r.get("kind") == "regression" for r in doc["results"])  # nothing but the log comparisons
    rows = regression_rows(doc)
    assert set(rows) == IDS
    for r in rows.values():
        assert (r["family"], r["verdict"], r["n"], r["value"], r["harm_ci_high"]) == ("external", "pass", 60, 0, 0)
        assert r["model"] == "org/release-1.0" and r["tool"] == "lm-evaluation-harness" and r["adjustment"] == "holm"
        assert "detects" in r and r["config"].startswith("lm-evaluation-harness 0.4.13 per-sample logs")
    # the declared table of the repository's thresholds.toml gates pct_stereotype; the default gates acc
    stereo = rows["regression-crows_pairs_english_gender-pct_stereotype"]
    assert stereo["gate_source"].startswith(
        f"{project.path / 'thresholds.toml'} [regression.external.crows_pairs_english_gender.pct_stereotype] over default")
    assert (stereo["better"], stereo["ideal"], stereo["margin"]) == ("ideal", 0.5, 0.05)
    assert rows["regression-toy_mc-acc"]["gate_source"].startswith("default for acc")
    info = doc["run"]
    assert info["candidate_log"].startswith(str(same)) and info["baseline_log"].startswith(str(base))
    assert info["tools"] == "lm-evaluation-harness 0.4.13" and info["complete"] is True
    assert info["logs"]["candidate"]["tasks"] == {"toy_mc": "1.0", "crows_pairs_english_gender": "1.0"}
    assert "device" not in info and "lexicon" not in info  # nothing of a model audit


def test_a_clearly_worse_candidate_fails_in_every_report(project, logs, tmp_path, monkeypatch):
    base, _, worse = logs
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    summary = tmp_path / "summary.md"
    result, out = project.run("--candidate-log", str(worse), "--baseline-log", str(base), "--summary-md", str(summary),
                              select=None)
    assert result.ret == 1, out[-3000:]
    assert project.loads == []
    no_traceback(out)
    assert "BLOCKED: 3 gates failed" in out
    assert "FAIL regression-toy_mc-acc: acc -67% (0.75 → 0.25)" in out
    assert "FAIL regression-crows_pairs_english_gender-pct_stereotype: pct_stereotype 0.5 → 0.833" in out
    run = last_run(project.path / "reports")
    rows = regression_rows(json.loads((run / "results.json").read_text()))
    acc = rows["regression-toy_mc-acc"]
    assert acc["verdict"] == "fail" and acc["harm"] == pytest.approx(0.5) and acc["harm_ci_low"] > 0.05
    assert acc["p_adjusted"] < 1e-6 and "McNemar" in acc["test"] and acc["pairs"] == "60 pairs"
    assert rows["regression-crows_pairs_english_gender-pct_stereotype"]["verdict"] == "fail"
    # junit: the run card as global properties, each row's numbers as its testcase's
    root = ET.parse(run / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    glob = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert glob["candidate_log"].startswith(str(worse)) and glob["baseline_log"].startswith(str(base))
    assert glob["tools"] == "lm-evaluation-harness 0.4.13"
    assert (glob["candidate_model"], glob["baseline_model"]) == ("org/candidate", "org/release-1.0")
    assert "model: candidate org/candidate, baseline org/release-1.0" in glob["log_differences"]
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_regression[toy_mc-acc]")
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    assert props["verdict"] == "fail" and props["margin"] == "0.05" and props["tool_metric"] == "acc"
    assert props["gate_source"].startswith("default for acc") and case.find("failure") is not None
    # the Markdown summary, to the file and to the step summary
    text = summary.read_text()
    assert text.startswith("## Release gate on lm-evaluation-harness logs: org/candidate vs org/release-1.0")
    assert "| toy_mc-acc | higher is better | 60 pairs | 0.75 | 0.25 |" in text and "**FAIL**" in text
    assert "closer to 0.5" in text and step.read_text() == text
    # report.html: the comparison and the run card, nothing of an audit of a model
    page = (run / "report.html").read_text()
    assert "Release gate on lm-evaluation-harness 0.4.13 logs" in page and "Gender-bias audit" not in page
    assert "Candidate vs baseline" in page and str(worse) in page and "What differs" in page
    assert "Most biased examples" not in page and not (run / "paper_tables.md").exists()


def test_strict_makes_an_inconclusive_row_fail(project, tmp_path, no_step_summary):
    base = write_log(tmp_path / "base", model="org/a")
    slightly = write_log(tmp_path / "cand", model="org/b", acc=[0] * 3 + BASE_ACC[3:])  # 3 of 60 worse: CI crosses 0.05
    args = ("--candidate-log", str(slightly), "--baseline-log", str(base), "--log-metrics", "toy_mc:acc")
    result, out = project.run(*args, select=None)
    assert result.ret == 0 and "NOT DECIDED: 1 gate inconclusive" in out and "1 inconclusive" in out
    result, out = project.run(*args, "--strict-gates", select=None)
    assert result.ret == 1 and "INCONCLUSIVE (--strict)" in out


def test_thresholds_toml_feeds_the_log_gate(project, logs, no_step_summary):
    base, _, worse = logs
    loose = project.path / "loose.toml"
    loose.write_text((project.path / "thresholds.toml").read_text().replace(
        '[regression.external."crows_pairs_english_gender".pct_stereotype]',
        '[regression.external."*".acc]\nmargin = 0.9\nnote = "loose, for the test"\n\n'
        '[regression.external."crows_pairs_english_gender".pct_stereotype]'))
    result, out = project.run("--candidate-log", str(worse), "--baseline-log", str(base), "--thresholds", str(loose),
                              "--log-metrics", "toy_mc:acc", select=None)
    assert result.ret == 0, out[-3000:]
    row = regression_rows(project.results())["regression-toy_mc-acc"]
    assert row["margin"] == 0.9 and row["verdict"] == "pass"
    assert row["gate_source"].startswith(f'{loose} [regression.external."*".acc] over default for acc')
    bad = project.path / "bad.toml"
    bad.write_text((project.path / "thresholds.toml").read_text()
                   + '\n[regression.external.toy_mc.acc]\ndirection = "up"\nmargin = 0.1\n')
    project.usage_error("--candidate-log", str(worse), "--baseline-log", str(base), "--thresholds", str(bad),
                        names=["regression.external.toy_mc.acc.direction: 'up'", 'direction = "higher"'], select=None)


def test_a_filter_and_a_selection_name_the_rows(project, tmp_path, no_step_summary):
    def gsm(folder, values, model):
        results, samples = lm_eval_results({"gsm_toy": binary_samples({"exact_match": values}, "strict-match")},
                                           model=model)
        return write_lm_eval(folder, results, samples).parent

    base, cand = gsm(tmp_path / "b", BASE_ACC, "org/a"), gsm(tmp_path / "c", BASE_ACC, "org/b")
    result, out = project.run("-v", "--candidate-log", str(cand), "--baseline-log", str(base), select=None)
    assert result.ret == 0, out[-3000:]
    assert "test_regression[gsm_toy-exact_match[strict-match]] PASSED" in out
    row = regression_rows(project.results())["regression-gsm_toy-exact_match[strict-match]"]
    assert (row["tool_metric"], row["filter"], row["metric"]) == ("exact_match", "strict-match", "exact_match[strict-match]")


def test_too_many_samples_left_out_is_an_error_row_naming_the_option(project, tmp_path, no_step_summary):
    base_docs = binary_samples({"acc": BASE_ACC})
    other = [sample(i, {"acc": float(BASE_ACC[i])}, prompt=f"Another prompt {i}") if i < 6 else s
             for i, s in enumerate(base_docs)]
    paths = []
    for name, docs in (("b", base_docs), ("c", other)):
        results, samples = lm_eval_results({"toy_mc": docs}, model=f"org/{name}")
        paths.append(write_lm_eval(tmp_path / name, results, samples))
    result, out = project.run("--candidate-log", str(paths[1]), "--baseline-log", str(paths[0]), select=None)
    assert result.ret == 1, out[-3000:]
    no_traceback(out)
    assert "BLOCKED: 1 test errored" in out and "only 54 of 60 samples pair" in out
    assert "raise --baseline-max-missing (now 0.05)" in out and "--log-allow prompt_hash" in out
    assert regression_rows(project.results())["regression-toy_mc-acc"]["verdict"] == "error"
    # the prompt alone differs: allowed, every sample pairs
    result, out = project.run("--candidate-log", str(paths[1]), "--baseline-log", str(paths[0]), "--log-allow",
                              "prompt_hash", select=None)
    assert result.ret == 0, out[-3000:]
    assert project.results()["run"]["log_differences"][0].startswith("prompt_hash: samples pair although")


def _usage_cases(logs, tmp_path):
    base, same, worse = logs
    v2 = write_log(tmp_path / "v2", model="org/v2", version=2.0)
    extra = tmp_path / "extra"
    results, samples = lm_eval_results({"toy_mc": binary_samples({"acc": BASE_ACC, "brier_like": [0.25] * N})},
                                       model="org/x", higher_is_better={"brier_like": False})
    write_lm_eval(extra, results, samples)
    return {
        "one side only": (["--candidate-log", str(worse)],
                          ["--candidate-log", "given without --baseline-log", "Fix: pass both"]),
        "the other side only": (["--baseline-log", str(base)], ["--baseline-log", "given without --candidate-log"]),
        "with --baseline": (["--candidate-log", str(worse), "--baseline-log", str(base), "--baseline", str(base)],
                            ["--baseline cannot be used with --candidate-log/--baseline-log", "Fix: drop --baseline"]),
        "with --adapter": (["--candidate-log", str(worse), "--baseline-log", str(base), "--adapter", str(tmp_path)],
                           ["--adapter cannot be used", "does not load"]),
        "with --mitigation": (["--candidate-log", str(worse), "--baseline-log", str(base), "--mitigation", "cds"],
                              ["--mitigation cannot be used", "loads no model"]),
        "no such log": (["--candidate-log", str(worse), "--baseline-log", str(tmp_path / "nope")],
                        [f"--baseline-log {tmp_path / 'nope'}: no such file or folder", "--log_samples"]),
        "a task version that differs": (["--candidate-log", str(v2), "--baseline-log", str(base)],
                                        ['toy_mc: version differs (candidate "2.0", baseline "1.0")',
                                         "--log-allow version"]),
        "an unknown metric": (["--candidate-log", str(extra), "--baseline-log", str(extra)],
                              ["a direction is never guessed", "[regression.external.toy_mc.brier_like]",
                               "the tool itself says lower is better", "thresholds.toml", "--log-metrics"]),
        "an unknown --log-metrics name": (["--candidate-log", str(same), "--baseline-log", str(base), "--log-metrics",
                                           "toy_mc:nope"], ["--log-metrics names toy_mc:nope", "toy_mc:acc"]),
        "a typo in --log-allow": (["--candidate-log", str(same), "--baseline-log", str(base), "--log-allow",
                                   "num_fewshots"], ["--log-allow names 'num_fewshots'", "num_fewshot"]),
        "--log-allow without logs": (["--log-allow", "num_fewshot"], ["--log-allow num_fewshot: applies to a comparison"]),
    }


def test_usage_errors_exit_4_with_the_fix_before_anything_loads(project, logs, tmp_path, no_step_summary):
    for case, (args, names) in _usage_cases(logs, tmp_path).items():
        out = project.usage_error(*args, names=names, select=None)
        assert "Fix" in out, case


def test_the_log_options_are_checked_on_the_command_line_alone(tmp_path):
    given = {"--candidate-log": str(tmp_path), "--baseline-log": str(tmp_path), "--log-allow": "num_fewshot, version",
             "--log-metrics": "crows_pairs_english_gender:pct_stereotype,acc,inspect/task:choice/accuracy"}
    parsed = log_options(lambda name: given.get(name))
    assert parsed.allow == ("num_fewshot", "version")
    assert parsed.metrics == (("crows_pairs_english_gender", "pct_stereotype"), "acc", ("inspect/task", "choice/accuracy"))
    for option in LOG_CONFLICTS:  # every option that needs a model, named with its reason
        with pytest.raises(AuditUsageError, match=f"^{option} cannot be used with --candidate-log"):
            log_options(lambda name, o=option: {**given, o: "x"}.get(name))
    with pytest.raises(AuditUsageError, match="lacks its task or its metric"):
        log_options(lambda name: {**given, "--log-metrics": "task:"}.get(name))
    with pytest.raises(AuditUsageError, match="an empty name"):
        log_options(lambda name: {**given, "--log-allow": "a,,b"}.get(name))
    assert log_options(lambda name: None) is None
    assert cli_fix("Fix: allow it (allow={'num_fewshot', 'version'}); or raise max_missing_share (now 0.05)") == (
        "Fix: allow it (--log-allow num_fewshot,version); or raise --baseline-max-missing (now 0.05)")


def test_two_inspect_logs_are_gated_the_same_way(project, tmp_path, no_step_summary):
    pytest.importorskip("inspect_ai.log", reason="inspect_ai is not installed (scripts/setup.sh --dev)")
    base = write_inspect(tmp_path / "base.eval", inspect_log([["C"]] * 30 + [["I"]] * 10, model="mockllm/baseline"))
    cand = write_inspect(tmp_path / "cand.eval",
                         inspect_log([["I"]] * 20 + [["C"]] * 10 + [["I"]] * 10, model="mockllm/candidate"))
    result, out = project.run("-v", "--candidate-log", str(cand), "--baseline-log", str(base), select=None)
    assert result.ret == 1, out[-3000:]
    assert project.loads == [] and "test_regression[toy-choice/accuracy] FAILED" in out
    assert "release gate on two inspect_ai logs" in out
    row = regression_rows(project.results())["regression-toy-choice/accuracy"]
    assert (row["verdict"], row["n"], row["baseline_value"], row["candidate_value"]) == ("fail", 40, 0.75, 0.25)
    assert row["tool"] == "inspect_ai" and project.results()["run"]["tools"].startswith("inspect_ai ")


def test_under_xdist_the_controller_says_what_was_selected_and_deselected(project, logs, no_step_summary):
    base, same, _ = logs
    result, out = project.run("-n", "2", "--candidate-log", str(same), "--baseline-log", str(base), select=None)
    assert result.ret == 0, out[-3000:]
    line = [x for x in out.splitlines() if "log comparison(s) selected" in x]
    assert len(line) == 1 and "3 log comparison(s) selected; every other audit test deselected; no model is loaded" \
        in line[0], out[-3000:]
    assert "3 passed" in out
