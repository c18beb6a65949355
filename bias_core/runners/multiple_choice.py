"""Multiple choice by log-likelihood: the option each question gets, as lm-evaluation-harness's
``multiple_choice`` output type (the form BBQ's and WinoGender's runners use).

Each option is scored by its total log-likelihood log P(delimiter + option | context), not
normalised by its length in tokens or characters (lm-evaluation-harness's ``acc``), and the
highest is chosen; a tie goes to the first option, as numpy's argmax and lm-evaluation-harness's.
The requests go to the model in one batched call, question by question and each question's
options in their order, and under ``--precision exact`` every comparison among one question's
options is decided as fp32 decides it (``compared_loglikelihood``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from bias_core.models.protocol import ScoringModel


def choose_by_loglikelihood(lm: ScoringModel, contexts: Sequence[str], options: Sequence[Sequence[str]],
                            desc: str = "option log-likelihoods", delimiter: str = " ") -> tuple[list[int], np.ndarray]:
    """(the index of the option chosen for each context, the options' log-likelihoods as a
    questions x options array) for ``options[k]`` after ``contexts[k]`` (module doc). Every
    question has as many options as the first."""
    if len(contexts) != len(options):
        raise ValueError(f"{len(contexts)} contexts for {len(options)} questions' options")
    width = len(options[0]) if options else 0
    if any(len(o) != width for o in options):
        raise ValueError(f"every question needs the same number of options: found {sorted({len(o) for o in options})}")
    from bias_core.models.precision.modes import compared_loglikelihood

    requests = [(context, delimiter + option) for context, these in zip(contexts, options) for option in these]
    pairs = [(width * k + a, width * k + b) for k in range(len(contexts)) for a, b in combinations(range(width), 2)]
    lls = np.asarray(compared_loglikelihood(lm, requests, pairs, desc=desc), dtype=np.float64)
    lls = lls.reshape(len(contexts), width)
    return ([int(k) for k in np.argmax(lls, axis=1)] if len(contexts) else []), lls
