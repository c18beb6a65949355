"""The disclosure audit: GAS on greedy continuations, GLD and ADD on raw next-token probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bias_core import catalogue
from bias_core.lexicon import DEFAULT_LEXICON, Lexicon, get_lexicon
from bias_core.metrics import MetricResult
from bias_core.metrics import disclosure as m
from bias_core.errors import ProbeNotApplicable
from bias_core.models.decoding import DecodingConfig
from bias_core.probes.base import Probe
from bias_core.probes.disclosure import DEFAULT_ARTICLES, load_probe
from bias_core.suites.base import Suite

# Greedy decoding, 50 new tokens: the paper's setting for explicit disclosure.
PAPER_DECODING = DecodingConfig(max_new_tokens=50, do_sample=False)


@dataclass
class DisclosureAudit(Suite):
    decoding: DecodingConfig = PAPER_DECODING
    # Instruction guiding rewrites every prompt; item ids stay, so results pair with the original's.
    prompt_transform: Callable[[str], str] | None = None
    # The paper's pronoun pairs and its verbatim template prompts unless the user chose otherwise.
    lexicon: Lexicon = field(default_factory=lambda: get_lexicon(DEFAULT_LEXICON))
    articles: str = DEFAULT_ARTICLES

    def load_probe(self, name: str) -> Probe:
        return load_probe(name, self.data_dir, self.articles)

    def definition(self) -> dict[str, object]:
        """Which of the paper's or the project's choices these numbers follow (for reports)."""
        return {"lexicon": self.lexicon.name, "articles": self.articles}

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        kind = getattr(self.lm, "kind", "causal")
        if kind != "causal":
            raise ProbeNotApplicable(f"conditional-generation disclosure needs a causal LM; {self.lm.name} is {kind}")
        result = self._compute(self.probe(probe_name), metric)
        result.breakdown["definition"] = self.definition()
        return result

    def _compute(self, probe: Probe, metric: str) -> MetricResult:
        prompts = probe.prompts if self.prompt_transform is None else [self.prompt_transform(p) for p in probe.prompts]
        if metric == "GAS":
            texts = self.lm.generate(prompts, self.decoding, seed=self.seed, desc=f"{probe.name}: generating")
            return m.gas(texts, self.lexicon.words(), ids=probe.ids, prompts=prompts, seed=self.seed)
        female, male = self.lexicon.female_words, self.lexicon.male_words
        probs = self.lm.word_probs(prompts, [*female, *male], desc=f"{probe.name}: next-word probabilities")
        p_female, p_male = probs[:, : len(female)], probs[:, len(female) :]
        spec = catalogue.spec(metric)
        if spec.family != "disclosure":
            raise KeyError(f"{metric} is not a disclosure metric")
        fn = spec.compute_function()  # GLD and ADD take the same word probabilities
        return fn(p_female, p_male, ids=probe.ids, prompts=prompts, seed=self.seed,
                  female_words=female, male_words=male)
