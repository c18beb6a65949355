"""The text corpus CDS, ER and SentenceDebias work on.

The paper (DA-Gender, "Unmasking the Trade-off") uses the sentences of the GAP coreference
corpus (Webster et al. 2018; Wikipedia paragraphs about people; Apache-2.0): the texts of
gap-development.tsv, gap-validation.tsv and gap-test.tsv split into sentences (13,436 in the
paper's pickles). Sources, in order:

1. ``--data-dir`` holding the GAP TSV files (at its top, or in ``gap-coreference/`` or
   ``gap/``);
2. online users: the three files from the GAP repository;
3. an offline STAND-IN, named as such in ``name`` and ``stand_in`` so every report says so:
   the BOLD gender prompts of ``--data-dir``/GenderCARE-ccs24 (Wikipedia sentence openings
   about actors and actresses, "Please complete the following sentence:" removed) plus the
   project's own gender-neutral Debias Tuning predicates as sentences ("My friend bakes
   sourdough bread every morning."). The project's held-out neutral text is NOT used: it is the
   perplexity guard's held-out set, and training on it would make that guard measure training
   data.

Nothing found: DataSourceMissing naming every place looked at (the audit turns it into a skip).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bias_core.errors import DataSourceMissing

GAP_FILES = ("gap-development.tsv", "gap-validation.tsv", "gap-test.tsv")
GAP_FOLDERS = ("", "gap-coreference", "gap")
GAP_URL = "https://raw.githubusercontent.com/google-research-datasets/gap-coreference/master/{}"
BOLD_FILES = ("GenderCARE-ccs24/bold_gender_actors_prompts.csv", "GenderCARE-ccs24/bold_gender_actresses_prompts.csv")
BOLD_PREFIX = "Please complete the following sentence:"
NEUTRAL_FILE = "debias_training_predicates.txt"

# A full stop after these does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof gen col lt sgt capt rev hon mt no vs etc inc ltd co corp fig jan feb mar apr "
    "jun jul aug sep sept oct nov dec e.g i.e u.s u.k".split()
)
_BOUNDARY = re.compile(r"([.!?][\"'”’)]*)\s+(?=[\"'“‘(]?[A-Z0-9])")


@dataclass(frozen=True)
class DebiasCorpus:
    name: str
    sentences: tuple[str, ...]
    source: str
    stand_in: bool
    licence: str

    def __post_init__(self) -> None:
        if not self.sentences:
            raise DataSourceMissing(f"corpus {self.name} ({self.source}) holds no sentences")

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for s in self.sentences:
            digest.update(s.encode("utf-8") + b"\n")
        return digest.hexdigest()

    def provenance(self) -> dict[str, object]:
        return {"corpus": self.name, "stand_in": self.stand_in, "sentences": len(self.sentences),
                "source": self.source, "licence": self.licence, "sha256": self.sha256}


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph: a break after . ! ? (and closing quotes) before a capital or
    digit, except after an abbreviation ("Mr.", "St.") or a single-letter initial ("J. K.")."""
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if text[m.start()] == "." and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
            continue
        out.append(text[start : m.end(1)].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def read_gap_tsv(text: str) -> list[str]:
    """The ``Text`` column of one GAP TSV file (header ID, Text, Pronoun, ...), split into sentences."""
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows and "Text" not in rows[0]:
        raise ValueError(f"not a GAP file: no 'Text' column (columns: {', '.join(rows[0])})")
    return [s for row in rows for s in split_sentences(row["Text"] or "")]


def _dedupe(sentences: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for s in sentences if s))


def gap_from_dir(data_dir: Path) -> DebiasCorpus | None:
    for folder in GAP_FOLDERS:
        paths = [Path(data_dir) / folder / name for name in GAP_FILES]
        if all(p.is_file() for p in paths):
            sentences = [s for p in paths for s in read_gap_tsv(p.read_text(encoding="utf-8"))]
            return DebiasCorpus("GAP", _dedupe(sentences), " + ".join(map(str, paths)), False, "Apache-2.0")
    return None


def gap_online() -> DebiasCorpus:
    from bias_core.probes.sources import fetch_text

    urls = [GAP_URL.format(name) for name in GAP_FILES]
    sentences = [s for url in urls for s in read_gap_tsv(fetch_text(url))]
    return DebiasCorpus("GAP", _dedupe(sentences), " + ".join(urls), False, "Apache-2.0")


def bold_sentence(prompt: str) -> str:
    text = prompt.strip()
    if text.startswith(BOLD_PREFIX):
        text = text[len(BOLD_PREFIX) :].strip()
    return text


def standin_from_dir(data_dir: Path) -> DebiasCorpus | None:
    from bias_core.probes.sources import project_data, read_lines

    paths = [Path(data_dir) / rel for rel in BOLD_FILES]
    if not all(p.is_file() for p in paths):
        return None
    bold = []
    for p in paths:
        with p.open(encoding="utf-8", newline="") as fh:
            bold += [bold_sentence(row["Prompt"]) for row in csv.DictReader(fh)]
    neutral_path = project_data(NEUTRAL_FILE)
    neutral = [f"My friend {p}." for p in read_lines(neutral_path)]
    return DebiasCorpus(
        "BOLD gender prompts + project neutral predicates",  # corpus_label flags it as GAP's stand-in
        _dedupe(bold + neutral),
        " + ".join(map(str, [*paths, neutral_path])),
        True,
        "BOLD: CC BY-SA 4.0 (via GenderCARE, MIT); predicates: Apache-2.0 (project)",
    )


def load_debias_corpus(data_dir: Path | None) -> DebiasCorpus:
    """GAP from --data-dir, else GAP online, else the offline stand-in; DataSourceMissing if none."""
    from bias_core.probes.sources import online_allowed, reachable

    if data_dir is not None and (found := gap_from_dir(data_dir)) is not None:
        return found
    online_error = None
    if online_allowed():
        online_error = reachable("https://raw.githubusercontent.com")
        if online_error is None:
            return gap_online()
    if data_dir is not None and (found := standin_from_dir(data_dir)) is not None:
        return found
    looked = [f"{f}/{n}".lstrip("/") for f in GAP_FOLDERS for n in GAP_FILES[:1]] + list(BOLD_FILES)
    where = f"--data-dir {data_dir} (looked for {', '.join(looked)})" if data_dir else "no --data-dir given"
    online = f"online GAP failed: {online_error}" if online_error else "online loading is off"
    raise DataSourceMissing(
        f"debiasing corpus (GAP, or its BOLD stand-in) not available: {where}; {online}. Fix: pass --data-dir "
        "pointing at a folder with the GAP TSV files (gap-development.tsv, gap-validation.tsv, gap-test.tsv) or "
        "with GenderCARE-ccs24/bold_gender_*_prompts.csv."
    )
