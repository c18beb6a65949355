"""benchmarks/gpu_check.py's comparisons, on hand-made rows: what it reports from a GPU lease is
only as good as these (exact against fp32: verdicts and each value within the error its row
states; CUDA fp32 against the CPU: relative differences against 1e-5)."""

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


def test_cuda_fp32_against_the_cpu_uses_relative_differences():
    cpu = _doc(_row("a", 100.0), _row("b", 1e-3), _row("c", 2.0, n=9), _row("d", 1.0, "fail"))
    cuda = _doc(_row("a", 100.0005), _row("b", 1.00002e-3), _row("c", 2.0), _row("d", 1.0))
    out = gpu_check.compare_devices(cuda, cpu)
    assert set(out["over_1e-5"]) == {"b"}  # 2e-5 relative; a is 5e-6 relative though 5e-4 absolute
    assert out["n_differ"] == ["c"] and out["verdicts_differ"] == ["d"]
    assert out["max_rel_diff"] == pytest.approx(2e-5, rel=1e-3)


def test_a_missing_run_compares_as_empty():
    assert gpu_check.compare_devices(None, _doc(_row("a", 1.0)))["missing_on_cuda"] == ["a"]
    assert gpu_check.compare_exact(None, None)["shared"] == 0


@pytest.mark.parametrize("stages, said", [(["generate"], set()), (["tests", "generate"], {"tests"}),
                                          (["tests", "precision"], {"tests", "precision"})])
def test_out_of_time_only_the_stages_asked_for_are_said_skipped(tmp_path, stages, said):
    import argparse

    chk = gpu_check.Check(tmp_path / "out", tmp_path / "work", budget=10)  # under the 60 s the side stages need
    gpu_check.stage_side_by_side(chk, argparse.Namespace(stages=stages, small="small", side_limit=240))
    assert set(chk.results) == said
    assert all("s left" in value["skipped"] for value in chk.results.values())
