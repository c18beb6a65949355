"""The paper tables (:mod:`bias_core.reports.paper_tables`) as the report's ``paper-tables``
section and as the run folder's ``paper_tables.md``.

Each table of the run is followed by its notes and, closed, the paper's table as it prints it
(every model). Every text from the run (the model's name, a skip reason) is HTML-escaped with
its controls made visible in the section, and written with its controls as escapes and "|"
escaped in the Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bias_core.reports.html import esc
from bias_core.reports.paper_tables import Layout, Run, layouts, paper_data, printed_layout
from bias_core.storage.files import atomic_write_text
from bias_core.storage.visible import visible

SECTION_ID = "paper-tables"
SECTION_TITLE = "The run in the papers' layouts"
MARKDOWN_FILE = "paper_tables.md"
PAPERS = ("dong2024", "da-gender", "gendercare", "gbm")
INTRO = ("Each seed paper's tables laid out with this run's numbers, on the paper's scale (ln ADD, shares or "
         "percent as the paper prints them), and beside them the paper's own numbers for the same model where the "
         "paper has that model. A cell without a number says why (hover for the reason); † marks the value of a "
         "sample of the probe's items. The same tables, and each paper's table as printed with every model, are in "
         "paper_tables.md in the run folder.")


def _column_groups(layout: Layout, short: bool = False) -> list[str]:
    """Each column's group label; ``short``: "run" for the run's group, whose model the title names."""
    out: list[str] = []
    for label, span in layout.groups:
        out += ["run" if short and label.startswith("this run: ") else label] * span
    return out + [""] * (len(layout.columns) - len(out))


def table_html(layout: Layout, label: str | None = None, anchor: str | None = None) -> str:
    """One table: column groups, then columns; a row label repeated from the row above is left
    blank. ``label``: its accessible name (the title shown above it)."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    named = f' aria-label="{esc(label)}"' if label else ""
    out = [f'<table class="paper"{ident}{named}><thead>']
    if any(label for label, _ in layout.groups):
        out.append(f'<tr><th colspan="{len(layout.labels)}"></th>'
                   + "".join(f'<th class="group" colspan="{span}">{esc(label)}</th>' for label, span in layout.groups)
                   + "</tr>")
    out.append("<tr>" + "".join(f"<th>{esc(label)}</th>" for label in layout.labels)
               + "".join(f'<th class="num">{esc(c)}</th>' for c in layout.columns) + "</tr></thead><tbody>")
    groups = _column_groups(layout, short=True)  # the cards' labels below 700 px
    previous: tuple[str, ...] = ()
    for labels, cells in layout.rows:
        heads = [label if i == len(labels) - 1 or previous[:i + 1] != labels[:i + 1] else ""
                 for i, label in enumerate(labels)]
        previous = labels
        row = "".join(f'<th scope="row">{esc(h)}</th>' for h in heads)
        for group, column, cell in zip(groups, layout.columns, cells):
            text = f"<b>{esc(cell.text)}</b>" if cell.strong else esc(cell.text)
            title = f' title="{esc(cell.note)}"' if cell.note else ""
            cls = "num missing" if cell.missing else "num"
            row += f'<td class="{cls}" data-label="{esc(f"{group} {column}".strip())}"{title}>{text}</td>'
        out.append(f"<tr>{row}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def section_html(tables: Sequence[Layout]) -> str:
    """The section's body: per paper its citation, then each table with its notes and where the printed table is."""
    data = paper_data()
    out = [f'<p class="note">{esc(INTRO)}</p>']
    for paper in PAPERS:
        mine = [t for t in tables if t.paper == paper]
        if not mine:
            continue
        out.append(f'<h3>{esc(data["papers"][paper]["cite"])}</h3>')
        for t in mine:
            out.append(f'<div class="paper-table"><h4>{esc(t.title)}</h4>{table_html(t, t.title, f"pt-{t.key}")}')
            out.append('<ul class="pt-notes">' + "".join(f"<li>{esc(n)}</li>" for n in t.notes) + "</ul>")
            if t.key in data["tables"]:
                # the published table with every model is reference data: in paper_tables.md, not in a
                # report that must stay small enough to mail and open on a phone
                out.append(f'<p class="note">{esc(printed_layout(t.key).title.split(":")[0])} as the paper prints it, '
                           f'every model: <a href="{MARKDOWN_FILE}">{MARKDOWN_FILE}</a>.</p>')
            out.append("</div>")
    return "\n".join(out)


def _md(text: str) -> str:
    return visible(str(text)).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_markdown(layout: Layout) -> list[str]:
    groups = _column_groups(layout, short=True)
    head = list(layout.labels) + [f"{g} {c}".strip() for g, c in zip(groups, layout.columns)]
    lines = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    for labels, cells in layout.rows:
        shown = [f"**{_md(c.text)}**" if c.strong else _md(c.text) for c in cells]
        lines.append("| " + " | ".join([*(_md(x) for x in labels), *shown]) + " |")
    return lines


def markdown(tables: Sequence[Layout], model: str) -> str:
    """paper_tables.md: the same tables, notes as bullets, then each paper's table as printed."""
    data = paper_data()
    lines = [f"# {SECTION_TITLE}: {_md(model)}", "", _md(INTRO), ""]
    for paper in PAPERS:
        mine = [t for t in tables if t.paper == paper]
        if not mine:
            continue
        lines += [f"## {_md(data['papers'][paper]['cite'])}", ""]
        for t in mine:
            lines += [f"### {_md(t.title)}", "", *table_markdown(t), ""]
            lines += [f"- {_md(n)}" for n in t.notes] + [""]
            if t.key in data["tables"]:
                printed = printed_layout(t.key)
                lines += [f"As the paper prints it ({_md(printed.title.split(':')[0])}, every model):", "",
                          *table_markdown(printed), ""]
    return "\n".join(lines)


def paper_tables_sections(rows: Sequence[Mapping[str, Any]], run_info: Mapping[str, Any] | None = None,
                          run_dir: str | Path | None = None, write_markdown: bool = False) -> list[tuple[str, str, str]]:
    """The report's ``paper-tables`` section [(anchor, title, body)]; with ``write_markdown`` also
    ``run_dir/paper_tables.md``. None ([]) for a run without result rows."""
    if not rows:
        return []
    run = Run(rows, run_info, run_dir)
    try:
        tables = layouts(run)
    except Exception as exc:  # rows this layout cannot read must not cost the rest of the report
        why = f"The paper tables could not be built from this run's rows: {type(exc).__name__}: {exc}"
        if write_markdown and run_dir is not None:
            atomic_write_text(Path(run_dir) / MARKDOWN_FILE, f"# {SECTION_TITLE}\n\n{_md(why)}\n", durable=True)
        return [(SECTION_ID, SECTION_TITLE, f'<p class="note">{esc(why)}</p>')]
    if write_markdown and run_dir is not None:
        atomic_write_text(Path(run_dir) / MARKDOWN_FILE, markdown(tables, run.model), durable=True)
    return [(SECTION_ID, SECTION_TITLE, section_html(tables))]
