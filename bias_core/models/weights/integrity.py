"""Are a model's weight files the bytes they were recorded as?

A converted model's folder records the SHA-256 and size of each weight file when it is written.
The first use of a folder in a process hashes every weight file in full (a 540 MB file takes
about a second); later uses in the same process compare size and mtime only. A file overwritten
in place with its size and mtime kept (the case a size/mtime check alone misses) is caught on
the first use of every session. xdist workers are processes: each verifies for itself.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from bias_core.errors import WeightsIntegrityError
from bias_core.storage.files import sha256_file

__all__ = ["sha256_file", "verified_sha256", "record_weights", "weights_digest", "check_weights", "check_memo", "forget"]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")

# resolved path -> (size, mtime_ns, sha256) of files hashed in full by this process
_VERIFIED: dict[str, tuple[int, int, str]] = {}
_LOCK = threading.Lock()


def weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def verified_sha256(path: Path) -> str:
    """The file's SHA-256: hashed in full on its first use in this process, then trusted while
    its size and mtime stay the same."""
    key, size, mtime = _stat_key(path)
    with _LOCK:
        seen = _VERIFIED.get(key)
    if seen is not None and seen[:2] == (size, mtime):
        return seen[2]
    sha = sha256_file(path)
    with _LOCK:
        _VERIFIED[key] = (size, mtime, sha)
    return sha


def record_weights(folder: Path) -> dict[str, dict[str, Any]]:
    """{file name: {"sha256", "size"}} of the folder's weight files, for its completion marker."""
    return {p.name: {"sha256": verified_sha256(p), "size": p.stat().st_size} for p in weight_files(folder)}


def weights_digest(recorded: dict[str, dict[str, Any]]) -> str:
    """One hash over the recorded weight files (names and hashes); result-cache keys carry it."""
    blob = json.dumps({name: rec["sha256"] for name, rec in sorted(recorded.items())}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def check_weights(folder: Path, recorded: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between the folder's weight files and the record ([] when they agree)."""
    problems = []
    present = {p.name for p in weight_files(folder)}
    for name in sorted(present - set(recorded)):
        problems.append(f"{name}: a weight file the record does not list")
    for name, rec in sorted(recorded.items()):
        path = Path(folder) / name
        if not path.is_file():
            problems.append(f"{name}: missing")
            continue
        size = path.stat().st_size
        if size != rec.get("size"):
            problems.append(f"{name}: {size:,} bytes, recorded {rec.get('size'):,}")
            continue
        sha = verified_sha256(path)
        if sha != rec.get("sha256"):
            problems.append(f"{name}: SHA-256 {sha[:16]}..., recorded {str(rec.get('sha256'))[:16]}...")
    return problems


def check_memo(path: Path, memoised: str | None) -> str:
    """The verified hash of a user's file, or a clear error when it no longer matches the hash
    remembered for the same path, size and mtime (the bytes changed but the metadata did not)."""
    sha = verified_sha256(path)
    if memoised is not None and memoised != sha:
        raise WeightsIntegrityError(
            f"{path}: its bytes changed since they were last hashed (SHA-256 {memoised[:16]}... then, "
            f"{sha[:16]}... now) although its size and modification time did not: the file is "
            "corrupted or was overwritten in place. Fix: restore the file from its source (re-save the "
            f"model); if you replaced it on purpose, `touch {path}` so the new content is recorded."
        )
    return sha


def forget() -> None:
    """Forget which files this process has verified: their next use hashes them in full again."""
    with _LOCK:
        _VERIFIED.clear()
