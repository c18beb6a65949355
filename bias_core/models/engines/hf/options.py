"""The transformers engine's own command-line options (``EngineOption``; ``ENGINE.options`` in
``engines/transformers.py``): ``--load-in-4bit`` and ``--device-map``.

They are declared here, not in the engine's file as vLLM's and the endpoint's are, because
the placement modules read them too (``models/placement/``: the GPU-fit check, the worker's
GPU, the run header's device and dtype) and the engine's file imports those modules. Their
values are in ``LoadOptions.engine_options`` (``FOUR_BIT.of(opts)``); given with another
engine, the plugin refuses them as not that engine's.

``--precision``, ``--dtype`` and ``--trust-remote-code`` stay the run's options
(``LoadOptions`` fields): every run's card records its precision mode, vLLM reads the dtype,
and vLLM and the endpoint's local tokenizer honour ``--trust-remote-code``.
"""

from __future__ import annotations

from bias_core.models.engines import EngineOption

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")

FOUR_BIT = EngineOption("--load-in-4bit", "4-bit NF4 weights via bitsandbytes (CUDA only)", bool, default=False,
                        what="true or false")
DEVICE_MAP = EngineOption("--device-map",
                          "spread a model too large for one GPU over all visible GPUs with accelerate (auto)",
                          what=f"one of {', '.join(DEVICE_MAPS)}", example="auto")
OPTIONS = (FOUR_BIT, DEVICE_MAP)
