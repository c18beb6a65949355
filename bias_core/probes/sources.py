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
import os
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

from bias_core.errors import DataSourceMissing

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


def find_in_data_dir(data_dir: Path | None, candidates: list[str]) -> Path | None:
    if data_dir is None:
        return None
    for rel in candidates:
        path = data_dir / rel
        if path.is_file():
            return path
    return None


def read_one_column_csv(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as fh:
        return [row[0].strip() for row in csv.reader(fh) if row and row[0].strip()]


def read_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=ONLINE_TIMEOUT_S) as resp:  # noqa: S310 (fixed https URLs)
        return resp.read().decode("utf-8")


def missing(what: str, data_dir: Path | None, candidates: list[str], online_error: str | None) -> DataSourceMissing:
    looked = ", ".join(candidates)
    where = f"--data-dir {data_dir} (looked for {looked})" if data_dir else f"no --data-dir given (would look for {looked})"
    online = f"online source failed: {online_error}" if online_error else "online loading is off (HF_HUB_OFFLINE/BIAS_CORE_OFFLINE)"
    return DataSourceMissing(f"{what} not available: {where}; {online}. Fix: pass --data-dir pointing at a copy.")
