"""What an adapter folder says about itself, checked before any model loads: its weights are whole,
their LoRA ranks are the ones its config declares, and its declared base model is the model it
is applied to (``--allow-adapter-base-mismatch`` lets a known other name through, and the run
card says so).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bias_core.models.registry import ModelSpec

# PEFT's saved LoRA keys: <module>.lora_A.weight (rank first), <module>.lora_B.weight (rank
# second); embedding LoRA stores lora_embedding_A/B as bare parameters.
_LORA_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.(?P<part>lora_(?:embedding_)?[AB])(?:\.weight)?$")
ALLOW_BASE_MISMATCH = "--allow-adapter-base-mismatch"


def _shapes(weights: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from the file's header (safetensors) or a weights-only load (torch .bin)."""
    if weights.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(weights), framework="numpy") as fh:
            return {key: tuple(fh.get_slice(key).get_shape()) for key in fh.keys()}
    import torch

    state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    return {key: tuple(value.shape) for key, value in state.items()}


def rank_problem(config: dict[str, Any], weights: Path) -> str | None:
    """A LoRA whose stored A/B matrices have another rank than adapter_config.json's ``r`` (or its
    ``rank_pattern``) for that module: the config and the weights were not saved together."""
    if str(config.get("peft_type", "")).upper() != "LORA" or not isinstance(config.get("r"), int):
        return None
    from peft.utils.other import get_pattern_key

    pattern = config.get("rank_pattern") or {}
    wrong = []
    for key, shape in sorted(_shapes(weights).items()):
        found = _LORA_KEY.match(key)
        if found is None or len(shape) < 2:
            continue
        module, part = found["module"], found["part"]
        stored = shape[0] if part.endswith("A") else shape[1]
        declared = pattern.get(get_pattern_key(pattern.keys(), module), config["r"])
        if stored != declared:
            wrong.append((module, part, shape, stored, declared))
    if not wrong:
        return None
    module, part, shape, stored, declared = wrong[0]
    more = f" (and {len(wrong) - 1} more matrices)" if len(wrong) > 1 else ""
    return (f"LoRA rank mismatch: adapter_config.json declares rank r={declared} for {module}, but {weights.name} "
            f"holds rank {stored} there ({part} has shape {shape}){more}: the config and the weights were not saved "
            f"together. Fix: save the adapter again with PeftModel.save_pretrained (it writes both), or set r to "
            f"{stored} in adapter_config.json if these weights are the right ones")


def _same_name(a: str, b: str) -> bool:
    return a.strip().rstrip("/").casefold() == b.strip().rstrip("/").casefold()


def declares_this_base(declared: str, model_value: str, spec: ModelSpec, cache_dir: Path | None) -> bool:
    """Is ``declared`` (base_model_name_or_path) a name of the model being audited? The --model
    value, the registry alias, its hub id or the hub model a packaged GGUF was converted from,
    the same local folder, or a converted-GGUF folder of the same GGUF bytes (its name carries
    their hash, so a folder on another machine counts too)."""
    names = [model_value, spec.name, spec.hub_id or "", *spec.upstream]
    if any(n and _same_name(declared, n) for n in names):
        return True
    path = Path(declared).expanduser()
    if spec.local_dir and not spec.gguf_file and path.exists() and path.resolve() == Path(spec.local_dir).resolve():
        return True
    if spec.gguf_file and path.name.startswith("gguf-") and cache_dir is not None:
        from bias_core.models.weights.gguf_cache import file_sha256, locate_gguf

        return path.name == f"gguf-{file_sha256(locate_gguf(spec, cache_dir), cache_dir)[:32]}"
    return False


def base_note(option: str, folder: str, declared: str | None, model_value: str, allowed: bool) -> str:
    """The run card's line on an adapter's base (or the usage error's first sentence)."""
    if not declared:
        return f"{option} {folder}: adapter_config.json declares no base model (no base_model_name_or_path)"
    what = f"{option} {folder}: declares its base model as {declared!r} (base_model_name_or_path in adapter_config.json), not {model_value}"
    return what + (f"; applied anyway ({ALLOW_BASE_MISMATCH})" if allowed else "")
