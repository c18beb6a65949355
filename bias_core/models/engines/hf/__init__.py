"""The transformers engine's model handles (the reference engine, registered and loaded
in ``engines/transformers.py``).

- ``causal``: a causal LM's scoring and generation; ``masked``: masked LMs and BART mask filling;
- ``shared``: what both handles share beside scoring (cache identity, engine card, adapters,
  the training accessor).

Engine internals: nothing outside ``bias_core.models`` imports them (tests/test_import_rules.py).
"""
