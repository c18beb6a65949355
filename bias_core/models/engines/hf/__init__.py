"""The transformers engine's model handles (the reference engine, registered and loaded
in ``engines/transformers.py``).

- ``causal``: a causal LM's scoring and generation; ``masked``: masked LMs and BART mask filling;
- ``shared``: what both handles share beside scoring (cache identity, engine card, adapters,
  the training accessor);
- ``options``: the engine's own command-line options (``--load-in-4bit``, ``--device-map``).

Engine internals: nothing outside ``bias_core.models`` imports them (tests/test_import_rules.py).
"""
