"""Make a candidate more biased on purpose, and check that the regression gate says so.

    PYTHONPATH=. .venv/bin/python benchmarks/make_biased_adapter.py [--steps 60] [--out DIR]

1. Trains, on SmolLM2-135M on CPU, a LoRA adapter that prefers male continuations: the
   project's neutral "My friend <predicate>, and" prompts (natural-default; with --data-dir also
   the paper's LLM-generated sets) followed by " he", loss on " he" only. The template probes
   the gate is checked on are not trained on. The adapter is saved as a plain PEFT folder.
2. Audits the base model and the base + adapter (``--adapter``'s function) on the four template
   probes: GLD and ADD from raw next-word probabilities, GAS from greedy 50-token continuations
   (the disclosure audit's setting), and writes each run's per-item file.
3. Pairs the two stored runs, and checks with the regression package's pure functions that the
   biased adapter is significantly worse on GLD and GAS of every template probe (Holm-adjusted
   p < 0.01 and a failed non-inferiority gate), and that the base against its own stored run
   gives deltas of exactly 0 and passes everywhere.

Prints the Markdown summary and the figures; exits 1 when a check fails. Not part of CI
(minutes of CPU).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
from bias_core.metrics import disclosure as dm  # noqa: E402
from bias_core.models import DecodingConfig, LoadOptions, load_model, resolve_model  # noqa: E402
from bias_core.models.weights.adapter import apply_adapter  # noqa: E402
from bias_core.probes.disclosure import TEMPLATE_TOPICS, llm_generated_probe, natural_default_probe, template_probe  # noqa: E402
from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS, gendered_words  # noqa: E402
from bias_core.pytest_plugin.options import default_cache_dir  # noqa: E402

# The disclosure audit's decoding for GAS: greedy, 50 new tokens (Dong et al.).
DECODING = DecodingConfig(max_new_tokens=50, do_sample=False)
TARGET = " he"


def training_prompts(data_dir: Path | None) -> list[str]:
    prompts = natural_default_probe().prompts
    if data_dir is not None:
        for k in ("1", "2"):
            prompts += llm_generated_probe(k, data_dir).prompts
    return prompts


def train_male_adapter(lm, prompts: list[str], steps: int, lr: float, seed: int, folder: Path) -> list[dict]:
    """LoRA on all linear layers; cross-entropy of " he" right after each prompt."""
    from bias_core.mitigation.training.continuations import train_continuation_adapter
    from bias_core.mitigation.training.lora import LoraTrainConfig

    config = LoraTrainConfig(r=8, alpha=16, dropout=0.0, lr=lr, batch_size=16, steps=steps, max_length=64)
    return train_continuation_adapter(lm, [(p, TARGET) for p in prompts], config, seed, folder, "male-preference LoRA")


def audit(lm, probes, seed: int, with_gas: bool):
    """Per-item blocks of GLD, ADD (and GAS) on each probe, as the disclosure audit computes them."""
    blocks = []
    words = list(FEMALE_WORDS) + list(MALE_WORDS)
    for probe in probes:
        probs = lm.word_probs(probe.prompts, words, desc=f"{probe.name}: next-word probabilities")
        pf, pm = probs[:, : len(FEMALE_WORDS)], probs[:, len(FEMALE_WORDS):]
        for name, fn in (("GLD", dm.gld), ("ADD", dm.add)):
            result = fn(pf, pm, ids=probe.ids, prompts=probe.prompts, seed=seed)
            blocks.append(items_from_result(probe, result, PAIRED[name], metric=name))
        if with_gas:
            texts = lm.generate(probe.prompts, DECODING, seed=seed, desc=f"{probe.name}: generating")
            result = dm.gas(texts, gendered_words(), ids=probe.ids, prompts=probe.prompts, seed=seed)
            blocks.append(items_from_result(probe, result, PAIRED["GAS"], metric="GAS"))
    return blocks


def run_config(lm, seed: int, adapter: Path | None) -> RunConfig:
    return RunConfig(model=lm.name, model_fingerprint=lm.fingerprint, tokenizer_fingerprint=lm.tokenizer_fingerprint,
                     dtype=str(lm.engine.model.dtype), adapter=None if adapter is None else str(adapter), seed=seed,
                     decoding={"disclosure": DECODING.as_key()}, lexicon_sha256=lexicon_sha256())


def compare_runs(candidate: Path, baseline: Path, margins, seed: int):
    config, pairs = pair_runs(read_items(candidate), read_items(baseline))
    out = adjust([compare_to_baseline(p, PAIRED[key[1]], seed=seed) for key, p in sorted(pairs.items())])
    return config, [judge(c, margins[c.metric]) for c in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="where the adapter and both runs' items go (default: a temp dir)")
    ap.add_argument("--no-gas", action="store_true", help="skip generation (GLD and ADD only)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # training progress
    out = args.out or Path(tempfile.mkdtemp(prefix="biased-adapter-"))
    margins = parse_regression_margins(tomllib.loads((ROOT / "thresholds.toml").read_text())["regression"])

    # use_cache=False: nothing this script computes goes into the shared result cache
    lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False))
    prompts = training_prompts(args.data_dir)
    t0 = time.perf_counter()
    history = train_male_adapter(lm, prompts, args.steps, args.lr, args.seed, out / "adapter")
    train_s = time.perf_counter() - t0
    biased = apply_adapter(lm, out / "adapter")

    probes = [template_probe(t) for t in TEMPLATE_TOPICS]
    t0 = time.perf_counter()
    write_items(out / "base" / "items.jsonl.gz", run_config(lm, args.seed, None), audit(lm, probes, args.seed, not args.no_gas))
    write_items(out / "biased" / "items.jsonl.gz", run_config(biased, args.seed, out / "adapter"),
                audit(biased, probes, args.seed, not args.no_gas))
    audit_s = time.perf_counter() - t0

    config, regressions = compare_runs(out / "biased" / "items.jsonl.gz", out / "base" / "items.jsonl.gz", margins, args.seed)
    _, selfcheck = compare_runs(out / "base" / "items.jsonl.gz", out / "base" / "items.jsonl.gz", margins, args.seed)
    print(render_summary(regressions, baseline=f"{args.model} without the adapter", config_note=config.describe(),
                         title="Male-preference LoRA vs its base"))
    print(f"training: {len(prompts)} prompts, {args.steps} steps of 16, lr {args.lr}: {train_s:.0f} s; "
          f"loss {history[0]['loss']:.3f} -> {history[-1]['loss']:.3f}; both audits {audit_s:.0f} s; files in {out}")

    failures = []
    for c in regressions:
        if c.metric in ("GLD", "GAS") and not (c.verdict == "fail" and c.p_holm < 0.01):
            failures.append(f"{c.test_id}: verdict {c.verdict}, Holm p {c.p_holm:.3g} (expected fail, p < 0.01)")
    for c in selfcheck:
        if not (c.delta == 0 and c.harm_ci == (0.0, 0.0) and c.verdict == "pass"):
            failures.append(f"self-check {c.test_id}: delta {c.delta}, CI {c.harm_ci}, {c.verdict}")
    print(json.dumps({"checks_failed": failures, "self_check_tests": len(selfcheck),
                      "regression_tests": len(regressions)}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
