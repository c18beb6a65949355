"""Cost of CDS / ER training steps and of SentenceDebias subspace estimation, for planning the
trade-off sweep's CPU budget. One run, one machine:

    .venv/bin/python benchmarks/bench_corpus_tuning.py [--model smollm2-135m] [--data-dir ../shared/data] [--steps 8]

Prints wall and CPU seconds per training step (the process's CPU time divided by the torch
thread count approximates the wall time on an otherwise idle machine, since these machines are
shared) and the same as a ratio to the fp32 matmul peak measured at the start, plus the
subspace estimation time at three ratios. Adapters go to a temporary folder (no cache entry).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import torch


def matmul_peak_gflops(n: int = 1024, reps: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def main() -> None:
    from bias_core.mitigation.methods.corpus_tuning import CorpusTuningConfig, train_cds_adapter, train_er_adapter
    from bias_core.mitigation.methods.sentence_debias import SubspaceEstimator
    from bias_core.mitigation.training.corpus import load_debias_corpus
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.pytest_plugin.options import default_cache_dir

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sd-max-pairs", type=int, default=256)
    args = parser.parse_args()

    peak = matmul_peak_gflops()
    lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False, progress=False))
    corpus = load_debias_corpus(args.data_dir)
    config = dataclasses.replace(CorpusTuningConfig.cpu_quick(), steps=args.steps)
    threads = torch.get_num_threads()
    print(f"model {args.model}; corpus {corpus.name} ({len(corpus.sentences)} sentences); torch threads {threads}; "
          f"fp32 matmul peak {peak:.0f} GFLOP/s\n")
    print("| what | wall s | CPU s | CPU s / threads per step | steps | first loss | last loss |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as cache:
        for name, train, strength in (("cds@0.6", train_cds_adapter, 0.6), ("er@1", train_er_adapter, 1.0)):
            wall, cpu = time.perf_counter(), time.process_time()
            folder = train(lm, corpus, strength, config, 0, cache, progress=False)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            history = json.loads((folder / "training_log.json").read_text())["history"]
            print(f"| {name} training | {wall:.1f} | {cpu:.1f} | {cpu / threads / args.steps:.2f} | {args.steps} | "
                  f"{history[0]['loss']:.3f} | {history[-1]['loss']:.3f} |", flush=True)
    estimator = SubspaceEstimator(lm, corpus.sentences, max_pairs=args.sd_max_pairs)
    for ratio in (0.01, 0.1, 1.0):
        wall, cpu = time.perf_counter(), time.process_time()
        _, info = estimator.subspace(ratio)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"| sentence-debias@{ratio:g} subspace ({info['sentence_pairs']} sentence pairs) | {wall:.1f} | {cpu:.1f} "
              f"| | | | |", flush=True)


if __name__ == "__main__":
    main()
