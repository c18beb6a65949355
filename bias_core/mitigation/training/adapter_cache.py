"""On-disk cache of trained LoRA adapters.

An entry is a folder named by the hash of its key: base-model fingerprint (weights, tokenizer,
dtype), method, hyperparameters, training-data hash and seed. It is built in a temporary folder
next to it and renamed into place only when complete, so an interrupted training (Ctrl-C, a
killed worker) leaves no entry, only a ``.build-*`` folder that is removed on the way out.
The last file written is a done-marker holding the key and the SHA-256 of every adapter file;
a lookup re-hashes the files, so a missing, truncated or edited file makes the entry a miss and
it is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from bias_core.errors import AuditUsageError
from bias_core.storage.files import atomic_write_text

log = logging.getLogger(__name__)

# Bump when training code changes what an adapter holds, so old entries stop matching.
ADAPTER_CACHE_VERSION = 1
MARKER = "bias_core_adapter.json"


def key_hash(key: dict[str, Any]) -> str:
    blob = json.dumps({"adapter_cache_version": ADAPTER_CACHE_VERSION, **key}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def data_hash(records: Iterable[Any]) -> str:
    """SHA-256 of training data given as JSON-able records, order included (it sets the batches)."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def base_fingerprint(t: Any) -> dict[str, str]:
    """What identifies the base model an adapter was trained on (``t``: a models.training.TrainingAccess)."""
    return {"model": t.fingerprint, "tokenizer": t.tokenizer_fingerprint, "dtype": t.dtype}


def adapter_key(t: Any, method: str, hyperparameters: dict[str, Any], data_sha256: str, seed: int) -> dict[str, Any]:
    return {
        "base": base_fingerprint(t),
        "method": method,
        "hyperparameters": hyperparameters,
        "data_sha256": data_sha256,
        "seed": int(seed),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("files"), dict) or "key" not in marker:
        return None
    return marker


class AdapterCache:
    def __init__(self, root: Path | str):
        self.root = Path(root) / "adapters"
        self.hits = 0
        self.builds = 0

    def path_for(self, key: dict[str, Any]) -> Path:
        return self.root / f"{key['method']}-{key_hash(key)[:32]}"

    def problem(self, folder: Path, key: dict[str, Any]) -> str | None:
        """Why ``folder`` is not a complete entry for ``key`` (None when it is)."""
        if not folder.is_dir():
            return "no entry"
        marker = read_marker(folder)
        if marker is None:
            return "done-marker missing or unreadable"
        if marker["key"] != json.loads(json.dumps(key)):
            return "done-marker holds another key"
        if not marker["files"]:
            return "done-marker lists no files"
        for name, sha in marker["files"].items():
            path = folder / name
            if not path.is_file():
                return f"{name} is missing"
            if _sha256(path) != sha:
                return f"{name} does not match its recorded hash"
        return None

    def lookup(self, key: dict[str, Any]) -> Path | None:
        folder = self.path_for(key)
        why = self.problem(folder, key)
        if why is None:
            self.hits += 1
            return folder
        if why != "no entry":
            log.warning("adapter cache entry %s is corrupt (%s); it will be rebuilt", folder, why)
        return None

    def get_or_build(self, key: dict[str, Any], build: Callable[[Path], None]) -> Path:
        """The entry for ``key``, calling ``build(tmp_folder)`` to write the adapter files on a miss."""
        found = self.lookup(key)
        if found is not None:
            return found
        target = self.path_for(key)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".build-"))
        except OSError as exc:  # a read-only or full cache: say so before hours of training
            raise AuditUsageError(
                f"--cache-dir {self.root.parent}: cannot store a trained adapter ({exc.strerror or exc}). Fix: point "
                "--cache-dir (or BIAS_CORE_CACHE_DIR) at a writable folder with free space.") from None
        try:
            build(tmp)
            files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file() and p.name != MARKER}
            if not files:
                raise RuntimeError(f"adapter training wrote no files into {tmp}")
            atomic_write_text(tmp / MARKER, json.dumps({"key": key, "files": files}, indent=1, sort_keys=True))
            if target.exists():
                shutil.rmtree(target)  # a corrupt entry (lookup said so); a good one never gets here
            try:
                os.replace(tmp, target)
            except OSError:
                # Another process finished the same entry first: keep its folder, drop ours.
                if self.problem(target, key) is not None:
                    raise
            self.builds += 1
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target
