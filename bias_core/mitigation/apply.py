"""A debiased model handle: a trained adapter merged into a copy of the base model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.mitigation.adapter_cache import base_fingerprint, key_hash, read_marker
from bias_core.models.adapter import merge_adapter


def adapter_identity(adapter_dir: Path | str) -> tuple[dict[str, Any], str]:
    """(key, key hash) of a cached adapter folder, from its done-marker."""
    marker = read_marker(Path(adapter_dir))
    if marker is None:
        raise AuditUsageError(
            f"{adapter_dir} is not a complete cached adapter (no readable done-marker). Fix: pass the folder "
            "returned by train_debias_adapter / train_sft_adapter."
        )
    return marker["key"], key_hash(marker["key"])


def with_adapter(lm: Any, adapter_dir: Path | str) -> Any:
    """A new CausalLM: ``lm``'s tokenizer, and a deep copy of its model with the LoRA weights
    merged in (``lm`` itself is untouched). Its fingerprint is the base fingerprint plus the
    adapter's key hash, so result-cache entries of the base and the debiased model never mix."""
    key, digest = adapter_identity(adapter_dir)
    if key.get("base") != base_fingerprint(lm):
        raise AuditUsageError(
            f"adapter {adapter_dir} was trained on another base model ({key.get('base')}), not on {lm.name} "
            f"({base_fingerprint(lm)}). Fix: train the adapter on this model."
        )
    return merge_adapter(lm, adapter_dir, digest)
