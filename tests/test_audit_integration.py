"""The repository's own disclosure audit, run through pytester on real models.

Fast: the tiny random model, offline probes only. Slow: the packaged SmolLM2-135M.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bias_core.suites import DISCLOSURE_METRICS

from harness import bias_core_cache_dir, last_run, load_tiny, results, rows_by_id, usable_device
from tolerances import assert_close, assert_same_verdicts, disclosure_atol, disclosure_eta

pytest_plugins = ["pytester"]

# Read before pytester points HOME at its temporary folder.
CACHE_ROOT = bias_core_cache_dir()


def check_same_disclosure(rows: dict, others: dict, eta: float) -> None:
    """Two runs of disclosure probes: GAS identical (greedy text), GLD/ADD within the fp32 bound,
    the same verdicts unless one rests on an interval within the bound of its limit."""
    assert rows.keys() == others.keys()
    for key, row in rows.items():
        other, metric = others[key], row["metric"]
        if metric == "GAS":
            assert (row["value"], row["ci_low"], row["ci_high"], row["n"]) == (
                other["value"], other["ci_low"], other["ci_high"], other["n"]), key
        else:
            assert row["n"] == other["n"], key
            assert_close([row["value"], row["ci_low"], row["ci_high"]], [other["value"], other["ci_low"], other["ci_high"]],
                         disclosure_atol(metric, eta), kind=key)
    assert_same_verdicts(rows, others, lambda row: disclosure_atol(row["metric"], eta))


def _values(doc) -> dict:
    return {r["test_id"]: (r["value"], r["ci_low"], r["ci_high"], r["n"]) for r in doc["results"] if r["value"] is not None}


@pytest.mark.slow_on_cpu
def test_tiny_model_audit_runs_caches_and_skips_missing_data(audit_project, tiny_model_dir, tmp_path, device):
    cache = tmp_path / "cache"
    args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(cache),
            "--device", device, "-k", "natural or none", "-rs"]
    first = audit_project.runpytest_subprocess(*args)
    outcomes = first.parseoutcomes()
    # natural-default runs offline (every disclosure metric); natural-stsb/snli have no data:
    # skipped, with the reason; the two mitigation placeholders skip ("no --mitigation given")
    # and report no row.
    assert outcomes.get("skipped") == 2 * len(DISCLOSURE_METRICS) + 2, first.stdout.str()
    first.stdout.fnmatch_lines(["*no --mitigation given*"])
    first.stdout.fnmatch_lines(["*probe natural-stsb not available*--data-dir*"])
    first.stdout.fnmatch_lines(["bias-core: model loaded in * s*"])  # the load timed apart from the tests
    doc1 = results(last_run(audit_project.path / "reports"))
    assert doc1["run"]["complete"] is True and doc1["run"]["model_load_s"] > 0
    rows = {r["test_id"]: r for r in doc1["results"]}
    assert not [t for t in rows if "None" in t], "placeholders are not audit results"
    assert rows["natural-default-GAS"]["n"] == 150
    # Every audit test says where its numbers were computed (JUnit properties).
    run = last_run(audit_project.path / "reports")
    case = next(c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if "natural-default-GAS" in c.get("name"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["device"].startswith(device) and props["dtype"] == doc1["run"]["dtype"]  # the test's = the run's
    assert rows["natural-stsb-GLD"]["verdict"] == "skipped"
    assert doc1["run"]["cache"]["misses"] > 0

    second = audit_project.runpytest_subprocess(*args)
    doc2 = results(last_run(audit_project.path / "reports"))
    assert doc2["run"]["cache"]["misses"] == 0, "a re-run must recompute nothing"
    assert _values(doc2) == _values(doc1)
    assert second.ret == first.ret


@pytest.mark.slow
def test_tiny_model_audit_reads_data_dir(audit_project, tiny_model_dir, tmp_path):
    data = tmp_path / "data" / "Debias-LLMs"
    data.mkdir(parents=True)
    # The published file's name and row count (364), other content: audited as given, with a
    # warning that it is not the published copy (a cut copy would be refused).
    lines = ['is playing a harp', '"is cutting, slowly, an onion"', 'is riding a horse']
    lines += [f"is reading book number {i}" for i in range(364 - len(lines))]
    (data / "stsb_neutral_test.csv").write_text("\n".join(lines) + "\n")
    result = audit_project.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(tmp_path / "c"),
        "--data-dir", str(tmp_path / "data"), "-k", "natural-stsb and GLD", "--sample", "fixed")
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    assert rows["natural-stsb-GLD"]["n"] == 364, result.stdout.str()
    result.stdout.fnmatch_lines(["*stsb_neutral_test.csv: differs from the published*audited as given*"])


@pytest.mark.gpu
def test_cuda_float32_audit_reproduces_cpu(audit_project, tiny_model_dir, tmp_path, pytestconfig):
    """docs/gpu.md: `--dtype float32` on CUDA gives the CPU audit's numbers within 1e-5 relative,
    the same continuations (hence GAS) and the same verdicts."""
    usable_device(pytestconfig, "cuda")
    common = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "-k", "test_disclosure and template"]

    def run(name: str, *extra):
        res = audit_project.runpytest_subprocess(*common, "--cache-dir", str(tmp_path / name), *extra)
        assert res.ret in (0, 1), res.stdout.str()
        return results(last_run(audit_project.path / "reports"))

    cpu = run("cpu", "--device", "cpu")
    cuda = run("cuda", "--device", "cuda", "--dtype", "float32")
    assert cuda["run"]["device"].startswith("cuda") and cuda["run"]["dtype"] == "float32"
    rows = lambda doc: {r["test_id"]: r for r in doc["results"] if r["value"] is not None}  # noqa: E731
    assert len(rows(cpu)) == 4 * len(DISCLOSURE_METRICS)
    check_same_disclosure(rows(cpu), rows(cuda), disclosure_eta(load_tiny(tiny_model_dir)))


@pytest.mark.slow
def test_audit_same_numbers_with_and_without_xdist(audit_project, tiny_model_dir, tmp_path):
    """The whole disclosure family (every metric, a natural and a template probe) in one process
    at batch 32, and under two xdist workers at batch 7. The tiny model: the invariance is the
    engine's and the plugin's, not a model's (SmolLM2-135M took 200 s here for one probe)."""
    # fp32's invariance (exact mode's half-precision values vary more: docs/precision.md)
    probes = ("template-color", "natural-default")
    common = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--device", "cpu",
              "-k", " or ".join(probes), "--precision", "fp32"]

    def run(cache: Path, *extra):
        res = audit_project.runpytest_subprocess(*common, "--cache-dir", str(cache), *extra)  # empty result cache
        assert res.ret in (0, 1), res.stdout.str()
        return results(last_run(audit_project.path / "reports"))

    serial = run(tmp_path / "a", "--batch-size", "32")
    parallel = run(tmp_path / "b", "-n", "2", "--batch-size", "7")
    rows = lambda doc: {r["test_id"]: r for r in doc["results"] if r["value"] is not None}  # noqa: E731
    assert len(rows(serial)) == len(probes) * len(DISCLOSURE_METRICS)  # every metric of both probes
    # Greedy text, hence GAS, is identical. fp32 matmuls of other shapes (batch 32 on two
    # threads vs batch 7 on one thread per worker) round differently in the last bits, so the
    # probability metrics agree within the fp32 bound rather than bitwise.
    check_same_disclosure(rows(serial), rows(parallel), disclosure_eta(load_tiny(tiny_model_dir), probes))


@pytest.mark.slow_on_cpu
def test_tiny_model_mitigation_reaudits_pairs_and_guards(audit_project, tiny_model_dir, tmp_path, device):
    """--mitigation end to end on the tiny model: instruction guiding and a 3-step Debias Tuning
    run re-audit one probe, give paired reductions with p-values, the guards run, the adapter is
    cached for the next run, and the papers' table lands in CSV and HTML."""
    cache = tmp_path / "cache"
    args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(cache),
            "--device", device, "--mitigation", "instruction,debias-tuning", "--mitigation-steps", "3",
            "-k", "(natural-default and GLD) or DA_score_drop or perplexity_rise", "-rs"]
    first = audit_project.runpytest_subprocess(*args)
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    out = first.stdout.str()
    gld_bound = disclosure_atol("GLD", disclosure_eta(load_tiny(tiny_model_dir), ("natural-default",)))
    for variant in ("instruction", "debias-tuning"):
        row = rows[f"{variant}-natural-default-GLD_reduction"]
        assert row["verdict"] in ("pass", "fail", "inconclusive"), out
        assert 0 < row["p_value"] <= 1 and row["n"] == 150
        b = row["breakdown"]
        assert row["value"] == pytest.approx(b["original"] - b["mitigated"], abs=1e-9)
        # the probe scored again for the pairing, in other batches: within the fp32 bound
        assert_close(b["original"], rows["natural-default-GLD"]["value"], gld_bound, kind="original GLD")
    assert rows["debias-tuning-da-gender-DA_score_drop"]["n"] == 2610
    assert "debias-tuning-heldout-neutral-text-perplexity_rise" in rows
    assert not any(k.startswith("instruction-") and "drop" in k for k in rows), "instruction guiding has no guards"
    run = last_run(audit_project.path / "reports")
    table = (run / "mitigation_table.csv").read_text().splitlines()
    assert table[0].split(",")[0] == "variant" and [line.split(",")[0] for line in table[1:]] == [
        "original", "instruction", "debias-tuning"]
    assert "Mitigation results" in (run / "report.html").read_text()
    adapters = list((cache / "adapters").rglob("*.safetensors"))
    assert adapters, "the trained adapter is cached"
    stamp = adapters[0].stat().st_mtime_ns
    audit_project.runpytest_subprocess(*args)
    assert adapters[0].stat().st_mtime_ns == stamp, "the second run reuses the adapter"


@pytest.mark.slow
def test_smollm2_debias_tuning_lowers_gld_on_held_out_prompts(smollm2_lm, audit_project, tmp_path, monkeypatch):
    """The real model, a short Debias Tuning run (20 of the quick configuration's 150 steps, on the
    project's training predicates) against the held-out natural-default prompts: GLD must fall
    with a paired permutation p < 0.01. The full 150-step run is in benchmarks/RESULTS.md (GLD
    0.178 -> 0.018, p at its floor): a fall far beyond what 150 prompts need for p < 0.01."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(CACHE_ROOT / "models")
    # One thread: under xdist the other worker keeps the second core busy.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = audit_project.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "--cache-dir", str(cache), "--mitigation", "debias-tuning",
        "--mitigation-steps", "20", "-k", "natural-default and GLD")
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    row = rows["debias-tuning-natural-default-GLD_reduction"]
    assert row["p_value"] < 0.01 and row["ci_low"] > 0, result.stdout.str()
    assert row["verdict"] == "pass"
    assert row["breakdown"]["mitigated"] < row["breakdown"]["original"]
    assert row["breakdown"]["variant"]["config"]["steps"] == 20
