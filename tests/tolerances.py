"""How far two fp32 computations of one number may differ: an error model, from the sizes involved.

Two fp32 computations of the same number differ when they add the same terms in another order:
another batch size or padding (other matrix shapes, so other kernel blocking), another thread
count (other reduction splits), another CPU (AVX2, AVX-512 and AMX kernels block differently), a
KV-cached pass against a full one, another device. Continuous results are compared against the
bounds below; discrete ones (continuations, top-k words, verdicts) exactly, except where the
decision rests on a margin within the bound (see ``decided``).

The model (the probabilistic rounding analysis of Higham and Mary, SIAM J. Sci. Comput. 2019:
rounding errors of a long sum behave as a random walk, so they grow as the square root of its
length, not as the length):

- a sum of ``k`` terms of order one, rounded in fp32 (unit roundoff ``U = 2**-24``), is off by
  about ``U * sqrt(k)``, in whatever order it is added;
- every block of a transformer starts from a normalized input (RMSNorm, LayerNorm), so the terms
  of its sums stay of order one: a token's logits go through ``layers`` blocks, each adding sums
  over the hidden ``width``, the MLP's ``inner`` size and the attention ``positions``, then one
  over ``width``, and the random walks of all these sums add up to
  ``U * sqrt(layers * (width + inner + positions) + width)``;
- the log-softmax ``z_t - log(sum_j exp z_j)`` removes what the logits' errors share (a shift of
  every logit) and adds the rounding of a sum of ``vocab`` terms, ``U * sqrt(vocab)``; so two
  computations of one token's log-probability differ by at most
  ``LAMBDA * U * (sqrt(layers * (width + inner + positions) + width) + sqrt(vocab))`` nats, a
  word or continuation of ``n`` tokens by ``n`` times that, and the probability itself by the
  same amount, relatively. Raw logits keep a share of their size: two computations of a logit
  differ by at most ``2 * LAMBDA * U * sqrt(...) * logit_scale`` (the largest |logit| at hand);
- ``LAMBDA`` = 8 covers the two computations (each off by its own walk) and a walk's tail:
  Higham and Mary's bound fails with probability ~exp(-lambda**2 / 2) per sum.

Measured on this project's CPUs (benchmarks/fp32_spread.py, benchmarks/fp32_matrix.sh), the
differences stay more than ten times below these bounds; a bf16 slip or a padding leak moves
log-probabilities by 1e-3 nats and more, far above them.

Quantities derived from probabilities inherit the bound through their own formulas, not through
their own size: GLD = |Sf - Sm| / (Sf + Sm) moves by at most ``eta`` (absolute) when each
probability moves by ``eta`` relative, however close Sf is to Sm; ADD, a small difference of
nearly equal terms, moves by at most ``eta * ln(2) / 2`` times the prompt's gender mass
(each pair term f*log(2f/(f+m)) + m*log(2m/(f+m)) has derivative log(2f/(f+m)) in f, and
f*|log(2f/(f+m))| + m*|log(2m/(f+m))| <= ln(2) * (f + m)). Means keep the largest bound of
their parts.

``benchmarks/fp32_spread.py`` measures the spread on a CPU (AVX2 and the default kernels, 1, 2
and 4 threads, batch 1 and 16) against these bounds; docs/testing.md records the figures.
BIAS_CORE_TOLERANCE_LOG=PATH appends every checked comparison's largest difference and bound
to PATH, to see the margins under any configuration.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import numpy as np
import pytest

U = 2.0**-24
LAMBDA = 8.0
LN2 = math.log(2.0)


def rounding_atol(accumulated: int, scale: float) -> float:
    """Two fp32 computations of a value of size ``scale`` reached through sums of ``accumulated``
    terms in all (along the longest chain of sums it depends on) differ by at most this."""
    return LAMBDA * 2 * U * math.sqrt(accumulated) * max(scale, 1.0)


def hf_handle(lm: Any) -> Any:
    """The transformers engine (its ``model`` and ``tokenizer``) inside a bias-core handle: the
    result cache (models/cached.py) and precision wrappers hold it as ``engine``."""
    while hasattr(lm, "engine"):
        lm = lm.engine
    return lm


@dataclasses.dataclass(frozen=True)
class Forward:
    """The sizes of one fp32 forward pass that decide how far its rounding can go."""

    layers: int
    width: int
    inner: int
    positions: int
    vocab: int
    logit_scale: float = 1.0

    @classmethod
    def of(cls, lm: Any, texts: list[str] | None = None, words: list[str] | None = None, tokenizer: Any = None) -> Forward:
        """The sizes of ``lm``'s model (a bias-core handle, or a transformers model with its
        ``tokenizer``) on ``texts``: the longest text plus its longest word sets the positions,
        and the largest |logit| of one forward pass over each text the logit scale (1.0 when no
        texts are given)."""
        lm = hf_handle(lm)
        model = getattr(lm, "model", lm)
        config = model.config
        if getattr(config, "is_encoder_decoder", False):  # BART: the decoder reads the whole encoder
            layers = config.encoder_layers + config.decoder_layers
            width, inner = config.d_model, max(config.encoder_ffn_dim, config.decoder_ffn_dim)
        else:
            layers = config.num_hidden_layers
            width = config.hidden_size
            inner = getattr(config, "intermediate_size", None) or 4 * width
        vocab = config.vocab_size
        positions, scale = 1, 1.0
        tokenizer = tokenizer or getattr(lm, "tokenizer", None)
        if texts and tokenizer is not None:
            import torch

            longest_word = longest_word_tokens(tokenizer, words) if words else 0
            ids = [tokenizer(t)["input_ids"] for t in texts]
            positions = max(len(i) for i in ids) + longest_word
            device = next(model.parameters()).device
            with torch.no_grad():
                scale = max(float(model(torch.tensor([i], device=device)).logits.float().abs().max()) for i in ids)
        return cls(int(layers), int(width), int(inner), int(positions), int(vocab), max(scale, 1.0))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def accumulated(self) -> int:
        """How many terms the sums along a logit's path add up to, in all."""
        return self.layers * (self.width + self.inner + self.positions) + self.width

    @property
    def logit_rtol(self) -> float:
        """Relative rounding of one computation of a hidden state: U * sqrt(accumulated)."""
        return U * math.sqrt(self.accumulated)

    def logit_atol(self) -> float:
        """Two computations of one logit differ by at most this."""
        return rounding_atol(self.accumulated, self.logit_scale)

    def token_logprob_atol(self) -> float:
        """Two computations of one token's log-probability differ by at most this (nats)."""
        return LAMBDA * U * (math.sqrt(self.accumulated) + math.sqrt(self.vocab))

    def word_logprob_atol(self, tokens: int = 1) -> float:
        """... of the log-probability of ``tokens`` tokens (a word, a continuation, a sentence)."""
        return max(tokens, 1) * self.token_logprob_atol()

    def hidden_rtol(self) -> float:
        """... of a hidden state or pooled embedding, relative to its largest coordinate."""
        return LAMBDA * self.logit_rtol


def value_atol(*values) -> Any:
    """The rounding a log-probability (or a sum of them) carries of its own size: it is an fp32
    number reached by adding its tokens' terms (elementwise for an array)."""
    return 2 * LAMBDA * U * sum(np.abs(_array(v)) for v in values)


def longest_word_tokens(lm: Any, words: list[str]) -> int:
    """How many tokens the longest of ``words`` takes after a space (its bound adds one per
    token); ``lm`` is a handle or a tokenizer."""
    tokenizer = getattr(hf_handle(lm), "tokenizer", lm)
    return max(len(tokenizer(" " + w, add_special_tokens=False)["input_ids"]) for w in words)


def gld_atol(eta: float) -> float:
    """GLD moves by at most ``eta`` when its probabilities move by ``eta`` relative."""
    return eta


def add_atol(eta: float, mass) -> np.ndarray:
    """ADD of a prompt moves by at most eta * ln(2) / 2 * (its gender mass Sf + Sm)."""
    return eta * LN2 / 2 * np.asarray(mass, dtype=np.float64)


def _array(x: Any) -> np.ndarray:
    """float64 numpy of an array, number, list or torch tensor (on any device)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _log(kind: str, worst: float, bound: float) -> None:
    path = os.environ.get("BIAS_CORE_TOLERANCE_LOG")
    if path:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": test, "kind": kind, "largest": worst, "bound": bound}) + "\n")


def assert_close(actual, expected, atol, *, kind: str = "values") -> None:
    """|actual - expected| <= atol elementwise (atol a number or an array of bounds)."""
    actual, expected = _array(actual), _array(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    bound = np.broadcast_to(np.asarray(atol, dtype=np.float64), expected.shape)
    diff = np.abs(actual - expected)
    _log(kind, float(diff.max(initial=0.0)), float(bound.min(initial=math.inf)))
    bad = ~(diff <= bound)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{kind}: {int(bad.sum())} of {diff.size} differ beyond the fp32 bound; first at {at}: "
                             f"{actual[at]!r} vs {expected[at]!r}, difference {diff[at]:.3g} > bound {bound[at]:.3g}")


def assert_close_logprobs(actual, expected, atol, *, probabilities: bool = False, kind: str = "log-probabilities") -> None:
    """Log-probabilities within ``atol`` nats; with ``probabilities``, the inputs are
    probabilities, compared on the log scale (each relative to itself). A log-probability is
    itself an fp32 number, the sum of its tokens' terms: each also carries rounding of its own
    size (``2 * LAMBDA * U`` of it; ~5e-5 nats on a sentence of -60)."""
    actual, expected = _array(actual), _array(expected)
    if probabilities:
        assert np.all(actual > 0) and np.all(expected > 0), "probabilities must be positive"
        actual, expected = np.log(actual), np.log(expected)
    assert_close(actual, expected, np.asarray(atol) + value_atol(expected), kind=kind)


def assert_close_rows(actual, expected, rtol: float, *, kind: str = "vectors") -> None:
    """Each row within ``rtol`` of its largest coordinate (embeddings, whose coordinates may sit
    near 0, so a coordinate's own size means nothing)."""
    expected = _array(expected)
    scale = np.abs(expected).reshape(len(expected), -1).max(axis=1)
    bound = (rtol * scale).reshape((len(expected),) + (1,) * (expected.ndim - 1))
    assert_close(actual, expected, bound, kind=kind)


def decided(margin: float, atol: float, what: str) -> None:
    """A decision resting on ``margin`` (its distance from the limit) is only asserted when the
    margin exceeds the fp32 bound; within it either answer is right, and the test says so."""
    if abs(margin) <= atol:
        pytest.skip(f"{what}: the margin {margin:.3g} lies within the fp32 bound {atol:.3g}, so the decision "
                    "may go either way on another CPU or thread count (tests/tolerances.py)")


def greedy_margin(model: Any, prompt_ids: list[int], steps: int, eos_id: int | None) -> float:
    """The smallest gap, in log-probability, between the best and the second-best next token
    along the greedy path of one unpadded sequence: where it lies within the bound, another
    computation may take the other token, and the continuation changes from there on."""
    import torch

    ids, smallest = list(prompt_ids), math.inf
    for _ in range(steps):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids], device=model.device)).logits[0, -1].double()
        top = torch.topk(torch.log_softmax(logits, dim=-1), 2).values
        smallest = min(smallest, float(top[0] - top[1]))
        token = int(logits.argmax())
        if token == eos_id:
            break
        ids.append(token)
    return smallest


def assert_same_continuations(lm: Any, prompts: list[str], got: list[str], expected: list[str], steps: int,
                              atol: float) -> None:
    """Greedy continuations equal; where they differ, every differing prompt must have a near tie
    (two best tokens within twice the bound) on its greedy path, and the test then skips, saying
    so: a flipped near tie is fp32 rounding, not a bug, and either continuation is right."""
    assert len(got) == len(expected) == len(prompts)
    differing = [p for p, a, b in zip(prompts, got, expected) if a != b]
    if not differing:
        return
    lm = hf_handle(lm)
    margins = {p: greedy_margin(lm.model, lm.tokenizer(p)["input_ids"], steps, lm.tokenizer.eos_token_id)
               for p in differing}
    clear = {p: m for p, m in margins.items() if m > 2 * atol}
    assert not clear, (f"{len(clear)} continuation(s) differ where no greedy step is within twice the fp32 bound "
                       f"{2 * atol:.3g} of a tie (smallest margins {clear})")
    pytest.skip(f"{len(differing)} continuation(s) differ at a near tie within the fp32 bound (margins {margins}): "
                "either token is right on some CPU or thread count (tests/tolerances.py)")


def assert_same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]], atol: float) -> None:
    """Two top-k lists of (word, probability) name the same words in the same order, and their
    probabilities agree within ``atol`` on the log scale. Where the words differ, the first
    difference must be a swap of two words whose log-probabilities lie within the bound of each
    other (either order is right), and the test then skips, saying so."""
    got_words, expected_words = [w for w, _ in got], [w for w, _ in expected]
    if got_words != expected_words:
        i = next(k for k, (a, b) in enumerate(zip(got_words, expected_words)) if a != b)
        margin = abs(math.log(got[i][1]) - math.log(expected[i][1]))
        assert margin <= 3 * atol, (f"rankings differ at {i} ({got_words[i]!r} vs {expected_words[i]!r}) with "
                                    f"log-probabilities {margin:.3g} apart, beyond the fp32 bound {3 * atol:.3g}")
        pytest.skip(f"top-k words {got_words[i]!r} and {expected_words[i]!r} swap places within the fp32 bound "
                    f"({margin:.3g} nats apart): either order is right (tests/tolerances.py)")
    assert_close_logprobs([p for _, p in got], [p for _, p in expected], atol, probabilities=True, kind="top-k probabilities")


def disclosure_atol(metric: str, eta: float) -> float:
    """How far a disclosure probe's GLD, gender_lean or ADD (value and interval ends: means of per-prompt
    values) may move when its word probabilities move by ``eta`` relative. A prompt's gender
    mass is at most 2 (a word may stand in two pairs), so ADD moves by at most eta * ln(2)."""
    return {"GLD": gld_atol(eta), "gender_lean": gld_atol(eta), "ADD": eta * LN2}[metric]


def disclosure_eta(lm: Any, probes=("template-occupation", "template-personality", "template-hobby", "template-color",
                                "natural-default")) -> float:
    """The bound on the paper's word probabilities (relative) over these disclosure probes."""
    from bias_core.probes.lexicon import get_lexicon
    from bias_core.suites.disclosure import DisclosureAudit

    suite = DisclosureAudit(lm=None)
    prompts = [p for name in probes for p in suite.probe(name).prompts]
    words = sorted({w for pair in get_lexicon("paper").pairs for w in pair})
    # plus the rounding of a log-probability's own size, for words down to p = 2e-9 (-20 nats)
    return Forward.of(lm, prompts, words).word_logprob_atol(longest_word_tokens(lm, words)) + float(value_atol(20.0))


def _verdict_margin(row: dict) -> float:
    """How far the row's interval ends lie from the gate's limit(s)."""
    limit, ideal = row.get("limit"), row.get("ideal")
    if limit is None or row.get("ci_low") is None:
        return math.inf
    edges = [ideal - limit, ideal + limit] if ideal is not None else [limit]
    return min(abs(end - edge) for end in (row["ci_low"], row["ci_high"]) for edge in edges)


def assert_same_verdicts(rows: dict[str, dict], others: dict[str, dict], atol_of) -> None:
    """Two runs' rows (test_id -> results.json row) give the same verdicts; a verdict that
    differs must rest on an interval within ``atol_of(row)`` of its limit, and the test then
    skips, saying so."""
    assert rows.keys() == others.keys()
    differing = {k: _verdict_margin(rows[k]) for k in rows if rows[k]["verdict"] != others[k]["verdict"]}
    if not differing:
        return
    clear = {k: m for k, m in differing.items() if m > atol_of(rows[k])}
    assert not clear, f"verdicts differ where the interval lies beyond the fp32 bound of the limit: {clear}"
    pytest.skip(f"verdicts {sorted(differing)} differ with intervals within the fp32 bound of their limits "
                f"(margins {differing}): either verdict is right (tests/tolerances.py)")
