"""Content-addressed on-disk cache of model outputs (generations, scores).

An entry's key is the SHA-256 of the canonical JSON of everything that determines the value:
model fingerprint, tokenizer fingerprint, dtype, operation, prompt, decoding config and seed.
Values are JSON (never pickle) and each entry is written to a temporary file and renamed into
place, so an interrupted run or concurrent xdist workers never leave a half-written entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

# Bump when a change in the scoring code changes numbers, so old entries stop matching.
SCORING_VERSION = 2


def sha256_file(path: Path | str) -> str:
    """SHA-256 of a file's bytes, always read in full (no memo)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"v": SCORING_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_text(path: Path | str, text: str, durable: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: temp file in the same folder + os.replace.

    Readers see the old file or the new one, never half of one. ``durable`` also fsyncs, for
    files a crash must not lose (run reports); cache entries can be recomputed and skip it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file ordinary permissions
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def append_whole(path: Path | str, data: bytes) -> None:
    """Append ``data`` to ``path``, or nothing: a write that fails (a full disk) is cut off again,
    so the file ends where it ended before, never in half a record."""
    with open(path, "ab", buffering=0) as fh:  # unbuffered: nothing left to flush after a cut
        start = fh.tell()
        try:
            view = memoryview(data)
            while view:
                view = view[fh.write(view):]
        except OSError:
            with contextlib.suppress(OSError):
                fh.truncate(start)
            raise


# Below this much free space a cache dir counts as full: the audit runs as with --no-cache.
MIN_FREE_BYTES = 64 * 2**20


class CacheWarning(UserWarning):
    """The cache could not store results; the run goes on without storing them."""


def unwritable_reason(root: Path | str) -> str | None:
    """Why results cannot be stored under ``root`` (read-only, no permission, full), or None."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=root, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
        free = shutil.disk_usage(root).free
    except OSError as exc:
        return exc.strerror or str(exc)
    if free < MIN_FREE_BYTES:
        return f"only {free / 2**20:.0f} MiB free"
    return None


class ResultCache:
    """get/put JSON values by key parts. A disabled cache misses always and stores nothing."""

    def __init__(self, root: Path | str | None, enabled: bool = True):
        self.root = Path(root) if root is not None else None
        self.enabled = enabled and self.root is not None
        self.hits = 0
        self.misses = 0
        self.write_failed = False

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / "entries" / key[:2] / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> Any | None:
        return self.lookup(parts)[0]

    def lookup(self, parts: dict[str, Any]) -> tuple[Any | None, str | None]:
        """(value, id of the call that stored it), or (None, None) on a miss."""
        if not self.enabled:
            self.misses += 1
            return None, None
        path = self._path(canonical_key(parts))
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            self.misses += 1
            return None, None
        except (OSError, ValueError):
            # A corrupt entry is treated as a miss and overwritten by the next put.
            self.misses += 1
            return None, None
        if not isinstance(entry, dict) or "value" not in entry:
            self.misses += 1
            return None, None
        self.hits += 1
        call = entry.get("call")
        return entry["value"], call if isinstance(call, str) else None

    def put(self, parts: dict[str, Any], value: Any, call: str | None = None) -> None:
        """Store ``value``; ``call`` names the call whose batch computed it (see models/batching.cache_lookup)."""
        if not self.enabled or self.write_failed:
            return
        key = canonical_key(parts)
        entry = {"key": parts, "value": value, **({"call": call} if call else {})}
        try:
            atomic_write_text(self._path(key), json.dumps(entry))
        except OSError as exc:
            # A full or read-only disk must not cost the result just computed: keep it, store
            # no more, and say so once.
            self.write_failed = True
            warnings.warn(CacheWarning(
                f"result cache {self.root}: cannot store results ({exc.strerror or exc}); the run goes on "
                "without storing them. Fix: free space, point --cache-dir at a writable folder, or pass --no-cache."),
                stacklevel=2)
