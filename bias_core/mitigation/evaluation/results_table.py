"""The mitigation results table, laid out like Tables 1-3 and 9 of Dong et al. (2024, arXiv:2402.11190).

One row per mitigation variant (original first, then hyperparameter, instruction, debias tuning,
any other method, and the ablations last); one column per dataset x metric, the datasets being
those the paper's tables print one by one: Template (Table 9: the ``template-*`` probes),
STS-B and SNLI (Table 1: ``natural-stsb``, ``natural-snli``), LLM (1) and LLM (2) (Table 2:
``llm-generated-1``, ``-2``), each with GAS, GLD and ADD. The project's offline stand-in for
the two natural sets (``natural-default``) gets a column of its own, named as such. (The paper
prints one column block per model and the datasets as row blocks; a run audits one model, so
here the datasets are the column blocks.)

Template is the only merged column: the paper prints one Template row per method over its four
topics; here its cell is the unweighted mean of the topic probes present (each probe is one
prompt set, so a larger set does not outweigh a smaller one). With ``per_probe=True`` (the run
folder's CSV and the report) each topic's own columns follow. Probes of no dataset (DA-Gender,
StereoSet, the guards...) get their own "<probe> <metric>" columns last.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bias_core import catalogue
from bias_core.storage.files import atomic_write_text

if TYPE_CHECKING:  # pandas is imported on use, as in bias_core.reports.table
    import pandas as pd

#: The metrics the paper's tables print, in the catalogue's order: those the mitigation's paired
#: reductions compare (GAS, GLD, ADD); others follow by name.
METRIC_ORDER: tuple[str, ...] = tuple(m.of for m in catalogue.reductions())
#: probe -> the paper's dataset (column block) it belongs to, in the paper's column order: the
#: probes those reductions measure on, by the title of their catalogue declaration (the four
#: template topics share "Template").
DATASETS: dict[str, str] = {p: catalogue.PROBES[p].title or p
                            for p in dict.fromkeys(p for m in catalogue.reductions() for p in m.probes)}
#: The paper's row order of methods; other methods follow in the order first seen.
METHOD_ORDER: tuple[str, ...] = ("original", "hyperparameter", "instruction", "debias-tuning")
#: Ablations (one loss term left out) come last, in this order, then others first seen.
ABLATION_ORDER: tuple[str, ...] = ("debias-tuning-no-Ld", "debias-tuning-no-Lg", "debias-tuning-no-Ll")
#: A row without a ``variant`` key comes from a plain audit run: the unmitigated model.
DEFAULT_VARIANT = "original"


def probe_group(probe: str) -> str | None:
    """The paper's dataset (column block) of a disclosure probe, or None for other probes."""
    return DATASETS.get(probe)


def merges(probe: str) -> bool:
    """Whether the probe's dataset column averages several probes (the template topics)."""
    return probe in DATASETS and sum(1 for g in DATASETS.values() if g == DATASETS[probe]) > 1


def is_ablation(variant: str) -> bool:
    return variant in ABLATION_ORDER or "-no-" in variant or variant.startswith("ablation")


def variant_order(variants: Iterable[str]) -> list[str]:
    """Original first, the paper's methods, other methods, then ablations (module doc)."""
    seen = list(dict.fromkeys(variants))
    main = [v for v in METHOD_ORDER if v in seen] + [v for v in seen if v not in METHOD_ORDER and not is_ablation(v)]
    ablations = [v for v in ABLATION_ORDER if v in seen]
    ablations += [v for v in seen if is_ablation(v) and v not in ABLATION_ORDER]
    return main + ablations


def _metric_rank(metric: str) -> int:
    return METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER)


def _value(row: Mapping[str, Any]) -> float:
    v = row.get("value")
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def mitigation_table(rows: Iterable[Mapping[str, Any]], per_probe: bool = False,
                     model: str | None = None) -> "pd.DataFrame":
    """Variants x "<dataset> <metric>" values from the run's result rows (module doc).

    ``rows`` are the gate fixture's result dicts (keys family, probe, metric, value, ..., and
    ``variant``; a missing variant means "original"). ``model`` keeps only that model's rows.
    ``per_probe`` adds a "<probe> <metric>" column for each probe of a merged dataset (the
    template topics) after the dataset columns.
    A (variant, probe, metric) given twice is an error: the table would have to pick one.
    Missing cells are NaN.
    """
    import pandas as pd

    rows = [r for r in rows if model is None or r.get("model") == model]
    cells: dict[tuple[str, str, str], float] = {}
    dupes = []
    for r in rows:
        key = (str(r.get("variant") or DEFAULT_VARIANT), str(r["probe"]), str(r["metric"]))
        if key in cells:
            dupes.append(key)
        cells[key] = _value(r)
    if dupes:
        shown = ", ".join("/".join(k) for k in dupes[:5])
        raise ValueError(f"mitigation_table: several rows for variant/probe/metric {shown}. Fix: pass one run's "
                         "rows per variant, or pass model= to keep one model's rows.")
    variants = variant_order(k[0] for k in cells)

    grouped: dict[tuple[str, str], dict[str, list[float]]] = {}
    topics: dict[tuple[str, str], dict[str, float]] = {}  # (probe, metric) of a merged dataset's probe
    single: dict[str, dict[str, float]] = {}
    for (variant, probe, metric), value in cells.items():
        group = probe_group(probe)
        if group is not None:
            grouped.setdefault((group, metric), {}).setdefault(variant, []).append(value)
        if per_probe and merges(probe):
            topics.setdefault((probe, metric), {})[variant] = value
        elif group is None:
            single.setdefault(f"{probe} {metric}", {})[variant] = value

    groups = list(dict.fromkeys(DATASETS.values()))
    columns: dict[str, list[float]] = {}
    for group, metric in sorted(grouped, key=lambda gm: (groups.index(gm[0]), _metric_rank(gm[1]), gm[1])):
        by_variant = grouped[(group, metric)]
        # nanmean without numpy's all-NaN warning: a missing value leaves the cell NaN.
        columns[f"{group} {metric}"] = [
            (sum(by_variant[v]) / len(by_variant[v])) if v in by_variant else math.nan for v in variants]
    for probe, metric in sorted(topics, key=lambda pm: (pm[0], _metric_rank(pm[1]), pm[1])):
        columns[f"{probe} {metric}"] = [topics[(probe, metric)].get(v, math.nan) for v in variants]
    for name, by_variant in single.items():
        columns[name] = [by_variant.get(v, math.nan) for v in variants]
    return pd.DataFrame(columns, index=pd.Index(variants, name="variant"), dtype=float)


def write_table_csv(df: "pd.DataFrame", path: Path | str) -> Path:
    """Write the table as CSV (variant as the first column) atomically; return the path."""
    return atomic_write_text(path, df.to_csv(), durable=True)


def _fmt(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return html.escape(str(v))
    if math.isnan(f):
        return "—"
    return f"{f:.4g}"


DEFAULT_CAPTION = "Mitigation results (rows: variants; columns: dataset and metric)"


def table_html(df: "pd.DataFrame", caption: str = DEFAULT_CAPTION) -> str:
    """A small HTML table of ``df`` (every label escaped; values to 4 significant digits)."""
    index_name = df.index.name or ""
    out = ['<table class="mitigation-table">', f"<caption>{html.escape(caption)}</caption>", "<thead><tr>",
           f"<th>{html.escape(str(index_name))}</th>"]
    out += [f"<th>{html.escape(str(c))}</th>" for c in df.columns]
    out.append("</tr></thead><tbody>")
    for label, values in zip(df.index, df.itertuples(index=False, name=None)):
        out.append("<tr>" + f"<th>{html.escape(str(label))}</th>"
                   + "".join(f'<td class="num">{_fmt(v)}</td>' for v in values) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def mitigation_cells(rows) -> list[dict[str, Any]]:
    """Original and mitigated values of every paired reduction, as table cells."""
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        b = r.get("breakdown") or {}
        if not (r.get("variant") and str(r.get("metric", "")).endswith("_reduction") and "mitigated" in b):
            continue
        metric = str(r["metric"]).removesuffix("_reduction")
        for variant, value in (("original", b["original"]), (r["variant"], b["mitigated"])):
            cells[(variant, r["probe"], metric)] = {"variant": variant, "probe": r["probe"], "metric": metric,
                                                    "value": value, "family": "disclosure"}
    return list(cells.values())
