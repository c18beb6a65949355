"""Fault injection: audit runs killed with SIGINT and SIGKILL at random points, then resumed.

A seeded sequence of interruptions hits one cache; every interrupted run must leave a readable
report marked partial, no cache entry may be corrupt, and the run that finally completes on that
cache must give numbers bit for bit equal to an uninterrupted run on a fresh cache. The tiny
random model keeps each run short.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SELECT = "template and (GLD or ADD or GAS)"
SEED = 10
KILLS = ("SIGINT", "SIGKILL", "SIGINT", "SIGKILL")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(REPO / "audits", root / "audits")
    shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    (root / "pytest.ini").write_text("[pytest]\n")  # anchors the rootdir (reports/ go here)
    return root


def _start(project: Path, model: Path, cache: Path, reports: Path) -> subprocess.Popen:
    env = {**os.environ, "BIAS_CORE_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--model", str(model), "--cache-dir", str(cache), "--report-dir", str(reports), "-k", SELECT]
    return subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _run_folder(reports: Path) -> Path | None:
    runs = sorted(reports.iterdir()) if reports.is_dir() else []
    return runs[-1] if runs else None


def _values(doc: dict) -> dict:
    return {r["test_id"]: (r["value"], r["ci_low"], r["ci_high"], r["n"], r["verdict"]) for r in doc["results"]}


def _interrupt(proc: subprocess.Popen, reports: Path, how: str, after: int, delay: float) -> str:
    """Wait until the run has recorded ``after`` results, let it go on for ``delay`` seconds (into
    the next test's computation), then send the signal. Returns "interrupted" or "finished"."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        run = _run_folder(reports)
        try:
            if run is not None and len(json.loads((run / "results.json").read_text())["results"]) >= after:
                break
        except (OSError, ValueError):  # not written yet
            pass
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is not None:
        return "finished"
    os.kill(proc.pid, getattr(signal, how))
    proc.wait(timeout=600)
    return "interrupted"


def test_interrupted_runs_resume_to_the_same_numbers(project, tiny_model_dir, tmp_path):
    reference_reports = tmp_path / "reference"
    ref = _start(project, tiny_model_dir, tmp_path / "fresh-cache", reference_reports)
    assert ref.wait(timeout=900) in (0, 1)
    reference = json.loads((_run_folder(reference_reports) / "results.json").read_text())
    assert reference["run"]["complete"] is True and len(reference["results"]) == 12

    rng = random.Random(SEED)
    cache = tmp_path / "cache"
    outcomes = []
    # The seeded kills, then (when runs served from the filled cache outpaced them) up to 4
    # immediate kills right after the first result, so that at least two runs are interrupted
    # whatever the machine's speed.
    plan = [(how, rng.randrange(12), rng.uniform(0.0, 1.0)) for how in KILLS]
    plan += [("SIGKILL", 0, 0.0), ("SIGINT", 0, 0.0)] * 2
    for k, (how, after, delay) in enumerate(plan):
        if k >= len(KILLS) and outcomes.count("interrupted") >= 2:
            break
        reports = tmp_path / f"interrupted-{k}"
        proc = _start(project, tiny_model_dir, cache, reports)
        outcome = _interrupt(proc, reports, how, after=after, delay=delay)
        outcomes.append(outcome)
        doc = json.loads((_run_folder(reports) / "results.json").read_text())  # always readable
        if outcome == "interrupted" and doc["run"]["complete"] is True:
            # killed after its last result was recorded (during teardown): a finished run
            assert len(doc["results"]) == 12, doc["run"]
            outcome = outcomes[-1] = "finished"
        if outcome == "interrupted":
            assert doc["run"]["complete"] is False, (how, doc["run"])
            if how == "SIGINT":
                assert "SIGINT" in doc["run"]["partial_reason"]
                junit = (_run_folder(reports) / "junit.xml").read_text()
                assert "bias_core.complete" in junit and "partial run" in junit
            else:
                assert "did not finish" in doc["run"]["partial_reason"]
            assert "PARTIAL" in (_run_folder(reports) / "report.html").read_text()
        else:
            assert doc["run"]["complete"] is True
    assert outcomes.count("interrupted") >= 2, outcomes

    for entry in (cache / "entries").rglob("*.json"):  # no half-written entry
        doc = json.loads(entry.read_text())
        assert set(doc) >= {"key", "value"}

    final_reports = tmp_path / "final"
    final = _start(project, tiny_model_dir, cache, final_reports)
    assert final.wait(timeout=900) in (0, 1)
    resumed = json.loads((_run_folder(final_reports) / "results.json").read_text())
    assert resumed["run"]["complete"] is True
    assert _values(resumed) == _values(reference)  # bit for bit: floats compared with ==
