"""GGUF weights -> a cached safetensors folder, converted once and keyed by the GGUF's hash.

Dequantizing a GGUF through transformers takes tens of seconds; reloading the converted
safetensors folder takes well under a second and gives identical logits.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from bias_core.errors import AuditUsageError
from bias_core.models.registry import ModelSpec

log = logging.getLogger(__name__)


def file_sha256(path: Path, memo_dir: Path | None = None) -> str:
    """SHA-256 of a file, memoised by (path, size, mtime) so large files are hashed once."""
    st = path.stat()
    memo_key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    memo = memo_dir / "hashes" / f"{memo_key}.json" if memo_dir else None
    if memo and memo.is_file():
        try:
            return json.loads(memo.read_text())["sha256"]
        except (OSError, ValueError, KeyError):
            pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    value = digest.hexdigest()
    if memo:
        from bias_core.cache import atomic_write_text

        atomic_write_text(memo, json.dumps({"path": str(path), "sha256": value}))
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


def converted_dir(gguf_path: Path, cache_dir: Path, progress: bool = True) -> tuple[Path, str]:
    """The safetensors folder for a GGUF file (converting on first use) and the GGUF's sha256."""
    sha = file_sha256(gguf_path, cache_dir)
    target = cache_dir / "models" / f"gguf-{sha[:32]}"
    if (target / "config.json").is_file() and (target / "bias_core_done").is_file():
        return target, sha
    log.warning("dequantizing %s once into %s (takes ~15-30 s)", gguf_path.name, target)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # transformers refuses to save a model it marks as GGUF-quantized; the tensors are already
    # dequantized fp32, so dropping the marker saves them faithfully.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "bias_core_done").write_text(json.dumps({"gguf": str(gguf_path), "sha256": sha}))
        if target.exists() and not (target / "bias_core_done").is_file():
            shutil.rmtree(target, ignore_errors=True)  # left by an interrupted older layout
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process (an xdist worker) finished the same conversion first; keep its
            # folder, which may already be in use, and drop ours.
            if not (target / "bias_core_done").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target, sha
