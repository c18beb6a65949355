"""Checks of a local model folder that need no model: run when the options are read, so a folder
transformers cannot load is one usage error before any test, not a traceback in every test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.registry import ModelSpec, detect_kind
from bias_core.models.weights import file_checks as weight_files

_CUSTOM_CODE_FILES = ("config.json", "tokenizer_config.json")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AuditUsageError(f"{path}: not valid JSON ({exc}). Fix: re-save the model (save_pretrained).") from None


def check_spec(spec: ModelSpec, trust_remote_code: bool, cache_dir: Path | None, option: str = "--model") -> None:
    """A local model (saved folder or GGUF folder) as far as it can be checked without loading it."""
    if not spec.local_dir:
        return
    if spec.gguf_file:
        check_gguf(Path(spec.local_dir) / spec.gguf_file, cache_dir, option)
    else:
        check_local_model(Path(spec.local_dir), trust_remote_code, option)


def check_gguf(path: Path, cache_dir: Path | None, option: str = "--model") -> None:
    """A GGUF converted before is known whole (a conversion is keyed by the file's hash, so the same
    bytes); one not converted yet has its header and tensor extents read now."""
    from bias_core.models.weights.gguf_cache import converted_for

    if cache_dir is not None and converted_for(path, cache_dir) is not None:
        return
    found = weight_files.gguf_problem(path)
    if found:
        raise AuditUsageError(f"{option} {path.parent}: {path}: {found}. Fix: {weight_files.RESTORE}.")


def check_local_model(folder: Path, trust_remote_code: bool, option: str = "--model") -> None:
    """A saved Hugging Face folder: custom code, an architecture transformers can load as the kind
    of model the audit scores, and weight files that are whole."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        return  # a GGUF folder: check_gguf
    config = _json(config_path)
    if not isinstance(config, dict):
        raise AuditUsageError(f"{config_path}: expected a JSON object, got {type(config).__name__}. "
                              "Fix: re-save the model (save_pretrained).")
    custom = [name for name in _CUSTOM_CODE_FILES
              if (folder / name).is_file() and isinstance(found := _json(folder / name), dict) and "auto_map" in found]
    if custom and not trust_remote_code:
        raise AuditUsageError(
            f"{option} {folder}: the model ships its own Python code ({', '.join(custom)} has an auto_map), which "
            "is not run by default. Fix: pass --trust-remote-code if you trust the code in that folder, or use a "
            "model whose architecture transformers supports natively.")
    if not custom:
        _check_architecture(folder, config, option)
    _check_weight_files(folder, option)


def _check_architecture(folder: Path, config: dict[str, Any], option: str) -> None:
    from transformers import __version__ as transformers_version
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise AuditUsageError(
            f"{folder / 'config.json'}: no model_type, so the architecture is unknown. Fix: re-save the model "
            "with save_pretrained (it writes model_type), or add the right model_type to config.json.")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise AuditUsageError(
            f"{option} {folder}: unknown architecture model_type={model_type!r}: transformers {transformers_version} "
            "does not know it. Fix: upgrade transformers if the architecture is newer, pass --trust-remote-code if "
            "the folder ships its own code, or check the model_type in config.json.")
    kind = detect_kind(folder)
    supported = {"causal": MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, "masked": MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                 "seq2seq": MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES}[kind]
    if model_type not in supported:
        raise AuditUsageError(
            f"{option} {folder}: unsupported architecture model_type={model_type!r}: it is not a language model "
            f"the audit can score (read as {kind}, and transformers has no {kind}-LM class for it). Fix: audit a "
            "causal LM (Llama, GPT-2, ...), a BERT/RoBERTa-family masked LM or BART.")


def _check_weight_files(folder: Path, option: str) -> None:
    """Every weight file transformers may read (safetensors, and torch's .bin where no safetensors)."""
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    for path in files:
        found = weight_files.problem(path)
        if found:
            raise AuditUsageError(f"{option} {folder}: {path}: {found}. Fix: re-save the model (save_pretrained) or "
                                  "restore the file from its source.")


def choices(spec: ModelSpec) -> list[str]:
    """What loading picks for the user among files of a local model folder, said in the run card."""
    if not spec.local_dir:
        return []
    folder = Path(spec.local_dir)
    ggufs = sorted(p.name for p in folder.glob("*.gguf"))
    if spec.gguf_file:
        others = [g for g in ggufs if g != spec.gguf_file]
        return [f"GGUF file {spec.gguf_file} (the first by name; not used: {', '.join(others)})"] if others else []
    out = []
    if ggufs:
        out.append(f"weights from the saved model (config.json); the GGUF file(s) beside it are not used: {', '.join(ggufs)}")
    safetensors, pickled = sorted(folder.glob("*.safetensors")), sorted(folder.glob("*.bin"))
    if safetensors and pickled:
        out.append(f"weights from {', '.join(p.name for p in safetensors)} (safetensors is preferred); not read: "
                   f"{', '.join(p.name for p in pickled)}")
    return out
