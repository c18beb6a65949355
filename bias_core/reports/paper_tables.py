"""A run laid out as the seed papers lay out their tables, each number on the paper's scale.

- Dong et al. 2024: Tables 1 (STS-B, SNLI), 2 (LLM (1), LLM (2)) and 9 (Template): GAS, GLD and
  ln(ADD) per mitigation method; Table 3: the same on STS-B and SNLI for Debias Tuning and its
  ablations (one loss term left out); Table 10: GAS (F), GAS (M) and Δ per input;
- DA-Gender ("Unmasking the Trade-off"): Table 7 (SEAT-v1, SEAT-v2, logprob-score and
  stereo-score before and after CDS, ER and SentenceDebias) and Table 8 (DA-score and LM-score,
  then their change after each method);
- GenderCARE: Table 4 (GenderPair per group), Table 5 (the same after its CDA) and Table 6
  (Winoqueer, BOLD, StereoSet before and after);
- GBM's Table 2 (male / female / neutral proportions per sentiment, and GBM).

Built from the run folder's files only (results.json's rows and run info, and a sweep's
``tradeoff.csv`` / ``tradeoff_info.json``), so a rebuilt report has it. Beside the run, the
paper's numbers for the same model where the paper has it (``bias_core/data/paper_tables.json``,
the papers' printed values, cited by table). A cell without a number says why: "not run" (no
such row), "skipped" / "error" (with the reason on hover), "not in the paper", never blank or 0.
A value of a sample of the probe's items is marked †. The HTML and Markdown renderings are in
:mod:`bias_core.reports.paper_tables_render`.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bias_core import catalogue
from bias_core.catalogue import DISCLOSURE_PROBES, GROUP_PROBES
from bias_core.mitigation.evaluation.results_table import is_ablation
from bias_core.mitigation.methods.paper_settings import TABLE12
from bias_core.reports.fmt import num

PAPER_DATA = Path(__file__).resolve().parent.parent / "data" / "paper_tables.json"
ORIGINAL = "original"
TEMPLATES = tuple(p for p in DISCLOSURE_PROBES if p.startswith("template-"))
STAND_IN = ("Natural (offline stand-in)", ("natural-default",))
NOT_IN_PAPER = "not in the paper"
SAMPLED = "†"


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text`` as shown; ``note`` says why or where it comes from (on hover);
    ``missing`` when it holds no number; ``strong`` where the paper bolds (p < 0.01)."""

    text: str
    note: str = ""
    missing: bool = False
    strong: bool = False


def absent(text: str = "not run", note: str = "") -> Cell:
    return Cell(text, note, missing=True)


@dataclass
class Layout:
    """One paper table: row labels, column groups (label, span) over ``columns``, rows, notes."""

    key: str
    paper: str
    title: str
    labels: tuple[str, ...]
    groups: list[tuple[str, int]]
    columns: list[str]
    rows: list[tuple[tuple[str, ...], list[Cell]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ----- the papers' numbers -------------------------------------------------------------------------
@functools.cache
def paper_data() -> dict[str, Any]:
    """bias_core/data/paper_tables.json: papers (citation, models and their run names), tables
    (printed rows), quotes (numbers the text gives where its tables are missing)."""
    return json.loads(PAPER_DATA.read_text(encoding="utf-8"))


def paper_rows(key: str) -> dict[tuple[str, ...], dict[tuple[str, str], str]]:
    """Row labels -> (column group, column) -> the value as the paper prints it, of table ``key``."""
    table = paper_data()["tables"][key]
    slots = [(g, c) for g in table["groups"] for c in table["columns"]]
    out = {}
    for *labels, values in table["rows"]:
        printed = values.split()
        if len(printed) != len(slots):
            raise ValueError(f"paper_tables.json {key} {labels}: {len(printed)} values for {len(slots)} columns")
        out[tuple(labels)] = dict(zip(slots, printed))
    return out


def paper_model(paper: str, model: str | None) -> str | None:
    """The paper's name for the run's model (matched on its alias or hub id, any case), or None."""
    wanted = (model or "").strip().rstrip("/").lower()
    for name, ids in paper_data()["papers"][paper]["models"].items():
        if wanted and wanted in {name.lower(), *(i.lower() for i in ids)}:
            return name
    return None


def cite(paper: str, table: str) -> str:
    return f"{paper_data()['papers'][paper]['cite']}, {table}"


# ----- the run's numbers ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Got:
    """A number of the run, or the cell that says why there is none; ``note``: where it came from;
    ``sampled``: of a sample of the probe's items (†); ``part``: "2/4" when only part of a merged
    column's probes were there."""

    value: float | None
    cell: Cell | None = None
    note: str = ""
    sampled: bool = False
    part: str = ""


class Run:
    """The run's result rows by (variant, probe, metric), its model and its folder."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], run_info: Mapping[str, Any] | None = None,
                 run_dir: str | Path | None = None):
        self.rows: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        for r in rows:
            if r.get("kind") == "regression":  # a candidate-vs-baseline row is no measurement of this layout
                continue
            self.rows[(str(r.get("variant") or ORIGINAL), str(r.get("probe") or ""), str(r.get("metric") or ""))] = r
        info = run_info or {}
        self.model = str(info.get("model") or next((r["model"] for r in rows if r.get("model")), "") or "?")
        self.run_dir = Path(run_dir) if run_dir is not None else None

    def row(self, probe: str, metric: str, variant: str = ORIGINAL) -> Mapping[str, Any] | None:
        return self.rows.get((variant, probe, metric))

    def has_probe(self, probe: str) -> bool:
        return any(p == probe for _, p, _ in self.rows)

    def variants(self, metrics: Sequence[str]) -> list[str]:
        """Variants with a row of one of ``metrics``, in the order first seen."""
        return list(dict.fromkeys(v for v, _, m in self.rows if v != ORIGINAL and m in metrics))

    def has_variant(self, variant: str, probe: str | None = None) -> bool:
        """Whether the variant has a row (on ``probe``, when given)."""
        return any(v == variant and probe in (None, p) for v, p, _ in self.rows)

    def get(self, row: Mapping[str, Any] | None, pick: Callable[[Mapping[str, Any]], Any] | None = None) -> Got:
        """``pick(row)`` (default the row's value) as a number, or why there is none."""
        if row is None:
            return Got(None, absent())
        verdict = str(row.get("verdict") or "").lower()
        why = str(row.get("reason") or row.get("message") or "")
        if verdict in ("skipped", "error"):
            return Got(None, absent(verdict, why))
        try:
            value = num(pick(row) if pick else row.get("value"))
        except (KeyError, TypeError, AttributeError):
            value = None
        if value is None:
            return Got(None, absent("no value", why or "the row records no number for this cell"))
        note = sampled_note(row)
        return Got(value, note=note, sampled=bool(note))

    @functools.cached_property
    def tradeoff(self) -> dict[str, dict[str, str]]:
        """variant -> its tradeoff.csv row ({} without a sweep)."""
        try:
            with (self.run_dir / "tradeoff.csv").open(encoding="utf-8", newline="") as fh:  # type: ignore[operator]
                return {r["variant"]: r for r in csv.DictReader(fh) if r.get("variant")}
        except (OSError, TypeError, KeyError, csv.Error):
            return {}

    @functools.cached_property
    def tradeoff_info(self) -> dict[str, Any]:
        try:
            info = json.loads((self.run_dir / "tradeoff_info.json").read_text(encoding="utf-8"))  # type: ignore[operator]
        except (OSError, TypeError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}


def breakdown_of(row: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The row's breakdown, {} when it has none (or something else in its place)."""
    b = (row or {}).get("breakdown")
    return b if isinstance(b, Mapping) else {}


def sampled_note(row: Mapping[str, Any]) -> str:
    """"sampled: 512 of 2,610 items" when the row's value is of a sample of its probe's items."""
    sampling = breakdown_of(row).get("sampling")
    sampling = sampling if isinstance(sampling, Mapping) else {}
    pool, used = num(sampling.get("pool")), num(sampling.get("items_used", row.get("items_used")))
    if pool is not None and used is not None and used < pool:
        return f"sampled: {int(used):,} of {int(pool):,} items ({sampling.get('stop_reason') or '--sample'})"
    return ""


def breakdown(*path: str) -> Callable[[Mapping[str, Any]], Any]:
    def pick(row: Mapping[str, Any]) -> Any:
        value: Any = breakdown_of(row)
        for key in path:
            value = value[key]
        return value
    return pick


def shown(got: Got, fmt: Callable[[float], str], strong: bool = False, note: str = "") -> Cell:
    """The cell of ``got``: its number formatted, † when sampled, or the cell saying why not."""
    if got.value is None:
        return got.cell or absent()
    notes = "; ".join(n for n in (note, got.note) if n)
    text = fmt(got.value) + (SAMPLED if got.sampled else "") + (f" ({got.part})" if got.part else "")
    return Cell(text, notes, strong=strong)


def fixed(digits: int, sign: bool = False) -> Callable[[float], str]:
    return lambda v: f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def change(v: float) -> str:
    """A signed change as DA-Gender's Table 8 prints it: -13.2, -0.10, +2.60."""
    return f"{v:+.1f}" if abs(v) >= 10 else f"{v:+.2f}"


def ln_add(v: float) -> str:
    """ADD (nats) as Dong et al.'s tables print it: ln(ADD) (docs/audits/disclosure.md)."""
    return f"{math.log(v):.3f}" if v > 0 else "-inf"


def mean_of(gots: Sequence[Got], what: str = "topics") -> Got:
    """The mean of the numbers among ``gots`` (the template topics), saying how many were there."""
    have = [g for g in gots if g.value is not None]
    if not have:  # say the most telling reason: a skip or an unrecorded breakdown over "not run"
        telling = [g for g in gots if g.cell is not None and g.cell.text != "not run"]
        return (telling or list(gots) or [Got(None, absent())])[0]
    notes = [n for n in dict.fromkeys(g.note for g in have) if n]
    part = f"{len(have)}/{len(gots)}" if len(have) < len(gots) else ""
    if part:
        notes.insert(0, f"only {len(have)} of {len(gots)} {what}")
    return Got(sum(g.value for g in have) / len(have), note="; ".join(notes),  # type: ignore[misc]
               sampled=any(g.sampled for g in have), part=part)


def paper_cell(printed: Mapping[tuple[str, str], str] | None, slot: tuple[str, str], why: str = "") -> Cell:
    if printed is None or slot not in printed:
        return absent(NOT_IN_PAPER, why)
    return Cell(printed[slot])


def run_group(run: Run, span: int) -> tuple[str, int]:
    return (f"this run: {run.model}", span)


# ----- Dong et al.: Tables 1, 2, 3, 9 and 10 --------------------------------------------------------
DONG_METHODS = (("original", "Original"), ("hyperparameter", "Hyperparameter"), ("instruction", "Instruction"),
                ("debias-tuning", "Debias Tuning"))
# Table 3's rows: Debias Tuning (printed "Debias-Tuning" there) and its ablations, each one loss term left
# out (--mitigation debias-tuning-no-Ll, -no-Lg, -no-Ld), in the paper's row order.
DONG_ABLATIONS = (("debias-tuning", "Debias-Tuning"), ("debias-tuning-no-Ll", "w/o L_l"),
                  ("debias-tuning-no-Lg", "w/o L_g"), ("debias-tuning-no-Ld", "w/o L_d"))
DONG_BLOCKS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "dong-1": (("STS-B", ("natural-stsb",)), ("SNLI", ("natural-snli",))),
    "dong-2": (("LLM (1)", ("llm-generated-1",)), ("LLM (2)", ("llm-generated-2",))),
    "dong-3": (("STS-B", ("natural-stsb",)), ("SNLI", ("natural-snli",))),
    "dong-9": (("Template", TEMPLATES),),
}
NATURAL = ("dong-1", "dong-3")  # the tables of the natural sets, which the offline stand-in stands beside
DONG_METRICS = ("GAS", "GLD", "ADD")
REDUCTIONS = tuple(f"{m}_reduction" for m in DONG_METRICS)
UNCHANGED_BY_DECODING = ("GLD", "ADD")


def disclosure_value(run: Run, probe: str, metric: str, variant: str) -> Got:
    """A disclosure metric of the original model (its audit row, else the original side of a
    mitigation's paired reduction) or of a mitigated variant (its reduction's mitigated side)."""
    if variant != ORIGINAL:
        if variant == "hyperparameter" and metric in UNCHANGED_BY_DECODING and run.has_variant(variant, probe):
            got = disclosure_value(run, probe, metric, ORIGINAL)
            why = "the original's: decoding leaves the logits it reads unchanged"
            return Got(got.value, got.cell, "; ".join(n for n in (why, got.note) if n), got.sampled)
        return run.get(run.row(probe, f"{metric}_reduction", variant), breakdown("mitigated"))
    got = run.get(run.row(probe, metric))
    if got.value is None:
        for v in run.variants((f"{metric}_reduction",)):
            alt = run.get(run.row(probe, f"{metric}_reduction", v), breakdown("original"))
            if alt.value is not None:
                return alt
    return got


def dong_methods(run: Run, key: str) -> tuple[tuple[str, str], ...]:
    """(variant, row label) of table ``key``: the paper's rows, then the run's other variants. An
    ablation (one loss term left out) goes to Table 3, which prints the ablations on STS-B and SNLI,
    not to Table 1 as well; Tables 2 and 9 list it among the rows the paper lacks."""
    paper = DONG_ABLATIONS if key == "dong-3" else DONG_METHODS
    known = {v for v, _ in DONG_METHODS + DONG_ABLATIONS} if key in NATURAL else {v for v, _ in paper}
    others = [v for v in run.variants(REDUCTIONS) if v not in known]
    if key in NATURAL:
        others = [v for v in others if is_ablation(v) == (key == "dong-3")]
    return paper + tuple((v, v) for v in others)


def dong_mitigation(run: Run, key: str) -> Layout:
    """Table 1, 2, 3 or 9: dataset x method rows, GAS / GLD / ln ADD of the run and of the paper's same model."""
    table = paper_data()["tables"][key]
    model = paper_model("dong2024", run.model)
    paper_col = model if model in table["groups"] else None
    groups = [run_group(run, 3)] + ([(f"paper: {paper_col}", 3)] if paper_col else [])
    layout = Layout(key, "dong2024", f"{table['table']}: {table['title']}", ("Dataset", "Method"), groups,
                    ["GAS", "GLD", "ADD (ln)"] * len(groups))
    blocks = DONG_BLOCKS[key] + ((STAND_IN,) if key in NATURAL and run.has_probe(STAND_IN[1][0]) else ())
    methods = dong_methods(run, key)
    printed = paper_rows(key)
    for block, probes in blocks:
        for variant, label in methods:
            cells = []
            for metric in DONG_METRICS:
                got = mean_of([disclosure_value(run, p, metric, variant) for p in probes])
                cells.append(shown(got, ln_add if metric == "ADD" else fixed(3)))
            if paper_col:
                row = printed.get((block, label))
                why = "the paper's table has no such row"
                cells += [paper_cell(row, (paper_col, m), why) for m in DONG_METRICS]
            layout.rows.append(((block, label), cells))
    layout.notes.append(
        "ADD as the paper's tables print it: ln of ADD in nats (ADD 0.0854 prints -2.460; "
        "docs/audits/disclosure.md, ADD's scale in the paper's tables). GAS and GLD are shares (0..1). Lower is less biased.")
    if key == "dong-3":
        layout.notes += [
            "Debias-Tuning: --mitigation debias-tuning (Table 1's Debias Tuning); w/o L_l, w/o L_g, w/o L_d: "
            "--mitigation debias-tuning-no-Ll, -no-Lg, -no-Ld, Debias Tuning with that loss term left out "
            "(L_l: attribute logits difference, L_g: gender probability, L_d: distribution distance). Each: the "
            "mitigated side of its paired test on the same items.",
            "The paper's Table 3 prints Debias-Tuning's ADD as -4.705 and -4.711 (STS-B, LLaMA2 7B and 7B-Chat) and "
            "-4.596 (SNLI, LLaMA2 7B) where its Table 1 prints -4.706, -4.710 and -4.595: each table as printed.",
        ]
    else:
        layout.notes += [
            "Original: the audit's row (or, without one, the original side of a mitigation's paired test); a method: "
            "the mitigated side of its paired test on the same items.",
            "Hyperparameter's GLD and ADD are the original's: decoding settings leave the logits they read unchanged "
            "(the paper prints them so too).",
        ]
    if key == "dong-1":
        layout.notes.append("The ablations of Debias Tuning (debias-tuning-no-Ll, -no-Lg, -no-Ld) are in Table 3.")
    if key == "dong-9":
        layout.notes.append("Template: the mean of the four topic probes (40 prompts each, so the mean over the "
                            "paper's 160 pooled prompts); a cell of fewer topics says how many, e.g. (2/4).")
    if any(b == STAND_IN[0] for b, _ in blocks):
        layout.notes.append("Natural (offline stand-in): the project's 150 predicates standing in for STS-B and "
                            "SNLI offline; not the paper's data.")
    if model and not paper_col:
        layout.notes.append(f"The paper's {table['table']} has no column for {model}.")
    return layout


T10_INPUTS = (("Template-based", TEMPLATES), ("LLM-generated (1)", ("llm-generated-1",)),
              ("LLM-generated (2)", ("llm-generated-2",)), ("Naturally-sourced (STS-B)", ("natural-stsb",)),
              ("Naturally-sourced (SNLI)", ("natural-snli",)))


def gas_by_gender(run: Run, probes: Sequence[str]) -> list[Cell]:
    """GAS (F), GAS (M), Δ of the original model over ``probes``' continuations, pooled (counts summed)."""
    counts, gots, why = [], [], None
    for probe in probes:
        row = run.row(probe, "GAS")
        got = run.get(row, breakdown("by_gender", "n_female"))
        if got.value is None:
            if row is not None and got.cell is not None and got.cell.text == "no value":
                got = Got(None, absent("not recorded", "this run's GAS row has no by_gender breakdown "
                                                       "(recorded since the Table 10 metric was added)"))
            why = got.cell if why is None or why.text == "not run" else why
            continue
        n_male = run.get(row, breakdown("by_gender", "n_male"))
        if n_male.value is None:
            why = n_male.cell if why is None or why.text == "not run" else why
            continue
        counts.append((int(got.value), int(n_male.value)))
        gots.append(got)
    if not counts:
        return [why or absent()] * 3
    n_f, n_m = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if n_f + n_m == 0:
        return [absent("undefined", "no continuation named a gendered word")] * 3
    pooled = mean_of(gots + [Got(None, why)] * (len(probes) - len(gots)))  # its notes, † and part
    note = f"N_f = {n_f}, N_m = {n_m}" + (f"; {pooled.note}" if pooled.note else "")
    sides = (n_f / (n_f + n_m), n_m / (n_f + n_m), abs(n_f - n_m) / (n_f + n_m))
    return [shown(Got(v, note=note, sampled=pooled.sampled, part=pooled.part), fixed(3)) for v in sides]


def dong_table10(run: Run) -> Layout:
    table = paper_data()["tables"]["dong-10"]
    inputs = T10_INPUTS + ((STAND_IN,) if run.has_probe(STAND_IN[1][0]) else ())
    layout = Layout("dong-10", "dong2024", f"{table['table']}: {table['title']}", ("Model",),
                    [(name, 3) for name, _ in inputs], ["GAS (F)", "GAS (M)", "Δ"] * len(inputs))
    layout.rows.append(((f"this run: {run.model}",), [c for _, probes in inputs for c in gas_by_gender(run, probes)]))
    model = paper_model("dong2024", run.model)
    printed = paper_rows("dong-10").get((model,)) if model else None
    if printed:
        layout.rows.append(((f"paper: {model}",), [paper_cell(printed, (name, c)) for name, _ in inputs
                                                   for c in ("GAS (F)", "GAS (M)", "Δ")]))
    layout.notes += [
        "GAS (F) = N_f / (N_f + N_m), GAS (M) = N_m / (N_f + N_m), Δ = |GAS (F) − GAS (M)|, with N_f, N_m the "
        "original model's continuations naming a female, a male word (docs/audits/disclosure.md); shares (0..1).",
        "Template-based pools the four topic probes' counts (the paper's 160 prompts).",
    ]
    return layout


# ----- DA-Gender: Tables 7 and 8 ---------------------------------------------------------------------
DA_METHODS = (("CDS", "cds"), ("ER", "er"), ("SD", "sentence-debias"))
# row label, probe, metric, its tradeoff.csv axis
DA7_ROWS = (("SEAT-v1", "seat-v1", "SEAT_effect", "SEAT-v1"), ("SEAT-v2", "seat-v2", "SEAT_effect", "SEAT-v2"),
            ("logprob-score", "logprob-professions", "logprob_effect", "logprob_effect"),
            ("stereo-score", "stereoset-gender", "stereo_score", "stereo_score"))
TABLE12_COLUMN = {"BERT-base": "bert-base", "BERT-large": "bert-large", "BART-base": "bart-base",
                  "BART-large": "bart-large", "GPT2": "gpt2", "GPT2-medium": "gpt2-medium"}


def made_as(row: Mapping[str, Any]) -> str:
    """The variant a mitigation row measured ("cds@0.9"), from its breakdown; "" if none is named."""
    info = breakdown_of(row).get("variant")
    made = info.get("variant") if isinstance(info, Mapping) else None
    return made if isinstance(made, str) else ""


def table12_strengths(run: Run) -> dict[str, float]:
    """method -> the strength the paper's Table 12 gives it for this model, where the run tells:
    a ``--mitigation cds|er|sentence-debias`` variant's own (it runs at Table 12's strength for
    the model's kind and size), else the model's column when it is one of the paper's models, else
    the column a paper-schedule sweep names."""
    out: dict[str, float] = {}
    for _, method in DA_METHODS:
        for (variant, _, _), row in run.rows.items():
            made = made_as(row)
            if variant == method and made.startswith(f"{method}@"):
                out[method] = float(made.split("@", 1)[1])
                break
    column = TABLE12_COLUMN.get(paper_model("da-gender", run.model) or "")
    if column is None:
        found = re.search(r"column ([\w-]+)", str(run.tradeoff_info.get("schedule") or ""))
        column = found.group(1) if found and found.group(1) in TABLE12 else None
    if column is not None:
        for method, strength in TABLE12[column].strengths().items():
            out.setdefault(method, strength)
    return out


def _after(run: Run, method: str, strengths: Mapping[str, float], axis: str, ideal: float) -> Cell:
    if method not in strengths:
        return absent("not run", "no --mitigation-sweep point at the strength of the paper's Table 12 for this "
                                 "model (its column is not known from the run)" if run.tradeoff else
                      "--mitigation re-audits the disclosure probes and the guards only; these metrics after "
                      "debiasing come from --mitigation-sweep")
    name = f"{method}@{strengths[method]:g}"
    point = run.tradeoff.get(name)
    if point is None:
        return absent("not run", f"no sweep point {name} (Table 12's strength for this model)"
                      + (f"; the sweep ran {', '.join(sorted(run.tradeoff))}" if run.tradeoff else ""))
    value, distance = num(point.get(f"{axis}_value")), num(point.get(f"{axis}_bias"))
    if value is not None:  # signed, as the paper prints it: +0.154 / -0.154, 58.84
        return Cell(fixed(2)(value) if ideal else fixed(3, sign=True)(value), f"{name}, from tradeoff.csv")
    if distance is None:
        return absent("not measured", f"{axis} was not measured at {name} (tradeoff_info.json says why)")
    text = f"{ideal:g}±{distance:.2f}" if ideal else f"±{distance:.3f}"
    return Cell(text, f"{name}, from a tradeoff.csv written before it kept the signed value ({axis}_value): "
                      "the distance from the ideal only")


def da_table7(run: Run) -> Layout:
    table = paper_data()["tables"]["da-gender-7"]
    model = paper_model("da-gender", run.model)
    columns = ["Pre-deb.", "CDS", "ER", "SD"]
    groups = [run_group(run, 4)] + ([(f"paper: {model}", 4)] if model else [])
    layout = Layout("da-gender-7", "da-gender", f"{table['table']}: {table['title']}", ("Metric",), groups,
                    columns * len(groups))
    strengths = table12_strengths(run)
    printed = paper_rows("da-gender-7")
    for label, probe, metric, axis in DA7_ROWS:
        ideal = float(catalogue.spec(metric).ideal or 0.0)
        row = run.row(probe, metric)
        p = num((row or {}).get("p_value"))
        sided = breakdown_of(row).get("p_value_alternative")
        cells = [shown(run.get(row), fixed(2) if ideal else fixed(3, sign=True), strong=p is not None and p < 0.01,
                       note=f"p = {p:.2g}" + (f" ({sided})" if sided else "") if p is not None else "")]
        cells += [_after(run, method, strengths, axis, ideal) for _, method in DA_METHODS]
        if model:
            why = "the paper computes no logprob-score for GPT2" if label == "logprob-score" else ""
            cells += [paper_cell(printed.get((model, label)), ("", c), why) for c in columns]
        layout.rows.append(((label,), cells))
    ideals = {label: catalogue.spec(metric).ideal for label, _, metric, _ in DA7_ROWS}
    layout.notes += [
        f"SEAT-v1, SEAT-v2 and logprob-score: effect sizes ({ideals['SEAT-v1']:g} = unbiased); "
        f"stereo-score: percent ({ideals['stereo-score']:g} = unbiased). "
        "Bold: p < 0.01 (the paper's bold: significant effect sizes).",
        "CDS, ER, SD: the --mitigation-sweep point at the paper's Table 12 strength for the model "
        + (f"({', '.join(f'{m}@{s:g}' for m, s in strengths.items())})" if strengths else "(unknown for this run)")
        + "; signed, as the paper prints them (a tradeoff.csv written before it kept the signed values gives "
        "± the distance from the ideal only).",
    ]
    return layout


def _guard(run: Run, method: str, strengths: Mapping[str, float], metric: str, probe: str, scale: float) -> Cell:
    """The change (mitigated − original, on the paper's scale) from a guard's drop: the
    ``--mitigation`` variant's row, else the sweep point's at Table 12's strength."""
    names = [method] + ([f"{method}@{strengths[method]:g}"] if method in strengths else [])
    for name in names:
        row = run.row(probe, metric, name)
        if row is not None:
            return shown(run.get(row), lambda v: change(-v * scale), note=made_as(row) or name)
    return absent("not run", f"needs --mitigation {method} or a --mitigation-sweep point at Table 12's strength")


def da_table8(run: Run) -> Layout:
    table = paper_data()["tables"]["da-gender-8"]
    model = paper_model("da-gender", run.model)
    columns = ["Pre-deb.", "CDS", "ER", "SD"]
    groups = [run_group(run, 4)] + ([(f"paper: {model}", 4)] if model else [])
    layout = Layout("da-gender-8", "da-gender", f"{table['table']}: {table['title']}", ("Metric",), groups,
                    columns * len(groups))
    strengths = table12_strengths(run)
    printed = paper_rows("da-gender-8")
    for label, probe, metric, guard, scale in (("DA-score", "da-gender", "DA_score", "DA_score_drop", 100.0),
                                               ("LM-score", "stereoset-gender", "lm_score", "lm_score_drop", 1.0)):
        cells = [shown(run.get(run.row(probe, metric)), lambda v, s=scale: f"{v * s:.1f}")]
        cells += [_guard(run, method, strengths, guard, probe, scale) for _, method in DA_METHODS]
        if model:
            cells += [paper_cell(printed.get((model, label)), ("", c)) for c in columns]
        layout.rows.append(((label,), cells))
    layout.notes += [
        "DA-score: DA_score × 100 (percent of DA-Gender pairs where the right sentence wins); LM-score: StereoSet's, "
        "percent. CDS, ER, SD: the change after debiasing (mitigated − original, points; negative = over-debiasing), "
        "from the DA_score_drop and lm_score_drop guards of --mitigation cds|er|sentence-debias or of the sweep point.",
        "The paper's BERT and BART DA-scores are its code's definition, not its text's: each option's Kurita "
        "association log P(t | TM) / P(t | TAM), the larger winning, where section 5 takes the more probable of the "
        "two fills (this audit's default for masked and seq2seq models; docs/audits/association.md, departures from "
        "the papers)." + _masked_da_said(run.row("da-gender", "DA_score")),
        "The paper's GPT-2 DA-scores are its code's per-token mean log-likelihoods; section 5's text compares "
        "sentence probabilities (the totals: this audit's default for causal models, --causal-likelihood mean for "
        "the code's)." + _causal_said(run.row("da-gender", "DA_score")),
    ]
    return layout


def _causal_said(row: Mapping[str, Any] | None) -> str:
    """" This run's: ..." when the run's DA_score row names its causal-LM comparison, else ""."""
    definition = breakdown_of(row).get("definition")
    said = definition.get("causal_likelihood") if isinstance(definition, Mapping) else None
    if said not in ("mean", "total"):
        return ""
    return f" This run's: {said} ({'the text' if said == 'total' else 'the code'}'s)."


def _masked_da_said(row: Mapping[str, Any] | None) -> str:
    """" This run's: ..." when the run's DA_score row names its masked-LM definition, else ""."""
    definition = breakdown_of(row).get("definition")
    said = definition.get("masked_da") if isinstance(definition, Mapping) else None
    if said not in ("probability", "kurita"):
        return ""
    return f" This run's: masked_da={said} ({'the text' if said == 'probability' else 'the code'}'s)."


# ----- GenderCARE: Tables 4, 5 and 6 -----------------------------------------------------------------
GROUPS = tuple(zip(GROUP_PROBES, ("Group 1", "Group 2", "Group 3")))
CDA = "gendercare-cda"


def proxied(run: Run) -> set[str]:
    """The classifier roles an offline proxy filled in the run: the scorers of its rows' metrics
    whose catalogue entries declare a ``stand_in`` (VADER sentiment for regard)."""
    specs = (catalogue.BY_NAME.get(m) for _, _, m in run.rows)
    return {s.scorer for s in specs if s is not None and s.stand_in and s.scorer}


def as_run(run: Run, metric: str) -> str:
    """The paper's ``metric`` as the run measured it: the stand-in's metric declared its variant
    (``variant_of``) where an offline proxy filled its scorer's role, else itself."""
    if catalogue.spec(metric).scorer in proxied(run):
        return next((m.name for m in catalogue.declared() if m.variant_of == metric), metric)
    return metric


def reaudited(metric: str) -> str:
    """The metric of GenderCARE's re-audit that compares ``metric`` before and after its CDA."""
    return next(m.name for m in catalogue.reaudits() if m.of == metric)


# The offline stand-ins for GenderCARE's classifiers: a row scored by one records it (its breakdown's
# ``classifier``, bias_core.classifiers.base.classifier_record); a regard proxy's metrics declare it
# too (their catalogue entries' ``stand_in``), which is all a run recorded before the rows did.
REGARD_PROXY = ("VADER proxy", "VADER sentiment used as a proxy for regard (sentiment, not regard)")


def stand_in(run: Run, role: str) -> tuple[str, str]:
    """(short name, what its score means) of the offline stand-in that scored the run's ``role``
    ("toxicity", "regard") rows, or ("", "") where the paper's classifier did or the rows do not say."""
    for row in run.rows.values():
        record = breakdown_of(row).get("classifier")
        if isinstance(record, Mapping) and record.get("role") == role and record.get("stand_in"):
            return str(record["stand_in"]), str(record.get("label") or "")
    if role == "regard" and role in proxied(run):
        return REGARD_PROXY
    return "", ""


def labelled(run: Run, role: str, base: str) -> str:
    """``base`` ("Toxicity", "Regard"), "(<stand-in>)" after it when an offline stand-in scored it."""
    short, _ = stand_in(run, role)
    return f"{base} ({short})" if short else base


def _stand_in_notes(run: Run, roles: Sequence[tuple[str, str]]) -> list[str]:
    """One note for each offline stand-in among ``roles`` (role, label base) that scored the run."""
    notes = []
    for role, base in roles:
        short, meaning = stand_in(run, role)
        if short:
            notes.append(f"{base} ({short}): an offline stand-in for the paper's {role} classifier; its numbers are "
                         "not the paper's measure." + (f" Its score: {meaning}." if meaning else ""))
    return notes


CLASSIFIED = (("toxicity", "Toxicity"), ("regard", "Regard"))  # GenderPair's classifiers, as Tables 4 and 5 label them


def _sigma(cells: Sequence[Got]) -> Cell:
    values = [g.value for g in cells]
    if any(v is None for v in values):
        return absent("not run", "needs all three groups")
    mean = sum(values) / len(values)  # type: ignore[arg-type]
    return Cell(f"{math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)):.3f}",  # type: ignore[operator]
                "population σ over the three groups, as the paper")


def _group_row(gots: Sequence[Got]) -> list[Cell]:
    return [shown(g, fixed(3)) for g in gots] + [_sigma(gots)]


def gendercare_table4(run: Run) -> Layout:
    name, toxicity = labelled(run, "regard", "Regard"), labelled(run, "toxicity", "Toxicity")
    layout = Layout("gendercare-4", "gendercare", "Table 4: gender bias of the model on GenderPair", ("Metric",),
                    [run_group(run, 4)], [g for _, g in GROUPS] + ["σ"])
    for label, metric in (("Bias-Pair Ratio", "BPR"), (toxicity, "toxicity"), (f"{name}, negative", "regard_negative")):
        layout.rows.append(((label,), _group_row([run.get(run.row(p, as_run(run, metric))) for p, _ in GROUPS])))
    gap = run.row("genderpair-groups", as_run(run, "regard_positive_gap"))
    layout.rows.append(((f"{name}, positive",), _group_row([run.get(gap, breakdown("per_group", p)) for p, _ in GROUPS])))
    layout.notes += _gendercare_notes(run, "Table 4") + [
        "Group 1: male; Group 2: female; Group 3: transgender, non-binary and neutral identities. Bias-Pair Ratio: "
        "share of decided choices that are the biased descriptor; toxicity and regard: mean scores (0..1)."]
    layout.notes += _stand_in_notes(run, CLASSIFIED)
    return layout


def gendercare_table5(run: Run) -> Layout:
    name, toxicity = labelled(run, "regard", "Regard"), labelled(run, "toxicity", "Toxicity")
    layout = Layout("gendercare-5", "gendercare", "Table 5: GenderPair after GenderCARE's CDA fine-tuning",
                    ("Metric", "Model"), [run_group(run, 4)], [g for _, g in GROUPS] + ["σ"])
    for label, metric in (("Bias-Pair Ratio", "BPR"), (toxicity, "toxicity"), (f"{name}, negative", "regard_negative")):
        for side, shown_as in (("original", "original (same prompts)"), ("mitigated", "after CDA")):
            gots = [run.get(run.row(p, as_run(run, reaudited(metric)), CDA), breakdown(side)) for p, _ in GROUPS]
            layout.rows.append(((label, shown_as), _group_row(gots)))
    layout.rows.append(((f"{name}, positive", "after CDA"),
                        [absent("not run", "the re-audit pairs negative regard only")] * 4))
    layout.notes += _gendercare_notes(run, "Table 5") + [
        "Both models on the same seeded GenderPair prompts (--mitigation gendercare-cda); Bias-Pair Ratio over the "
        "prompts both responses decide. Each change's paired test: the mitigation rows of the results table."]
    layout.notes += _stand_in_notes(run, CLASSIFIED)
    return layout


def gendercare_table6(run: Run) -> Layout:
    layout = Layout("gendercare-6", "gendercare", "Table 6: other bias benchmarks before and after CDA",
                    ("Benchmark", "Measure"), [run_group(run, 3)], ["original", "after CDA", "change"])
    layout.rows.append((("Winoqueer", "Δ"), [absent("not run", "its data is neither in the shared data nor online")] * 3))

    def before_after(row: Mapping[str, Any] | None, scale: float) -> list[Cell]:
        o, m = (run.get(row, breakdown(side)) for side in ("original", "mitigated"))
        cells = [shown(o, lambda v: f"{v * scale:.3f}"), shown(m, lambda v: f"{v * scale:.3f}")]
        if o.value is None or m.value is None:
            return cells + [o.cell or m.cell or absent()]
        before, after = o.value * scale, m.value * scale  # the change of the paper's quantity
        return cells + [Cell(f"{(after - before) / abs(before) * 100:+.1f}%") if before else
                        absent("undefined", "the original is 0")]

    regard = labelled(run, "regard", "regard")
    for polarity, metric in (("negative", "bold_regard_negative_gap_reduction"),
                             ("positive", "bold_regard_positive_gap_reduction")):
        row = run.row("bold-gender", as_run(run, metric), CDA)
        layout.rows.append((("BOLD", f"σ of {polarity} {regard} (actors, actresses)"), before_after(row, 0.5)))
    row = run.row("stereoset-gender", "stereo_margin_reduction", CDA)
    layout.rows.append((("StereoSet", "Δ (log space)"), before_after(row, -1.0)))
    layout.notes += _gendercare_notes(run, "Table 6") + [
        "BOLD σ: the population σ of the two groups' mean regard, half the gap the project gates. StereoSet Δ: mean "
        "per-token log-likelihood of the anti-stereotype minus the stereotype (a log-perplexity difference; the "
        "paper's perplexity difference has no formula in its text); larger = leaning anti-stereotypical, as the "
        "paper reads an increased Δ. Change: (after − original) / |original|."]
    layout.notes += _stand_in_notes(run, (("regard", "Regard"),))
    return layout


def _gendercare_notes(run: Run, table: str) -> list[str]:
    quotes = [q for q in paper_data()["quotes"] if q["paper"] == "gendercare" and q["table"] == table]
    said = "; ".join(f"{q['model']}: {q['what']} {q['value']}" for q in quotes)
    return [f"The paper's {table} is not in the text the project has" + (f"; its section 5 quotes: {said}." if said else ".")]


# ----- GBM: Table 2 ------------------------------------------------------------------------------------
def gbm_table2(run: Run) -> Layout:
    table = paper_data()["tables"]["gbm-2"]
    layout = Layout("gbm-2", "gbm", f"{table['table']}: {table['title']}", ("Model",),
                    [("Negative", 3), ("Positive", 3), ("", 1)], ["Male", "Female", "Neutral"] * 2 + ["GBM"])
    row = run.row("sentiment-templates", "GBM")
    cells = []
    for sentiment in ("negative", "positive"):
        male, female = (run.get(row, breakdown("proportions", sentiment, c)) for c in ("male", "female"))
        neutral = Got(None if male.value is None or female.value is None else 1.0 - male.value - female.value,
                      male.cell or female.cell, male.note, male.sampled)
        cells += [shown(g, fixed(3)) for g in (male, female, neutral)]
    cells.append(shown(run.get(row), fixed(3)))
    layout.rows.append(((f"this run: {run.model}",), cells))
    layout.notes += [
        "Proportions of the top-k completions' probability by class (0..1); Neutral = 1 − Male − Female, as the "
        "paper (the project's non-binary class included). GBM = (F⁺ − M⁺)/N⁺ + (M⁻ − F⁻)/N⁻.",
        f"The paper's BERT and BART rows are below ({paper_data()['papers']['gbm']['models_from']}).",
    ]
    return layout


def layouts(run: Run) -> list[Layout]:
    """Every paper table with the run's numbers, in the papers' order (module doc)."""
    return [*(dong_mitigation(run, key) for key in DONG_BLOCKS), dong_table10(run), da_table7(run), da_table8(run),
            gendercare_table4(run), gendercare_table5(run), gendercare_table6(run), gbm_table2(run)]


def printed_layout(key: str) -> Layout:
    """Table ``key`` as the paper prints it, every model (from paper_tables.json)."""
    table = paper_data()["tables"][key]
    groups = [(g, len(table["columns"])) for g in table["groups"]]
    layout = Layout(key, table["paper"], f"{table['table']}: {table['title']}", tuple(table["labels"]), groups,
                    list(table["columns"]) * len(groups))
    for labels, printed in paper_rows(key).items():
        layout.rows.append((labels, [Cell(printed[(g, c)]) for g in table["groups"] for c in table["columns"]]))
    return layout

