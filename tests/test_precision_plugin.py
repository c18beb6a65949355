"""--precision in a real audit run (tiny model): the report and JUnit say which mode ran, the
calibrated bound and what was re-checked; exact and fp32 reach the same verdicts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness import only_run

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _fast_bf16():
    from bias_core.models.precision.half import half_dtype

    if half_dtype("cpu")[0] is None:
        pytest.skip("this CPU computes bf16 slowly: exact mode runs fp32 only here")


def _run(pytester, model, cache, precision):
    args = ["audits", "-p", "no:cacheprovider", "--model", str(model), "--cache-dir", str(cache),
            "-k", "natural-default", "--report-dir", str(pytester.path / f"reports-{precision}")]
    if precision:
        args += ["--precision", precision]
    pytester.runpytest_subprocess(*args)
    return only_run(pytester.path / f"reports-{precision}")


@pytest.mark.slow
def test_auto_is_the_default_and_is_fp32_on_cpu(audit_project, tiny_model_dir, tmp_path):
    """Unset, --precision is auto: fp32 on a CPU (exact measured slower there), saying why."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: auto resolves to exact")
    run = _run(audit_project, tiny_model_dir, tmp_path / "cache", "")
    info = json.loads((run / "results.json").read_text())["run"]["precision"]
    assert info["mode"] == "fp32" and "--precision auto chose fp32" in info["note"]
    assert info["note"] in (run / "report.html").read_text()


@pytest.mark.slow
def test_exact_is_reported_and_equals_fp32(audit_project, tiny_model_dir, tmp_path):
    run = _run(audit_project, tiny_model_dir, tmp_path / "cache", "exact")
    doc = json.loads((run / "results.json").read_text())
    info = doc["run"]["precision"]
    assert info["mode"] == "exact" and info["bound"]["safety"] == 2.0 and info["bound"]["margin"] > 0
    assert "decoding_rows" in info["rechecked"]
    assert set(info["setup_seconds"]) == {"half_copy", "calibration"} and info["setup_seconds"]["calibration"] > 0
    rows = {r["test_id"]: r for r in doc["results"]}
    # each test's fp32 work is timed apart, and the tests' shares add up to at most the run's
    assert all(r["fp32_s"] >= 0 for r in rows.values())
    assert rows["natural-default-GAS"]["fp32_s"] > 0  # its flagged rows were re-checked in fp32
    assert sum(r["fp32_s"] for r in rows.values()) <= info["fp32_seconds"] + 1e-3 * len(rows)
    assert rows["natural-default-GAS"]["precision"] == "exact"
    assert rows["natural-default-GAS"]["rechecked"].startswith("decoding_rows")
    assert rows["natural-default-GLD"]["breakdown"]["precision"]["computed_in"] in ("bfloat16", "fp32")
    props = {p.get("name"): p.get("value") for p in ET.parse(run / "junit.xml").iter("property")}
    assert props["precision"] == "exact" and "margin" in props["precision_bound"] and "rechecked" in props
    assert float(props["fp32_s"]) >= 0

    reference = _run(audit_project, tiny_model_dir, tmp_path / "cache32", "fp32")
    ref = {r["test_id"]: r for r in json.loads((reference / "results.json").read_text())["results"]}
    assert {t: r["verdict"] for t, r in ref.items()} == {t: r["verdict"] for t, r in rows.items()}
    assert ref["natural-default-GAS"]["value"] == rows["natural-default-GAS"]["value"]  # same continuations
    assert ref["natural-default-GAS"]["precision"] == "fp32"
