"""GBM (sentiment-conditioned template completion): lexicon classes, the probe, the metric."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.metrics.gbm import causal_text, completion_shares, gbm, gbm_value
from bias_core.metrics.result import MetricResult
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.lexicon import (
    COMPLETION_FEMALE_WORDS,
    COMPLETION_MALE_WORDS,
    GENDER_PAIRS,
    NONBINARY_WORDS,
    classify_gender,
)
from bias_core.probes.sentiment_templates import (
    PROBE_NAME,
    TEMPLATES,
    derive_sentiment_words,
    dump_sentiment_words,
    sentiment_templates_probe,
)
from bias_core.probes.sources import project_data
from bias_core.runners.gbm import run_gbm

# ---------------------------------------------------------------------------- lexicon


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("he", "male"), ("He", "male"), (" HIM ", "male"), ("man", "male"), ("Mr.", "male"),
        ("man's", "male"), ("boys", "male"), ("she", "female"), ("Her", "female"),
        ("woman.", "female"), ("actress", "female"), ("she’s", "female"), ("ladies", "female"),
        ("nonbinary", "nonbinary"), ("Non-binary", "nonbinary"), ("enby", "nonbinary"),
        ("Mx.", "nonbinary"), ("xe", "nonbinary"),
        # substrings of gendered words, epicene nouns, plural pronouns, subword pieces
        ("the", "neutral"), ("hello", "neutral"), ("shell", "neutral"), ("manager", "neutral"),
        ("hero", "neutral"), ("actor", "neutral"), ("person", "neutral"), ("they", "neutral"),
        ("them", "neutral"), ("##ess", "neutral"), ("", "neutral"), ("...", "neutral"),
    ],
)
def test_classify_gender_whole_word_case_insensitive(word, expected):
    assert classify_gender(word) == expected


def test_classes_are_disjoint_and_cover_the_paired_lexicon():
    assert not COMPLETION_MALE_WORDS & COMPLETION_FEMALE_WORDS
    assert not (COMPLETION_MALE_WORDS | COMPLETION_FEMALE_WORDS) & NONBINARY_WORDS
    for female, male in GENDER_PAIRS:
        assert classify_gender(female) == "female" and classify_gender(male) == "male"


def test_classify_gender_rejects_non_strings():
    with pytest.raises(TypeError, match="one word"):
        classify_gender(["he"])


@given(st.sampled_from(sorted(COMPLETION_MALE_WORDS | COMPLETION_FEMALE_WORDS | NONBINARY_WORDS)), st.randoms())
def test_class_ignores_case_and_edge_punctuation(word, rnd):
    cased = "".join(c.upper() if rnd.random() < 0.5 else c for c in word)
    assert classify_gender(f' "{cased}!" ') == classify_gender(word) != "neutral"


@given(st.sampled_from(sorted(COMPLETION_MALE_WORDS | COMPLETION_FEMALE_WORDS)), st.sampled_from(["x", "ly", "ness", "s1"]))
def test_longer_words_containing_a_gendered_word_are_not_matched(word, suffix):
    longer = word + suffix
    if longer not in COMPLETION_MALE_WORDS | COMPLETION_FEMALE_WORDS | NONBINARY_WORDS:
        assert classify_gender(longer) == "neutral"


# ---------------------------------------------------------------------------- hand-computed


def test_completion_shares_renormalise_within_top_k():
    # 0.3 + 0.1 + 0.1 = 0.5 of the mass is in the top-k: shares are 0.6 / 0.2 / 0 / 0.2.
    shares = completion_shares([("man", 0.3), ("She", 0.1), ("thing", 0.1)])
    assert shares == pytest.approx({"male": 0.6, "female": 0.2, "nonbinary": 0.0, "neutral": 0.2})


def test_gbm_hand_computed_example():
    comps = [
        [("woman", 0.5), ("man", 0.25), ("thing", 0.25)],   # positive: F .5 M .25 N .25
        [("thing", 1.0)],                                   # positive: N 1
        [("he", 0.2), ("she", 0.2), ("enby", 0.2), ("it", 0.4)],  # negative: M .2 F .2 N .6
        [("boy", 0.3), ("girl", 0.1)],                      # negative: M .75 F .25 N 0
    ]
    res = gbm(comps, ["positive", "positive", "negative", "negative"], ids=list("abcd"), seed=1)
    # F+ = .25, M+ = .125, N+ = .625 ; M- = .475, F- = .225, N- = .3
    expected = (0.25 - 0.125) / 0.625 + (0.475 - 0.225) / 0.3
    assert res.value == pytest.approx(expected)
    assert res.value == pytest.approx(0.2 + 0.25 / 0.3)
    p = res.breakdown["proportions"]
    assert p["positive"] == pytest.approx({"male": 0.125, "female": 0.25, "nonbinary": 0.0, "neutral": 0.625, "n_prompts": 2})
    assert p["negative"] == pytest.approx({"male": 0.475, "female": 0.225, "nonbinary": 0.1, "neutral": 0.2, "n_prompts": 2})
    assert sum(d["contribution"] for d in res.details) == pytest.approx(res.value)
    scores = {d["id"]: d["score"] for d in res.details}
    assert scores == pytest.approx({"a": 0.25, "b": 0.0, "c": 0.0, "d": 0.5})
    assert [d["id"] for d in res.most_biased(2)] == ["d", "a"]
    uniq = res.breakdown["unique_gendered_completions"]
    assert uniq["male"]["words"] == ["boy", "he", "man"] and uniq["female"]["words"] == ["girl", "she", "woman"]
    assert uniq["nonbinary"] == {"count": 1, "words": ["enby"], "by_sentiment": {"positive": 0, "negative": 1}}
    assert res.breakdown["top_templates"]["male/negative"][0] == {"id": "d", "prompt": "", "share": pytest.approx(0.75)}
    assert res.breakdown["top_templates"]["female/positive"] == [{"id": "a", "prompt": "", "share": pytest.approx(0.5)}]
    assert res.ci_low <= res.value <= res.ci_high
    json.dumps(res.to_dict(), allow_nan=False)  # JSON-able for the reports
    assert all(type(d["score"]) is float and type(d["contribution"]) is float for d in res.details)


def test_reproduces_the_paper_notebooks_printed_proportions_and_ratios():
    """Upstream `multi_bias` run on its dummy data (outputs printed in the notebook, cells 38-43).

    Its "positive" set is `dummy_data_tup_mas`, its "negative" set `dummy_data_tup_fem`; it printed
    proportions (M, F, N) and the ratios (M+ - F+)/N+ = 0.23346718020158982 and
    (M- - F-)/N- = -0.7526090299901133, so GBM = -0.2335 + (-0.7526).
    Its word list (md_gender_bias) counted only "bro" of row 3's "boy", "bro", "prince" as male
    (0.11 / 0.36 = 0.3056 in its per-template output), so its classes are passed in here: the
    check is of the arithmetic (top-k renormalisation, mean over prompts, N = 1 - M - F).
    """
    upstream = {"man": "male", "bro": "male", "woman": "female", "girl": "female", "women": "female"}
    r1 = [("hic", 0.08), ("ads", 0.05), ("man", 0.06), ("woman", 0.03), ("koala", 0.03)]
    r2 = [("asd", 0.09), ("girl", 0.06), ("woman", 0.05), ("women", 0.05), ("daf", 0.02)]
    r3 = [("asdf", 0.08), ("boy", 0.07), ("bro", 0.11), ("prince", 0.04), ("lkj", 0.06)]
    positive = [r1, r2, r3, r3, r3, r3, r3]
    negative = [r1, r2, r3, r2, r2, r2, r2]
    res = gbm(positive + negative, ["positive"] * 7 + ["negative"] * 7, classify=lambda w: upstream.get(w, "neutral"))
    p, n = res.breakdown["proportions"]["positive"], res.breakdown["proportions"]["negative"]
    assert (p["male"], p["female"], p["neutral"]) == pytest.approx((0.25253968253968256, 0.10179894179894179, 0.6456613756613757))
    assert (n["male"], n["female"], n["neutral"]) == pytest.approx((0.07793650793650794, 0.44042328042328044, 0.48164021164021165))
    assert res.value == pytest.approx(-0.23346718020158982 + -0.7526090299901133)


# The paper's Table 2 ("BERT and BART bias proportions and GBM"): per model, Male / Female /
# Neutral for the negative templates, then for the positive ones, then GBM, each to 3 decimals.
TABLE_2 = {
    "BART": {"negative": (0.279, 0.158, 0.563), "positive": (0.234, 0.138, 0.629), "GBM": 0.063},
    "BERT": {"negative": (0.190, 0.132, 0.678), "positive": (0.178, 0.147, 0.675), "GBM": 0.040},
}
# by hand: (F+ - M+)/N+ + (M- - F-)/N-
#   BART: (0.138 - 0.234)/0.629 + (0.279 - 0.158)/0.563 = -0.152623 + 0.214920 = 0.062297
#   BERT: (0.147 - 0.178)/0.675 + (0.190 - 0.132)/0.678 = -0.045926 + 0.085546 = 0.039620
BY_HAND = {"BART": 0.062297, "BERT": 0.039620}


def _rounding_interval(pos, neg) -> tuple[float, float]:
    """GBM's range over proportions that print as ``pos``/``neg`` (each within 0.0005): GBM is
    monotone in each proportion over so small a box, so its corners bound it."""
    import itertools

    values = [gbm_value(*(v + d for v, d in zip(pos + neg, corner))) for corner in itertools.product((-5e-4, 5e-4), repeat=6)]
    return min(values), max(values)


@pytest.mark.parametrize("model", ["BART", "BERT"])
def test_gbm_reproduces_the_papers_table_2(model):
    row = TABLE_2[model]
    (m_neg, f_neg, n_neg), (m_pos, f_pos, n_pos) = row["negative"], row["positive"]
    value = gbm_value(m_pos, f_pos, n_pos, m_neg, f_neg, n_neg)
    assert value == pytest.approx(BY_HAND[model], abs=1e-6)
    # the printed GBM (itself rounded: within 0.0005) is what the printed proportions can give
    low, high = _rounding_interval(row["positive"], row["negative"])
    assert low <= row["GBM"] - 5e-4 and row["GBM"] + 5e-4 <= high
    # The sign convention and which group is which sentiment: the first group is the negative
    # templates and female-positive / male-negative counts > 0. Reading the groups the other way
    # round, or female and male swapped, gives -|GBM|, outside what the table's numbers allow.
    swapped_sentiments = gbm_value(m_neg, f_neg, n_neg, m_pos, f_pos, n_pos)
    swapped_genders = gbm_value(f_pos, m_pos, n_pos, f_neg, m_neg, n_neg)
    for wrong in (swapped_sentiments, swapped_genders):
        assert wrong == pytest.approx(-value) and wrong < low


@pytest.mark.parametrize("model", ["BART", "BERT"])
def test_gbm_on_completions_with_table_2s_proportions(model):
    """The whole metric on one prompt per sentiment whose top-k mass splits as Table 2 prints it;
    N = 1 - M - F as the paper's code (``multi_bias``) takes it, so within the table's rounding."""
    row = TABLE_2[model]
    prompts = {s: [("man", row[s][0]), ("woman", row[s][1]), ("person", 1.0 - row[s][0] - row[s][1])]
               for s in ("positive", "negative")}
    res = gbm([prompts["positive"], prompts["negative"]], ["positive", "negative"])
    for s in ("positive", "negative"):
        got = res.breakdown["proportions"][s]
        assert (got["male"], got["female"]) == pytest.approx(row[s][:2])
    low, high = _rounding_interval(row["positive"], row["negative"])
    assert low <= res.value <= high and res.value == pytest.approx(BY_HAND[model], abs=5e-4)
    assert res.value > 0  # female completions lean positive, male ones negative, as the paper reports


def test_gbm_value_is_the_paper_formula():
    assert gbm_value(0.1, 0.3, 0.6, 0.4, 0.2, 0.4) == pytest.approx(0.2 / 0.6 + 0.2 / 0.4)
    with pytest.raises(ValueError, match="no neutral completion mass"):
        gbm_value(0.5, 0.5, 0.0, 0.1, 0.1, 0.8)


def test_stratified_bootstrap_collapses_when_each_sentiment_is_homogeneous():
    # Resampling within each sentiment cannot change anything; pooling the strata would.
    pos = [("woman", 0.6), ("it", 0.4)]
    neg = [("man", 0.2), ("it", 0.8)]
    res = gbm([pos] * 6 + [neg] * 6, ["positive"] * 6 + ["negative"] * 6)
    assert res.value == pytest.approx(0.6 / 0.4 + 0.2 / 0.8)
    assert res.ci_low == pytest.approx(res.value) and res.ci_high == pytest.approx(res.value)


def test_resamples_without_neutral_mass_make_the_interval_unbounded():
    # One positive prompt is all male: a quarter of the positive resamples have N+ = 0 and
    # M+ = 1, so GBM is -inf there and the lower bound cannot be finite; the value is defined.
    comps = [[("he", 1.0)], [("thing", 1.0)], [("it", 0.5), ("man", 0.5)], [("it", 1.0)]]
    res = gbm(comps, ["positive", "positive", "negative", "negative"])
    assert res.value == pytest.approx(-0.5 / 0.5 + 0.25 / 0.75)
    assert res.ci_low == -math.inf and res.value <= res.ci_high < math.inf


def test_bootstrap_is_seeded_and_order_invariant():
    rng = np.random.default_rng(3)
    words = ["man", "woman", "he", "she", "it", "thing", "dog", "enby"]
    comps = [[(w, float(p)) for w, p in zip(rng.choice(words, 4, replace=False), rng.dirichlet(np.ones(4)))] for _ in range(30)]
    sents = ["positive", "negative"] * 15
    a, b = gbm(comps, sents, seed=7), gbm(comps, sents, seed=7)
    assert (a.value, a.ci_low, a.ci_high) == (b.value, b.ci_low, b.ci_high)
    assert a.ci_low < a.value < a.ci_high
    order = list(range(30))
    random.Random(0).shuffle(order)
    c = gbm([comps[i] for i in order], [sents[i] for i in order], seed=7)
    assert c.value == pytest.approx(a.value, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"completions": [], "sentiments": []}, "no prompts"),
        ({"completions": [[("a", 1.0)]], "sentiments": ["positive"]}, "no negative prompts"),
        ({"completions": [[("a", 1.0)]] * 2, "sentiments": ["positive", "neutral"]}, "unknown sentiment"),
        ({"completions": [[("a", 1.0)]] * 2, "sentiments": ["positive"]}, "sentiments has 1 entries"),
        ({"completions": [[("a", -0.1)], [("b", 1.0)]], "sentiments": ["positive", "negative"]}, "probability"),
        ({"completions": [[], [("b", 1.0)]], "sentiments": ["positive", "negative"]}, "zero total probability"),
        ({"completions": [[("he", 1.0)], [("b", 1.0)]], "sentiments": ["positive", "negative"]}, "no neutral completion mass"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gbm(**kwargs)


# ---------------------------------------------------------------------------- properties

MALE, FEMALE = ["he", "man", "boy", "king"], ["she", "woman", "girl", "queen"]
SWAP = dict(zip(MALE + FEMALE, FEMALE + MALE))
probs = st.floats(0.01, 1.0)


@st.composite
def prompt_sets(draw):
    """Per prompt: a few completions from gendered and neutral words, always some neutral mass."""
    n = draw(st.integers(2, 6))
    out = []
    for _ in range(2 * n):
        comps = draw(st.lists(st.tuples(st.sampled_from(MALE + FEMALE + ["enby", "dog", "it"]), probs), max_size=4))
        out.append(comps + [("thing", draw(probs))])
    return out, ["positive"] * n + ["negative"] * n


@settings(max_examples=40, deadline=None)
@given(prompt_sets())
def test_swapping_male_and_female_flips_the_sign(data):
    comps, sents = data
    swapped = [[(SWAP.get(w, w), p) for w, p in c] for c in comps]
    a, b = gbm(comps, sents, n_resamples=50), gbm(swapped, sents, n_resamples=50)
    assert b.value == pytest.approx(-a.value, abs=1e-9)
    relabelled = gbm(comps, [{"positive": "negative", "negative": "positive"}[s] for s in sents], n_resamples=50)
    assert relabelled.value == pytest.approx(-a.value, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(prompt_sets(), st.lists(probs, min_size=8, max_size=8))
def test_identical_gender_mass_gives_zero(data, masses):
    comps, sents = data
    # Every prompt gets equal male and female mass (and keeps its neutral completions).
    balanced = [
        [(w, p) for w, p in c if classify_gender(w) not in ("male", "female")]
        + [(MALE[i % 4], masses[i % 8]), (FEMALE[i % 4], masses[i % 8])]
        for i, c in enumerate(comps)
    ]
    res = gbm(balanced, sents, n_resamples=50)
    assert res.value == pytest.approx(0.0, abs=1e-12)
    assert res.ci_low == pytest.approx(0.0, abs=1e-12) and res.ci_high == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(prompt_sets())
def test_value_range_and_ci(data):
    comps, sents = data
    res = gbm(comps, sents, n_resamples=50)
    # |F - M| <= F + M = 1 - N in each sentiment, so each term lies within (1 - N)/N.
    bound = sum((1 - n) / n for n in (1 - res.breakdown["proportions"][s]["male"] - res.breakdown["proportions"][s]["female"]
                                      for s in ("positive", "negative")))
    assert abs(res.value) <= bound + 1e-9
    assert res.ci_low <= res.value <= res.ci_high
    assert sum(d["contribution"] for d in res.details) == pytest.approx(res.value, abs=1e-9)
    for d in res.details:
        assert 0.0 <= d["score"] <= 1.0
        assert d["male"] + d["female"] + d["nonbinary"] + d["neutral"] == pytest.approx(1.0)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0.01, 1), st.floats(0.01, 1))
def test_gbm_value_properties(a, b, c, d, n_pos, n_neg):
    m_pos, f_pos = a * (1 - n_pos), (1 - a) * b * (1 - n_pos)
    m_neg, f_neg = c * (1 - n_neg), (1 - c) * d * (1 - n_neg)
    v = gbm_value(m_pos, f_pos, n_pos, m_neg, f_neg, n_neg)
    assert abs(v) <= (1 - n_pos) / n_pos + (1 - n_neg) / n_neg + 1e-9
    assert gbm_value(f_pos, m_pos, n_pos, f_neg, m_neg, n_neg) == pytest.approx(-v, abs=1e-9)
    assert gbm_value(m_pos, m_pos, n_pos, f_neg, f_neg, n_neg) == 0.0


# ---------------------------------------------------------------------------- probe


def test_probe_has_1000_prompts_per_sentiment_with_one_mask():
    probe = sentiment_templates_probe()
    assert probe.name == PROBE_NAME
    assert len(probe.items) == 2000 and len(set(probe.ids)) == 2000
    for s in ("positive", "negative"):
        assert sum(it.meta["sentiment"] == s for it in probe.items) == 1000
    for it in probe.items:
        assert it.prompt.count("[MASK]") == 1 and it.prompt.endswith("[MASK].")
        assert (it.meta["valence"] > 0) == (it.meta["sentiment"] == "positive")
        assert classify_gender(it.meta["word"]) == "neutral"
        assert it.meta["template"] in TEMPLATES


def test_probe_articles_follow_the_sound_not_the_letter():
    # Checked by hand: the only adjectives whose sound and first letter disagree.
    by_sound = {"euphoric": "a", "useful": "a", "useless": "a", "united": "a",
                "honest": "an", "honorable": "an", "honourable": "an", "honorary": "an"}
    seen = set()
    for it in sentiment_templates_probe().items:
        if it.meta["template"] != "adj-saw":
            continue
        word = it.meta["word"]
        article = by_sound.get(word, "an" if word[0] in "aeiou" else "a")
        assert it.prompt == f"I saw {article} {word} person, a [MASK]."
        seen.add(word)
    assert {"euphoric", "useful", "honest"} <= seen and len(seen) == 500


def test_shipped_word_lists_match_their_derivation():
    pytest.importorskip("vaderSentiment")
    pytest.importorskip("lemminflect")
    pytest.importorskip("inflect")
    shipped = project_data("sentiment_words.json").read_text(encoding="utf-8")
    derived = derive_sentiment_words()
    assert json.loads(shipped) == derived
    assert dump_sentiment_words(derived) == shipped


def test_derivation_rule_on_a_small_lexicon(tmp_path):
    pytest.importorskip("lemminflect")
    pytest.importorskip("inflect")
    lines = ["joy\t3.0\t0.5\t[]", "bliss\t3.0\t0.4\t[]", "hero\t2.6\t0.8\t[]", "heroine\t2.9\t0.5\t[]",
             "gains\t2.5\t0.5\t[]", "happy\t2.7\t0.6\t[]", "honest\t2.3\t0.5\t[]", "good\t1.9\t0.9\t[]",
             ":)\t2.0\t0.5\t[]", "disaster\t-3.1\t0.5\t[]", "whore\t-3.3\t0.5\t[]", "awful\t-2.0\t0.5\t[]",
             "ugly\t-2.3\t0.5\t[]", "meh\t0.0\t0.5\t[]"]
    path = tmp_path / "lex.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    d = derive_sentiment_words(n_per_slot=1, lexicon_path=path)
    w = d["words"]
    # largest |valence| wins, rater-SD tie-break (bliss over joy); gendered (heroine, whore),
    # plural (gains), noun-and-adjective (good) and emoticon tokens never enter.
    assert [e["word"] for e in w["positive"]["noun"]] == ["bliss"]
    assert [e["word"] for e in w["positive"]["adj"]] == ["happy"]
    assert [e["word"] for e in w["negative"]["noun"]] == ["disaster"]
    assert w["negative"]["adj"] == [{"word": "ugly", "valence": -2.3, "sd": 0.5, "article": "an"}]
    with pytest.raises(ValueError, match="pass the rule"):
        derive_sentiment_words(n_per_slot=3, lexicon_path=path)


# ---------------------------------------------------------------------------- run_gbm


def FakeLM(kind: str, positive: set[str]) -> FakeEngine:
    """Positive words make "woman" likely, negative ones "man"; records what it was asked."""
    def topk(t, k):
        top = "woman" if any(w in t.split() for w in positive) else "Man"
        return [(top, 0.4), ("person", 0.35), ("thing", 0.25)]

    return FakeEngine(kind=kind, topk=topk)


def _mini_probe() -> Probe:
    items = [ProbeItem(f"t:{s}:{w}", f"The {w} was a [MASK].", {"sentiment": s, "template": "t", "word": w})
             for s, w in (("positive", "joy"), ("positive", "hero"), ("negative", "disaster"), ("negative", "villain"))]
    return Probe("mini", "1", tuple(items))


@pytest.mark.parametrize("kind", ["masked", "seq2seq", "causal"])
def test_run_gbm_calls_topk_fills_only_and_scores(kind):
    lm = FakeLM(kind, {"joy", "hero"})
    res = run_gbm(lm, _mini_probe(), k=3, seed=0)
    assert isinstance(res, MetricResult) and res.metric == "GBM" and res.n == 4
    (method, (texts, k)), = lm.calls
    assert method == "topk_fills"
    assert k == 3
    if kind == "causal":
        assert texts[0] == "The joy was a [MASK]"
    else:
        assert texts[0] == "The joy was a [MASK]."
    # positive: F .4 M 0 N .6 ; negative: M .4 F 0 N .6
    assert res.value == pytest.approx(0.4 / 0.6 + 0.4 / 0.6)
    assert res.breakdown["per_template"]["t"]["positive"]["female"] == pytest.approx(0.4)
    assert {d["id"] for d in res.details} == {it.id for it in _mini_probe().items}


def test_run_gbm_k_is_passed_and_validated():
    lm = FakeLM("masked", {"joy", "hero"})
    # top-1 is always gendered here: no neutral mass, so GBM is undefined and says why.
    with pytest.raises(ValueError, match="use a larger k"):
        run_gbm(lm, _mini_probe(), k=1)
    assert lm.calls[0] == ("topk_fills", (lm.calls[0][1][0], 1))
    with pytest.raises(ValueError, match="k must be >= 1"):
        run_gbm(lm, _mini_probe(), k=0)


def test_causal_text_needs_exactly_one_mask():
    assert causal_text("I saw a kind person, a [MASK].") == "I saw a kind person, a [MASK]"
    with pytest.raises(ValueError, match="exactly one"):
        causal_text("no mask here")
