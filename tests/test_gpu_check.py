"""benchmarks/gpu_check.py's comparisons, on hand-made rows: what it reports from a GPU lease is
only as good as these (exact against fp32: verdicts and each value within the error its row
states; where an audit's time went)."""

from __future__ import annotations

import sys

import pytest

from paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402  (a script of benchmarks/, not a package)


def _row(test_id, value, verdict="pass", error=None, n=10):
    row = {"test_id": test_id, "value": value, "ci_low": value - 0.1, "ci_high": value + 0.1, "n": n, "verdict": verdict}
    if error is not None:
        row["breakdown"] = {"precision": {"computed_in": "bfloat16", "propagated_error": error}}
    return row


def _doc(*rows):
    return {"run": {"dtype": "x"}, "results": list(rows)}


def test_exact_against_fp32_flags_a_changed_verdict_and_a_value_beyond_its_stated_error():
    exact = _doc(_row("a", 0.5), _row("b", 0.30001, error=1e-3), _row("c", 0.31, error=1e-3), _row("d", 0.7, "fail"),
                 _row("e", 0.2))
    fp32 = _doc(_row("a", 0.5), _row("b", 0.3), _row("c", 0.3), _row("d", 0.7, "pass"), _row("e", 0.2000001),
                _row("only-fp32", 1.0))
    out = gpu_check.compare_exact(exact, fp32)
    assert out["verdicts_differ"] == [("d", "fail", "pass")]
    # b moved within its stated error; c beyond it; e moved with no error stated (an fp32 value must not move)
    assert sorted(out["values_outside_stated_error"]) == ["c", "e"]
    assert out["values_moved"] == 3 and out["only_one_side"] == ["only-fp32"] and out["shared"] == 5


def test_a_missing_run_compares_as_empty():
    assert gpu_check.compare_exact(None, None)["shared"] == 0
    assert gpu_check.time_split(None) == {}


def test_time_split_puts_each_probes_tests_and_fp32_work_beside_the_load():
    rows = [{**_row("p-a", 0.1), "probe": "p", "duration_s": 2.0, "fp32_s": 0.5},
            {**_row("p-b", 0.1), "probe": "p", "duration_s": 3.0, "fp32_s": 1.0},
            {**_row("q-a", 0.1), "probe": "q", "duration_s": 10.0},  # an fp32 run's rows have no fp32_s
            {**_row("r-a", 0.1), "probe": "r", "duration_s": None}]  # a row written before its test ended
    doc = {"run": {"model_load_s": 20.0, "precision": {"setup_seconds": {"calibration": 3.0}, "fp32_seconds": 1.5}},
           "results": rows}
    out = gpu_check.time_split(doc, wall_s=40.0)
    assert out["per_probe"] == {"q": {"rows": 1, "seconds": 10.0, "fp32_s": 0.0},
                                "p": {"rows": 2, "seconds": 5.0, "fp32_s": 1.5},
                                "r": {"rows": 1, "seconds": 0.0, "fp32_s": 0.0}}
    assert list(out["per_probe"]) == ["q", "p", "r"]  # slowest first
    assert (out["tests_s"], out["model_load_s"], out["other_s"]) == (15.0, 20.0, 5.0)
    assert out["precision_setup_s"] == {"calibration": 3.0} and out["fp32_work_s"] == 1.5


def test_a_warm_run_after_an_unfinished_cold_one_reruns_only_what_it_finished():
    cmd = ["python", "-m", "pytest", "audits", "-q", "-k", "x"]
    finished = [{**_row("a", 0.1), "nodeid": "audits/test_d.py::test_d[a]"},
                {**_row("b", 0.1), "nodeid": "audits/test_d.py::test_d[b]"}]
    cut = {"run": {"complete": False}, "results": finished}
    assert gpu_check.only_finished(cmd, cut) == (["python", "-m", "pytest", "audits/test_d.py::test_d[a]",
                                                  "audits/test_d.py::test_d[b]", "-q", "-k", "x"], 2)
    assert gpu_check.only_finished(cmd, {**cut, "run": {"complete": True}}) == (cmd, 0)
    assert gpu_check.only_finished(cmd, None) == (cmd, 0)


@pytest.mark.parametrize("stages, said", [(["generate"], set()), (["tests", "generate"], {"tests"}),
                                          (["tests", "precision"], {"tests", "precision"})])
def test_out_of_time_only_the_stages_asked_for_are_said_skipped(tmp_path, stages, said):
    import argparse

    chk = gpu_check.Check(tmp_path / "out", tmp_path / "work", budget=10)  # under the 60 s the side stages need
    assert gpu_check.stage_side_by_side(chk, argparse.Namespace(stages=stages, small="small", side_limit=240)) == []
    assert set(chk.results) == said
    assert all("s left" in value["skipped"] for value in chk.results.values())
