"""The regression gate's summaries of a run: its lines at the end of the terminal report, and the
Markdown summary for CI pages (``--summary-md``, ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bias_core.gating.regression.summary import FileMark
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE
from bias_core.pytest_plugin.regression_options import RegressionOptions
from bias_core.stats.paired import PairedComparison
from bias_core.storage.visible import visible


def terminal_summary(terminalreporter, rows: list[dict[str, Any]], options: RegressionOptions) -> None:
    """The judged regression rows: their counts, the configurations compared, each row's n and notes."""
    judged = [r for r in rows if r.get("kind") == "regression" and r.get("config")]
    if not judged:
        return
    counts = {v: sum(r["verdict"] == v for r in judged) for v in (FAIL, INCONCLUSIVE, "pass", "error")}
    errored = f", {counts['error']} errored (too few pairs)" if counts["error"] else ""
    # the baseline's label and card come from a run folder (a downloaded artifact): shown escaped
    terminalreporter.write_sep("-", visible(f"candidate vs baseline ({options.label()}): {len(judged)} paired "
                                            f"comparisons, {counts[FAIL]} worse beyond the margin, "
                                            f"{counts[INCONCLUSIVE]} inconclusive, {counts['pass']} passed{errored}"))
    adjusted = next((r["adjustment"] for r in judged if r.get("adjustment")), "")
    terminalreporter.line(visible(f"  {judged[0]['config']}" + (f"; p-values adjusted by {adjusted}" if adjusted else "")))
    from bias_core.gating.regression.power import detect_text
    from bias_core.reports.fmt import pairs_of, worse_note

    width = max(len(r["test_id"]) for r in judged)
    for r in sorted(judged, key=lambda r: r["test_id"]):  # every row's n: what its verdict stands on
        short = r["verdict"] in (FAIL, "error") or bool(r.get("n_dropped"))
        terminalreporter.line(f"  {r['test_id']:<{width}}  {r['verdict']:<12} n = {pairs_of(r)}",
                              red=r["verdict"] in (FAIL, "error"), yellow=short and r["verdict"] not in (FAIL, "error"))
    for r in judged:
        if worse_note(r):
            terminalreporter.line(visible(f"  {r['test_id']}: {worse_note(r)} (margin {r['margin']:.4g})"), yellow=True)
    for r in judged:
        if detect_text(r):
            terminalreporter.line(visible(f"  {r['test_id']}: {detect_text(r)}"), yellow=True)


def write_run_summary(rows: list[dict[str, Any]], options: RegressionOptions, settings: Any, exitstatus: int,
                      attempt=None, since: FileMark | None = None) -> list[Path]:
    """Write the Markdown summary of ``rows`` to --summary-md and $GITHUB_STEP_SUMMARY; with ``attempt``
    (``OutputLog.attempt``) a destination that cannot be written is recorded, not raised, and the
    other is still written. ``since``: --summary-md as this run found it (another run's write is kept)."""
    from bias_core.gating.regression.power import detect_text
    from bias_core.gating.regression.summary import render_summary, write_summary
    from bias_core.reports.banner import banner_for_run
    from bias_core.reports.fmt import pairs_of, worse_note

    regression = [comparison_from_row(r) for r in rows if r.get("kind") == "regression" and r.get("harm") is not None]
    absolute = [r for r in rows if r.get("kind") != "regression"]
    banner = banner_for_run(rows, {"strict": settings.strict, "complete": int(exitstatus) in (0, 1)})
    note = next((r.get("config", "") for r in rows if r.get("kind") == "regression" and r.get("config")), "")
    compared = [r for r in rows if r.get("kind") == "regression"]
    # the banner's headline and its test lines, grouped as in the terminal and report.html
    markdown = render_summary(regression, absolute, banner=banner.markdown(),
                              baseline=options.label(), config_note=note,
                              title=options.title(settings.model_value),
                              worse={f"{r['probe']}-{r['metric']}": worse_note(r) for r in rows if worse_note(r)},
                              pairs={f"{r['probe']}-{r['metric']}": pairs_of(r) for r in compared if r.get("n") is not None},
                              errored={f"{r['probe']}-{r['metric']}": str(r.get("reason") or "the test raised an error")
                                       for r in compared if r.get("verdict") == "error"},
                              weak={f"{r['probe']}-{r['metric']}": detect_text(r) for r in compared if detect_text(r)})
    if attempt is None:
        return write_summary(markdown, options.summary_md, since=since)
    written: list[Path] = []
    path, step = options.summary_md, os.environ.get("GITHUB_STEP_SUMMARY")
    if path is not None:
        attempt(f"--summary-md {path}", lambda: written.extend(write_summary(markdown, path, environ={}, since=since)))
    if step:
        attempt(f"$GITHUB_STEP_SUMMARY {step}", lambda: written.extend(write_summary(markdown, None)))
    return written


def comparison_from_row(row: dict[str, Any]) -> PairedComparison:
    """A results.json regression row back as a ``PairedComparison`` (for the Markdown summary)."""
    return PairedComparison(
        probe=row["probe"], metric=row["metric"], n=int(row.get("n") or 0), n_dropped=int(row.get("n_dropped") or 0),
        baseline_value=row["baseline_value"], candidate_value=row["candidate_value"], delta=row["value"],
        delta_ci=(row["ci_low"], row["ci_high"]), harm=row["harm"], harm_ci=(row["harm_ci_low"], row["harm_ci_high"]),
        p_value=row["p_value"], test=row.get("test", ""), direction=row["better"], ideal=row.get("ideal"),
        p_holm=row.get("p_holm"), p_bh=row.get("p_bh"), margin=row.get("margin"), margin_rule=row.get("margin_rule"),
        verdict=row.get("verdict"))
