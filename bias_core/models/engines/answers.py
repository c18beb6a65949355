"""What an answer from outside the process must be before any number is computed from it.

The endpoint engine (openai.py) reads every ``/v1/completions`` choice through these functions:

- a log-probability is a JSON number, finite and at most ``TOLERANCE`` above 0 (a value in
  (0, TOLERANCE] is rounding in the server's arithmetic and is taken as 0, so that its
  exponential is a probability of at most 1);
- an echoed prompt has exactly one log-probability per prompt token (None only for the first,
  which has no context), and at most the requested number of generated tokens after it; where
  the server returns the echoed tokens as ids, they are the ids sent;
- a token id is ``token_id:N`` with N a decimal integer (or the local tokenizer's own token
  string) inside the local vocabulary, ``0 <= N < vocab_size``;
- a next-token (top-k) list is a mapping with at most one entry more than asked (vLLM adds the
  sampled token), no token twice, valid log-probabilities whose probabilities sum to at most
  ``1 + TOP_SUM_TOLERANCE``;
- a generation has at most ``max_tokens`` tokens, and its text (where the server gives no
  token ids) is a string that is valid Unicode (no lone surrogate, which no UTF-8 byte string
  decodes to).

A violation raises ``Impossible``; the engine turns it into ``BadAnswer``, naming the server,
the request kind and the item. ``BadAnswer`` is a usage error: at load the run stops with exit
status 4, mid-run the test is an error (exit status 1), as for NaN outputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from bias_core.errors import AuditUsageError

# Above 0 by more than this a log-probability is impossible, not rounding: fp32 log-softmax
# gives at most a few 1e-7 above 0, and servers that round their output keep 4+ decimals.
TOLERANCE = 1e-4
# The listed next tokens' probabilities sum to at most 1 (plus the rounding of 20 values).
TOP_SUM_TOLERANCE = 1e-3
TOKEN_ID = re.compile(r"token_id:(-?[0-9]{1,18})")


class BadAnswer(AuditUsageError):
    """An answer from outside the process that cannot be the model's (a log-probability above 0,
    a token outside the vocabulary, text that is not text...): nothing is computed from it."""


class Impossible(Exception):
    """What is wrong with one answer; ``missing``: the server gave no prompt log-probabilities
    at all (a server that does not echo them, rather than a wrong answer)."""

    def __init__(self, problem: str, missing: bool = False):
        super().__init__(problem)
        self.problem, self.missing = problem, missing


def show(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def logprob(value: Any, where: str) -> float:
    """``value`` as a log-probability (at most 0), or ``Impossible``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Impossible(f"{where} is {show(value)}, not a number")
    v = float(value)
    if not math.isfinite(v):
        raise Impossible(f"{where} is {v}, not a finite number")
    if v > TOLERANCE:
        raise Impossible(f"{where} is {v:+.6g}, above 0 (a probability above 1; tolerance {TOLERANCE:g})")
    return min(v, 0.0)


def token_id(value: Any, vocab_size: int, where: str) -> int:
    """``token_id:N`` (or an int) as a token id inside the vocabulary, or ``Impossible``."""
    match = TOKEN_ID.fullmatch(value) if isinstance(value, str) else None
    if match is not None:
        tid = int(match[1])
    elif isinstance(value, int) and not isinstance(value, bool):
        tid = value
    else:
        raise Impossible(f"{where} is {show(value)}, not a token id (token_id:N, N a decimal integer)")
    if not 0 <= tid < vocab_size:
        raise Impossible(f"{where} is id {tid}, outside the vocabulary (ids 0 to {vocab_size - 1})")
    return tid


def logprobs_field(choice: dict[str, Any]) -> dict[str, Any]:
    field = choice.get("logprobs")
    if field is None:
        return {}
    if not isinstance(field, dict):
        raise Impossible(f"its logprobs field is {show(field)}, not an object")
    return field


def echoed(choice: dict[str, Any], sent: list[int], extra: int, vocab_size: int) -> list[float | None]:
    """The prompt's log-probabilities, one per token sent (None for the first)."""
    field = logprobs_field(choice)
    values, n = field.get("token_logprobs"), len(sent)
    if not isinstance(values, list) or len(values) < n:
        got = len(values) if isinstance(values, list) else "no"
        raise Impossible(f"{got} log-probabilities for the {n} prompt tokens", missing=True)
    if len(values) > n + extra:
        raise Impossible(f"{len(values)} log-probabilities for {n} prompt tokens and at most {extra} generated "
                         "(one per token expected)")
    tokens = field.get("tokens")
    if isinstance(tokens, list):
        if len(tokens) != len(values):
            raise Impossible(f"{len(tokens)} tokens but {len(values)} log-probabilities (one per token expected)")
        if all(isinstance(t, str) and t.startswith("token_id:") for t in tokens[:n]):
            ids = [token_id(t, vocab_size, f"echoed prompt token {i}") for i, t in enumerate(tokens[:n])]
            wrong = next((i for i, (a, b) in enumerate(zip(ids, sent)) if a != b), None)
            if wrong is not None:
                raise Impossible(f"it echoed prompt token {wrong} as id {ids[wrong]}, where {sent[wrong]} was sent")
    out: list[float | None] = [None]
    for i, value in enumerate(values[1:n], start=1):
        if value is None:
            raise Impossible(f"no log-probability for prompt token {i}", missing=True)
        out.append(logprob(value, f"the log-probability of prompt token {i}"))
    return out[:n]


def top(choice: dict[str, Any], n: int, to_id: Callable[[Any], int]) -> list[tuple[int, float]]:
    """The next-token list of the first generated position as (token id, log-probability)."""
    tops = logprobs_field(choice).get("top_logprobs")
    first = tops[0] if isinstance(tops, list) and tops else None
    if first is None:
        raise Impossible("no next-token log-probabilities", missing=True)
    if not isinstance(first, dict):
        raise Impossible(f"the next-token list is {show(first)}, not an object of tokens and log-probabilities")
    if not first or len(first) > n + 1:
        raise Impossible(f"{len(first)} next tokens where {n} were asked")
    out: list[tuple[int, float]] = []
    seen: dict[int, str] = {}
    for key, value in first.items():
        tid = to_id(key)
        if tid in seen:
            raise Impossible(f"token {tid} is twice in the next-token list (as {seen[tid]!r} and {key!r})")
        seen[tid] = key
        out.append((tid, logprob(value, f"the log-probability of next token {key!r}")))
    total = math.fsum(math.exp(lp) for _, lp in out)
    if total > 1.0 + TOP_SUM_TOLERANCE:
        raise Impossible(f"the listed next tokens' probabilities sum to {total:.6g}, above 1")
    return out


def generated(choice: dict[str, Any], max_tokens: int, vocab_size: int) -> list[int] | str:
    """The continuation as token ids where the server gives them (``token_id:N``), else its text."""
    tokens = logprobs_field(choice).get("tokens")
    if isinstance(tokens, list) and (not tokens or any(isinstance(t, str) and t.startswith("token_id:") for t in tokens)):
        if len(tokens) > max_tokens:
            raise Impossible(f"{len(tokens)} generated tokens where at most {max_tokens} were asked")
        return [token_id(t, vocab_size, f"generated token {i}") for i, t in enumerate(tokens)]
    text = choice.get("text")
    if not isinstance(text, str):
        raise Impossible(f"its generated text is {show(text)}, not a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Impossible(f"its generated text holds {show(exc.object[exc.start:exc.end])} at character {exc.start}, "
                         "a lone surrogate that no UTF-8 text decodes to") from None
    return text
