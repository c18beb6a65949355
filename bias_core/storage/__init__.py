"""Files on disk: written so an interruption never leaves half of one.

- ``result_cache``: the content-addressed cache of model outputs (JSON, never pickle) and the
  file helpers it is built on (atomic writes, whole appends, content hashes, writability).

A bottom layer: every package may import it; it imports nothing of bias_core.
"""
