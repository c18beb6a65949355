"""One self-contained HTML report per run: inline CSS, inline SVG charts, no JS, no links out.

Sections: header (model, run id, date, verdict counts, run details), results table, one chart
per metric, "Most biased prompts" per test. All text from rows is HTML-escaped. Output is
deterministic for the same rows and run info except the "generated at" timestamp: rows are
sorted (family, test id, model, node id) whatever order xdist delivered them in.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# charts (matplotlib) are imported lazily in _charts: importing the plugin stays cheap.
from bias_core.cache import atomic_write_text
from bias_core.reports.table import jsonable

#: Verdicts in the order the header counts them (others are counted after these).
VERDICTS = ("pass", "fail", "inconclusive", "skipped", "error")

_CORE_EXAMPLE_KEYS = ("id", "prompt", "continuation", "score")


def esc(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if not math.isnan(f) else None


def fmt_num(v: Any, digits: int = 4) -> str:
    f = _num(v)
    if f is None:
        return "—"
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    if f == int(f) and abs(f) < 1e6:
        return str(int(f))
    return f"{f:.{digits}g}"


def fmt_signed(v: Any) -> str:
    f = _num(v)
    if f is None:
        return "—"
    if f == 0:
        return "0"
    s = fmt_num(f)
    return s if s.startswith("-") else f"+{s}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def _verdict(row: Mapping[str, Any]) -> str:
    return str(row.get("verdict") or "").strip().lower()


def _verdict_class(verdict: str) -> str:
    return f"verdict-{verdict}" if verdict in VERDICTS else "verdict-other"


def _badge(verdict: str) -> str:
    return f'<span class="verdict {_verdict_class(verdict)}">{esc(verdict or "?")}</span>'


def _sort_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k) or "") for k in ("family", "test_id", "model", "nodeid"))


def _fmt_time(v: Any) -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, (int, float)):
        return _dt.datetime.fromtimestamp(float(v), tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(v)


def _threshold(row: Mapping[str, Any]) -> str:
    limit = row.get("limit")
    if _num(limit) is None:
        return "—"
    op = {"max": "≤", "min": "≥"}.get(str(row.get("direction") or ""), "")
    title = {"max": "passes when the whole CI is at or below", "min": "passes when the whole CI is at or above"}.get(
        str(row.get("direction") or ""), "threshold")
    if _num(row.get("ideal")) is not None:
        ideal = fmt_num(row["ideal"])
        title = f"passes when the whole CI lies within {ideal} ± {fmt_num(limit)}"
        out = f'<span title="{esc(title)}">{esc(ideal)}&nbsp;±&nbsp;{esc(fmt_num(limit))}</span>'
    else:
        out = f'<span title="{esc(title)}">{esc(op)}&nbsp;{esc(fmt_num(limit))}</span>'
    if row.get("gate_source"):
        out += f'<div class="src">{esc(row["gate_source"])}</div>'
    return out


def _value(row: Mapping[str, Any], inline: bool = False) -> str:
    out = esc(fmt_num(row.get("value")))
    if row.get("scale"):
        cls = "scale-inline" if inline else "scale"
        out += f' <span class="{cls}">({esc(row["scale"])})</span>' if inline else \
            f' <span class="{cls}">{esc(row["scale"])}</span>'
    return out


def _ci(row: Mapping[str, Any]) -> str:
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if _num(lo) is None and _num(hi) is None:
        return "—"
    return f"[{esc(fmt_num(lo))}, {esc(fmt_num(hi))}]"


def _counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        v = _verdict(r) or "?"
        counts[v] = counts.get(v, 0) + 1
    return counts


def _meta_rows(run_info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    models = sorted({str(r.get("model")) for r in rows if r.get("model")})
    model = run_info.get("model") or ", ".join(models) or "—"
    run_ids = sorted({str(r.get("run_id")) for r in rows if r.get("run_id")})
    run_id = run_info.get("run_id") or ", ".join(run_ids) or "—"
    items: list[tuple[str, str]] = [("Model", str(model)), ("Run id", str(run_id))]
    if run_info.get("started"):
        items.append(("Started", _fmt_time(run_info["started"])))
    if run_info.get("finished"):
        items.append(("Finished", _fmt_time(run_info["finished"])))
    if "seed" in run_info:
        items.append(("Seed", str(run_info["seed"])))
    if "complete" in run_info and not run_info["complete"]:
        items.append(("Status", f"PARTIAL run: {run_info.get('partial_reason') or 'not finished or interrupted'}"))
    argv = run_info.get("argv")
    if argv:
        items.append(("Command", " ".join(map(str, argv)) if isinstance(argv, (list, tuple)) else str(argv)))
    versions = run_info.get("versions")
    if isinstance(versions, Mapping) and versions:
        items.append(("Versions", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))))
    elif versions:
        items.append(("Versions", str(versions)))
    skip = {"model", "run_id", "started", "finished", "seed", "argv", "versions", "complete", "partial_reason", "n_results"}
    for k in sorted(k for k in run_info if k not in skip):
        v = run_info[k]
        if isinstance(v, (dict, list, tuple)):
            v = json.dumps(jsonable(v), sort_keys=True, ensure_ascii=False)
        items.append((str(k).replace("_", " ").capitalize(), str(v)))
    return items


CSS = """
:root{--pass:#2e7d32;--fail:#c62828;--inc:#e69500;--err:#6a1b9a;--skip:#8a8a8a;--line:#d9dde3;--muted:#5f6b7a}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1d232b;margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:32px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 16px;margin:10px 0}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0 0}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0;word-break:break-word}
.counts{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0 2px}
.count{border-radius:6px;padding:6px 12px;font-weight:600;border:1px solid var(--line);background:#fff}
.count b{font-size:18px;margin-right:4px}
.count.verdict-pass{border-color:var(--pass);color:var(--pass)}
.count.verdict-fail{border-color:var(--fail);color:var(--fail)}
.count.verdict-inconclusive{border-color:var(--inc);color:#8a5a00;background:#fff8e6}
.count.verdict-skipped{border-color:var(--skip);color:#555}
.count.verdict-error{border-color:var(--err);color:var(--err)}
nav a{margin-right:14px}
a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.row-fail td:first-child{box-shadow:inset 4px 0 var(--fail)}
tr.row-inconclusive td:first-child{box-shadow:inset 4px 0 var(--inc)}
tr.row-inconclusive{background:#fffaf0}
tr.row-error td:first-child{box-shadow:inset 4px 0 var(--err)}
tr.row-skipped{color:#777}
.verdict{display:inline-block;border-radius:10px;padding:1px 9px;font-weight:600;font-size:12px;color:#fff;white-space:nowrap}
.verdict.verdict-pass{background:var(--pass)}
.verdict.verdict-fail{background:var(--fail)}
.verdict.verdict-inconclusive{background:#fff3d6;color:#7a4f00;border:1px dashed var(--inc)}
.verdict.verdict-error{background:var(--err)}
.verdict.verdict-skipped{background:#e4e6e9;color:#555}
.verdict.verdict-other{background:#455a64}
.scale{display:block;color:var(--muted);font-size:12px;white-space:normal;max-width:220px;margin-left:auto}
.scale-inline{font-weight:400}
.src,.note{color:var(--muted);font-size:12px}
.delta-worse{color:var(--fail)}.delta-better{color:var(--pass)}
figure{margin:12px 0;background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px}
figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;max-width:860px;height:auto;display:block}
details{background:#fff;border:1px solid var(--line);border-radius:8px;margin:8px 0;padding:6px 12px}
summary{cursor:pointer;font-weight:600}
table.examples td{font-size:13px}
table.kv{border-collapse:collapse;margin:4px 0;font-size:13px}
table.kv th,table.kv td{border:1px solid #e2e2e2;padding:2px 6px;text-align:left;vertical-align:top}
td.text{white-space:pre-wrap;word-break:break-word;max-width:520px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
footer{color:var(--muted);font-size:12px;margin-top:32px}
"""


def _results_table(rows: Sequence[Mapping[str, Any]], anchors: Mapping[int, str],
                   comparison: Mapping[str, Mapping[str, Any]] | None) -> str:
    head = ["Test id", "Family", "Value", "95% CI", "n", "Threshold", "Verdict"]
    if comparison is not None:
        head += ["Δ vs previous", "Previous"]
    out = ['<table class="results"><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        v = _verdict(r)
        anchor = anchors[i]
        tid = esc(r.get("test_id") or r.get("nodeid") or "?")
        link = f'<a href="#ex-{anchor}">{tid}</a>' if r.get("examples") else tid
        title = f' title="{esc(r["nodeid"])}"' if r.get("nodeid") else ""
        note = r.get("reason") or r.get("message") or ""
        note_html = f'<div class="note">{esc(note)}</div>' if note else ""
        cells = [
            f'<td id="t-{anchor}"{title}><code>{link}</code>{note_html}</td>',
            f"<td>{esc(r.get('family') or '')}</td>",
            f'<td class="num">{_value(r)}</td>',
            f'<td class="num">{_ci(r)}</td>',
            f'<td class="num">{esc(fmt_num(r.get("n")))}</td>',
            f'<td class="num">{_threshold(r)}</td>',
            f"<td>{_badge(v)}</td>",
        ]
        if comparison is not None:
            c = comparison.get(str(r.get("test_id") or ""))
            if c is None:
                cells += ['<td class="num">—</td>', '<td><span class="note">new</span></td>']
            else:
                worse = c.get("worsened")
                cls = " delta-worse" if worse is True else (" delta-better" if worse is False and _num(c.get("delta")) else "")
                prev_v = str(c.get("verdict_prev") or "")
                cells += [f'<td class="num{cls}">{esc(fmt_signed(c.get("delta")))}</td>',
                          f"<td>{_badge(prev_v) if prev_v else '—'}</td>"]
        out.append(f'<tr class="row-{slug(v or "other")}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


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
        parts = [f'<figure id="chart-{esc(slug(metric))}"><figcaption>{esc(metric)}</figcaption>']
        if svg:
            parts.append(svg)
        if missing:
            lst = ", ".join(f"{esc(r.get('probe') or r.get('test_id'))} ({esc(_verdict(r) or '?')})" for r in missing)
            parts.append(f'<div class="note">No value to plot: {lst}</div>')
        parts.append("</figure>")
        out.append("\n".join(parts))
    return "\n".join(out) if out else '<p class="note">No results yet.</p>'


def _examples(rows: Sequence[Mapping[str, Any]], anchors: Mapping[int, str]) -> str:
    out: list[str] = []
    for i, r in enumerate(rows):
        examples = [e for e in (r.get("examples") or []) if isinstance(e, Mapping)]
        if not examples:
            continue
        v = _verdict(r)
        has_cont = any(e.get("continuation") not in (None, "") for e in examples)
        extra_keys = sorted({k for e in examples for k in e if k not in _CORE_EXAMPLE_KEYS})
        opened = " open" if v in ("fail", "inconclusive") else ""
        out.append(
            f'<details id="ex-{anchors[i]}"{opened}><summary><code>{esc(r.get("test_id") or "?")}</code> '
            f"{_badge(v)} <span class=\"note\">value {_value(r, inline=True)}, top {len(examples)} items by score</span>"
            "</summary>"
        )
        head = ["#", "id", "prompt"] + (["continuation"] if has_cont else []) + ["score"]
        head += ["details"] if extra_keys else []
        out.append('<table class="examples"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head)
                   + "</tr></thead><tbody>")
        for j, e in enumerate(examples, 1):
            cells = [f'<td class="num">{j}</td>', f"<td><code>{esc(e.get('id'))}</code></td>",
                     f'<td class="text">{esc(e.get("prompt"))}</td>']
            if has_cont:
                cells.append(f'<td class="text">{esc(e.get("continuation"))}</td>')
            cells.append(f'<td class="num">{esc(fmt_num(e.get("score")))}</td>')
            if extra_keys:
                bits = []
                for k in extra_keys:
                    if k in e:
                        val = e[k]
                        if isinstance(val, (dict, list, tuple)):
                            val = json.dumps(jsonable(val), sort_keys=True, ensure_ascii=False)
                        elif isinstance(val, float):
                            val = fmt_num(val)
                        bits.append(f"<b>{esc(k)}</b>: {esc(val)}")
                cells.append(f'<td class="text">{"<br>".join(bits)}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</tbody></table></details>")
    return "\n".join(out) if out else '<p class="note">No per-item examples were recorded.</p>'


_MAX_LIST_ROWS = 20


def _nested(value: Any, depth: int = 0) -> str:
    """A breakdown value as HTML: mappings as key/value tables, lists of mappings as tables."""
    if isinstance(value, Mapping):
        if not value:
            return "—"
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_nested(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f"<th>{esc(k)}</th>" for k in keys)
            body = "".join("<tr>" + "".join(f"<td>{_nested(v.get(k, ''), depth + 1)}</td>" for k in keys) + "</tr>"
                           for v in value[:_MAX_LIST_ROWS])
            more = f'<p class="note">{len(value) - _MAX_LIST_ROWS} more not shown</p>' if len(value) > _MAX_LIST_ROWS else ""
            return f'<table class="kv"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'
        shown = ", ".join(esc(fmt_num(v) if isinstance(v, float) else v) for v in value[:50])
        return shown + (" …" if len(value) > 50 else "")
    if isinstance(value, float):
        return esc(fmt_num(value))
    return esc(value)


def _breakdowns(rows: Sequence[Mapping[str, Any]], anchors: Mapping[int, str]) -> str:
    out = []
    for i, r in enumerate(rows):
        b = r.get("breakdown")
        if not isinstance(b, Mapping) or not b:
            continue
        p = r.get("p_value")
        p_txt = f", p = {fmt_num(p)}" if _num(p) is not None else ""
        out.append(f'<details id="bd-{anchors[i]}"><summary><code>{esc(r.get("test_id") or "?")}</code> '
                   f'{_badge(_verdict(r))} <span class="note">value {_value(r, inline=True)}{esc(p_txt)}</span></summary>'
                   f"{_nested(b)}</details>")
    return "\n".join(out) if out else '<p class="note">No breakdowns were recorded.</p>'


def render_html(rows: Iterable[Mapping[str, Any]], run_info: Mapping[str, Any] | None = None, *,
                comparison: Any = None, generated: str | None = None, extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """The report as a string. See :func:`write_html`. ``extra_sections`` are (anchor, title,
    HTML body) appended before the breakdowns, e.g. the mitigation results table."""
    rows = sorted((jsonable(dict(r)) for r in rows), key=_sort_key)
    run_info = jsonable(dict(run_info or {}))
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

    meta = _meta_rows(run_info, rows)
    model = meta[0][1]
    counts = _counts(rows)
    if generated is None:
        generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        from bias_core import __version__
    except Exception:  # pragma: no cover - only when imported outside the package
        __version__ = "?"

    count_html = "".join(
        f'<span class="count {_verdict_class(v)}"><b>{n}</b>{esc(v or "?")}</span>'
        for v, n in counts.items() if n or v in ("pass", "fail", "inconclusive", "skipped")
    )
    count_html += f'<span class="count"><b>{len(rows)}</b>tests</span>'
    meta_html = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta)

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{'PARTIAL ' if run_info.get('complete') is False else ''}Gender-bias audit: {esc(model)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f'<header class="card"><h1>Gender-bias audit: {esc(model)}</h1>',
        f'<dl class="meta">{meta_html}</dl>',
        f'<div class="counts">{count_html}</div></header>',
        '<nav><a href="#results">Results</a><a href="#charts">Charts</a>'
        '<a href="#examples">Most biased prompts</a>'
        + "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t, _ in extra_sections)
        + '<a href="#breakdowns">Breakdowns</a></nav>',
        '<section id="results"><h2>Results</h2>',
        '<p class="note">A test passes when its whole 95% confidence interval lies on the passing side of '
        "the threshold, fails when the whole interval lies beyond it, and is <b>inconclusive</b> otherwise.</p>",
        _results_table(rows, anchors, comp) if rows else '<p class="note">No results yet.</p>',
        "</section>",
        '<section id="charts"><h2>Charts</h2>',
        '<p class="note">One chart per metric: each probe\'s value with its 95% CI, coloured by verdict; '
        "the dashed tick is the threshold and the shaded side fails.</p>",
        _charts(rows),
        "</section>",
        '<section id="examples"><h2>Most biased prompts</h2>',
        _examples(rows, anchors),
        "</section>",
        *[f'<section id="{esc(a)}"><h2>{esc(t)}</h2>{body}</section>' for a, t, body in extra_sections],
        '<section id="breakdowns"><h2>Breakdowns</h2>',
        '<p class="note">Per-test sub-results: per template, group, sentiment or configuration, '
        "fallback shares, and the p-values of permutation tests.</p>",
        _breakdowns(rows, anchors),
        "</section>",
        f"<footer>Generated by bias_core {esc(__version__)} at {esc(generated)}.</footer>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(rows: Iterable[Mapping[str, Any]], run_info: Mapping[str, Any] | None,
               path: str | os.PathLike[str], *, comparison: Any = None,
               generated: str | None = None, extra_sections: Sequence[tuple[str, str, str]] = ()) -> Path:
    """Write one self-contained HTML report to ``path`` (atomically) and return the path.

    ``rows``: result row dicts (see :mod:`bias_core.reports.table`); ``run_info``: the run
    header (model, run_id, started, seed, argv, versions, ...). ``comparison``: optionally the
    frame from :func:`bias_core.reports.table.compare` to add "Δ vs previous" columns.
    ``generated``: the footer timestamp (default now, UTC); fix it for byte-identical output.
    """
    text = render_html(rows, run_info, comparison=comparison, generated=generated, extra_sections=extra_sections)
    return atomic_write_text(path, text, durable=True)
