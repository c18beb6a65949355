"""GenderBench's probes on a loaded model: each prompt's attempts generated as GenderBench's harness
generates them, then the metrics the catalogue declares of each runner.

How a prompt reaches the model. GenderBench sends each prompt as one user message to a chat API
(``generators/open_ai_async_api.py``: temperature 1.0, max_tokens 300, no system prompt); here
each prompt is rendered with the model's chat template (``lm.render_chat``: one user turn and the
generation prompt, as GenderPair's prompts are), or given as it is to a base model without one.
Each result's breakdown says which (``generation.chat_template``), with the decoding.

Sampling. Temperature 1.0, no top-k or top-p cut (the API's defaults), ``repetitions`` attempts
per prompt (GenderBench's default harness: JobsLum 5, Direct 1, Inventories 5, GestCreative 4,
BusinessVocabulary 3).
Attempt r of every prompt is drawn with seed ``repetition_seed(seed, r)``; the transformers engine
seeds one generator per (seed, prompt), so an attempt depends on neither the batch nor the worker that ran it, and the
result cache (``lm.generate`` goes through it) keys each one by prompt, decoding and seed: a re-run
generates nothing again.

Token limits. GenderBench allows 300 new tokens. A character profile runs to the limit (SmolLM2-135M's
did on 24 of 24 occupations) and JobsLum's evaluator counts pronouns in the whole of it, so a
shorter limit can change an evaluation; a profile names its character in its first sentences,
though, and ``JOBS_LUM_MAX_NEW_TOKENS`` = 96 keeps the generation cheap: on those 24 profiles
sampled to 300 tokens, the first 96 tokens were evaluated as the whole profile for 22 (one turned
from male to female after token 192, one was undetected until token 128). Direct's evaluator reads
"yes"/"no" anywhere in the answer (a later "no" after a "yes" makes it undetected); its answers are
short (52 tokens on average) and ``DIRECT_MAX_NEW_TOKENS`` = 64 evaluated 39 of 40 answers as the
300-token answer did. Both limits are in each result's breakdown (``generation``), with the share
of undetected attempts they leave (``undetected_rate_attempts``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics.result import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.models.protocol import GeneratingModel
from bias_core.probes.base import Probe
from bias_core.probes.genderbench_characters import INVENTORY_NAMES

GENDERBENCH_MAX_TOKENS = 300  # generators/async_api.py's max_tokens
JOBS_LUM_MAX_NEW_TOKENS = 96
DIRECT_MAX_NEW_TOKENS = 64
GEST_MAX_NEW_TOKENS = 64
# Isear asks for "one word only": its evaluator reads every token, so a longer answer naming a
# second emotion is undetected; Direct's limit keeps what a short answer says
ISEAR_MAX_NEW_TOKENS = 64
# A repetition's seed: ``REPETITION_STRIDE * seed + r``, so two runs' seeds never share an attempt.
REPETITION_STRIDE = 1000


@dataclass(frozen=True)
class Generation:
    """How a probe's attempts are generated: ``repetitions`` per prompt under ``decoding``."""

    repetitions: int
    decoding: DecodingConfig

    def at_genderbench_length(self) -> Generation:
        """The same sampling at GenderBench's own limit of 300 new tokens (--genderbench-full)."""
        return Generation(self.repetitions, dataclasses.replace(self.decoding, max_new_tokens=GENDERBENCH_MAX_TOKENS))

    def describe(self) -> dict[str, Any]:
        return {"repetitions": self.repetitions, "decoding": self.decoding.as_key(),
                "genderbench_max_tokens": GENDERBENCH_MAX_TOKENS,
                "seeds": f"attempt r of every prompt: seed {REPETITION_STRIDE} * run seed + r, one generator per "
                         "(seed, prompt)"}


def _sampled(max_new_tokens: int) -> DecodingConfig:
    return DecodingConfig(max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)


JOBS_LUM_GENERATION = Generation(repetitions=5, decoding=_sampled(JOBS_LUM_MAX_NEW_TOKENS))
DIRECT_GENERATION = Generation(repetitions=1, decoding=_sampled(DIRECT_MAX_NEW_TOKENS))
# Inventories and GestCreative ask for the same kind of character profile, read by the same
# evaluator: JobsLum's token limit, and GenderBench's default harness's repetitions (5 and 4).
INVENTORIES_GENERATION = Generation(repetitions=5, decoding=_sampled(JOBS_LUM_MAX_NEW_TOKENS))
GEST_CREATIVE_GENERATION = Generation(repetitions=4, decoding=_sampled(JOBS_LUM_MAX_NEW_TOKENS))
# Gest: each of a sentence's six option orders once (GestProbe's default num_repetitions 1)
GEST_GENERATION = Generation(repetitions=1, decoding=_sampled(GEST_MAX_NEW_TOKENS))
# Isear: each event once per gender (IsearProbe's default num_repetitions 1)
ISEAR_GENERATION = Generation(repetitions=1, decoding=_sampled(ISEAR_MAX_NEW_TOKENS))
# Dreaddit: each post twice per gender (the default harness's DreadditProbe(num_repetitions=2));
# "Answer with just yes or no": Direct's limit
DREADDIT_GENERATION = Generation(repetitions=2, decoding=_sampled(DIRECT_MAX_NEW_TOKENS))


def repetition_seed(seed: int, repetition: int) -> int:
    if not 0 <= repetition < REPETITION_STRIDE:
        raise ValueError(f"repetition {repetition} outside 0..{REPETITION_STRIDE - 1}")
    return REPETITION_STRIDE * int(seed) + repetition


def _variants(item) -> list[dict[str, Any]]:
    """The prompts an item is asked in (``meta["variants"]``: Gest's option orders, Isear's
    genders, ...), or its one prompt."""
    return item.meta.get("variants") or [{"prompt": item.prompt}]


def attempts(lm: GeneratingModel, probe: Probe, generation: Generation, seed: int = 0) -> dict[str, Any]:
    """{answers, variants, chat_template}: per item, each of its prompts' ``generation.repetitions``
    answers (prompt by prompt, repetition by repetition), the variant each answer was asked in,
    and whether the model's chat template was applied.

    Every attempt goes to the model in one call, each row under its repetition's seed: a prompt's
    repetitions and variants fill the batches together (on a CPU, five calls of 8 rows cost about
    what one of 40 does), and a row's answer is the one a call of its own would give."""
    if getattr(lm, "kind", "causal") != "causal":
        raise ProbeNotApplicable(f"GenderBench's probes read generated answers; {lm.name} is a {lm.kind} model. "
                                 "Fix: audit a causal (generative) LM.")
    k = len(_variants(probe.items[0])) if probe.items else 0
    rows = [(i, j, r) for i in range(len(probe.items)) for j in range(k) for r in range(generation.repetitions)]
    prompts = [_variants(probe.items[i])[j]["prompt"] for i, j, _ in rows]
    contexts = [lm.render_chat(p) for p in prompts]
    where = f"{k} prompts per item, " if k > 1 else ""
    out = lm.generate(contexts, generation.decoding, seed=[repetition_seed(seed, r) for _, _, r in rows],
                      desc=f"{probe.name}: {len(probe.items)} items, {where}{generation.repetitions} attempt(s) each")
    answers: list[list[str]] = [[] for _ in probe.items]
    asked: list[list[dict[str, Any]]] = [[] for _ in probe.items]
    for (i, j, _), answer in zip(rows, out):
        answers[i].append(answer)
        asked[i].append(_variants(probe.items[i])[j])
    return {"answers": answers, "variants": asked, "chat_template": any(c != p for c, p in zip(contexts, prompts))}


def _per_attempt(run: Mapping[str, Any], field: str) -> list[list[Any]]:
    """Each answer's variant's ``field`` (its prompt's option order, gender, ...), item by item."""
    return [[variant[field] for variant in item] for item in run["variants"]]


def _how(generation: Generation, chat: bool) -> dict[str, Any]:
    template = "applied: one user turn and the generation prompt" if chat else "none: the model has no chat template"
    return {"generation": {**generation.describe(), "chat_template": template},
            "definition": {"genderbench_chat_template": "applied" if chat else "none",
                           "genderbench_decoding": (f"sampled at temperature {generation.decoding.temperature:.1f}, "
                                                    f"{generation.repetitions} attempt(s) per prompt, at most "
                                                    f"{generation.decoding.max_new_tokens} new tokens")}}


def _compute(run: Callable[..., Any], probe: Probe, metrics, arguments: dict[str, Any], how: dict[str, Any],
             seed: int) -> dict[str, MetricResult | Exception]:
    """Each metric from the same attempts. A metric GenderBench leaves undefined on these answers
    (NaN: ``MetricUndefined``, a skip) or cannot compute (another ValueError, an error) is that
    row's alone; the others stand."""
    out: dict[str, MetricResult | Exception] = {}
    for name, compute in (metrics or catalogue.computed_by(run, probe.name)).items():
        try:
            result = compute(**arguments, ids=probe.ids, prompts=probe.prompts, seed=seed)
        except ValueError as exc:
            out[name] = exc
            continue
        result.breakdown.update(how)
        out[name] = result
    return out


def run_jobs_lum(lm: GeneratingModel, probe: Probe, seed: int = 0,
                 metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                 generation: Generation = JOBS_LUM_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Every JobsLum metric of ``metrics`` (default: those the catalogue declares of this runner)
    from one set of attempts: the character profiles, each evaluated by its pronouns."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "stereotype": [item.meta["stereotype"] for item in probe.items],
                 "pool": probe.items[0].meta["pool"] if probe.items else None}
    return _compute(run_jobs_lum, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_direct(lm: GeneratingModel, probe: Probe, seed: int = 0,
               metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
               generation: Generation = DIRECT_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Direct's metrics from one attempt per statement, each evaluated as a yes or a no."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "sources": [item.meta["source"] for item in probe.items]}
    return _compute(run_direct, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_inventories(lm: GeneratingModel, probe: Probe, seed: int = 0,
                    metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                    generation: Generation = INVENTORIES_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Inventories' metrics from one set of character profiles, each evaluated by its pronouns;
    the pool's inventories go with them (a sample may miss one)."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "sources": [item.meta["source"] for item in probe.items],
                 "genders": [item.meta["gender"] for item in probe.items], "groups": INVENTORY_NAMES}
    return _compute(run_inventories, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_gest_creative(lm: GeneratingModel, probe: Probe, seed: int = 0,
                      metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                      generation: Generation = GEST_CREATIVE_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """GestCreative's metrics from one set of character profiles written from GEST's mottos."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "stereotypes": [item.meta["stereotype_id"] for item in probe.items]}
    return _compute(run_gest_creative, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_gest(lm: GeneratingModel, probe: Probe, seed: int = 0,
             metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
             generation: Generation = GEST_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Gest's metric from every option order of every sentence, each answer read as the option of
    its one letter."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "options": _per_attempt(run, "options"),
                 "stereotypes": [item.meta["stereotype_id"] for item in probe.items]}
    return _compute(run_gest, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


# DiversityMedQa and RelationshipLevy ask for an answer that starts with its letter, as Gest's
# does: Gest's limit. Up to GenderBench's 300 tokens an answer may yet name another letter (then
# undetected) or its first one (then detected): the limit can change an evaluation, and the rows
# show the share it leaves undetected. On SmolLM2-135M 35 of 36 DiversityMedQa attempts and 20 of
# 24 RelationshipLevy attempts were evaluated at 64 tokens as at 300 (docs/audits/genderbench.md).
MED_QA_MAX_NEW_TOKENS = 64
LEVY_MAX_NEW_TOKENS = 64
# each prompt once (GenderBench's default harness: DiversityMedQaProbe(), RelationshipLevyProbe(sample_k=3_000))
DIVERSITY_MED_QA_GENERATION = Generation(repetitions=1, decoding=_sampled(MED_QA_MAX_NEW_TOKENS))
RELATIONSHIP_LEVY_GENERATION = Generation(repetitions=1, decoding=_sampled(LEVY_MAX_NEW_TOKENS))


def run_diversity_med_qa(lm: GeneratingModel, probe: Probe, seed: int = 0,
                         metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                         generation: Generation = DIVERSITY_MED_QA_GENERATION,
                         full: bool = False) -> dict[str, MetricResult | Exception]:
    """DiversityMedQa's metrics from every option order of every question, about a male and a
    female patient, each answer read as correct or not."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"],
                 "correct_options": _per_attempt(run, "correct_option"), "is_male": _per_attempt(run, "is_male")}
    return _compute(run_diversity_med_qa, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_relationship_levy(lm: GeneratingModel, probe: Probe, seed: int = 0,
                          metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                          generation: Generation = RELATIONSHIP_LEVY_GENERATION,
                          full: bool = False) -> dict[str, MetricResult | Exception]:
    """RelationshipLevy's metrics from both orders of every couple, each answer read as the man or
    the woman."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "options": _per_attempt(run, "options")}
    return _compute(run_relationship_levy, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_isear(lm: GeneratingModel, probe: Probe, seed: int = 0,
              metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
              generation: Generation = ISEAR_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Isear's metric from each event asked once per gender, each answer read as one emotion."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "genders": _per_attempt(run, "gender")}
    return _compute(run_isear, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


def run_dreaddit(lm: GeneratingModel, probe: Probe, seed: int = 0,
                 metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                 generation: Generation = DREADDIT_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Dreaddit's metric from each post judged for each writer's gender, each answer read as yes or no."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "genders": _per_attempt(run, "gender"),
                 "stressed": [item.meta["contains_stress"] for item in probe.items]}
    return _compute(run_dreaddit, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


# HiringBloomberg: each of an item's two gender-swapped prompts once (the default harness's
# HiringBloombergProbe(), num_repetitions 1). Its evaluator reads the first of the prompt's names
# the answer gives: an answer to a shorter limit is the start of the one to a longer (same seed),
# and the first whole name in a start is the first name of the whole answer, so the limit can only
# leave an answer without a name (undetected), never change which gender comes first (SmolLM2's
# 64- and 300-token answers to 12 prompts were evaluated alike: docs/audits/genderbench.md).
HIRING_BLOOMBERG_MAX_NEW_TOKENS = 64
HIRING_BLOOMBERG_GENERATION = Generation(repetitions=1, decoding=_sampled(HIRING_BLOOMBERG_MAX_NEW_TOKENS))


def run_hiring_bloomberg(lm: GeneratingModel, probe: Probe, seed: int = 0,
                         metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                         generation: Generation = HIRING_BLOOMBERG_GENERATION,
                         full: bool = False) -> dict[str, MetricResult | Exception]:
    """HiringBloomberg's metrics from both name orders of every item, each answer read as the
    gender of the first candidate it names."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "male_names": [item.meta["male_names"] for item in probe.items],
                 "female_names": [item.meta["female_names"] for item in probe.items],
                 "roles": [item.meta["role"] for item in probe.items],
                 "races": [item.meta["race"] for item in probe.items]}
    return _compute(run_hiring_bloomberg, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)


# BusinessVocabulary: each letter three times (the default harness's BusinessVocabularyProbe(num_repetitions=3)).
# Its evaluator counts inventory words in the whole letter, so a limit below GenderBench's 300
# tokens counts fewer words: it changes the counts, and with them (the smoothing of 5 per side
# weighs more against fewer words) the rates; it measures the vocabulary of a letter's first 128
# tokens, not of the whole letter. BUSINESS_VOCABULARY_MAX_NEW_TOKENS = 128 keeps the default
# audit's letters cheap (a quarter of the 300-token cost); --genderbench-full restores 300.
# Measured on SmolLM2-135M (8 items x 3 letters, seed 0; each 128-token letter the start of the
# same seed's 300-token one): 147 inventory-word hits at 128 tokens against 226 at 300 (65%),
# masculine share of the hits 0.585 against 0.628, mean_diff 0.116 [0.074, 0.150] against
# 0.102 [0.041, 0.146]; 60 s against 249 s on one torch thread (docs/audits/genderbench.md).
BUSINESS_VOCABULARY_MAX_NEW_TOKENS = 128
BUSINESS_VOCABULARY_GENERATION = Generation(repetitions=3, decoding=_sampled(BUSINESS_VOCABULARY_MAX_NEW_TOKENS))


def run_business_vocabulary(lm: GeneratingModel, probe: Probe, seed: int = 0,
                            metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                            generation: Generation = BUSINESS_VOCABULARY_GENERATION,
                            full: bool = False) -> dict[str, MetricResult | Exception]:
    """BusinessVocabulary's metric from three letters per name and template, each read for the
    inventories' masculine and feminine words."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    arguments = {"answers": run["answers"], "is_male": [item.meta["is_male"] for item in probe.items],
                 "inventories": probe.items[0].meta["inventories"] if probe.items else {},
                 "keys": [item.meta["key"] for item in probe.items]}
    return _compute(run_business_vocabulary, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)
