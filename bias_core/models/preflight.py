"""Checks of a local model folder that need no model: run when the options are read, so a folder
transformers cannot load is one usage error before any test, not a traceback in every test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.registry import detect_kind

_CUSTOM_CODE_FILES = ("config.json", "tokenizer_config.json")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AuditUsageError(f"{path}: not valid JSON ({exc}). Fix: re-save the model (save_pretrained).") from None


def check_local_model(folder: Path, trust_remote_code: bool) -> None:
    """A saved Hugging Face folder: custom code, an architecture transformers can load as the kind
    of model the audit scores, and safetensors files whose headers are whole."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        return  # a GGUF folder: converted (and checked) when it loads
    config = _json(config_path)
    if not isinstance(config, dict):
        raise AuditUsageError(f"{config_path}: expected a JSON object, got {type(config).__name__}. "
                              "Fix: re-save the model (save_pretrained).")
    custom = [name for name in _CUSTOM_CODE_FILES
              if (folder / name).is_file() and isinstance(found := _json(folder / name), dict) and "auto_map" in found]
    if custom and not trust_remote_code:
        raise AuditUsageError(
            f"--model {folder}: the model ships its own Python code ({', '.join(custom)} has an auto_map), which "
            "is not run by default. Fix: pass --trust-remote-code if you trust the code in that folder, or use a "
            "model whose architecture transformers supports natively.")
    if not custom:
        _check_architecture(folder, config)
    _check_safetensors(folder)


def _check_architecture(folder: Path, config: dict[str, Any]) -> None:
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
            f"--model {folder}: unknown architecture model_type={model_type!r}: transformers {transformers_version} "
            "does not know it. Fix: upgrade transformers if the architecture is newer, pass --trust-remote-code if "
            "the folder ships its own code, or check the model_type in config.json.")
    kind = detect_kind(folder)
    supported = {"causal": MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, "masked": MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                 "seq2seq": MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES}[kind]
    if model_type not in supported:
        raise AuditUsageError(
            f"--model {folder}: unsupported architecture model_type={model_type!r}: it is not a language model "
            f"the audit can score (read as {kind}, and transformers has no {kind}-LM class for it). Fix: audit a "
            "causal LM (Llama, GPT-2, ...), a BERT/RoBERTa-family masked LM or BART.")


def _check_safetensors(folder: Path) -> None:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return
    from safetensors import SafetensorError, safe_open

    for path in files:
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except (SafetensorError, OSError) as exc:
            raise AuditUsageError(
                f"{path}: not a readable safetensors file ({exc}): it is truncated or garbled. Fix: re-save the "
                "model (save_pretrained) or restore the file from its source.") from None
