"""The GPU check of issue 34: one prepared call that fits a short GPU lease and reports as it goes.

    benchmarks/gpu_check.sh [--budget 450] [--stages ...]   # on the GPU machine ($OUT set)
    benchmarks/gpu_check.sh --tiny                          # CPU, tiny model: checks this script

Random-weight models built from a config (bench_gpu.py: SmolLM2-135M's shape and Llama-2-7B's,
bf16, the SmolLM2 tokenizer); they say nothing about bias, only that each path runs on the device,
gives the numbers it must, and how fast. Stages, in priority order, each recording its figures in
``$OUT/results.json`` before the next starts (a lease that ends mid-way still returns them):

1. ``tests``: the CUDA cases of the device-parametrized tests and the CUDA-only tests
   (``pytest tests -m gpu``), not the whole fast tier;
2. ``precision``: the default audit on the SmolLM2-shaped model in ``--precision exact`` (the
   CUDA default) and in fp32 on the GPU, side by side: every verdict equal, each value within the
   error its row states; and ``--dtype float32`` on the CPU over a subset of probes
   (``CPU_SUBSET``), every shared row within 1e-5 relative of the CUDA fp32 run;
3. ``audit7b``: the default audit on the 7B-shaped model from a cold result cache (model load
   included) and again warm;
4. ``generate``: bias-core's decoding against plain ``generate`` at batch 160 (bench_gpu.py);
5. ``qlora``: Debias Tuning with ``--load-in-4bit`` for a few steps, and its re-audit.

Stage 1, the two GPU audits of stage 2 and its CPU audit run side by side (the machine has 16
cores; the tests use tiny models). A stage that cannot finish before ``--budget`` seconds are up
is skipped, saying so; a stage past its own deadline gets SIGINT (pytest then writes its partial
results) and its rows so far are kept. Back in ``$OUT``: results.json, check.log and logs.tar.gz
(every stage's output and each audit's results.json), so a second call can run the rest.

A 15-minute lease (the first one, 2026-11-27, benchmarks/RESULTS.md): the machine starts in
about a minute; a second call made within 30 s of the first's end finds it warm, with the
models and caches of ``benchmarks/.gpu-work`` still there. What the next lease should run,
from what the first one left open:

    benchmarks/gpu_check.sh --budget 420 --stages tests,precision,audit7b --big-precision fp32
    benchmarks/gpu_check.sh --budget 240 --stages generate,audit7b --gen-alloc-conf expandable_segments:True

(the tests fixed since; exact against fp32 with GenderPair reached; the 7B audit's load and fp32
time apart from exact's re-checks; generation with the allocator's counters, a profile, and each of
our batches decoded by our loop and by plain generate on the same rows).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu  # noqa: E402  (the models and the generation benchmark)

# The CPU half of "fp32 on CUDA = fp32 on CPU": probes of every kind of work (greedy decoding with
# GLD/ADD, pairwise scoring, sentence embeddings, sentiment templates), small enough for the CPU.
CPU_SUBSET = "template-color or occupation-pronouns or crows-pairs-gender or sentiment-templates or seat-v1"
FP32_REL_TOL = 1e-5
NUMBERS = ("value", "ci_low", "ci_high")


class Check:
    def __init__(self, out: Path, work: Path, budget: float):
        self.out, self.work = out, work
        self.t0 = time.monotonic()
        self.deadline = self.t0 + budget
        self.results: dict = {}
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, msg: str) -> None:
        line = f"[gpu_check {time.monotonic() - self.t0:6.0f} s] {msg}"
        print(line, flush=True)
        with (self.out / "check.log").open("a") as fh:
            fh.write(line + "\n")

    def record(self, key: str, value) -> None:
        self.results[key] = value
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1, default=str))
        with tarfile.open(self.out / "logs.tar.gz", "w:gz") as tar:
            tar.add(self.logs, arcname="logs")
        self.say(f"{key}: {json.dumps(value, default=str)[:600]}")


class Job:
    """A subprocess with its own deadline; past it, SIGINT (pytest writes its partial results)."""

    def __init__(self, name: str, cmd: list[str], log: Path, limit: float, env: dict | None = None):
        self.name, self.cmd, self.log, self.limit = name, cmd, log, limit
        self.fh = log.open("w")
        self.fh.write(" ".join(cmd) + "\n\n")
        self.fh.flush()
        self.t = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.fh, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        self.timed_out = False

    def wait(self) -> dict:
        try:
            code = self.proc.wait(timeout=max(1.0, self.t + self.limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                code = self.proc.wait()
        self.fh.close()
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        summary = next((ln for ln in reversed(lines) if " passed" in ln or " failed" in ln or " error" in ln
                        or " skipped" in ln), lines[-1] if lines else "?")
        return {"seconds": round(time.monotonic() - self.t, 1), "exit_code": code, "timed_out": self.timed_out,
                "limit_s": round(self.limit), "summary": summary.strip()[:300]}


def audit_cmd(model: Path, device: str, cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "--model", str(model),
            "--device", device, "--cache-dir", str(cache), "--report-dir", str(cache / "reports"), "-rs", *extra]


def audit_doc(cache: Path, logs: Path, label: str) -> dict | None:
    runs = sorted((cache / "reports").glob("*/results.json")) if (cache / "reports").is_dir() else []
    if not runs:
        return None
    shutil.copy(runs[-1], logs / f"{label}.results.json")
    return json.loads(runs[-1].read_text())


def rows(doc: dict | None) -> dict[str, dict]:
    return {r["test_id"]: r for r in (doc or {}).get("results", [])}


def rel(a, b) -> float:
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    a, b = float(a), float(b)
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def stated_error(row: dict) -> float | None:
    """The error an exact-mode row states for a value computed in half precision (None: fp32's)."""
    prec = (row.get("breakdown") or {}).get("precision")
    if not isinstance(prec, dict):
        return None
    for key in ("error", "propagated_error", "bound"):
        if isinstance(prec.get(key), (int, float)):
            return float(prec[key])
    return None


def compare_exact(exact: dict | None, fp32: dict | None) -> dict:
    e, f = rows(exact), rows(fp32)
    shared = sorted(set(e) & set(f))
    verdicts = [t for t in shared if e[t]["verdict"] != f[t]["verdict"]]
    outside, moved = [], {}
    for t in shared:
        d = max(abs(float(e[t][k]) - float(f[t][k])) if e[t].get(k) is not None and f[t].get(k) is not None else 0.0
                for k in NUMBERS)
        if d == 0:
            continue
        err = stated_error(e[t])
        moved[t] = {"abs_diff": d, "stated_error": err, "precision": (e[t].get("breakdown") or {}).get("precision")}
        if err is None or d > err * (1 + 1e-9):
            outside.append(t)
    run = (exact or {}).get("run", {})
    return {"rows_exact": len(e), "rows_fp32": len(f), "shared": len(shared),
            "only_one_side": sorted(set(e) ^ set(f)), "verdicts_differ": [(t, e[t]["verdict"], f[t]["verdict"])
                                                                         for t in verdicts],
            "values_moved": len(moved), "values_outside_stated_error": outside, "moved": moved,
            "exact_run_precision": run.get("precision"), "exact_dtype": run.get("dtype"), "fp32_dtype":
            (fp32 or {}).get("run", {}).get("dtype")}


def compare_devices(cuda: dict | None, cpu: dict | None) -> dict:
    g, c = rows(cuda), rows(cpu)
    shared = sorted(set(g) & set(c))
    worst = {t: max(rel(g[t].get(k), c[t].get(k)) for k in NUMBERS) for t in shared}
    return {"rows_cpu": len(c), "shared": len(shared), "missing_on_cuda": sorted(set(c) - set(g)),
            "max_rel_diff": max(worst.values(), default=None),
            "over_1e-5": {t: w for t, w in worst.items() if w > FP32_REL_TOL},
            "verdicts_differ": [t for t in shared if g[t]["verdict"] != c[t]["verdict"]],
            "n_differ": [t for t in shared if g[t].get("n") != c[t].get("n")]}


def run_doc_summary(doc: dict | None) -> dict:
    if not doc:
        return {"results_json": None}
    run = doc.get("run", {})
    verdicts: dict[str, int] = {}
    for r in doc.get("results", []):
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {"rows": len(doc.get("results", [])), "complete": run.get("complete"), "device": run.get("device"),
            "dtype": run.get("dtype"), "verdicts": verdicts, "engine_stats": run.get("engine_stats"),
            "partial_reason": run.get("partial_reason")}


# ----- stages ------------------------------------------------------------------------------------
def stage_env(chk: Check, args) -> None:
    import torch
    import transformers

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
            "cuda": torch.version.cuda, "cpu_cores": os.cpu_count(), "device": args.device}
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        info.update(gpu=torch.cuda.get_device_name(0), gpu_free_gib=round(free / 2**30, 1),
                    gpu_total_gib=round(total / 2**30, 1), bf16=torch.cuda.is_bf16_supported())
    for pkg in ("peft", "accelerate", "bitsandbytes", "vaderSentiment", "h5py"):
        try:
            import importlib.metadata as md

            info[pkg] = md.version(pkg)
        except Exception as exc:  # noqa: BLE001 - a missing package is a finding, not a stop
            info[pkg] = f"missing ({type(exc).__name__})"
    chk.record("env", info)


def start_big_build(chk: Check, args, tokenizer: Path) -> subprocess.Popen | None:
    folder = chk.work / "models" / args.big
    if bench_gpu.model_saved(folder):
        return None
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import bench_gpu; "
            f"bench_gpu.build_model({args.big!r}, __import__('pathlib').Path({str(folder)!r}), "
            f"__import__('pathlib').Path({str(tokenizer)!r}), {args.device!r})")
    log = (chk.logs / "build-big.log").open("w")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def stage_side_by_side(chk: Check, args) -> None:
    """Stage 1 (tests) and stage 2 (precision) at once."""
    small = chk.work / "models" / args.small
    jobs: dict[str, Job] = {}
    need = args.side_limit
    if chk.left() < 60:
        for name in ("tests", "precision"):
            if name in args.stages:  # only the stages asked for are said to be skipped
                chk.record(name, {"skipped": f"{chk.left():.0f} s left"})
        return
    limit = min(need, chk.left() - 10)
    if "tests" in args.stages:
        tests = (["tests", "-m", "gpu"] if not args.tiny else ["tests/test_devices.py", "-m", "gpu or not gpu",
                                                                  "-k", "cpu"])
        jobs["tests"] = Job("tests", [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-rfEs",
                                      "-n", str(args.test_workers), "--durations=15"], chk.logs / "tests.log", limit)
    if "precision" in args.stages:
        for label, extra in (("exact", ["--precision", "exact"]), ("fp32", ["--precision", "fp32"])):
            cache = chk.work / f"cache-{label}"
            shutil.rmtree(cache, ignore_errors=True)
            if args.tiny and label == "exact":
                extra = ["--precision", "exact", "-k", CPU_SUBSET]  # exact runs in fp32 on a CPU: wiring only
            jobs[label] = Job(label, audit_cmd(small, args.device, cache, *extra), chk.logs / f"audit-{label}.log", limit)
        cache = chk.work / "cache-cpu-fp32"
        shutil.rmtree(cache, ignore_errors=True)
        jobs["cpu_fp32"] = Job("cpu_fp32", audit_cmd(small, "cpu", cache, "--dtype", "float32", "-k", CPU_SUBSET),
                               chk.logs / "audit-cpu-fp32.log", limit,
                               env={"OMP_NUM_THREADS": str(args.cpu_threads), "CUDA_VISIBLE_DEVICES": ""})
    docs = {}
    for name in ("tests", "exact", "fp32", "cpu_fp32"):  # in priority order: each recorded once it ends
        if name not in jobs:
            continue
        outcome = jobs[name].wait()
        if name == "tests":
            chk.record("tests", outcome)
            continue
        docs[name] = audit_doc(chk.work / f"cache-{name.replace('_', '-')}", chk.logs, f"audit-{name}")
        chk.record(f"audit_{name}", {**outcome, **run_doc_summary(docs[name]), "model": args.small})
        if name == "fp32":
            chk.record("exact_vs_fp32", compare_exact(docs.get("exact"), docs.get("fp32")))
        if name == "cpu_fp32":
            chk.record("cuda_fp32_vs_cpu_fp32", {"subset": CPU_SUBSET, "tolerance": FP32_REL_TOL,
                                                 **compare_devices(docs.get("fp32"), docs.get("cpu_fp32"))})


def wait_build(chk: Check, proc: subprocess.Popen | None, args) -> bool:
    if proc is not None:
        t = time.monotonic()
        try:
            proc.wait(timeout=max(1.0, chk.left() - 30))
        except subprocess.TimeoutExpired:
            proc.kill()
        chk.record("build_big", {"model": args.big, "exit_code": proc.returncode,
                                 "waited_s": round(time.monotonic() - t, 1)})
    return bench_gpu.model_saved(chk.work / "models" / args.big)


def stage_audit7b(chk: Check, args) -> None:
    model = chk.work / "models" / args.big
    cache = chk.work / "cache-audit-big"
    shutil.rmtree(cache, ignore_errors=True)
    extra = (["-k", args.big_k] if args.big_k else []) + (["--precision", args.big_precision] if args.big_precision else [])
    for label, limit in (("cold", args.cold_limit), ("warm", args.warm_limit)):
        if chk.left() < min(limit, 60):
            chk.record(f"audit_big_{label}", {"skipped": f"{chk.left():.0f} s left"})
            return
        outcome = Job(label, audit_cmd(model, args.device, cache, *extra), chk.logs / f"audit-big-{label}.log",
                      min(limit, chk.left() - 5)).wait()
        doc = audit_doc(cache, chk.logs, f"audit-big-{label}")
        chk.record(f"audit_big_{label}", {**outcome, **run_doc_summary(doc), "model": args.big,
                                          "subset": args.big_k or "none (the whole default audit)",
                                          "target_s": 120 if label == "cold" else 15})
        if outcome["timed_out"]:
            return


def stage_generate(chk: Check, args) -> None:
    """bench_gpu.py's generation benchmark in its own process: the memory it held is the GPU's
    again before QLoRA loads (run in this process, it left QLoRA 0.7 GiB free on the first
    lease)."""
    if chk.left() < args.gen_need:
        chk.record("generate", {"skipped": f"needs ~{args.gen_need} s, {chk.left():.0f} s left"})
        return
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--stages", "generate", "--shapes", args.big,
           "--work-dir", str(chk.work.parent), "--gen-prompts", str(args.gen_prompts), "--profile", "--per-batch",
           "--gen-dtype", "float32" if args.tiny else "bfloat16"] + (["--tiny"] if args.tiny else [])
    env = {"PYTORCH_CUDA_ALLOC_CONF": args.gen_alloc_conf} if args.gen_alloc_conf else None
    outcome = Job("generate", cmd, chk.logs / "generate.log", chk.left() - 5, env=env).wait()
    found = json.loads((chk.work / "results.json").read_text()).get("generate", {}) if (chk.work / "results.json").exists() else {}
    for name in ("generate-profile-ours.txt", "generate-profile-hf.txt"):
        if (chk.work / name).exists():
            shutil.copy(chk.work / name, chk.logs / name)
    chk.record("generate", {**outcome, **found, "target_ratio": 3.0, "alloc_conf": args.gen_alloc_conf or "default"})


def stage_qlora(chk: Check, args) -> None:
    if chk.left() < args.qlora_need:
        chk.record("qlora", {"skipped": f"needs ~{args.qlora_need} s, {chk.left():.0f} s left"})
        return
    cache = chk.work / "cache-qlora"
    shutil.rmtree(cache, ignore_errors=True)
    probe = "natural-default"
    extra = ["--mitigation", "debias-tuning", "--mitigation-steps", str(args.qlora_steps), "-k", f"{probe} and GLD"]
    extra += [] if args.device == "cpu" else ["--load-in-4bit"]
    outcome = Job("qlora", audit_cmd(chk.work / "models" / args.big, args.device, cache, *extra),
                  chk.logs / "qlora.log", chk.left() - 5).wait()
    doc = audit_doc(cache, chk.logs, "qlora")
    row = rows(doc).get(f"debias-tuning-{probe}-GLD_reduction", {})
    bd = row.get("breakdown") or {}
    chk.record("qlora", {**outcome, **run_doc_summary(doc), "model": args.big, "load_in_4bit": args.device != "cpu",
                         "GLD_original": bd.get("original"), "GLD_mitigated": bd.get("mitigated"),
                         "verdict": row.get("verdict"), "variant": bd.get("variant")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="one tiny model on CPU: check this script end to end")
    ap.add_argument("--budget", type=float, default=450, help="seconds for the whole call (default 450)")
    ap.add_argument("--stages", default="tests,precision,audit7b,generate,qlora")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / ".gpu-work" / "out"))
    ap.add_argument("--work-dir", default=str(ROOT / "benchmarks" / ".gpu-work"))
    ap.add_argument("--tokenizer-dir", default=None)
    ap.add_argument("--big-k", default="", help="-k subset of the 7B audit (default: the whole default audit)")
    ap.add_argument("--side-limit", type=float, default=240, help="seconds for stages 1-2 together")
    ap.add_argument("--big-precision", default="", help="--precision of the 7B audit (default: the CUDA default, exact)")
    ap.add_argument("--cold-limit", type=float, default=200)
    ap.add_argument("--warm-limit", type=float, default=60)
    ap.add_argument("--gen-prompts", type=int, default=None)
    ap.add_argument("--gen-need", type=float, default=None)
    ap.add_argument("--gen-alloc-conf", default="", help="PYTORCH_CUDA_ALLOC_CONF for the generation stage, "
                    "e.g. expandable_segments:True (is the KV cache's growth by concatenation the allocator's trouble?)")
    ap.add_argument("--qlora-steps", type=int, default=None)
    ap.add_argument("--qlora-need", type=float, default=None)
    ap.add_argument("--test-workers", type=int, default=8)
    ap.add_argument("--cpu-threads", type=int, default=8)
    args = ap.parse_args()
    args.device = "cpu" if args.tiny else "cuda"
    args.small, args.big = ("tiny", "tiny") if args.tiny else ("smollm2", "llama2-7b")
    args.gen_prompts = args.gen_prompts or (48 if args.tiny else 1280)
    args.gen_need = args.gen_need if args.gen_need is not None else (20 if args.tiny else 150)
    args.qlora_steps = args.qlora_steps or (3 if args.tiny else 10)
    args.qlora_need = args.qlora_need if args.qlora_need is not None else (20 if args.tiny else 120)
    args.stages = args.stages.split(",")
    if args.tiny:
        bench_gpu.HF_BATCH, bench_gpu.NEW_TOKENS = 16, 16
    os.environ.setdefault("BIAS_CORE_OFFLINE", "1")
    work = Path(args.work_dir) / ("tiny" if args.tiny else "gpu")
    chk = Check(Path(args.out), work, args.budget)
    chk.say(f"stages {args.stages}, budget {args.budget:.0f} s, work {work}, out {chk.out}")
    stage_env(chk, args)
    tokenizer = bench_gpu.find_tokenizer(args.tokenizer_dir)
    t = time.monotonic()
    bench_gpu.build_model(args.small, work / "models" / args.small, tokenizer, args.device)
    chk.record("build_small", {"model": args.small, "seconds": round(time.monotonic() - t, 1)})
    needs_big = any(s in args.stages for s in ("audit7b", "generate", "qlora"))
    big = start_big_build(chk, args, tokenizer) if needs_big and args.big != args.small else None
    if "tests" in args.stages or "precision" in args.stages:
        stage_side_by_side(chk, args)
    if needs_big and wait_build(chk, big, args):
        for name, fn in (("audit7b", stage_audit7b), ("generate", stage_generate), ("qlora", stage_qlora)):
            if name in args.stages:
                fn(chk, args)
    chk.say(f"done, {chk.left():.0f} s of the budget left")


if __name__ == "__main__":
    main()
