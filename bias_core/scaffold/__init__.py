"""Scaffolds for extending the audit: ``python -m bias_core.scaffold metric NAME --family F --probe P``
writes a new metric's catalogue entry, its pure-function stub, its gates in thresholds.toml and a
hand-computed test that fails until they are filled in (docs/extending/metric.md)."""
