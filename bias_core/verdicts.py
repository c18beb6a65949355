"""The three verdicts a gate gives.

A leaf module: the absolute gates (``bias_core.gates``) and the regression gate
(``bias_core.regression.gate``) both give them, and gates.py reads the regression margins
through regression/gate.py, so the names cannot live in either without a cycle.
"""

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
