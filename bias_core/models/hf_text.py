"""What the transformers engine's causal and masked handles share beside scoring: the cache
identity, token counts, chat rendering, the engine card, adapters and the training accessor."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bias_core.models.protocol import EngineInfo


def render_chat(text: str, tokenizer: Any) -> str:
    """What the model is given: the chat template for chat models, the plain prompt otherwise.

    A tokenizer with a ``chat_template`` gets one user turn and the generation prompt. When the
    template writes the BOS token itself and the tokenizer also adds BOS on encoding, the
    template's copy is dropped, so encoding with special tokens does not produce two BOS tokens.
    """
    if not getattr(tokenizer, "chat_template", None):
        return text
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and rendered.startswith(bos):
        probe = tokenizer("x", add_special_tokens=True)["input_ids"]
        if probe and probe[0] == tokenizer.bos_token_id:
            rendered = rendered[len(bos):]
    return rendered


class HFText:
    """Mixed into CausalLM and MaskedLM (dataclasses with model, tokenizer, fingerprints, device)."""

    model: Any
    tokenizer: Any
    fingerprint: str
    tokenizer_fingerprint: str
    weights_sha256: str

    def cache_identity(self) -> dict[str, str]:
        """The result cache's model part: weights as verified at load, tokenizer and dtype."""
        return {"model": self.fingerprint, "weights": getattr(self, "weights_sha256", ""),
                "tokenizer": self.tokenizer_fingerprint, "dtype": str(self.model.dtype)}

    def hf_info(self, dtype: str) -> EngineInfo:
        import transformers

        return EngineInfo(engine="transformers", version=transformers.__version__, dtype=dtype, device=str(self.device))

    def info(self) -> EngineInfo:
        return self.hf_info(str(self.model.dtype).removeprefix("torch."))

    def replace_model(self, model: Any, fingerprint: str) -> Any:
        """The same engine on another module tree (an adapted or debiased copy)."""
        return dataclasses.replace(self, model=model, fingerprint=fingerprint)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        if not len(texts):
            return []
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def render_chat(self, text: str) -> str:
        return render_chat(text, self.tokenizer)

    def with_adapter(self, folder: str, tag: str) -> Any:
        """A new engine on a copy of the model with the PEFT adapter applied (models/adapter.py)."""
        from bias_core.models.adapter import merge_adapter

        return merge_adapter(self, folder, tag)

    def training_engine(self) -> Any:
        """The engine whose torch module fine-tuning uses (training.TrainingAccess)."""
        return self
