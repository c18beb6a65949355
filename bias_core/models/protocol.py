"""The model seam: what runners, suites, mitigation, reports and the regression gate ask of a model.

Two layers, one surface:

- ``Engine`` is what a backend implements (docs/engines.md, "Adding a model backend"): the
  transformers engine (models/engines/hf/causal.py, models/engines/hf/masked.py), vLLM in process (engines/vllm.py), an
  OpenAI-compatible server (engines/openai.py), or a third party's. It computes; it never
  caches.
- ``ScoringModel`` is what ``load_model`` returns and the rest of bias_core uses: an engine
  inside the one result cache (cached.py), or a precision combinator of such (models/precision/modes.py).

Every scoring method takes ``desc``, the progress bar's label. Sentence and pair scores are
natural-log likelihoods from raw logits; probabilities are plain floats in [0, 1]. An engine
declares what it can do in ``capabilities``; asking for something it cannot do raises
``EngineCannot`` (a ``ProbeNotApplicable``: the audit test is skipped with the reason).
Both protocols are ``runtime_checkable``: ``isinstance`` checks the members are there
(tests/test_model_protocol.py), not their signatures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bias_core.errors import ProbeNotApplicable

# What an engine may declare it can do. Methods and the capability each needs:
#   generate                                    -> "generation"
#   loglikelihood, sentence_logprob             -> "scoring"
#   word_probs; fill_probs at an end-of-text slot (causal) -> "next_word"
#   topk_fills at an end-of-text slot (causal)  -> "topk"
#   fill_probs, topk_fills at a mid-sentence slot (masked, seq2seq) -> "mask_filling"
#   embed                                       -> "embeddings"
#   training()                                  -> "training" (the torch module, for fine-tuning)
#   with_adapter()                              -> "adapters" (a PEFT LoRA folder on the model)
CAPABILITIES = ("generation", "scoring", "next_word", "topk", "mask_filling", "embeddings", "training", "adapters")
WHAT = {"generation": "generate text", "scoring": "score log-likelihoods", "next_word": "give next-word probabilities",
        "topk": "list the most probable next words", "mask_filling": "fill a mid-sentence [MASK] slot",
        "embeddings": "give sentence encodings (hidden states)", "training": "fine-tune the model",
        "adapters": "apply a LoRA adapter"}


class EngineCannot(ProbeNotApplicable):
    """The run's engine lacks a capability a probe needs: that probe is skipped, with the reason."""


def cannot(engine_name: str, capability: str, why: str = "") -> EngineCannot:
    return EngineCannot(
        f"the {engine_name} engine cannot {WHAT.get(capability, capability)}{' (' + why + ')' if why else ''}, "
        f"which this probe needs. Fix: audit this probe with --engine transformers (the reference engine).")


@dataclass(frozen=True)
class EngineInfo:
    """What a run card, JUnit properties and results.json say about the engine; the regression
    gate pairs a candidate and a baseline only when ``engine`` and ``dtype`` agree."""

    engine: str  # "transformers", "vllm", "openai", or a third party's name
    version: str = ""
    dtype: str = ""
    device: str = ""
    parallelism: dict[str, int] = field(default_factory=dict)  # e.g. {"tensor_parallel_size": 2}
    endpoint: str = ""  # a served model's URL (never a key)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        extra = ", ".join(f"{k.removesuffix('_size').replace('_', ' ')} {v}" for k, v in self.parallelism.items() if v != 1)
        head = f"{self.engine} {self.version}".strip()
        return ", ".join(x for x in (head, self.dtype, extra, self.endpoint) if x)


@runtime_checkable
class Engine(Protocol):
    name: str
    kind: str  # "causal", "masked" or "seq2seq"
    fingerprint: str  # the weights (and adapter) the numbers come from
    tokenizer_fingerprint: str
    capabilities: frozenset[str]
    batch_size: int

    def cache_identity(self) -> dict[str, str]:
        """Everything besides a request's inputs that fixes its result (the cache key's model part)."""

    def info(self) -> EngineInfo: ...

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text encoded without special tokens."""

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens ``sentence_logprob`` scores per text (what per-token scores divide by)."""

    def render_chat(self, text: str) -> str:
        """What a chat model is given for one user turn (the text itself for a base model)."""

    def sentence_logprob(self, sentences: Sequence[str], desc: str = ...) -> np.ndarray:
        """log P(sentence) per sentence (a masked LM: pseudo-log-likelihood)."""

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = ...) -> list[float]:
        """log P(continuation | context) per (context, continuation)."""

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = ...) -> np.ndarray:
        """P(word is the next word after the prompt), prompts x words."""

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = ...) -> np.ndarray:
        """P(word at the text's MASK slot), texts x words."""

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = ...) -> list[list[tuple[str, float]]]:
        """The k most probable whole words at each text's MASK slot, with their probabilities."""

    def embed(self, sentences: Sequence[str], desc: str = ...) -> np.ndarray:
        """One encoding per sentence, sentences x hidden size."""

    def generate(self, prompts: Sequence[str], config: Any = None, seed: Any = 0, desc: str = ...) -> list[str]:
        """One continuation per prompt under the decoding ``config`` (a DecodingConfig); ``seed``
        one for all prompts or one per prompt (``decoding.Seeds``): a sampled row depends only on
        its (seed, prompt), never on the rows decoded with it."""


@runtime_checkable
class ScoringModel(Engine, Protocol):
    """A loaded model as bias_core uses it: an engine's surface plus the cache's statistics, the
    training accessor and adapters."""

    def cache_stats(self) -> dict[str, Any]: ...

    def training(self) -> Any:
        """A ``TrainingAccess`` (training.py): the torch module and tokenizer, for fine-tuning;
        ``EngineCannot`` without the "training" capability."""

    def with_adapter(self, folder: str, tag: str) -> "ScoringModel":
        """This model with a PEFT LoRA adapter applied; ``EngineCannot`` without "adapters"."""


# Kept for the runners' annotations: a model that generates is a ScoringModel with "generation".
GeneratingModel = ScoringModel


def can(lm: Any, capability: str) -> bool:
    return capability in getattr(lm, "capabilities", frozenset())
