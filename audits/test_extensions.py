"""Audits that installed packages add through the ``bias_core.suites`` entry points
(bias_core/pytest_plugin/hookspec.py): one gated test per (probe, metric) of each registered suite.
Without such a package nothing is collected here."""

import pytest

from bias_core.pytest_plugin.extensions import EXTENSIONS

CASES = [pytest.param(probe, metric, family, id=f"{probe}-{metric}", marks=pytest.mark.audit(family=family))
         for family, probe, metric in EXTENSIONS.cases()]

if CASES:
    @pytest.mark.parametrize("probe, metric, family", CASES)
    def test_extension(probe, metric, family, suite, gate):
        gate(suite.result(probe, metric), probe=probe, metric=metric)
