"""--precision exact against fp32 (and lm-evaluation-harness), side by side in one run.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_precision.py [--data-dir ../shared/data]
        [--model smollm2-135m] [--repeats 3] [--parts crows,generation,audit]

- crows: the 262 CrowS-Pairs gender pairs scored by lm-eval's HFLM in fp32 (its own task, as
  check_crows_fidelity.py builds it), by bias_core in fp32 and in exact mode; each repeat runs
  the three in turn (interleaved, so machine load hits all alike). Scoring time only (models
  loaded once before); identical pair decisions against fp32 and against lm-eval.
- generation: greedy, 50 new tokens, 32 prompts of one width at batch 32 (bench_audit.py's
  setting), fp32 vs exact interleaved: new tokens/s and identical continuations.
- audit: the default audit from a cold result cache (converted model reused), fp32 then exact
  (``--audit-side-by-side``: both at once), as two pytest processes; wall and CPU time and
  identical verdicts per test. Offline probes, as
  bench_audit.py measures it (``--audit-with-data`` adds ``--data-dir``).

Prints markdown tables with medians over the repeats and the ratios; the calibration is timed
separately (it runs once per model and is cached).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def load(model: str, precision: str, cache_dir: Path, batch_size: int | None = None):
    from bias_core.models import LoadOptions, load_model, resolve_model

    opts = LoadOptions(cache_dir=cache_dir, use_cache=False, progress=False, precision=precision, batch_size=batch_size)
    return load_model(resolve_model(model), opts)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def bench_crows(model: str, data_dir: Path, repeats: int, fp32, exact, half) -> list[tuple[str, str, str]]:
    from bias_core.probes.crows_pairs import crows_pairs_probe
    from bias_core.runners.preference import run_crows

    from check_crows_fidelity import TASK, crows_csv, model_folder

    probe = crows_pairs_probe(data_dir)
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    manager = TaskManager()
    overrides = {"dataset_path": "csv", "dataset_name": None,
                 "dataset_kwargs": {"data_files": {"test": str(crows_csv(data_dir))}}}
    task = manager._factory.build(manager._entry(TASK), overrides=overrides, registry=manager._index)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    hflm = HFLM(pretrained=str(model_folder(model)), dtype="float32", device="cpu", batch_size=16)
    n = len(probe.items)
    times: dict[str, list[float]] = {"lm-eval fp32": [], "bias_core fp32": [], "bias_core exact": []}
    for _ in range(repeats):
        responses, dt = timed(lambda: hflm.loglikelihood(task.instances, disable_tqdm=True))
        times["lm-eval fp32"].append(dt)
        ref, dt = timed(lambda: run_crows(fp32, probe))
        times["bias_core fp32"].append(dt)
        before = exact.rechecks.snapshot()
        got, dt = timed(lambda: run_crows(exact, probe))
        times["bias_core exact"].append(dt)
    rechecked = exact.rechecks.counts["sentences"][0] - before.get("sentences", [0])[0]
    lm_eval_lls = np.asarray([r[0] for r in responses]).reshape(n, 2)
    lm_eval_dec = lm_eval_lls[:, 0] > lm_eval_lls[:, 1]
    dec = {name: np.asarray([d["score"] for d in r.details]) > 0.5 for name, r in (("fp32", ref), ("exact", got))}
    half_dec = np.asarray([d["score"] for d in run_crows(half, probe).details]) > 0.5
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [(k, f"{med[k]:.2f} s (runs: {', '.join(f'{x:.1f}' for x in v)})", "") for k, v in times.items()]
    rows += [
        ("exact / lm-eval fp32", f"{med['bias_core exact'] / med['lm-eval fp32']:.3f}", "target <= 0.333"),
        ("exact / bias_core fp32", f"{med['bias_core exact'] / med['bias_core fp32']:.3f}", ""),
        ("decisions identical, exact vs fp32", f"{int((dec['exact'] == dec['fp32']).sum())}/{n}", "must be all"),
        ("decisions identical, exact vs lm-eval fp32", f"{int((dec['exact'] == lm_eval_dec).sum())}/{n}", "target all"),
        ("sentences re-scored in fp32 (last run)", f"{rechecked}/{2 * n}", ""),
        ("decisions identical, half vs fp32 (drift)", f"{int((half_dec == dec['fp32']).sum())}/{n}", "half is unchecked"),
    ]
    return rows


def generation_prompts(lm, batch: int) -> list[str]:
    from bias_core.models.engines.hf.causal import GEN_PAD_MULTIPLE, padded_width
    from bias_core.probes.disclosure import load_probe

    prompts = load_probe("natural-default", None).prompts + [
        p for t in ("occupation", "personality", "hobby", "color") for p in load_probe(f"template-{t}", None).prompts]
    by_width: dict[int, list[str]] = {}
    for p in prompts:
        by_width.setdefault(padded_width(len(lm.engine.encode(p)), GEN_PAD_MULTIPLE), []).append(p)
    group = max(by_width.values(), key=len)[:batch]
    assert len(group) == batch, f"need {batch} prompts of one width, found {len(group)}"
    return group


def bench_generation(repeats: int, fp32, exact, batch: int = 32, new: int = 50) -> list[tuple[str, str, str]]:
    from bias_core.models.decoding import DecodingConfig

    prompts = generation_prompts(fp32, batch)
    cfg = DecodingConfig(max_new_tokens=new)
    rates: dict[str, list[float]] = {"fp32": [], "exact": []}
    for lm in (fp32, exact):
        lm.batch_size = batch
        lm.generate(prompts[:4], DecodingConfig(max_new_tokens=4), seed=123)  # warm-up
    outputs = {}
    for _ in range(repeats):
        for name, lm in (("fp32", fp32), ("exact", exact)):
            lm.stats["new_tokens"] = 0
            before = exact.rechecks.snapshot()
            outputs[name], dt = timed(lambda: lm.generate(prompts, cfg))
            rates[name].append(lm.stats["new_tokens"] / dt)
    from bias_core.models.precision.modes import Rechecks

    delta = Rechecks.delta(before, exact.rechecks.snapshot())
    med = {k: statistics.median(v) for k, v in rates.items()}
    same = sum(a == b for a, b in zip(outputs["fp32"], outputs["exact"]))
    return [
        (f"greedy generation fp32, batch {batch}, {new} new tokens", f"{med['fp32']:.0f} new tokens/s",
         "runs: " + ", ".join(f"{x:.0f}" for x in rates["fp32"])),
        ("greedy generation exact, same prompts", f"{med['exact']:.0f} new tokens/s",
         "runs: " + ", ".join(f"{x:.0f}" for x in rates["exact"])),
        ("exact / fp32 new tokens/s", f"{med['exact'] / med['fp32']:.2f}", "target >= 2"),
        ("continuations identical", f"{same}/{batch}", "must be all"),
        ("re-checked in fp32 (last run)", "; ".join(f"{k} {r}/{s}" for k, (r, s) in sorted(delta.items())), ""),
    ]


def start_audit(model: str, data_dir: Path | None, precision: str, cache: Path):
    report = cache / f"reports-{precision}"
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "audits"), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--model", model, "--precision", precision, "--cache-dir", str(cache), "--report-dir", str(report)]
    if data_dir:
        cmd += ["--data-dir", str(data_dir)]
    out = open(cache / "stdout.txt", "w")
    return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True), time.perf_counter()


def finish_audit(proc, started: float, cache: Path, precision: str) -> tuple[float, float, dict[str, str], str]:
    """(wall s, CPU s of the pytest process, verdicts, pytest's last line) once ``proc`` ends."""
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    results = next((cache / f"reports-{precision}").glob("*/results.json"))
    rows = json.loads(results.read_text())["results"]
    lines = [ln for ln in (cache / "stdout.txt").read_text().splitlines() if ln.strip()]
    return dt, usage.ru_utime + usage.ru_stime, {r["test_id"]: r["verdict"] for r in rows}, (lines[-1:] or ["?"])[0]


def bench_audit(model: str, data_dir: Path | None, side_by_side: bool = False) -> list[tuple[str, str, str]]:
    """The two audits one after the other, or with ``side_by_side`` at the same time (on a
    machine whose load changes, both then meet the same load); CPU seconds are reported too,
    as they depend less on what else the machine runs."""
    from bias_core.pytest_plugin.options import default_cache_dir

    rows = []
    out = {}
    caches = {}
    running = {}
    try:
        for precision in ("fp32", "exact"):
            cache = caches[precision] = Path(tempfile.mkdtemp(prefix=f"bias-bench-{precision}-"))
            (default_cache_dir() / "models").mkdir(parents=True, exist_ok=True)  # a fresh machine has none
            (cache / "models").symlink_to(default_cache_dir() / "models")
            if (default_cache_dir() / "hashes").exists():
                (cache / "hashes").symlink_to(default_cache_dir() / "hashes")
            running[precision] = start_audit(model, data_dir, precision, cache)
            if not side_by_side:
                out[precision] = finish_audit(*running.pop(precision), cache, precision)
        for precision, (proc, started) in running.items():
            out[precision] = finish_audit(proc, started, caches[precision], precision)
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    how = "side by side" if side_by_side else "one after the other"
    for precision in ("fp32", "exact"):
        rows.append((f"default audit, {precision}, cold result cache ({how})",
                     f"{out[precision][0]:.0f} s wall, {out[precision][1]:.0f} s CPU", out[precision][3]))
    verdicts = {k: out[k][2] for k in out}
    same = sum(verdicts["exact"].get(t) == v for t, v in verdicts["fp32"].items())
    rows += [("fp32 / exact audit time", f"{out['fp32'][0] / out['exact'][0]:.2f} wall, "
              f"{out['fp32'][1] / out['exact'][1]:.2f} CPU", "target >= 2"),
             ("verdicts identical", f"{same}/{len(verdicts['fp32'])}", "must be all"),
             ("verdicts that differ", ", ".join(f"{t}: {v} vs {verdicts['exact'].get(t)}" for t, v in
                                                verdicts["fp32"].items() if verdicts["exact"].get(t) != v) or "none", "")]
    return rows


class Rows(list):
    """The table's rows, each also printed as it is added (flushed), so a run cut short keeps
    the parts it finished."""

    def __iadd__(self, rows):
        for r in rows:
            print("partial: | " + " | ".join(r) + " |", flush=True)
        return super().__iadd__(rows)


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="crows,generation,audit")
    ap.add_argument("--audit-with-data", action="store_true",
                    help="run the audit part with --data-dir too (default: offline probes, as bench_audit.py)")
    ap.add_argument("--audit-side-by-side", action="store_true",
                    help="run the fp32 and exact audits at the same time, so a changing machine load hits both alike")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    cache = Path(tempfile.mkdtemp(prefix="bias-bench-precision-"))
    try:
        from bias_core.pytest_plugin.options import default_cache_dir

        # converted models are shared with the user's cache (converted once); results are not
        (default_cache_dir() / "models").mkdir(parents=True, exist_ok=True)
        (cache / "models").symlink_to(default_cache_dir() / "models")
        rows = Rows()
        if parts & {"crows", "generation"}:
            fp32, load32 = timed(lambda: load(args.model, "fp32", cache))
            exact, load_exact = timed(lambda: load(args.model, "exact", cache))  # calibrates (cold)
            half = load(args.model, "half", cache)
            rows += [("load fp32", f"{load32:.1f} s", ""),
                     ("load exact, with calibration (once per model, then cached)", f"{load_exact:.1f} s",
                      f"bound: {json.dumps(exact.precision_info()['bound'])}")]
        if "crows" in parts:
            rows += bench_crows(args.model, args.data_dir, args.repeats, fp32, exact, half)
        if "generation" in parts:
            rows += bench_generation(args.repeats, fp32, exact)
        if "audit" in parts:
            rows += bench_audit(args.model, args.data_dir if args.audit_with_data else None, args.audit_side_by_side)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"model {args.model}, load average at the end {load_avg:.1f}")
    print("| measure | figure | note |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
