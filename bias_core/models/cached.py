"""The one result cache, around any engine (as lm-evaluation-harness's ``CachingLM`` wraps any ``LM``).

``CachedModel(engine, cache)`` is what ``load_model`` returns: each scoring call looks its
requests up under keys made of the engine's ``cache_identity()`` (its fingerprint: weights,
tokenizer, dtype, and for other engines than transformers the engine itself), the operation and
the request, and hands only the misses to the engine, in one call (``batching.cached_map``).
An engine therefore never caches, and a new backend gets caching, capability checks and the
interrupted-run guarantees of the cache for free.

Capabilities are checked here, before any lookup: a method the engine does not declare raises
``EngineCannot`` (the audit test is skipped, saying why). Engine internals stay behind
``engine``, which only code under bias_core/models/ touches (tests/test_import_rules.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from bias_core.models.batching import cached_map, cached_map_chunked
from bias_core.models.protocol import EngineInfo, cannot
from bias_core.storage.result_cache import ResultCache


def _matrix(rows: Sequence[Sequence[float]], n: int, width: int | None = None) -> np.ndarray:
    out = np.asarray(rows, dtype=np.float64)
    if not n:
        return out.reshape(0, width if width is not None else 0)
    return out


class CachedModel:
    """An engine inside the result cache: the ``ScoringModel`` surface (models/protocol.py)."""

    def __init__(self, engine: Any, cache: ResultCache | None = None):
        self.engine = engine
        self.cache = cache if cache is not None else ResultCache(None, enabled=False)
        # What the report says about the precision of the numbers (models/precision/modes.py sets it).
        self.precision = getattr(engine, "precision", "fp32")
        self.precision_note = getattr(engine, "precision_note", "")

    def __repr__(self) -> str:
        return f"CachedModel({self.engine!r})"

    # ----- what the engine declares --------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def kind(self) -> str:
        return self.engine.kind

    @property
    def fingerprint(self) -> str:
        return self.engine.fingerprint

    @property
    def tokenizer_fingerprint(self) -> str:
        return self.engine.tokenizer_fingerprint

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset(self.engine.capabilities)

    @property
    def batch_size(self) -> int:
        return self.engine.batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self.engine.batch_size = value

    @property
    def load_notes(self) -> tuple[str, ...]:
        """What loading chose or dropped, for the run card (models/weights/load_report.py)."""
        return tuple(getattr(self.engine, "load_notes", ()))

    @property
    def stats(self) -> dict[str, int]:
        """Work counters of the engine (new tokens and the like), for throughput figures."""
        return getattr(self.engine, "stats", {})

    def info(self) -> EngineInfo:
        return self.engine.info()

    def cache_identity(self) -> dict[str, str]:
        return dict(self.engine.cache_identity())

    def cache_stats(self) -> dict[str, Any]:
        """This cache's hits and misses; ``rejected``: entries found that did not prove their key and
        value (storage/result_cache.py), counted among the misses and recomputed."""
        c = self.cache
        return {"hits": c.hits, "misses": c.misses, "rejected": c.rejected, "rejected_old_format": c.rejected_old_format,
                "enabled": c.enabled}

    def precision_info(self) -> dict[str, Any]:
        return {"mode": self.precision, "note": self.precision_note}

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [int(n) for n in self.engine.token_counts(list(texts))]

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.engine.scored_token_counts(list(texts)), dtype=np.int64)

    def render_chat(self, text: str) -> str:
        return self.engine.render_chat(text)

    def _need(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise cannot(self.info().engine, capability, getattr(self.engine, "why_not", {}).get(capability, ""))

    # ----- training and adapters -------------------------------------------------------------------
    def training(self) -> Any:
        """The torch module, tokenizer and device for fine-tuning (``TrainingAccess``)."""
        from bias_core.models.training import TrainingAccess

        self._need("training")
        return TrainingAccess(self)

    def with_engine(self, engine: Any) -> "CachedModel":
        """Another engine (an adapted or debiased model) in this model's cache."""
        out = CachedModel(engine, self.cache)
        out.precision, out.precision_note = self.precision, self.precision_note
        return out

    def with_adapter(self, folder: str, tag: str) -> "CachedModel":
        """This model with the PEFT adapter in ``folder`` applied; ``tag`` joins the fingerprint."""
        self._need("adapters")
        return self.with_engine(self.engine.with_adapter(str(folder), tag))

    # ----- cached scoring -----------------------------------------------------------------------
    def cached(self, op: str, parts: Sequence[dict[str, Any]], compute: Callable[[list[int]], Sequence[Any]]) -> list[Any]:
        """Each request's cached value, computing the misses with ``compute(indices)`` (values: JSON)."""
        identity = self.cache_identity()
        keys = [{"op": op, **identity, **p} for p in parts]
        # An engine whose items are independent (one request each) stores as it goes: a server
        # that goes away mid-call costs at most one chunk of answers.
        chunk = getattr(self.engine, "cache_chunk", None)
        if chunk:
            return cached_map_chunked(self.cache, keys, compute, chunk)
        return cached_map(self.cache, keys, compute)

    def sentence_logprob(self, sentences: Sequence[str], desc: str = "sentence log-probabilities") -> np.ndarray:
        self._need("scoring")
        sentences = list(sentences)
        values = self.cached("sentence_logprob", [{"sentence": s} for s in sentences],
                             lambda idx: _floats(self.engine.sentence_logprob([sentences[i] for i in idx], desc=desc)))
        return np.asarray(values, dtype=np.float64).reshape(len(sentences))

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "scoring") -> list[float]:
        self._need("scoring")
        requests = [(str(c), str(w)) for c, w in requests]
        values = self.cached("loglikelihood", [{"context": c, "continuation": w} for c, w in requests],
                             lambda idx: _floats(self.engine.loglikelihood([requests[i] for i in idx], desc=desc)))
        return [float(x) for x in values]

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "word probabilities") -> np.ndarray:
        self._need("next_word")
        prompts, words = list(prompts), list(words)
        rows = self.cached("word_probs", [{"prompt": p, "words": words} for p in prompts],
                           lambda idx: _rows(self.engine.word_probs([prompts[i] for i in idx], words, desc=desc)))
        return _matrix(rows, len(prompts), len(words)).reshape(len(prompts), len(words))

    def _slot_capability(self, base: str) -> str:
        # A causal LM fills only a slot that ends the text (the next word); others a masked slot.
        return base if self.kind == "causal" else "mask_filling"

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "fill probabilities") -> np.ndarray:
        self._need(self._slot_capability("next_word"))
        texts, words = list(texts), list(words)
        rows = self.cached("fill_probs", [{"text": t, "words": words} for t in texts],
                           lambda idx: _rows(self.engine.fill_probs([texts[i] for i in idx], words, desc=desc)))
        return _matrix(rows, len(texts), len(words)).reshape(len(texts), len(words))

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "top-k fills") -> list[list[tuple[str, float]]]:
        self._need(self._slot_capability("topk"))
        texts = list(texts)
        rows = self.cached("topk_fills", [{"text": t, "k": int(k)} for t in texts],
                           lambda idx: [[[str(w), float(p)] for w, p in row]
                                        for row in self.engine.topk_fills([texts[i] for i in idx], k, desc=desc)])
        return [[(str(w), float(p)) for w, p in row] for row in rows]

    def embed(self, sentences: Sequence[str], desc: str = "embedding") -> np.ndarray:
        self._need("embeddings")
        sentences = list(sentences)
        rows = self.cached("embed", [{"sentence": s} for s in sentences],
                           lambda idx: _rows(self.engine.embed([sentences[i] for i in idx], desc=desc)))
        return _matrix(rows, len(sentences))

    def generate(self, prompts: Sequence[str], config: Any = None, seed: Any = 0, desc: str = "generating") -> list[str]:
        from bias_core.models.decoding import DecodingConfig, row_seeds

        self._need("generation")
        config = config or DecodingConfig()
        prompts = list(prompts)
        seeds = row_seeds(seed, len(prompts))
        values = self.cached("generate", [{"prompt": p, "config": config.as_key(), "seed": s}
                                          for p, s in zip(prompts, seeds)],
                             lambda idx: [str(x) for x in self.engine.generate(
                                 [prompts[i] for i in idx], config, seed=[seeds[i] for i in idx], desc=desc)])
        return [str(x) for x in values]


def _floats(values: Any) -> list[float]:
    return [float(x) for x in np.asarray(values, dtype=np.float64).reshape(-1)]


def _rows(values: Any) -> list[list[float]]:
    return [[float(x) for x in row] for row in np.asarray(values, dtype=np.float64)]

