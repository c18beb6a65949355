"""The report's "Candidate vs baseline" section, from the regression rows of results.json.

Per metric, one inline SVG (written by hand: a few lines and rectangles, no external loads):
each probe's harm (how much worse the candidate is, in the metric's units and direction) with
its paired 95% CI, the zero line and the margin, the side beyond the margin shaded. Then a table
of every comparison (its n of pairs, delta, harm, p raw and adjusted) and, per test, the items
that moved most in each direction with the prompt and both runs' continuations and values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_core.gating.regression.power import detect_text
from bias_core.reports.charts import FAIL_ZONE_COLOR, OTHER_COLOR, THRESHOLD_COLOR, VERDICT_COLORS
from bias_core.reports.fmt import num, pairs_of, sig, worse_note
from bias_core.storage.visible import visible

_ROW_H, _W, _LABEL_W, _PAD, _MARGIN_LABEL_W = 22, 640, 190, 12, 100


def is_regression(row: Mapping[str, Any]) -> bool:
    return row.get("kind") == "regression"


def _esc(v: Any) -> str:
    import html

    return html.escape(visible("" if v is None else str(v)), quote=True)


def _breakable(test_id: str) -> str:
    """A test id that a narrow column may break after its "-" and "_" (a long task name such as
    crows_pairs_english_gender), never inside a word and never letter by letter."""
    return _esc(test_id).replace("-", "-<wbr>").replace("_", "_<wbr>")


def _signed(v: Any) -> str:
    f = num(v)
    if f is None:
        return "—"
    return "0" if f == 0 else (sig(f) if f < 0 else f"+{sig(f)}")


def harm_chart_svg(metric: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """One metric's harm CIs against its margin (module doc); rows need harm, its CI and margin."""
    rows = [r for r in rows if num(r.get("harm")) is not None]
    margin = max((num(r.get("margin")) or 0.0) for r in rows) if rows else 0.0
    values = [0.0, margin] + [num(r.get(k)) or 0.0 for r in rows for k in ("harm_ci_low", "harm_ci_high")]
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(margin), 1e-3)
    lo, hi = lo - 0.08 * span, hi + 0.08 * span
    plot_w = _W - _LABEL_W - _PAD - _MARGIN_LABEL_W  # room right of the plot for the margin's label
    height = _PAD * 2 + _ROW_H * len(rows) + 16

    def x(v: float) -> float:
        return round(_LABEL_W + (v - lo) / (hi - lo) * plot_w, 2)

    top, bottom = _PAD, _PAD + _ROW_H * len(rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
           f'role="img" aria-label="{_esc(metric)}: harm of the candidate with 95% CI against the margin" '
           'font-family="system-ui,sans-serif" font-size="11">',
           f'<rect x="{x(margin)}" y="{top}" width="{round(x(hi) - x(margin), 2)}" height="{bottom - top}" '
           f'fill="{FAIL_ZONE_COLOR}" fill-opacity="0.08"/>',
           f'<line x1="{x(0)}" x2="{x(0)}" y1="{top}" y2="{bottom}" stroke="{OTHER_COLOR}" stroke-width="1"/>',
           f'<line x1="{x(margin)}" x2="{x(margin)}" y1="{top}" y2="{bottom}" stroke="{THRESHOLD_COLOR}" '
           'stroke-dasharray="4 3" stroke-width="1.5"/>',
           f'<text x="{x(0)}" y="{bottom + 13}" text-anchor="middle" fill="{OTHER_COLOR}">0</text>',
           f'<text x="{x(margin)}" y="{bottom + 13}" text-anchor="start" fill="{THRESHOLD_COLOR}"> margin '
           f'{_esc(sig(margin))} (worse →)</text>']
    for i, r in enumerate(rows):
        y = top + _ROW_H * i + _ROW_H / 2
        color = VERDICT_COLORS.get(str(r.get("verdict")), OTHER_COLOR)
        a, b, h = (num(r.get(k)) or 0.0 for k in ("harm_ci_low", "harm_ci_high", "harm"))
        out.append(f'<text x="{_LABEL_W - 6}" y="{y + 4}" text-anchor="end">{_esc(r.get("probe"))}</text>')
        out.append(f'<rect x="{x(min(a, b))}" y="{y - 4}" width="{max(1.0, round(x(b) - x(a), 2))}" height="8" '
                   f'fill="{color}" fill-opacity="0.35" stroke="{color}"><title>{_esc(r.get("probe"))}: harm '
                   f'{_esc(sig(h))}, 95% CI [{_esc(sig(a))}, {_esc(sig(b))}], {_esc(r.get("verdict"))}</title></rect>')
        out.append(f'<circle cx="{x(h)}" cy="{y}" r="3.5" fill="{color}"/>')
    out.append("</svg>")
    return "".join(out)


def _table(rows: Sequence[Mapping[str, Any]], badge) -> str:
    head = ("Test", "Better", "n (pairs)", "Baseline", "Candidate", "Δ [95% CI]", "Harm [95% CI]", "Margin",
            "Detects (80%)", "p", "p adjusted", "Verdict")
    # twelve columns: a narrow window scrolls the table; a test id breaks only after its "-" and "_"
    out = ['<div class="wide"><table class="examples"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for r in rows:
        better = f"closer to {sig(r.get('ideal'))}" if r.get("better") == "ideal" else f"{r.get('better') or '—'} is better"
        adjusted = (f'{sig(r.get("p_adjusted"), 2)}<div class="ci">{_esc(r.get("adjustment") or "")}</div>'
                    if num(r.get("p_adjusted")) is not None else "—")
        note = f'<div class="note">{_esc(r["reason"])}</div>' if r.get("reason") else ""
        out.append("<tr>" + "".join([
            f'<td class="id"><code>{_breakable(str(r.get("probe")) + "-" + str(r.get("metric")))}</code>{note}</td>',
            f"<td>{_esc(better)}</td>",
            f'<td class="num wrap{" worse" if r.get("n_dropped") else ""}">{_esc(pairs_of(r))}</td>',
            f'<td class="num">{_esc(sig(r.get("baseline_value")))}</td>',
            f'<td class="num">{_esc(sig(r.get("candidate_value")))}</td>',
            # the CI under the value: twelve columns fit a report's width with the intervals on lines of their own
            f'<td class="num">{_esc(_signed(r.get("value")))}<div class="ci">[{_esc(_signed(r.get("ci_low")))}, '
            f'{_esc(_signed(r.get("ci_high")))}]</div></td>',
            f'<td class="num">{_esc(_signed(r.get("harm")))}<div class="ci">[{_esc(_signed(r.get("harm_ci_low")))}, '
            f'{_esc(_signed(r.get("harm_ci_high")))}]</div></td>',
            f'<td class="num">{_esc(sig(r.get("margin")))}{_rule(r)}</td>', _detects(r),
            f'<td class="num">{_esc(sig(r.get("p_value"), 2))}</td>',
            f'<td class="num">{adjusted}</td>', f"<td>{badge(str(r.get('verdict') or ''))}{_worse(r)}</td>",
        ]) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _detects(r: Mapping[str, Any]) -> str:
    """The regression the baseline's items catch with 80% power; marked where the margin is below it."""
    if "detects" not in r:  # rows written before the report measured it
        return '<td class="num">—</td>'
    text = "beyond reach" if r.get("detects") is None else sig(r.get("detects"))
    below = r.get("margin_below_detectable")
    return f'<td class="num{" worse" if below else ""}">{_esc(text)}{" (margin below)" if below else ""}</td>'


def _rule(r: Mapping[str, Any]) -> str:
    rule = str(r.get("margin_rule") or "")
    out = f'<div class="note">{_esc(rule)}</div>' if "%" in rule else ""
    if r.get("gate_source"):  # a log comparison's margin: a thresholds.toml table, or a default
        out += f'<div class="note source" title="{_esc(r["gate_source"])}">{_esc(_source(str(r["gate_source"])))}</div>'
    return out


def _source(source: str) -> str:
    """Where a log comparison's margin comes from, in a word or two (the whole in the tooltip):
    "default", or the thresholds file that declares it ("thresholds.toml")."""
    if source.startswith("default for "):
        return "default"
    declared = source.split(" [", 1)[0]
    return declared.replace("\\", "/").rsplit("/", 1)[-1] or "thresholds.toml"


def _worse(r: Mapping[str, Any]) -> str:
    note = worse_note(r)
    return f'<div class="note worse">{_esc(note)}</div>' if note else ""


def _moved(r: Mapping[str, Any]) -> str:
    moved = r.get("moved") or {}
    parts = []
    for direction, title in (("up", "rose most (candidate − baseline > 0)"), ("down", "fell most")):
        items = moved.get(direction) or []
        if not items:
            continue
        # outputs only where some item has one (a log's scored choices have none)
        outputs = any(it.get(k) is not None for it in items for k in ("baseline_output", "candidate_output"))
        body = "".join(
            f'<tr><td class="text">{_esc(it.get("prompt"))}</td>'
            + (f'<td class="text">{_esc(it.get("baseline_output") if it.get("baseline_output") is not None else "—")}</td>'
               f'<td class="text">{_esc(it.get("candidate_output") if it.get("candidate_output") is not None else "—")}</td>'
               if outputs else "")
            + f'<td class="num">{_esc(sig(it.get("baseline")))}</td><td class="num">{_esc(sig(it.get("candidate")))}</td></tr>'
            for it in items)
        heads = "<th>Baseline output</th><th>Candidate output</th>" if outputs else ""
        parts.append(f'<p class="note">Items whose value {title}:</p><table class="examples"><thead><tr><th>Prompt</th>'
                     f"{heads}<th>Baseline</th><th>Candidate</th></tr></thead>"
                     f"<tbody>{body}</tbody></table>")
    if not parts:
        return ""
    opened = " open" if r.get("verdict") in ("fail", "inconclusive") or r.get("worse_within_margin") else ""
    return (f'<details class="examples"{opened}><summary><code>{_esc(r.get("test_id"))}</code> '
            f'<span class="note">items that moved most</span></summary>{"".join(parts)}</details>')


def regression_section(rows: Sequence[Mapping[str, Any]], badge) -> tuple[str, str, str] | None:
    """(anchor, title, HTML body) of the section, or None when the run has no regression rows.
    ``badge(verdict)`` renders a verdict as the rest of the report does."""
    rows = sorted((r for r in rows if is_regression(r)), key=lambda r: (str(r.get("metric")), str(r.get("probe"))))
    if not rows:
        return None
    first = next((r for r in rows if r.get("config")), rows[0])
    logs = any(r.get("family") == "external" for r in rows)  # two logs of another tool compared
    paired = ("Paired sample by sample (same id, same content hashes)" if logs else "Paired on the same items")
    margins = ("thresholds.toml [regression.external], or the default for the metric, shown under each margin"
               if logs else "thresholds.toml [regression.*]")
    intro = (f'<p class="note">Baseline: {_esc(first.get("baseline") or "—")}. {_esc(first.get("config") or "")}. '
             f"{paired}: Δ = candidate − baseline; harm = how much worse the candidate is in the "
             "metric's direction. A test fails when the harm's whole 95% CI lies beyond its margin "
             f"({_esc(margins)}) and the one-sided p-value, adjusted across the run, is below 0.05; "
             "it passes when the whole CI lies within the margin.</p>")
    worse = [r for r in rows if worse_note(r)]
    if worse:
        intro += ('<p class="note worse"><strong>Within margin, but significantly worse:</strong></p><ul>'
                  + "".join(f"<li><code>{_esc(r.get('test_id'))}</code>: {_esc(worse_note(r))}</li>" for r in worse)
                  + "</ul>")
    weak = [r for r in rows if detect_text(r)]
    if weak:
        intro += ('<p class="note worse"><strong>Margins below what the row detects</strong> (a regression of '
                  "twice the margin passes unnoticed more than 1 time in 5 on these items):</p><ul>"
                  + "".join(f"<li><code>{_esc(r.get('test_id'))}</code>: {_esc(detect_text(r))}</li>" for r in weak)
                  + "</ul>")
    charts = []
    for metric in dict.fromkeys(str(r.get("metric")) for r in rows):
        judged = [r for r in rows if str(r.get("metric")) == metric and num(r.get("harm")) is not None]
        if judged:
            charts.append(f'<figure class="chart"><figcaption><code>{_esc(metric)}</code></figcaption>'
                          f"{harm_chart_svg(metric, judged)}</figure>")
    moved = "".join(_moved(r) for r in rows)
    return ("regression", "Candidate vs baseline", intro + "".join(charts) + _table(rows, badge) + moved)
