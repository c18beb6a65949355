"""The three verdicts a gate gives.

A leaf module: the absolute gates (``bias_core.gating.thresholds``) and the regression gate
(``bias_core.gating.regression.gate``) both give them, and gating/thresholds.py reads the regression margins
through gating/regression/gate.py, so the names cannot live in either without a cycle.
"""

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
