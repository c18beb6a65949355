"""The determinism bound the README documents, in one place for the tests that check it.

Results must not depend on batch size, batch mates, input order, xdist workers or thread count
beyond the last bits of fp32 arithmetic: continuous values agree to 1e-5 relative, discrete ones
(continuations, top-k words, verdicts) exactly. Matrix products of other shapes and thread counts
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


def assert_invariant(actual, expected, *, row_scale: bool = False, rtol: float = RTOL) -> None:
    """|actual - expected| <= RTOL * |expected| elementwise; with ``row_scale``, relative to the
    largest magnitude of each row (embeddings, whose coordinates may sit near 0)."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if row_scale:
        scale = np.abs(expected).reshape(len(expected), -1).max(axis=1)
        excess = np.abs(actual - expected).reshape(len(expected), -1).max(axis=1) / scale
        assert np.all(excess <= rtol), f"differences up to {excess.max():.3g} of a row's scale (bound {rtol})"
        return
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0)
