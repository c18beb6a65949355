"""A debiased model handle: a trained adapter applied to the session's base model.

Two ways, one result (up to rounding), the session's model untouched by both:

- merged (full-precision bases, when a second copy fits): the LoRA product is added into a
  deep copy of the weights, so the variant runs as fast as the base;
- unmerged (quantized bases, or too little memory for a copy): LoRA layers wrap a second module
  tree that shares every weight with the base, so only the adapter's own weights are new. A
  4-bit base always goes this way: merging into NF4 weights would quantize them again, and the
  variant would no longer be "the audited model plus the adapter".
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.mitigation.training.adapter_cache import base_fingerprint, key_hash, read_marker
from bias_core.mitigation.training.lora import ParameterState

# A merged copy is made on a GPU only when this many times the model's bytes are free.
MERGE_HEADROOM = 1.2


def adapter_identity(adapter_dir: Path | str) -> tuple[dict[str, Any], str]:
    """(key, key hash) of a cached adapter folder, from its done-marker."""
    marker = read_marker(Path(adapter_dir))
    if marker is None:
        raise AuditUsageError(
            f"{adapter_dir} is not a complete cached adapter (no readable done-marker). Fix: pass the folder "
            "returned by train_debias_adapter / train_sft_adapter."
        )
    return marker["key"], key_hash(marker["key"])


def is_quantized(model: Any) -> bool:
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False)
                or getattr(model, "hf_quantizer", None) is not None)


def model_bytes(model: Any) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def merge_by_default(model: Any) -> bool:
    """Merge into a copy for a full-precision base, unless on a GPU without room for the copy."""
    if is_quantized(model):
        return False
    device = next(model.parameters()).device
    if device.type != "cuda":
        return True
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    return free >= MERGE_HEADROOM * model_bytes(model)


def shared_view(model: Any) -> Any:
    """A copy of ``model``'s module tree that shares every parameter and buffer with it."""
    memo = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo)


def with_adapter(lm: Any, adapter_dir: Path | str, merge: bool | None = None) -> Any:
    """A new handle: ``lm``'s model with the adapter applied, merged or unmerged (``merge=None``:
    ``merge_by_default``; see the module docstring), through the "training" capability's torch
    module. ``lm`` itself is untouched. Its fingerprint is the base fingerprint plus the adapter's
    key hash (and ":unmerged"), so result-cache entries of the base and each variant never mix."""
    from peft import PeftModel

    t = lm.training()
    key, digest = adapter_identity(adapter_dir)
    served = lm.info().engine != "transformers" and "adapters" in lm.capabilities
    if key.get("base") != base_fingerprint(t):
        raise AuditUsageError(
            f"adapter {adapter_dir} was trained on another base model ({key.get('base')}), not on {t.name} "
            f"({base_fingerprint(t)}). Fix: train the adapter on this model."
        )
    if served:  # an engine that serves adapters itself (vLLM's LoRA): the variant runs there, as its base
        return lm.with_adapter(str(adapter_dir), digest)
    if merge is None:
        merge = merge_by_default(t.model)
    if merge:
        model = PeftModel.from_pretrained(copy.deepcopy(t.model), str(adapter_dir)).merge_and_unload()
        fingerprint = f"{t.fingerprint}:{digest}"
    else:
        state = ParameterState(t.model)  # peft freezes the (shared) base weights: put the flags back
        model = PeftModel.from_pretrained(shared_view(t.model), str(adapter_dir)).get_base_model()
        state.restore(t.model)
        fingerprint = f"{t.fingerprint}:{digest}:unmerged"
    model.eval()
    return t.with_model(model, fingerprint)
