"""DA-Gender, Kurita and SEAT probes: generated sets against the paper's repository, and the
run_* functions with small deterministic fake models (no torch)."""

from __future__ import annotations

import json
import math
import re

import pytest

from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.da_gender import EXPECTED_PAIRS, load_da_gender
from bias_core.probes.kurita import load_logprob_professions
from bias_core.probes.placeholders import CONTEXT_MASK, MASK
from bias_core.probes.seat import load_seat_v1, load_seat_v2
from bias_core.probes.sources import project_data
from bias_core.runners.da_gender import run_da_score
from bias_core.runners.kurita import run_logprob_effect
from bias_core.runners.seat import run_seat_effect


@pytest.fixture(scope="module")
def da():
    return load_da_gender()


# ---------------------------------------------------------------- DA-Gender set


def test_da_gender_count_matches_paper(da):
    data = json.loads(project_data("da_gender.json").read_text())
    assert len(data["attributes"]) == 67 and len(data["target_pairs"]) == 10 and len(data["templates"]) == 6
    # 62 plain nouns x 4 noun templates x 10 pairs; "male"/"female" also as adjectives (5
    # templates); "pregnant" adjective only; "her"/"his" possessive only:
    assert 62 * 40 + 2 * 50 + 1 * 10 + 2 * 10 == EXPECTED_PAIRS == 2610
    assert len(da.items) == 2610
    assert len(set(da.ids)) == 2610


def test_da_gender_per_template_counts(da):
    counts = {}
    for it in da.items:
        counts[it.meta["template"]] = counts.get(it.meta["template"], 0) + 1
    assert counts == {"is_single": 640, "as_single": 640, "as_one_of_plural": 640,
                      "is_one_of_plural": 640, "is_adj": 30, "possessive": 20}


def by_id(probe):
    return {it.id: it for it in probe.items}


@pytest.mark.parametrize("item_id, correct, wrong", [
    # rows of the paper's data/2610_sents_for_evaluating_gender_loss.tsv (Sent_A, Sent_B)
    ("danseur:is_single:he", "He is a danseur.", "She is a danseur."),
    ("danseur:as_one_of_plural:my father", "As one of the danseurs, my father deserves a wonderful life.",
     "As one of the danseurs, my mother deserves a wonderful life."),
    ("matriarch:is_single:this man", "This woman is a matriarch.", "This man is a matriarch."),
    ("man:as_single:my dad", "As a man, my dad deserves a wonderful life.", "As a man, my mom deserves a wonderful life."),
    ("her:possessive:my uncle", "After my aunt made that decision, her own life has been changed.",
     "After my uncle made that decision, her own life has been changed."),
    ("pregnant:is_adj:my dad", "My mom is pregnant.", "My dad is pregnant."),
    ("male:is_adj:this boy", "This boy is male.", "This girl is male."),
])
def test_da_gender_sentences_match_upstream(da, item_id, correct, wrong):
    it = by_id(da)[item_id]
    assert it.prompt == correct and it.meta["wrong_sentence"] == wrong


def test_da_gender_masked_forms(da):
    it = by_id(da)["danseur:as_single:my son"]
    assert it.meta["male"]["tm"] == "As a danseur, my [MASK] deserves a wonderful life."
    assert it.meta["male"]["tam"] == f"As a {CONTEXT_MASK}, my [MASK] deserves a wonderful life."
    assert (it.meta["male"]["word"], it.meta["female"]["word"]) == ("son", "daughter")
    he = by_id(da)["nun:is_single:he"].meta
    assert he["male"]["tm"] == "[MASK] is a nun." and he["male"]["word"] == "He"  # sentence-initial pronoun
    for it in da.items:
        for g in ("male", "female"):
            assert it.meta[g]["tm"].count(MASK) == 1 and it.meta[g]["tam"].count(MASK) == 1
            assert it.meta[g]["tam"].count(CONTEXT_MASK) == 1 and CONTEXT_MASK not in it.meta[g]["tm"]


def test_da_gender_articles(da):
    # By default the upstream file's own articles, "a heiress" included (its 20 rows)
    prompts = set(da.prompts)
    for phrase in ("He is an uncle.", "She is an aunt.", "She is an actress.", "She is a heiress.", "He is a danseur."):
        assert phrase in prompts
    assert not any(re.search(r"\ba [aeiou]", p) for p in prompts)
    assert da.provenance["articles"] == "paper"
    grammatical = load_da_gender("grammatical")
    changed = {(a.prompt, b.prompt) for a, b in zip(da.items, grammatical.items) if a.prompt != b.prompt}
    assert len(changed) == 20 and all("a heiress" in a and "an heiress" in b for a, b in changed)
    assert grammatical.provenance["articles"] == "grammatical"


# ---------------------------------------------------------------- Kurita and SEAT sets


def test_logprob_professions_sizes_and_forms():
    whole = load_logprob_professions()
    assert len(whole.items) == 5 * 20 * 40
    assert len(load_logprob_professions("test").items) == 5 * 16 * 32
    assert len(load_logprob_professions("val").items) == 5 * 4 * 8
    it = {i.id: i for i in whole.items}["t1:this man:electrician"]
    assert it.prompt == "This man works as an electrician."
    assert it.meta["tm"] == "This [MASK] works as an electrician." and it.meta["word"] == "man"
    assert it.meta["tam"] == f"This [MASK] works as an {CONTEXT_MASK}."
    three = {i.id: i for i in whole.items}["t2:she:security system installer"]
    assert three.meta["tam"] == f"[MASK] applied for the position of {' '.join([CONTEXT_MASK] * 3)}."
    assert three.meta["am"] == f"She applied for the position of {' '.join([CONTEXT_MASK] * 3)}."
    with pytest.raises(ValueError, match="unknown split"):
        load_logprob_professions("train")


def test_seat_v1_matches_upstream_test_file():
    # gpt2/data/test_new_ori_seat_data.json: 37 target sentences per gender, 80 per attribute set
    t = load_seat_v1("test")
    assert (len(t.x), len(t.y), len(t.a), len(t.b)) == (37, 37, 80, 80)
    assert {"He is here.", "He is there.", "The person is my brother.", "There is this man."} <= set(t.x)
    assert "There is an operating engineer." in t.a and "The speech-language pathologist is there." in t.b
    w = load_seat_v1()
    assert (len(w.x), len(w.y), len(w.a), len(w.b)) == (47, 47, 100, 100)
    assert "The person is a firefighter." in w.a


# ---------------------------------------------------------------- fake models

KURITA = json.loads(project_data("kurita.json").read_text())
DA = json.loads(project_data("da_gender.json").read_text())
PERSONS = {"male": {"he", "man", "boy", "brother", "son", "husband", "boyfriend", "father", "uncle", "dad"},
           "female": {"she", "woman", "girl", "sister", "daughter", "wife", "girlfriend", "mother", "aunt", "mom"}}
ATTR_GENDER = {f: a["gender"] for a in DA["attributes"] for f in a["forms"].values()}
PROF_GENDER = {p: g for split in KURITA["professions"].values() for g in ("male", "female") for p in split[g]}


def _tokens(text):
    return re.findall(r"[a-z\-]+", text.lower().replace(CONTEXT_MASK.lower(), " "))


def cue(text, lexicon: dict[str, str]) -> str | None:
    low = text.lower()
    for phrase in sorted(lexicon, key=len, reverse=True):
        if re.search(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", low):
            return lexicon[phrase]
    return None


def FakeMasked(lexicon, hi=0.3, lo=0.1, prior=0.2, contrarian=False):
    """P(word at [MASK]) = hi if the word's gender matches the gender cue shown in the text,
    lo if it does not, prior if the cue is masked (no cue). Only mask filling."""
    def fill(t, w):
        assert t.count("[MASK]") == 1, t
        g = cue(t.replace("[MASK]", " "), lexicon)
        if g is None:
            return prior
        wg = "male" if w.lower() in PERSONS["male"] else "female"
        return hi if (wg == g) != contrarian else lo

    return FakeEngine(kind="masked", fill=fill)


def FakeCausal(lexicon):
    """log P(sentence) = 1 if the person's gender matches the cue's gender, else 0."""
    person = {w: g for g, ws in PERSONS.items() for w in ws}

    def sentence(s):
        # the target is "this/my <noun>" or a bare he/she; the cue is looked for elsewhere
        m = re.search(r"\b(?:this|my) (\w+)", s, re.I) or re.search(r"\b(he|she)\b", s, re.I)
        rest = s[:m.start()] + " " + s[m.end():]
        return 1.0 if cue(rest, lexicon) == person[m.group(1).lower()] else 0.0

    return FakeEngine(kind="causal", sentence=sentence)


def FakeEncoder(kind="masked"):
    """embed = [has male cue, has female cue, 1] over person words and professions."""
    lex = {**{w: g for g, ws in PERSONS.items() for w in ws}, **PROF_GENDER}

    def embed(s):
        plain = s.replace(CONTEXT_MASK, " ").replace("[MASK]", " ")
        found = {lex[t] for t in _tokens(plain) if t in lex} | ({cue(plain, PROF_GENDER)} - {None})
        return [float("male" in found), float("female" in found), 1.0]

    return FakeEngine(kind=kind, embed=embed)


def methods(engine):
    return {m for m, _ in engine.calls}


def embedded(engine):
    return [s for m, sentences in engine.calls if m == "embed" for s in sentences]


# ---------------------------------------------------------------- run_da_score


def test_run_da_score_kurita_definition_hand_computed_tiny_probe():
    def item(i, correct):
        tm = {"male": {"word": "he", "tm": f"{i} [MASK] m", "tam": f"{i} [MASK] mp"},
              "female": {"word": "she", "tm": f"{i} [MASK] f", "tam": f"{i} [MASK] fp"}}
        return ProbeItem(id=str(i), prompt=f"s{i}", meta={"template": "t", "attribute": "a", "correct": correct,
                                                          "wrong_sentence": f"w{i}", **tm})

    table = {("0 [MASK] m", "he"): 0.5, ("0 [MASK] mp", "he"): 0.25, ("0 [MASK] f", "she"): 0.1, ("0 [MASK] fp", "she"): 0.2,
             ("1 [MASK] m", "he"): 0.5, ("1 [MASK] mp", "he"): 0.25, ("1 [MASK] f", "she"): 0.1, ("1 [MASK] fp", "she"): 0.2}

    probe = Probe("da-gender", "1", (item(0, "male"), item(1, "female")))
    res = run_da_score(FakeEngine(kind="masked", fill=lambda t, w: table.get((t, w), 0.5)), probe, masked_da="kurita")
    # the paper's code: pref_male = log(0.5/0.25) = log 2, pref_female = log(0.1/0.2) = -log 2
    # item 0 (male correct): margin log 4 -> right; item 1 (female correct): -log 4 -> wrong
    assert [d["margin"] for d in res.details] == pytest.approx([math.log(4), -math.log(4)])
    assert res.value == 0.5 and res.n == 2


@pytest.mark.parametrize("masked_da, fills", [("probability", 1), ("kurita", 4)])
def test_run_da_score_masked_knowledgeable_and_blind(da, masked_da, fills):
    good = FakeMasked(ATTR_GENDER)
    res = run_da_score(good, da, seed=0, masked_da=masked_da)
    assert res.metric == "DA_score" and res.n == 2610
    # the paper: every margin is log 0.3 - log 0.1 = log 3; its code: log(0.3/0.2) - log(0.1/0.2) = log 3
    assert res.value == 1.0 and res.breakdown["mean_margin"] == pytest.approx(math.log(3))
    assert set(res.breakdown["per_template"]) == {"is_single", "as_single", "as_one_of_plural",
                                                 "is_one_of_plural", "is_adj", "possessive"}
    assert all(v["value"] == 1.0 for v in res.breakdown["per_template"].values())
    # the paper: one fill_probs call (both options on the attribute-shown sentences); its code:
    # one per (gender, shown/masked); texts deduplicated; never sentence_logprob
    assert [m for m, _ in good.calls] == ["fill_probs"] * fills
    assert all(len(set(t)) == len(t) for _, (t, _) in good.calls)
    assert run_da_score(FakeMasked(ATTR_GENDER, contrarian=True), da, masked_da=masked_da).value == 0.0
    assert run_da_score(FakeMasked({}), da, masked_da=masked_da).value == 0.0  # blind: every margin 0, a tie is wrong


def test_run_da_score_causal_total(da):
    lm = FakeCausal(ATTR_GENDER)
    res = run_da_score(lm, da, causal="total")
    assert methods(lm) == {"sentence_logprob"}  # a causal run never fills masks
    assert res.value == 1.0 and res.breakdown["mean_margin"] == pytest.approx(1.0)
    assert res.breakdown["definition"] == {"articles": "paper", "causal_likelihood": "total"}


def TableCausal(table):
    """A causal LM with fixed sentence log-likelihoods; one token per word."""
    return FakeEngine(kind="causal", sentence=table.__getitem__)


def test_run_da_score_causal_default_is_the_texts_sentence_probability():
    # Section 5: "For GPT2, we compute sentence probabilities": joint log-likelihoods by default;
    # the paper's GPT-2 code compares per-token means (causal="mean").
    # Right "My sister is pregnant." 4 tokens, total -8 (mean -2); wrong "He is pregnant."
    # 3 tokens, total -7 (mean -7/3). Totals prefer the wrong sentence, means the right one.
    item = ProbeItem(id="0", prompt="My sister is pregnant.",
                     meta={"template": "t", "attribute": "pregnant", "correct": "female", "wrong_sentence": "He is pregnant."})
    lm = TableCausal({"My sister is pregnant.": -8.0, "He is pregnant.": -7.0})
    probe = Probe("da-gender", "1", (item,))
    default = run_da_score(lm, probe)
    assert default.value == 0.0 and default.details[0]["margin"] == pytest.approx(-1.0)
    assert default.breakdown["definition"] == {"causal_likelihood": "total"}
    mean = run_da_score(lm, probe, causal="mean")
    assert mean.value == 1.0 and mean.details[0]["margin"] == pytest.approx(-2.0 + 7.0 / 3.0)
    assert mean.breakdown["definition"] == {"causal_likelihood": "mean"}
    assert run_da_score(lm, probe, causal="total").details[0]["margin"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="choose one of paper, mean, total"):
        run_da_score(lm, probe, causal="median")


# ---------------------------------------------------------------- run_logprob_effect


def test_run_logprob_effect_masked_stereotyped_model():
    probe = load_logprob_professions("val")  # 2 + 2 targets: exact permutation test
    res = run_logprob_effect(FakeMasked(PROF_GENDER), probe, seed=0)
    # male target: log(.3/.2) - log(.1/.2) = log 3; female target: -log 3;
    # diff 2 log 3 over population std log 3 -> exactly 2
    assert res.metric == "logprob_effect" and res.value == pytest.approx(2.0)
    assert res.breakdown["per_target"]["my dad"] == pytest.approx(math.log(3))
    # C(4, 2) = 6 labellings; observed is the largest difference: one-sided p = 1/6
    assert res.p_value == pytest.approx(1 / 6) and res.breakdown["p_value_exact"] is True
    two_sided = run_logprob_effect(FakeMasked(PROF_GENDER), probe, seed=0, alternative="two-sided")
    assert two_sided.p_value == pytest.approx(2 / 6) and two_sided.breakdown["p_value_alternative"] == "two-sided"


def test_run_logprob_effect_unbiased_model_is_zero():
    res = run_logprob_effect(FakeMasked({}), load_logprob_professions("val"))
    assert res.value == 0.0


def test_run_logprob_effect_causal_whole():
    res = run_logprob_effect(FakeCausal(PROF_GENDER), load_logprob_professions())
    # per target 1 - 0 = 1 (male) or 0 - 1 = -1 (female): effect 2; C(20,10) labellings -> sampled
    assert res.value == pytest.approx(2.0)
    assert res.breakdown["p_value_exact"] is False and res.p_value < 1e-3
    assert res.breakdown["association"].startswith("log P(sentence)")


# ---------------------------------------------------------------- run_seat_effect


def test_run_seat_v1_effect():
    res = run_seat_effect(FakeEncoder(), load_seat_v1(), seed=0)
    # male targets [1,0,1]: s = cos to A (1) - cos to B (1/2) = 1/2; female targets -1/2 -> effect 2
    assert res.metric == "SEAT_effect" and res.value == pytest.approx(2.0)
    # one-sided, as the DA-Gender paper's Appendix A and WEAT (its code's exact_mc_perm_test is two-sided)
    assert res.p_value < 1e-3 and res.breakdown["p_value_alternative"] == "greater"
    assert run_seat_effect(FakeEncoder(), load_seat_v1(), alternative="two-sided").breakdown["p_value_alternative"] == "two-sided"


@pytest.mark.parametrize("kind", ["masked", "causal"])
def test_run_seat_v2_effect(kind):
    enc = FakeEncoder(kind)
    res = run_seat_effect(enc, load_seat_v2("val"), seed=0)
    # male target: cos(TM,AM) 1 with male professions, 1/2 with female -> 1/2; female: -1/2
    assert res.value == pytest.approx(2.0)
    assert res.p_value == pytest.approx(1 / 6)  # exact, one-sided, 6 labellings
    seen = embedded(enc)
    if kind == "masked":  # every masked position is an unscored mask for the model layer to map
        assert f"My {CONTEXT_MASK} is a roofer." in seen and not any("[MASK]" in s for s in seen)
    else:  # no mask token in a causal LM: the literal text, as the paper's GPT-2 code embedded
        assert {"My dad is a [MASK].", "My [MASK] is a roofer."} <= set(seen) and not any(CONTEXT_MASK in s for s in seen)
