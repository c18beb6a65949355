"""Fault injection: audit runs stopped by SIGINT, SIGTERM and SIGKILL at known points, then resumed.

One cache takes a fixed sequence of interruptions. Each run delivers its own signal at a known
point (tests/fault_points.py): at the start of a test, right after a cache entry is stored (a
call's entries then stand on disk in part), or in the middle of an entry's write. No sleep
decides where a signal lands, so every run is interrupted exactly where the plan says, on any
machine at any speed. Every interrupted run must leave a readable report marked partial, no
cache entry may be corrupt, and the run that finally completes on that cache must give numbers
bit for bit equal to an uninterrupted run on a fresh cache. The tiny random model keeps each
run short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import copy_project, only_run
from paths import REPO, TESTS

SELECT = "template and (GLD or ADD or GAS)"
RESULTS = 12
# (signal, point, n). The reference run stores well over a hundred cache entries, and each run
# below stores only a few before it stops, so every point is reached while work is left.
PLAN = (("SIGINT", "put", 7), ("SIGKILL", "write", 5), ("SIGTERM", "test", 3), ("SIGKILL", "put", 40),
        ("SIGINT", "test", 1))
RUN_DEADLINE_S = 900


@pytest.fixture
def project(tmp_path):
    return copy_project(tmp_path / "project", own_rootdir=True)


def _run(project: Path, model: Path, cache: Path, reports: Path, fault: str = "") -> tuple[int, str]:
    """One audit run to its end; (exit code, the tail of its output)."""
    env = {**os.environ, "BIAS_CORE_OFFLINE": "1", "OMP_NUM_THREADS": "1", "BIAS_CORE_TEST_FAULT": fault,
           "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-p", "fault_points", "--model", str(model), "--cache-dir", str(cache), "--report-dir", str(reports),
           "-k", SELECT]
    try:
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=RUN_DEADLINE_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the audit run with fault {fault!r} did not end within {RUN_DEADLINE_S} s") from exc
    return proc.returncode, (proc.stdout + proc.stderr)[-3000:]


def _values(doc: dict) -> dict:
    return {r["test_id"]: (r["value"], r["ci_low"], r["ci_high"], r["n"], r["verdict"]) for r in doc["results"]}


def _check_partial(reports: Path, how: str, point: str, n: int, code: int, out: str) -> int:
    """The interrupted run's reports all say partial; returns how many results it kept."""
    expected_code = -signal.SIGKILL if how == "SIGKILL" else pytest.ExitCode.INTERRUPTED
    assert code == expected_code, f"{how} at {point} {n}: exit code {code}\n{out}"
    run = only_run(reports)
    doc = json.loads((run / "results.json").read_text())  # always readable
    assert doc["run"]["complete"] is False, (how, point, n, doc["run"])
    if how == "SIGKILL":
        assert "did not finish" in doc["run"]["partial_reason"]
    else:
        assert how in doc["run"]["partial_reason"], doc["run"]["partial_reason"]
        junit = (run / "junit.xml").read_text()
        assert "bias_core.complete" in junit and "partial run" in junit
    assert "PARTIAL" in (run / "report.html").read_text()
    if point == "test":
        assert len(doc["results"]) == n - 1, "stopped at the start of test n: the tests before it reported"
    return len(doc["results"])


@pytest.mark.slow
def test_interrupted_runs_resume_to_the_same_numbers(project, tiny_model_dir, tmp_path):
    code, out = _run(project, tiny_model_dir, tmp_path / "fresh-cache", tmp_path / "reference")
    assert code in (0, 1), out
    reference = json.loads((only_run(tmp_path / "reference") / "results.json").read_text())
    assert reference["run"]["complete"] is True and len(reference["results"]) == RESULTS
    stored = len(list((tmp_path / "fresh-cache" / "entries").rglob("*.json")))
    assert stored > 100, f"the plan's points assume a run stores over 100 entries; this one stored {stored}"

    cache = tmp_path / "cache"
    for k, (how, point, n) in enumerate(PLAN):
        reports = tmp_path / f"interrupted-{k}"
        code, out = _run(project, tiny_model_dir, cache, reports, fault=f"{how} {point} {n}")
        _check_partial(reports, how, point, n, code, out)

    assert list((cache / "entries").rglob("*.tmp")), "the write point leaves a temporary file, as SIGKILL would"
    from bias_core.storage.result_cache import ResultCache

    for entry in (cache / "entries").rglob("*.json"):  # no half-written entry under an entry's name
        doc = json.loads(entry.read_text())
        assert ResultCache(cache).get(doc["key"]) is not None, f"{entry} does not prove its key and value"

    code, out = _run(project, tiny_model_dir, cache, tmp_path / "final")
    assert code in (0, 1), out
    resumed = json.loads((only_run(tmp_path / "final") / "results.json").read_text())
    assert resumed["run"]["complete"] is True
    assert _values(resumed) == _values(reference)  # bit for bit: floats compared with ==
