"""``--adapter DIR``: a PEFT adapter folder (LoRA, as fine-tuning usually produces) on a loaded model.

On a full-precision base the adapter is merged into a copy of the weights
(``merge_and_unload``), so the scoring code sees a plain transformers model and nothing else
changes; on a 4-bit base merging would re-quantise the weights, so the PEFT wrapper is kept.
The handle's fingerprint gains the SHA-256 of the adapter's config and weights, so cached
results of the base and of the adapted model never mix.

Problems are usage errors raised before any weights are touched where possible
(``check_adapter_dir``: folder missing, not an adapter, no weights) and otherwise as soon as
PEFT sees them (an adapter made for another architecture: modules it targets are absent, shapes
differ, or some of its weights have no place in this model).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError, some_of
from bias_core.models.registry import ModelSpec
from bias_core.models.weights import file_checks as weight_files
from bias_core.models.weights.adapter_checks import ALLOW_BASE_MISMATCH, base_note, declares_this_base, rank_problem

CONFIG = "adapter_config.json"
WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # PEFT's names, safetensors preferred


def _config(path: Path, folder: str | Path, option: str) -> dict[str, Any]:
    config = path / CONFIG
    if not config.is_file():
        hint = (" It looks like a whole model (it has config.json): pass it to --model instead."
                if (path / "config.json").is_file() else "")
        raise AuditUsageError(f"{option} {folder}: not a PEFT adapter folder (no {CONFIG}).{hint} Fix: pass the "
                              "folder written by PeftModel.save_pretrained.")
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditUsageError(f"{option} {folder}: {CONFIG} is not readable JSON ({exc}).") from exc
    if not isinstance(data, dict) or "peft_type" not in data:
        raise AuditUsageError(f"{option} {folder}: {CONFIG} has no peft_type; it is not a PEFT adapter config.")
    return data


def check_adapter_dir(folder: str | Path, option: str = "--adapter") -> Path:
    """The adapter's weights file, or a usage error saying what the folder lacks: its config, whole
    weights, LoRA ranks that match the config (models/weights/adapter_checks.py)."""
    path = Path(folder).expanduser()
    if not path.exists():
        raise AuditUsageError(f"{option} {folder}: no such folder. Fix: pass the folder PEFT's save_pretrained wrote "
                              f"(it holds {CONFIG} and {WEIGHTS[0]}).")
    if not path.is_dir():
        raise AuditUsageError(f"{option} {folder}: is a file, not a folder. Fix: pass the folder that holds {CONFIG}.")
    config = _config(path, folder, option)
    weights = next((path / name for name in WEIGHTS if (path / name).is_file()), None)
    if weights is None:
        raise AuditUsageError(f"{option} {folder}: {CONFIG} but no weights ({' or '.join(WEIGHTS)}). Fix: save the "
                              "adapter again with save_pretrained.")
    found = weight_files.problem(weights)
    if found:
        raise AuditUsageError(f"{option} {folder}: {weights}: {found}. Fix: save the adapter again "
                              f"(PeftModel.save_pretrained), or {weight_files.RESTORE}.")
    found = rank_problem(config, weights)
    if found:
        raise AuditUsageError(f"{option} {folder}: {found}.")
    return weights


def adapter_card(folder: str | Path, option: str, model_value: str, spec: ModelSpec, cache_dir: Path | None,
                 allow_base_mismatch: bool) -> list[str]:
    """The run card's lines on an adapter: which weights file was read, and its declared base when
    that is not the audited model; a usage error for such a base unless ``allow_base_mismatch``."""
    path = Path(folder).expanduser()
    config, weights = _config(path, folder, option), check_adapter_dir(folder, option)
    notes = []
    if all((path / name).is_file() for name in WEIGHTS):
        notes.append(f"{option} {folder}: weights from {weights.name} (safetensors is preferred); not read: {WEIGHTS[1]}")
    declared = str(config.get("base_model_name_or_path") or "")
    if declared and declares_this_base(declared, model_value, spec, cache_dir):
        return notes
    if declared and not allow_base_mismatch:
        raise AuditUsageError(
            f"{base_note(option, str(folder), declared, model_value, False)}. An adapter on another model than the one "
            "it was trained on changes that model in ways nobody measured. Fix: pass its base model "
            f"({declared}) to {'--baseline' if option == '--baseline-adapter' else '--model'}, or pass "
            f"{ALLOW_BASE_MISMATCH} if {model_value} is that model under another name (a copy, a conversion).")
    return [*notes, base_note(option, str(folder), declared, model_value, allow_base_mismatch)]


def adapter_sha256(folder: str | Path) -> str:
    """SHA-256 of the adapter's config and weights: what its outputs depend on."""
    weights = check_adapter_dir(folder)
    digest = hashlib.sha256()
    for f in (Path(folder).expanduser() / CONFIG, weights):
        digest.update(f.name.encode())
        with f.open("rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()


def _load(model: Any, folder: Path, label: str) -> Any:
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict, load_peft_weights

    try:
        peft_model = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    except RuntimeError as exc:  # torch's load_state_dict: "size mismatch for ..."
        # Ranks were checked against the config (check_adapter_dir): what differs is the size of
        # the layers the adapter wraps.
        first = next((ln.strip() for ln in str(exc).splitlines() if "size mismatch" in ln), str(exc))
        raise AuditUsageError(f"--adapter {label}: its weights do not fit this model's shapes: the layers it was "
                              f"trained on have other sizes than this model's ({first[:240]}). Fix: apply it to the "
                              "model it was trained on (adapter_config.json's base_model_name_or_path).") from exc
    except ValueError as exc:  # "Target modules {...} not found in the base model"
        raise AuditUsageError(f"--adapter {label}: does not fit this model ({str(exc)[:240]}). Fix: apply it to the "
                              "model it was trained on.") from exc
    # PEFT ignores adapter weights that have no module here (e.g. an adapter of a deeper model).
    stored = set(load_peft_weights(str(folder), device="cpu"))
    placed = set(get_peft_model_state_dict(peft_model))
    extra, missing = sorted(stored - placed), sorted(placed - stored)
    if extra or missing:
        parts = ([f"{len(extra)} of its weights have no place in this model ({some_of(extra)})"] if extra else []) + (
            [f"{len(missing)} adapter weights this model needs are absent ({some_of(missing)})"] if missing else [])
        raise AuditUsageError(f"--adapter {label}: made for another base model: {'; '.join(parts)}. Fix: apply it to "
                              "the model it was trained on.")
    return peft_model


def merge_adapter(lm: Any, folder: str | Path, tag: str, label: str | None = None, in_place: bool = False) -> Any:
    """A new handle: ``lm``'s tokenizer and a copy of its model with the adapter applied (merged
    on full-precision bases); fingerprint ``<lm's>:<tag>``. ``lm`` itself is left untouched
    unless ``in_place`` (no copy: for a handle that is only a step of loading)."""
    folder = Path(folder).expanduser()
    label = label or str(folder)
    quantized = bool(getattr(lm.model, "is_loaded_in_4bit", False) or getattr(lm.model, "is_loaded_in_8bit", False))
    # A 4-bit model cannot be deep-copied; PEFT wraps it in place, so the base handle is given up.
    model = lm.model if quantized or in_place else copy.deepcopy(lm.model)
    peft_model = _load(model, folder, label)
    adapted = peft_model if quantized else peft_model.merge_and_unload()
    adapted.eval()
    return dataclasses.replace(lm, model=adapted, fingerprint=f"{lm.fingerprint}:{tag}")


def apply_adapter(lm: Any, folder: str | Path, in_place: bool = False) -> Any:
    """``--adapter DIR`` on a transformers engine, or on a loaded handle (through its engine's
    adapter support); the fingerprint carries the adapter's SHA-256."""
    tag = f"adapter:{adapter_sha256(folder)}"
    if hasattr(lm, "engine"):  # a loaded handle (cached.py)
        return lm.with_adapter(str(folder), tag)
    return merge_adapter(lm, folder, tag, in_place=in_place)
