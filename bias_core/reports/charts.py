"""Inline SVG charts for the HTML report (matplotlib, no pyplot, no global state).

Figures are built with :class:`matplotlib.figure.Figure` and rendered by the SVG backend, so
the process-wide backend (and any pyplot figures of the user) is left alone; no display needed.
Output is deterministic: no date metadata, a fixed per-chart ``svg.hashsalt`` (unique per chart
so element ids never collide when several SVGs sit in one HTML page), text kept as text.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

#: Verdict colours shared by charts and HTML.
VERDICT_COLORS = {
    "pass": "#2e7d32",
    "fail": "#c62828",
    "inconclusive": "#e69500",
    "error": "#6a1b9a",
    "skipped": "#8a8a8a",
}
#: Marker shapes, so verdicts differ by shape as well as colour.
VERDICT_MARKERS = {"pass": "o", "fail": "X", "inconclusive": "D", "error": "s", "skipped": "o"}
OTHER_COLOR = "#455a64"
THRESHOLD_COLOR = "#37474f"
FAIL_ZONE_COLOR = "#c62828"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def plottable(row: Mapping[str, Any]) -> bool:
    return _num(row.get("value")) is not None


def _label(row: Mapping[str, Any], several_models: bool) -> str:
    label = str(row.get("probe") or row.get("test_id") or "?")
    if row.get("variant"):  # mitigation rows: one probe per method, told apart by the method
        label = f"{row['variant']}: {label}"
    if several_models and row.get("model"):
        label += f" ({row['model']})"
    return label


def metric_chart_svg(metric: str, rows: Sequence[Mapping[str, Any]], *, salt: str | None = None) -> str:
    """An SVG (string, starting with ``<svg``) with one point per probe for ``metric``.

    Each row with a numeric value is a point with its 95% CI as error bars, coloured by verdict;
    its threshold is a dashed tick with the failing side shaded. Rows without a value are left
    out (the HTML lists them). Returns "" when nothing can be plotted.
    """
    rows = [r for r in rows if plottable(r)]
    if not rows:
        return ""
    several_models = len({str(r.get("model", "")) for r in rows}) > 1
    n = len(rows)

    xs: list[float] = []
    for r in rows:
        for key in ("value", "ci_low", "ci_high", "limit"):
            v = _num(r.get(key))
            if v is not None:
                xs.append(v)
        ideal, limit = _num(r.get("ideal")), _num(r.get("limit"))
        if ideal is not None and limit is not None:
            xs = [x for x in xs if x != limit] + [ideal - limit, ideal + limit]
    lo, hi = min(xs), max(xs)
    span = hi - lo
    pad = span * 0.08 if span > 0 else max(abs(hi) * 0.1, 0.05)
    xmin, xmax = lo - pad, hi + pad

    fig = Figure(figsize=(6.0, 1.0 + 0.34 * n), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    verdicts_seen: list[str] = []
    any_threshold = False
    for i, r in enumerate(rows):
        verdict = str(r.get("verdict") or "")
        color = VERDICT_COLORS.get(verdict, OTHER_COLOR)
        if verdict not in verdicts_seen:
            verdicts_seen.append(verdict)
        limit = _num(r.get("limit"))
        direction = r.get("direction")
        if limit is not None:
            any_threshold = True
            ideal = _num(r.get("ideal"))
            if ideal is not None:  # two-sided: fail zones on both sides of ideal ± limit
                edges = (ideal - limit, ideal + limit)
                for x0, x1 in ((xmin, edges[0]), (edges[1], xmax)):
                    if x1 > x0:
                        ax.add_patch(Rectangle((x0, i - 0.42), x1 - x0, 0.84,
                                               color=FAIL_ZONE_COLOR, alpha=0.08, lw=0, zorder=0))
                for edge in edges:
                    ax.plot([edge, edge], [i - 0.42, i + 0.42], color=THRESHOLD_COLOR,
                            lw=1.4, ls=(0, (3, 2)), zorder=1)
                limit = None
            elif direction == "max":
                ax.add_patch(Rectangle((limit, i - 0.42), xmax - limit, 0.84,
                                       color=FAIL_ZONE_COLOR, alpha=0.08, lw=0, zorder=0))
            elif direction == "min":
                ax.add_patch(Rectangle((xmin, i - 0.42), limit - xmin, 0.84,
                                       color=FAIL_ZONE_COLOR, alpha=0.08, lw=0, zorder=0))
            if limit is not None:
                ax.plot([limit, limit], [i - 0.42, i + 0.42], color=THRESHOLD_COLOR,
                        lw=1.4, ls=(0, (3, 2)), zorder=1)
        v = _num(r["value"])
        assert v is not None
        cl, ch = _num(r.get("ci_low")), _num(r.get("ci_high"))
        xerr = None
        if cl is not None and ch is not None:
            xerr = [[max(v - cl, 0.0)], [max(ch - v, 0.0)]]
        marker = VERDICT_MARKERS.get(verdict, "o")
        ax.errorbar([v], [i], xerr=xerr, fmt=marker, color=color, ecolor=color,
                    elinewidth=2, capsize=4, markersize=8 if marker == "X" else 6, zorder=3)

    ax.set_xlim(xmin, xmax)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels([_label(r, several_models) for r in rows], fontsize=10)
    # The axis says only what is plotted; the scale's description goes in the HTML caption.
    ax.set_xlabel(metric, fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    handles: list[Any] = [
        Line2D([], [], color=VERDICT_COLORS.get(v, OTHER_COLOR), marker=VERDICT_MARKERS.get(v, "o"),
               ls="", label=v or "?")
        for v in verdicts_seen
    ]
    if any_threshold:
        handles.append(Line2D([], [], color=THRESHOLD_COLOR, ls=(0, (3, 2)), label="threshold"))
        handles.append(Patch(color=FAIL_ZONE_COLOR, alpha=0.15, lw=0, label="fails beyond"))
    ax.legend(handles=handles, fontsize=9, loc="lower left", bbox_to_anchor=(0.0, 1.0),
              ncol=len(handles), frameon=False, borderaxespad=0.2, handletextpad=0.3,
              columnspacing=1.0)
    fig.tight_layout()  # the axes fill the width, so every chart shows its text at the same scale

    buf = io.StringIO()
    # Text stays text; DejaVu Sans (what the tight box is measured with) or Verdana, its metric twin.
    with matplotlib.rc_context({"svg.hashsalt": salt or f"bias-core-{metric}", "svg.fonttype": "none",
                                "font.sans-serif": ["DejaVu Sans", "Verdana"]}):
        # A tight box too: the legend above the axes and long labels are never cut at the edge.
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.04)
    return _inline_svg(buf.getvalue())


def _inline_svg(svg: str) -> str:
    """Strip the XML prolog, DOCTYPE and metadata and make the SVG scale with the page."""
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)

    def fix_root(m: re.Match[str]) -> str:
        tag = m.group(0)
        tag = re.sub(r'\s(width|height)="[^"]*"', "", tag, count=2)
        # Inline SVG in HTML5 needs no namespace declarations (the parser knows svg and xlink);
        # dropping them keeps the page free of any http URL.
        tag = re.sub(r'\sxmlns(:\w+)?="[^"]*"', "", tag)
        return tag[:-1] + ' class="chart" role="img" preserveAspectRatio="xMinYMin meet">'

    svg = re.sub(r"<svg\b[^>]*>", fix_root, svg, count=1)
    # Inside tags only (never text): 2 decimals are 1/100 px, and whitespace collapses; this
    # halves the report's size.
    svg = re.sub(r"<[^>]+>", lambda m: _TAG_NUMBER.sub(r"\1", re.sub(r"\s+", " ", m.group(0))), svg)
    # Group ids ("figure_1", "axes_1") repeat in every chart of a page and nothing refers to them.
    svg = re.sub(r'<g id="[^"]*">', "<g>", svg)
    return re.sub(r">\s+<", "><", svg).strip()


_TAG_NUMBER = re.compile(r"(\d\.\d{2})\d+")
