"""Kurita et al. (2019) log probability score on the DA-Gender paper's profession templates
(probe ``logprob-professions``), and the text helpers the DA-Gender and SEAT-v2 probes share.

Each item is one sentence "<target> <template> <profession>" with its target-masked (TM) and
target-and-attribute-masked (TAM) forms. Masked LMs: association = log P(target | TM) /
P(target | TAM). Causal LMs have no masked prior; the paper's repository computes no log
probability score for GPT-2, so we use the sentence log-likelihood log P(sentence): the
paper's effect size compares, per target, male- against female-typed professions and then male
against female targets, so every term that depends only on the target (log P(target)) or only
on the profession (log P(profession)) cancels, and the effect size equals that of the pointwise
mutual information log P(target, profession) / (P(target) P(profession)), which is what
Kurita's ratio estimates.
"""

from __future__ import annotations

from collections.abc import Sequence

from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.placeholders import CONTEXT_MASK, MASK
from bias_core.probes.sources import read_project_json

PROBE_NAME = "logprob-professions"
# CONTEXT_MASK marks a masked position whose prediction is NOT scored (Kurita's masked
# attribute, SEAT-v2's masked target/attribute); the masked-LM layer puts its own mask token
# there. Causal models have no mask token: SEAT-v2 embeds the literal text "[MASK]" there, as
# the paper's GPT-2 code did.
SPLITS = ("whole", "test", "val")


_COMMON = ("version", "source", "licence")
#: What each reader of these files needs at the top level.
REQUIRED = {"kurita.json": (*_COMMON, "templates", "targets", "professions", "an_words"),
            "da_gender.json": (*_COMMON, "templates", "target_pairs", "an_words", "expected_pairs", "attributes"),
            "seat.json": (*_COMMON, "target_templates", "pronoun_templates", "attribute_templates"),
            "occupation_pronouns.json": (*_COMMON, "pronouns", "templates")}


def load_data(name: str) -> dict:
    """A project data file, with the keys its reader needs (a DataFileError naming it otherwise)."""
    return read_project_json(name, REQUIRED.get(name, _COMMON))


def article(phrase: str, an_words: Sequence[str]) -> str:
    # The data lists the words taking "an" (sound decides, not spelling).
    return "an" if phrase in an_words else "a"


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def split_target(target: str) -> tuple[str, str]:
    """"this man" -> ("this ", "man"); "he" -> ("", "he")."""
    det, _, word = target.rpartition(" ")
    return (det + " " if det else ""), word


def split_lists(data: dict, split: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Targets and professions of a split; "whole" is test ∪ val, as the paper's code uses."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {SPLITS}")
    parts = ("test", "val") if split == "whole" else (split,)
    targets = {g: [t for p in parts for t in data["targets"][p][g]] for g in ("male", "female")}
    profs = {g: [w for p in parts for w in data["professions"][p][g]] for g in ("male", "female")}
    return targets, profs


def template_forms(template: str, target: str, prof: str, an_words: Sequence[str]) -> dict[str, str]:
    """Sentence, TM, TAM and AM forms of one template, the paper's ``make_english_row``:
    the attribute is masked with one mask per word of the profession."""
    det, word = split_target(target)
    n_words = len(prof.split())
    tmpl = template.replace("a {attr}", f"{article(prof, an_words)} {{attr}}")

    def fill(targ: str, attr: str) -> str:
        return capitalize(tmpl.format(targ=targ, attr=attr))

    sentence_initial = template.startswith("{targ}")
    fill_word = capitalize(word) if sentence_initial and not det else word
    return {
        "sentence": fill(target, prof),
        "tm": fill(det + MASK, prof),
        "tam": fill(det + MASK, " ".join([CONTEXT_MASK] * n_words)),
        "am": fill(target, " ".join([CONTEXT_MASK] * n_words)),
        "word": fill_word,
    }


def load_logprob_professions(split: str = "whole") -> Probe:
    """One item per (template, target, male- or female-typed profession): 5 x 20 x 40 = 4,000
    for "whole". The paper's "balanced" professions never enter its effect size, so they are
    not items."""
    data = load_data("kurita.json")
    targets, profs = split_lists(data, split)
    items = []
    for ti, template in enumerate(data["templates"]):
        for tg in ("male", "female"):
            for target in targets[tg]:
                for pg in ("male", "female"):
                    for prof in profs[pg]:
                        f = template_forms(template, target, prof, data["an_words"])
                        items.append(ProbeItem(
                            id=f"t{ti}:{target}:{prof}", prompt=f["sentence"],
                            meta={"template": template, "target": target, "target_gender": tg, "profession": prof,
                                  "profession_gender": pg, **f}))
    return Probe(PROBE_NAME, str(data["version"]), tuple(items),
                 {"source": data["source"], "licence": data["licence"], "split": split, "loaded_from": "project data"})
