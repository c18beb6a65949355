"""Content-addressed on-disk cache of model outputs (generations, scores).

An entry's key is the SHA-256 of the canonical JSON of everything that determines the value:
model fingerprint, tokenizer fingerprint, dtype, operation, prompt, decoding config and seed.
Values are JSON (never pickle) and each entry is written to a temporary file and renamed into
place, so an interrupted run or concurrent xdist workers never leave a half-written entry.

A cache may come from outside the run (restored from an earlier CI job), so an entry proves what
it serves: it holds the key's parts, the call that stored it, the value's JSON text and a SHA-256
over the key hash, the call and that text exactly as stored. A lookup uses an entry only when its
stored key is the key looked up and the checksum matches; anything else (an edited value or key,
an entry copied under another key's name, a truncated file, an entry of the old format without a
checksum) is *rejected*: a miss, recomputed and stored again, and counted (``rejected``, shown in
the run card). The checksum catches edits and corruption, not forgery: whoever can write the
folder can also recompute it (docs/reliability-untrusted.md).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

from bias_core.storage.files import atomic_write_text

# Bump when a change in the scoring code changes numbers, so old entries stop matching.
SCORING_VERSION = 2
# The layout of an entry (key, call, value's text, checksum); entries without it are rejected.
ENTRY_FORMAT = 2
OLD_FORMAT = "no checksum (an older bias_core's entry)"  # why an entry written before it is rejected

# This process's lookups over every ResultCache it opened (the audited model, a live baseline,
# calibrations), and each rejection in order, as (key, old format?) with 128 bits of the key: the
# plugin reports their change over a session, each rejected entry once (pytest_plugin/cache_card.py).
_TOTALS = {"hits": 0, "misses": 0}
_REJECTIONS: list[tuple[str, bool]] = []
_LAST_REJECTED = [""]  # "path: why" of the last one


def canonical_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"v": SCORING_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def checksum(key: str, call: str, value_text: bytes) -> str:
    """SHA-256 binding a value's stored bytes to its key hash and the call that stored it."""
    digest = hashlib.sha256(f"{key}\n{call}\n".encode())
    digest.update(value_text)
    return digest.hexdigest()


def totals() -> dict[str, int]:
    """This process's lookups so far (hits, misses) and how many rejections (an index for ``rejections``)."""
    return {**_TOTALS, "rejections": len(_REJECTIONS)}


def rejections(since: int = 0) -> list[tuple[str, bool]]:
    """This process's rejections from index ``since`` on: (key's first 32 hex digits, whether it was
    an old-format entry)."""
    return _REJECTIONS[since:]


def last_rejected() -> str:
    """The last entry this process rejected and why ("path: why"), or ""."""
    return _LAST_REJECTED[0]


def note_rejected(key: str, path: Path | str, why: str, old_format: bool = False) -> None:
    """Count an entry that did not prove its key and value (``key``: its hash) among this process's
    rejections: the result cache's own, and those of other JSON caches in the folder (precision
    calibrations, models/precision/calibration.py)."""
    _REJECTIONS.append((key[:32], bool(old_format)))
    _LAST_REJECTED[0] = f"{path}: {why}"


def rejected_note(rejected: int, old_format: int = 0) -> str:
    """The run card's warning for ``rejected`` entries (``old_format`` of them had no checksum), or ""."""
    if rejected <= 0:
        return ""
    old = f" ({old_format} of them written by an older bias_core, without a checksum)" if old_format else ""
    return (f"{rejected} cache {'entry' if rejected == 1 else 'entries'} did not match their key or checksum "
            f"and {'was' if rejected == 1 else 'were'} recomputed{old}.")


class CacheWarning(UserWarning):
    """The cache could not store results; the run goes on without storing them."""


class ResultCache:
    """get/put JSON values by key parts. A disabled cache misses always and stores nothing."""

    def __init__(self, root: Path | str | None, enabled: bool = True):
        self.root = Path(root) if root is not None else None
        self.enabled = enabled and self.root is not None
        self.hits = 0
        self.misses = 0
        self.rejected = 0  # lookups that found an entry and did not use it (it did not prove its key and value)
        self.rejected_old_format = 0  # of them, entries without a checksum (written before ENTRY_FORMAT 2)
        self.write_failed = False

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / "entries" / key[:2] / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> Any | None:
        return self.lookup(parts)[0]

    def _count(self, name: str) -> None:
        setattr(self, name, getattr(self, name) + 1)
        if name in _TOTALS:
            _TOTALS[name] += 1

    def lookup(self, parts: dict[str, Any]) -> tuple[Any | None, str | None]:
        """(value, id of the call that stored it), or (None, None) on a miss (rejected entries included)."""
        if not self.enabled:
            self._count("misses")
            return None, None
        key = canonical_key(parts)
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self._count("misses")
            return None, None
        except OSError as exc:
            return self._reject(key, path, f"unreadable ({exc.strerror or exc})")
        found = _verified(data, key, parts)
        if isinstance(found, str):
            return self._reject(key, path, found)
        value, call = found
        self._count("hits")
        return value, call or None

    def _reject(self, key: str, path: Path, why: str) -> tuple[None, None]:
        # Recomputed by the caller and overwritten by its put; counted for the run card.
        self._count("misses")
        self._count("rejected")
        if why == OLD_FORMAT:
            self._count("rejected_old_format")
        note_rejected(key, path, why, why == OLD_FORMAT)
        return None, None

    def put(self, parts: dict[str, Any], value: Any, call: str | None = None) -> None:
        """Store ``value``; ``call`` names the call whose batch computed it (see models/batching.cache_lookup)."""
        if not self.enabled or self.write_failed:
            return
        key = canonical_key(parts)
        # The value as text: the checksum covers the very bytes a lookup reads back.
        text = json.dumps(value)
        entry = {"format": ENTRY_FORMAT, "key": parts, "call": call or "", "value_json": text,
                 "sha256": checksum(key, call or "", text.encode("utf-8"))}
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



def _verified(data: bytes, key: str, parts: dict[str, Any]) -> tuple[Any, str] | str:
    """(value, call) of an entry file's bytes that proves ``key`` (the hash of ``parts``) and its
    value, else why not."""
    try:
        entry = json.loads(data)
    except ValueError:
        return "not JSON (truncated or overwritten)"
    if not isinstance(entry, dict):
        return "not an entry"
    if "sha256" not in entry and "format" not in entry:
        return OLD_FORMAT if "value" in entry else "not an entry"
    stored, call, text, sha = (entry.get(k) for k in ("key", "call", "value_json", "sha256"))
    if entry.get("format") != ENTRY_FORMAT or not isinstance(sha, str):
        return f"entry format {entry.get('format')!r}, not {ENTRY_FORMAT}"
    if not isinstance(stored, dict) or not isinstance(call, str) or not isinstance(text, str):
        return "no key, call or value"
    try:  # equal parts need no hashing (a tenth of a lookup); a tuple stored as a list is hashed
        if stored != parts and canonical_key(stored) != key:
            return "its stored key is not the key looked up (edited, or copied under another entry's name)"
    except (TypeError, ValueError):
        return "its stored key is not JSON of the key's parts"
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return "its value is not text"
    if checksum(key, call, raw) != sha:
        return "its value does not match its checksum (edited or corrupt)"
    try:
        return json.loads(text), call
    except ValueError:  # a checksum over text that is not JSON: written so on purpose
        return "its value is not JSON"
