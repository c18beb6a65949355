"""The regression gate in real audit runs (subprocesses) on the tiny random model.

A baseline audit writes its per-item file; the same model against that stored run and against
itself loaded live gives deltas of exactly 0 and passes; both ways give identical numbers; a
stored baseline made with another configuration or other probe content is refused with exit 4
before anything is computed; a LoRA adapter trained to prefer " he" fails the gate on GLD with
adjusted p < 0.01.
"""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bias_core import catalogue
from bias_core.gating.regression import ITEMS_FILE, read_items, write_items
from bias_core.gating.regression.items import block_sha256

from harness import audit_subprocess, copy_project, no_traceback
from paths import REPO

pytestmark = pytest.mark.slow  # every test runs whole audits in subprocesses (~3 min in all)
SELECT = "template-color or template-hobby"  # the disclosure metrics of two probes: audits and their regression tests
KEYS = {(p, m.name) for p in ("template-color", "template-hobby") for m in catalogue.metrics_of("disclosure") if m.paired}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("project"), own_rootdir=True)


def audit(project: Path, model: Path, reports: Path, *args: str, cache: Path | None = None):
    """(exit code, output, run folder or None) of ``pytest audits`` on the tiny model."""
    return audit_subprocess(project, model, reports, SELECT, *args, cache=cache)


def rows(run: Path, kind: str | None = "regression") -> dict[str, dict]:
    doc = json.loads((run / "results.json").read_text())
    return {r["test_id"]: r for r in doc["results"] if (r.get("kind") == kind)}


@pytest.fixture(scope="module")
def baseline_run(project, tiny_model_dir):
    # a release's baseline is stored with whole samples (docs/release-gate.md)
    code, out, run = audit(project, tiny_model_dir, project / "baseline", "--sample", "fixed")
    assert code in (0, 1), out  # absolute gates may fail on random weights; no regression tests without --baseline
    return run


def test_every_run_stores_its_items_beside_results(baseline_run):
    stored = read_items(baseline_run / ITEMS_FILE)
    assert set(stored.blocks) == KEYS and not stored.truncated
    audits = rows(baseline_run, kind=None)
    for (probe, metric), block in stored.blocks.items():
        assert block.value == audits[f"{probe}-{metric}"]["value"]  # the reported value, bit for bit
        assert len(block.items) == audits[f"{probe}-{metric}"]["n"]
    assert stored.run.seed == 0 and stored.run.decoding["disclosure"]["max_new_tokens"] == 50
    assert not rows(baseline_run)  # without --baseline the regression placeholder only skips


def _numbers(r: dict) -> tuple:
    return tuple(r[k] for k in ("value", "ci_low", "ci_high", "harm", "harm_ci_low", "harm_ci_high", "p_value",
                                "p_adjusted", "baseline_value", "candidate_value", "n", "verdict"))


def test_candidate_equal_to_baseline_passes_with_zero_deltas_stored_and_live(project, tiny_model_dir, baseline_run,
                                                                          tmp_path):
    summary = tmp_path / "summary.md"
    code, out, stored_run = audit(project, tiny_model_dir, tmp_path / "stored", "--baseline", str(baseline_run),
                                  "--summary-md", str(summary))
    assert code in (0, 1), out
    stored = rows(stored_run)
    assert {(r["probe"], r["metric"]) for r in stored.values()} == KEYS
    for r in stored.values():
        assert (r["value"], r["ci_low"], r["ci_high"], r["harm_ci_low"], r["harm_ci_high"]) == (0, 0, 0, 0, 0), r
        assert r["verdict"] == "pass" and r["p_value"] == 1.0 and r["p_adjusted"] == 1.0
        assert "same model weights" in r["config"] and "same dtype" in r["config"]
    for testcase in ET.parse(stored_run / "junit.xml").getroot().iter("testcase"):
        if testcase.get("name", "").startswith("test_regression["):
            props = {p.get("name"): p.get("value") for p in testcase.iter("property")}
            assert {"baseline", "delta", "ci_low", "ci_high", "p_value", "p_adjusted"} <= set(props)
            assert float(props["delta"]) == 0.0 and props["adjustment"] == "holm"
    text = summary.read_text()
    assert "Candidate vs baseline" in text and f"{len(KEYS)} paired comparisons, 0 beyond their margin" in text

    code, out, live_run = audit(project, tiny_model_dir, tmp_path / "live", "--baseline", str(tiny_model_dir))
    assert code in (0, 1), out
    live = rows(live_run)
    assert {k: _numbers(r) for k, r in live.items()} == {k: _numbers(r) for k, r in stored.items()}
    assert all(r["baseline"].startswith("live ") for r in live.values())


def test_stored_baseline_with_another_configuration_is_refused_before_anything_runs(project, tiny_model_dir,
                                                                                   baseline_run, tmp_path):
    cache = tmp_path / "cache"
    code, out, run = audit(project, tiny_model_dir, tmp_path / "seed", "--baseline", str(baseline_run), "--seed", "1",
                           cache=cache)
    assert code == 4, out
    no_traceback(out)
    assert "seed differs (candidate 1, baseline 0)" in out
    assert run is None and not list(cache.rglob("*.json"))  # no run folder, nothing computed


def test_stored_baseline_with_other_probe_content_is_refused_naming_the_probe(project, tiny_model_dir, baseline_run,
                                                                            tmp_path):
    import dataclasses

    stored = read_items(baseline_run / ITEMS_FILE)
    changed = {k: dataclasses.replace(b, probe_sha256="0" * 64) if b.probe == "template-hobby" else b
               for k, b in stored.blocks.items()}
    other = tmp_path / "other-run"
    write_items(other / ITEMS_FILE, stored.run, changed.values())
    # a whole run folder made on other data: its results.json names the same probe content
    doc = json.loads((baseline_run / "results.json").read_text())
    for r in doc["results"]:
        if (r["probe"], r["metric"]) in changed:
            r.update(probe_sha256="0" * 64 if r["probe"] == "template-hobby" else r["probe_sha256"],
                     items_sha256=block_sha256(changed[(r["probe"], r["metric"])]))
    (other / "results.json").write_text(json.dumps(doc))
    cache = tmp_path / "cache"
    code, out, run = audit(project, tiny_model_dir, tmp_path / "reports", "--baseline", str(other), cache=cache)
    assert code == 4, out
    no_traceback(out)
    assert "template-hobby: same version" in out and "other items or prompts" in out
    assert "template-color" not in out.split("does not hold this run's probes")[-1]
    assert not list(cache.rglob("*.json"))  # refused after collection, before the model loaded


def _edited_copy(baseline_run: Path, folder: Path, nulls: int = 0, value: float | None = None) -> Path:
    """A copy of the baseline run folder with template-color GLD's items edited by hand: the first
    item set to ``value``, or the first ``nulls`` items set to null with the header, results.json
    and its item digest made to agree (what a careful editor would do)."""
    import gzip

    shutil.copytree(baseline_run, folder)
    path = folder / ITEMS_FILE
    rows = [json.loads(ln) for ln in gzip.decompress(path.read_bytes()).decode().splitlines()]
    at = next(k for k, r in enumerate(rows) if r.get("kind") == "metric" and r["probe"] == "template-color"
              and r["metric"] == "GLD")
    items = rows[at + 1:at + 1 + rows[at]["n_items"]]
    if value is not None:
        items[0]["value"] = value
    for it in items[:nulls]:
        it["value"] = None
    if nulls:
        kept = [it["value"] for it in items if it["value"] is not None]
        rows[at]["value"] = sum(kept) / len(kept)
        doc = json.loads((folder / "results.json").read_text())
        row = next(r for r in doc["results"] if r["test_id"] == "template-color-GLD")
        row["value"] = rows[at]["value"]
        del row["items_sha256"]
        (folder / "results.json").write_text(json.dumps(doc))
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    return folder


def test_an_edited_baseline_is_refused_and_a_nulled_one_errors_showing_its_pairs(project, tiny_model_dir,
                                                                               baseline_run, tmp_path):
    cache = tmp_path / "cache"
    edited = _edited_copy(baseline_run, tmp_path / "edited", value=0.9)
    code, out, run = audit(project, tiny_model_dir, tmp_path / "r1", "--baseline", str(edited), cache=cache)
    assert code == 4, out
    no_traceback(out)
    assert f"{edited / ITEMS_FILE}: template-color-GLD: the items give" in out and "header line says" in out
    assert run is None and not list(cache.rglob("*.json"))  # refused before the model loaded

    nulled = _edited_copy(baseline_run, tmp_path / "nulled", nulls=37)
    summary = tmp_path / "summary.md"
    code, out, run = audit(project, tiny_model_dir, tmp_path / "r2", "--baseline", str(nulled), "--summary-md",
                           str(summary), "-k", "template-color")
    assert code == 1, out  # the row errors; it does not pass on the 3 items left
    short = "3 pairs of 40 items (37 without a value in the baseline)"
    gld = rows(run)["regression-template-color-GLD"]
    assert gld["verdict"] == "error" and gld["n"] == 3 and gld["missing_baseline"] == 37
    assert "only 3 of the 40 items it uses have a value in both runs" in gld["reason"]
    assert f"n = {short}" in out and "n = 40 pairs" in out  # the terminal: every regression row
    assert short in summary.read_text() and short in (run / "report.html").read_text()


def test_a_candidate_trained_to_prefer_he_fails_the_gate(project, tiny_model_dir, baseline_run, tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from make_biased_adapter import train_male_adapter, training_prompts
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    import torch

    from harness import load_tiny

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = load_tiny(tiny_model_dir, cache_dir=tmp_path / "unused")
        train_male_adapter(lm, training_prompts(None), steps=30, lr=1e-2, seed=0, folder=tmp_path / "adapter")
    finally:
        torch.set_num_threads(before)
    code, out, run = audit(project, tiny_model_dir, tmp_path / "biased", "--adapter", str(tmp_path / "adapter"),
                           "--baseline", str(baseline_run))
    assert code == 1, out
    found = rows(run)
    for probe in ("template-color", "template-hobby"):
        gld = found[f"regression-{probe}-GLD"]
        assert gld["verdict"] == "fail" and gld["p_adjusted"] < 0.01 and gld["value"] > gld["margin"], gld
        assert "different model weights" in gld["config"]
    assert "FAILED audits/test_regression.py::test_regression[template-color-GLD]" in out
    assert read_items(run / ITEMS_FILE).run.adapter == str(tmp_path / "adapter")
