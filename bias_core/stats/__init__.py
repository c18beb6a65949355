"""Statistics on per-item values: pure functions, seeded, no model and no verdict.

- ``resampling``: bootstrap confidence intervals and paired permutation tests;
- ``sequential``: confidence sequences, valid at every look (for ``--sample auto``);
- ``paired``: a candidate against a baseline on the same items (the release gate's statistics).

May import: ``errors`` and, for types only, what it is handed. Never ``models``, ``runners``,
``suites``, ``gating`` (at run time), ``mitigation``, ``reports`` or ``pytest_plugin``.
"""
