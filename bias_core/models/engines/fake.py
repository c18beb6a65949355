"""A fake engine: the whole ``Engine`` protocol with no model, for tests, and the template for a
new backend (docs/engines.md, "Adding a model backend").

Every answer is a pure function of the request: a callable given to the constructor, or else a
deterministic stand-in derived from the text's CRC-32 (so a test can compare two calls, two
engines or a cached and an uncached run). Each call is recorded in ``calls`` as
``(method, inputs)``. ``capabilities`` decides what the engine admits to; the cache wrapper
(cached.py) refuses the rest with ``EngineCannot`` before any method here runs.

A real backend replaces the bodies of the scoring methods and keeps the rest: ``cache_identity``
must change whenever the numbers could (weights, tokenizer, dtype, engine version), and
``info`` is what the run card and the regression gate see.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bias_core.models.decoding import DecodingConfig, row_seeds
from bias_core.models.engines import EngineEntry
from bias_core.models.protocol import EngineInfo
from bias_core.probes.placeholders import MASK

DEFAULT_CAPABILITIES = {
    "causal": frozenset({"generation", "scoring", "next_word", "topk", "embeddings"}),
    "masked": frozenset({"scoring", "mask_filling", "embeddings"}),
    "seq2seq": frozenset({"scoring", "mask_filling", "embeddings"}),
}
_WORDS = ("he", "she", "they", "person", "thing", "doctor", "nurse", "friend")


def _unit(*parts: str) -> float:
    """A stable number in (0, 1) from the parts (CRC-32: the same on every machine and run)."""
    return (zlib.crc32("\x00".join(parts).encode("utf-8")) % 9973 + 1) / 9975.0


class FakeEngine:
    """A model-free engine answering from callables (or stand-ins); see the module doc."""

    def __init__(self, name: str = "fake", kind: str = "causal", *, capabilities: Sequence[str] | None = None,
                 sentence: Callable[[str], float] | None = None,
                 loglikelihood: Callable[[str, str], float] | None = None,
                 fill: Callable[[str, str], float] | None = None,
                 topk: Callable[[str, int], list[tuple[str, float]]] | None = None,
                 embed: Callable[[str], Sequence[float]] | None = None,
                 generate: Callable[[str, DecodingConfig, int], str] | None = None,
                 tokens: Callable[[str], list[str]] | None = None,
                 chat: Callable[[str], str] | None = None,
                 fingerprint: str = "fake:0", batch_size: int = 8):
        self.name, self.kind, self.fingerprint, self.batch_size = name, kind, fingerprint, batch_size
        self.tokenizer_fingerprint = f"{fingerprint}:tokens"
        self.capabilities = frozenset(capabilities if capabilities is not None else DEFAULT_CAPABILITIES[kind])
        self._sentence, self._loglikelihood, self._fill, self._topk = sentence, loglikelihood, fill, topk
        self._embed, self._generate, self._tokens, self._chat = embed, generate, tokens, chat
        self.calls: list[tuple[str, Any]] = []
        self.stats = {"new_tokens": 0}

    # ----- what the engine is ---------------------------------------------------------------------
    def cache_identity(self) -> dict[str, str]:
        return {"engine": "fake", "model": self.fingerprint, "tokenizer": self.tokenizer_fingerprint}

    def info(self) -> EngineInfo:
        return EngineInfo(engine="fake", version="1", dtype="float32", device="cpu")

    def _split(self, text: str) -> list[str]:
        return self._tokens(text) if self._tokens is not None else text.split()

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(self._split(t)) for t in texts]

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.token_counts(texts), dtype=np.int64)

    def render_chat(self, text: str) -> str:
        return self._chat(text) if self._chat is not None else text

    # ----- scoring -------------------------------------------------------------------------------
    def sentence_logprob(self, sentences: Sequence[str], desc: str = "") -> np.ndarray:
        self.calls.append(("sentence_logprob", list(sentences)))
        score = self._sentence or (lambda s: -len(self._split(s)) * (1.0 + _unit("s", s)))
        return np.asarray([float(score(s)) for s in sentences], dtype=np.float64)

    def _ll(self, context: str, continuation: str) -> float:
        if self._loglikelihood is not None:
            return float(self._loglikelihood(context, continuation))
        return math.log(_unit("ll", context, continuation)) * max(1, len(self._split(continuation)))

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "") -> list[float]:
        self.calls.append(("loglikelihood", list(requests)))
        return [self._ll(c, w) for c, w in requests]

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "") -> np.ndarray:
        self.calls.append(("word_probs", (list(prompts), list(words))))
        return np.asarray([[math.exp(self._ll(p, " " + w)) for w in words] for p in prompts], dtype=np.float64)

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "") -> np.ndarray:
        self.calls.append(("fill_probs", (list(texts), list(words))))
        if self._fill is not None:
            return np.asarray([[float(self._fill(t, w)) for w in words] for t in texts], dtype=np.float64)
        if self.kind == "causal":  # the slot ends the text: the next word's probability
            return np.asarray([[math.exp(self._ll(t.split(MASK)[0].rstrip(" "), " " + w)) for w in words]
                               for t in texts], dtype=np.float64)
        return np.asarray([[_unit("fill", t, w) / len(words) for w in words] for t in texts], dtype=np.float64)

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "") -> list[list[tuple[str, float]]]:
        self.calls.append(("topk_fills", (list(texts), k)))
        if self._topk is not None:
            return [list(self._topk(t, k))[:k] for t in texts]
        out = []
        for t in texts:
            probs = sorted(((_unit("topk", t, w) / len(_WORDS), w) for w in _WORDS), key=lambda x: (-x[0], x[1]))
            out.append([(w, p) for p, w in probs[:k]])
        return out

    def embed(self, sentences: Sequence[str], desc: str = "") -> np.ndarray:
        self.calls.append(("embed", list(sentences)))
        vec = self._embed or (lambda s: [_unit("embed", s, str(i)) for i in range(8)])
        rows = [list(map(float, vec(s))) for s in sentences]
        return np.asarray(rows, dtype=np.float64) if rows else np.zeros((0, 0))

    def generate(self, prompts: Sequence[str], config: Any = None, seed: Any = 0, desc: str = "") -> list[str]:
        config = config or DecodingConfig()
        self.calls.append(("generate", (list(prompts), config, seed)))
        make = self._generate or (lambda p, c, s: " " + " ".join(
            _WORDS[int(_unit("gen", p, str(s), str(i)) * len(_WORDS))] for i in range(min(3, c.max_new_tokens))))
        out = [str(make(p, config, s)) for p, s in zip(prompts, row_seeds(seed, len(prompts)))]
        self.stats["new_tokens"] += sum(len(self._split(o)) for o in out)
        return out


def load(spec: Any, opts: Any) -> FakeEngine:
    """``--engine fake`` (when registered): a fake engine named after the model."""
    return FakeEngine(name=spec.name, fingerprint=f"fake:{spec.name}")


ENGINE = EngineEntry(name="fake", load=load, summary="no model: deterministic stand-in answers (tests)",
                     describe=lambda opts: {"engine": "fake 1", "device": "cpu", "dtype": "float32"})
