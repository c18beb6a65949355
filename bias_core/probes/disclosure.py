"""Probes of Dong et al. (2024), "Disclosure and Mitigation of Gender Bias in LLMs".

Every prompt ends in ", and" so that the model's next word is where a gendered pronoun or noun
would appear.
"""

from __future__ import annotations

import re
from pathlib import Path

from bias_core.errors import DataFileError, ProbeNotApplicable
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.published import DONG, DataDirFile, Online, find_in_data_dir, predicate_counts, sentence_counts
from bias_core.probes.sources import (
    REINSTALL,
    Unique,
    fetch_text,
    project_data,
    read_lines,
    read_one_column_csv,
    read_project_json,
)

TEMPLATE_TOPICS = ("occupation", "personality", "hobby", "color")
NATURAL_SETS = ("stsb", "snli")
LLM_SETS = {"1": "templates_200.txt", "2": "templates_200_1.txt"}
TEMPLATE_WORDS = "disclosure_template_words.json"

PROBE_NAMES: tuple[str, ...] = (
    *(f"template-{t}" for t in TEMPLATE_TOPICS),
    *(f"natural-{s}" for s in NATURAL_SETS),
    "natural-default",
    *(f"llm-generated-{k}" for k in LLM_SETS),
)

UPSTREAM = "https://raw.githubusercontent.com/dongxiangjue/Debias-LLMs/ea017a3939d75c7c1599c869a6e682015524c8ef/data/"
PAPER = "Dong et al. 2024, arXiv:2402.11190"
#: The natural sets' source online: the hub data set whose test split the paper's rule derives them from.
NATURAL_HUB = {"stsb": "sentence-transformers/stsb", "snli": "stanfordnlp/snli"}
#: The published files in --data-dir: the natural sets' test predicates, the LLM-generated sentences.
NATURAL_FILES: dict[str, DataDirFile] = {
    which: DataDirFile((f"Debias-LLMs/{which}_neutral_test.csv", f"{which}_neutral_test.csv"),
                       f"Debias-LLMs {which}_neutral_test.csv", sha, {"predicates": rows}, DONG, predicate_counts)
    for which, sha, rows in (("stsb", "87b06b50a9a550a07f0ec867d903270425c811352ec149931f2a59c830b8011b", 364),
                             ("snli", "83ed5a773f9d07a81a9fda4eadbb8042d1c6c9851469f1a0f70026f9a849cb01", 317))}
LLM_FILES: dict[str, DataDirFile] = {
    k: DataDirFile((f"Debias-LLMs/{name}", name), f"Debias-LLMs {name}", sha, {"sentences": 200}, DONG, sentence_counts)
    for (k, name), sha in zip(LLM_SETS.items(), ("2aa4ff9005945a158c15f27ebab013e80070801fd6f85abec9a286c57ec07aa8",
                                                 "d57195d4e680205adf507ff8f79750fdf4912a31bbc77305af77af40b95d9a62"))}
#: Where the natural and LLM-generated sets come from, in the order tried: the catalogue's
#: declarations, walked by their loaders.
NATURAL_SOURCES = {which: (NATURAL_FILES[which], Online(f"hub:{NATURAL_HUB[which]}")) for which in NATURAL_SETS}
LLM_SOURCES = {k: (LLM_FILES[k], Online(UPSTREAM + file)) for k, file in LLM_SETS.items()}
# Sentences "about someone" whose subject the paper replaced by "My friend".
_NEUTRAL_SUBJECT = re.compile(r"^\s*(?:someone|somebody|a person|one person)\s+(.+?)\s*\.?\s*$", re.IGNORECASE)


ARTICLES = ("paper", "grammatical")
DEFAULT_ARTICLES = "paper"


def _article(word: str, an_words: set[str] | None = None) -> str:
    # The data lists the words taking "an" (sound, not spelling, decides); first letter otherwise.
    if an_words is not None:
        return "an" if word in an_words else "a"
    return "an" if word[:1].lower() in "aeiou" else "a"


def template_probe(topic: str, articles: str = DEFAULT_ARTICLES) -> Probe:
    """The paper's template prompts. ``articles="paper"`` keeps its code's literal "a" before
    every occupation ("My friend is a attendant, and"); ``"grammatical"`` writes "an" before
    the six occupations that take it (see TEMPLATE_WORDS.md)."""
    if articles not in ARTICLES:
        raise ValueError(f"articles {articles!r}: choose one of {', '.join(ARTICLES)}")
    data = read_project_json(TEMPLATE_WORDS, ("version", "source", "licence", "topics"))
    spec = data["topics"].get(topic)
    if not isinstance(spec, dict) or not {"template", "words"} <= set(spec):
        raise DataFileError(f"{project_data(TEMPLATE_WORDS)}: topics.{topic} lacks its template or words. {REINSTALL}")
    items = []
    words = Unique(project_data(TEMPLATE_WORDS), f"{topic} word")  # a word in both lists is one id, two items
    for association in ("female_associated", "male_associated"):
        for k, word in enumerate(spec["words"][association]):
            words.add(word, f"topics.{topic}.words.{association}[{k}]")
            template = spec["template"]
            if spec.get("article") and articles == "grammatical":
                an_words = set(spec["an_words"]) if "an_words" in spec else None
                template = template.replace("is a {}", f"is {_article(word, an_words)} {{}}")
            items.append(ProbeItem(id=f"{topic}:{word}", prompt=template.format(word), meta={"association": association, "word": word}))
    provenance = {"source": data.get("source", PAPER), "licence": data.get("licence", ""), "loaded_from": "project data"}
    if spec.get("article"):
        provenance["articles"] = articles
    return Probe(name=f"template-{topic}", version=str(data.get("version", 1)), items=tuple(items), provenance=provenance)


def derive_natural_predicates(sentences: list[str]) -> list[str]:
    """The paper's rule: keep sentences about "someone"/"a person"; the rest is the predicate."""
    out, seen = [], set()
    for sentence in sentences:
        match = _NEUTRAL_SUBJECT.match(sentence)
        if match and match.group(1).lower() not in seen:
            seen.add(match.group(1).lower())
            out.append(match.group(1))
    return out


def _natural_online(which: str) -> list[str]:
    from datasets import load_dataset

    ds = load_dataset(NATURAL_HUB[which], split="test")
    if which == "stsb":
        sentences = list(ds["sentence1"]) + list(ds["sentence2"])
    else:
        sentences = list(ds["premise"]) + list(ds["hypothesis"])
    return derive_natural_predicates(sentences)


def _natural_items(name: str, predicates: list[str]) -> tuple[ProbeItem, ...]:
    return tuple(ProbeItem(id=f"{name}:{i}", prompt=f"My friend {p.rstrip('.')}, and", meta={"predicate": p})
                 for i, p in enumerate(predicates))


def natural_probe(which: str, data_dir: Path | None) -> Probe:
    name = f"natural-{which}"
    walk = DataWalk(data_dir, NATURAL_SOURCES[which])
    for found in walk:
        if found.source is NATURAL_FILES[which]:
            return Probe(name, "1", _natural_items(name, read_one_column_csv(found.path, unique="predicate")),
                         {"source": f"{PAPER}: {which.upper()} test predicates", "loaded_from": str(found.path)})
        with walk.fetching():  # offline or hub trouble: reported in the skip reason
            preds = _natural_online(which)
            return Probe(name, "1", _natural_items(name, preds),
                         {"source": f"{which.upper()} test split via the Hugging Face hub, derived by the paper's rule",
                          "loaded_from": "hub"})
    raise walk.missing(f"probe {name}")


def natural_default_probe() -> Probe:
    path = project_data("natural_default_predicates.txt")
    return Probe("natural-default", "1", _natural_items("natural-default", read_lines(path, unique="predicate")),
                 {"source": "written by the project (bias_core/data/NATURAL_DEFAULT.md)", "licence": "Apache-2.0",
                  "loaded_from": "project data",
                  "stand_in": "project-written neutral predicates standing in for the paper's STS-B/SNLI sets"})


def llm_generated_probe(k: str, data_dir: Path | None) -> Probe:
    name = f"llm-generated-{k}"
    walk = DataWalk(data_dir, LLM_SOURCES[k])
    for found in walk:
        if found.source is LLM_FILES[k]:
            return _llm_probe(k, read_lines(found.path, unique="sentence"), str(found.path))
        with walk.fetching():
            text = fetch_text(found.source.where)
            return _llm_probe(k, [line.strip() for line in text.splitlines() if line.strip()], found.source.where)
    raise walk.missing(f"probe {name}")


def _llm_probe(k: str, lines: list[str], loaded_from: str) -> Probe:
    name = f"llm-generated-{k}"
    items = tuple(ProbeItem(id=f"{name}:{i}", prompt=f"{line.rstrip('.')}, and") for i, line in enumerate(lines))
    return Probe(name, "1", items, {"source": f"{PAPER}: LLM-generated sentences set {k}", "licence": "Apache-2.0",
                                    "loaded_from": loaded_from})


def load_probe(name: str, data_dir: Path | None, articles: str = DEFAULT_ARTICLES) -> Probe:
    """Load a disclosure probe by name; raises DataSourceMissing when offline data is absent."""
    if name.startswith("template-"):
        return template_probe(name.removeprefix("template-"), articles)
    if name == "natural-default":
        published = [find_in_data_dir(data_dir, NATURAL_FILES[w]) for w in NATURAL_SETS]
        if all(published):
            # The project's set stands in for the papers' naturally-sourced sets only when they
            # are absent; with both at hand it would re-measure the same thing on other prompts.
            raise ProbeNotApplicable("natural-default is the offline stand-in for natural-stsb/natural-snli, "
                                     "which --data-dir provides in this run")
        return natural_default_probe()
    if name.startswith("natural-"):
        return natural_probe(name.removeprefix("natural-"), data_dir)
    if name.startswith("llm-generated-"):
        return llm_generated_probe(name.removeprefix("llm-generated-"), data_dir)
    raise KeyError(f"unknown disclosure probe {name!r}; known: {', '.join(PROBE_NAMES)}")
