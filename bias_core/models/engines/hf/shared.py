"""What the transformers engine's causal and masked handles share beside scoring: the cache
identity, the engine card, adapters and the training accessor (token counts and chat rendering:
tokens.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bias_core.models.protocol import EngineInfo
from bias_core.models.tokens import TokenizerText


class HFText(TokenizerText):
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

    def with_adapter(self, folder: str, tag: str) -> Any:
        """A new engine on a copy of the model with the PEFT adapter applied (models/weights/adapter.py)."""
        from bias_core.models.weights.adapter import merge_adapter

        return merge_adapter(self, folder, tag)

    def training_engine(self) -> Any:
        """The engine whose torch module fine-tuning uses (training.TrainingAccess)."""
        return self
