"""The determinism bound docs/reliability.md documents, in one place for the tests that check it.

Results must not depend on batch size, batch mates, input order, xdist workers or thread count
beyond the last bits of fp32 arithmetic: continuous values agree to 1e-5 relative, discrete ones
(continuations, top-k words, verdicts) exactly. Probabilities are compared as log-probabilities,
the scale the model computes them on: fp32 rounds a log-probability of -18 (a rare word of four
tokens) by about 1e-5 nats, which is 1e-5 relative of the log-probability but 2e-5 of the
probability itself (SmolLM2, batch 1 against 16). Matrix products of other shapes and thread counts
round differently on each CPU (AMD and Intel kernels differ), so a test must assert this bound,
not the smaller differences one machine happens to show (1.9e-6 was seen on an AMD EPYC where
1e-6 had been asserted).
"""

from __future__ import annotations

import numpy as np

RTOL = 1e-5
# Single next-word probabilities, relative to the prompt's largest one: a word's log-probability
# carries fp32 log-softmax rounding of a few 1e-5 nats (1.1e-5 of the row's scale was seen
# between batch 1 and 16 on an AMD EPYC, single-threaded); GLD/ADD, their means, keep RTOL.
WORD_PROB_RTOL = 1e-4


def assert_invariant(actual, expected, *, row_scale: bool = False, rtol: float = RTOL,
                     probabilities: bool = False) -> None:
    """|actual - expected| <= rtol * |expected| elementwise (rtol defaults to RTOL); with ``row_scale``, relative to the
    largest magnitude of each row (embeddings, whose coordinates may sit near 0); with
    ``probabilities``, on their logarithms, relative to max(1, |log p|)."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if probabilities:
        assert np.all(actual > 0) and np.all(expected > 0), "probabilities must be positive"
        np.testing.assert_allclose(np.log(actual), np.log(expected), rtol=rtol, atol=rtol)
        return
    if row_scale:
        scale = np.abs(expected).reshape(len(expected), -1).max(axis=1)
        excess = np.abs(actual - expected).reshape(len(expected), -1).max(axis=1) / scale
        assert np.all(excess <= rtol), f"differences up to {excess.max():.3g} of a row's scale (bound {rtol})"
        return
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0)
