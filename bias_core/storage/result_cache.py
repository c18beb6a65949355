"""Content-addressed on-disk cache of model outputs (generations, scores).

An entry's key is the SHA-256 of the canonical JSON of everything that determines the value:
model fingerprint, tokenizer fingerprint, dtype, operation, prompt, decoding config and seed.
Values are JSON (never pickle) and each entry is written to a temporary file and renamed into
place, so an interrupted run or concurrent xdist workers never leave a half-written entry.
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


def canonical_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"v": SCORING_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CacheWarning(UserWarning):
    """The cache could not store results; the run goes on without storing them."""


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
