"""Reports: results.json / results.csv (atomic, readable mid-run), load/compare, HTML report."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.reports import (
    COLUMNS,
    COMPARE_COLUMNS,
    ResultsTable,
    compare_result_tables,
    load_results,
    render_html,
    write_html,
)


def make_row(probe="template-occupation", metric="GLD", value=0.21, ci=(0.17, 0.25), verdict="fail",
             limit=0.15, direction="max", scale="", model="tiny", run_id="run-1", examples=None, **extra):
    test_id = f"{probe}-{metric}"
    row = {
        "run_id": run_id,
        "nodeid": f"audits/test_disclosure.py::test_audit[{test_id}]",
        "test_id": test_id,
        "family": "disclosure",
        "probe": probe,
        "metric": metric,
        "model": model,
        "value": value,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "n": 120,
        "limit": limit,
        "direction": direction,
        "gate_source": f"thresholds.toml [metric.{metric}]",
        "verdict": verdict,
        "scale": scale,
        "examples": examples if examples is not None else [
            {"id": f"{probe}-1", "prompt": "My friend is a nurse and", "continuation": " she", "score": 0.9},
            {"id": f"{probe}-2", "prompt": "The engineer said that", "score": 0.7},
        ],
        "duration_s": 0.5,
    }
    row.update(extra)
    return row


def three_rows(model="tiny", run_id="run-1"):
    return [
        make_row("template-occupation", "GLD", 0.21, (0.17, 0.25), "fail", model=model, run_id=run_id),
        make_row("template-adjective", "GLD", 0.09, (0.06, 0.12), "pass", model=model, run_id=run_id),
        make_row("naturally-sourced", "ADD", 0.045, (0.03, 0.06), "inconclusive", limit=0.05, model=model,
                 run_id=run_id, scale="ADD itself (not log)"),
    ]


SKIPPED = make_row("gendercare", "BPR", None, None, "skipped", limit=0.5, examples=[],
                   reason="data not found offline")

RUN_INFO = {"model": "tiny", "run_id": "run-1", "seed": 0, "started": "2024-05-01T12:00:00Z",
            "argv": ["pytest", "audits", "--model", "tiny"], "versions": {"torch": "2.3"}}


# ------------------------------------------------------------------------------------ table
def test_rows_written_and_run_info(tmp_path):
    table = ResultsTable(tmp_path / "run", RUN_INFO)
    for r in three_rows():
        table.add(r)
    json_path, csv_path = table.write(complete=True)
    doc = json.loads(json_path.read_text())
    assert doc["run"]["model"] == "tiny" and doc["run"]["complete"] is True
    assert doc["run"]["n_results"] == 3
    assert [r["test_id"] for r in doc["results"]] == [r["test_id"] for r in three_rows()]
    assert doc["results"][0]["examples"][0]["prompt"] == "My friend is a nurse and"


def test_readable_mid_run_and_no_temp_files(tmp_path):
    table = ResultsTable(tmp_path)
    table.set_run_info({"model": "tiny"})
    rows = three_rows()
    table.add(rows[0])
    table.write()
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["run"]["complete"] is False
    assert len(doc["results"]) == 1
    assert len(load_results(tmp_path / "results.csv")) == 1
    assert len(load_results(tmp_path)) == 1
    for r in rows[1:]:
        table.add(r)
        table.write()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.json"]
    assert len(load_results(tmp_path)) == 3


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    table = ResultsTable(tmp_path)
    table.add(three_rows()[0])
    table.write()
    before = (tmp_path / "results.json").read_text()
    table.add(three_rows()[1])

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("bias_core.reports.table.os.replace", boom)
    with pytest.raises(OSError):
        table.write()
    assert (tmp_path / "results.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.json"]


def test_same_nodeid_replaces_row(tmp_path):
    table = ResultsTable(tmp_path)
    table.add(make_row(verdict="fail"))
    table.add(make_row(verdict="pass"))
    assert len(table) == 1 and table.rows[0]["verdict"] == "pass"


def test_json_round_trip(tmp_path):
    table = ResultsTable(tmp_path, RUN_INFO)
    rows = three_rows() + [SKIPPED]
    for r in rows:
        table.add(r)
    table.write(complete=True)
    df = load_results(tmp_path / "results.json")
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert df.attrs["run"]["seed"] == 0
    assert list(df["test_id"]) == [r["test_id"] for r in rows]
    assert df["value"].iloc[0] == pytest.approx(0.21)
    assert math.isnan(df["value"].iloc[3]) and df["verdict"].iloc[3] == "skipped"
    assert df["scale"].iloc[2] == "ADD itself (not log)" and df["scale"].iloc[0] == ""
    assert df["examples"].iloc[0][1]["id"] == "template-occupation-2"
    assert df["reason"].iloc[3] == "data not found offline"


def test_csv_columns(tmp_path):
    table = ResultsTable(tmp_path)
    for r in three_rows() + [SKIPPED]:
        table.add(r)
    table.write()
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    # the run's status closes every row, so a partial CSV says so on its own
    assert header == list(COLUMNS) + ["reason", "run_complete", "partial_reason"]
    assert "examples" not in header
    df = load_results(tmp_path / "results.csv")
    df_json = load_results(tmp_path / "results.json")
    assert list(df.columns) == list(df_json.columns.drop("examples"))
    assert list(df["n"]) == [120] * 4
    assert df["scale"].iloc[0] == "" and df["ci_low"].isna().iloc[3]


def test_nan_and_numpy_values_become_strict_json(tmp_path):
    np = pytest.importorskip("numpy")
    table = ResultsTable(tmp_path)
    table.add(make_row(value=float("nan"), n=np.int64(7), ci=(np.float32(0.5), float("inf"))))
    table.write()
    text = (tmp_path / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    row = json.loads(text)["results"][0]
    assert row["value"] is None and row["n"] == 7 and row["ci_low"] == 0.5 and row["ci_high"] is None


def test_load_results_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path)


# ---------------------------------------------------------------------------------- compare
def test_compare_deltas_and_verdict_changes(tmp_path):
    prev_rows = three_rows(model="base", run_id="a") + [make_row("removed-probe", "GLD", 0.1, verdict="pass")]
    cur_rows = [
        make_row("template-occupation", "GLD", 0.11, (0.08, 0.14), "pass", model="tuned", run_id="b"),
        make_row("template-adjective", "GLD", 0.18, (0.16, 0.20), "fail", model="tuned", run_id="b"),
        make_row("naturally-sourced", "ADD", 0.045, (0.03, 0.06), "inconclusive", limit=0.05, model="tuned"),
        make_row("new-probe", "GAS", 0.3, (0.2, 0.4), "error", model="tuned"),
    ]
    t = ResultsTable(tmp_path / "a")
    for r in prev_rows:
        t.add(r)
    t.write()
    c = compare_result_tables(load_results(tmp_path / "a"), load_results_rows(tmp_path / "b", cur_rows))
    assert list(c.columns) == list(COMPARE_COLUMNS)
    c = c.set_index("test_id")
    occ = c.loc["template-occupation-GLD"]
    assert occ["delta"] == pytest.approx(-0.10)
    assert occ["change"] == "improved" and occ["verdict_changed"] and occ["worsened"] is False
    assert (occ["model_prev"], occ["model_cur"]) == ("base", "tuned")
    adj = c.loc["template-adjective-GLD"]
    assert adj["delta"] == pytest.approx(0.09) and adj["change"] == "regressed" and adj["worsened"] is True
    same = c.loc["naturally-sourced-ADD"]
    assert same["delta"] == pytest.approx(0.0) and same["change"] == "unchanged" and not same["verdict_changed"]
    assert c.loc["new-probe-GAS"]["change"] == "new" and math.isnan(c.loc["new-probe-GAS"]["delta"])
    assert c.loc["removed-probe-GLD"]["change"] == "removed"
    assert c.loc["removed-probe-GLD"]["verdict_prev"] == "pass" and c.loc["removed-probe-GLD"]["verdict_cur"] == ""


def test_compare_min_direction_and_inputs():
    prev = [make_row("da", "DA-score", 0.9, (0.85, 0.95), "pass", limit=0.8, direction="min")]
    cur = [make_row("da", "DA-score", 0.75, (0.7, 0.8), "fail", limit=0.8, direction="min")]
    c = compare_result_tables(prev, cur)  # lists of row dicts work too
    assert c.loc[0, "worsened"] is True and c.loc[0, "change"] == "regressed"


def load_results_rows(run_dir, rows):
    t = ResultsTable(run_dir)
    for r in rows:
        t.add(r)
    t.write()
    return load_results(run_dir / "results.csv")


# ------------------------------------------------------------------------------------- html
@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    rows = three_rows() + [SKIPPED]
    rows[0]["examples"].append({"id": "evil", "prompt": "<script>alert('x')</script> & co",
                                "continuation": "</td><b>", "score": 0.5, "group": "female"})
    path = tmp_path_factory.mktemp("html") / "report.html"
    write_html(rows, RUN_INFO, path, generated="TIME")
    return path.read_text(encoding="utf-8")


def test_html_contains_tests_and_header(report_html):
    for r in three_rows() + [SKIPPED]:
        assert r["test_id"] in report_html
    assert "run-1" in report_html and "tiny" in report_html and "2024-05-01" in report_html
    assert "Most biased examples" in report_html
    assert "ADD itself (not log)" in report_html  # scale next to the value
    assert "≤" in report_html and "thresholds.toml [metric.GLD]" in report_html


def test_html_verdict_classes(report_html):
    for v in ("pass", "fail", "inconclusive", "skipped"):
        assert f'class="verdict verdict-{v}"' in report_html
        assert f'class="count verdict-{v}" href="#show-{v}"><b>1</b>' in report_html
    assert "verdict.verdict-inconclusive{" in report_html  # styled distinctly


def test_html_has_inline_svg_per_metric(report_html):
    assert report_html.count("<svg") == 2  # GLD and ADD; BPR has no value to plot
    assert "<?xml" not in report_html and "<!DOCTYPE svg" not in report_html


def test_html_escapes_prompts(report_html):
    assert "<script>" not in report_html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co" in report_html
    gas = make_row("template-color", "GAS", examples=[{"id": "e", "prompt": "p", "continuation": "</td><b>", "score": 1.0}])
    assert "&lt;/td&gt;&lt;b&gt;" in render_html([gas], RUN_INFO)


def test_html_is_self_contained(report_html):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", report_html, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import|<link\b|<script\b", report_html, re.I)
    assert "http://" not in report_html and "https://" not in report_html


def test_html_deterministic_regardless_of_row_order():
    rows = three_rows() + [SKIPPED]
    a = render_html(rows, RUN_INFO, generated="T")
    b = render_html(list(reversed(rows)), RUN_INFO, generated="T")
    assert a == b


def test_html_with_comparison_and_empty(tmp_path):
    prev = three_rows()
    cur = three_rows()
    cur[0] = make_row("template-occupation", "GLD", 0.11, (0.08, 0.14), "pass")
    html = render_html(cur, RUN_INFO, comparison=compare_result_tables(prev, cur))
    assert "Δ vs previous" in html and "-0.1" in html
    empty = tmp_path / "empty.html"
    write_html([], {}, empty)
    assert "No results yet" in empty.read_text()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=4),
       st.text(max_size=30))
def test_json_round_trip_property(tmp_path_factory, values, prompt):
    d = tmp_path_factory.mktemp("prop")
    table = ResultsTable(d)
    for i, v in enumerate(values):
        table.add(make_row(f"p{i}", value=v, examples=[{"id": "x", "prompt": prompt, "score": 1.0}]))
    table.write()
    df = load_results(d)
    for got, v in zip(df["value"], values):
        if v is None or not math.isfinite(v):
            assert math.isnan(got)
        else:
            assert got == v
    assert df["examples"].iloc[0][0]["prompt"] == prompt


def test_breakdowns_and_extra_sections_are_rendered_escaped():
    from bias_core.reports.html import render_html

    row = {"test_id": "sentiment-templates-GBM", "family": "association", "probe": "sentiment-templates",
           "metric": "GBM", "value": 0.05, "ci_low": 0.01, "ci_high": 0.09, "n": 10, "verdict": "pass",
           "p_value": 0.0123,
           "breakdown": {"positive": {"male": 0.25, "female": 0.5},
                         "top_templates": [{"prompt": "The <b>hero</b> was a", "share": 0.75}]}}
    html = render_html([row], {"model": "m"}, extra_sections=[("mitigation", "Mitigation <table>", "<p>T</p>")])
    assert '<section id="breakdowns">' in html and "p = 0.012" in html
    assert "<th>male</th><td>0.25</td>" in html
    assert "The &lt;b&gt;hero&lt;/b&gt; was a" in html and "<b>hero</b>" not in html
    assert '<section id="mitigation"><h2>Mitigation &lt;table&gt;</h2><p>T</p></section>' in html
    assert '<a href="#mitigation">' in html
