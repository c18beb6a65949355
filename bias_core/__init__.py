"""bias_core: the library behind the gender-bias audit suite.

Each folder holds one role; data flows down this list and nothing imports upward
(tests/test_import_rules.py holds the table of what each part may import; docs/architecture.md
says it in prose):

    catalogue.py, metric_spec.py  every metric and probe, declared once (public for extensions)
    errors.py                     the errors users see, each naming the problem and the fix
    storage/                      files written so an interruption never leaves half of one; the
                                  content-addressed result cache of model outputs
    probes/                       item lists with provenance, where data comes from (sources),
                                  the --data-dir check, the gender lexicon, text placeholders
    data/                         the project's own probe data (files, no code)
    models/                       the model seam: protocol, loading, registry, result cache;
      engines/                    one file per backend (transformers' handles in engines/hf/)
      precision/                  --precision: half-precision copies, fp32 re-checks, calibration
      weights/                    model folders and weight files checked; GGUF; adapters
      placement/                  devices, GPU memory, whether weights fit
    classifiers/                  toxicity and regard scorers of model outputs
    stats/                        resampling (bootstrap, permutation), sequential, paired
    metrics/                      pure functions: numbers/text -> MetricResult
    runners/                      the only code that sends a probe's items through a model
    gating/                       thresholds.toml and the verdicts; --precision exact re-checks;
                                  --sample auto; regression/: the release gate
    mitigation/                   methods/ (debiasing), training/ (LoRA plumbing, losses, corpus,
                                  adapter cache), evaluation/ (paired tests, guards, trade-off)
    suites/                       one object per audit family: probe -> runner -> metric
    reports/                      results.json/CSV, JUnit, the banner, the HTML report
    pytest_plugin/                options, fixtures, hooks, extension hooks, the release gate's
                                  session: the only package that imports pytest
    plugin.py                     the pytest11 entry point; loads pytest_plugin.hooks, .fixtures

Where a new piece goes: a metric is a catalogue entry plus a pure function in metrics/ (and a
runner in runners/ if none asks the model for its numbers); a probe is a loader in probes/ and
its catalogue line; an engine is one file in models/engines/; a report section goes in reports/;
a command-line option in pytest_plugin/options.py.
"""

__version__ = "0.1.0"
