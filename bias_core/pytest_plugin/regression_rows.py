"""The regression gate's verdicts as result rows.

The non-inferiority gate (``gating/regression/gate.py``) judges the harm CI against the metric's
margin; a "fail" must also be significant after adjustment across the run (Holm, or
Benjamini-Hochberg for more than ``LARGE_FAMILY`` comparisons) at ``ALPHA``, else it is reported
inconclusive. A comparison with too many items left out gives no verdict: an error row.
"""

from __future__ import annotations

from typing import Any

from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.stats.paired import PairedComparison, adjust

LARGE_FAMILY = 20  # more comparisons than this: Benjamini-Hochberg (FDR) instead of Holm (FWER)
ALPHA = 0.05


def paired_rows(out: dict[tuple[str, str, str], Any], comparisons: dict[tuple[str, str, str], PairedComparison],
                pairs: dict[tuple[str, str, str], Any], powers: dict[tuple[str, str, str], dict[str, Any]],
                baseline: str, configs) -> dict[tuple[str, str, str], Any]:
    """``out`` with a row for each comparison, adjusted across all of them (the adjustment needs
    every p-value of the session), and the configurations' note on its error rows."""
    method = "bh" if len(comparisons) > LARGE_FAMILY else "holm"
    for key, c in zip(comparisons, adjust(list(comparisons.values()))):
        out[key] = {**_row(c, key[0], method, baseline, configs), **pair_counts(pairs[key]), **powers[key]}
    for key, found in out.items():
        if isinstance(found, dict) and found.get("verdict") == "error":
            found["config"] = configs.describe()
    return out


def pair_counts(paired: Any) -> dict[str, Any]:
    """What a row stands on: pairs, the items the metric uses, those with a value in one run only (by
    side), and the probe's items with a value in neither run."""
    return {"n_items": paired.n_items, "missing_candidate": paired.missing_candidate,
            "missing_baseline": paired.missing_baseline, "n_unused": paired.n_unused, "pairs": paired.pairs_text()}


def error_row(paired: Any, family: str, baseline: str, reason: str) -> dict[str, Any]:
    """A comparison that gives no verdict (too many items left out): its counts and why."""
    return {"kind": "regression", "test_id": f"regression-{paired.probe}-{paired.metric}", "family": family,
            "probe": paired.probe, "metric": paired.metric, "baseline": baseline, "value": None, "ci_low": None,
            "ci_high": None, "n": len(paired.ids), "n_dropped": paired.n_dropped, **pair_counts(paired),
            "baseline_value": paired.baseline_value, "candidate_value": paired.candidate_value,
            "verdict": "error", "reason": reason}


def _row(c: PairedComparison, family: str, method: str, baseline: str, configs) -> dict[str, Any]:
    p_adjusted = c.p_bh if method == "bh" else c.p_holm
    verdict = c.verdict
    if verdict == FAIL and not p_adjusted < ALPHA:
        verdict = INCONCLUSIVE  # beyond the margin, but not significantly worse once adjusted
    # Significantly worse, by the test a fail needs, but not beyond the margin: reported, not blocking.
    worse = verdict != FAIL and c.harm > 0 and p_adjusted is not None and p_adjusted < ALPHA
    return {
        "kind": "regression", "test_id": f"regression-{c.test_id}", "family": family, "probe": c.probe,
        "metric": c.metric, "baseline": baseline, "value": c.delta, "ci_low": c.delta_ci[0], "ci_high": c.delta_ci[1],
        "n": c.n, "n_dropped": c.n_dropped, "baseline_value": c.baseline_value, "candidate_value": c.candidate_value,
        "harm": c.harm, "harm_ci_low": c.harm_ci[0], "harm_ci_high": c.harm_ci[1], "margin": c.margin,
        "margin_rule": c.margin_rule,
        "better": c.direction, "ideal": c.ideal, "verdict": verdict, "worse_within_margin": worse, "p_value": c.p_value, "p_holm": c.p_holm,
        "p_bh": c.p_bh, "p_adjusted": p_adjusted, "adjustment": method, "test": c.test,
        "config": configs.describe(), "dtypes_differ": configs.dtype_differs,
        "moved": {"up": list(c.moved_up), "down": list(c.moved_down)},
    }
