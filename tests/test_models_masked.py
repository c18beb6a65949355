"""The scoring protocol (sentence_logprob, fill_probs, topk_fills, embed) of masked LMs, BART
and causal LMs, against hand-written computations on tiny local models.

No masked LM ships offline, so BERT and BART are tiny random models built from configs with
locally built tokenizers (tests/tiny_model.py). Every reference value is computed directly with
the Hugging Face model, one unpadded sequence at a time, with the published rule written out
here (which positions are masked, which token form a word takes, what is averaged), without
bias_core's batching, caching or in-context word alignment.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bias_core.errors import AuditUsageError
from bias_core.models import MODEL_ALIASES, resolve_model
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.engines.hf.masked import MaskedLM
from bias_core.models.registry import detect_kind

from harness import load_tiny
from lm_references import ForwardCounter
from tiny_model import build_tiny_bart, build_tiny_masked_lm, build_tokenizer
from tolerances import (
    Forward,
    assert_close,
    assert_close_logprobs,
    assert_close_rows,
    assert_same_ranking,
    longest_word_tokens,
)

SENTENCES = [
    "My friend is a nurse, and she said that her job is hard.",
    "He is a good person.",
    "She is a good person.",
    "The doctor said that he was tired.",
    "The nurse said that she was tired.",
    "The engineer fixed the car, and the mechanic paid for it.",
    "They are good people.",
    "My cousin is a pilot.",
    "Our colleague is a teacher, and he likes to paint.",
    "The man and the woman.",
    "Her book, his book.",
]
SLOT_TEXTS = [
    "My friend is a [MASK].",
    "The [MASK] said that she was tired.",
    "[MASK] is a good person.",
    "My cousin is a [MASK], and he said that his job is hard.",
    "The man and the [MASK].",
    "Our colleague said that [MASK] was tired.",
    "The [MASK] fixed the car.",
]
WORDS = ["nurse", "doctor", "she", "he", "nurses", "hairdresser"]
MULTI_TOKEN_WORDS = ["nurses", "hairdresser"]


# ----- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory):
    return build_tiny_masked_lm(tmp_path_factory.mktemp("tiny-bert"), seed=0)


@pytest.fixture(scope="session")
def bart_dir(tmp_path_factory):
    return build_tiny_bart(tmp_path_factory.mktemp("tiny-bart"), seed=0)


def _load(folder, tmp_path, device, use_cache=False):
    return load_tiny(folder, device, cache_dir=tmp_path / "cache", use_cache=use_cache)


@pytest.fixture
def bert(bert_dir, tmp_path, torch_single_thread, device):
    return _load(bert_dir, tmp_path, device)


@pytest.fixture
def bart(bart_dir, tmp_path, torch_single_thread, device):
    return _load(bart_dir, tmp_path, device)


@pytest.fixture(params=["bert", "bart"])
def masked(request, bert, bart):
    return {"bert": bert, "bart": bart}[request.param]


# ----- hand-written references -------------------------------------------------------------------
def _logits(lm, ids: list[int]) -> torch.Tensor:
    """All positions' raw logits for one unpadded sequence, in float64.

    BART's decoder input is written out as the published rule: decoder start token, then the
    input shifted right by one, so position i is predicted from tokens before i.
    """
    with torch.no_grad():
        if lm.kind == "seq2seq":
            decoder = [lm.engine.model.config.decoder_start_token_id] + ids[:-1]
            out = lm.engine.model(input_ids=torch.tensor([ids], device=lm.engine.model.device),
                           decoder_input_ids=torch.tensor([decoder], device=lm.engine.model.device))
        else:
            out = lm.engine.model(input_ids=torch.tensor([ids], device=lm.engine.model.device))
    return out.logits[0].double()


def direct_pll(lm, sentence: str) -> float:
    """Salazar et al.: mask each token between the leading [CLS]/<s> and final [SEP]/</s>."""
    tok = lm.engine.tokenizer
    ids = list(tok(sentence)["input_ids"])
    assert ids[0] in (tok.cls_token_id, tok.bos_token_id) and ids[-1] in (tok.sep_token_id, tok.eos_token_id)
    total = 0.0
    for i in range(1, len(ids) - 1):
        masked = ids[:i] + [tok.mask_token_id] + ids[i + 1 :]
        total += float(torch.log_softmax(_logits(lm, masked)[i], -1)[ids[i]])
    return total


def word_form(lm, text: str, word: str) -> list[int]:
    """The word's tokens: WordPiece as is; byte-level BPE with a leading space after a space."""
    spaced = lm.kind == "seq2seq" and text.index("[MASK]") > 0 and text[text.index("[MASK]") - 1] == " "
    return list(lm.engine.tokenizer((" " if spaced else "") + word, add_special_tokens=False)["input_ids"])


def direct_fill_prob(lm, text: str, word: str) -> float:
    """n mask tokens in the slot for an n-token word, filled left to right, product of conditionals."""
    tok = lm.engine.tokenizer
    word_ids = word_form(lm, text, word)
    masks = (" " if lm.kind == "masked" else "").join([tok.mask_token] * len(word_ids))
    ids = list(tok(text.replace("[MASK]", masks))["input_ids"])
    slots = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    assert len(slots) == len(word_ids)
    prob = 1.0
    for slot, target in zip(slots, word_ids):
        prob *= float(torch.softmax(_logits(lm, ids)[slot], -1)[target])
        ids[slot] = target
    return prob


def slot_distribution(lm, text: str) -> torch.Tensor:
    tok = lm.engine.tokenizer
    ids = list(tok(text.replace("[MASK]", tok.mask_token))["input_ids"])
    return torch.softmax(_logits(lm, ids)[ids.index(tok.mask_token_id)], -1)


def is_whole_word_token(lm, text: str, token: str) -> bool:
    """WordPiece: not a ##continuation. Byte-level BPE: starts a word (Ġ) iff a space precedes the slot."""
    if lm.kind == "masked":
        return not token.startswith("##")
    spaced = text.index("[MASK]") > 0 and text[text.index("[MASK]") - 1] == " "
    return token.startswith("Ġ") and len(token) > 1 if spaced else not token.startswith("Ġ")


def direct_topk(lm, text: str, k: int) -> list[tuple[str, float]]:
    tok = lm.engine.tokenizer
    probs = slot_distribution(lm, text)
    order = sorted(range(len(tok)), key=lambda t: (-float(probs[t]), t))
    names = tok.convert_ids_to_tokens(order)
    found = [(tok.decode([t]).strip(), float(probs[t])) for t, name in zip(order, names)
             if t not in tok.all_special_ids and is_whole_word_token(lm, text, name)]
    # A lone byte of a multi-byte character decodes to U+FFFD: not a word.
    return [(w, p) for w, p in found if w and "\ufffd" not in w][:k]


def direct_mean_embedding(lm, sentence: str) -> np.ndarray:
    """Mean of the last layer (BART: the encoder's) over tokens between the special ends."""
    ids = torch.tensor([lm.engine.tokenizer(sentence)["input_ids"]], device=lm.engine.model.device)
    with torch.no_grad():
        if lm.kind == "seq2seq":
            hidden = lm.engine.model(input_ids=ids).encoder_last_hidden_state[0]
        else:
            hidden = lm.engine.model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
    return hidden[1:-1].double().mean(0).cpu().numpy()


def sizes_of(lm, texts=None) -> Forward:
    """The fp32 error model's sizes of ``lm`` on this file's sentences and slot texts."""
    return Forward.of(lm, texts or SENTENCES + [t.replace("[MASK]", "") for t in SLOT_TEXTS], WORDS)


def sentence_bounds(lm, sentences=SENTENCES) -> list[float]:
    """A sentence's log-likelihood adds one scored token per token: its bound, per sentence."""
    sizes = sizes_of(lm)
    return [sizes.word_logprob_atol(len(lm.engine.tokenizer(s)["input_ids"])) for s in sentences]


def word_bound(lm, words=WORDS) -> float:
    return sizes_of(lm).word_logprob_atol(longest_word_tokens(lm, words))


def at_batch_size(lm, size, call):
    old, lm.batch_size = lm.batch_size, size
    try:
        return call()
    finally:
        lm.batch_size = old


# ----- the tiny models themselves ----------------------------------------------------------------
def test_tiny_tokenizers_have_single_and_multi_token_words(bert, bart):
    for lm in (bert, bart):
        text = "My friend is a [MASK]."
        for word in ("she", "he", "nurse", "doctor"):
            assert len(word_form(lm, text, word)) == 1, (lm.kind, word)
        for word in MULTI_TOKEN_WORDS:
            assert len(word_form(lm, text, word)) >= 2, (lm.kind, word)
    # BART's <mask> takes the space before it, so the slot wants the leading-space form.
    assert bart.engine.tokenizer.convert_ids_to_tokens(word_form(bart, "a [MASK].", "she")) == ["Ġshe"]
    assert bart.engine.tokenizer.convert_ids_to_tokens(word_form(bart, "[MASK] is", "She")) == ["She"]


@pytest.mark.parametrize("build", [build_tiny_masked_lm, build_tiny_bart])
def test_tiny_builders_are_deterministic_for_a_seed(tmp_path, build, torch_single_thread):
    a, b, other = build(tmp_path / "a", seed=0), build(tmp_path / "b", seed=0), build(tmp_path / "c", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() != (other / "model.safetensors").read_bytes()


# ----- kinds, registry and loading ---------------------------------------------------------------
def test_local_dirs_load_as_their_kind(bert, bart, tiny_lm, bert_dir, bart_dir, tiny_model_dir):
    assert (resolve_model(str(bert_dir)).kind, resolve_model(str(bart_dir)).kind) == ("masked", "seq2seq")
    assert resolve_model(str(tiny_model_dir)).kind == "causal"
    assert isinstance(bert.engine, MaskedLM) and bert.kind == "masked"
    assert type(bert.engine.model).__name__ == "BertForMaskedLM"
    assert isinstance(bart.engine, MaskedLM) and bart.kind == "seq2seq"
    assert type(bart.engine.model).__name__ == "BartForConditionalGeneration"
    assert isinstance(tiny_lm.engine, CausalLM) and tiny_lm.kind == "causal"


@pytest.mark.parametrize("config, kind", [
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, "masked"),
    ({"model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}, "masked"),
    ({"model_type": "distilbert"}, "masked"),
    ({"model_type": "albert", "architectures": ["AlbertForMaskedLM"]}, "masked"),
    ({"model_type": "somebert", "architectures": ["SomeBertForMaskedLM"]}, "masked"),
    ({"model_type": "bart", "architectures": ["BartModel"]}, "seq2seq"),
    ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, "causal"),
    ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "causal"),
])
def test_detect_kind_from_config(tmp_path, config, kind):
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert detect_kind(tmp_path) == kind


def test_detect_kind_without_config_and_for_other_encoder_decoders(tmp_path):
    assert detect_kind(tmp_path) == "causal"
    assert detect_kind(tmp_path, default="masked") == "masked"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "is_encoder_decoder": True}))
    with pytest.raises(AuditUsageError, match="encoder-decoder") as err:
        detect_kind(tmp_path)
    assert "Fix:" in str(err.value)


@pytest.mark.parametrize("alias, hub_id, kind", [
    ("bert-base", "bert-base-uncased", "masked"),
    ("bert-large", "bert-large-uncased", "masked"),
    ("bart-base", "facebook/bart-base", "seq2seq"),
    ("bart-large", "facebook/bart-large", "seq2seq"),
    ("gpt2", "openai-community/gpt2", "causal"),
    ("gpt2-medium", "openai-community/gpt2-medium", "causal"),
])
def test_paper_aliases_have_hub_ids_and_kinds(alias, hub_id, kind):
    spec = resolve_model(alias)
    assert spec is MODEL_ALIASES[alias]
    assert (spec.hub_id, spec.kind, spec.local_dir, spec.package) == (hub_id, kind, None, None)


def test_other_registry_models_are_causal():
    assert MODEL_ALIASES["llama2-7b"].kind == "causal" and MODEL_ALIASES["smollm2-135m"].kind == "causal"


# ----- masked: each method against the hand-written computation ----------------------------------
def test_pll_equals_direct_computation(masked):
    got = masked.sentence_logprob(SENTENCES)
    assert got.dtype == np.float64 and got.shape == (len(SENTENCES),)
    expected = [direct_pll(masked, s) for s in SENTENCES]
    assert_close_logprobs(got, expected, sentence_bounds(masked))
    assert (got < 0).all()


def test_pll_scores_every_token_but_the_special_ones(bert):
    """One masked copy (one forward row) per non-special token of each sentence."""
    rows = []
    bert.engine.model.register_forward_hook(lambda m, args, kw, out: rows.append(kw["input_ids"].shape[0]), with_kwargs=True)
    sentence = "She is a good person."
    bert.sentence_logprob([sentence])
    assert sum(rows) == len(bert.engine.tokenizer(sentence)["input_ids"]) - 2 == 6


def test_fill_probs_equal_direct_computation(masked):
    got = masked.fill_probs(SLOT_TEXTS, WORDS)
    assert got.shape == (len(SLOT_TEXTS), len(WORDS)) and got.dtype == np.float64
    expected = np.array([[direct_fill_prob(masked, t, w) for w in WORDS] for t in SLOT_TEXTS])
    # On the log scale: multi-token words have tiny probabilities where an absolute tolerance means nothing.
    assert_close_logprobs(got, expected, word_bound(masked), probabilities=True)
    assert (got > 0).all() and (got < 1).all()


def test_fill_probs_single_token_word_is_one_softmax_entry(masked):
    text = "My friend is a [MASK]."
    token = word_form(masked, text, "nurse")[0]
    raw = float(slot_distribution(masked, text)[token])
    assert_close_logprobs(masked.fill_probs([text], ["nurse"])[0, 0], raw, sizes_of(masked).token_logprob_atol(),
                          probabilities=True)


def test_fill_probs_multi_token_word_is_product_not_first_token(masked):
    text, word = "My friend is a [MASK].", "nurses"
    first = word_form(masked, text, word)[0]
    # The first token's probability with as many masks as the word has tokens.
    n = len(word_form(masked, text, word))
    masks = (" " if masked.kind == "masked" else "").join([masked.engine.tokenizer.mask_token] * n)
    ids = list(masked.engine.tokenizer(text.replace("[MASK]", masks))["input_ids"])
    first_only = float(torch.softmax(_logits(masked, ids)[ids.index(masked.engine.tokenizer.mask_token_id)], -1)[first])
    got = float(masked.fill_probs([text], [word])[0, 0])
    assert_close_logprobs(got, direct_fill_prob(masked, text, word), word_bound(masked, [word]), probabilities=True)
    assert got < first_only * 0.99  # a later token's conditional (< 1) is multiplied in


@pytest.mark.parametrize("k", [1, 5, 12])
def test_topk_fills_equal_direct_computation(masked, k):
    texts = SLOT_TEXTS[:4]
    got = masked.topk_fills(texts, k)
    bound = sizes_of(masked).token_logprob_atol()
    for text, row in zip(texts, got):
        assert len(row) == k
        assert all(isinstance(w, str) and w == w.strip() and w for w, _ in row)
        assert_same_ranking(row, direct_topk(masked, text, k), bound)


def test_topk_probability_equals_fill_probs_of_that_word(masked):
    text = SLOT_TEXTS[0]
    top = masked.topk_fills([text], 5)[0]
    assert_close_logprobs(masked.fill_probs([text], [w for w, _ in top])[0], [p for _, p in top],
                          sizes_of(masked).token_logprob_atol(), probabilities=True)


def test_embed_equals_direct_mean_pooling(masked):
    got = masked.embed(SENTENCES)
    hidden = masked.engine.model.config.d_model if masked.kind == "seq2seq" else masked.engine.model.config.hidden_size
    assert got.shape == (len(SENTENCES), hidden) and got.dtype == np.float64
    expected = np.vstack([direct_mean_embedding(masked, s) for s in SENTENCES])
    assert_close_rows(got, expected, sizes_of(masked).hidden_rtol())


def test_bart_mask_fill_reads_the_default_shifted_decoder_input(bart):
    """The reference above writes the decoder input out; HF's default shifting must agree."""
    tok = bart.engine.tokenizer
    ids = list(tok("My friend is a <mask>.")["input_ids"])
    with torch.no_grad():
        default = bart.engine.model(input_ids=torch.tensor([ids], device=bart.engine.model.device)).logits[0].double()
    sizes = sizes_of(bart)
    assert_close(default.cpu().numpy(), _logits(bart, ids).cpu().numpy(), sizes.logit_atol(), kind="logits")
    got = bart.fill_probs(["My friend is a [MASK]."], ["nurse"])[0, 0]
    slot_probs = torch.softmax(default[ids.index(tok.mask_token_id)], -1)
    assert_close_logprobs(got, float(slot_probs[word_form(bart, "a [MASK]", "nurse")[0]]), sizes.token_logprob_atol(),
                          probabilities=True)


# ----- batch-size invariance, call independence, caching -----------------------------------------
def _all_ops(lm, texts=SLOT_TEXTS, sentences=SENTENCES):
    return (lm.sentence_logprob(sentences), lm.fill_probs(texts, WORDS), lm.topk_fills(texts, 5), lm.embed(sentences))


def _check_same_results(lm, got, expected, sentences):
    """Two computations of _all_ops on the same inputs: equal within the fp32 bounds."""
    sizes = sizes_of(lm)
    assert_close_logprobs(got[0], expected[0], sentence_bounds(lm, sentences))
    assert_close_logprobs(got[1], expected[1], word_bound(lm), probabilities=True)
    for row, want in zip(got[2], expected[2]):
        assert_same_ranking(row, want, sizes.token_logprob_atol())
    assert_close_rows(got[3], expected[3], sizes.hidden_rtol())


def _check_invariance(lm, sentences, texts):
    one = at_batch_size(lm, 1, lambda: _all_ops(lm, texts, sentences))
    seven = at_batch_size(lm, 7, lambda: _all_ops(lm, texts, sentences))
    _check_same_results(lm, seven, one, sentences)


def test_masked_batch_size_invariance(masked):
    lengths = [len(masked.engine.tokenizer(s)["input_ids"]) for s in SENTENCES]
    assert len(set(lengths)) >= 4 and len(set(lengths)) < len(lengths)  # several widths, shared widths
    _check_invariance(masked, SENTENCES, SLOT_TEXTS)


def test_masked_results_do_not_depend_on_other_inputs_in_the_call(masked):
    together = _all_ops(masked)
    alone = [_all_ops(masked, [t], [s]) for t, s in zip(SLOT_TEXTS[:3], SENTENCES[:3])]
    first_three = (together[0][:3], together[1][:3], together[2][:3], together[3][:3])
    stacked = ([a[0][0] for a in alone], np.vstack([a[1] for a in alone]), [a[2][0] for a in alone],
               np.vstack([a[3] for a in alone]))
    _check_same_results(masked, first_three, stacked, SENTENCES[:3])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(list(range(len(WORDS)))))
def test_fill_probs_columns_follow_the_word_order(bert, order):
    base = bert.fill_probs(SLOT_TEXTS[:2], WORDS)
    permuted = bert.fill_probs(SLOT_TEXTS[:2], [WORDS[i] for i in order])
    assert_close_logprobs(permuted, base[:, order], word_bound(bert), probabilities=True)


@pytest.mark.parametrize("which", ["bert", "bart"])
def test_masked_cache_second_call_recomputes_nothing(which, bert_dir, bart_dir, tmp_path, torch_single_thread, device):
    folder = {"bert": bert_dir, "bart": bart_dir}[which]
    lm = _load(folder, tmp_path, device, use_cache=True)
    counter = ForwardCounter(lm.engine.model)
    encoder_counter = ForwardCounter(lm.engine.model.get_encoder() if lm.kind == "seq2seq" else lm.engine.model.base_model)
    first = _all_ops(lm)
    assert counter.reset() > 0 and encoder_counter.reset() > 0
    hits = lm.cache.hits
    second = _all_ops(lm)
    assert counter.calls == 0 and encoder_counter.calls == 0
    assert lm.cache.hits == hits + 2 * len(SENTENCES) + 2 * len(SLOT_TEXTS)
    assert second[0].tolist() == first[0].tolist() and second[1].tolist() == first[1].tolist()
    assert second[2] == first[2] and second[3].tolist() == first[3].tolist()
    # A new handle on the same folder and cache directory reads the same entries.
    again = _load(folder, tmp_path, device, use_cache=True)
    fresh = ForwardCounter(again.engine.model)
    assert again.fill_probs(SLOT_TEXTS, WORDS).tolist() == first[1].tolist()
    assert fresh.calls == 0
    # Another word list is another entry.
    again.fill_probs(SLOT_TEXTS[:1], ["she", "he"])
    assert fresh.calls > 0


# ----- usage errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["My friend is a nurse.", "The [MASK] and the [MASK]."])
def test_slot_count_other_than_one_is_a_usage_error(masked, tiny_lm, text):
    for lm in (masked, tiny_lm):
        with pytest.raises(AuditUsageError, match="exactly one") as err:
            lm.fill_probs([text], ["she"])
        assert "Fix:" in str(err.value)
    with pytest.raises(AuditUsageError, match="exactly one"):
        masked.topk_fills([text], 3)


def test_masked_models_refuse_loglikelihood(masked):
    with pytest.raises(AuditUsageError, match="causal LM"):
        masked.loglikelihood([("He said", " she")])


def test_word_glued_to_the_slot_is_a_usage_error(bert):
    with pytest.raises(AuditUsageError, match="space or punctuation"):
        bert.fill_probs(["My friend is a [MASK]e."], ["nurs"])  # one token "nurse" spans slot and text
    # A word whose tokens end where the slot ends is fine even without a space.
    assert bert.fill_probs(["My friend is a [MASK]s."], ["nurse"])[0, 0] > 0


def test_masked_text_too_long_is_a_usage_error(bert):
    with pytest.raises(AuditUsageError, match="too long"):
        bert.sentence_logprob(["she " * 200])


# ----- causal: the protocol methods --------------------------------------------------------------
def direct_causal_sentence_logprob(lm, sentence: str, prefix_id: int) -> float:
    ids = [prefix_id] + list(lm.engine.tokenizer(sentence, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        logits = lm.engine.model(input_ids=torch.tensor([ids], device=lm.engine.model.device)).logits[0].double()
    logprobs = torch.log_softmax(logits, -1)
    return float(sum(logprobs[i - 1, ids[i]] for i in range(1, len(ids))))


def test_causal_prefix_token_is_bos_whenever_defined_else_eos(tiny_lm):
    # lm-evaluation-harness's rule: a BOS the tokenizer defines but never prepends (SmolLM2)
    # is still the empty context's token; EOS only when there is no BOS at all.
    assert tiny_lm.engine.prefix_token_id() == tiny_lm.engine.tokenizer.bos_token_id
    tok = build_tokenizer()
    tok._tokenizer.post_processor = None  # BOS defined but never prepended
    assert tok("a")["input_ids"] == tok("a", add_special_tokens=False)["input_ids"]
    engine = CausalLM.__new__(CausalLM)
    engine.tokenizer, engine.name = tok, "no-bos"
    assert engine.prefix_token_id() == tok.bos_token_id != tok.eos_token_id
    tok.bos_token = None
    assert engine.prefix_token_id() == tok.eos_token_id


def test_causal_sentence_logprob_equals_direct_computation(tiny_lm):
    got = tiny_lm.sentence_logprob(SENTENCES)
    assert got.dtype == np.float64 and got.shape == (len(SENTENCES),)
    bos = tiny_lm.engine.tokenizer.bos_token_id
    expected = [direct_causal_sentence_logprob(tiny_lm, s, bos) for s in SENTENCES]
    assert_close_logprobs(got, expected, sentence_bounds(tiny_lm))
    # The first word is scored too: not the same as scoring the rest after the first token.
    first_dropped = tiny_lm.loglikelihood([("My", " friend is a nurse, and she said that her job is hard.")])[0]
    assert got[0] < first_dropped


def test_causal_fill_probs_are_next_word_probabilities(tiny_lm):
    texts = ["My friend is a nurse, and [MASK]", "The man said [MASK]"]
    got = tiny_lm.fill_probs(texts, WORDS)
    assert_close_logprobs(got, tiny_lm.word_probs(["My friend is a nurse, and", "The man said"], WORDS),
                          word_bound(tiny_lm), probabilities=True)
    with pytest.raises(AuditUsageError, match="end of the"):
        tiny_lm.fill_probs(["The [MASK] said"], WORDS)


@pytest.mark.parametrize("k", [1, 6])
def test_causal_topk_fills_equal_direct_computation(tiny_lm, k):
    tok = tiny_lm.engine.tokenizer
    texts = ["My friend is a nurse, and [MASK]", "The man said [MASK]", "My cousin is a[MASK]"]
    got = tiny_lm.topk_fills(texts, k)
    bound = sizes_of(tiny_lm).token_logprob_atol()
    for text, row in zip(texts, got):
        ids = list(tok(text.replace("[MASK]", "").rstrip())["input_ids"])
        with torch.no_grad():
            logits = tiny_lm.engine.model(input_ids=torch.tensor([ids], device=tiny_lm.engine.model.device)).logits[0, -1]
            probs = torch.softmax(logits.double(), -1).cpu()
        order = sorted(range(len(tok)), key=lambda t: (-float(probs[t]), t))
        # A new word after the prompt: byte-level tokens that start with a space.
        words = [(tok.decode([t]).strip(), float(probs[t])) for t, name in zip(order, tok.convert_ids_to_tokens(order))
                 if name.startswith("Ġ") and len(name) > 1 and t not in tok.all_special_ids][:k]
        assert_same_ranking(row, words, bound)
    top_words = [w for w, _ in got[0]]
    assert_close_logprobs(tiny_lm.fill_probs(texts[:1], top_words)[0], [p for _, p in got[0]], bound, probabilities=True)


def test_causal_embed_is_last_token_last_layer_state(tiny_lm):
    got = tiny_lm.embed(SENTENCES)
    model = tiny_lm.engine.model
    assert got.shape == (len(SENTENCES), model.config.hidden_size) and got.dtype == np.float64
    expected = []
    for sentence in SENTENCES:
        ids = torch.tensor([tiny_lm.engine.tokenizer(sentence)["input_ids"]], device=model.device)
        with torch.no_grad():
            expected.append(model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, -1].double().cpu().numpy())
    assert_close_rows(got, np.vstack(expected), sizes_of(tiny_lm).hidden_rtol())


CAUSAL_TEXTS = ["My friend is a nurse, and [MASK]", "The man said [MASK]", "She said [MASK]",
                "My neighbour said that the job is hard, and [MASK]", "The boy [MASK]", "The girl [MASK]",
                "Our colleague is an engineer, and [MASK]"]


def test_causal_protocol_batch_size_invariance(tiny_lm):
    _check_invariance(tiny_lm, SENTENCES, CAUSAL_TEXTS)


def test_causal_protocol_cache_second_call_recomputes_nothing(tiny_model_dir, tmp_path, torch_single_thread, device):
    lm = _load(tiny_model_dir, tmp_path, device, use_cache=True)
    counter = ForwardCounter(lm.engine.model)
    first = _all_ops(lm, CAUSAL_TEXTS)
    assert counter.reset() > 0
    second = _all_ops(lm, CAUSAL_TEXTS)
    assert counter.calls == 0
    assert second[0].tolist() == first[0].tolist() and second[1].tolist() == first[1].tolist()
    assert second[2] == first[2] and second[3].tolist() == first[3].tolist()


def test_context_masks_are_masked_but_not_scored(bert):
    # Kurita's prior: the target slot is scored while the attribute is hidden by a mask token too.
    text = "[MASK] is a [MASK_CONTEXT] ."
    tok = bert.engine.tokenizer
    ids = list(tok(text.replace("[MASK_CONTEXT]", tok.mask_token).replace("[MASK]", tok.mask_token))["input_ids"])
    masks = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    assert len(masks) == 2
    probs = torch.softmax(_logits(bert, ids)[masks[0]], -1)
    for word in ("she", "he"):
        (target,) = tok(word, add_special_tokens=False)["input_ids"]
        assert_close_logprobs(bert.fill_probs([text], [word])[0, 0], float(probs[target]),
                              sizes_of(bert).token_logprob_atol(), probabilities=True)
    # Hiding the attribute changes the prediction: the context mask really is a mask token.
    assert bert.fill_probs([text], ["she"])[0, 0] != pytest.approx(bert.fill_probs(["[MASK] is a nurse ."], ["she"])[0, 0], rel=1e-3)
    emb = bert.embed(["she is a [MASK_CONTEXT] ."])
    assert_close_rows(emb, direct_mean_embedding(bert, f"she is a {tok.mask_token} .")[None], sizes_of(bert).hidden_rtol())
    with pytest.raises(AuditUsageError, match="unknown mask marker"):
        bert.fill_probs(["[MASK] is a [MASK_OTHER] ."], ["she"])
