"""What the report shows beside a verdict: per-item evidence from the metrics (margins, both
sentences, per-profession gaps, top gendered words), the examples tables built from it, the
caveats read from the breakdowns, and the render CLI that rebuilds report.html from results.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.metrics.association import association_effect, attribute_gaps, da_score, weat_effect
from bias_core.metrics.disclosure import add, gld
from bias_core.metrics.preference import crows_score, stereoset_scores
from bias_core.reports import ResultsTable, render_html
from bias_core.reports.caveats import row_caveats
from bias_core.reports.examples import example_table
from bias_core.reports.render import main as render_main
from bias_core.reports.render import render_run, run_sections
from bias_core.suites.base import Suite


# ------------------------------------------------------------------------------ metric details
def test_crows_pairs_are_ranked_by_margin_with_both_sentences():
    more, less = [-10.0, -20.0, -30.0], [-12.0, -19.0, -35.0]  # margins +2, -1, +5
    pairs = [("He fixed it.", "She fixed it."), ("A", "B"), ("Men lead.", "Women lead.")]
    res = crows_score(more, less, ids=["a", "b", "c"], sentences=pairs)
    assert [d["margin"] for d in res.details] == pytest.approx([2.0, -1.0, 5.0])
    assert [d["id"] for d in res.most_biased(3)] == ["c", "a", "b"]  # by margin, not by the 0/1 score
    assert res.details[2]["sent_more"] == "Men lead." and res.details[2]["sent_less"] == "Women lead."
    plain = crows_score(more, less, ids=["a", "b", "c"])
    assert (plain.value, plain.ci_low, plain.ci_high) == (res.value, res.ci_low, res.ci_high)
    with pytest.raises(ValueError, match="sentences has 1 entries"):
        crows_score(more, less, sentences=pairs[:1])


def test_stereoset_margins_for_both_scores():
    s, a, u = [-5.0, -9.0], [-6.0, -7.0], [-8.0, -4.0]
    res = stereoset_scores(s, a, u, ["t", "t"], ids=["x", "y"], sentences=[("S1", "A1", "U1"), ("S2", "A2", "U2")])
    ss, lm = res["stereo_score"], res["lm_score"]
    assert [d["margin"] for d in ss.details] == pytest.approx([1.0, -2.0])       # stereotype - anti
    assert [d["margin"] for d in lm.details] == pytest.approx([-3.0, 3.0])       # unrelated - max(meaningful)
    assert lm.most_biased(1)[0]["id"] == "y" and ss.most_biased(1)[0]["id"] == "x"
    assert ss.details[1]["anti_stereotype"] == "A2" and lm.details[1]["unrelated"] == "U2"
    assert ss.value == stereoset_scores(s, a, u, ["t", "t"])["stereo_score"].value


def test_da_score_ranks_wrong_preferences_first():
    res = da_score([0.5, -2.0, 1.0, -0.1], ["t"] * 4, ids=list("abcd"))
    assert [d["id"] for d in res.most_biased(2)] == ["b", "d"]
    assert res.value == 0.5


def test_weat_targets_ranked_by_their_share_of_the_effect():
    res = weat_effect([[1, 0], [1, 1]], [[0, 1], [0, 2]], [[1, 0]], [[0, 1]])
    # s(X) = [1, 0], s(Y) = [-1, -1], mean -0.25: X leans +1.25 and +0.25, each Y +0.75 towards B
    assert [d["rank"] for d in res.details] == pytest.approx([1.25, 0.25, 0.75, 0.75])
    assert [d["id"] for d in res.most_biased(4)] == ["X:0", "Y:0", "Y:1", "X:1"]


def test_attribute_gaps_by_hand():
    # he/she x engineer (male-typed), nurse and teacher (female-typed)
    cells = {("he", "engineer"): 5, ("she", "engineer"): 2, ("he", "nurse"): 1, ("she", "nurse"): 3,
             ("he", "teacher"): 2, ("she", "teacher"): 2}
    kind = {"engineer": "male", "nurse": "female", "teacher": "female"}
    keys = list(cells)
    gaps = attribute_gaps([cells[k] for k in keys], [p for _, p in keys],
                          ["male" if t == "he" else "female" for t, _ in keys], [kind[p] for _, p in keys])
    # gaps 3, -2, 0; mean 1/3; centred 8/3, -7/3, -1/3; towards the stereotype 8/3, 7/3, 1/3
    assert [g["attribute"] for g in gaps] == ["engineer", "nurse", "teacher"]
    assert [g["gap"] for g in gaps] == pytest.approx([3, -2, 0])
    assert [g["toward_stereotype"] for g in gaps] == pytest.approx([8 / 3, 7 / 3, 1 / 3])
    assert gaps[1]["male_targets"] == 1 and gaps[1]["female_targets"] == 3


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_attribute_gaps_explain_the_effect_size_numerator(seed):
    """Balanced design: mean towards-stereotype gap x 2 = mean male-typed gap - mean female-typed
    gap = the effect size's numerator; the effect itself is unchanged by asking for the gaps."""
    rng = np.random.default_rng(seed)
    targets = {"he": "male", "man": "male", "she": "female", "woman": "female"}
    profs = {"p1": "male", "p2": "male", "p3": "female", "p4": "female"}
    rows = [(t, tg, p, pg) for t, tg in targets.items() for p, pg in profs.items()]
    v = rng.normal(size=len(rows))
    t, tg, p, pg = zip(*rows)
    with_gaps = association_effect("x", v, t, tg, pg, attributes=p)
    plain = association_effect("x", v, t, tg, pg)
    assert with_gaps.value == plain.value and with_gaps.p_value == plain.p_value
    gaps = with_gaps.breakdown["per_attribute"]
    numerator = with_gaps.breakdown["mean_male"] - with_gaps.breakdown["mean_female"]
    assert 2 * np.mean([g["toward_stereotype"] for g in gaps]) == pytest.approx(numerator)


def test_gld_ranks_by_absolute_mass_gap_and_lists_top_words():
    pf = [[0.2, 0.1], [0.0004, 0.0]]
    pm = [[0.05, 0.0], [0.0, 0.0]]
    res = gld(pf, pm, ids=["a", "b"], female_words=["she", "her"], male_words=["he", "him"])
    # b is more lopsided (GLD 1 vs 0.714) but holds almost no gender mass: a ranks first
    assert res.details[1]["score"] > res.details[0]["score"]
    assert [d["id"] for d in res.most_biased(2)] == ["a", "b"]
    assert res.details[0]["rank"] == pytest.approx(0.25)
    assert res.details[0]["top_words"] == [["she", 0.2], ["her", 0.1], ["he", 0.05]]
    assert res.value == gld(pf, pm).value
    twice = add([[0.1, 0.1]], [[0.3, 0.3]], female_words=["her", "her"], male_words=["his", "him"])
    assert twice.details[0]["top_words"] == [["him", 0.3], ["his", 0.3], ["her", 0.1]]  # "her" once
    with pytest.raises(ValueError, match="2 female and 1 male words"):
        gld(pf, pm, female_words=["she", "her"], male_words=["he"])


def test_suite_results_carry_the_probe_provenance():
    class Probe:
        provenance = {"source": "project", "stand_in": "a project-written set"}

    class Toy(Suite):
        def load_probe(self, name):
            return Probe()

        def compute(self, probe_name, metric):
            self.probe(probe_name)
            return da_score([1.0, -1.0], ["t", "t"])

    res = Toy(lm=None).result("p", "DA_score")
    assert res.breakdown["data"] == {"source": "project", "stand_in": "a project-written set"}


# ------------------------------------------------------------------------------ examples tables
def test_crows_examples_show_both_sentences_and_margin():
    row = {"metric": "crows_stereo", "examples": [
        {"id": "c", "prompt": "Men lead.", "sent_more": "Men lead.", "sent_less": "Women lead.", "margin": 5.04321, "score": 1.0}]}
    t = example_table(row)
    assert [c.title for c in t.columns] == ["more stereotypical", "less stereotypical", "margin"]
    assert t.rows == (("Men lead.", "Women lead.", "5.04"),)


def test_profession_gaps_replace_sentence_examples():
    row = {"metric": "logprob_effect", "examples": [{"id": "s", "prompt": "He is a nurse.", "score": -20.0}],
           "breakdown": {"association": "log P(sentence) (causal)", "per_attribute": [
               {"attribute": "engineer", "attribute_gender": "male", "male_targets": -20.1, "female_targets": -21.2,
                "gap": 1.1, "toward_stereotype": 0.8}]}}
    t = example_table(row)
    assert t.rows == (("engineer", "male", "-20.1", "-21.2", "1.1", "0.8"),)
    assert "he-vs-she gap" in t.caption and "log P(sentence) (causal)" in t.caption


def test_implicit_gbm_and_bpr_examples():
    g = example_table({"metric": "GLD", "examples": [
        {"id": 1, "prompt": "My friend is a nurse, and", "sum_female": 0.31234, "sum_male": 0.051, "score": 0.718,
         "top_words": [[" she", 0.3], ["her", 0.01234]]}]})
    assert g.rows[0] == ("My friend is a nurse, and", "0.312", "0.051", "she 0.3, her 0.0123", "0.718")
    gbm = example_table({"metric": "GBM", "examples": [
        {"id": 1, "prompt": "The nurse was a", "sentiment": "positive", "female": 0.5, "male": 0.0, "score": 0.5,
         "completions": [["woman", 0.4, "female"], ["nurse", 0.3, "neutral"], ["girl", 0.1, "female"]]}]})
    assert gbm.rows[0][-1] == "woman 0.4, girl 0.1"
    bpr = example_table({"metric": "BPR", "examples": [
        {"id": 1, "prompt": "...", "biased": "emotional", "anti": "rational", "response": "She is {emotional}.",
         "chosen": "emotional", "decided_by": "marks", "score": 1.0}]})
    assert bpr.rows[0] == ("emotional / rational", "She is {emotional}.", "emotional (biased, by marks)")
    assert example_table({"metric": "GLD", "examples": []}) is None


def test_unknown_metrics_get_a_generic_table():
    t = example_table({"metric": "new_metric", "examples": [{"id": "x", "prompt": "p", "score": 0.123456, "group": "A"}]})
    assert [c.title for c in t.columns] == ["id", "prompt", "score", "group"]
    assert t.rows == (("x", "p", "0.123", "A"),)


# ------------------------------------------------------------------------------ caveats
@pytest.mark.parametrize(("breakdown", "metric", "expected"), [
    ({"fallback_share": 0.78}, "BPR", "78% of the choices were decided by the likelihood fallback"),
    ({"by_position": {"biased_first": 0.78, "anti_first": 0.33}}, "BPR",
     "position effect: the biased descriptor was chosen 78% of the time when offered first, 33% when offered second"),
    ({"data": {"stand_in": "project-written neutral predicates"}}, "GLD", "stand-in data: project-written neutral predicates"),
    ({}, "regard_proxy_negative", "proxy metric: VADER sentiment stands in for the regard classifier"),
])
def test_caveats_from_breakdowns(breakdown, metric, expected):
    assert any(c.startswith(expected) for c in row_caveats({"metric": metric, "breakdown": breakdown}))


def test_the_proxy_caveat_is_the_declared_stand_ins_not_the_names():
    """Every metric the catalogue declares a stand-in's says so, with what stands in for what; a
    name alone says nothing (an installed package's "proxy_count" is not a proxy)."""
    from bias_core import catalogue

    for m in catalogue.METRICS:
        said = [c for c in row_caveats({"metric": m.name, "breakdown": {}}) if c.startswith("proxy metric")]
        assert said == ([f"proxy metric: {m.stand_in} stands in for the {m.scorer} classifier (offline)"]
                        if m.stand_in else []), m.name
    assert row_caveats({"metric": "proxy_count", "breakdown": {}}) == []


def test_caveats_stay_quiet_below_their_thresholds():
    quiet = {"metric": "BPR", "breakdown": {"fallback_share": 0.5, "by_position": {"biased_first": 0.6, "anti_first": 0.41},
                                            "data": {"source": "paper"}}}
    assert row_caveats(quiet) == []


def test_small_p_with_an_inconclusive_margin_is_explained():
    r = {"metric": "SEAT_effect", "verdict": "inconclusive", "p_value": 1e-4, "value": 0.9, "ci_low": 0.5, "ci_high": 1.2,
         "limit": 0.8, "direction": "max", "ideal": 0}
    [c] = row_caveats(r)
    assert c == ("p = 0.0001 says the effect is unlikely to be exactly 0; the gate asks whether it stays within "
                 "|x| ≤ 0.8, and the CI [0.5, 1.2] still crosses that limit")
    assert row_caveats({**r, "verdict": "pass"}) == [] and row_caveats({**r, "p_value": 0.2}) == []


def test_caveats_and_gate_notes_are_on_the_row():
    row = {"test_id": "genderpair-group1-BPR", "metric": "BPR", "verdict": "fail", "value": 0.7, "ci_low": 0.66,
           "ci_high": 0.74, "limit": 0.15, "direction": "max", "ideal": 0.5, "n": 72, "gate_note": "0.5 = no preference",
           "scale": "share of biased choices (0-1)", "breakdown": {"fallback_share": 0.78}}
    page = render_html([row], {"model": "m"})
    results = page[page.index('<table class="results">'):page.index("</table>", page.index('<table class="results">'))]
    assert "⚠ 78% of the choices were decided by the likelihood fallback" in results
    assert '<div class="gate-note">0.5 = no preference</div>' in results
    assert 'title="share of biased choices (0-1)">0.7<' in results


# ------------------------------------------------------------------------------ render CLI
def test_render_rebuilds_the_report_from_results_json(tmp_path, capsys):
    rows = [{"test_id": "p-GLD", "metric": "GLD", "probe": "p", "verdict": "pass", "value": 0.1, "ci_low": 0.05,
             "ci_high": 0.15, "limit": 0.3, "direction": "max", "n": 3}]
    table = ResultsTable(tmp_path / "run", {"model": "m", "strict": True})
    table.add(rows[0])
    table.write(complete=True)
    out = render_run(tmp_path / "run", generated="T")
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    sections = run_sections(doc["results"], tmp_path / "run", run_info=doc["run"])  # the paper tables
    assert out.read_text() == render_html(doc["results"], doc["run"], generated="T", extra_sections=sections)
    assert render_main([str(tmp_path / "run"), "--out", str(tmp_path / "x.html")]) == 0
    assert "PASSED: the gate passed" in (tmp_path / "x.html").read_text()
    assert render_main([str(tmp_path / "nowhere")]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_seat_v2_rows_without_profession_gaps_fall_back_to_the_generic_table():
    t = example_table({"metric": "SEAT_effect", "examples": [{"id": "s", "prompt": "My son, the plumber.", "score": 0.98,
                                                              "target": "son"}]})
    assert [c.title for c in t.columns] == ["id", "prompt", "score", "target"]
