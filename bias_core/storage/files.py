"""File helpers for everything bias_core writes: an interruption, a full disk or concurrent
xdist workers never leave half of a file (atomic writes, whole appends); content hashes; whether a
folder can take more files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from bias_core.storage.redaction import redact


def sha256_file(path: Path | str) -> str:
    """SHA-256 of a file's bytes, always read in full (no memo)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_text(path: Path | str, text: str, durable: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: temp file in the same folder + os.replace.

    Readers see the old file or the new one, never half of one. ``durable`` also fsyncs, for
    files a crash must not lose (run reports); cache entries can be recomputed and skip it.
    A registered secret (an API key) is redacted from ``text`` first (storage/redaction.py).
    """
    path = Path(path)
    text = redact(text)
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
