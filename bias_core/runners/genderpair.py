"""GenderPair's Bias-Pair Ratio on a model's responses: the likelihood fallback asks the model.

Parsing a response (``parse_choice``) and BPR itself are pure metrics in
``bias_core.metrics.genderpair``; here the undecided responses are decided by the model's own
likelihood of each descriptor (``decide_choices``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bias_core.metrics.genderpair import DECIDED, bpr, fallback_label, fallback_request, parse_choice
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel


def _field(prompt: Any, name: str) -> Any:
    if hasattr(prompt, name):
        return getattr(prompt, name)
    meta = getattr(prompt, "meta", None)
    if meta is not None and name in meta:
        return meta[name]
    raise KeyError(f"GenderPair prompt lacks {name!r}: pass GenderPairPrompt objects or ProbeItems from bias_core.probes.genderpair")


def decide_choices(lm: ScoringModel | None, prompts: Sequence[Any], responses: Sequence[str], contexts: Sequence[str] | None = None,
                   normalize: str = "sum") -> list[dict[str, Any]]:
    """Per-prompt records: parse each response, then decide the undecided ones by likelihood.

    ``prompts`` are GenderPairPrompt objects or their ProbeItems. ``contexts`` are the exact
    model inputs the responses were generated from (``lm.render_chat`` output); default: the
    prompt texts. The fallback asks ``lm.loglikelihood`` for log P(" " + descriptor | context)
    for both descriptors of each undecided prompt, i.e. how likely the model is to answer with
    that descriptor, given the instruction that offers both. Conditioning on the prompt rather
    than the response: a response that already names both descriptors (or a refusal naming
    neither) would make the next word a copy or noise, not a preference; and unlike the bare
    word's perplexity (the paper's script) it measures the choice the prompt asked for. The
    six configurations put each descriptor first and second equally often, so the position
    preference a likelihood has cancels over the benchmark.

    ``lm`` may be None or non-causal: undecided prompts then stay undecided (``decided_by =
    "undecided"``, no score) and BPR is computed over the decided ones, as the paper's formula
    (N_biased / N_total chosen) reads.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"decide_choices: {len(prompts)} prompts but {len(responses)} responses")
    contexts = [_text(p) for p in prompts] if contexts is None else list(contexts)
    if len(contexts) != len(prompts):
        raise ValueError(f"decide_choices: {len(prompts)} prompts but {len(contexts)} contexts")
    records = []
    for p, response, context in zip(prompts, responses, contexts):
        biased, anti = _field(p, "biased"), _field(p, "anti")
        choice = parse_choice(response, biased, anti, tuple(_field_default(p, "mark", ("{", "}"))))
        text = _text(p)
        records.append({
            "id": p.id, "key": _field_default(p, "key", p.id), "group": _field(p, "group"),
            "configuration": _field(p, "configuration"), "variant": _field_default(p, "variant", ""),
            "target": _field_default(p, "target", ""), "biased": biased, "anti": anti, "prompt": text,
            "context": context, "response": response, "label": choice.label, "how": choice.how,
            "biased_votes": choice.biased_votes, "anti_votes": choice.anti_votes,
        })
    undecided = [i for i, r in enumerate(records) if r["label"] not in DECIDED]
    can_score = lm is not None and getattr(lm, "kind", None) == "causal" and undecided
    if can_score:
        requests = []
        for i in undecided:
            r = records[i]
            requests += [fallback_request(r["context"], r["biased"]), fallback_request(r["context"], r["anti"])]
        from bias_core.models.precision import compared_loglikelihood

        weights = None
        if normalize == "chars":
            weights = [1.0 / len(records[i][k]) for i in undecided for k in ("biased", "anti")]
        lls = compared_loglikelihood(lm, requests, [(2 * j, 2 * j + 1) for j in range(len(undecided))],
                                     desc="GenderPair likelihood fallback", weights=weights)
        for j, i in enumerate(undecided):
            r = records[i]
            r["ll_biased"], r["ll_anti"] = float(lls[2 * j]), float(lls[2 * j + 1])
            r["fallback_normalize"] = normalize
            r["chosen_label"] = fallback_label(r["ll_biased"], r["ll_anti"], r["biased"], r["anti"], normalize)
            r["decided_by"] = "likelihood"
    for r in records:
        if r["label"] in DECIDED:
            r["chosen_label"], r["decided_by"] = r["label"], r["how"]
        elif "chosen_label" not in r:
            r["chosen_label"], r["decided_by"] = None, "undecided"
        r["chosen"] = {"biased": r["biased"], "anti": r["anti"]}.get(r["chosen_label"])
        r["score"] = None if r["chosen_label"] is None else (1.0 if r["chosen_label"] == "biased" else 0.0)
    return records


def _text(p: Any) -> str:
    # GenderPairPrompt keeps the prompt in .text, ProbeItem in .prompt
    return p.text if hasattr(p, "text") else p.prompt


def _field_default(p: Any, name: str, default: Any) -> Any:
    try:
        return _field(p, name)
    except KeyError:
        return default


def run_bpr(lm: ScoringModel | None, prompts: Sequence[Any], responses: Sequence[str], seed: int = 0,
            contexts: Sequence[str] | None = None, normalize: str = "sum") -> MetricResult:
    """``bpr(decide_choices(...))``: BPR of one set of prompts (normally one group)."""
    return bpr(decide_choices(lm, prompts, responses, contexts, normalize), seed=seed)
