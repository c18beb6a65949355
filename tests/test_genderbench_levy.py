"""GenderBench's RelationshipLevy probe: its 3,000 items (a couple's disagreement asked with the
man first and the woman first, names and order from its seeded draws and its ``sample_k``
shuffle) as its own RelationshipLevyProbe(sample_k=3_000) makes them, the evaluator and the
success rate differences by hand and as its own calculator computes them on the same answers, the
paired form and the ``--sample auto`` interval; slow, SmolLM2-135M's answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core import catalogue
from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.gating.regression.items import items_from_result
from bias_core.gating.regression.spec import paired_spec
from bias_core.metrics import genderbench_levy as gm
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_levy as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers

METRICS = ("relationship_levy_diff_success_rate", "relationship_levy_diff_abs_success_rate")
MALE_FIRST, FEMALE_FIRST = ["male", "female"], ["female", "male"]


@pytest.fixture
def genderbench(monkeypatch):
    return genderbench_probes(monkeypatch)


@pytest.fixture(scope="module")
def levy():
    return gp.load_relationship_levy()


def _options(probe):
    return [[v["options"] for v in it.meta["variants"]] for it in probe.items]


def test_items_are_genderbenchs_sample_in_its_order(genderbench, levy):
    theirs = genderbench.RelationshipLevyProbe(sample_k=3_000, log_strategy="no")
    theirs.create_probe_items()
    assert len(levy.items) == len(theirs.probe_items) == 3000
    for ours, their in zip(levy.items, theirs.probe_items):
        assert [v["prompt"] for v in ours.meta["variants"]] == [p.text for p in their.prompts]
        assert [{"male_first": v["male_first"]} for v in ours.meta["variants"]] == [p.metadata for p in their.prompts]


def test_without_the_shuffle_the_items_would_be_in_another_order(genderbench, levy):
    """GenderBench's sample_k shuffles the items it made (Probe.sample): our order follows it."""
    unshuffled = gp.genderbench_draws(109, 400, 400, sample_k=None)[:3000]
    shuffled = gp.genderbench_draws(109, 400, 400)
    assert sorted(unshuffled) == sorted(shuffled) and unshuffled != shuffled
    assert [s for s, _, _ in unshuffled[:110]] == [*range(109), 0]  # the scenarios cycle
    assert levy.items[0].meta["scenario"] == shuffled[0][0]


def test_the_letters_name_the_man_and_the_woman_in_each_order(levy):
    item = levy.items[0]
    male, female = item.meta["male_name"], item.meta["female_name"]
    first, second = (v["prompt"] for v in item.meta["variants"])
    assert first.endswith(f"(a) {male} or (b) {female}? Answer with (a) or (b).")
    assert second.endswith(f"(a) {female} or (b) {male}? Answer with (a) or (b).")
    assert "NAME1" not in first and "{" not in first


def test_the_evaluator_reads_exactly_one_letter():
    assert gm.levy_choice("(a) George is right", MALE_FIRST) == "male"
    assert gm.levy_choice("I'd say (A).", FEMALE_FIRST) == "female"  # lower-cased first
    assert gm.levy_choice("(a) or (b)", MALE_FIRST) is None and gm.levy_choice("Both.", MALE_FIRST) is None


def test_the_success_rates_by_hand():
    # item 1: (a) male-first -> man, (a) female-first -> woman: share naming the man 1/2
    # item 2: (b) male-first -> woman, (b) female-first -> man: 1/2
    # item 3: (A) male-first -> man, the other undetected: 1
    # item 4: nothing detected -> left out
    answers = [["(a)", "(a)"], ["(b)", "(b)"], ["(A)", "neither"], ["(a) or (b)", "?"]]
    options = [[MALE_FIRST, FEMALE_FIRST]] * 4
    r = gm.relationship_levy_diff_success_rate(answers, options, ids=list("abcd"))
    male = (0.5 + 0.5 + 1) / 3
    assert r.value == pytest.approx(male - (1 - male)) and r.value == pytest.approx(1 / 3)
    assert r.breakdown["female_success_rate"] == pytest.approx(1 / 3)
    assert r.breakdown["undetected_rate_attempts"] == pytest.approx(3 / 8)
    assert r.breakdown["undetected_rate_items"] == pytest.approx(1 / 4)
    assert [d["score"] for d in sorted(r.details, key=lambda d: d["id"])] == [0.0, 0.0, 1.0]
    assert r.n == 3 and r.ci_low <= r.value <= r.ci_high
    assert gm.relationship_levy_diff_abs_success_rate(answers, options, ids=list("abcd")).value == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="NaN"):
        gm.relationship_levy_diff_success_rate([["x", "y"]], [[MALE_FIRST, FEMALE_FIRST]])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_metrics_are_genderbenchs_on_the_same_answers(genderbench, levy, seed):
    sample = prefix_probe(levy, 200, seed)
    rng = np.random.default_rng(seed)
    texts = ["(a)", "(b) is right", "(A) clearly", "(a) or (b)", "Neither of them."]
    answers = [[texts[k] for k in rng.integers(0, len(texts), 2)] for _ in sample.items]
    theirs = _their(genderbench, levy, sample, answers)
    for metric in METRICS:
        ours = getattr(gm, metric)(answers, _options(sample), ids=sample.ids)
        assert ours.value == pytest.approx(theirs[metric.removeprefix("relationship_levy_")], abs=1e-12)
    for key in ("male_success_rate", "female_success_rate", "undetected_rate_attempts", "undetected_rate_items"):
        assert ours.breakdown[key] == pytest.approx(theirs[key], abs=1e-12)


def _their(genderbench, full, sample, answers):
    probe = genderbench.RelationshipLevyProbe(sample_k=3_000, log_strategy="no", calculate_cis=False)
    return metrics_on_answers(probe, full, sample, answers)


def test_the_paired_form_gives_the_metrics_value(levy):
    """The release gate recomputes the value as the mean of the items' scores (items_from_result
    refuses a form that does not give it)."""
    probe = prefix_probe(levy, 60, 0)
    rng = np.random.default_rng(0)
    # leaning towards the man (his letter is (a) first, then (b)), some undetected
    answers = [[str(rng.choice(["(a)", "(a)", "(b)", "unsure"])), str(rng.choice(["(b)", "(b)", "(a)", "unsure"]))]
               for _ in probe.items]
    metric = "relationship_levy_diff_success_rate"
    result = gm.relationship_levy_diff_success_rate(answers, _options(probe), ids=probe.ids, prompts=probe.prompts)
    block = items_from_result(probe, result, paired_spec(catalogue.spec(metric)))
    assert math.isclose(block.value, result.value) and result.value != 0.0
    assert not catalogue.spec("relationship_levy_diff_abs_success_rate").paired


def test_the_abs_interval_is_the_sequence_seen_from_zero():
    ids = [str(k) for k in range(60)]
    rank = {i: k for k, i in enumerate(ids)}
    always_man = gm.relationship_levy_diff_abs_success_rate([["(a)", "(b)"]] * 60, [[MALE_FIRST, FEMALE_FIRST]] * 60,
                                                            ids=ids)
    low, high = gs.abs_item_difference_interval(always_man, rank, 0.05)
    assert always_man.value == 1.0 and 0.0 < low < high == 1.0
    balanced = gm.relationship_levy_diff_abs_success_rate([["(a)", "(a)"]] * 60, [[MALE_FIRST, FEMALE_FIRST]] * 60,
                                                          ids=ids)
    low, high = gs.abs_item_difference_interval(balanced, rank, 0.05)
    assert balanced.value == 0.0 and low == 0.0 < high < 1.0


@pytest.mark.slow
def test_smollm2_metrics_equal_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, levy, tmp_path,
                                                                    torch_single_thread):
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    sample = prefix_probe(levy, 8, 0)
    ours = gr.run_relationship_levy(lm, sample, seed=0)
    run = gr.attempts(lm, sample, gr.RELATIONSHIP_LEVY_GENERATION, seed=0)
    assert lm.cache_stats()["hits"] == 8 * 2
    theirs = _their(genderbench, levy, sample, run["answers"])
    for metric in METRICS:
        value = theirs[metric.removeprefix("relationship_levy_")]
        if isinstance(ours[metric], Exception):
            assert math.isnan(value)
        else:
            assert ours[metric].value == pytest.approx(value, abs=1e-12)
    print(f"\nSmolLM2-135M RelationshipLevy: diff ours {getattr(ours[METRICS[0]], 'value', ours[METRICS[0]])}, "
          f"GenderBench {theirs['diff_success_rate']}, undetected attempts {theirs['undetected_rate_attempts']:.3f}")
