"""How many tokens ``sentence_logprob`` scores per text: what per-token scores divide by."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def scored_token_counts(lm, texts: Sequence[str]) -> np.ndarray:
    """Tokens ``lm.sentence_logprob`` scores per text (the engine's own count: causal LMs score
    the sentence tokenized without special tokens, masked LMs each non-special token)."""
    return np.asarray(lm.scored_token_counts(list(texts)), dtype=np.int64)


# How a causal LM's sentence log-likelihoods are compared where a paper compares sentences:
# "mean" per scored token (the per-token geometric mean probability of DA-Gender's and
# StereoSet's GPT-2 code), "total" (the joint log-likelihood), or "paper": each metric as its
# source defines it (``paper_causal``).
CAUSAL_LIKELIHOODS = ("paper", "mean", "total")
DEFAULT_CAUSAL_LIKELIHOOD = "paper"


def paper_causal(causal: str, paper: str) -> str:
    """The comparison a metric makes: its source's (``paper``, "mean" or "total") under the
    "paper" setting, else the one the user chose. DA-Gender's text compares "sentence
    probabilities" (total), StereoSet's evaluation per-token means: one setting cannot be both."""
    if causal not in CAUSAL_LIKELIHOODS:
        raise ValueError(f"causal likelihood {causal!r}: choose one of {', '.join(CAUSAL_LIKELIHOODS)}")
    return paper if causal == "paper" else causal


def sentence_scores(lm, sentences: Sequence[str], causal: str = "mean",
                    desc: str = "sentence log-likelihoods",
                    pairs: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
    """``lm.sentence_logprob``, divided by the scored tokens for a causal LM when ``causal`` is
    "mean". Masked LMs keep their total pseudo-log-likelihood whatever ``causal`` says.

    ``pairs``: the (i, j) comparisons the caller makes of these scores; under exact precision
    every one of them is decided as fp32 decides it (the per-token division included)."""
    from bias_core.models.precision.modes import compared_sentence_logprob

    if causal not in ("mean", "total"):
        raise ValueError(f"causal likelihood {causal!r}: the metric resolves 'paper' (paper_causal) before scoring")
    per_token = lm.kind == "causal" and causal == "mean"
    counts = scored_token_counts(lm, sentences) if per_token else None
    weights = None if counts is None else 1.0 / counts
    scores = np.asarray(compared_sentence_logprob(lm, list(sentences), pairs or [], desc=desc, weights=weights),
                        dtype=np.float64)
    return scores if counts is None else scores / counts
