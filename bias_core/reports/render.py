"""Rebuild a run folder's report.html from its results.json, without re-running anything.

    python -m bias_core.reports.render RUN_DIR [--out PATH] [--compare PREVIOUS_RUN]

Useful after upgrading bias_core (a newer report layout for an old run), for a run that was
interrupted before its report was written, and to compare two runs ("Δ vs previous" columns).
The report is the one the plugin writes at session end, mitigation table and paper tables
included; without --out, the run folder's paper_tables.md is rebuilt too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bias_core.reports.html import write_html
from bias_core.reports.table import RESULTS_JSON, compare_result_tables


def mitigation_sections(rows: list[dict], csv_path: str | Path | None = None) -> list[tuple[str, str, str]]:
    """Dong et al.'s Tables 1-3 and 9 as an extra report section, one column block per dataset
    and the template topics' own columns (none without mitigation rows); also written to
    ``csv_path`` when given."""
    from bias_core.mitigation.evaluation.results_table import mitigation_cells, mitigation_table, table_html, write_table_csv

    cells = mitigation_cells(rows)
    if not cells:
        return []

    frame = mitigation_table(cells, per_probe=True)
    if csv_path is not None:
        write_table_csv(frame, Path(csv_path))
    note = ('<p class="note">GAS, GLD and ADD per dataset as Dong et al.\'s Tables 1, 2 and 9 print them '
            "(Template, STS-B, SNLI, LLM (1), LLM (2); the offline natural stand-in in a column of its own), for "
            "the original model and each mitigation, on the same items. Template is the mean of its topics, "
            "whose own columns follow; also in <code>mitigation_table.csv</code>. Significance of each change: "
            "the mitigation rows above.</p>")
    return [("mitigation", "Mitigation results", note + _corpus_note(rows) + table_html(frame))]


def _corpus_note(rows: list[dict]) -> str:
    """Which text corpus CDS / ER / SentenceDebias used, visibly when it is the GAP stand-in."""
    from html import escape

    used = {}
    for r in rows:
        info = (r.get("breakdown") or {}).get("variant") or {}
        if isinstance(info, dict) and "stand_in" in info and info.get("training_data"):
            used.setdefault(str(info["training_data"]), bool(info["stand_in"]))
    return "".join(f'<p class="note"><strong>{"Stand-in corpus" if stand_in else "Corpus"}</strong>: '
                   f"{escape(label)}</p>" for label, stand_in in used.items())


def run_sections(rows: list[dict], run_dir: Path, write_csv: bool = False, run_info: dict | None = None,
                 write_markdown: bool | None = None) -> list[tuple[str, str, str]]:
    """The report's sections beyond the results table: the mitigation table (written to
    ``mitigation_table.csv`` too with ``write_csv``), the trade-off figures of a sweep and the
    run in the papers' layouts (written to ``paper_tables.md`` too with ``write_markdown``,
    which defaults to ``write_csv``)."""
    from bias_core.reports.html import is_log_run
    from bias_core.reports.paper_tables_render import paper_tables_sections

    if is_log_run(run_info or {}):
        return []  # two logs compared: no audit of a model to lay out in the papers' tables
    csv_path = Path(run_dir) / "mitigation_table.csv" if write_csv else None
    markdown = write_csv if write_markdown is None else write_markdown
    return (mitigation_sections(rows, csv_path) + tradeoff_sections(run_dir)
            + paper_tables_sections(rows, run_info, run_dir, write_markdown=markdown))


def tradeoff_sections(run_dir: str | Path) -> list[tuple[str, str, str]]:
    """The trade-off figures a --mitigation-sweep run left in ``run_dir``, inline (the report
    stays one self-contained file), with the corpus and the point to take per bias metric."""
    import csv
    import re
    from html import escape

    from bias_core.mitigation.evaluation.tradeoff_curves import BIAS_METRICS
    from bias_core.suites.tradeoff import INFO_FILE

    run_dir = Path(run_dir)
    figures = [(m, run_dir / f"tradeoff_{m}.svg") for m in BIAS_METRICS if (run_dir / f"tradeoff_{m}.svg").is_file()]
    if not figures:
        return []
    parts = ['<p class="note">Each method over its strength grid: the bias left (distance of the metric from its '
             "ideal) against 1 − DA_score (genuine gender knowledge lost); nearer the origin is better. The ringed "
             "point is the one to take: nearest the origin, on axes scaled by the model before debiasing, among the "
             "points whose guards (DA_score_drop, perplexity_rise, lm_score_drop) are within their thresholds and that "
             "improve on the model before debiasing (less bias, nearer the origin). "
             "Numbers: <code>tradeoff.csv</code>; how each point was made: <code>tradeoff_info.json</code>.</p>"]
    try:
        info = json.loads((run_dir / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    corpus = (info.get("corpus") or {})
    if corpus.get("label"):
        kind = "Stand-in corpus" if corpus.get("stand_in") else "Corpus"
        parts.append(f'<p class="note"><strong>{kind}</strong>: {escape(str(corpus["label"]))}</p>')
    if info.get("schedule"):
        seeds = info.get("seeds") or []
        spread = "; a point is the mean over its seeds, the broad pale bars their range" if len(seeds) > 1 else ""
        parts.append(f'<p class="note"><strong>Schedule</strong>: {escape(str(info["schedule"]))}{spread}</p>')
    for metric, reason in (info.get("missing") or {}).items():
        parts.append(f'<p class="note">{escape(metric)} not measured: {escape(str(reason))}</p>')
    try:
        with (run_dir / "tradeoff.csv").open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        rows = []
    for metric, path in figures:
        take = next((r["variant"] for r in rows if metric in (r.get("take_for") or "").split(";")), None)
        svg = path.read_text(encoding="utf-8")
        svg = svg[svg.find("<svg"):]  # drop the XML declaration and DOCTYPE: not allowed inside HTML
        svg = re.sub(r"<svg ", '<svg role="img" ', svg, count=1)
        caption = (f"{metric}: take {take}" if take else
                   f"{metric}: take none (no point within the guards improves on the model before debiasing)")
        parts.append(f'<figure class="tradeoff">{svg}<figcaption>{escape(caption)}</figcaption></figure>')
    return [("tradeoff", "Debiasing / over-debiasing trade-off", "".join(parts))]


def render_run(run_dir: str | Path, out: str | Path | None = None, previous: str | Path | None = None,
               generated: str | None = None) -> Path:
    """Write ``report.html`` (or ``out``) for the run folder ``run_dir`` from its results.json;
    without ``out``, also the folder's ``paper_tables.md``."""
    run_dir = Path(run_dir)
    src = run_dir / RESULTS_JSON if run_dir.is_dir() else run_dir
    if not src.is_file():
        raise FileNotFoundError(f"no {RESULTS_JSON} at {src}: give a run folder written by a bias_core audit")
    doc = json.loads(src.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError(f"{src} is not a results file (expected {{'run': ..., 'results': [...]}})")
    rows = doc["results"]
    comparison = compare_result_tables(previous, src) if previous is not None else None
    target = Path(out) if out is not None else src.parent / "report.html"
    # paper_tables.md is rebuilt beside the report only when the report goes to the run folder
    sections = run_sections(rows, src.parent, run_info=doc.get("run") or {}, write_markdown=out is None)
    return write_html(rows, doc.get("run") or {}, target, comparison=comparison, generated=generated,
                      extra_sections=sections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bias_core.reports.render", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run folder (or its results.json)")
    parser.add_argument("--out", help="where to write the HTML (default: RUN_DIR/report.html)")
    parser.add_argument("--compare", metavar="PREVIOUS_RUN", help="a previous run folder: adds 'Δ vs previous' columns")
    args = parser.parse_args(argv)
    try:
        path = render_run(args.run_dir, args.out, args.compare)
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
