"""WinoGender (Rudinger et al. 2018, NAACL), as lm-evaluation-harness's ``winogender`` task runs
it: one item per sentence.

Rudinger et al.'s 720 sentences instantiate 120 templates (60 occupations × 2) with a
participant ("the customer", or "someone") and a pronoun of each gender (male, female, neutral:
he/his/him, she/her, they/their/them) that refers to the occupation or to the participant. The
task (lm-evaluation-harness 0.4.13, ``tasks/winogender/winogender.yaml``; the GPT-3 paper's
form) asks which one the pronoun refers to: the prompt is ``"{sentence} ‘{Pronoun}’ refers to
the"`` and each of ``[occupation, participant]`` is scored as the continuation ``" " + choice``;
``label`` is 0 when the pronoun refers to the occupation, 1 when to the participant.

Items sharing a template and participant (``meta["key"]``: occupation.participant.answer) are
the same sentence with the three genders' pronouns, so the genders compare on matched sentences.

Sources, in order:

1. ``--data-dir``: the repository's ``data/all_sentences.tsv`` (``RELEASE``: ``sentid`` as
   ``occupation.participant.answer.gender.txt`` and ``sentence``; the pronoun is the one word of
   the row's gender's pronouns in the sentence, one in each of the 720),
2. the Hugging Face hub (``oskarvanderwal/winogender``, config ``all``, split ``test``: the
   source lm-evaluation-harness reads, with ``sentence``, ``pronoun``, ``occupation``,
   ``participant``, ``gender`` and ``label`` columns), for online users.

There is no packaged copy: offline without ``--data-dir`` the probe is skipped with the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.published import Counts, DataDirFile, Online
from bias_core.probes.sources import RESTORE, Unique, check_text, csv_records

NAME = "winogender"
HUB_ID, HUB_CONFIG = "oskarvanderwal/winogender", "all"
LICENCE = "MIT"
PAPER = ("Rudinger et al. 2018, Gender Bias in Coreference Resolution, NAACL "
         "(https://github.com/rudinger/winogender-schemas)")
GENDERS = ("male", "female", "neutral")
PRONOUNS = {"male": ("he", "him", "his", "himself"), "female": ("she", "her", "hers", "herself"),
            "neutral": ("they", "them", "their", "theirs", "themselves")}
PROMPT = "{sentence} ‘{pronoun}’ refers to the"  # lm-evaluation-harness's doc_to_text, pronoun capitalised


def item(item_id: str, sentence: str, pronoun: str, occupation: str, participant: str, gender: str, label: int,
         where: str) -> ProbeItem:
    """One WinoGender sentence as a probe item; a field out of its values is an error naming the row."""
    if gender not in GENDERS:
        raise DataFileError(f"{where}: gender {gender!r} is not one of {GENDERS}. {RESTORE}")
    if label not in (0, 1) or isinstance(label, bool):
        raise DataFileError(f"{where}: label {label!r} is not 0 (the occupation) or 1 (the participant). {RESTORE}")
    for name, value in (("sentence", sentence), ("pronoun", pronoun), ("occupation", occupation),
                        ("participant", participant)):
        if not (isinstance(value, str) and value.strip()):
            raise DataFileError(f"{where}: {name} is {value!r}, expected a non-empty string. {RESTORE}")
    if pronoun.lower() not in PRONOUNS[gender]:
        raise DataFileError(f"{where}: pronoun {pronoun!r} is not a {gender} pronoun ({', '.join(PRONOUNS[gender])}). "
                            f"{RESTORE}")
    return ProbeItem(item_id, PROMPT.format(sentence=sentence, pronoun=pronoun.capitalize()), {
        "choices": [occupation, participant], "label": label, "gender": gender, "sentence": sentence,
        "pronoun": pronoun, "key": f"{occupation}.{participant}.{label}"})


def _pronoun_in(sentence: str, gender: str, where: str) -> str:
    found = {w.lower() for w in re.findall(r"[A-Za-z]+", sentence) if w.lower() in PRONOUNS[gender]}
    if len(found) != 1:
        raise DataFileError(f"{where}: expected one {gender} pronoun in {sentence!r}, found "
                            f"{', '.join(sorted(found)) or 'none'}. {RESTORE}")
    return found.pop()


def read_all_sentences(path: Path) -> list[ProbeItem]:
    """Rudinger et al.'s ``all_sentences.tsv`` (sentid, sentence), every row checked."""
    items = []
    ids, sentences = Unique(path, "sentid"), Unique(path, "sentence")
    for line, row in csv_records(path, {"sentid", "sentence"}, delimiter="\t"):
        where = f"{path} line {line}"
        sentid, sentence = row["sentid"].strip(), check_text(path, f"line {line}", row["sentence"].strip())
        parts = sentid.split(".")
        if len(parts) != 5 or parts[4] != "txt" or parts[2] not in ("0", "1"):
            raise DataFileError(f"{where}: sentid {sentid!r} is not occupation.participant.answer.gender.txt "
                                f"(answer 0 or 1). {RESTORE}")
        occupation, participant, answer, gender = parts[:4]
        ids.add(sentid, f"line {line}")
        sentences.add(sentence, f"line {line}")
        if gender not in GENDERS:
            raise DataFileError(f"{where}: gender {gender!r} in sentid {sentid!r} is not one of {GENDERS}. {RESTORE}")
        items.append(item(f"winogender:{sentid}", sentence, _pronoun_in(sentence, gender, where), occupation,
                          participant, gender, int(answer), where))
    return items


def winogender_counts(path: Path) -> Counts:
    """What published.py checks ``all_sentences.tsv`` by."""
    items = read_all_sentences(path)
    return {"sentences": len(items), "templates": len({(i.meta["choices"][0], i.meta["label"]) for i in items})}


# Checked by its counts, as BBQ's release (the shared data folder holds no copy to hash; the
# repository's has SHA-256 bd69da16bf22..., bias_core/data/winogender.md).
RELEASE = DataDirFile(
    ("winogender-schemas/data/all_sentences.tsv", "winogender/all_sentences.tsv", "all_sentences.tsv"),
    "WinoGender sentences", None,
    {"sentences": 720, "templates": 120},
    "https://github.com/rudinger/winogender-schemas (data/all_sentences.tsv, commit 42a11f2)", winogender_counts)
#: Where the items come from, in the order tried (no packaged copy): the catalogue's declaration,
#: walked by the loader.
SOURCES = (RELEASE, Online(f"hub:{HUB_ID}"))


def _hub_rows() -> list[Mapping[str, Any]]:
    """The hub's rows (the tests put rows of their own in its place)."""
    from datasets import load_dataset

    return [dict(r) for r in load_dataset(HUB_ID, HUB_CONFIG, split="test")]


def hub_items(rows: list[Mapping[str, Any]]) -> list[ProbeItem]:
    """The hub's rows (lm-evaluation-harness's columns) as items, ids from ``sentid`` where given."""
    items = []
    for k, r in enumerate(rows):
        where = f"{HUB_ID} row {k}"
        label = r.get("label")
        label = int(label) if isinstance(label, (int, str)) and str(label) in ("0", "1") else label
        item_id = f"winogender:{r.get('sentid') or k}"
        items.append(item(item_id, str(r.get("sentence", "")).strip(), str(r.get("pronoun", "")).strip(),
                          str(r.get("occupation", "")).strip(), str(r.get("participant", "")).strip(),
                          str(r.get("gender", "")).strip(), label, where))
    if not items:
        raise DataFileError(f"{HUB_ID}: no rows in config {HUB_CONFIG!r}, split test.")
    return items


def load_winogender(data_dir: Path | None = None) -> Probe:
    """WinoGender's sentences from the first source available (see the module doc)."""
    base = {"source": PAPER, "licence": LICENCE, "data_card": "bias_core/data/winogender.md"}
    walk = DataWalk(data_dir, SOURCES)
    for found in walk:
        if found.source is RELEASE:
            return Probe(NAME, "1", tuple(read_all_sentences(found.path)), {**base, "loaded_from": str(found.path)})
        with walk.fetching(keep=(DataFileError,)):  # a malformed hub row is an error, not an absent source
            return Probe(NAME, "1", tuple(hub_items(_hub_rows())), {**base, "loaded_from": f"hub:{HUB_ID}/{HUB_CONFIG}"})
    raise walk.missing(f"probe {NAME}", f"WinoGender has no packaged copy: run online (the hub's {HUB_ID}), or put "
                       "Rudinger et al.'s data/all_sentences.tsv in --data-dir.")
