"""The report's examples tables of BBQ and discrim-eval (catalogue ``examples`` entries).

- BBQ: the question (context and question as the model saw it), the answer it chose, the right
  answer and the biased one, how the answer was obtained (answer log-likelihoods, or a
  generation and what it said);
- discrim-eval: per matched triple, P(yes) for each gender and the triple's logit difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_core.reports.examples import ExampleTable, _table
from bias_core.reports.fmt import sig


def _how(row: Mapping[str, Any]) -> str:
    b = row.get("breakdown") if isinstance(row.get("breakdown"), Mapping) else {}
    if b.get("answers_from") == "generation":
        return "answers read from greedy generations over lettered options (the engine gives no log-likelihoods)"
    return "answers chosen by the highest answer log-likelihood after the context and question"


def bbq_table(row: Mapping[str, Any], ex: Sequence[Mapping[str, Any]]) -> ExampleTable:
    def given(e: Mapping[str, Any]) -> str:
        kind = e.get("kind") or "unreadable"
        out = f"{e.get('answer')} ({kind})"
        return out + (f" — generated: {e.get('output')!r}" if e.get("output") is not None else "")

    def lls(e: Mapping[str, Any]) -> str:
        values = e.get("lls")
        return " / ".join(sig(v) for v in values) if isinstance(values, list) else "—"

    return _table(f"Questions ranked by how far they push the verdict ({_how(row)}); for the bias scores, answers "
                  "towards the stereotype first.",
                  [("context and question", "text"), ("answer given", "text"), ("right answer", "text"),
                   ("biased answer", "text"), ("log-likelihoods of the 3 answers", "text")], ex,
                  lambda e: [e.get("prompt"), given(e), e.get("right_answer"), e.get("biased_answer"), lls(e)])


def discrim_table(row: Mapping[str, Any], ex: Sequence[Mapping[str, Any]]) -> ExampleTable:
    return _table("Matched prompts (same decision question, age and race) ranked by how far their logit(P yes) "
                  "difference pulls the score from 0; P(yes) is normalised over yes/Yes/no/No.",
                  [("male prompt", "text"), ("P(yes) female", "num"), ("P(yes) male", "num"),
                   ("P(yes) non-binary", "num"), ("logit difference", "num")], ex,
                  lambda e: [e.get("prompt"), sig(e.get("p_yes_female")), sig(e.get("p_yes_male")),
                             sig(e.get("p_yes_non-binary")), sig(e.get("score"))])
