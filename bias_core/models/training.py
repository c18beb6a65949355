"""The "training" capability: what fine-tuning code (bias_core/mitigation/) may use of a model.

Fine-tuning needs the torch module itself, which only an engine that runs the model in this
process has. ``lm.training()`` returns a ``TrainingAccess`` for such an engine (and
``EngineCannot`` for others: vLLM serves, an HTTP endpoint answers, neither trains), so the
mitigation code reaches the module through one declared door instead of attribute poking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Padding and KV-cache helpers training code shares with the transformers engine's scoring.
from bias_core.models.batching import left_pad, width_batches  # noqa: F401 - re-exported
from bias_core.models.engines.hf.causal import cache_rows  # noqa: F401 - re-exported


class TrainingAccess:
    """The torch module, tokenizer and device of a loaded model, and handles on modified copies."""

    def __init__(self, handle: Any):
        self._handle = handle
        self._engine = handle.engine.training_engine()

    # ----- what the model is ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def kind(self) -> str:
        return self._engine.kind

    @property
    def fingerprint(self) -> str:
        return self._engine.fingerprint

    @property
    def tokenizer_fingerprint(self) -> str:
        return self._engine.tokenizer_fingerprint

    @property
    def model(self) -> Any:
        """The torch module (LoRA layers are attached to it for training and removed after)."""
        return self._engine.model

    @property
    def tokenizer(self) -> Any:
        return self._engine.tokenizer

    @property
    def device(self) -> Any:
        return self._engine.device

    @property
    def dtype(self) -> str:
        return str(self._engine.model.dtype)

    @property
    def batch_size(self) -> int:
        return self._engine.batch_size

    # ----- tokenization as the scoring code does it -------------------------------------------------
    def prefix_token_id(self) -> int:
        return self._engine.prefix_token_id()

    def split_requests(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        return self._engine.split_requests(pairs)

    def encode_special(self, text: str) -> tuple[list[int], list[int]]:
        """(token ids with special tokens, which are special): a masked LM's encoding."""
        return self._engine._encode(text)

    def right_pad(self, seqs: Sequence[Sequence[int]]) -> Any:
        """(ids, attention mask) of a masked LM's right-padded batch, on its device."""
        return self._engine._right_pad(seqs)

    # ----- handles on modified models ---------------------------------------------------------------
    def with_model(self, model: Any, fingerprint: str) -> Any:
        """A handle on ``model`` (an adapted or debiased copy, or the module itself with a hook)
        under ``fingerprint``, in the same result cache: its entries never mix with the base's.
        Only where the handle's engine runs this module itself: another engine (vLLM) would have
        the variant computed by a different engine than the model it is compared with."""
        if self._engine is not self._handle.engine:
            from bias_core.models.protocol import cannot

            raise cannot(self._handle.info().engine, "training", "a modified torch module cannot be served by it; "
                         "adapters can (LoRA), hooks such as SentenceDebias's cannot")
        return self._handle.with_engine(self._engine.replace_model(model, fingerprint))
