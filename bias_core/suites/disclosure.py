"""The disclosure audit: GAS on greedy continuations, GLD and ADD on raw next-token probabilities
(runners in bias_core/runners/disclosure.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.probes.disclosure import DEFAULT_ARTICLES
from bias_core.probes.lexicon import DEFAULT_LEXICON, Lexicon, get_lexicon
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

    def probe_options(self) -> dict[str, Any]:
        return {"articles": self.articles}

    def runner_inputs(self, probe_name: str) -> dict[str, Callable[[], Any]]:
        return {"lexicon": lambda: self.lexicon, "decoding": lambda: self.decoding,
                "prompt_transform": lambda: self.prompt_transform}

    def definition(self) -> dict[str, object]:
        """Which of the paper's or the project's choices these numbers follow (for reports)."""
        return {"lexicon": self.lexicon.name, "articles": self.articles}

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        kind = getattr(self.lm, "kind", "causal")
        if kind != "causal":
            raise ProbeNotApplicable(f"conditional-generation disclosure needs a causal LM; {self.lm.name} is {kind}")
        result = super().compute(probe_name, metric)
        result.breakdown["definition"] = self.definition()
        return result
