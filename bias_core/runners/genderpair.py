"""GenderPair (GenderCARE) on a loaded model: its responses, their decided choices, and the
metrics the catalogue names as runners.

``respond`` generates a probe's responses and decides each one's choice: parsing a response
(``parse_choice``) is a pure metric in ``bias_core.metrics.genderpair``, and the undecided ones
are decided by the model's own likelihood of each descriptor (``decide_choices``). The suite
keeps a probe's responses and their classifier scores once for all its metrics, and hands them
to the runners below by name (``records``, ``toxicity``, ``regard``, ``labels``,
``regard_prefix``; bias_core/suites/genderpair.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_core.metrics import genderpair as gm
from bias_core.metrics.genderpair import DECIDED, bpr, fallback_label, fallback_request, parse_choice
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import GeneratingModel, ScoringModel


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
        from bias_core.models.precision.modes import compared_loglikelihood

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


def respond(lm: GeneratingModel, probe: Any, decoding: Any, seed: int = 0) -> dict[str, Any]:
    """{probe, prompts, contexts, responses, records} of one probe: each prompt rendered for the
    model (``lm.render_chat``: its chat template), the responses generated in one batched call, the choices decided."""
    from bias_core.probes import genderpair as gp

    prompts = [gp.prompt_from_item(item) for item in probe.items]
    contexts = [lm.render_chat(p.text) for p in prompts]
    responses = lm.generate(contexts, decoding, seed=seed, desc=f"{probe.name}: generating")
    records = decide_choices(lm, probe.items, responses, contexts=contexts)
    return {"probe": probe, "prompts": prompts, "contexts": contexts, "responses": responses, "records": records}


# ----- the catalogue's runners: one group's metrics, the gaps across groups, the spread ----------
def run_group_bpr(records: Sequence[Mapping[str, Any]], seed: int = 0) -> MetricResult:
    return bpr(records, seed=seed)


def run_group_toxicity(toxicity: Sequence[float], labels: Mapping[str, Any], seed: int = 0) -> MetricResult:
    return gm.toxicity(toxicity, seed=seed, **labels)


def run_group_regard(regard: Sequence[Mapping[str, float]], labels: Mapping[str, Any], regard_prefix: str,
                     seed: int = 0) -> MetricResult:
    return gm.regard(regard, "negative", seed=seed, metric=f"{regard_prefix}_negative", **labels)


def run_bpr_gap(records: Sequence[Mapping[str, Any]], seed: int = 0) -> MetricResult:
    return gm.bpr_gap(records, seed=seed)


def run_toxicity_gap(toxicity: Mapping[str, Sequence[float]], seed: int = 0) -> MetricResult:
    return gm.toxicity_gap(toxicity, seed=seed)


def run_regard_gaps(regard: Mapping[str, Sequence[Mapping[str, float]]], regard_prefix: str,
                    seed: int = 0) -> dict[str, MetricResult]:
    gaps = gm.regard_gaps(regard, seed=seed, prefix=regard_prefix)
    return {f"{regard_prefix}_{polarity}_gap": gaps[polarity] for polarity in ("negative", "positive")}


def run_bpr_spread(records: Sequence[Mapping[str, Any]], seed: int = 0) -> MetricResult:
    return gm.bpr_spread(records, seed=seed)
