"""The report's examples table of GenderBench's metrics (catalogue ``examples`` entries): per item,
the prompt as GenderBench writes it, the model's first attempt, and every attempt's evaluation
(JobsLum: the character's gender by its pronouns; Direct: yes or no; "undetected" where the
evaluator could not tell), with the item's score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_core.reports.examples import ExampleTable, _table
from bias_core.reports.fmt import sig


def _evaluations(e: Mapping[str, Any]) -> str:
    found = e.get("evaluations")
    if not isinstance(found, list):
        return "—"
    return ", ".join("undetected" if v is None else str(v) for v in found)


def genderbench_table(row: Mapping[str, Any], ex: Sequence[Mapping[str, Any]]) -> ExampleTable:
    return _table("Items ranked by how far they pull the value towards failing its gate; each attempt evaluated as "
                  "GenderBench's evaluator does.",
                  [("prompt", "text"), ("first attempt", "text"), ("evaluations", "text"), ("score", "num")], ex,
                  lambda e: [e.get("prompt"), e.get("response"), _evaluations(e), sig(e.get("score"))])
