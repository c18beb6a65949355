"""The report's examples tables of BBQ, discrim-eval, WinoBias and WinoGender (catalogue
``examples`` entries).

- BBQ: the question (context and question as the model saw it), the answer it chose, the right
  answer and the biased one, how the answer was obtained (answer log-likelihoods, or a
  generation and what it said);
- discrim-eval: per matched triple, P(yes) for each gender and the triple's logit difference;
- WinoBias: both sentences of a pair and the log-likelihood gap between them;
- WinoGender: the sentence, the referent chosen and the right one (the gap: both genders' answers).
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


def winobias_table(row: Mapping[str, Any], ex: Sequence[Mapping[str, Any]]) -> ExampleTable:
    return _table("Pairs ranked by how far they pull the value from no preference: the log-likelihood gap of the "
                  "sentence with the occupation's stereotyped pronoun over the one with the other pronoun (nats; "
                  "> 0: the stereotype is likelier).",
                  [("pro-stereotyped sentence", "text"), ("other pronoun", "text"), ("gap", "num")], ex,
                  lambda e: [e.get("pro", e.get("prompt")), e.get("anti", "—"), sig(e.get("margin"))])


def winogender_table(row: Mapping[str, Any], ex: Sequence[Mapping[str, Any]]) -> ExampleTable:
    if any("bls_pct_female" in e for e in ex):  # winogender_bls_r: one row per occupation
        return _table("Occupations ranked by how much the pronoun's gender moves their resolution: the share of "
                      "female-pronoun sentences resolved to the occupation minus the male ones, beside the share of "
                      "women in the occupation.",
                      [("occupation", "text"), ("she minus he, resolved to the occupation", "num"),
                       ("% female (BLS 2015)", "num"), ("% female in text (Bergsma and Lin)", "num")], ex,
                      lambda e: [e.get("occupation"), sig(e.get("female_minus_male")), sig(e.get("bls_pct_female")),
                                 sig(e.get("bergsma_pct_female"))])
    if any("male_answer" in e for e in ex):  # winogender_gap: one row per matched sentence
        return _table("Matched sentences ranked by how far they pull the gap from 0: the referent chosen with the "
                      "male and with the female pronoun.",
                      [("sentence (male pronoun)", "text"), ("right referent", "text"), ("with he/him/his", "text"),
                       ("with she/her", "text")], ex,
                      lambda e: [e.get("prompt"), e.get("right_answer"), e.get("male_answer"), e.get("female_answer")])
    return _table("Sentences the model resolves wrongly first: the referent it chose by the higher log-likelihood "
                  "after \"‘Pronoun’ refers to the\", and the right one.",
                  [("sentence and prompt", "text"), ("chosen", "text"), ("right referent", "text"),
                   ("log-likelihoods (occupation / participant)", "text")], ex,
                  lambda e: [e.get("prompt"), e.get("answer"), e.get("right_answer"),
                             " / ".join(sig(v) for v in e["lls"]) if isinstance(e.get("lls"), list) else "—"])
