"""Files on disk: written so an interruption never leaves half of one.

- ``files``: the helpers everything bias_core writes goes through (atomic writes, whole appends,
  content hashes, whether a folder can take more files);
- ``result_cache``: the content-addressed cache of model outputs (JSON, never pickle);
- ``visible``: text from outside the run (a generation, a data file) with its control characters
  written as escapes, for every human-readable file and the terminal;
- ``redaction``: secrets (an endpoint's API key) kept out of everything written: the file
  helpers and the reports redact them.

A bottom layer: every package may import it; it imports nothing of bias_core.
"""
