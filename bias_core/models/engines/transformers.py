"""The reference engine: Hugging Face transformers in this process (models/loading.py,
causal.py, masked.py), with ``--precision``, ``--adapter``, ``--device-map`` and 4-bit loading."""

from __future__ import annotations

from bias_core.models.engines import EngineEntry
from bias_core.models.loading import load_transformers, wrap_transformers

ENGINE = EngineEntry(name="transformers", load=load_transformers, wrap=wrap_transformers,
                     summary="Hugging Face transformers in this process (the reference)")
