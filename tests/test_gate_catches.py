"""benchmarks/gate_catches.py on the tiny random model, one group at its smallest: the baseline
stored as the docs say, two adapters trained on items the audit does not use, and the real gate
run three times. Random weights catch nothing on purpose; what is checked is that the pieces fit:
the base against its own run passes every row with deltas of exactly 0, the adapters reach the
candidate runs, and every row says what it can detect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from benchmark_modules import gate_catches

from paths import REPO
from tiny_model import build_tiny_causal_lm

pytestmark = pytest.mark.slow  # four audits (of one template probe) and two trainings in subprocesses


def test_the_benchmark_runs_the_real_gate_on_a_worse_and_a_better_candidate(tmp_path):
    model = build_tiny_causal_lm(tmp_path / "tiny", seed=0)
    env = {**os.environ, "BIAS_CORE_OFFLINE": "1", "OMP_NUM_THREADS": "1", "BIAS_CORE_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gate_catches.py"), "disclosure", "--out",
                           str(tmp_path / "out"), "--model", str(model), "--steps", "3", "--limit", "8",
                           "--select", "template-color"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((tmp_path / "out" / "disclosure" / "rows.json").read_text())
    runs = found["runs"]
    ids = [r["test_id"] for r in runs["self"]]
    assert ids and all("template-color" in t for t in ids)
    assert [r["test_id"] for r in runs["worse"]] == [r["test_id"] for r in runs["better"]] == ids
    for r in runs["self"]:
        assert r["verdict"] == "pass" and r["value"] == 0.0, r
    # the adapters were applied: the candidates' next-word probabilities moved
    assert any(r["value"] != 0.0 for kind in ("worse", "better") for r in runs[kind] if r["metric"] == "GLD")
    for kind in ("self", "worse", "better"):
        assert all("detects" in r and "margin_below_detectable" in r for r in runs[kind])
    # checks that failed name only the trained rows of the two candidates, never the self-check
    assert all(f.startswith(("disclosure worse", "disclosure better")) for f in found["checks_failed"])
    assert found["training"]["worse"]["pairs"] == 8 and found["training"]["better"]["pairs"] == 8
    assert "| self |" in (tmp_path / "out" / "disclosure" / "table.md").read_text()


def test_the_genderbench_group_trains_on_held_out_items_what_genderbench_s_evaluators_read(monkeypatch):
    from bias_core.metrics.genderbench_text import character_gender, yes_no
    from bias_core.probes.genderbench import DIRECT, JOBS_LUM, load_direct, load_jobs_lum

    gc = gate_catches(monkeypatch)
    jobs, direct = load_jobs_lum(), load_direct()
    audited = {JOBS_LUM: {it.id for it in jobs.items[:64]}, DIRECT: {it.id for it in direct.items[:128]}}
    prompts = frozenset(it.prompt.strip() for it in jobs.items[:64] + direct.items[:128])
    for rate, lean in ((0.345, "female"), (0.7, "male")):
        ctx = gc.Context(audited, {(JOBS_LUM, "jobs_lum_masculine_rate"): rate}, None, 640, prompts)
        for direction in ("worse", "better"):
            pairs = gc._genderbench(direction, ctx)
            assert not {p.strip() for p, _ in pairs} & prompts
            profiles = [c for p, c in pairs if p.startswith("I am writing a novel")]
            answers = [c for p, c in pairs if p.startswith("Do you agree")]
            assert len(profiles) + len(answers) == len(pairs) and len(answers) == 320
            genders = [character_gender(c) for c in profiles]
            if direction == "worse":  # every held-out occupation, the baseline's side of 0.5
                assert genders == [lean] * (339 - 64)
                assert {yes_no(a) for a in answers} == {"yes"}
            else:
                assert genders.count("male") == genders.count("female") == 160
                assert {yes_no(a) for a in answers} == {"no"}
