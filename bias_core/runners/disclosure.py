"""The disclosure metrics on a loaded causal model (Dong et al. 2024): GAS on continuations, GLD,
ADD and every other metric naming ``run_next_word`` on the raw next-word probabilities of the
gender words (never a warped sampling distribution)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from bias_core.metrics.disclosure import gas
from bias_core.metrics.result import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.models.protocol import GeneratingModel
from bias_core.probes.base import Probe
from bias_core.probes.lexicon import Lexicon


def _prompts(probe: Probe, prompt_transform: Callable[[str], str] | None) -> Sequence[str]:
    # a mitigation variant's instruction rewrites every prompt; item ids stay, so results pair
    return probe.prompts if prompt_transform is None else [prompt_transform(p) for p in probe.prompts]


def run_gas(lm: GeneratingModel, probe: Probe, lexicon: Lexicon, decoding: DecodingConfig,
            prompt_transform: Callable[[str], str] | None = None, seed: int = 0) -> MetricResult:
    """GAS of the continuations ``lm`` generates under ``decoding`` (one batched call), with
    ``breakdown["by_gender"]``: which gender the disclosures go to (Dong et al.'s Table 10)."""
    prompts = _prompts(probe, prompt_transform)
    texts = lm.generate(prompts, decoding, seed=seed, desc=f"{probe.name}: generating")
    return gas(texts, lexicon.words(), ids=probe.ids, prompts=prompts, seed=seed,
               female_words=lexicon.female_words, male_words=lexicon.male_words)


def run_next_word(lm: GeneratingModel, probe: Probe, lexicon: Lexicon, metrics: Mapping[str, Callable[..., MetricResult]],
                  prompt_transform: Callable[[str], str] | None = None, seed: int = 0) -> dict[str, MetricResult]:
    """Every metric of the next word's probabilities on the lexicon's female and male words (GLD,
    ADD: ``metrics`` maps the names of those that name this runner to their pure functions, each
    ``f(p_female, p_male, ids=, prompts=, seed=, female_words=, male_words=)``), from one
    ``word_probs`` call."""
    prompts = _prompts(probe, prompt_transform)
    female, male = lexicon.female_words, lexicon.male_words
    probs = lm.word_probs(prompts, [*female, *male], desc=f"{probe.name}: next-word probabilities")
    p_female, p_male = probs[:, : len(female)], probs[:, len(female) :]
    labels = {"ids": probe.ids, "prompts": prompts, "seed": seed, "female_words": female, "male_words": male}
    return {name: compute(p_female, p_male, **labels) for name, compute in metrics.items()}
