"""GenderBench's Isear probe: its items as its own IsearProbe makes them, the emotion evaluator
against GenderBench's on the real nltk.word_tokenize, the max gap by hand and as its calculator
computes it, the --sample auto interval, and the licence gate (off unless --noncommercial-data)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bias_core.gating import genderbench_sampling as gs
from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics.genderbench_isear import isear_max_diff
from bias_core.metrics.genderbench_text import emotion
from bias_core.models.cached import CachedModel
from bias_core.probes import genderbench_isear as gp
from bias_core.runners import genderbench as gr
from bias_core.storage.result_cache import ResultCache

from genderbench_reference import genderbench_probes, metrics_on_answers, nltk_word_tokenize
from harness import no_traceback

pytest_plugins = ["pytester"]
G = list(gp.ISEAR_GENDERS)


@pytest.fixture
def genderbench(monkeypatch, tmp_path):
    nltk_word_tokenize(monkeypatch, tmp_path / "nltk_data")
    return genderbench_probes(monkeypatch)


@pytest.fixture(scope="module")
def isear():
    return gp.load_isear()


def test_items_are_genderbenchs(genderbench, isear):
    theirs = genderbench.IsearProbe(log_strategy="no")
    theirs.create_probe_items()
    assert len(isear.items) == len(theirs.probe_items) == 7332
    for ours, their in zip(isear.items, theirs.probe_items):
        assert [v["prompt"] for v in ours.meta["variants"]] == [p.text for p in their.prompts]
        assert [v["gender"] for v in ours.meta["variants"]] == [p.metadata["gender"] for p in their.prompts]
    assert tuple(genderbench.IsearProbe.emotions) == gp.ISEAR_EMOTIONS


def test_the_evaluator_is_genderbenchs_on_nltk_word_tokenize(genderbench):
    from genderbench.probes.isear.isear_evaluator import IsearEvaluator
    from genderbench.probing.attempt import Attempt
    from genderbench.probing.prompt import Prompt

    evaluator = IsearEvaluator(genderbench.IsearProbe(log_strategy="no"))
    rng = random.Random(0)
    words = [*gp.ISEAR_EMOTIONS, "Anger", "JOY", "Fear", "angry", "joyful", "Dr", "No", "U.S", "e.g", "I", "A", "1",
             "shame's", "regret-", "it"]
    ends = [".", ". ", ".\n", "!", "?", ",", " ", " ", "...", '."', ".)", "**", "\n", ";", ":"]
    texts = ["Anger.", "Joy", "fear and joy", "Sadness!", "My main emotion: disappointment.", "guilt, then shame",
             "Dr. Fear.", "embarrassment..."]
    texts += ["".join(rng.choice(["", '"', "(", "*"]) + rng.choice(words) + rng.choice(ends)
                      for _ in range(rng.randint(1, 8))) for _ in range(1500)]
    for text in texts:
        attempt = Attempt(Prompt("p"), 0)
        attempt.answer = text
        assert emotion(text) == evaluator(attempt), text


def test_the_max_gap_by_hand():
    # man: anger, fear -> anger 1/2, fear 1/2; woman: joy, fear -> joy 1/2, fear 1/2; non-binary: anger
    # (its second answer names no emotion). Largest gap: anger, woman 0 vs non-binary 1
    r = isear_max_diff([["Anger.", "Joy.", "anger"], ["fear", "fear", "I do not know"]], [G, G], ids=["a", "b"])
    assert r.value == pytest.approx(1.0)
    assert r.breakdown["max_diff_fear"] == pytest.approx(0.5)  # man 1/2, woman 1/2, non-binary 0
    assert r.breakdown["max_diff_joy"] == pytest.approx(0.5)
    assert r.breakdown["undetected_rate_attempts"] == pytest.approx(1 / 6)
    same = isear_max_diff([["joy", "joy", "joy"], ["fear", "Fear.", "fear!"]], [G, G])
    assert same.value == 0.0 and same.ci_low == 0.0 and same.ci_high == 0.0
    with pytest.raises(ValueError, match="NaN"):
        isear_max_diff([["ok", "fine", "good"]], [G])
    with pytest.raises(ValueError, match="not Isear's"):
        isear_max_diff([["joy"]], [["a cat"]])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_max_gap_is_genderbenchs_on_the_same_answers(genderbench, isear, seed):
    sample = prefix_probe(isear, 150, seed)
    rng = np.random.default_rng(seed)
    texts = ["Anger.", "joy", "Fear!", "sadness and shame", "Regret", "I am not sure.", "Frustration."]
    answers = [[texts[k] for k in rng.integers(0, len(texts), 3)] for _ in sample.items]
    ours = isear_max_diff(answers, [G] * len(answers), ids=sample.ids)
    theirs = _their(genderbench, isear, sample, answers)
    assert ours.value == pytest.approx(theirs["max_diff"], abs=1e-12)
    for e in gp.ISEAR_EMOTIONS:
        assert ours.breakdown[f"max_diff_{e}"] == pytest.approx(theirs[f"max_diff_{e}"], abs=1e-12)
    assert ours.breakdown["undetected_rate_attempts"] == pytest.approx(theirs["undetected_rate_attempts"], abs=1e-12)


def _their(genderbench, full, sample, answers):
    return metrics_on_answers(genderbench.IsearProbe(log_strategy="no", calculate_cis=False), full, sample, answers)


def test_the_interval_covers_the_value_and_narrows_with_items():
    # in sampling order the man answers anger and joy alternately (a sample is a random order)
    answers = [["anger", "joy", "joy"], ["joy", "joy", "joy"]] * 40
    r = isear_max_diff(answers, [G] * 80, ids=[f"i{k}" for k in range(80)])
    rank = {f"i{k}": k for k in range(80)}
    low, high = gs.isear_interval(r, rank, 0.05)
    assert low <= r.value <= high  # man chose anger half the time, the others never: 0.5
    few = isear_max_diff(answers[:8], [G] * 8, ids=[f"i{k}" for k in range(8)])
    f_low, f_high = gs.isear_interval(few, {f"i{k}": k for k in range(8)}, 0.05)
    assert f_high - f_low >= high - low


def test_the_probe_is_off_unless_the_run_allows_non_commercial_data(project):
    result, out = project.run("-k", "isear", "-rs", select=None)
    assert result.ret == 0, out[-2000:]
    no_traceback(out)
    assert "off by default: ISEAR's events are licensed CC BY-NC-SA 3.0" in out and "--noncommercial-data" in out
    assert project.loads == []  # skipped at collection: no model loaded for it


@pytest.mark.slow
def test_smollm2_max_gap_equals_genderbenchs_on_the_same_generations(smollm2_lm, genderbench, isear, tmp_path,
                                                                       torch_single_thread):
    lm = CachedModel(smollm2_lm.engine, ResultCache(tmp_path / "cache"))
    sample = prefix_probe(isear, 8, 0)
    ours = gr.run_isear(lm, sample, seed=0)["isear_max_diff"]
    run = gr.attempts(lm, sample, gr.ISEAR_GENERATION, seed=0)
    assert lm.cache_stats()["hits"] == 8 * 3
    detected = sum(emotion(a) is not None for item in run["answers"] for a in item)
    theirs = _their(genderbench, isear, sample, run["answers"])
    if isinstance(ours, Exception):
        assert detected == 0
    else:
        assert ours.value == pytest.approx(theirs["max_diff"], abs=1e-12)
    print(f"\nSmolLM2-135M Isear: ours {getattr(ours, 'value', ours)}, GenderBench {theirs.get('max_diff')}; "
          f"{detected} of 24 answers name one emotion")
