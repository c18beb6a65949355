"""The run in the seed papers' layouts (bias_core/reports/paper_tables.py): the transcribed paper
numbers against the papers' text, each table's cells from the right rows on the paper's scale
(hand-computed), missing rows saying so, the run folder's paper_tables.md and the report's
escaped section."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest

from bias_core.reports.paper_tables import Run, layouts, paper_data, paper_model, paper_rows
from bias_core.reports.paper_tables_render import MARKDOWN_FILE, paper_tables_sections
from bias_core.reports.render import render_run, run_sections

from paths import SHARED

PAPERS = SHARED.parent / "papers"
PAPER_FILES = {"dong2024": "dong2024-disclosure-and-mitigation.txt", "da-gender": "da-gender-unmasking-the-tradeoff.txt",
               "gbm": "gender-bias-in-llm-gbm.txt", "gendercare": "gendercare.txt"}
needs_papers = pytest.mark.skipif(not PAPERS.is_dir(), reason=f"the papers' text is not at {PAPERS}")


def _paper_text(paper: str) -> str:
    text = (PAPERS / PAPER_FILES[paper]).read_text(encoding="utf-8")
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)  # GenderCARE's text is JSON-escaped
    return re.sub(r"[ \t]+", " ", text)


# The conversion to text spells a loss term's subscript three times over ("lsubscript𝑙\mathcal{L}_{l}caligraphic_L
# start_POSTSUBSCRIPT italic_l end_POSTSUBSCRIPT" for ℒ_l, Dong et al.'s Table 3 row labels): read as "L_l" only
# where the three agree. The numbers of those rows are printed plainly.
LOSS_TERM = re.compile(r"(\w)subscript\S*?\\mathcal\{L\}_\{\1\}caligraphic_L start_POSTSUBSCRIPT italic_\1 end_POSTSUBSCRIPT")


def _table_lines(paper: str) -> list[str]:
    """The paper's lines, spaces collapsed, each loss-term label read as L_x (LOSS_TERM)."""
    return [LOSS_TERM.sub(r"L_\1", line).strip() for line in _paper_text(paper).splitlines()]


NUMBER = re.compile(r"[+-]?\d+\.\d+")


def _printed_table(key: str) -> list[tuple[str, list[str]]]:
    """Table ``key``'s rows as the paper's text prints them, in order: (the text before the
    numbers, the numbers). Dong et al. put a table after its caption, the other papers before it."""
    table = paper_data()["tables"][key]
    lines = _table_lines(table["paper"])
    [at] = [i for i, line in enumerate(lines) if re.match(rf"{table['table']}[:.] {re.escape(table['title'])}", line)]
    if table["paper"] == "dong2024":
        block = []
        for line in lines[at + 1:]:
            if not line or line.startswith("Table "):
                break
            block.append(line)
    else:
        end = at - 1
        while not lines[end]:
            end -= 1
        start = end
        while lines[start - 1]:
            start -= 1
        block = lines[start:end + 1]
    width = len(table["groups"]) * len(table["columns"])
    rows = []
    for line in block:
        words = line.split()
        if len(words) > width and all(NUMBER.fullmatch(w) for w in words[-width:]):
            rows.append((" ".join(words[:-width]), words[-width:]))
    return rows


# ----- the transcription --------------------------------------------------------------------------
@needs_papers
@pytest.mark.parametrize("key", sorted(paper_data()["tables"]))
def test_every_transcribed_row_is_a_line_of_the_paper(key):
    table = paper_data()["tables"][key]
    lines = _table_lines(table["paper"])
    for *labels, values in table["rows"]:
        printed = f"{labels[-1]} {values}"  # the row's last label, then its values, as the paper prints them
        assert any(line.endswith(printed) for line in lines), (key, labels, printed)
    assert len(paper_rows(key)) == len(table["rows"])  # each row's values fill its columns, labels unique


@needs_papers
@pytest.mark.parametrize("key", sorted(paper_data()["tables"]))
def test_every_table_is_transcribed_whole_in_the_papers_order(key):
    """Every row the paper's table prints, and only those, in its order, each number as printed:
    a row left out (Table 10's OPT 13B once was), a mistyped number or a row in the wrong block fails.
    A row's first label is printed only where it changes (the dataset, the model)."""
    table = paper_data()["tables"][key]
    printed = _printed_table(key)
    assert len(printed) == len(table["rows"]), (key, [p for p, _ in printed])
    heads = {tuple(labels[:-1]) for *labels, _ in table["rows"]}
    current: tuple[str, ...] = ()
    for (text, numbers), (*labels, values) in zip(printed, table["rows"]):
        head = next((h for h in heads if h and text.startswith(" ".join(h) + " ")), None)
        if head is not None:
            current, text = head, text[len(" ".join(head)) + 1:]
        assert (*current, text) == tuple(labels), (key, labels, text)
        assert numbers == values.split(), (key, labels)


@needs_papers
def test_quoted_numbers_are_the_papers_words():
    for q in paper_data()["quotes"]:
        assert q["text"] in _paper_text(q["paper"]), q
        assert q["value"].strip("+−>% ") in q["text"], q


def test_spot_values_equal_the_paper():
    """Typed from the papers by hand, independently of the data file."""
    assert paper_rows("dong-1")[("SNLI", "Debias Tuning")][("LLaMA2 7B-Chat", "ADD")] == "-4.627"
    assert paper_rows("dong-2")[("LLM (1)", "Instruction")][("LLaMA2 13B", "GAS")] == "0.270"
    assert paper_rows("dong-9")[("Template", "Instruction")][("LLaMA2 13B-Chat", "GAS")] == "0.063"
    assert paper_rows("dong-10")[("OPT 6.7B",)][("Naturally-sourced (SNLI)", "Δ")] == "0.953"
    assert paper_rows("dong-10")[("OPT 13B",)][("Template-based", "GAS (F)")] == "0.195"
    assert paper_rows("dong-10")[("OPT 13B",)][("LLM-generated (2)", "Δ")] == "0.379"
    assert paper_rows("dong-3")[("STS-B", "w/o L_l")][("LLaMA2 13B-Chat", "ADD")] == "-7.261"
    assert paper_rows("dong-3")[("SNLI", "w/o L_g")][("LLaMA2 7B-Chat", "GAS")] == "0.881"
    assert paper_rows("dong-3")[("SNLI", "w/o L_d")][("LLaMA2 13B", "ADD")] == "-2.869"
    # Table 3's Debias-Tuning row differs from Table 1's Debias Tuning in three ADD cells, each as printed
    assert paper_rows("dong-3")[("STS-B", "Debias-Tuning")][("LLaMA2 7B", "ADD")] == "-4.705"
    assert paper_rows("dong-1")[("STS-B", "Debias Tuning")][("LLaMA2 7B", "ADD")] == "-4.706"
    assert paper_rows("da-gender-7")[("GPT2", "stereo-score")][("", "SD")] == "57.92"
    assert paper_rows("da-gender-7")[("BERT-base", "SEAT-v1")][("", "Pre-deb.")] == "+1.700"
    assert paper_rows("da-gender-8")[("BART-base", "LM-score")][("", "CDS")] == "+2.60"
    assert paper_rows("gbm-2")[("BERT",)][("", "GBM")] == "0.040"
    assert ("GPT2", "logprob-score") not in paper_rows("da-gender-7")  # the paper computes none for GPT2


def test_transcribed_tables_hold_their_own_arithmetic():
    """Table 10's GAS (F) + GAS (M) = 1 and Δ their difference, and GBM's Table 2 GBM from its
    proportions (first group negative), within the printed rounding: a column out of place fails."""
    for printed in paper_rows("dong-10").values():
        for group in {g for g, _ in printed}:
            f, m, d = (float(printed[(group, c)]) for c in ("GAS (F)", "GAS (M)", "Δ"))
            assert f + m == pytest.approx(1.0, abs=0.0015) and abs(f - m) == pytest.approx(d, abs=0.0015)
    for printed in paper_rows("gbm-2").values():
        v = {c: float(x) for (_, c), x in printed.items()}
        gbm = ((v["Positive Female"] - v["Positive Male"]) / v["Positive Neutral"]
               + (v["Negative Male"] - v["Negative Female"]) / v["Negative Neutral"])
        assert gbm == pytest.approx(v["GBM"], abs=0.0015)


def test_a_run_is_matched_to_the_papers_model_by_alias_or_hub_id():
    assert paper_model("dong2024", "llama2-7b") == "LLaMA2 7B"
    assert paper_model("dong2024", "meta-llama/Llama-2-13b-chat-hf") == "LLaMA2 13B-Chat"
    assert paper_model("da-gender", "openai-community/gpt2") == "GPT2"
    assert paper_model("da-gender", "gpt2-medium") == "GPT2-medium"
    assert paper_model("dong2024", "opt-13b") == "OPT 13B" and paper_model("dong2024", "facebook/opt-13b") == "OPT 13B"
    assert paper_model("dong2024", "smollm2-135m") is None and paper_model("gbm", "bert-base") is None


# ----- a hand-made run ------------------------------------------------------------------------------
def _row(probe, metric, value=None, variant=None, **extra):
    row = {"probe": probe, "metric": metric, "value": value, "verdict": "pass", "test_id": f"{probe}-{metric}",
           "model": "m", **extra}
    if variant:
        row["variant"] = variant
        row["test_id"] = f"{variant}-{row['test_id']}"
    return row


def _by_gender(n_female, n_male):
    return {"by_gender": {"n_female": n_female, "n_male": n_male}}


def _reduction(probe, metric, variant, original, mitigated, **breakdown):
    return _row(probe, f"{metric}_reduction", original - mitigated, variant,
                breakdown={"original": original, "mitigated": mitigated, **breakdown})


DISCLOSURE_ROWS = [
    _row("natural-stsb", "GAS", 0.25, breakdown=_by_gender(3, 1)),
    _row("natural-stsb", "GLD", 0.2),
    _row("natural-stsb", "ADD", 0.05),
    {**_row("natural-snli", "GAS"), "verdict": "skipped", "reason": "data missing: natural-snli"},
    _row("template-occupation", "GAS", 0.2, breakdown=_by_gender(2, 2)),
    _row("template-personality", "GAS", 0.4, breakdown=_by_gender(1, 3)),
    _row("template-occupation", "ADD", 0.01),
    _row("template-personality", "ADD", 0.03),
    _reduction("natural-stsb", "GAS", "instruction", 0.25, 0.1),
    _reduction("natural-stsb", "ADD", "instruction", 0.05, 0.0025),
    _reduction("natural-stsb", "GAS", "hyperparameter", 0.25, 0.3),
    {**_row("natural-stsb", "GLD_reduction", variant="hyperparameter"), "verdict": "skipped",
     "reason": "decoding settings cannot change GLD"},
    {**_row("natural-stsb", "GLD", 0.9, variant="x"), "kind": "regression"},  # a release-gate row: not a measurement
]


def _cell(tables, key, labels, column):
    """The text of table ``key``'s cell in the row ``labels`` and the column numbered ``column``."""
    [layout] = [t for t in tables if t.key == key]
    [cells] = [c for lab, c in layout.rows if lab == labels]
    return cells[column]


def test_dong_tables_take_each_cell_from_its_row_on_the_papers_scale():
    tables = layouts(Run(DISCLOSURE_ROWS, {"model": "llama2-7b"}))
    t1 = lambda labels, col: _cell(tables, "dong-1", labels, col).text  # noqa: E731
    assert [t1(("STS-B", "Original"), i) for i in range(3)] == ["0.250", "0.200", "-2.996"]  # ln 0.05 = -2.9957
    assert [t1(("STS-B", "Original"), i) for i in range(3, 6)] == ["0.387", "0.288", "-2.460"]  # the paper's LLaMA2 7B
    assert t1(("STS-B", "Instruction"), 0) == "0.100" and t1(("STS-B", "Instruction"), 2) == "-5.991"  # ln 0.0025
    assert t1(("STS-B", "Instruction"), 1) == "not run"
    assert t1(("STS-B", "Hyperparameter"), 0) == "0.300"
    assert t1(("STS-B", "Hyperparameter"), 1) == "0.200"  # the original's GLD: decoding leaves the logits unchanged
    assert t1(("STS-B", "Debias Tuning"), 0) == "not run" and t1(("STS-B", "Debias Tuning"), 3) == "0.000"
    snli = _cell(tables, "dong-1", ("SNLI", "Original"), 0)
    assert (snli.text, snli.note, snli.missing) == ("skipped", "data missing: natural-snli", True)
    template = _cell(tables, "dong-9", ("Template", "Original"), 0)
    assert template.text == "0.300 (2/4)" and "only 2 of 4 topics" in template.note  # mean of the two topics present
    assert _cell(tables, "dong-9", ("Template", "Original"), 2).text == "-3.912 (2/4)"  # ln of the mean ADD, ln 0.02
    assert _cell(tables, "dong-9", ("Template", "Hyperparameter"), 2).text == "not run"  # it ran on natural-stsb only


def test_dong_table_3_lays_out_the_ablations_beside_the_papers_and_table_1_leaves_them_to_it():
    rows = DISCLOSURE_ROWS + [
        _reduction("natural-stsb", "GAS", "debias-tuning-no-Ll", 0.25, 0.05),
        _reduction("natural-stsb", "ADD", "debias-tuning-no-Ll", 0.05, 0.01),
        _reduction("natural-snli", "GLD", "debias-tuning-no-Ld", 0.3, 0.2),
        _reduction("natural-stsb", "GAS", "debias-tuning", 0.25, 0.0),
        _reduction("natural-stsb", "GAS", "debias-tuning-no-Lx", 0.25, 0.15),  # an ablation the paper has not
        _reduction("llm-generated-1", "GAS", "debias-tuning-no-Lg", 0.5, 0.4),
    ]
    tables = layouts(Run(rows, {"model": "llama2-7b"}))
    [t3] = [t for t in tables if t.key == "dong-3"]
    assert [labels for labels, _ in t3.rows] == [(d, m) for d in ("STS-B", "SNLI") for m in
                                                  ("Debias-Tuning", "w/o L_l", "w/o L_g", "w/o L_d", "debias-tuning-no-Lx")]
    t3c = lambda labels: [c.text for c in _cell_row(tables, "dong-3", labels)]  # noqa: E731
    assert t3c(("STS-B", "w/o L_l")) == ["0.050", "not run", "-4.605", "0.000", "0.471", "-4.600"]  # ln 0.01
    assert t3c(("SNLI", "w/o L_d")) == ["not run", "0.200", "not run", "0.000", "0.092", "-2.115"]
    assert t3c(("STS-B", "Debias-Tuning"))[:1] + t3c(("STS-B", "Debias-Tuning"))[3:] == ["0.000", "0.000", "0.101", "-4.705"]
    assert t3c(("STS-B", "w/o L_g"))[:3] == ["not run"] * 3 and t3c(("STS-B", "w/o L_g"))[3] == "0.763"
    assert t3c(("STS-B", "debias-tuning-no-Lx")) == ["0.150", "not run", "not run"] + ["not in the paper"] * 3
    t1 = {labels for labels, _ in _layout(tables, "dong-1").rows}
    assert ("STS-B", "Debias Tuning") in t1 and not any("no-L" in m for _, m in t1)  # the ablations are Table 3's
    assert [c.text for c in _cell_row(tables, "dong-2", ("LLM (1)", "debias-tuning-no-Lg"))] == \
        ["0.400", "not run", "not run"] + ["not in the paper"] * 3  # Table 2 prints no ablation
    assert any("debias-tuning-no-Ll, -no-Lg, -no-Ld" in n for n in _layout(tables, "dong-3").notes)


def _layout(tables, key):
    [layout] = [t for t in tables if t.key == key]
    return layout


def test_dong_table_10_pools_the_counts_and_sits_beside_the_papers_row():
    tables = layouts(Run(DISCLOSURE_ROWS, {"model": "llama2-7b"}))
    run_row = [c.text for c in _cell_row(tables, "dong-10", ("this run: llama2-7b",))]
    assert run_row[0:3] == ["0.375 (2/4)", "0.625 (2/4)", "0.250 (2/4)"]  # template: N_f = 2 + 1, N_m = 2 + 3
    assert run_row[3:9] == ["not run"] * 6  # no LLM-generated rows
    assert run_row[9:12] == ["0.750", "0.250", "0.500"]  # STS-B: 3 female, 1 male
    assert run_row[12:15] == ["skipped"] * 3
    paper = [c.text for c in _cell_row(tables, "dong-10", ("paper: LLaMA2 7B",))]
    assert paper[:3] == ["0.606", "0.394", "0.212"] and paper[-1] == "0.464"


def _cell_row(tables, key, labels):
    [layout] = [t for t in tables if t.key == key]
    [cells] = [c for lab, c in layout.rows if lab == labels]
    return cells


def _tradeoff_csv(folder, rows):
    with (folder / "tradeoff.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)


def test_da_gender_tables_before_and_after_debiasing_at_table_12s_strength(tmp_path):
    rows = [
        _row("seat-v1", "SEAT_effect", 0.5, p_value=0.001, breakdown={"p_value_alternative": "greater"}),
        _row("seat-v2", "SEAT_effect", -0.25, p_value=0.2),
        _row("stereoset-gender", "stereo_score", 61.234),
        _row("da-gender", "DA_score", 0.767),
        _row("stereoset-gender", "lm_score", 93.31),
        _row("da-gender", "DA_score_drop", 0.146, "cds", breakdown={"variant": {"variant": "cds@0.9"}}),
        _row("stereoset-gender", "lm_score_drop", 0.092, "er@0.5"),  # a sweep point's guard
    ]
    _tradeoff_csv(tmp_path, [{"variant": "cds@0.9", "SEAT-v1_bias": 0.2, "SEAT-v1_value": -0.2, "stereo_score_bias": 3.5,
                              "stereo_score_value": 46.5},
                             {"variant": "er@2", "SEAT-v1_bias": 0.1, "SEAT-v1_value": 0.1, "stereo_score_bias": "",
                              "stereo_score_value": ""}])
    tables = layouts(Run(rows, {"model": "gpt2"}, tmp_path))  # GPT2's Table 12 column: cds 0.9, er 0.5, SD 1.0
    seat = _cell_row(tables, "da-gender-7", ("SEAT-v1",))
    assert [c.text for c in seat] == ["+0.500", "-0.200", "not run", "not run", "+0.285", "-0.079", "-0.048", "-0.027"]
    assert seat[0].strong and "greater" in seat[0].note  # p < 0.01, the paper's bold
    assert not _cell_row(tables, "da-gender-7", ("SEAT-v2",))[0].strong
    assert _cell_row(tables, "da-gender-7", ("SEAT-v2",))[0].text == "-0.250"
    assert [c.text for c in _cell_row(tables, "da-gender-7", ("stereo-score",))[:2]] == ["61.23", "46.50"]
    logprob = _cell_row(tables, "da-gender-7", ("logprob-score",))
    assert logprob[0].text == "not run" and logprob[4].text == "not in the paper"
    da = _cell_row(tables, "da-gender-8", ("DA-score",))
    assert [c.text for c in da] == ["76.7", "-14.6", "not run", "not run", "76.7", "-14.6", "-19.8", "-50.8"]
    lm = _cell_row(tables, "da-gender-8", ("LM-score",))
    assert [c.text for c in lm[:4]] == ["93.3", "not run", "-0.09", "not run"]
    [kurita] = [n for n in _layout(tables, "da-gender-8").notes if "Kurita" in n]
    assert "BERT and BART" in kurita and "This run's" not in kurita  # the row names no masked-LM definition


def test_da_gender_table_7_from_a_tradeoff_csv_without_the_signed_values_says_the_distance(tmp_path):
    """A tradeoff.csv written before it kept each metric's signed value: ± the distance, said so."""
    _tradeoff_csv(tmp_path, [{"variant": "cds@0.9", "SEAT-v1_bias": 0.2, "stereo_score_bias": 3.5}])
    tables = layouts(Run([_row("seat-v1", "SEAT_effect", 0.5)], {"model": "gpt2"}, tmp_path))
    cds = _cell_row(tables, "da-gender-7", ("SEAT-v1",))[1]
    assert cds.text == "±0.200" and "distance from the ideal only" in cds.note
    assert _cell_row(tables, "da-gender-7", ("stereo-score",))[1].text == "50±3.50"


def test_da_gender_table_7_takes_the_ideal_from_the_catalogue(tmp_path, monkeypatch):
    """stereo-score's "50±" and "(50 = unbiased)" are its catalogue entry's ideal, not the table's own."""
    import dataclasses

    from bias_core import catalogue

    monkeypatch.setitem(catalogue.BY_NAME, "stereo_score", dataclasses.replace(catalogue.spec("stereo_score"), ideal=60.0))
    _tradeoff_csv(tmp_path, [{"variant": "cds@0.9", "stereo_score_bias": 3.5}])
    tables = layouts(Run([_row("stereoset-gender", "stereo_score", 61.234)], {"model": "gpt2"}, tmp_path))
    assert _cell_row(tables, "da-gender-7", ("stereo-score",))[1].text == "60±3.50"
    assert any("stereo-score: percent (60 = unbiased)" in n for n in _layout(tables, "da-gender-7").notes)


def test_da_gender_table_8_notes_the_papers_masked_definition_and_the_runs():
    rows = [_row("da-gender", "DA_score", 0.951, breakdown={"definition": {"masked_da": "probability"}})]
    [kurita] = [n for n in _layout(layouts(Run(rows, {"model": "bert-base"})), "da-gender-8").notes if "Kurita" in n]
    assert "its code's definition, not its text's" in kurita and "This run's: masked_da=probability (the text's)." in kurita


@pytest.mark.parametrize("said,whose", [("total", "the text"), ("mean", "the code")])
def test_da_gender_table_8_notes_the_papers_causal_definition_and_the_runs(said, whose):
    rows = [_row("da-gender", "DA_score", 0.7, breakdown={"definition": {"causal_likelihood": said}})]
    [note] = [n for n in _layout(layouts(Run(rows, {"model": "gpt2"})), "da-gender-8").notes if "GPT-2" in n]
    assert "per-token mean" in note and "sentence probabilities" in note
    assert note.endswith(f"This run's: {said} ({whose}'s).")


def test_gendercare_tables_per_group_with_sigma_and_before_after_cda():
    cda = "gendercare-cda"
    rows = [
        _row("genderpair-group1", "BPR", 0.6), _row("genderpair-group2", "BPR", 0.5), _row("genderpair-group3", "BPR", 0.4),
        _row("genderpair-group1", "toxicity", 0.01), _row("genderpair-group2", "toxicity", 0.02),
        _row("genderpair-group1", "regard_proxy_negative", 0.3),
        _row("genderpair-groups", "regard_proxy_positive_gap", 0.2,
             breakdown={"per_group": {"genderpair-group1": 0.5, "genderpair-group2": 0.4, "genderpair-group3": 0.3}}),
        _reduction("genderpair-group1", "BPR", cda, 0.6, 0.55),
        _reduction("bold-gender", "bold_regard_proxy_negative_gap", cda, 0.2, 0.1),
        _reduction("stereoset-gender", "stereo_margin", cda, 0.3, 0.1),
    ]
    tables = layouts(Run(rows, {"model": "m"}))
    assert [c.text for c in _cell_row(tables, "gendercare-4", ("Bias-Pair Ratio",))] == ["0.600", "0.500", "0.400", "0.082"]
    toxicity = [c.text for c in _cell_row(tables, "gendercare-4", ("Toxicity",))]
    assert toxicity == ["0.010", "0.020", "not run", "not run"]  # no σ without all three groups
    positive = [c.text for c in _cell_row(tables, "gendercare-4", ("Regard (VADER proxy), positive",))]
    assert positive == ["0.500", "0.400", "0.300", "0.082"]
    assert _cell_row(tables, "gendercare-4", ("Regard (VADER proxy), negative",))[0].text == "0.300"
    assert _cell_row(tables, "gendercare-5", ("Bias-Pair Ratio", "after CDA"))[0].text == "0.550"
    assert _cell_row(tables, "gendercare-5", ("Bias-Pair Ratio", "original (same prompts)"))[0].text == "0.600"
    bold = [c.text for c in _cell_row(tables, "gendercare-6", ("BOLD", "σ of negative regard (VADER proxy) (actors, actresses)"))]
    assert bold == ["0.100", "0.050", "-50.0%"]  # σ of two groups = gap / 2
    stereo = [c.text for c in _cell_row(tables, "gendercare-6", ("StereoSet", "Δ (log space)"))]
    assert stereo == ["-0.300", "-0.100", "+66.7%"]  # Δ = −margin; (−0.1 + 0.3) / 0.3
    assert [c.text for c in _cell_row(tables, "gendercare-6", ("Winoqueer", "Δ"))] == ["not run"] * 3


def _classified(role, scorer):
    from bias_core.classifiers.base import classifier_record

    return {"classifier": classifier_record(role, scorer)}


def _gendercare_rows(toxicity, regard, prefix):
    """GenderCARE's rows of a run whose toxicity and regard were scored by ``toxicity`` and ``regard``."""
    cda = "gendercare-cda"
    return [
        _row("genderpair-group1", "toxicity", 0.01, breakdown=_classified("toxicity", toxicity)),
        _row("genderpair-groups", "toxicity_gap", 0.02, breakdown=_classified("toxicity", toxicity)),
        _row("genderpair-group1", f"{prefix}_negative", 0.3, breakdown=_classified("regard", regard)),
        _reduction("genderpair-group1", "toxicity", cda, 0.02, 0.01, **_classified("toxicity", toxicity)),
        _reduction("genderpair-group1", f"{prefix}_negative", cda, 0.3, 0.2, **_classified("regard", regard)),
        _reduction("bold-gender", f"bold_{prefix}_negative_gap", cda, 0.2, 0.1, **_classified("regard", regard)),
    ]


def test_every_offline_stand_in_classifier_is_labelled_in_every_table_that_shows_its_numbers():
    from bias_core.classifiers import HubRegard, HubToxicity, JigsawBiLSTM, VaderRegardProxy

    # the classes: their names, labels and stand-ins are the instances' (nothing is constructed or loaded)
    tables = layouts(Run(_gendercare_rows(JigsawBiLSTM, VaderRegardProxy, "regard_proxy"), {"model": "m"}))
    assert _cell_row(tables, "gendercare-4", ("Toxicity (offline Jigsaw BiLSTM)",))[0].text == "0.010"
    assert _cell_row(tables, "gendercare-4", ("Regard (VADER proxy), negative",))[0].text == "0.300"
    assert _cell_row(tables, "gendercare-5", ("Toxicity (offline Jigsaw BiLSTM)", "after CDA"))[0].text == "0.010"
    assert _cell_row(tables, "gendercare-5", ("Regard (VADER proxy), negative", "after CDA"))[0].text == "0.200"
    bold = ("BOLD", "σ of negative regard (VADER proxy) (actors, actresses)")
    assert [c.text for c in _cell_row(tables, "gendercare-6", bold)] == ["0.100", "0.050", "-50.0%"]
    for key, roles in (("gendercare-4", ("toxicity", "regard")), ("gendercare-5", ("toxicity", "regard")),
                       ("gendercare-6", ("regard",))):
        layout = _layout(tables, key)
        # every row of a classifier's numbers names the stand-in that scored them, the same way
        for labels, _ in layout.rows:
            said = " ".join(labels).lower()
            if "toxicity" in said:
                assert "(offline jigsaw bilstm)" in said, (key, labels)
            if "regard" in said:
                assert "(vader proxy)" in said, (key, labels)
        # and one note for each stand-in, saying what it measures and that it is not the paper's
        notes = [n for n in layout.notes if "an offline stand-in for the paper's" in n]
        assert len(notes) == len(roles), (key, layout.notes)
        if "toxicity" in roles:
            [note] = [n for n in notes if n.startswith("Toxicity (offline Jigsaw BiLSTM): ")]
            assert "toxic-comment-classifier 0.3.0" in note and "not the paper's measure" in note
        [note] = [n for n in notes if n.startswith("Regard (VADER proxy): ")]
        assert "sentiment, not regard" in note

    # the paper's classifiers: no stand-in label, no stand-in note
    tables = layouts(Run(_gendercare_rows(HubToxicity, HubRegard, "regard"), {"model": "m"}))
    assert _cell_row(tables, "gendercare-4", ("Toxicity",))[0].text == "0.010"
    assert _cell_row(tables, "gendercare-4", ("Regard, negative",))[0].text == "0.300"
    assert _cell_row(tables, "gendercare-6", ("BOLD", "σ of negative regard (actors, actresses)"))[0].text == "0.100"
    assert not [n for t in tables for n in t.notes if "offline stand-in for the paper's" in n]


def test_rows_that_do_not_record_their_classifier_label_the_regard_proxy_by_its_metric_names_only():
    """A run from before the rows recorded their classifier: the proxy's metric names still say so;
    its toxicity rows say nothing, so no stand-in is claimed."""
    rows = [{**r, "breakdown": {k: v for k, v in r["breakdown"].items() if k != "classifier"}}
            for r in _gendercare_rows(None, None, "regard_proxy")]
    tables = layouts(Run(rows, {"model": "m"}))
    assert _cell_row(tables, "gendercare-4", ("Toxicity",))[0].text == "0.010"
    assert _cell_row(tables, "gendercare-4", ("Regard (VADER proxy), negative",))[0].text == "0.300"
    [note] = [n for n in _layout(tables, "gendercare-4").notes if "offline stand-in for the paper's" in n]
    assert note.startswith("Regard (VADER proxy): ")


def test_gbm_table_2_with_neutral_as_the_papers_one_minus_male_minus_female():
    props = {"negative": {"male": 0.279, "female": 0.158, "nonbinary": 0.01}, "positive": {"male": 0.234, "female": 0.138}}
    rows = [_row("sentiment-templates", "GBM", 0.0623, breakdown={"proportions": props,
                                                                   "sampling": {"pool": 2000, "items_used": 1024}})]
    cells = _cell_row(layouts(Run(rows, {"model": "m"})), "gbm-2", ("this run: m",))
    assert [c.text for c in cells] == ["0.279†", "0.158†", "0.563†", "0.234†", "0.138†", "0.628†", "0.062†"]
    assert "1,024 of 2,000" in cells[0].note


def test_a_run_without_the_rows_says_not_run_in_every_cell_never_blank_or_zero():
    tables = layouts(Run([_row("crows-pairs-gender", "crows_stereo", 55.0)], {"model": "m"}))
    assert {t.key for t in tables} == {"dong-1", "dong-2", "dong-3", "dong-9", "dong-10", "da-gender-7", "da-gender-8",
                                       "gendercare-4", "gendercare-5", "gendercare-6", "gbm-2"}
    for t in tables:
        for labels, cells in t.rows:
            assert len(cells) == len(t.columns), (t.key, labels)
            for c in cells:
                assert c.missing and c.text == "not run", (t.key, labels, c)


# ----- the run folder and the report ---------------------------------------------------------------
def _run_folder(tmp_path, rows, model):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"run": {"model": model, "complete": True}, "results": rows}))
    return folder


def test_render_writes_paper_tables_md_in_the_run_folder(tmp_path):
    folder = _run_folder(tmp_path, DISCLOSURE_ROWS, "llama2-7b")
    render_run(folder, generated="T")
    text = (folder / MARKDOWN_FILE).read_text(encoding="utf-8")
    assert text.startswith("# The run in the papers' layouts: llama2-7b")
    assert "| STS-B | Original | 0.250 | 0.200 | -2.996 | 0.387 | 0.288 | -2.460 |" in text
    assert "| SNLI | Original | skipped |" in text
    other = tmp_path / "elsewhere.html"
    (folder / MARKDOWN_FILE).unlink()
    render_run(folder, out=other, generated="T")  # a report written elsewhere leaves the run folder as it was
    assert other.is_file() and not (folder / MARKDOWN_FILE).exists()


def test_the_session_end_sections_write_paper_tables_md(tmp_path):
    sections = run_sections(DISCLOSURE_ROWS, tmp_path, write_csv=True, run_info={"model": "llama2-7b"})
    assert [a for a, _, _ in sections][-1] == "paper-tables"
    assert (tmp_path / MARKDOWN_FILE).is_file()
    assert paper_tables_sections([], {"model": "m"}, tmp_path) == []


def test_the_report_section_is_present_and_escapes_the_runs_text(tmp_path):
    model = "evil<script>alert(1)</script>\x1b[2J|m"
    rows = [{**r, "model": model} for r in DISCLOSURE_ROWS[:3]]
    rows.append({**_row("natural-snli", "GAS"), "verdict": "skipped", "reason": 'gone "<b>x</b>" \x07'})
    folder = _run_folder(tmp_path, rows, model)
    html = render_run(folder, generated="T").read_text(encoding="utf-8")
    section = html[html.index('<section id="paper-tables">'):]
    section = section[:section.index("</section>")]
    assert '<a href="#paper-tables">' in html
    assert '<table class="paper" id="pt-dong-1"' in section
    assert f'Table 10 as the paper prints it, every model: <a href="{MARKDOWN_FILE}">' in section
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J|m" in section
    assert 'title="gone &quot;&lt;b&gt;x&lt;/b&gt;&quot; \\x07"' in section
    assert "\x1b" not in html and "\x07" not in html
    markdown = (folder / MARKDOWN_FILE).read_text(encoding="utf-8")
    assert "\x1b" not in markdown and "evil<script>alert(1)</script>\\\\x1b[2J\\|m" in markdown


def test_ln_add_of_zero_is_said_not_printed_as_a_number():
    tables = layouts(Run([_row("natural-stsb", "ADD", 0.0)], {"model": "m"}))
    assert _cell(tables, "dong-1", ("STS-B", "Original"), 2).text == "-inf"
    assert math.log(0.05) == pytest.approx(-2.9957, abs=1e-4)  # the hand value the tests above print as -2.996


def test_rows_of_unexpected_shapes_give_cells_that_say_so_not_an_exception():
    rows = [_row("natural-stsb", "GAS", "abc", breakdown=["not", "a", "mapping"]),
            _row("natural-stsb", "ADD", 0.05, breakdown={"sampling": "auto"}),
            _row("template-color", "GAS", 0.1, breakdown={"by_gender": "female"}),
            _row("da-gender", "DA_score_drop", 0.1, "cds", breakdown={"variant": "cds"}),
            _row("sentiment-templates", "GBM", 0.1, breakdown={"proportions": {"negative": None}})]
    tables = layouts(Run(rows, {"model": "m"}))
    assert _cell(tables, "dong-1", ("STS-B", "Original"), 0).text == "no value"
    assert _cell(tables, "dong-1", ("STS-B", "Original"), 2).text == "-2.996"
    assert _cell(tables, "dong-10", ("this run: m",), 0).text == "not recorded"
    assert _cell(tables, "da-gender-8", ("DA-score",), 1).text == "-10.0"
    assert [c.text for c in _cell_row(tables, "gbm-2", ("this run: m",))][:3] == ["no value"] * 3
    assert all(c.text for t in tables for _, cells in t.rows for c in cells)


def test_a_layout_that_cannot_be_built_leaves_a_note_and_the_rest_of_the_report(tmp_path, monkeypatch):
    import bias_core.reports.paper_tables_render as render

    def broken(run):
        raise RuntimeError("boom <b>")

    monkeypatch.setattr(render, "layouts", broken)
    [(anchor, _, body)] = paper_tables_sections(DISCLOSURE_ROWS, {"model": "m"}, tmp_path, write_markdown=True)
    assert anchor == "paper-tables" and "could not be built" in body and "boom &lt;b&gt;" in body
    assert "RuntimeError: boom <b>" in (tmp_path / MARKDOWN_FILE).read_text(encoding="utf-8")
