"""A short Markdown summary of a run for CI pages (``--summary-md FILE``, ``$GITHUB_STEP_SUMMARY``).

``render_summary`` is pure: regression comparisons and absolute result rows in, Markdown out.
The verdict banner is the caller's (``bias_core.reports.banner``); it is placed on top as given.
``write_summary`` writes it; a run marks its file when it starts (``mark_file``), so a summary
another run wrote meanwhile is kept and the overlap said, not silently replaced.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bias_core.gating.regression.pairing import pairs_text
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE, PASS
from bias_core.stats.paired import PairedComparison
from bias_core.storage.files import append_whole, atomic_write_text
from bias_core.storage.redaction import redact
from bias_core.storage.visible import visible

#: Above a summary appended to a file another run wrote during this one.
SHARED_NOTE = ("_Another run wrote this file while the run below ran; its summary is above. Give each job its "
               "own --summary-md file._")

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


def _pairs(c: PairedComparison, pairs: Mapping[str, str]) -> str:
    return _cell(pairs.get(c.test_id) or pairs_text(c.n, c.n + c.n_dropped))


def render_summary(regression: Sequence[PairedComparison], absolute: Sequence[Mapping[str, Any]] = (),
                   banner: str = "", baseline: str = "", config_note: str = "", title: str = "Bias audit",
                   worse: Mapping[str, str] | None = None, pairs: Mapping[str, str] | None = None,
                   errored: Mapping[str, str] | None = None, weak: Mapping[str, str] | None = None) -> str:
    """Markdown: banner, then the regression table (failures first) with each comparison's n of
    pairs, then the absolute gates' counts and their failing or inconclusive rows. ``absolute``
    rows are results.json rows (``test_id``, ``value``, ``ci_low``, ``ci_high``, ``verdict``).
    ``worse``: comparison test_id -> its "within margin, but worse" note
    (``bias_core.reports.fmt.worse_note``), listed above the table and marked in it. ``pairs``:
    test_id -> its n of pairs as the reports say it (default: from the comparison's n and
    n_dropped). ``errored``: test_id -> why a comparison gave no verdict (too many items left
    out), listed first in the table."""
    worse, pairs, errored = worse or {}, pairs or {}, errored or {}
    out = [f"## {title}", ""]
    if banner:
        out += [banner.strip(), ""]
    if regression or errored:
        beyond = sum(c.verdict == FAIL for c in regression)
        out += [f"### Candidate vs baseline{f' ({_cell(baseline)})' if baseline else ''}", ""]
        if config_note:
            out += [f"_{_cell(config_note)}_", ""]
        out += [f"{len(regression) + len(errored)} paired comparisons, {beyond} beyond their margin"
                + (f", {len(errored)} without a verdict (too many items left out)" if errored else "") + ". "
                "Delta = candidate − baseline; harm = how much worse the candidate is (metric's direction); "
                "p one-sided (harm > 0), adjusted across the run by Holm and Benjamini–Hochberg; "
                "n = the items paired (with a value in both runs).", "",
                *([f"**Within margin, but significantly worse ({len(worse)}):**", "",
                   *(f"- `{_cell(t)}`: {_cell(n)}" for t, n in sorted(worse.items())), ""] if worse else []),
                "| test | better | n | baseline | candidate | delta | harm [95% CI] | margin | p | p Holm | p BH | verdict |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for test_id, why in sorted(errored.items()):
            out.append(f"| {_cell(test_id)} | – | {_cell(pairs.get(test_id, '–'))} | – | – | – | – | – | – | – | – | "
                       f"**ERROR**: {_cell(why[:300])} |")
        for c in sorted(regression, key=lambda c: (_ORDER.get(c.verdict or "", 3), c.test_id)):
            out.append("| " + " | ".join([
                _cell(c.test_id), _direction(c), _pairs(c, pairs), _num(c.baseline_value), _num(c.candidate_value),
                _num(c.delta), f"{_num(c.harm)} [{_num(c.harm_ci[0])}, {_num(c.harm_ci[1])}]",
                _num(c.margin) + (f" ({_cell(c.margin_rule)})" if c.margin_rule and "%" in c.margin_rule else ""),
                _p(c.p_value), _p(c.p_holm), _p(c.p_bh),
                _MARK.get(c.verdict or "", _cell(c.verdict or "–")) + (" (worse)" if c.test_id in worse else ""),
            ]) + " |")
        out.append("")
        if weak:
            out += [f"**Margins below what the row detects ({len(weak)}):** a regression of twice the margin passes "
                    "unnoticed more than 1 time in 5 on these items.", "",
                    *(f"- `{_cell(t)}`: {_cell(n)}" for t, n in sorted(weak.items())), ""]
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


@dataclass(frozen=True)
class FileMark:
    """What a file was when a run started: (device, inode, size, mtime in ns), or None when there
    was none. Every write replaces the file (a new inode), so another run's write changes it."""

    stat: tuple[int, int, int, int] | None


def mark_file(path: str | os.PathLike[str]) -> FileMark:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return FileMark(None)
    return FileMark((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


class SharedSummaryWarning(UserWarning):
    """Another run wrote the same --summary-md file while this one ran; both summaries were kept."""


@contextlib.contextmanager
def _folder_locked(folder: Path):
    """An exclusive flock on ``folder`` while the summary is checked and written, so two runs
    finishing at once cannot both find the file unchanged and replace each other's. Where the
    folder cannot be locked (no flock, a file system without locks) the check still runs."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_summary(markdown: str, path: str | os.PathLike[str] | None = None,
                  environ: Mapping[str, str] | None = None, since: FileMark | None = None) -> list[Path]:
    """Write the summary to ``path`` (replaced) and append it to ``$GITHUB_STEP_SUMMARY`` when
    that is set (GitHub collects each step's appended Markdown). Returns the files written.

    Controls in the text (a model's or a baseline's) are written as escapes (storage.visible).
    ``since``: the file as this run found it when it started (``mark_file``). If it has changed
    since (another run wrote it), this run's summary is appended below the other's, with a line
    saying so, and a ``SharedSummaryWarning`` names the file and the fix: neither is lost."""
    markdown = visible(markdown)
    env = os.environ if environ is None else environ
    written = []
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _folder_locked(path.parent):
            now = mark_file(path)
            if since is None or now.stat is None or now == since:
                atomic_write_text(path, markdown)  # never half a file on a full disk
            else:
                other = visible(path.read_text(encoding="utf-8", errors="replace")).rstrip("\n")
                atomic_write_text(path, f"{other}\n\n---\n\n{SHARED_NOTE}\n\n{markdown}")
                warnings.warn(SharedSummaryWarning(
                    f"--summary-md {path}: another run wrote this file while this run ran; this run's summary "
                    "was appended below it, so both are kept. Fix: give each job its own summary file "
                    "(e.g. --summary-md summary-$JOB.md)."), stacklevel=2)
        written.append(path)
    step = env.get("GITHUB_STEP_SUMMARY")
    if step:
        append_whole(step, redact(markdown).encode("utf-8"))  # earlier steps' text stays whole
        written.append(Path(step))
    return written
