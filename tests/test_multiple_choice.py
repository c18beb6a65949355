"""The shared multiple-choice runner (bias_core.runners.multiple_choice) against choices worked by
hand: total log-likelihood (no per-token normalisation), a tie to the first option, the requests
in question order and, under --precision exact, every comparison within a question."""

from __future__ import annotations

import numpy as np
import pytest

from bias_core.models.engines.fake import FakeEngine
from bias_core.runners.multiple_choice import choose_by_loglikelihood

# (context, continuation) -> log-likelihood, each continuation's tokens its words
TABLE = {
    ("Q1", " a"): -2.0, ("Q1", " b"): -1.0, ("Q1", " c"): -3.0,    # b
    ("Q2", " a"): -1.5, ("Q2", " b"): -0.5, ("Q2", " c"): -0.5,    # tie of b and c: b, the first
    ("Q3", " a"): -2.5, ("Q3", " b c d e"): -4.0, ("Q3", " c"): -3.0,  # a: -4 over 4 tokens is -1 a token,
    # better than a's -2.5 per token, but the total decides
    ("Q4", " a"): -7.0, ("Q4", " b"): -7.0, ("Q4", " c"): -7.0,    # all tie: a
}


def table_engine():
    return FakeEngine(loglikelihood=lambda ctx, cont: TABLE[(ctx, cont)])


def test_the_option_of_the_highest_total_log_likelihood_is_chosen_and_a_tie_goes_to_the_first():
    lm = table_engine()
    options = [["a", "b", "c"], ["a", "b", "c"], ["a", "b c d e", "c"], ["a", "b", "c"]]
    chosen, lls = choose_by_loglikelihood(lm, ["Q1", "Q2", "Q3", "Q4"], options)
    assert chosen == [1, 1, 0, 0]
    assert lls.shape == (4, 3) and lls.dtype == np.float64
    assert lls.tolist() == [[-2.0, -1.0, -3.0], [-1.5, -0.5, -0.5], [-2.5, -4.0, -3.0], [-7.0, -7.0, -7.0]]
    # one batched call, question by question, each question's options in order, after a space
    [(method, requests)] = lm.calls
    assert method == "loglikelihood"
    assert requests == [(q, " " + o) for q, these in zip(["Q1", "Q2", "Q3", "Q4"], options) for o in these]


def test_two_options_and_another_delimiter():
    lm = FakeEngine(loglikelihood=lambda ctx, cont: {"\nyes": -1.0, "\nno": -1.0, "\nmaybe": -0.25}[cont])
    chosen, lls = choose_by_loglikelihood(lm, ["x", "y"], [["yes", "no"], ["no", "maybe"]], delimiter="\n")
    assert chosen == [0, 1] and lls.tolist() == [[-1.0, -1.0], [-1.0, -0.25]]


class ExactStub:
    """A handle under --precision exact: takes the pairs it must decide as fp32 would."""

    precision = "exact"

    def __init__(self):
        self.seen = None

    def loglikelihood(self, requests, desc="", pairs=None, weights=None):
        self.seen = (list(requests), list(pairs), weights)
        return [-float(len(cont)) for _, cont in requests]


@pytest.mark.parametrize(("width", "within"), [(2, [(0, 1)]), (3, [(0, 1), (0, 2), (1, 2)])])
def test_under_exact_precision_every_pair_of_one_questions_options_is_compared(width, within):
    lm = ExactStub()
    options = [["x" * (k + 1) for k in range(width)], ["y" * (width - k) for k in range(width)]]
    chosen, _ = choose_by_loglikelihood(lm, ["c0", "c1"], options)
    requests, pairs, weights = lm.seen
    assert len(requests) == 2 * width and weights is None
    assert pairs == within + [(width + a, width + b) for a, b in within]
    assert chosen == [0, width - 1]  # the shortest continuation scores highest


def test_no_questions_gives_no_choices_and_unequal_option_counts_are_refused():
    chosen, lls = choose_by_loglikelihood(table_engine(), [], [])
    assert chosen == [] and lls.size == 0
    with pytest.raises(ValueError, match="same number of options"):
        choose_by_loglikelihood(table_engine(), ["Q1", "Q2"], [["a", "b", "c"], ["a", "b"]])
    with pytest.raises(ValueError, match="2 contexts for 1 questions"):
        choose_by_loglikelihood(table_engine(), ["Q1", "Q2"], [["a", "b", "c"]])
