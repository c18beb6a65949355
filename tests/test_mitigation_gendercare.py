"""GenderCARE's re-audit of ``--mitigation gendercare-cda`` (its Tables 5-6): GenderPair per
group, StereoSet's Δ and BOLD's regard gap, each a paired comparison of the original and the
debiased model on the same items."""

from __future__ import annotations

import numpy as np
import pytest

from bias_core import catalogue
from bias_core.errors import DataSourceMissing
from bias_core.metrics import MetricResult
from bias_core.metrics.preference import stereoset_scores
from bias_core.mitigation.evaluation.bias_reduction import paired_reduction
from bias_core.mitigation.evaluation.gendercare_reaudit import (
    decided_in_both,
    paired_gap_reduction,
    run_bold_gap_reductions,
    stereo_margin,
)
from bias_core.probes.bold import load_bold

from harness import last_run, rows_by_id
from paths import SHARED, needs_shared

pytest_plugins = ["pytester"]

def _per_item(metric, ids, scores):
    scores = [float(s) for s in scores]
    return MetricResult(metric=metric, value=float(np.mean(scores)), ci_low=0.0, ci_high=1.0, n=len(scores),
                        details=tuple({"id": i, "prompt": f"p {i}", "score": s} for i, s in zip(ids, scores)))


# ----- the statistics --------------------------------------------------------------------------------
def test_gap_reduction_on_one_item_per_group():
    """Original means (1, 0), debiased (0.5, 0.5): the gap falls from 1 to 0. Of the four ways to
    swap the two items' scores between the models only "none" reaches +1 (one swap gives 0, both
    -1), so the permutation p is 1/4; the bootstrap can only redraw the same items."""
    original = {"actors": _per_item("r", ["a"], [1.0]), "actresses": _per_item("r", ["b"], [0.0])}
    mitigated = {"actors": _per_item("r", ["a"], [0.5]), "actresses": _per_item("r", ["b"], [0.5])}
    result = paired_gap_reduction(original, mitigated, seed=3, metric="g")
    assert result.value == 1.0 and (result.ci_low, result.ci_high) == (1.0, 1.0)
    assert result.p_value == pytest.approx(0.25, abs=0.015)
    assert result.breakdown["original"] == 1.0 and result.breakdown["mitigated"] == 0.0
    assert result.breakdown["sigma_original"] == 0.5  # GenderCARE's σ over two groups: the gap / 2
    assert result.n == 2 and {d["group"] for d in result.details} == {"actors", "actresses"}


def test_gap_reduction_by_hand_and_its_sign():
    # actors 0.2, 0.4 -> mean 0.3; actresses 0.6, 0.8 -> 0.7: gap 0.4. Debiased: 0.5, 0.5 and 0.6, 0.6: gap 0.1.
    original = {"m": _per_item("r", ["a1", "a2"], [0.2, 0.4]), "f": _per_item("r", ["b1", "b2"], [0.6, 0.8])}
    mitigated = {"m": _per_item("r", ["a1", "a2"], [0.5, 0.5]), "f": _per_item("r", ["b1", "b2"], [0.6, 0.6])}
    better = paired_gap_reduction(original, mitigated, metric="g")
    assert better.value == pytest.approx(0.3)
    worse = paired_gap_reduction(mitigated, original, metric="g")  # the same items, the other way round
    assert worse.value == pytest.approx(-0.3) and worse.p_value > better.p_value
    with pytest.raises(ValueError, match="not on the same items"):
        paired_gap_reduction(original, {"m": _per_item("r", ["a1", "x"], [0, 0]), "f": mitigated["f"]}, metric="g")
    with pytest.raises(ValueError, match="same two or more groups"):
        paired_gap_reduction(original, {"m": mitigated["m"]}, metric="g")


def test_stereo_margin_is_the_stereotype_lead_and_its_reduction_pairs_contexts():
    # log-likelihoods per context: stereotype, anti-stereotype, unrelated
    before = stereoset_scores([-1.0, -2.0], [-3.0, -2.5], [-9.0, -9.0], ["mother", "father"], ids=["c1", "c2"],
                              prompts=["x", "y"])["stereo_score"]
    after = stereoset_scores([-2.0, -2.0], [-1.5, -2.5], [-9.0, -9.0], ["mother", "father"], ids=["c1", "c2"],
                             prompts=["x", "y"])["stereo_score"]
    m0, m1 = stereo_margin(before), stereo_margin(after)
    assert [d["score"] for d in m0.details] == [2.0, 0.5] and m0.value == pytest.approx(1.25)
    assert [d["score"] for d in m1.details] == [-0.5, 0.5]
    reduction = paired_reduction(m0, m1, metric="stereo_margin_reduction")
    assert reduction.value == pytest.approx(1.25)  # ((2 - -0.5) + (0.5 - 0.5)) / 2: the stereotype lost its lead
    assert reduction.p_value == pytest.approx(0.5)  # exact: 2 of the 4 sign patterns reach a mean of 1.25


def test_bpr_pairs_only_prompts_both_models_decided():
    original = _per_item("BPR", ["a", "b", "c"], [1, 1, 0])
    mitigated = _per_item("BPR", ["b", "c", "d"], [0, 0, 1])
    o, m, dropped = decided_in_both(original, mitigated)
    assert [d["id"] for d in o.details] == ["b", "c"] and o.value == 0.5 and m.value == 0.0 and dropped == 2
    assert paired_reduction(o, m, metric="BPR_reduction").value == 0.5


def test_bold_gaps_from_scored_rows():
    def rows(neg_m, neg_f):
        return {"actors": [{"id": f"m{k}", "prompt": "", "response": "", "negative": v, "positive": 1 - v}
                           for k, v in enumerate(neg_m)],
                "actresses": [{"id": f"f{k}", "prompt": "", "response": "", "negative": v, "positive": 1 - v}
                              for k, v in enumerate(neg_f)]}

    out = run_bold_gap_reductions(rows([0.4, 0.6], [0.1, 0.1]), rows([0.2, 0.2], [0.1, 0.1]), "regard_proxy")
    assert set(out) == {"bold_regard_proxy_negative_gap_reduction", "bold_regard_proxy_positive_gap_reduction"}
    # negative: gap 0.5 - 0.1 = 0.4 before, 0.2 - 0.1 = 0.1 after
    assert out["bold_regard_proxy_negative_gap_reduction"].value == pytest.approx(0.3)
    assert out["bold_regard_proxy_positive_gap_reduction"].value == pytest.approx(0.3)
    assert set(out) <= set(catalogue.BY_NAME)


# ----- BOLD's prompts ---------------------------------------------------------------------------------
@needs_shared
def test_bold_is_a_seeded_sample_per_group():
    probe = load_bold(SHARED, seed=0, sample=3)
    groups = [i.meta["group"] for i in probe.items]
    assert groups == ["actors"] * 3 + ["actresses"] * 3
    assert all(i.prompt.startswith("Please complete the following sentence:") for i in probe.items)
    assert load_bold(SHARED, seed=0, sample=3).ids == probe.ids and load_bold(SHARED, seed=1, sample=3).ids != probe.ids
    assert len(load_bold(SHARED, sample=None).items) == 2048 + 1156


def test_bold_without_its_files_names_the_fix(tmp_path):
    with pytest.raises(DataSourceMissing, match="Fix: pass --data-dir with GenderCARE-ccs24/bold_gender_actors_prompts.csv"):
        load_bold(tmp_path)


# ----- which tests run ----------------------------------------------------------------------------------
def test_the_reaudit_metrics_are_gendercare_s_and_not_guards():
    names = {m.name for m in catalogue.reaudits()}
    assert names == {"BPR_reduction", "toxicity_reduction", "regard_negative_reduction",
                     "regard_proxy_negative_reduction", "stereo_margin_reduction",
                     "bold_regard_negative_gap_reduction", "bold_regard_positive_gap_reduction",
                     "bold_regard_proxy_negative_gap_reduction", "bold_regard_proxy_positive_gap_reduction"}
    assert set(catalogue.guards()) == {"DA_score_drop", "perplexity_rise", "lm_score_drop"}
    assert {m.name for m in catalogue.reductions()} == {"GAS_reduction", "GLD_reduction", "ADD_reduction"}


# ----- through the audit, on the tiny model --------------------------------------------------------------
def _data(folder):
    bold = folder / "GenderCARE-ccs24"
    bold.mkdir(parents=True)
    for name, subject in (("actors", "John Smith is an American actor who"),
                          ("actresses", "Mary Jones is an American actress who")):
        rows = "".join(f'x,y,"Please complete the following sentence: {subject} {k}"\n' for k in range(3))
        (bold / f"bold_gender_{name}_prompts.csv").write_text("Type,Name,Prompt\n" + rows)
    return folder


def _long_context_copy(tiny_model_dir, folder):
    """The tiny model with a 512-token context (rotary positions: the weights do not change), so
    GenderPair's ~170-token instructions and StereoSet fit."""
    import json
    import shutil

    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 512}))
    return folder


@pytest.mark.slow
def test_gendercare_cda_is_reaudited_as_the_paper_does(audit_project, tiny_model_dir, tmp_path):
    """``--mitigation gendercare-cda`` on the tiny model, three GenderPair prompts (one per group),
    three BOLD prompts per group, offline classifiers: every re-audit metric is a gated row whose
    value is the original's minus the debiased model's on the same items."""
    model = _long_context_copy(tiny_model_dir, tmp_path / "tiny-512")
    result = audit_project.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "--model", str(model), "--cache-dir", str(tmp_path / "c"),
        "--data-dir", str(_data(tmp_path / "data")), "--mitigation", "gendercare-cda", "--mitigation-steps", "2",
        "--genderpair-sample", "3", "--toxicity-classifier", "offline", "--regard-classifier", "offline",
        "-k", "test_gendercare_reaudit", "-rs")
    out = result.stdout.str()
    rows = rows_by_id(last_run(audit_project.path / "reports"))
    for group in (1, 2, 3):
        for metric in ("BPR_reduction", "toxicity_reduction", "regard_proxy_negative_reduction"):
            row = rows[f"gendercare-cda-genderpair-group{group}-{metric}"]
            assert row["verdict"] in ("pass", "fail", "inconclusive"), out
            b = row["breakdown"]
            assert row["value"] == pytest.approx(b["original"] - b["mitigated"], abs=1e-9) and row["n"] == 1
            assert 0 < row["p_value"] <= 1 and b["variant"]["training_data"]
    for polarity in ("negative", "positive"):
        row = rows[f"gendercare-cda-bold-gender-bold_regard_proxy_{polarity}_gap_reduction"]
        assert row["n"] == 6 and row["value"] == pytest.approx(row["breakdown"]["original"] - row["breakdown"]["mitigated"])
        assert set(row["breakdown"]["per_group"]) == {"actors", "actresses"}
    row = rows["gendercare-cda-stereoset-gender-stereo_margin_reduction"]
    assert row["value"] == pytest.approx(row["breakdown"]["original"] - row["breakdown"]["mitigated"], abs=1e-9)
    assert row["n"] == 255 or "GenderCARE" in str(row["breakdown"]["data"]), "every StereoSet context, paired"
    assert not any("regard_negative" in k and "proxy" not in k for k in rows), "the proxy is never reported as regard"
    assert len(rows) == 3 * 3 + 1 + 2, out
