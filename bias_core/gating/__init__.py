"""Gates: verdicts from results. Pass, fail or inconclusive, and nothing else decides them.

- ``thresholds``: thresholds.toml, the only place that knows the limits, and the absolute gate
  (a confidence interval against a limit);
- ``verdicts``: the three verdicts (a leaf: the absolute and the regression gates both give them);
- ``precision_recheck``: ``--precision exact``, half-precision results re-checked so verdicts
  equal fp32's;
- ``adaptive_sampling``: ``--sample auto``, a probe's sample grown until its gate decides;
- ``regression/``: the release gate, a candidate against a baseline on the same items.

May import: the catalogue, ``metrics`` (results), ``stats``, ``probes`` (the lexicon, the run's
configuration), ``storage`` and ``errors``. Never ``models``, ``runners``, ``suites``,
``mitigation``, ``reports`` or ``pytest_plugin``.
"""
