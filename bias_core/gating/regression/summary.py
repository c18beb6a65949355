"""A short Markdown summary of a run for CI pages (``--summary-md FILE``, ``$GITHUB_STEP_SUMMARY``).

``render_summary`` is pure: regression comparisons and absolute result rows in, Markdown out.
The verdict banner is the caller's (``bias_core.reports.banner``); it is placed on top as given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bias_core.gating.thresholds import FAIL, INCONCLUSIVE, PASS
from bias_core.stats.paired import PairedComparison
from bias_core.storage.files import append_whole, atomic_write_text
from bias_core.storage.redaction import redact

_MARK = {PASS: "pass", FAIL: "**FAIL**", INCONCLUSIVE: "inconclusive"}
_ORDER = {FAIL: 0, INCONCLUSIVE: 1, PASS: 2}


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return "0" if x == 0 else f"{x:.4g}"


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _direction(c: PairedComparison) -> str:
    if c.direction == "ideal":
        return f"closer to {_num(c.ideal)}"
    return f"{c.direction} is better"


def render_summary(regression: Sequence[PairedComparison], absolute: Sequence[Mapping[str, Any]] = (),
                   banner: str = "", baseline: str = "", config_note: str = "", title: str = "Bias audit",
                   worse: Mapping[str, str] | None = None) -> str:
    """Markdown: banner, then the regression table (failures first), then the absolute gates'
    counts and their failing or inconclusive rows. ``absolute`` rows are results.json rows
    (``test_id``, ``value``, ``ci_low``, ``ci_high``, ``verdict``). ``worse``: comparison test_id ->
    its "within margin, but worse" note (``bias_core.reports.fmt.worse_note``), listed above the
    table and marked in it."""
    worse = worse or {}
    out = [f"## {title}", ""]
    if banner:
        out += [banner.strip(), ""]
    if regression:
        beyond = sum(c.verdict == FAIL for c in regression)
        out += [f"### Candidate vs baseline{f' ({_cell(baseline)})' if baseline else ''}", ""]
        if config_note:
            out += [f"_{_cell(config_note)}_", ""]
        out += [f"{len(regression)} paired comparisons, {beyond} beyond their margin. "
                "Delta = candidate − baseline; harm = how much worse the candidate is (metric's direction); "
                "p one-sided (harm > 0), adjusted across the run by Holm and Benjamini–Hochberg.", "",
                *([f"**Within margin, but significantly worse ({len(worse)}):**", "",
                   *(f"- `{_cell(t)}`: {_cell(n)}" for t, n in sorted(worse.items())), ""] if worse else []),
                "| test | better | baseline | candidate | delta | harm [95% CI] | margin | p | p Holm | p BH | verdict |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in sorted(regression, key=lambda c: (_ORDER.get(c.verdict or "", 3), c.test_id)):
            out.append("| " + " | ".join([
                _cell(c.test_id), _direction(c), _num(c.baseline_value), _num(c.candidate_value), _num(c.delta),
                f"{_num(c.harm)} [{_num(c.harm_ci[0])}, {_num(c.harm_ci[1])}]",
                _num(c.margin) + (f" ({_cell(c.margin_rule)})" if c.margin_rule and "%" in c.margin_rule else ""),
                _p(c.p_value), _p(c.p_holm), _p(c.p_bh),
                _MARK.get(c.verdict or "", _cell(c.verdict or "–")) + (" (worse)" if c.test_id in worse else ""),
            ]) + " |")
        out.append("")
    if absolute:
        counts: dict[str, int] = {}
        for r in absolute:
            counts[str(r.get("verdict"))] = counts.get(str(r.get("verdict")), 0) + 1
        shown = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: (_ORDER.get(kv[0], 3), kv[0])))
        out += ["### Absolute gates", "", f"{len(absolute)} audits: {shown}.", ""]
        flagged = [r for r in absolute if r.get("verdict") in (FAIL, INCONCLUSIVE)]
        if flagged:
            out += ["| test | value [95% CI] | verdict |", "|---|---|---|"]
            for r in sorted(flagged, key=lambda r: (_ORDER.get(r["verdict"], 3), str(r.get("test_id")))):
                out.append(f"| {_cell(r.get('test_id'))} | {_num(r.get('value'))} [{_num(r.get('ci_low'))}, "
                           f"{_num(r.get('ci_high'))}] | {_MARK[r['verdict']]} |")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def write_summary(markdown: str, path: str | os.PathLike[str] | None = None,
                  environ: Mapping[str, str] | None = None) -> list[Path]:
    """Write the summary to ``path`` (replaced) and append it to ``$GITHUB_STEP_SUMMARY`` when
    that is set (GitHub collects each step's appended Markdown). Returns the files written."""
    env = os.environ if environ is None else environ
    written = []
    if path is not None:
        written.append(atomic_write_text(path, markdown))  # never half a file on a full disk
    step = env.get("GITHUB_STEP_SUMMARY")
    if step:
        append_whole(step, redact(markdown).encode("utf-8"))  # earlier steps' text stays whole
        written.append(Path(step))
    return written

