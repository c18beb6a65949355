"""Run outputs: machine-readable results (JSON/CSV), run comparison and the HTML report.

Public API::

    ResultsTable(run_dir)          .set_run_info(d) .add(row) .write(complete=False) .write_html()
    load_results(path) -> DataFrame          # results.json / results.csv / run folder
    compare_result_tables(previous, current) -> DataFrame  # joined on test_id: deltas, verdict changes
    write_html(rows, run_info, path)         # one self-contained HTML file
"""

from bias_core.reports.html import render_html, write_html
from bias_core.reports.table import (
    COLUMNS,
    COMPARE_COLUMNS,
    RESULTS_CSV,
    RESULTS_JSON,
    ResultsTable,
    atomic_write_text,
    compare_result_tables,
    load_results,
)

__all__ = [
    "COLUMNS",
    "COMPARE_COLUMNS",
    "RESULTS_CSV",
    "RESULTS_JSON",
    "ResultsTable",
    "atomic_write_text",
    "compare_result_tables",
    "load_results",
    "render_html",
    "write_html",
]
