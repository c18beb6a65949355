"""The association audits (issue 5): each probe loaded and run as its catalogue entry says.

Every runner talks to the model only through the scoring protocol (``sentence_logprob``,
``fill_probs``, ``topk_fills``, ``embed``), so one probe serves causal, masked and seq2seq
models; runners choose the paper's method for the model kind themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD
from bias_core.probes.disclosure import DEFAULT_ARTICLES
from bias_core.suites.base import Suite

# The DA-Gender paper evaluates Kurita and SEAT on its test split of targets and professions
# (the validation split tunes debiasing methods), so the audit does too.
PAPER_SPLIT = "test"


@dataclass
class AssociationAudit(Suite):
    causal_likelihood: str = DEFAULT_CAUSAL_LIKELIHOOD
    articles: str = DEFAULT_ARTICLES  # DA-Gender's upstream text has wrong articles: --articles

    def probe_options(self) -> dict[str, Any]:
        return {"articles": self.articles, "split": PAPER_SPLIT}

    def runner_inputs(self, probe_name: str) -> dict[str, Callable[[], Any]]:
        # Runners of probes whose papers compare a causal LM's sentences by likelihood take
        # ``causal`` ("mean" per token, the papers' GPT-2 code, or "total"): --causal-likelihood.
        return {"causal": lambda: self.causal_likelihood}
