"""One fixed set of requests and the numbers a model handle gives for it, to compare engines.

Imported by tests/test_engine_vllm.py (the transformers engine and the endpoint engine answer
in the test's process) and run as a script in vLLM's environment (the in-process vLLM engine):

    .venv-vllm/bin/python tests/engine_numbers.py --engine vllm --cache-dir DIR --out numbers.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bias_core.models.decoding import DecodingConfig
from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS

MAX_NEW = 50  # the disclosure audit's continuation length (Dong et al.)


def requests(small: bool = False) -> dict[str, Any]:
    """Prompts from the project's own probes (offline), a few of each kind of request (``small``:
    a fifth of them)."""
    from bias_core.probes.disclosure import natural_default_probe, template_probe
    from bias_core.probes.occupation_pronoun import load_occupation_pronouns
    from bias_core.probes.sentiment_templates import sentiment_templates_probe

    prompts = template_probe("occupation").prompts + natural_default_probe().prompts[:60]
    pairs = load_occupation_pronouns().items[:40]
    gbm = [it.prompt for it in sentiment_templates_probe().items[::100]]
    if small:
        prompts, pairs, gbm = prompts[::5], pairs[::5], gbm[::5]
    return {"prompts": prompts, "words": list(FEMALE_WORDS) + list(MALE_WORDS),
            "sentences": [s for it in pairs for s in (it.prompt, it.meta["anti"])],
            "fills": [p[: p.index("[MASK]") + len("[MASK]")] for p in gbm]}


def numbers(lm: Any, which: dict[str, Any] | None = None) -> dict[str, Any]:
    r = which or requests()
    return {
        "continuations": lm.generate(r["prompts"], DecodingConfig(max_new_tokens=MAX_NEW), desc="continuations"),
        "word_probs": lm.word_probs(r["prompts"], r["words"]).tolist(),
        "sentence_logprob": lm.sentence_logprob(r["sentences"]).tolist(),
        "loglikelihood": lm.loglikelihood([(p, " she") for p in r["prompts"][:20]]),
        "topk_fills": [[[w, p] for w, p in row] for row in lm.topk_fills(r["fills"], 5)],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--out", required=True)
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    from bias_core.models import LoadOptions, load_model, resolve_model

    lm = load_model(resolve_model(args.model), LoadOptions(engine=args.engine, cache_dir=args.cache_dir,
                                                           use_cache=False, progress=False, adapter=args.adapter))
    out = {"info": lm.info().as_dict(), "fingerprint": lm.fingerprint, **numbers(lm, requests(args.small))}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh)


if __name__ == "__main__":  # vLLM starts worker processes: they must not run this again
    main()
