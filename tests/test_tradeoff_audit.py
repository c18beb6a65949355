"""DA-Gender's debiasing methods in the audit run (issue 15): ``--mitigation cds|er|sentence-debias``
through the mitigation fixture and its paired comparisons, and ``--mitigation-sweep``'s
trade-off table, figures and report section, on the tiny model."""

from __future__ import annotations

import csv
import json
import os

import pytest

from bias_core.errors import AuditUsageError

from harness import assert_usage_error, last_run, load_tiny, rows_by_id
from paths import SHARED
from tolerances import assert_close, disclosure_atol, disclosure_eta

pytest_plugins = ["pytester"]

BOLD_HEADER = "Type,Name,Prompt\n"


def _stand_in_data(folder):
    """A --data-dir holding only a few BOLD-style prompts: the corpus is then the GAP stand-in."""
    bold = folder / "GenderCARE-ccs24"
    bold.mkdir(parents=True)
    actors = ["John Smith is an American actor who", "He starred in a film with his brother.",
              "The actor said that he was a father."]
    actresses = ["Mary Jones is an American actress who", "She starred in a film with her sister.",
                 "The actress said that she was a mother."]
    for name, lines in (("actors", actors), ("actresses", actresses)):
        rows = "".join(f'x,y,"Please complete the following sentence: {s}"\n' for s in lines)
        (bold / f"bold_gender_{name}_prompts.csv").write_text(BOLD_HEADER + rows)
    return folder


@pytest.mark.slow
def test_corpus_methods_run_through_the_mitigation_audit(audit_project, tiny_model_dir, tmp_path):
    """Each of CDS, ER and SentenceDebias is built at the paper's released strength, re-audits the
    disclosure probe with paired reductions against the original, gets the over-debiasing
    guards, and says in every report that the corpus is a stand-in for GAP."""
    args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(tmp_path / "c"),
            "--data-dir", str(_stand_in_data(tmp_path / "data")), "--mitigation", "cds,er,sentence-debias",
            "--mitigation-steps", "2", "-k", "(natural-default and GLD) or perplexity_rise or (sentence-debias and DA_score)"]
    result = audit_project.runpytest_subprocess(*args)
    out = result.stdout.str()
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    strengths = {"cds": "cds@0.9", "er": "er@0.5", "sentence-debias": "sentence-debias@1"}
    for variant, named in strengths.items():
        row = rows.get(f"{variant}-natural-default-GLD_reduction")
        assert row is not None, out
        assert row["verdict"] in ("pass", "fail", "inconclusive") and 0 < row["p_value"] <= 1
        b = row["breakdown"]
        # the probe scored again for the pairing, in other batches: within the fp32 bound
        assert_close(b["original"], rows["natural-default-GLD"]["value"],
                     disclosure_atol("GLD", disclosure_eta(load_tiny(tiny_model_dir), ("natural-default",))))
        assert row["value"] == pytest.approx(b["original"] - b["mitigated"], abs=1e-9)
        assert b["mitigated"] != b["original"], f"{variant} left GLD exactly as it was"
        info = b["variant"]
        assert info["variant"] == named and info["stand_in"] is True
        assert info["training_data"].startswith("STAND-IN for the paper's GAP corpus")
        assert rows[f"{variant}-heldout-neutral-text-perplexity_rise"]["verdict"] in ("pass", "fail", "inconclusive")
    assert rows["sentence-debias-da-gender-DA_score_drop"]["n"] == 2610, "SentenceDebias gets the guards too"
    for trained in ("cds", "er"):
        assert rows[f"{trained}-natural-default-GLD_reduction"]["breakdown"]["variant"]["config"]["steps"] == 2
    run = last_run(audit_project.path / "reports")
    table = [line.split(",")[0] for line in (run / "mitigation_table.csv").read_text().splitlines()]
    assert table == ["variant", "original", "cds", "er", "sentence-debias"]
    html = (run / "report.html").read_text()
    assert "STAND-IN for the paper&#x27;s GAP corpus" in html or "STAND-IN for the paper's GAP corpus" in html



LIMITS = {"DA_score_drop": 0.05, "perplexity_rise": 0.10, "lm_score_drop": 5.0}  # the repository's thresholds.toml


@pytest.mark.slow
def test_sweep_runs_in_the_audit_and_embeds_its_figures(audit_project, tiny_model_dir, tmp_path):
    """--mitigation-sweep end to end on a one-point grid (SentenceDebias needs no training): the
    point's guards are gated audit rows, the run folder gets tradeoff.csv, tradeoff_info.json and
    one figure per measured bias metric, and the report embeds them inline and names the corpus."""
    result = audit_project.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(tmp_path / "c"),
        "--data-dir", str(_stand_in_data(tmp_path / "data")), "--mitigation-sweep", "sentence-debias=1",
        "-k", "test_tradeoff and not lm_score")
    out = result.stdout.str()
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    assert set(rows) == {"sentence-debias@1-da-gender-DA_score_drop",
                         "sentence-debias@1-heldout-neutral-text-perplexity_rise"}, out
    run = last_run(audit_project.path / "reports")
    with (run / "tradeoff.csv").open() as fh:
        table = {r["variant"]: r for r in csv.DictReader(fh)}
    assert list(table) == ["base", "sentence-debias@1"]
    for guard, probe in (("DA_score_drop", "da-gender"), ("perplexity_rise", "heldout-neutral-text")):
        row = rows[f"sentence-debias@1-{probe}-{guard}"]
        assert float(table["sentence-debias@1"][guard]) == pytest.approx(row["value"], rel=1e-9)
        assert row["limit"] == LIMITS[guard]
    info = json.loads((run / "tradeoff_info.json").read_text())
    assert info["corpus"]["stand_in"] is True and info["grid"] == {"sentence-debias": [1.0]}
    # the tiny model's 128-token context cannot read StereoSet: its axis is left out, and said so
    assert "stereo_score" in info["missing"] and not (run / "tradeoff_stereo_score.svg").exists()
    html = (run / "report.html").read_text()
    for metric in ("SEAT-v1", "SEAT-v2", "logprob_effect"):
        svg = (run / f"tradeoff_{metric}.svg").read_text()
        assert "STAND-IN" in svg and f"Debiasing vs over-debiasing: {metric}" in svg
        assert f"<figcaption>{metric}: " in html
    assert html.count("<svg") >= 3 and "Debiasing / over-debiasing trade-off" in html and "Stand-in corpus" in html
    assert "<?xml" not in html and 'src="http' not in html and 'href="http' not in html, "self-contained"


def _small_probes(monkeypatch):
    """Cut the association probes so that a sweep of the tiny model takes seconds: 60 DA-Gender
    pairs, one Kurita template over two targets of each gender, SEAT-v2 missing."""
    import dataclasses

    from bias_core.errors import DataSourceMissing
    from bias_core.suites.association import AssociationAudit

    load = AssociationAudit.load_probe
    keep = {"he", "this man", "she", "this woman"}

    def small(self, name):
        if name == "seat-v2":
            raise DataSourceMissing("seat-v2 left out by the test")
        probe = load(self, name)
        if name == "da-gender":
            return dataclasses.replace(probe, items=probe.items[:60])
        if name == "logprob-professions":
            return dataclasses.replace(probe, items=tuple(
                i for i in probe.items if i.meta["target"] in keep and i.meta["template"] == "{targ} is a {attr}."))
        return probe

    monkeypatch.setattr(AssociationAudit, "load_probe", small)


def test_sweep_guards_table_and_point_to_take(tiny_lm, tmp_path, monkeypatch):
    """The sweep suite on a tiny grid of every method: guards against the base model, tradeoff.csv
    consistent with them, the point to take nearest the origin among the points within the
    guards, and the report section built from the run folder."""
    from bias_core.mitigation.evaluation.tradeoff_curves import parse_grid
    from bias_core.reports.render import tradeoff_sections
    from bias_core.suites.tradeoff import TradeoffSweep

    _small_probes(monkeypatch)
    limits = {"DA_score_drop": 0.05, "perplexity_rise": 0.10, "lm_score_drop": 5.0}
    sweep = TradeoffSweep(tiny_lm, parse_grid("cds=0.9;er=0.5;sentence-debias=0.5,1"),
                          data_dir=_stand_in_data(tmp_path / "data"), cache_dir=tmp_path / "c", steps=2, progress=False,
                          limit=lambda metric, probe: limits[metric], out_dir=tmp_path / "run")
    variants = ["cds@0.9", "er@0.5", "sentence-debias@0.5", "sentence-debias@1"]
    drop = sweep.guard("er@0.5", "DA_score_drop")
    assert drop.metric == "DA_score_drop" and drop.n == 60
    with pytest.raises(Exception, match="prompt too long|not available"):
        sweep.guard("er@0.5", "lm_score_drop")  # the tiny model cannot read StereoSet
    with pytest.raises(KeyError, match="no point er@9"):
        sweep.guard("er@9", "DA_score_drop")
    with (tmp_path / "run" / "tradeoff.csv").open() as fh:
        table = {r["variant"]: r for r in csv.DictReader(fh)}
    assert list(table) == ["base", *variants]
    for v in variants:
        for guard in ("DA_score_drop", "perplexity_rise"):
            assert float(table[v][guard]) == pytest.approx(sweep.guard(v, guard).value, rel=1e-12)
        # the drop is the difference of the two knowledge-axis values: (1 - DA_after) - (1 - DA_before)
        lost = float(table[v]["1-DA_score"]) - float(table["base"]["1-DA_score"])
        assert lost == pytest.approx(float(table[v]["DA_score_drop"]), abs=1e-9)
        within = float(table[v]["DA_score_drop"]) <= 0.05 and float(table[v]["perplexity_rise"]) <= 0.10
        assert table[v]["within_guards"] == str(within), "a guard that was not measured does not count"
    assert table["sentence-debias@0.5"]["SEAT-v1_bias"] != table["sentence-debias@1"]["SEAT-v1_bias"]
    assert "SEAT-v2_bias" not in table["base"] and "SEAT-v2" in sweep.missing
    for metric in ("SEAT-v1", "logprob_effect"):
        ok = [v for v in variants if table[v]["within_guards"] == "True"]
        base_x, base_y = float(table["base"][f"{metric}_bias"]), float(table["base"]["1-DA_score"])
        dist = {v: (float(table[v][f"{metric}_bias"]) / base_x) ** 2 + (float(table[v]["1-DA_score"]) / base_y) ** 2
                for v in ok}
        # a point to take has less bias than the base model and lies nearer the origin than it
        # (on these scaled axes the base lies at distance² 2)
        dist = {v: d for v, d in dist.items() if float(table[v][f"{metric}_bias"]) < base_x and d < 2}
        taken = [v for v in table if metric in table[v]["take_for"].split(";")]
        assert taken == ([min(dist, key=dist.get)] if dist else [])
    info = json.loads((tmp_path / "run" / "tradeoff_info.json").read_text())
    assert info["schedule"].startswith("quick (LoRA, one seed") and info["seeds"] == [0]
    assert "seeds" not in table["cds@0.9"], "one seed: no spread columns"
    [(anchor, title, body)] = tradeoff_sections(tmp_path / "run")
    assert anchor == "tradeoff" and body.count("<svg") == 2 and "SEAT-v2 not measured" in body
    assert "Stand-in corpus" in body and "<strong>Schedule</strong>: quick (LoRA, one seed" in body
    paper = TradeoffSweep(tiny_lm, parse_grid("paper:cds=0.9"), cache_dir=tmp_path / "c", schedule="paper",
                          progress=False)
    with pytest.raises(AuditUsageError, match="needs a CUDA GPU; this model runs on cpu"):
        paper.guard("cds@0.9", "DA_score_drop")


@pytest.mark.parametrize(("value", "expected"), [
    ("fast", "--mitigation-sweep fast: 'fast' is not METHOD=STRENGTH[,STRENGTH...]; choose quick, paper"),
    ("cds=1.2", "cds strength 1.2 is out of range; it takes a swap rate in [0, 1]"),
    ("sentence-debias=0", "sentence-debias strength 0.0 is out of range; it takes a ratio of pairs in (0, 1]"),
    ("er=-1", "er strength -1.0 is out of range; it takes a weight λ >= 0"),
    ("inlp=0.1", "unknown method 'inlp'; choose from cds, er, sentence-debias"),
    ("er=high", "--mitigation-sweep er=high: er's strengths must be numbers"),
    ("er=0.5;er=1", "give er once, with at least one strength"),
    ("er=", "'er=' is not METHOD=STRENGTH"),
])
def test_bad_sweep_values_name_the_problem(value, expected):
    from bias_core.errors import AuditUsageError
    from bias_core.mitigation.evaluation.tradeoff_curves import parse_grid

    with pytest.raises(AuditUsageError) as info:
        parse_grid(value)
    assert expected in str(info.value)


@pytest.mark.parametrize(("args", "expected"), [
    (["--mitigation-sweep", "cds=1.2"], "*--mitigation-sweep cds=1.2*out of range*swap rate*"),
    (["--mitigation", "cds,sd"], "*--mitigation sd: unknown; choose from*sentence-debias*"),
    (["--mitigation-sweep", "paper", "--device", "cpu"],
     "*--mitigation-sweep paper: the paper's schedule*needs a CUDA GPU*Fix: use --mitigation-sweep quick*"),
])
@pytest.mark.slow
def test_bad_sweep_and_method_are_usage_errors_before_any_model_loads(audit_project, tiny_model_dir, args,
                                                                       expected):
    result = audit_project.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir),
                                                *args)
    assert_usage_error(result)
    result.stderr.fnmatch_lines([expected])
    assert "Loading weights" not in result.stderr.str() + result.stdout.str()


def test_named_grids_are_the_documented_ones():
    from bias_core.mitigation.evaluation.tradeoff_curves import PAPER_GRID, QUICK_GRID, parse_grid

    assert parse_grid("quick") == QUICK_GRID and parse_grid("paper") == PAPER_GRID and parse_grid(None) is None
    assert parse_grid(" cds=0.6, 0.95 ; sentence-debias=1 ") == {"cds": (0.6, 0.95), "sentence-debias": (1.0,)}
    # Table 11's ranges bound both grids, and the paper's takes in Table 12's CDS 1.0
    for grid in (QUICK_GRID, PAPER_GRID):
        assert min(grid["cds"]) == 0.6 and max(grid["cds"]) == (1.0 if grid is PAPER_GRID else 0.95)
        assert min(grid["er"]) == 0.2 and max(grid["er"]) == 2.0
        assert min(grid["sentence-debias"]) == 0.01 and max(grid["sentence-debias"]) == 1.0


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("BIAS_CORE_LONG_TESTS") != "1",
                    reason="trains CDS and ER at six strengths on SmolLM2 (tens of CPU minutes): set BIAS_CORE_LONG_TESTS=1")
def test_smollm2_stronger_debiasing_removes_more_bias(smollm2_lm, tmp_path):
    """The paper's premise on the real model: along each method's strength grid (three points
    inside Table 11's ranges, CPU quick training), the bias left falls with the strength: a
    Spearman correlation of at most -0.5 between strength and |effect| on at least one of
    SEAT-v1 and logprob_effect, for each method. Uses the offline stand-in corpus."""
    from scipy.stats import spearmanr

    from bias_core.mitigation.evaluation.strength_sweep import default_config, strength_variant
    from bias_core.mitigation.training.corpus import load_debias_corpus
    from bias_core.suites.association import AssociationAudit

    if not (SHARED / "GenderCARE-ccs24").is_dir():
        pytest.skip(f"needs the BOLD prompts of {SHARED}/GenderCARE-ccs24 for the stand-in corpus")
    corpus = load_debias_corpus(SHARED)
    grid = {"cds": (0.6, 0.8, 0.95), "er": (0.2, 1.1, 2.0), "sentence-debias": (0.01, 0.1, 1.0)}
    axes = {"SEAT-v1": ("seat-v1", "SEAT_effect"), "logprob_effect": ("logprob-professions", "logprob_effect")}
    for method, strengths in grid.items():
        left = {name: [] for name in axes}
        for strength in strengths:
            with strength_variant(smollm2_lm, method, strength, corpus=corpus, cache_dir=tmp_path,
                                  config=default_config(smollm2_lm), progress=False) as (handle, _):
                suite = AssociationAudit(handle, data_dir=SHARED)
                for name, (probe, metric) in axes.items():
                    left[name].append(abs(suite.result(probe, metric).value))
        trends = {name: spearmanr(strengths, values).statistic for name, values in left.items()}
        assert min(trends.values()) <= -0.5, f"{method}: bias left by strength {left}, Spearman {trends}"
