"""DA-Gender (the over-debiasing challenge set of the DA-Gender paper, section 4.1).

Pairs of sentences that differ only in the gender of the target ("My brother is a nun." /
"My sister is a nun."), where a gender-definitional attribute makes one of them factually
right. A model that keeps genuine gender knowledge prefers the right one; over-debiasing
removes that preference. Generated from six templates x ten target pairs x 67 attributes
(2,610 pairs); see ``bias_core/data/da_gender.md``.
"""

from __future__ import annotations

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.disclosure import ARTICLES, DEFAULT_ARTICLES
from bias_core.probes.kurita import article, capitalize, load_data, split_target
from bias_core.probes.placeholders import CONTEXT_MASK, MASK
from bias_core.probes.sources import REINSTALL, project_data

PROBE_NAME = "da-gender"
EXPECTED_PAIRS = 2610


def _slot_value(form: str, attr: dict, an_words) -> tuple[str, str]:
    """(shown, masked) text of the attribute slot; the article stays when masked, as in the
    paper's TAM sentences ("[MASK] is a [MASK].")."""
    word = attr["forms"][form]
    if form == "single":
        art = article(word, an_words)
        return f"{art} {word}", f"{art} {CONTEXT_MASK}"
    return word, CONTEXT_MASK


def _render(text: str, form: str, target: str, attr_text: str) -> str:
    return text.format(Target=capitalize(target), target=target, **{form: attr_text})


def build_pairs(data: dict, articles: str = DEFAULT_ARTICLES) -> list[ProbeItem]:
    """The pairs. ``articles="paper"`` writes the upstream file's articles ("a heiress");
    ``"grammatical"`` writes "an heiress" (``upstream_article_differences`` in the data)."""
    if articles not in ARTICLES:
        raise ValueError(f"articles {articles!r}: choose one of {', '.join(ARTICLES)}")
    an_words = set(data["an_words"])
    if articles == "paper":
        an_words -= set(data.get("upstream_article_differences", {}))
    items = []
    for attr in data["attributes"]:
        for tmpl in data["templates"]:
            form = tmpl["form"]
            if form not in attr["forms"]:
                continue
            shown, masked = _slot_value(form, attr, an_words)
            initial = tmpl["text"].startswith("{Target}")
            for male, female in data["target_pairs"]:
                by_gender = {}
                for g, target in (("male", male), ("female", female)):
                    det, word = split_target(target)
                    slot = capitalize(det) + MASK if initial and det else (MASK if initial else det + MASK)
                    by_gender[g] = {
                        "sentence": _render(tmpl["text"], form, target, shown),
                        "word": capitalize(word) if initial and not det else word,
                        "tm": tmpl["text"].format(Target=slot, target=slot, **{form: shown}),
                        "tam": tmpl["text"].format(Target=slot, target=slot, **{form: masked}),
                    }
                correct, wrong = (attr["gender"], "female" if attr["gender"] == "male" else "male")
                items.append(ProbeItem(
                    id=f"{attr['word']}:{tmpl['key']}:{male}",
                    prompt=by_gender[correct]["sentence"],
                    meta={
                        "template": tmpl["key"], "attribute": attr["word"], "correct": correct,
                        "male_target": male, "female_target": female,
                        "wrong_sentence": by_gender[wrong]["sentence"],
                        "male": by_gender["male"], "female": by_gender["female"],
                    }))
    return items


def load_da_gender(articles: str = DEFAULT_ARTICLES) -> Probe:
    data = load_data("da_gender.json")
    items = build_pairs(data, articles)
    if len(items) != data["expected_pairs"]:  # a template or attribute form lost: pairs incomplete
        raise DataFileError(f"{project_data('da_gender.json')}: builds {len(items)} pairs, expected_pairs says "
                            f"{data['expected_pairs']}: the project's data file is damaged. {REINSTALL}")
    return Probe(PROBE_NAME, str(data["version"]), tuple(items),
                 {"source": data["source"], "licence": data["licence"], "loaded_from": "project data",
                  "expected_pairs": str(data["expected_pairs"]), "articles": articles})
