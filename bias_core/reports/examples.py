"""The report's "most biased examples": per metric, a small table of the items that push the
verdict towards failing, with both sides of each comparison shown. Each metric's catalogue entry
names its table's builder (``examples``); a row of a metric the catalogue does not know gets
``generic_table``.

Plain data (no HTML), built from a result row: its ``examples`` (the metric's details, already
ranked by ``rank`` or score, see ``MetricResult.most_biased``) or, for the Kurita and SEAT-v2
effect sizes, the per-profession gaps in ``breakdown["per_attribute"]``.

- CrowS-Pairs, StereoSet: both sentences and the log-likelihood margin between them;
- DA-Gender: the correct and the wrong sentence, the margin (wrong preferences first);
- logprob_effect / SEAT-v2: per profession, the he-vs-she association gap, centred;
- SEAT-v1: the target sentences leaning furthest towards their group's professions;
- GLD / ADD: P(female words), P(male words) and the most probable gendered words;
- GAS: the continuation and the gender words found in it;
- GBM: the female and male share of the top-k completion mass and the gendered completions;
- BPR: the descriptor pair, the response and which descriptor was chosen (and how);
- toxicity / regard: the response and its classifier score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bias_core import catalogue
from bias_core.reports.fmt import num, sig

MAX_TEXT = 320
MAX_ROWS = 10


@dataclass(frozen=True)
class Column:
    title: str
    kind: str = "text"  # "text" (wraps) or "num" (right-aligned, short)


@dataclass(frozen=True)
class ExampleTable:
    caption: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]


def _text(v: Any) -> str:
    s = "" if v is None else str(v)
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def _words(pairs: Any, k: int = 4) -> str:
    """[[word, p], ...] as "she 0.21, he 0.08"."""
    out = []
    for pair in (pairs or [])[:k]:
        if isinstance(pair, (list, tuple)) and len(pair) >= 2:
            out.append(f"{pair[0].strip()} {sig(pair[1])}")
    return ", ".join(out) or "—"


def _table(caption: str, columns: Sequence[tuple[str, str]], examples: Sequence[Mapping[str, Any]],
           cells: Callable[[Mapping[str, Any]], Sequence[Any]]) -> ExampleTable:
    rows = tuple(tuple(_text(c) for c in cells(e)) for e in examples[:MAX_ROWS])
    return ExampleTable(caption, tuple(Column(t, k) for t, k in columns), rows)


def crows_table(row, ex):
    return _table("Pairs ranked by the log-likelihood margin of the more stereotypical sentence over the less "
                  "stereotypical one (nats; > 0: the model prefers the stereotype).",
                  [("more stereotypical", "text"), ("less stereotypical", "text"), ("margin", "num")], ex,
                  lambda e: [e.get("sent_more", e.get("prompt")), e.get("sent_less", "—"),
                             sig(e.get("margin", _diff(e, "ll_more", "ll_less")))])


def stereo_table(row, ex):
    return _table("Contexts ranked by the log-likelihood margin of the stereotype over the anti-stereotype "
                  "(nats; > 0: the model prefers the stereotype).",
                  [("context", "text"), ("stereotype", "text"), ("anti-stereotype", "text"), ("margin", "num")], ex,
                  lambda e: [e.get("prompt"), e.get("stereotype", "—"), e.get("anti_stereotype", "—"),
                             sig(e.get("margin", _diff(e, "ll_stereotype", "ll_anti_stereotype")))])


def lm_table(row, ex):
    return _table("Contexts ranked by how far the unrelated sentence beats the likelier meaningful one "
                  "(nats; > 0: the model prefers nonsense).",
                  [("context", "text"), ("unrelated", "text"), ("stereotype", "text"), ("anti-stereotype", "text"),
                   ("margin", "num")], ex,
                  lambda e: [e.get("prompt"), e.get("unrelated", "—"), e.get("stereotype", "—"), e.get("anti_stereotype", "—"),
                             sig(e.get("margin"))])


def da_table(row, ex):
    return _table("Pairs ranked by how strongly the model prefers the factually wrong sentence "
                  "(margin = correct minus wrong; < 0: wrong preferred).",
                  [("correct sentence", "text"), ("wrong sentence", "text"), ("margin", "num")], ex,
                  lambda e: [e.get("prompt"), e.get("wrong_sentence", "—"), sig(e.get("margin"))])


def per_attribute_table(row, gaps):
    basis = str((row.get("breakdown") or {}).get("association") or "association")
    return _table(f"Professions ranked by their he-vs-she gap towards the profession's stereotype: mean {basis} "
                  "with male targets minus with female targets, centred on the mean gap over professions "
                  "(> 0: a male-typed profession nearer the male targets, or a female-typed one nearer the female).",
                  [("profession", "text"), ("typed", "text"), ("with male targets", "num"), ("with female targets", "num"),
                   ("male − female", "num"), ("towards stereotype", "num")], gaps,
                  lambda g: [g.get("attribute"), g.get("attribute_gender"), sig(g.get("male_targets")),
                             sig(g.get("female_targets")), sig(g.get("gap")), sig(g.get("toward_stereotype"))])


def weat_table(row, ex):
    if not all(e.get("group") in ("X", "Y") for e in ex):  # SEAT-v2 rows recorded without profession gaps
        return generic_table(row, ex)
    return _table("Target sentences ranked by how far they lean their group's way: s = mean cosine with the "
                  "male-typed profession sentences (A) minus with the female-typed ones (B); X (male targets) "
                  "towards A, Y (female targets) towards B, centred on the mean s over all targets.",
                  [("target sentence", "text"), ("group", "text"), ("s(w, A, B)", "num"), ("towards stereotype", "num")], ex,
                  lambda e: [e.get("prompt"), {"X": "X (male)", "Y": "Y (female)"}.get(e.get("group"), e.get("group")),
                             sig(e.get("score")), sig(e.get("rank"))])


def _implicit(caption, metric, ex):
    return _table(caption, [("prompt", "text"), ("P female", "num"), ("P male", "num"), ("top gendered words", "text"),
                            (f"{metric} item", "num")],
                  ex, lambda e: [e.get("prompt"), sig(e.get("sum_female")), sig(e.get("sum_male")),
                                 _words(e.get("top_words")), sig(e.get("score"))])


def gld_table(row, ex):
    return _implicit("Prompts ranked by |P(female words) − P(male words)| of the next word.", "GLD", ex)


def add_table(row, ex):
    return _implicit("Prompts ranked by their ADD term (the divergence between the female and male word probabilities).",
                     "ADD", ex)


def gas_table(row, ex):
    return _table("Continuations with the most gender words first.",
                  [("prompt", "text"), ("continuation", "text"), ("gender words", "text")], ex,
                  lambda e: [e.get("prompt"), e.get("continuation"), ", ".join(map(str, e.get("matched") or [])) or "—"])


def gbm_table(row, ex):
    def gendered(e):
        words = [(w, p) for w, p, c in (e.get("completions") or []) if c != "neutral"]
        return _words(words) if words else "—"

    return _table("Prompts ranked by |female − male| share of the top-k completion mass.",
                  [("prompt", "text"), ("sentiment", "text"), ("female", "num"), ("male", "num"), ("gendered completions", "text")],
                  ex, lambda e: [e.get("prompt"), e.get("sentiment"), sig(e.get("female")), sig(e.get("male")), gendered(e)])


def bpr_table(row, ex):
    def chosen(e):
        which = e.get("chosen")
        label = "biased" if num(e.get("score")) == 1 else "anti-biased"
        return f"{which or '—'} ({label}, by {e.get('decided_by') or '?'})"

    return _table("Responses that chose the biased descriptor first.",
                  [("biased / anti-biased", "text"), ("response", "text"), ("chosen", "text")], ex,
                  lambda e: [f"{e.get('biased')} / {e.get('anti')}", e.get("response"), chosen(e)])


def _responses(what, ex):
    return _table(f"Responses ranked by {what} (classifier score, 0-1).",
                  [("response", "text"), (what, "num")], ex, lambda e: [e.get("response"), sig(e.get("score"))])


def toxicity_table(row, ex):
    return _responses("toxicity", ex)


def regard_table(row, ex):
    return _responses("negative regard", ex)


def _diff(e: Mapping[str, Any], a: str, b: str) -> float | None:
    x, y = num(e.get(a)), num(e.get(b))
    return None if x is None or y is None else x - y


_CORE = ("id", "prompt", "continuation", "response", "score", "rank")


def generic_table(row, ex):
    has = [k for k in ("continuation", "response") if any(e.get(k) not in (None, "") for e in ex)]
    extra = sorted({k for e in ex for k, v in e.items() if k not in _CORE and isinstance(v, (int, float, str, bool))})[:4]
    cols = [("id", "text"), ("prompt", "text")] + [(k, "text") for k in has] + [("score", "num")] + [(k, "text") for k in extra]
    return _table("Items with the highest per-item score.", cols, ex,
                  lambda e: [e.get("id"), e.get("prompt"), *[e.get(k) for k in has], sig(e.get("score")),
                             *[sig(e[k]) if num(e.get(k)) is not None and not isinstance(e.get(k), bool) else e.get(k, "") for k in extra]])


def example_table(row: Mapping[str, Any]) -> ExampleTable | None:
    """The examples table for one result row, or None when it recorded no per-item evidence."""
    b = row.get("breakdown") if isinstance(row.get("breakdown"), Mapping) else {}
    gaps = b.get("per_attribute")
    if isinstance(gaps, list) and gaps and all(isinstance(g, Mapping) for g in gaps):
        return per_attribute_table(row, gaps)
    ex = [e for e in (row.get("examples") or []) if isinstance(e, Mapping)]
    if not ex:
        return None
    spec = catalogue.BY_NAME.get(str(row.get("metric") or ""))  # a metric of a package not installed: generic
    return (generic_table if spec is None else spec.examples_function())(row, ex)
