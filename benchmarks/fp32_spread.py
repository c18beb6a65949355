"""How far fp32 computations of the same log-probabilities spread on this CPU, against the
bound tests/tolerances.py derives for them (issue 22).

Each configuration runs in its own process: ATEN_CPU_CAPABILITY default or avx2 (the vector
kernels torch picks: AVX-512 where the CPU has it, else AVX2), 1, 2 or 4 threads, and in each,
next-word probabilities at batch size 1 and 16. Every pair of computations of one word's
probability is compared on the log scale (the relative difference of the probability); the
largest difference per model is printed beside the bound, with their ratio.

    .venv/bin/python benchmarks/fp32_spread.py            # tiny model and smollm2-135m
    .venv/bin/python benchmarks/fp32_spread.py --models tiny
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

CAPABILITIES = ("default", "avx2")
THREADS = (1, 2, 4)
BATCHES = (1, 16)
WORDS = ["she", "he", "her", "his", "him", "hers", "herself", "himself", "woman", "man", "mother", "father",
         "nurse", "hairdresser"]


def _handle(model: str, folder: Path):
    from bias_core.models import LoadOptions, load_model, resolve_model

    from harness import bias_core_cache_dir, load_tiny

    if model == "tiny":
        return load_tiny(folder)
    return load_model(resolve_model(model), LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False,
                                                        progress=False, dtype="float32"))


def measure(model: str, folder: Path, out: Path) -> None:
    """One configuration (this process's environment): log word probabilities per batch size."""
    import torch

    from bias_core.probes.disclosure import template_probe

    torch.set_num_threads(int(os.environ["SPREAD_THREADS"]))
    lm = _handle(model, folder)
    prompts = list(template_probe("occupation").prompts)
    result = {}
    for batch in BATCHES:
        lm.batch_size = batch
        result[f"b{batch}"] = np.log(lm.word_probs(prompts, WORDS)).tolist()
    from tolerances import Forward

    sizes = Forward.of(lm, prompts, WORDS)
    result["sizes"] = sizes.as_dict()
    result["tokens"] = [len(lm.tokenizer(" " + w, add_special_tokens=False)["input_ids"]) for w in WORDS]
    out.write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2-135m")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    from tiny_model import build_tiny_causal_lm
    from tolerances import Forward, value_atol

    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = build_tiny_causal_lm(tmp / "tiny", seed=0)
        for model in args.models.split(","):
            runs = {}
            for cap, threads in itertools.product(CAPABILITIES, THREADS):
                env = {**os.environ, "SPREAD_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
                env.pop("ATEN_CPU_CAPABILITY", None)
                if cap != "default":
                    env["ATEN_CPU_CAPABILITY"] = cap
                out = tmp / f"{model}-{cap}-{threads}.json"
                subprocess.run([sys.executable, __file__, "--measure", model, str(folder), str(out)], env=env, check=True)
                runs[(cap, threads)] = json.loads(out.read_text())
            first = next(iter(runs.values()))
            sizes = Forward(**first["sizes"])
            logs = {(cap, threads, b): np.array(r[f"b{b}"]) for (cap, threads), r in runs.items() for b in BATCHES}
            # each word's own bound: its tokens, and its log-probability's own size
            bounds = np.array([sizes.word_logprob_atol(n) for n in first["tokens"]])[None, :]
            worst, share, pair = 0.0, 0.0, None
            for (ka, a), (kb, b) in itertools.combinations(logs.items(), 2):
                diff = np.abs(a - b)
                ratio = float(np.max(diff / (bounds + value_atol(b))))
                worst = max(worst, float(diff.max()))
                if ratio > share:
                    share, pair = ratio, (ka, kb)
            report[model] = {"sizes": first["sizes"], "tokens": first["tokens"], "largest_difference": worst,
                             "largest_share_of_bound": share, "between": [list(p) for p in pair] if pair else None,
                             "token_bound": sizes.token_logprob_atol(), "computations": len(logs)}
            print(f"{model}: {len(logs)} computations (capability x threads x batch size); largest |d log p| "
                  f"{worst:.3g}; largest share of its bound {share:.3f} (between {pair}); "
                  f"bound per token {sizes.token_logprob_atol():.3g}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--measure":
        measure(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
