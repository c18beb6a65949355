"""Speed and memory of the disclosure audit, measured in one run on this machine.

    .venv/bin/python benchmarks/bench_audit.py [--model smollm2-135m] [--data-dir ../shared/data]

Prints a markdown table. Every throughput is also given as a ratio to the fp32 matmul peak
measured at the start of the same run, since absolute figures drift on shared machines.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def matmul_peak_gflops(n: int = 2048, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, (time.perf_counter() - t) / reps)
    return 2 * n**3 / best / 1e9


def matmul_flops(lm) -> tuple[int, int]:
    """(FLOPs per token through the body, FLOPs per position through the output projection).

    2 x parameters of the transformer layers and final norm (the input embedding is a lookup);
    the output projection is counted only where it is computed.
    """
    emb = lm.engine.model.get_input_embeddings().weight.numel()
    head = lm.engine.model.get_output_embeddings().weight.numel()
    total = sum(p.numel() for p in lm.engine.model.parameters())
    tied = lm.engine.model.get_output_embeddings().weight is lm.engine.model.get_input_embeddings().weight
    body = total - emb - (0 if tied else head)
    return 2 * body, 2 * head


def warm_imports(spec, opts) -> float:
    """Import the model's transformers modules first, so the load time is the model's alone."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    from bias_core.models.loading import _weights_dir

    t = time.perf_counter()
    folder = _weights_dir(spec, opts)[0]
    MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.from_pretrained(folder))]
    AutoTokenizer.from_pretrained(folder)
    return time.perf_counter() - t


def bench_scoring(lm, prompts, words) -> dict:
    lm.cache.enabled = False
    lm.word_probs(prompts[:8], words)  # warm-up (one-time kernel initialisation)
    lm.stats = dict.fromkeys(lm.stats, 0)
    t = time.perf_counter()
    lm.word_probs(prompts, words)
    dt = time.perf_counter() - t
    body, head = matmul_flops(lm)
    # Useful work only: pad tokens are computed too, but count as waste, not throughput.
    flops = lm.stats["body_tokens"] * body + lm.stats["head_positions"] * head
    return {"seconds": dt, "gflops": flops / dt / 1e9, **lm.stats}


def bench_generation(lm, prompts, batch: int = 32, new: int = 50) -> dict:
    from bias_core.models.engines.hf.causal import GEN_PAD_MULTIPLE, DecodingConfig, padded_width

    lm.cache.enabled = False
    # One full batch of prompts of one padded width, so the batch really is `batch` rows.
    by_width: dict[int, list[str]] = {}
    for p in prompts:
        by_width.setdefault(padded_width(len(lm.engine.encode(p)), GEN_PAD_MULTIPLE), []).append(p)
    group = max(by_width.values(), key=len)[:batch]
    assert len(group) == batch, f"need {batch} prompts of one width, found {len(group)}"
    lm.batch_size = batch
    cfg = DecodingConfig(max_new_tokens=new)
    lm.generate(group[:4], DecodingConfig(max_new_tokens=4), seed=123)
    lm.stats["new_tokens"] = 0
    t = time.perf_counter()
    lm.generate(group, cfg)
    dt = time.perf_counter() - t
    n_new = lm.stats["new_tokens"]
    return {"seconds": dt, "new_tokens": n_new, "tok_s": n_new / dt}


def bench_audit(model: str, data_dir: str | None, cache: Path) -> dict:
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "audits"), "-q", "-p", "no:cacheprovider", "--durations=0",
           "--model", model, "--cache-dir", str(cache), "--report-dir", str(cache / "reports")]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    # "12.34s call     audits/test_genderpair.py::test_genderpair[...]": seconds per audit family
    per_family: dict[str, float] = {}
    for line in lines:
        m = re.match(r"\s*([0-9.]+)s (?:setup|call|teardown)\s+audits/test_(\w+)\.py::", line)
        if m:
            per_family[m.group(2)] = per_family.get(m.group(2), 0.0) + float(m.group(1))
    return {"seconds": dt, "summary": (lines[-1:] or ["?"])[0], "per_family": per_family}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--skip-audit", action="store_true")
    args = ap.parse_args()

    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.probes.disclosure import load_probe
    from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS
    from bias_core.pytest_plugin.options import default_cache_dir

    peak = matmul_peak_gflops()
    opts = LoadOptions(cache_dir=default_cache_dir(), use_cache=False, progress=False)
    imports_s = warm_imports(resolve_model(args.model), opts)
    t = time.perf_counter()
    lm = load_model(resolve_model(args.model), opts)
    load_s = time.perf_counter() - t
    prompts = load_probe("natural-default", None).prompts + [p for t_ in ("occupation", "personality", "hobby", "color")
                                                             for p in load_probe(f"template-{t_}", None).prompts]
    words = list(FEMALE_WORDS) + list(MALE_WORDS)
    scoring = bench_scoring(lm, prompts, words)
    gen = bench_generation(lm, prompts)
    rows = [
        ("fp32 matmul peak (2048x2048)", f"{peak:.0f} GFLOP/s", "1.00"),
        ("model load from the converted safetensors cache", f"{load_s:.2f} s",
         f"after {imports_s:.1f} s of one-time library imports"),
        (f"scoring: word probabilities, {len(prompts)} prompts x {len(words)} words",
         f"{scoring['gflops']:.0f} GFLOP/s ({scoring['seconds']:.2f} s; {scoring['body_tokens']} tokens, "
         f"{scoring['pad_tokens']} pad)", f"{scoring['gflops'] / peak:.2f} of peak"),
        ("greedy generation, batch 32, 50 new tokens",
         f"{gen['tok_s']:.0f} new tokens/s ({gen['new_tokens']} in {gen['seconds']:.1f} s)", ""),
    ]
    if not args.skip_audit:
        cache = Path(tempfile.mkdtemp(prefix="bias-bench-"))
        try:
            # The converted model is reused; only the result cache starts cold.
            (cache / "models").symlink_to(default_cache_dir() / "models")
            if (default_cache_dir() / "hashes").exists():
                (cache / "hashes").symlink_to(default_cache_dir() / "hashes")
            cold = bench_audit(args.model, args.data_dir, cache)
            warm = bench_audit(args.model, args.data_dir, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        rows += [("default audit (all families), cold result cache", f"{cold['seconds']:.0f} s", cold["summary"])]
        rows += [(f"  of which {family}", f"{sec:.0f} s", f"{sec / cold['seconds']:.2f} of the cold run")
                 for family, sec in sorted(cold["per_family"].items())]
        rows += [("default audit (all families), warm result cache", f"{warm['seconds']:.1f} s", warm["summary"])]
    peak_rss_gb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024**2
    rows.append(("peak memory (largest process)", f"{peak_rss_gb:.2f} GB", ""))
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, model {args.model}"
          f", data-dir {args.data_dir or '-'}")
    print("| measure | figure | note |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
