"""The pytest integration: the only package that imports pytest.

- ``hooks``: the plugin's hooks (the run folder, the gate check before any model loads, test
  outcomes, result rows) and ``fixtures`` (the session model, the suites, ``gate``), both
  loaded by ``bias_core.plugin``, the ``pytest11`` entry point;
- ``reporter``: the run folder's files, kept current after every test; ``run_card``: what a
  run audited and how, for the header, JUnit and results.json;
- ``options``: the command-line options, validated into one settings object before any model
  loads; ``regression_options``: the release gate's (``--baseline``, ``--candidate-log``/``--baseline-log``, ...);
- ``session_state``: the session's one typed ``RunState`` (settings, run id and folder, the
  loaded model, the sample plan, the cache counts), registered with the plugin manager as
  ``bias_core.run``; the per-test stash keys; the run's sample plan;
- ``suite_factory``: which suite audits a family (the project's own, or a package's);
- ``hookspec`` and ``extensions``: the hooks through which other packages add probes, metrics
  and suites (entry-point group ``bias_core.suites``) and see each gated result;
- ``result_row``: one typed result row; ``outputs``: report destinations checked up front and
  written so that a failure after the tests never loses the verdict;
- the release gate inside an audit run: ``regression_session``, one plugin object
  (``RegressionSession``, its own state and hooks) registered as ``bias_core.regression``;
  ``regression_fixtures``, the fixtures ``test_regression`` asks for, which find that object by
  its name; ``regression_cases`` (which comparisons, checked before any model loads),
  ``regression_config`` (the run's ``RunConfig``), ``regression_items`` (per-item blocks),
  ``regression_rows`` (verdicts as rows), ``regression_summary`` (terminal lines, Markdown);
- ``precision_session``: ``--precision``'s fields of each row; it and the release gate attach to
  ``gate`` through ``pytest_bias_core_gate_result``.

May import every other package of bias_core; nothing imports it but ``bias_core.plugin``.
A new command-line option goes in ``options`` (or ``regression_options``); a new report
section goes in ``bias_core.reports``, called from ``reporter``.
"""
