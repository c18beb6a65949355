"""The scoring protocol: what runners, suites and mitigation ask of a loaded model.

``ScoringModel`` is what every model kind implements (causal.py's ``CausalLM``, masked.py's
``MaskedLM`` for kinds "masked" and "seq2seq", precision.py's ``ExactLM``); ``GeneratingModel``
adds what only a causal LM does (next-word probabilities and generation), which the disclosure,
GenderPair and mitigation audits need. Both are ``runtime_checkable``: ``isinstance`` checks that
the methods are there (tests/test_model_protocol.py), not their signatures.

Every method takes ``desc``, the progress bar's label. Sentence and pair scores are natural-log
likelihoods from raw logits; probabilities are plain floats in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ScoringModel(Protocol):
    name: str
    kind: str  # "causal", "masked" or "seq2seq"
    fingerprint: str
    tokenizer: Any
    batch_size: int

    def sentence_logprob(self, sentences: Sequence[str], desc: str = ...) -> np.ndarray:
        """log P(sentence) per sentence (a masked LM: pseudo-log-likelihood)."""

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = ...) -> list[float]:
        """log P(continuation | context) per (context, continuation)."""

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = ...) -> np.ndarray:
        """P(word at the text's MASK slot), texts x words."""

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = ...) -> list[list[tuple[str, float]]]:
        """The k most probable whole words at each text's MASK slot, with their probabilities."""

    def embed(self, sentences: Sequence[str], desc: str = ...) -> np.ndarray:
        """One encoding per sentence, sentences x hidden size."""


@runtime_checkable
class GeneratingModel(ScoringModel, Protocol):
    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = ...) -> np.ndarray:
        """P(word is the next word after the prompt), prompts x words."""

    def generate(self, prompts: Sequence[str], config: Any = None, seed: int = 0, desc: str = ...) -> list[str]:
        """One continuation per prompt under the decoding ``config`` (a DecodingConfig)."""
