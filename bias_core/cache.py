"""Content-addressed on-disk cache of model outputs (generations, scores).

An entry's key is the SHA-256 of the canonical JSON of everything that determines the value:
model fingerprint, tokenizer fingerprint, dtype, operation, prompt, decoding config and seed.
Values are JSON (never pickle) and each entry is written to a temporary file and renamed into
place, so an interrupted run or concurrent xdist workers never leave a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# Bump when a change in the scoring code changes numbers, so old entries stop matching.
SCORING_VERSION = 2


def canonical_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"v": SCORING_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultCache:
    """get/put JSON values by key parts. A disabled cache misses always and stores nothing."""

    def __init__(self, root: Path | str | None, enabled: bool = True):
        self.root = Path(root) if root is not None else None
        self.enabled = enabled and self.root is not None
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / "entries" / key[:2] / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> Any | None:
        if not self.enabled:
            self.misses += 1
            return None
        path = self._path(canonical_key(parts))
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, ValueError):
            # A corrupt entry is treated as a miss and overwritten by the next put.
            self.misses += 1
            return None
        if not isinstance(entry, dict) or "value" not in entry:
            self.misses += 1
            return None
        self.hits += 1
        return entry["value"]

    def put(self, parts: dict[str, Any], value: Any) -> None:
        if not self.enabled:
            return
        key = canonical_key(parts)
        atomic_write_text(self._path(key), json.dumps({"key": parts, "value": value}))
