"""DA_score on masked and seq2seq LMs: the DA-Gender paper's definition (section 5: mask the
target, compare the two options' probabilities) by default, its code's Kurita associations
behind ``masked_da="kurita"``; against a direct computation on tiny BERT and BART models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.da_gender import load_da_gender
from bias_core.runners.da_gender import da_margins, run_da_score

from harness import load_tiny
from tiny_model import build_tiny_bart, build_tiny_masked_lm
from tolerances import Forward, longest_word_tokens


def direct_fill_prob(lm, text: str, word: str) -> float:
    """P(word at the [MASK] of text) from unpadded forward passes of the Hugging Face model: as
    many mask tokens as the word has tokens (WordPiece as is; BART's byte-level BPE with a
    leading space after a space), filled left to right, the product of the conditionals."""
    tok, model = lm.engine.tokenizer, lm.engine.model
    spaced = lm.kind == "seq2seq" and text.index("[MASK]") > 0 and text[text.index("[MASK]") - 1] == " "
    word_ids = list(tok((" " if spaced else "") + word, add_special_tokens=False)["input_ids"])
    masks = (" " if lm.kind == "masked" else "").join([tok.mask_token] * len(word_ids))
    ids = list(tok(text.replace("[MASK]", masks))["input_ids"])
    slots = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    prob = 1.0
    for slot, target in zip(slots, word_ids):
        with torch.no_grad():
            inputs = torch.tensor([ids], device=model.device)
            if lm.kind == "seq2seq":  # the decoder reads the input shifted right by one
                decoder = torch.tensor([[model.config.decoder_start_token_id] + ids[:-1]], device=model.device)
                logits = model(input_ids=inputs, decoder_input_ids=decoder).logits[0]
            else:
                logits = model(input_ids=inputs).logits[0]
        prob *= float(torch.softmax(logits[slot].double(), -1)[target])
        ids[slot] = target
    return prob


# targets whose words are one token in the tiny models' vocabularies
TINY_TARGETS = ("he", "this man", "this boy", "my father")
ATTRIBUTES = ("danseur", "matriarch", "pregnant", "male", "female", "her", "his", "bride", "widower")


def _item(correct: str, tm: str, tam: dict[str, str]) -> ProbeItem:
    meta = {"template": "t", "attribute": "a", "correct": correct, "wrong_sentence": "w",
            "male": {"word": "he", "tm": tm, "tam": tam["he"]}, "female": {"word": "she", "tm": tm, "tam": tam["she"]}}
    return ProbeItem(id=correct, prompt="s", meta=meta)


def test_the_papers_definition_and_its_codes_disagree_where_the_targets_priors_differ():
    # "[MASK] is a danseur." (male is right). Attribute shown: P(he) 0.2, P(she) 0.3; both masked
    # ("[MASK] is a [MASK_CONTEXT]."): P(he) 0.05, P(she) 0.3.
    fills = {("[MASK] is a danseur.", "he"): 0.2, ("[MASK] is a danseur.", "she"): 0.3,
             ("[MASK] is a [MASK_CONTEXT].", "he"): 0.05, ("[MASK] is a [MASK_CONTEXT].", "she"): 0.3}
    lm = FakeEngine(kind="masked", fill=lambda t, w: fills[(t, w)])
    probe = Probe("da-gender", "1", (_item("male", "[MASK] is a danseur.", {"he": "[MASK] is a [MASK_CONTEXT].",
                                                                           "she": "[MASK] is a [MASK_CONTEXT]."}),))
    # the paper (section 5): the more probable option wins: log 0.2 - log 0.3 < 0, wrong
    paper = run_da_score(lm, probe)
    assert paper.details[0]["margin"] == pytest.approx(math.log(0.2 / 0.3)) and paper.value == 0.0
    assert paper.breakdown["definition"] == {"masked_da": "probability"}
    # its code: log(0.2/0.05) - log(0.3/0.3) = log 4 > 0, right
    code = run_da_score(lm, probe, masked_da="kurita")
    assert code.details[0]["margin"] == pytest.approx(math.log(4)) and code.value == 1.0
    assert code.breakdown["definition"]["masked_da"] == "kurita"


def test_an_unknown_masked_definition_is_refused_before_any_model_call():
    lm = FakeEngine(kind="masked", fill=lambda t, w: 0.5)
    with pytest.raises(ValueError, match="masked_da 'pll': choose one of probability, kurita"):
        run_da_score(lm, load_da_gender(), masked_da="pll")
    assert lm.calls == []


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    return {"bert": build_tiny_masked_lm(tmp_path_factory.mktemp("da-bert"), seed=0),
            "bart": build_tiny_bart(tmp_path_factory.mktemp("da-bart"), seed=0)}


@pytest.fixture(scope="module")
def tiny_probe():
    full = load_da_gender()
    items = tuple(it for it in full.items if it.meta["male_target"] in TINY_TARGETS and it.meta["attribute"] in ATTRIBUTES)
    return Probe(full.name, full.version, items, full.provenance)


@pytest.mark.parametrize("kind", ["bert", "bart"])
def test_da_score_on_a_tiny_masked_model_equals_a_direct_comparison_of_the_two_options(
        kind, tiny_dirs, tiny_probe, tmp_path, torch_single_thread, device):
    lm = load_tiny(tiny_dirs[kind], device, cache_dir=tmp_path / "cache")
    res = run_da_score(lm, tiny_probe)
    assert res.n == len(tiny_probe.items) > 40
    # by hand: per pair, the attribute-shown sentence with the target masked, P(right option) and
    # P(wrong option) from a direct unbatched forward pass; the right one must be the more probable
    expected, words = [], set()
    for it in tiny_probe.items:
        m = it.meta
        right, wrong = m[m["correct"]], m["female" if m["correct"] == "male" else "male"]
        assert right["tm"] == wrong["tm"]  # one sentence, two options for its masked target
        words |= {right["word"], wrong["word"]}
        expected.append(math.log(direct_fill_prob(lm, right["tm"], right["word"]))
                        - math.log(direct_fill_prob(lm, wrong["tm"], wrong["word"])))
    expected = np.array(expected)
    margins = np.array([d["margin"] for d in res.details])
    texts = [it.meta["male"]["tm"].replace("[MASK]", "") for it in tiny_probe.items]
    bound = 2 * Forward.of(lm, texts, sorted(words)).word_logprob_atol(longest_word_tokens(lm, sorted(words)))
    np.testing.assert_allclose(margins, expected, rtol=0, atol=bound)
    decided = np.abs(expected) > bound  # a pair within rounding of a tie may go either way
    assert decided.sum() > 0.9 * len(expected)
    assert np.array_equal((margins > 0)[decided], (expected > 0)[decided])
    assert res.value == pytest.approx(float((margins > 0).mean()))
    # the code's definition (Kurita ratios) is another number: the old default fails the above
    kurita = da_margins(lm, tiny_probe, masked_da="kurita")
    assert np.max(np.abs(kurita - expected)) > 10 * bound
