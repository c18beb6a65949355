"""Model handles behind one seam: engines (models/engines/), the result cache around them
(cached.py), loading (registry, GGUF conversion, hub) and the protocol they share (protocol.py)."""

from bias_core.models.decoding import DecodingConfig
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.engines.hf.masked import MaskedLM
from bias_core.models.loading import LoadOptions, check_options, load_model
from bias_core.models.protocol import EngineCannot, EngineInfo, ScoringModel
from bias_core.models.registry import DEFAULT_MODEL, MODEL_ALIASES, ModelSpec, detect_kind, resolve_model

__all__ = ["CausalLM", "DecodingConfig", "EngineCannot", "EngineInfo", "LoadOptions", "MaskedLM", "ScoringModel",
           "check_options", "load_model", "DEFAULT_MODEL", "MODEL_ALIASES", "ModelSpec", "detect_kind", "resolve_model"]
