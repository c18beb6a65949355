"""Where probe data comes from, tried in order.

1. data written by the project itself (``bias_core/data``),
2. ``--data-dir`` (the seed papers' published files, or the user's copies),
3. an installed package's data,
4. the Hugging Face hub / the papers' public repositories (online users).

Offline, a source that none of these provides raises DataSourceMissing, which the audits turn
into a skip that names every place looked at.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from bias_core.errors import DataFileError, DataSourceMissing

ONLINE_TIMEOUT_S = 20


def project_data(name: str) -> Path:
    return Path(str(resources.files("bias_core").joinpath("data", name)))


def online_allowed() -> bool:
    # The hub's own offline switches also turn off our online loaders.
    return not any(os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "BIAS_CORE_OFFLINE"))


@functools.lru_cache(maxsize=None)
def reachable(url: str, timeout: float = 3.0) -> str | None:
    """None when url answers, else the error: one quick probe per process, so an offline
    machine does not sit through the hub client's retries for every probe."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)  # noqa: S310
        return None
    except urllib.error.HTTPError:
        return None  # the host answered
    except Exception as exc:  # DNS failure, refused, timeout
        return f"{type(exc).__name__}: {str(exc)[:120]}"


# ----- readers: every row checked, every problem named by file and row -----------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
RESTORE = "Fix: restore the file from its source (the published copy), or correct that row."
# The project's own data files (bias_core/data) have no other source than the package.
REINSTALL = ("Fix: reinstall bias-core (pip install --force-reinstall --no-deps bias-core) or restore the file from "
             "the repository.")


def read_text(path: Path) -> str:
    """A data file's text; bytes that are not UTF-8 are an error naming the file and offset."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataFileError(f"{path} line {line}: not UTF-8 text ({exc.reason} at byte {exc.start}): the file "
                            f"is garbled or not a text file. {RESTORE}") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path} line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}): the file "
                            f"is truncated or garbled. {RESTORE}") from None


def check_text(path: Path, where: str, value: str) -> str:
    """A text cell or line: control characters mean binary garbage, not a prompt."""
    if _CONTROL.search(value):
        raise DataFileError(f"{path} {where}: control characters in {value[:80]!r}: the file is garbled. {RESTORE}")
    return value


def jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, parsed object) per non-blank line of a JSON Lines file; a line that is not JSON is an
    error naming the file and line."""
    for line_no, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {line_no}: not valid JSON ({exc.msg}): the file is truncated or garbled. "
                                f"{RESTORE}") from None


def _csv_rows(path: Path, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(io.StringIO(read_text(path), newline=""), strict=True, delimiter=delimiter)
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise DataFileError(f"{path} line {reader.line_num}: not valid CSV ({exc}): the file is truncated or "
                            f"garbled. {RESTORE}") from None


def csv_records(path: Path, required: set[str], delimiter: str = ",") -> Iterator[tuple[int, dict[str, str]]]:
    """(line, {column: value}) per data row of a CSV (or, with ``delimiter="\\t"``, a TSV) with a
    header; a missing column, or a row with fewer or more fields than the header (a truncated file
    ends in one), is an error."""
    rows = _csv_rows(path, delimiter)
    header: list[str] | None = None
    for line, row in rows:
        if header is None:
            header = [h.strip() for h in row]
            lacking = sorted(required - set(header))
            if lacking:
                raise DataFileError(f"{path}: the header lacks the column(s) {', '.join(lacking)} (found "
                                    f"{', '.join(header) or 'no header'}): not the expected file, or garbled. "
                                    "Fix: point --data-dir at an unmodified copy of the published file.")
            continue
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) != len(header):
            raise DataFileError(f"{path} line {line}: {len(row)} fields where the header has {len(header)}: the row "
                                f"is cut short or has stray delimiters (a truncated file ends in one). {RESTORE}")
        yield line, dict(zip(header, row))
    if header is None:
        raise DataFileError(f"{path}: empty file, no header. {RESTORE}")


def read_one_column_csv(path: Path, unique: str | None = None) -> list[str]:
    """One value a row (a predicate); blank rows are skipped, a row with more fields is an error.
    With ``unique`` (what a value is, e.g. "predicate") a value met twice is an error too."""
    out = []
    seen = Unique(path, unique) if unique else None
    for line, row in _csv_rows(path):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if len(cells) > 1:
            raise DataFileError(f"{path} line {line}: {len(cells)} fields where one is expected ({row!r:.120}): a "
                                f"value with a comma must be quoted. {RESTORE}")
        out.append(check_text(path, f"line {line}", cells[0]))
        if seen is not None:
            seen.add(cells[0], f"line {line}")
    return out


def read_lines(path: Path, unique: str | None = None) -> list[str]:
    """Non-blank lines, stripped; with ``unique`` as in ``read_one_column_csv``."""
    out = []
    seen = Unique(path, unique) if unique else None
    for i, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            out.append(check_text(path, f"line {i}", line.strip()))
            if seen is not None:
                seen.add(out[-1], f"line {i}")
    return out


class Unique:
    """What a metric assumes of a data file's rows: each item once. ``add`` a row's key (its id,
    or its content where ids are numbered by position) with where it sits; a key met twice is a
    DataFileError naming the file and both rows (a repeated id makes two items one, a repeated
    row weighs one item twice, and neither shows in a count)."""

    def __init__(self, path: Path | str, what: str) -> None:
        self.path, self.what = path, what
        self.seen: dict[Any, str] = {}

    def add(self, key: Any, where: str) -> None:
        first = self.seen.get(key)
        if first is None:
            self.seen[key] = where
        else:
            shown = key if isinstance(key, str) else " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)
            raise DataFileError(f"{self.path} {where}: {self.what} {shown[:120]!r} repeats {first}: each item must "
                                "appear once (a repeated row is one item counted twice, or two items under one "
                                "id). Fix: restore the file from its source (the published copy), or remove or "
                                "correct that row.")


def read_project_json(name: str, required: tuple[str, ...]) -> Any:
    """A JSON file of bias_core/data with the top-level keys its reader needs."""
    path = project_data(name)
    data = read_json(path)
    lacking = [key for key in required if not isinstance(data, dict) or key not in data]
    if lacking:
        raise DataFileError(f"{path}: lacks the key(s) {', '.join(lacking)}: the project's data file is damaged or "
                            f"from another version. {REINSTALL}")
    return data


def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=ONLINE_TIMEOUT_S) as resp:  # noqa: S310 (fixed https URLs)
        return resp.read().decode("utf-8")


def missing(what: str, data_dir: Path | None, candidates: list[str], online_error: str | None) -> DataSourceMissing:
    looked = ", ".join(candidates)
    where = f"--data-dir {data_dir} (looked for {looked})" if data_dir else f"no --data-dir given (would look for {looked})"
    online = f"online source failed: {online_error}" if online_error else "online loading is off (HF_HUB_OFFLINE/BIAS_CORE_OFFLINE)"
    return DataSourceMissing(f"{what} not available: {where}; {online}. Fix: pass --data-dir pointing at a copy.")
