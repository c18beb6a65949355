"""GGUF weights -> a cached safetensors folder, converted once and keyed by the GGUF's hash.

Dequantizing a GGUF through transformers takes tens of seconds; reloading the converted
safetensors folder takes well under a second and gives identical logits.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.registry import ModelSpec
from bias_core.models.weights import integrity

log = logging.getLogger(__name__)


def file_sha256(path: Path, memo_dir: Path | None = None, verify: bool = False) -> str:
    """SHA-256 of a file, memoised by (path, size, mtime) so large files are hashed once.

    ``verify``: hash the file in full on its first use in this process (see models/weights/integrity.py) and
    raise WeightsIntegrityError when the memo for the same size and mtime disagrees.
    """
    st = path.stat()
    memo_key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    memo = memo_dir / "hashes" / f"{memo_key}.json" if memo_dir else None
    remembered = None
    if memo and memo.is_file():
        try:
            remembered = json.loads(memo.read_text())["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if remembered is not None and not verify:
        return remembered
    value = integrity.check_memo(path, remembered) if verify else integrity.sha256_file(path)
    if memo and remembered != value:
        from bias_core.storage.files import atomic_write_text

        try:
            atomic_write_text(memo, json.dumps({"path": str(path), "sha256": value}))
        except OSError:  # a read-only or full cache: the memo only saves time
            pass
    return value


def locate_gguf(spec: ModelSpec, cache_dir: Path) -> Path:
    """Path of the spec's GGUF file, rebuilding it from package parts where needed."""
    if spec.local_dir:
        return Path(spec.local_dir) / str(spec.gguf_file)
    assert spec.package is not None
    if spec.assembler:
        module_name, func = spec.assembler.split(":")
        try:
            assemble = getattr(importlib.import_module(module_name), func)
            return Path(assemble(cache_dir / "gguf" / str(spec.gguf_file)))
        except (ImportError, FileNotFoundError) as exc:
            raise AuditUsageError(
                f"--model {spec.name}: the GGUF parts could not be assembled ({exc}). Fix: {spec.install_hint}"
            ) from exc
    # find_spec, not import: such packages import runtimes (llama.cpp) we do not need.
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise AuditUsageError(f"--model {spec.name}: package {spec.package} is missing. Fix: {spec.install_hint}")
    path = Path(list(found.submodule_search_locations)[0]) / str(spec.gguf_file)
    if not path.is_file():
        raise AuditUsageError(f"--model {spec.name}: {path} is missing from the package. Fix: reinstall, {spec.install_hint}")
    return path


MARKER = "bias_core_done"
_UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The completion marker of a converted folder (None when absent or unreadable)."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _target(cache_dir: Path, sha: str) -> Path:
    return cache_dir / "models" / f"gguf-{sha[:32]}"


def converted_for(gguf_path: Path, cache_dir: Path) -> Path | None:
    """The folder a finished conversion of this GGUF left (by its hash), or None; not verified."""
    folder = _target(cache_dir, file_sha256(gguf_path, cache_dir))
    return folder if read_marker(folder) is not None else None


def converted_dir(gguf_path: Path, cache_dir: Path, progress: bool = True) -> tuple[Path, str]:
    """The safetensors folder for a GGUF file (converting on first use) and the GGUF's sha256.

    A folder is used only when its weight files match the hashes recorded at conversion (hashed
    in full on the first use in a process, see models/weights/integrity.py); a folder that does not, or one
    written before hashes were recorded, is converted again.
    """
    sha = file_sha256(gguf_path, cache_dir)
    target = _target(cache_dir, sha)
    if _usable(target, warn=True):
        return target, sha
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _lock(target):
            if _usable(target, warn=False):  # another process converted it meanwhile
                return target, sha
            _discard(target)
            fresh = integrity.sha256_file(gguf_path)  # never convert under a stale memo
            if fresh != sha:
                raise AuditUsageError(
                    f"{gguf_path}: its bytes changed since they were last hashed, although its size and "
                    "modification time did not. Fix: reinstall the package or restore the file; if you "
                    f"replaced it on purpose, `touch {gguf_path}`.")
            _convert(gguf_path, target, sha)
    except OSError as exc:
        if exc.errno not in _UNWRITABLE:
            raise
        raise AuditUsageError(
            f"--cache-dir {cache_dir}: cannot write the converted model ({exc.strerror or exc}). Fix: point "
            "--cache-dir (or BIAS_CORE_CACHE_DIR) at a writable folder with ~1 GB free.") from exc
    return target, sha


def _usable(target: Path, warn: bool) -> bool:
    marker = read_marker(target)
    if marker is None or not (target / "config.json").is_file():
        return False
    recorded = marker.get("weights")
    if not isinstance(recorded, dict) or not recorded:
        if warn:
            log.warning("%s was converted before weight hashes were recorded: converting it again, once", target)
        return False
    problems = integrity.check_weights(target, recorded)
    if problems and warn:
        # A warning, not a log line: the run summary must say the cached model was corrupted.
        warnings.warn(ConvertedModelWarning(
            f"{target} does not match the weights recorded at conversion ({'; '.join(problems)}): it is "
            "corrupted or was altered, so it is converted again from the GGUF."), stacklevel=3)
    return not problems


class ConvertedModelWarning(UserWarning):
    """A converted model folder failed its integrity check and is rebuilt."""


@contextlib.contextmanager
def _lock(target: Path):
    """One conversion of a folder at a time across processes (xdist workers, parallel runs)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: concurrent conversions still end in one complete folder (_convert)
        yield
        return
    with open(target.parent / f".{target.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _discard(target: Path) -> None:
    """Move a stale folder aside (atomic) and delete it: a process still reading it keeps its files."""
    if not target.exists():
        return
    aside = target.parent / f".discard-{target.name}-{uuid.uuid4().hex[:8]}"
    os.rename(target, aside)
    shutil.rmtree(aside, ignore_errors=True)


def dequantize(gguf_path: Path, out: Path) -> None:
    """Write the GGUF's model and tokenizer into ``out`` as fp32 safetensors."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bias_core.models.weights import file_checks as weight_files
    from bias_core.models.weights.load_report import check_loading_info

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model, info = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                           dtype=torch.float32, output_loading_info=True,
                                                           ignore_mismatched_sizes=True)
    except Exception:
        found = weight_files.gguf_problem(gguf_path)  # a cut file: say so, not "cannot reshape array"
        if found:
            raise AuditUsageError(f"{gguf_path}: {found}. Fix: {weight_files.RESTORE}.") from None
        raise
    # Saved as they are, initialised weights would pass for the GGUF's own in every later run.
    check_loading_info(info, model, str(gguf_path), fix="use a GGUF file whose architecture transformers can read "
                       "in full, or a saved Hugging Face folder of the model")
    # transformers refuses to save a model it marks as GGUF-quantized; the tensors are already
    # dequantized fp32, so dropping the marker saves them faithfully.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _convert(gguf_path: Path, target: Path, sha: str) -> None:
    log.warning("dequantizing %s once into %s (takes ~15-30 s)", gguf_path.name, target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        dequantize(gguf_path, tmp)
        marker = {"gguf": str(gguf_path), "sha256": sha, "weights": integrity.record_weights(tmp)}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1))
        try:
            os.replace(tmp, target)
        except OSError:
            # Without file locks (not POSIX) another process may have finished the same
            # conversion first: keep its folder, which may already be in use.
            if not _usable(target, warn=False):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
