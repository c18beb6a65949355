"""Text from outside the run (a generation, a data file, a downloaded baseline) in the
human-readable outputs: every control character, bidi override and lone surrogate shows as its
escape in report.html, results.csv, the Markdown summary and the terminal's banner; results.json
keeps the exact text."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from bias_core.gating.regression.summary import write_summary
from bias_core.reports import ResultsTable
from bias_core.reports.banner import verdict_banner
from bias_core.reports.render import render_run
from bias_core.storage.visible import visible

# Every character the outputs must not carry raw: C0 but tab and newline, DEL, C1, the bidi
# embeddings/overrides/isolates and the surrogates (listed by hand, not from the module's pattern).
C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
C1 = [chr(c) for c in range(0x7f, 0xa0)]
BIDI = [chr(c) for c in (0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069)]
HIDDEN = C0 + C1 + BIDI + ["\ud800", "\udfff"]
RAW = re.compile("[" + "".join(re.escape(c) for c in HIDDEN) + "]")
# A generation as a hostile server might send it: clears the screen, rings, hides text, reverses.
EVIL = "she\x00 rang\x07 \x1b[2J\x1b[31mRED\x9b1m\u202eesrever\r over"
SHOWN = "she\\x00 rang\\x07 \\x1b[2J\\x1b[31mRED\\x9b1m\\u202eesrever\\x0d over"


def test_each_hidden_character_is_written_as_its_python_escape():
    assert visible("\x00\x07\x1b\x7f\x85\x9b") == "\\x00\\x07\\x1b\\x7f\\x85\\x9b"
    assert visible("a\u202eb\u2066c\ud800") == "a\\u202eb\\u2066c\\ud800"
    assert visible(EVIL) == SHOWN
    assert visible("tab\tnew\nline, café, 日本, emoji 😀") == "tab\tnew\nline, café, 日本, emoji 😀"
    for c in HIDDEN:
        assert not RAW.search(visible(f"x{c}y")), repr(c)


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_shown_text_holds_no_hidden_character_and_showing_twice_changes_nothing(text):
    shown = visible(text)
    assert not RAW.search(shown)
    assert visible(shown) == shown
    if not RAW.search(text):
        assert shown == text


def _run_folder(tmp_path):
    """A run folder whose every text field a model or a file fills carries EVIL."""
    gld = {"run_id": "r1", "test_id": "template-color-GLD", "nodeid": "audits/test_disclosure.py::test[GLD]",
           "family": "disclosure", "probe": "template-color", "metric": "GLD", "model": "m", "value": 0.4,
           "ci_low": 0.3, "ci_high": 0.5, "n": 2, "limit": 0.1, "direction": "max", "verdict": "fail",
           "examples": [{"id": "i1", "prompt": f"prompt {EVIL}", "sum_female": 0.2, "sum_male": 0.1,
                         "top_words": [[f"w{EVIL}", 0.1]], "score": 0.1}],
           "breakdown": {"per_template": {f"tpl {EVIL}": {"GLD": 0.4}, "other": {"GLD": 0.1}}, "note": f"n {EVIL}"}}
    gas = dict(gld, test_id="template-color-GAS", nodeid="audits/test_disclosure.py::test[GAS]", metric="GAS",
               examples=[{"id": "i2", "prompt": "The nurse", "continuation": f" {EVIL}", "matched": ["she"], "score": 1}],
               breakdown={})
    err = dict(gld, test_id="template-color-ADD", nodeid="audits/test_disclosure.py::test[ADD]", metric="ADD",
               verdict="error", value=None, reason=f"engine answered {EVIL}", examples=[], breakdown={})
    reg = {"kind": "regression", "run_id": "r1", "test_id": "regression-template-color-GLD", "family": "disclosure",
           "probe": "template-color", "metric": "GLD", "verdict": "pass", "baseline": f"run {EVIL}",
           "config": f"same model; card {EVIL}", "harm": 0.0, "harm_ci_low": -0.1, "harm_ci_high": 0.1, "margin": 0.2,
           "moved": {"up": [{"prompt": "p", "baseline_output": f"base {EVIL}", "candidate_output": f"cand {EVIL}",
                             "baseline": 0.1, "candidate": 0.2}]}}
    table = ResultsTable(tmp_path / "run", {"model": f"m {EVIL}", "model_card": [f"card {EVIL}"], "strict": False})
    for row in (gld, gas, err, reg):
        table.add(row)
    table.write(complete=True)
    return tmp_path / "run"


def test_report_html_shows_every_control_of_a_generation_escaped_in_every_section(tmp_path):
    run = _run_folder(tmp_path)
    page = render_run(run, generated="T").read_text(encoding="utf-8")
    assert not RAW.search(page)
    # the escapes are where the text was, not dropped: html.escape leaves backslashes alone
    sections = {name: page[page.index(start):page.index(end)] for name, start, end in (
        ("details", '<header class="card">', "</header>"),
        ("results", '<section id="results">', '<section id="how">'),
        ("examples", '<section id="examples">', '<section id="regression">'),
        ("regression", '<section id="regression">', '<section id="breakdowns">'),
        ("breakdowns", '<section id="breakdowns">', "<footer>"))}
    for name, html in sections.items():
        assert "\\x1b[2J\\x1b[31mRED\\x9b1m\\u202eesrever\\x0d over" in html, name
    assert f" {SHOWN}" in sections["examples"] and f"engine answered {SHOWN}" in sections["results"]
    assert f"cand {SHOWN}" in sections["regression"] and f"card {SHOWN}" in sections["regression"]


def test_results_json_keeps_the_exact_text_and_results_csv_shows_it_escaped(tmp_path):
    run = _run_folder(tmp_path)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    by_id = {r["test_id"]: r for r in doc["results"]}
    assert by_id["template-color-GAS"]["examples"][0]["continuation"] == f" {EVIL}"
    assert by_id["template-color-ADD"]["reason"] == f"engine answered {EVIL}"
    assert doc["run"]["model"] == f"m {EVIL}"
    csv = (run / "results.csv").read_text(encoding="utf-8")
    assert not RAW.search(csv)
    assert f"engine answered {SHOWN}" in csv


def test_terminal_banner_lines_show_an_error_quoting_a_generation_escaped():
    row = {"test_id": "template-color-ADD", "verdict": "error", "reason": f"engine answered {EVIL}"}
    lines = verdict_banner([row], partial_reason=f"killed {EVIL}", complete=False).lines
    assert not any(RAW.search(line) for line in lines)
    assert f"  ERROR template-color-ADD: engine answered {SHOWN}" in lines
    assert any(f"killed {SHOWN}" in line for line in lines)


def test_markdown_summary_and_step_summary_show_controls_escaped(tmp_path):
    step = tmp_path / "step.md"
    written = write_summary(f"## Bias audit\n\n| `x` | {EVIL} |\n", tmp_path / "summary.md", {"GITHUB_STEP_SUMMARY": str(step)})
    assert written == [tmp_path / "summary.md", step]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert not RAW.search(text) and f"| `x` | {SHOWN} |" in text
