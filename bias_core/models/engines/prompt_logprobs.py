"""Scoring from per-token prompt log-probabilities: what the vLLM and the endpoint engines share.

Both engines see the model only through three primitives a subclass implements:

- ``_prompt_logprobs(seqs)``: for each token-id sequence, log P(token i | tokens before i) for
  every i >= 1 (position 0 has no context: vLLM and OpenAI-compatible servers report None there);
- ``_next_top(seqs, n)``: the n most probable next tokens after each sequence, with their
  log-probabilities;
- ``_generate_ids(seqs, config, seeds)``: each sequence's continuation as token ids (one seed per sequence).

Everything else is done here, with the transformers engine's own tokenization rules
(models/tokens.py): requests are tokenized locally and sent as token ids, so the server never
re-tokenizes (and never adds a second BOS: vllm #15420), and the context/continuation boundary
is where ``split_requests`` puts it. Log-probabilities must be the model's raw ones (vLLM's
``logprobs_mode`` "raw_logprobs"), never those of a temperature- or top-p-processed distribution.

Every log-probability used here is finite and at most ``answers.TOLERANCE`` above 0 (taken as
0), whichever engine gave it: a larger one is ``BadAnswer``, never a number. The endpoint
engine checks each answer of its server fully before it gets here (engines/answers.py); this
is the cheap check for all.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bias_core.errors import AuditUsageError, NonFiniteScores
from bias_core.models.decoding import DecodingConfig, row_seeds
from bias_core.models.engines.answers import TOLERANCE, BadAnswer
from bias_core.models.tokens import CausalTokens

# How deep the next-token list is read for top-k whole words: word pieces and special tokens
# are skipped, so k whole words need more than k tokens (SmolLM2's GBM prompts: see docs/engines.md).
TOP_DEPTH = 20


def row_seed(seed: int, prompt: str) -> int:
    """One sampling seed per (run seed, prompt), as the transformers engine's row generators:
    a sampled continuation does not depend on which other prompts are asked with it."""
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class PromptLogprobEngine(CausalTokens):
    """A causal LM scored through prompt log-probabilities; see the module doc."""

    kind = "causal"
    why_not = {"embeddings": "hidden states are not exposed", "mask_filling": "a causal LM fills only end-of-text slots",
               "training": "the model runs outside this process's torch", "adapters": "adapters are not supported"}
    top_depth = TOP_DEPTH
    progress = True

    # ----- what subclasses implement ---------------------------------------------------------------
    def _prompt_logprobs(self, seqs: list[list[int]], desc: str) -> list[list[float | None]]:
        raise NotImplementedError

    def _next_top(self, seqs: list[list[int]], n: int, desc: str) -> list[list[tuple[int, float]]]:
        raise NotImplementedError

    def _generate_ids(self, seqs: list[list[int]], config: DecodingConfig, seeds: list[int], prompts: list[str],
                      desc: str) -> list[list[int]]:
        raise NotImplementedError

    # ----- scoring ---------------------------------------------------------------------------------
    def _sum_after(self, requests: list[tuple[list[int], list[int]]], desc: str, texts: Sequence[str]) -> list[float]:
        """Sum of log P(cont | ctx) per (ctx ids, cont ids); identical sequences are asked once."""
        unique: dict[tuple[int, ...], int] = {}
        for ctx, cont in requests:
            if not ctx:
                raise AuditUsageError(f"{self.name}: a request with no context token cannot score its first token. "
                                      "Fix: use a tokenizer with a BOS or EOS token.")
            if not cont:
                raise ValueError("empty continuation")
            unique.setdefault(tuple(ctx) + tuple(cont), len(unique))
        rows = self._prompt_logprobs([list(s) for s in unique], desc) if unique else []
        out = []
        for (ctx, cont), text in zip(requests, texts):
            row = rows[unique[tuple(ctx) + tuple(cont)]]
            picked = row[len(ctx): len(ctx) + len(cont)]
            if len(picked) != len(cont) or any(v is None or not math.isfinite(v) for v in picked):
                raise NonFiniteScores(f"{self.name}: the engine gave no finite log-probability for every token of "
                                      f"{text[:160]!r} ({picked}). Fix: check the served model and its dtype.")
            out.append(float(sum(self._at_most_zero(float(v), text) for v in picked)))
        return out

    def _at_most_zero(self, value: float, text: str) -> float:
        if value > TOLERANCE:
            raise BadAnswer(f"{self.name}: the engine gave a log-probability of {value:+.6g} (above 0: a probability "
                            f"above 1) for a token of {text[:160]!r}. Fix: check the engine and the model it serves.")
        return min(value, 0.0)

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "scoring") -> list[float]:
        toks = self.split_requests(requests)
        for (ctx, cont), (context, _) in zip(toks, requests):
            self._check_length(ctx + cont, 0, context)
        return self._sum_after(toks, desc, [c + w for c, w in requests])

    def sentence_logprob(self, sentences: Sequence[str], desc: str = "sentence log-probabilities") -> np.ndarray:
        """As the transformers engine: the prefix token, then the sentence without special tokens."""
        requests = self.sentence_requests(sentences)
        return np.asarray(self._sum_after(requests, desc, list(sentences)), dtype=np.float64).reshape(len(sentences))

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "word probabilities") -> np.ndarray:
        words = list(words)
        owners = [(i, j) for i in range(len(prompts)) for j in range(len(words))]
        result = np.zeros((len(prompts), len(words)), dtype=np.float64)
        if not owners:
            return result
        requests = [(prompts[i], " " + words[j]) for i, j in owners]
        for (i, j), score in zip(owners, self.loglikelihood(requests, desc)):
            result[i, j] = math.exp(score)
        return result

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "fill probabilities") -> np.ndarray:
        return self.word_probs([self._prefix_of(t) for t in texts], words, desc)

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "top-k fills") -> list[list[tuple[str, float]]]:
        """As the transformers engine's: the k most probable next tokens that are whole words,
        read from the top ``top_depth`` next tokens; fewer whole words there is an error (the
        reference engine would have looked further down)."""
        if k < 1:
            raise AuditUsageError(f"top-k fills need k >= 1, got {k}.")
        prefixes = [self._prefix_of(t) for t in texts]
        encoded = [self.encode(p) for p in prefixes]
        for prefix, ids in zip(prefixes, encoded):
            self._check_length(ids, 1, prefix)
        special = set(self.tokenizer.all_special_ids)
        out = []
        for prefix, top in zip(prefixes, self._next_top(encoded, self.top_depth, desc) if encoded else []):
            accept = self.whole_word_test(prefix)
            found: list[tuple[str, float]] = []
            checked = [(token, self._at_most_zero(float(logprob), prefix)) for token, logprob in top]
            for token, logprob in sorted(checked, key=lambda x: (-x[1], x[0])):
                if token in special:
                    continue
                word = self.tokenizer.decode([token]).strip()
                if word and accept(token, word):
                    found.append((word, math.exp(logprob)))
                    if len(found) == k:
                        break
            if len(found) < k:
                raise AuditUsageError(
                    f"{self.name}: only {len(found)} whole words among the {self.top_depth} most probable next tokens "
                    f"after {prefix[:80]!r}, {k} asked. Fix: let the engine return more log-probabilities "
                    "(vLLM: --max-logprobs) or audit this probe with --engine transformers.")
            out.append(found)
        return out

    def generate(self, prompts: Sequence[str], config: Any = None, seed: Any = 0, desc: str = "generating") -> list[str]:
        config = config or DecodingConfig()
        seeds = row_seeds(seed, len(prompts))
        encoded = [self.encode(p) for p in prompts]
        for prompt, ids in zip(prompts, encoded):
            self._check_length(ids, config.max_new_tokens, prompt)
        if not encoded:
            return []
        rows = self._generate_ids(encoded, config, seeds, list(prompts), desc)
        self.stats["new_tokens"] += sum(len(r) for r in rows)
        return [self.tokenizer.decode(r, skip_special_tokens=True) for r in rows]

    def embed(self, sentences: Sequence[str], desc: str = "embedding") -> np.ndarray:
        raise AuditUsageError(f"{self.name}: this engine gives no sentence encodings.")  # not declared: never reached

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.token_counts(texts), dtype=np.int64)
