"""A model's files, checked before and as they load.

- ``preflight``: a local model folder checked before any model loads;
- ``file_checks``: whether a weight file is whole (headers only);
- ``integrity``: whether weight files are the bytes they were recorded as;
- ``load_report``: what ``from_pretrained`` did not read is a usage error, never random weights;
- ``gguf_cache``: GGUF weights converted once to a cached safetensors folder;
- ``adapter`` and ``adapter_checks``: ``--adapter DIR``, a PEFT adapter on a loaded model.

Part of the model seam: outside ``bias_core.models`` only ``preflight`` and ``adapter`` are
imported.
"""
