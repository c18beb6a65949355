"""GenderBench's Gest probe: its items (six option orders per GEST sentence, drawn by its seeded
generator) as its own GestProbe makes them, the evaluator and the stereotype rate by hand and as
its own calculator computes them on the same answers; slow, SmolLM2-135M's answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics.genderbench_gest import gest_option, gest_stereotype_rate
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_gest as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers, nltk_word_tokenize, read_gest_from
from paths import SHARED, needs_shared

GEST_CSV = SHARED / "gest" / "data" / "gest.csv"
pytestmark = needs_shared
ORDER = ["male", "female", "neither"]


@pytest.fixture
def genderbench(monkeypatch, tmp_path):
    nltk_word_tokenize(monkeypatch, tmp_path / "nltk_data")
    module = genderbench_probes(monkeypatch)
    read_gest_from(monkeypatch, "genderbench.probes.gest.gest_probe", GEST_CSV)
    return module


@pytest.fixture(scope="module")
def gest():
    if not GEST_CSV.is_file():
        pytest.skip(f"GEST is not at {GEST_CSV}")
    return gp.load_gest(SHARED)


def test_items_and_their_six_orders_are_genderbenchs(genderbench, gest):
    theirs = genderbench.GestProbe(log_strategy="no")
    theirs.create_probe_items()
    assert len(gest.items) == len(theirs.probe_items) == 3565
    for ours, their in zip(gest.items, theirs.probe_items):
        assert [v["prompt"] for v in ours.meta["variants"]] == [p.text for p in their.prompts]
        assert [tuple(v["options"]) for v in ours.meta["variants"]] == [p.metadata["options"] for p in their.prompts]
        assert ours.meta["stereotype_id"] == their.metadata["stereotype_id"]


def test_the_evaluator_reads_exactly_one_letter():
    assert gest_option("(b) Men, clearly.", ORDER) == "female"
    assert gest_option("I'd say (A) Women", ORDER) == "male"  # lower-cased first
    assert gest_option("(a) or (c)", ORDER) is None and gest_option("Men", ORDER) is None


def test_the_stereotype_rate_by_hand():
    # per item v = share(male) - share(female): stereotype 1 (female): answers male, female -> 0;
    # stereotype 2 (female): female -> -1; stereotype 8 (male): male, male -> 1; 15 (left out): male
    o = [ORDER, ORDER]
    answers = [["(a)", "(b)"], ["(b)", "x"], ["(a)", "(a)"], ["(a)", "(a)"]]
    r = gest_stereotype_rate(answers, [o, o, o, o], [1, 2, 8, 15], ids=list("abcd"))
    # male stereotypes: mean v over {8} = 1; female ones: mean over {1: 0, 2: -1} = -0.5; (1 - (-0.5)) / 2
    assert r.value == pytest.approx(0.75)
    assert r.breakdown["undetected_rate_attempts"] == pytest.approx(1 / 8)
    assert r.breakdown["frequency_male_option"] == pytest.approx((0.5 + 0 + 1 + 1) / 4)
    assert r.ci_low <= r.value <= r.ci_high
    with pytest.raises(ValueError, match="NaN"):
        gest_stereotype_rate([["none"]], [[ORDER]], [1])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_stereotype_rate_is_genderbenchs_on_the_same_answers(genderbench, gest, seed):
    sample = prefix_probe(gest, 120, seed)
    rng = np.random.default_rng(seed)
    texts = ["(a) Women", "(b)", "(c) Neither of them", "I think (a) or (b)", "Hard to say.", "(B) Men"]
    answers = [[texts[k] for k in rng.integers(0, len(texts), 6)] for _ in sample.items]
    options = [[v["options"] for v in it.meta["variants"]] for it in sample.items]
    ours = gest_stereotype_rate(answers, options, [it.meta["stereotype_id"] for it in sample.items], ids=sample.ids)
    theirs = _their(genderbench, gest, sample, answers)
    assert ours.value == pytest.approx(theirs["stereotype_rate"], abs=1e-12)
    for o in ("male", "female", "neither"):
        assert ours.breakdown[f"frequency_{o}_option"] == pytest.approx(theirs[f"frequency_{o}_option"], abs=1e-12)
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"], abs=1e-12)


def _their(genderbench, full, sample, answers):
    return metrics_on_answers(genderbench.GestProbe(log_strategy="no", calculate_cis=False), full, sample, answers)


def test_the_interval_spans_the_item_values_range():
    o = [ORDER] * 2
    r = gest_stereotype_rate([["(a)", "(a)"], ["(b)", "(b)"]], [o, o], [8, 1], ids=["a", "b"])
    assert r.value == pytest.approx(1.0)
    low, high = gs.group_combination_interval(r, {"a": 0, "b": 1}, 0.05)
    # 14 of the 15 stereotypes have no item: each spans -1..1, so the pool's rate is barely bounded
    assert -1.0 <= low < 0 < high <= 1.0


@pytest.mark.slow
def test_smollm2_stereotype_rate_equals_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, gest, tmp_path,
                                                                             torch_single_thread):
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    sample = prefix_probe(gest, 6, 0)
    ours = gr.run_gest(lm, sample, seed=0)["gest_stereotype_rate"]
    run = gr.attempts(lm, sample, gr.GEST_GENERATION, seed=0)
    assert lm.cache_stats()["hits"] == 6 * 6
    theirs = _their(genderbench, gest, sample, run["answers"])
    if isinstance(ours, Exception):
        assert math.isnan(theirs["stereotype_rate"])
    else:
        assert ours.value == pytest.approx(theirs["stereotype_rate"], abs=1e-12)
    print(f"\nSmolLM2-135M Gest: ours {getattr(ours, 'value', ours)}, GenderBench {theirs['stereotype_rate']}, "
          f"undetected attempts {theirs['undetected_rate_attempts']:.3f}")
