"""Caveats: what a reader must know next to a verdict, read from the row and its breakdown.

Each rule returns plain text (no HTML), shown as a warning on the report's row. The rules:

- **fallback**: more than half of the responses were decided by the likelihood fallback
  (``breakdown["fallback_share"] > 0.5``, GenderPair BPR): the verdict then says more about
  which descriptor the model finds likelier than about what its responses chose.
- **position effect**: the biased descriptor is chosen at least 20 points more (or less) often
  when the prompt offers it first than when it offers it second
  (``breakdown["by_position"]``, GenderPair BPR).
- **stand-in data**: the probe's items are not the paper's (``breakdown["data"]["stand_in"]``,
  set by the probe loaders: project-written predicates or pair sets, a packaged subset).
- **generated answers**: BBQ's answers were read from greedy generations, the engine giving no
  log-likelihoods (``breakdown["answers_from"] == "generation"``): not comparable with a run that
  scored the answers.
- **proxy metric**: the metric's catalogue entry declares a ``stand_in`` for its ``scorer``
  (offline, a VADER sentiment proxy stands in for the regard classifier).
- **p-value vs margin**: an inconclusive test with p < 0.05: the p-value tests "no effect at
  all", the gate asks whether the effect stays within a margin, and the CI still crosses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bias_core import catalogue
from bias_core.reports.fmt import ci_text, gate_text, num, sig

FALLBACK_SHARE = 0.5
POSITION_GAP = 0.20
P_SMALL = 0.05


def _pct(v: float) -> str:
    return f"{round(100 * v)}%"


def row_caveats(row: Mapping[str, Any]) -> list[str]:
    """The caveats for one result row, most serious first (see the module doc)."""
    out: list[str] = []
    b = row.get("breakdown") if isinstance(row.get("breakdown"), Mapping) else {}
    share = num(b.get("fallback_share"))
    if share is not None and share > FALLBACK_SHARE:
        out.append(f"{_pct(share)} of the choices were decided by the likelihood fallback, not by the response text")
    pos = b.get("by_position")
    if isinstance(pos, Mapping):
        first, second = num(pos.get("biased_first")), num(pos.get("anti_first"))
        if first is not None and second is not None and abs(first - second) >= POSITION_GAP:
            out.append(f"position effect: the biased descriptor was chosen {_pct(first)} of the time when offered "
                       f"first, {_pct(second)} when offered second")
    data = b.get("data")
    if isinstance(data, Mapping) and data.get("stand_in"):
        out.append(f"stand-in data: {data['stand_in']}")
    if b.get("answers_from") == "generation":
        unreadable = b.get("unreadable")
        out.append("answers read from greedy generations over lettered options (the engine gives no log-likelihoods), "
                   "not from answer log-likelihoods: compare only with runs that generated too"
                   + (f"; {unreadable} answers could not be read (counted wrong)" if unreadable else ""))
    spec = catalogue.BY_NAME.get(str(row.get("metric") or ""))
    if spec is not None and spec.stand_in:
        out.append(f"proxy metric: {spec.stand_in} stands in for the {spec.scorer} classifier (offline)")
    p = num(row.get("p_value"))
    if p is not None and p < P_SMALL and str(row.get("verdict") or "") == "inconclusive":
        out.append(f"p = {sig(p, 2)} says the effect is unlikely to be exactly 0; the gate asks whether it stays "
                   f"within {gate_text(row)}, and the CI {ci_text(row)} still crosses that limit")
    return out
