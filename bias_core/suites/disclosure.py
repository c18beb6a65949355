"""The disclosure audit: GAS on greedy continuations, GLD and ADD on raw next-token probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bias_core.lexicon import FEMALE_WORDS, MALE_WORDS, gendered_words
from bias_core.metrics import MetricResult
from bias_core.metrics import disclosure as m
from bias_core.models.causal import CausalLM, DecodingConfig
from bias_core.probes.base import Probe
from bias_core.probes.disclosure import load_probe

# Greedy decoding, 50 new tokens: the paper's setting for explicit disclosure.
PAPER_DECODING = DecodingConfig(max_new_tokens=50, do_sample=False)


@dataclass
class DisclosureAudit:
    lm: CausalLM
    data_dir: Path | None = None
    seed: int = 0
    decoding: DecodingConfig = PAPER_DECODING
    _probes: dict[str, Probe | Exception] = field(default_factory=dict)
    _results: dict[tuple[str, str], MetricResult] = field(default_factory=dict)

    def probe(self, name: str) -> Probe:
        # A probe that could not be loaded is remembered, so its other metrics skip at once.
        if name not in self._probes:
            try:
                self._probes[name] = load_probe(name, self.data_dir)
            except Exception as exc:
                self._probes[name] = exc
        found = self._probes[name]
        if isinstance(found, Exception):
            raise found
        return found

    def result(self, probe_name: str, metric: str) -> MetricResult:
        key = (probe_name, metric)
        if key not in self._results:
            self._results[key] = self._compute(self.probe(probe_name), metric)
        return self._results[key]

    def _compute(self, probe: Probe, metric: str) -> MetricResult:
        if metric == "GAS":
            texts = self.lm.generate(probe.prompts, self.decoding, seed=self.seed, desc=f"{probe.name}: generating")
            return m.gas(texts, gendered_words(), ids=probe.ids, prompts=probe.prompts, seed=self.seed)
        words = list(FEMALE_WORDS) + list(MALE_WORDS)
        probs = self.lm.word_probs(probe.prompts, words, desc=f"{probe.name}: next-word probabilities")
        p_female, p_male = probs[:, : len(FEMALE_WORDS)], probs[:, len(FEMALE_WORDS) :]
        fn = {"GLD": m.gld, "ADD": m.add}[metric]
        return fn(p_female, p_male, ids=probe.ids, prompts=probe.prompts, seed=self.seed)
