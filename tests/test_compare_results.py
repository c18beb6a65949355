"""benchmarks/compare_results.py on small hand-written results files."""

from __future__ import annotations

import json
from pathlib import Path

from harness import script_module

compare_results = script_module("benchmarks/compare_results.py")

ROW = {"test_id": "template-color-GLD", "value": 0.25, "ci_low": 0.2, "ci_high": 0.3, "n": 40, "verdict": "pass",
       "p_value": 0.2, "model": "m", "duration_s": 1.0}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps({"run": {"run_id": path.stem}, "results": rows}), encoding="utf-8")
    return path


def test_identical_runs_agree(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [ROW, {**ROW, "test_id": "x-GAS", "value": None, "ci_low": None, "ci_high": None}])
    b = _write(tmp_path / "b.json", [{**ROW, "duration_s": 9.0, "model": "other"},  # not compared
                                     {**ROW, "test_id": "x-GAS", "value": None, "ci_low": None, "ci_high": None}])
    assert compare_results.main([str(a), str(b)]) == 0
    assert "0 difference(s); 2 test(s) in both" in capsys.readouterr().out


def test_each_compared_field_is_a_difference(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [ROW])
    for field, other in (("value", 0.2500001), ("ci_low", 0.19), ("ci_high", 0.31), ("n", 41), ("verdict", "fail"),
                         ("p_value", 0.1), ("p_value", None)):
        b = _write(tmp_path / "b.json", [{**ROW, field: other}])
        assert compare_results.main([str(a), str(b)]) == 1
        assert f"template-color-GLD: {field} {ROW[field]!r} != {other!r}" in capsys.readouterr().out


def test_missing_tests_and_tolerance(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [ROW, {**ROW, "test_id": "only-a"}])
    b = _write(tmp_path / "b.json", [{**ROW, "value": 0.25 * (1 + 1e-12)}, {**ROW, "test_id": "only-b"}])
    assert compare_results.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "only-a: only in A" in out and "only-b: only in B" in out and "value" in out
    assert compare_results.differences(compare_results.load_rows(a), compare_results.load_rows(b), rel_tol=1e-9) == [
        "only-a: only in A", "only-b: only in B"]


def test_repeated_test_ids_are_compared_in_order(tmp_path):
    a = _write(tmp_path / "a.json", [ROW, {**ROW, "value": 0.5}])
    b = _write(tmp_path / "b.json", [ROW, {**ROW, "value": 0.6}])
    assert compare_results.differences(compare_results.load_rows(a), compare_results.load_rows(b)) == [
        "template-color-GLD #2: value 0.5 != 0.6"]


def test_unreadable_file_is_status_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert compare_results.main([str(bad), str(bad)]) == 2
