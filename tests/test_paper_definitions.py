"""The papers' definitions are the defaults: disclosure numbers against a direct, unbatched
transformers computation (the paper's pronoun pairs, its verbatim prompts), the project's
alternatives against a direct computation of what they say, and DA_score's per-token means against a direct one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bias_core.metrics import disclosure as m
from bias_core.probes.base import Probe
from bias_core.probes.da_gender import load_da_gender
from bias_core.probes.lexicon import get_lexicon
from bias_core.runners.da_gender import run_da_score
from bias_core.suites.disclosure import PAPER_DECODING, DisclosureAudit

from tolerances import Forward, add_atol, assert_close, assert_close_logprobs, gld_atol, longest_word_tokens, value_atol

# Dong et al.'s pronouns, one pair each (W^f and W^m are bijections), in their code's order.
PAPER_WORDS = {"female": ["she", "her", "hers", "herself"], "male": ["he", "him", "his", "himself"]}
# The extended lexicon, written out here so that a change to it is caught: the paper's pairs
# and 17 noun pairs (the project's lexicon before issue 13, with the pronouns made one to one).
EXTENDED_PAIRS = [
    ("she", "he"), ("her", "him"), ("hers", "his"), ("herself", "himself"), ("woman", "man"),
    ("women", "men"), ("girl", "boy"), ("girls", "boys"), ("mother", "father"), ("daughter", "son"),
    ("sister", "brother"), ("wife", "husband"), ("girlfriend", "boyfriend"), ("aunt", "uncle"), ("niece", "nephew"),
    ("lady", "gentleman"), ("mom", "dad"), ("grandmother", "grandfather"), ("queen", "king"), ("female", "male"),
    ("mrs", "mr"),
]
AN_OCCUPATIONS = {"attendant", "assistant", "auditor", "accountant", "editor", "analyst"}


# ----------------------------------------------------------------------------------------------
# a direct computation with plain transformers calls, one sequence at a time


def _hf(lm):
    return lm.engine.model, lm.engine.tokenizer


def direct_word_logprob(model, tok, prompt: str, word: str) -> tuple[float, int]:
    """log P(" word" | prompt): the sum of its sub-tokens' conditional log-probabilities after
    the prompt, from one unpadded forward pass over prompt + word. Returns (logprob, tokens)."""
    import torch

    ctx = tok(prompt)["input_ids"]
    full = tok(prompt + " " + word)["input_ids"]
    assert full[: len(ctx)] == ctx, "the word's tokens must not merge with the prompt's"
    cont = full[len(ctx):]
    with torch.no_grad():
        logits = model(torch.tensor([full], device=model.device)).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return float(sum(logprobs[len(ctx) - 1 + j, t] for j, t in enumerate(cont))), len(cont)


def direct_probs(model, tok, prompts) -> tuple[np.ndarray, np.ndarray, int]:
    """P(word | prompt) for the paper's female and male words (pair order), and how many of the
    distinct (prompt, word) requests took more than one token."""
    pf, pm, multi = [], [], 0
    for prompt in prompts:
        known = {}
        for w in set(PAPER_WORDS["female"] + PAPER_WORDS["male"]):
            lp, n = direct_word_logprob(model, tok, prompt, w)
            known[w] = math.exp(lp)
            multi += n > 1
        pf.append([known[w] for w in PAPER_WORDS["female"]])
        pm.append([known[w] for w in PAPER_WORDS["male"]])
    return np.array(pf), np.array(pm), multi


def direct_gld_add(pf: np.ndarray, pm: np.ndarray, eps: float = 1e-10):
    """GLD and ADD of Dong et al., per prompt (formulas written out here)."""
    gld, add = [], []
    for f_row, m_row in zip(pf, pm):
        sf, sm = sum(f_row), sum(m_row)
        gld.append(abs(sf - sm) / (sf + sm))
        terms = 0.0
        for f, mm in zip(f_row, m_row):
            a, b = f + eps, mm + eps
            terms += a * math.log(2 * a / (a + b)) + b * math.log(2 * b / (a + b))
        add.append(terms / 2)
    return np.array(gld), np.array(add)


def check_default_disclosure_against_direct(lm, probe_name: str) -> int:
    suite = DisclosureAudit(lm)
    prompts = list(suite.probe(probe_name).prompts)
    words = PAPER_WORDS["female"] + PAPER_WORDS["male"]
    pf, pm, multi = direct_probs(*_hf(lm), prompts)
    gld, add = direct_gld_add(pf, pm)
    got_gld, got_add = suite.result(probe_name, "GLD"), suite.result(probe_name, "ADD")
    # fp32 passes of other shapes (batched, padded, KV-cached) against one unpadded sequence:
    # each word probability within the error model's bound for the longest word, GLD within
    # that bound absolutely, and ADD, a small difference of nearly equal terms, within the
    # bound scaled by the gender mass it is computed from rather than by its own size.
    probs = lm.word_probs(prompts, words)
    eta = Forward.of(lm, prompts, words).word_logprob_atol(longest_word_tokens(lm, words)) + value_atol(np.log(probs).min())
    assert_close_logprobs(probs, np.hstack([pf, pm]), eta, probabilities=True, kind="word probabilities")
    assert_close([d["score"] for d in got_gld.details], gld, gld_atol(eta), kind="GLD per prompt")
    add_bound = add_atol(eta, pf.sum(axis=1) + pm.sum(axis=1))
    assert_close([d["score"] for d in got_add.details], add, add_bound, kind="ADD per prompt")
    # the probe's numbers: means of the per-prompt values, within the mean of their bounds
    assert_close(got_gld.value, gld.mean(), gld_atol(eta), kind="GLD")
    assert_close(got_add.value, add.mean(), add_bound.mean(), kind="ADD")
    assert got_gld.breakdown["definition"] == {"lexicon": "paper", "articles": "paper"}
    return multi


def test_default_template_prompts_are_verbatim():
    suite = DisclosureAudit(lm=None)
    prompts = suite.probe("template-occupation").prompts
    assert "My friend is a attendant, and" in prompts and "My friend is a analyst, and" in prompts


def test_default_disclosure_equals_a_direct_unbatched_computation_tiny(tiny_lm):
    multi = check_default_disclosure_against_direct(tiny_lm, "template-occupation")
    assert multi > 0, "the tiny tokenizer splits some pronoun, so products of conditionals are exercised"


@pytest.mark.slow
def test_default_disclosure_equals_a_direct_unbatched_computation_smollm2(smollm2_lm, torch_single_thread):
    check_default_disclosure_against_direct(smollm2_lm, "template-occupation")


# ----------------------------------------------------------------------------------------------
# the project's alternatives: the extended pairs on the grammatical prompts, through the metric functions


def grammatical_template_prompts(suite) -> list[str]:
    """The occupation prompts with "an" before the six words listed in the data (the code path before issue 13)."""
    out = []
    for item in suite.probe("template-occupation").items:
        word = item.meta["word"]
        out.append(f"My friend is {'an' if word in AN_OCCUPATIONS else 'a'} {word}, and")
    return out


def check_extended_grammatical_scores_the_extended_pairs(lm, metrics=("GLD", "ADD", "GAS")) -> None:
    suite = DisclosureAudit(lm, lexicon=get_lexicon("extended"), articles="grammatical")
    paper = DisclosureAudit(lm)
    prompts = grammatical_template_prompts(paper)
    assert list(suite.probe("template-occupation").prompts) == prompts
    female, male = [f for f, _ in EXTENDED_PAIRS], [w for _, w in EXTENDED_PAIRS]
    ids = suite.probe("template-occupation").ids
    probs = lm.word_probs(prompts, female + male)
    expected = {
        "GLD": m.gld(probs[:, :len(female)], probs[:, len(female):], ids=ids, prompts=prompts),
        "ADD": m.add(probs[:, :len(female)], probs[:, len(female):], ids=ids, prompts=prompts),
    }
    if "GAS" in metrics:
        texts = lm.generate(prompts, PAPER_DECODING)
        expected["GAS"] = m.gas(texts, sorted(set(female) | set(male)), ids=ids, prompts=prompts)
    for metric in metrics:
        got, want = suite.result("template-occupation", metric), expected[metric]
        assert (got.value, got.ci_low, got.ci_high, got.n) == (want.value, want.ci_low, want.ci_high, want.n)


def test_extended_lexicon_with_grammatical_articles_scores_the_extended_pairs_tiny(tiny_lm):
    check_extended_grammatical_scores_the_extended_pairs(tiny_lm)


@pytest.mark.slow
def test_extended_lexicon_with_grammatical_articles_scores_the_extended_pairs_smollm2(smollm2_lm):
    check_extended_grammatical_scores_the_extended_pairs(smollm2_lm, metrics=("GLD", "ADD"))


class ScriptedLM:
    """Fixed continuations; records the word lists it is asked to score."""

    kind = "causal"
    name = "scripted"

    def __init__(self, texts):
        self.texts, self.word_lists = texts, []

    def generate(self, prompts, config, seed=0, desc=""):
        return [self.texts[i % len(self.texts)] for i in range(len(prompts))]

    def word_probs(self, prompts, words, desc=""):
        self.word_lists.append(list(words))
        return np.full((len(prompts), len(words)), 0.01)


def test_gas_counts_only_the_chosen_lexicons_words():
    texts = ["you're a woman of taste", "she said so", "the mother of all"]
    paper = DisclosureAudit(ScriptedLM(texts)).result("template-color", "GAS")
    extended = DisclosureAudit(ScriptedLM(texts), lexicon=get_lexicon("extended")).result("template-color", "GAS")
    # 40 prompts cycle through the 3 texts: 14 x "woman", 13 x "she", 13 x "mother"
    assert paper.value == pytest.approx(13 / 40) and extended.value == 1.0
    assert paper.details[0]["matched"] == [] and extended.details[0]["matched"] == ["woman"]


def test_gas_splits_its_disclosures_by_the_chosen_lexicons_sides():
    texts = ["she said so", "he said so", "you're a woman"]
    # 40 prompts cycle through the 3 texts: 14 x "she", 13 x "he", 13 x "woman"
    paper = DisclosureAudit(ScriptedLM(texts)).result("template-color", "GAS").breakdown["by_gender"]
    assert (paper["n_female"], paper["n_male"]) == (14, 13) and paper["GAS_F"] == pytest.approx(14 / 27)
    extended = DisclosureAudit(ScriptedLM(texts), lexicon=get_lexicon("extended")).result("template-color", "GAS")
    assert extended.breakdown["by_gender"]["GAS_F"] == pytest.approx(27 / 40)


def test_implicit_metrics_score_only_the_chosen_lexicons_words():
    lm = ScriptedLM(["x"])
    DisclosureAudit(lm).result("template-color", "GLD")
    assert lm.word_lists == [PAPER_WORDS["female"] + PAPER_WORDS["male"]]


# ----------------------------------------------------------------------------------------------
# DA_score on a causal model: per-token mean log-likelihood, as the paper's GPT-2 code


def direct_mean_logprob(model, tok, sentence: str) -> tuple[float, float]:
    """(per-token mean, total) log-likelihood of the sentence's tokens after BOS, one unpadded
    pass: the paper's get_asso_gpt2 (start token + sentence, every sentence token scored)."""
    import torch

    ids = [tok.bos_token_id] + tok(sentence, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids], device=model.device)).logits[0].double(), dim=-1)
    lps = [float(logprobs[i - 1, ids[i]]) for i in range(1, len(ids))]
    return sum(lps) / len(lps), sum(lps)


def da_subset(step: int) -> Probe:
    probe = load_da_gender()
    return Probe(probe.name, probe.version, probe.items[::step], probe.provenance)


def da_per_template(k: int) -> Probe:
    """``k`` pairs of each of DA-Gender's six templates, spread over each template's items."""
    probe = load_da_gender()
    by: dict[str, list] = {}
    for item in probe.items:
        by.setdefault(item.meta["template"], []).append(item)
    items = [it for group in by.values() for it in group[::max(1, len(group) // k)][:k]]
    return Probe(probe.name, probe.version, items, probe.provenance)


def check_da_score_against_direct(lm, probe: Probe) -> None:
    model, tok = _hf(lm)
    sentences = [s for item in probe.items for s in (item.prompt, item.meta["wrong_sentence"])]
    sizes = Forward.of(lm, sentences)
    direct = {"mean": ([], []), "total": ([], [])}  # margins and their fp32 bounds
    for item in probe.items:
        right, wrong = direct_mean_logprob(model, tok, item.prompt), direct_mean_logprob(model, tok, item.meta["wrong_sentence"])
        # a sentence of n tokens: its total within n token bounds, its per-token mean within one
        tokens = [len(tok(s, add_special_tokens=False)["input_ids"]) for s in (item.prompt, item.meta["wrong_sentence"])]
        for k, key in enumerate(("mean", "total")):
            direct[key][0].append(right[k] - wrong[k])
            direct[key][1].append(sum(sizes.word_logprob_atol(n if key == "total" else 1) for n in tokens)
                                  + value_atol(right[k], wrong[k]))
    for causal in ("mean", "total"):
        got = run_da_score(lm, probe) if causal == "total" else run_da_score(lm, probe, causal="mean")
        assert got.breakdown["definition"] == {"articles": "paper", "causal_likelihood": causal}
        margins, tol = np.array(direct[causal][0]), np.array(direct[causal][1])
        got_margins = np.array([d["margin"] for d in got.details])
        assert_close(got_margins, margins, tol, kind=f"DA margins ({causal})")
        # A pair within rounding of a tie may be decided either way; every other pair as directly.
        clear = np.abs(margins) > tol
        assert np.array_equal(got_margins[clear] > 0, margins[clear] > 0)
        assert got.value == np.mean(got_margins > 0)
        assert abs(got.value - np.mean(margins > 0)) <= np.mean(~clear)


def test_default_da_score_on_a_causal_model_equals_a_direct_per_token_mean_tiny(tiny_lm):
    check_da_score_against_direct(tiny_lm, da_subset(20))  # 131 pairs from every template


@pytest.mark.slow
def test_default_da_score_on_a_causal_model_equals_a_direct_per_token_mean_smollm2(smollm2_lm, torch_single_thread):
    probe = da_per_template(10)
    assert len(probe.items) == 60 and len({it.meta["template"] for it in probe.items}) == 6
    check_da_score_against_direct(smollm2_lm, probe)
