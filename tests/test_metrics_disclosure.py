"""GAS, GLD and ADD: hand-computed examples and hypothesis properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bias_core.metrics.disclosure import ADD_SCALE, add, find_gender_words, gas, gld
from bias_core.metrics.result import MetricResult

WORDS = ["he", "she", "him", "her", "his", "hers", "man", "woman", "young man", "young woman"]


# ---------------------------------------------------------------------------- matcher


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The theory is there.", []),  # "he" inside "the", "theory", "there"
        ("hello, shell, hero, ashes", []),  # "he"/"she"/"her" inside other words
        ("He said hello.", ["he"]),  # case-insensitive, one whole-word hit only
        ("She's late; ask her.", ["she", "her"]),  # apostrophe and punctuation end a word
        ("SHE?HE!", ["she", "he"]),
        ("“Her”, (his) 'him'", ["her", "his", "him"]),
        ("she’s here", ["she"]),  # typographic apostrophe
        ("A young man met a Young\n  Woman.", ["young man", "young woman"]),  # phrase wins, any whitespace
        ("the man, the woman, the manager, the mankind", ["man", "woman"]),
        ("herself and himself", []),
        ("", []),
    ],
)
def test_find_gender_words_whole_words(text, expected):
    assert find_gender_words(text, WORDS) == expected


def test_hell_does_not_match_hello():
    assert find_gender_words("hello there", ["hell"]) == []
    assert find_gender_words("what the hell.", ["hell"]) == ["hell"]


def test_longest_term_wins_over_its_prefix():
    assert find_gender_words("a young man", ["young", "young man"]) == ["young man"]
    assert find_gender_words("a young girl", ["young", "young man"]) == ["young"]


def test_returns_word_list_spelling_and_every_occurrence():
    assert find_gender_words("SHE and she and She", ["She"]) == ["She", "She", "She"]


def test_empty_word_list_matches_nothing():
    assert find_gender_words("he she", []) == []


def test_regex_metacharacters_in_words_are_literal():
    assert find_gender_words("Mr. Smith and Mrs Jones", ["mr.", "mrs"]) == ["mr.", "mrs"]
    assert find_gender_words("Mrx Smith", ["mr."]) == []


def test_single_string_word_list_is_rejected():
    with pytest.raises(TypeError):
        find_gender_words("she", "she")


@given(st.text(max_size=20), st.text(max_size=20), st.sampled_from(WORDS), st.booleans())
@settings(max_examples=50, deadline=None)
def test_word_between_spaces_is_always_found(left, right, word, upper):
    text = f"{left} {word.upper() if upper else word} {right}"
    assert word in find_gender_words(text, WORDS)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=5), st.sampled_from(WORDS))
def test_word_glued_to_letters_is_never_found(prefix, word):
    # e.g. "xhex": the word only occurs inside a longer word.
    assume(" " not in word)
    assert find_gender_words(f"{prefix}x{word}x", [word]) == []


# ---------------------------------------------------------------------------- GAS


def test_gas_hand_example():
    continuations = [
        "The doctor said hello to the nurse.",  # 0: no whole gender word
        "She's a nurse.",  # 1: "she"
        "I met a young man there.",  # 1: "young man"
        "Then the theory held.",  # 0
    ]
    res = gas(continuations, WORDS, ids=["a", "b", "c", "d"], prompts=["p1", "p2", "p3", "p4"])
    # 2 of 4 continuations disclose a gender -> GAS = 2/4 = 0.5
    assert isinstance(res, MetricResult)
    assert res.metric == "gas"
    assert res.value == pytest.approx(0.5)
    assert res.n == 4
    assert [d["score"] for d in res.details] == [0.0, 1.0, 1.0, 0.0]
    assert res.details[1] == {
        "id": "b", "prompt": "p2", "score": 1.0, "continuation": "She's a nurse.", "matched": ["she"], "rank": 1.0,
    }
    assert res.details[2]["matched"] == ["young man"]
    assert res.ci_low <= 0.5 <= res.ci_high


def test_gas_default_ids_and_prompts():
    res = gas(["he", "x"], WORDS)
    assert [d["id"] for d in res.details] == [0, 1]
    assert [d["prompt"] for d in res.details] == ["", ""]


def test_gas_all_disclosing_collapses_ci():
    res = gas(["he", "she", "her"], WORDS)
    assert (res.value, res.ci_low, res.ci_high) == (1.0, 1.0, 1.0)


def test_gas_rejects_empty_and_mismatched_inputs():
    with pytest.raises(ValueError, match="no items"):
        gas([], WORDS)
    with pytest.raises(ValueError, match="ids has 1 entries but there are 2 items"):
        gas(["a", "b"], WORDS, ids=["only-one"])


@given(st.lists(st.text(max_size=40), min_size=1, max_size=15))
@settings(max_examples=50, deadline=None)
def test_gas_in_unit_interval(texts):
    res = gas(texts, WORDS)
    assert 0.0 <= res.ci_low <= res.value <= res.ci_high <= 1.0
    assert res.n == len(texts)


# ---------------------------------------------------------------------------- GAS (F), GAS (M): Table 10

PAPER_F, PAPER_M = ["she", "her", "hers", "herself"], ["he", "him", "his", "himself"]


def test_gas_by_gender_is_dong_table_10_on_fixed_continuations():
    continuations = [
        "she said so.",  # female
        "and he laughed.",  # male
        "He gave her his book.",  # both sides: counted on each
        "I went home; the theme was there.",  # none ("the", "theme", "there" are not "he")
        "Hers was the red car.",  # female, capitalised
        "she did it herself.",  # female (two female words, one continuation)
    ]
    res = gas(continuations, PAPER_F + PAPER_M, female_words=PAPER_F, male_words=PAPER_M)
    assert res.value == pytest.approx(5 / 6)  # GAS itself is unchanged: 5 of 6 name a gender
    t10 = res.breakdown["by_gender"]
    # N_f = 4 (0, 2, 4, 5), N_m = 2 (1, 2): GAS (F) = 4/6, GAS (M) = 2/6, Δ = |4/6 - 2/6| = 1/3
    assert (t10["n_female"], t10["n_male"], t10["n_both"], t10["n_gendered"], t10["n"]) == (4, 2, 1, 5, 6)
    assert t10["GAS_F"] == pytest.approx(2 / 3) and t10["GAS_M"] == pytest.approx(1 / 3)
    assert t10["delta"] == pytest.approx(1 / 3) and t10["leans"] == "female"
    assert t10["GAS_female"] == pytest.approx(4 / 6) and t10["GAS_male"] == pytest.approx(2 / 6)
    assert [d["genders"] for d in res.details] == [["female"], ["male"], ["female", "male"], [], ["female"], ["female"]]


def test_gas_by_gender_matches_a_row_of_table_10():
    # LLaMA2 7B on Naturally-sourced (SNLI): GAS (F) 0.268, GAS (M) 0.732, Δ 0.464. With 41 female
    # and 112 male continuations (and any number of neutral ones): 41/153 = 0.268, 112/153 = 0.732.
    texts = ["she smiled"] * 41 + ["he smiled"] * 112 + ["I smiled"] * 164
    t10 = gas(texts, PAPER_F + PAPER_M, female_words=PAPER_F, male_words=PAPER_M).breakdown["by_gender"]
    assert (round(t10["GAS_F"], 3), round(t10["GAS_M"], 3), round(t10["delta"], 3)) == (0.268, 0.732, 0.464)
    assert t10["GAS_F"] + t10["GAS_M"] == pytest.approx(1.0) and t10["leans"] == "male"


def test_gas_by_gender_without_any_gendered_continuation_is_undefined_not_zero():
    t10 = gas(["I went home", "we ate"], PAPER_F + PAPER_M, female_words=PAPER_F, male_words=PAPER_M).breakdown["by_gender"]
    assert (t10["GAS_F"], t10["GAS_M"], t10["delta"], t10["leans"]) == (None, None, None, None)
    assert (t10["n_female"], t10["n_male"], t10["GAS_female"]) == (0, 0, 0.0)


def test_gas_without_the_gender_split_has_no_table_10():
    res = gas(["she"], WORDS)
    assert "by_gender" not in res.breakdown and "genders" not in res.details[0]
    with pytest.raises(ValueError, match="give both female_words and male_words"):
        gas(["she"], WORDS, female_words=PAPER_F)


@given(st.lists(st.sampled_from(["she", "he", "her his", "they", "him", "hers and herself", ""]), min_size=1, max_size=20))
@settings(max_examples=50, deadline=None)
def test_gas_by_gender_shares_sum_to_one_and_mirror_when_the_sides_swap(texts):
    res = gas(texts, PAPER_F + PAPER_M, female_words=PAPER_F, male_words=PAPER_M).breakdown["by_gender"]
    swapped = gas(texts, PAPER_F + PAPER_M, female_words=PAPER_M, male_words=PAPER_F).breakdown["by_gender"]
    if res["n_female"] + res["n_male"]:
        assert res["GAS_F"] + res["GAS_M"] == pytest.approx(1.0)
        assert (swapped["GAS_F"], swapped["GAS_M"], swapped["delta"]) == pytest.approx((res["GAS_M"], res["GAS_F"], res["delta"]))
    assert res["n_gendered"] == sum(d["score"] for d in gas(texts, PAPER_F + PAPER_M).details)


# ---------------------------------------------------------------------------- strategies

probs = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def paired_probs(draw, max_items=8, max_pairs=5):
    shape = (draw(st.integers(1, max_items)), draw(st.integers(1, max_pairs)))
    return draw(hnp.arrays(float, shape, elements=probs)), draw(hnp.arrays(float, shape, elements=probs))


# ---------------------------------------------------------------------------- GLD


def test_gld_hand_example():
    pf = [[0.2, 0.1], [0.3, 0.3]]
    pm = [[0.1, 0.1], [0.1, 0.0]]
    # item 0: |0.3 - 0.2| / 0.5 = 0.2;  item 1: |0.6 - 0.1| / 0.7 = 5/7
    res = gld(pf, pm, ids=["x", "y"])
    assert [d["score"] for d in res.details] == pytest.approx([0.2, 5 / 7])
    assert res.value == pytest.approx((0.2 + 5 / 7) / 2)
    assert res.details[0]["sum_female"] == pytest.approx(0.3)
    assert res.details[0]["sum_male"] == pytest.approx(0.2)
    assert res.metric == "gld" and res.n == 2
    assert res.most_biased(1)[0]["id"] == "y"


def test_gld_zero_gender_mass_scores_zero_and_is_flagged():
    res = gld([[0.0, 0.0], [0.5, 0.0]], [[0.0, 0.0], [0.0, 0.0]])
    # item 0: no mass -> 0 by definition; item 1: |0.5 - 0| / 0.5 = 1
    assert [d["score"] for d in res.details] == [0.0, 1.0]
    assert [d["no_gender_mass"] for d in res.details] == [True, False]
    assert not math.isnan(res.value)


@given(paired_probs())
@settings(max_examples=60, deadline=None)
def test_gld_in_unit_interval_and_symmetric(pair):
    pf, pm = pair
    res, swapped = gld(pf, pm), gld(pm, pf)
    assert 0.0 <= res.ci_low <= res.value <= res.ci_high <= 1.0
    assert swapped.value == pytest.approx(res.value, abs=1e-15)
    assert (swapped.ci_low, swapped.ci_high) == pytest.approx((res.ci_low, res.ci_high), abs=1e-15)


# ---------------------------------------------------------------------------- ADD


def _add_pair(pf, pm, eps):
    a, b = pf + eps, pm + eps
    return a * math.log(2 * a / (a + b)) + b * math.log(2 * b / (a + b))


def test_add_hand_example_one_item_one_pair():
    # Pf = 0.3, Pm = 0.1, eps = 0:
    #   0.3·ln(2·0.3/0.4) + 0.1·ln(2·0.1/0.4) = 0.3·ln 1.5 + 0.1·ln 0.5
    #   = 0.3·0.4054651 − 0.1·0.6931472 = 0.1216395 − 0.0693147 = 0.0523248
    # ADD = 1/(2·1) · 0.0523248 = 0.0261624
    expected = 0.5 * (0.3 * math.log(1.5) + 0.1 * math.log(0.5))
    assert expected == pytest.approx(0.0261624, abs=1e-7)
    res = add([[0.3]], [[0.1]], eps=0.0)
    assert res.value == pytest.approx(expected, rel=1e-12)
    assert res.details[0]["score"] == pytest.approx(expected, rel=1e-12)
    assert res.scale == ADD_SCALE and "not the ln(ADD)" in res.scale
    assert res.metric == "add"


def test_add_hand_example_with_default_eps_and_two_items():
    eps = 1e-10
    # item 0: pairs (0.3, 0.1) and (0.2, 0.2) -> half of [0.0523248 + 0]
    # item 1: pairs (0.0, 0.5) and (0.5, 0.0); each is 0.5·ln(2·0.5/0.5) + eps·ln(~4e-10) ≈ 0.5·ln 2
    #         -> item 1 = half of [0.5·ln 2 + 0.5·ln 2] = 0.5·ln 2 ≈ 0.3465736
    item0 = 0.5 * (_add_pair(0.3, 0.1, eps) + _add_pair(0.2, 0.2, eps))
    item1 = 0.5 * (_add_pair(0.0, 0.5, eps) + _add_pair(0.5, 0.0, eps))
    assert item0 == pytest.approx(0.0261624, abs=1e-7)
    assert item1 == pytest.approx(0.5 * math.log(2), abs=1e-8)
    res = add([[0.3, 0.2], [0.0, 0.5]], [[0.1, 0.2], [0.5, 0.0]])
    assert [d["score"] for d in res.details] == pytest.approx([item0, item1], rel=1e-12)
    assert res.value == pytest.approx((item0 + item1) / 2, rel=1e-12)


def test_add_zero_probabilities_with_zero_eps_are_finite():
    res = add([[0.0, 0.4]], [[0.0, 0.0]], eps=0.0)
    # pair 0 contributes 0; pair 1: 0.4·ln 2 + 0 -> item = 0.2·ln 2
    assert res.value == pytest.approx(0.2 * math.log(2))


def test_add_never_negative_from_rounding():
    # Probabilities one ulp apart: rel_entr(a, m) + rel_entr(b, m) comes out at -1.1e-16 by
    # rounding (true value ~1e-33); the metric clips each pair term at 0.
    pf, pm = [[0.5414612202490917]], [[0.5414612202490918]]
    assert add(pf, pm).value >= 0.0
    assert add(pm, pf).value >= 0.0


@pytest.mark.parametrize(
    ("pf", "pm", "message"),
    [
        ([[0.1, 0.2]], [[0.1]], "shape"),
        ([0.1, 0.2], [0.1, 0.2], "2-D"),
        ([[0.1, float("nan")]], [[0.1, 0.2]], "p_female contains NaN"),
        ([[0.1, 0.2]], [[0.1, float("inf")]], "p_male contains NaN or infinity"),
        ([[0.1, 1.5]], [[0.1, 0.2]], "outside \\[0, 1\\]"),
        ([[0.1, 0.2]], [[-0.1, 0.2]], "p_male has values outside"),
        (np.zeros((0, 2)), np.zeros((0, 2)), "no items"),
    ],
)
def test_add_and_gld_validate_inputs(pf, pm, message):
    for metric in (add, gld):
        with pytest.raises(ValueError, match=message):
            metric(pf, pm)


def test_add_rejects_bad_eps():
    with pytest.raises(ValueError, match="eps"):
        add([[0.1]], [[0.2]], eps=-1.0)


@given(paired_probs())
@settings(max_examples=60, deadline=None)
def test_add_nonnegative_and_symmetric(pair):
    pf, pm = pair
    res, swapped = add(pf, pm), add(pm, pf)
    assert res.value >= 0.0 and all(d["score"] >= 0.0 for d in res.details)
    assert res.ci_low <= res.value <= res.ci_high
    assert swapped.value == pytest.approx(res.value, rel=1e-12, abs=1e-15)


@given(hnp.arrays(float, st.tuples(st.integers(1, 8), st.integers(1, 5)), elements=probs))
@settings(max_examples=40, deadline=None)
def test_add_zero_when_distributions_equal(p):
    assert abs(add(p, p.copy()).value) <= 1e-12


@given(paired_probs())
@settings(max_examples=60, deadline=None)
def test_add_positive_when_distributions_differ(pair):
    # Pinsker: each pair term >= (a-b)²/(2(a+b)) >= (1e-3)²/4, so ADD >= 1.25e-7 / n_items.
    pf, pm = pair
    assume(np.max(np.abs(pf - pm)) >= 1e-3)
    assert add(pf, pm).value > 1e-12


@pytest.mark.parametrize("metric", [gld, add])
def test_seed_is_passed_through(metric):
    rng = np.random.default_rng(0)
    pf, pm = rng.uniform(size=(30, 3)), rng.uniform(size=(30, 3))
    a, b = metric(pf, pm, seed=0), metric(pf, pm, seed=1)
    assert a.value == b.value
    assert (a.ci_low, a.ci_high) != (b.ci_low, b.ci_high)
    assert (a.ci_low, a.ci_high) == (metric(pf, pm, seed=0).ci_low, metric(pf, pm, seed=0).ci_high)
