"""GPU batch sizing from free memory and per-token costs (bias_core/models/placement/memory.py), checked
with made-up free-memory figures on any machine, and its use by the causal handle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bias_core.models import DecodingConfig
from bias_core.models.engines.hf.causal import width_batches
from bias_core.models.placement.memory import MAX_ROWS, BatchPlan, GiB, TokenCosts, plan_for, token_costs

from lm_references import PROMPTS, WORDS, ForwardCounter, token_bound, word_bound
from tolerances import assert_close_logprobs, assert_same_continuations


def _llama_config(**kw):
    from transformers import LlamaConfig

    return LlamaConfig(**kw)


LLAMA2_7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=32, vocab_size=32000)
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=49152)


def test_token_costs_of_llama2_7b_in_bf16_by_hand():
    costs = token_costs(_llama_config(**LLAMA2_7B), dtype_bytes=2)
    # keys + values, 32 layers x 32 heads x 128 dims x 2 bytes = 0.5 MiB a token
    assert costs.kv == 2 * 32 * 32 * 128 * 2 == 524_288
    # 3 MLP intermediates of 11008, q/k/v/o projections (32 + 2*32 heads x 128, twice), 4 hidden-sized states
    assert costs.activation == 2 * (3 * 11008 + 2 * 96 * 128 + 4 * 4096) == 147_968
    assert costs.logits_row == 32000 * (2 + 4 + 4)


def test_grouped_query_attention_shrinks_the_kv_cache():
    costs = token_costs(_llama_config(**SMOLLM2_135M), dtype_bytes=2)
    assert costs.kv == 2 * 30 * 3 * 64 * 2 == 23_040  # 3 KV heads of 64 dims, not 9


def test_a_7b_model_on_an_80gb_gpu_decodes_hundreds_of_rows():
    """66 GiB free after loading a 7B model in bf16: half of it, 33 GiB, for one decoding batch of
    32-token prompts plus 64 new tokens. A row holds 96 tokens x (2 x 512 KiB KV + 144.5 KiB
    activations) + 312.5 KiB of logits = 115,188,224 bytes; 33 GiB / that = 307.6, rounded down
    to 304 (a multiple of 8). The parameter-count rule gave 8."""
    plan = plan_for(66 * GiB, token_costs(_llama_config(**LLAMA2_7B), 2))
    assert plan.budget == 33 * GiB
    assert plan.rows(32 + 64) == 304
    assert plan.rows(16) == MAX_ROWS  # short scoring rows: as many as a pass may take
    assert plan.rows(512 + 64) == 48  # long prompts: fewer rows


def test_small_changes_in_free_memory_give_the_same_plan():
    costs = token_costs(_llama_config(**LLAMA2_7B), 2)
    assert plan_for(int(66.0 * GiB), costs) == plan_for(int(66.9 * GiB), costs)


def test_almost_no_free_memory_still_gives_one_row():
    plan = plan_for(10 * 2**20, token_costs(_llama_config(**LLAMA2_7B), 2))
    assert plan.rows(4096) == 1


@given(free_gib=st.floats(0.5, 160), tokens=st.integers(1, 4096), kv=st.integers(1, 2**20),
       act=st.integers(0, 2**18), logits=st.integers(0, 2**22))
def test_rows_fit_the_budget_and_fall_with_length(free_gib, tokens, kv, act, logits):
    plan = plan_for(int(free_gib * GiB), TokenCosts(kv, act, logits))
    rows = plan.rows(tokens)
    per_row = tokens * (2 * kv + act) + logits
    assert 1 <= rows <= MAX_ROWS
    assert rows == 1 or rows * per_row <= plan.budget
    assert plan.rows(tokens + 1) <= rows
    assert plan_for(int(2 * free_gib * GiB), TokenCosts(kv, act, logits)).rows(tokens) >= rows


def test_width_batches_take_the_rows_that_fit_each_width():
    lengths = [3, 4, 9, 10, 11, 12, 1, 2, 2, 2]
    batches = width_batches(lengths, batch_size=100, multiple=4, rows_for_width=lambda width: 12 // width)
    for batch in batches:
        widths = {-(-lengths[i] // 4) * 4 for i in batch}
        assert len(widths) == 1 and len(batch) <= 12 // widths.pop()
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert width_batches(lengths, 100, 4) == width_batches(lengths, 100, 4, lambda width: 1000)


def test_a_plan_changes_the_batches_not_the_results(tiny_lm):
    """The rows a plan allows split the work into more passes; continuations stay identical and
    scores within the fp32 bound (each row is padded by its own length)."""
    free = tiny_lm.word_probs(PROMPTS, WORDS), tiny_lm.generate(PROMPTS, DecodingConfig(max_new_tokens=8))
    counter = ForwardCounter(tiny_lm.engine.model)
    tiny_lm.word_probs(PROMPTS, WORDS)
    passes_free = counter.reset()
    tiny_lm.engine.plan = BatchPlan(budget=3 * (16 * 2 + 1), costs=TokenCosts(kv=1, activation=0, logits_row=1))
    planned = tiny_lm.word_probs(PROMPTS, WORDS), tiny_lm.generate(PROMPTS, DecodingConfig(max_new_tokens=8))
    assert counter.reset() > passes_free
    assert_close_logprobs(planned[0], free[0], word_bound(tiny_lm), probabilities=True)
    assert_same_continuations(tiny_lm, PROMPTS, planned[1], free[1], 8, token_bound(tiny_lm))


def test_cuda_auto_batch_comes_from_the_plan_and_batch_size_overrides_it(monkeypatch):
    from bias_core.models.engines.transformers import _gpu_settings, auto_batch_size
    from bias_core.models.loading import LoadOptions

    assert auto_batch_size(LoadOptions(), "cpu") == 128
    assert auto_batch_size(LoadOptions(), "cuda") == MAX_ROWS
    assert auto_batch_size(LoadOptions(batch_size=48), "cuda") == 48
    assert _gpu_settings(LoadOptions(), "cpu", None) == {}
    monkeypatch.setattr("bias_core.models.placement.memory.gpu_plan", lambda model: "the plan")
    assert _gpu_settings(LoadOptions(), "cuda", None) == {"compact_fraction": 0.25, "plan": "the plan"}
    assert _gpu_settings(LoadOptions(batch_size=48), "cuda", None)["plan"] is None


@pytest.mark.gpu
def test_gpu_plan_reads_this_gpu(tiny_model_dir, pytestconfig):
    from harness import load_tiny, usable_device

    usable_device(pytestconfig, "cuda")
    lm = load_tiny(tiny_model_dir, "cuda")
    assert lm.engine.plan is not None and lm.engine.plan.budget >= GiB // 4 and lm.engine.compact_fraction == 0.25


# ----- what a run holds in host memory (the default audit's peak, issue #30) ---------------------
def test_scoring_drops_a_batch_cache_before_the_next_batch_builds_its_own(tiny_lm):
    """When a batch's prompts go through the model, no earlier batch's KV cache is alive: the
    default audit's peak held the last batch's cache (0.5 GB at 128 GenderPair prompts) while the
    next one was built."""
    import weakref

    engine = tiny_lm.engine
    engine.batch_size = 2
    caches: list[weakref.ref] = []
    alive_when_built: list[int] = []
    real = engine._forward

    def forward(ids, mask, positions, keep=0, past=None):
        if past is not None and past.get_seq_length() == 0:  # a batch's own cache, about to be filled
            alive_when_built.append(sum(ref() is not None for ref in caches))
            caches.append(weakref.ref(past))
        return real(ids, mask, positions, keep=keep, past=past)

    engine._forward = forward
    # A continuation of several tokens makes each batch keep its cache for the continuation pass.
    engine.loglikelihood([(p, " " + w) for p in PROMPTS for w in ("she", "nurse practitioner")])
    assert len(caches) >= 3 and alive_when_built == [0] * len(caches)


def test_a_continuation_pass_reads_the_context_rows_and_keeps_no_copy(tiny_lm):
    """rows_in_passing gives every layer the keys and values cache_rows would (the logits are
    equal, bit for bit), stores nothing in passing and leaves the context cache as it was."""
    import torch

    from bias_core.models.engines.hf.causal import _new_cache, cache_rows, rows_in_passing

    engine = tiny_lm.engine
    with torch.inference_mode():
        ids, mask, positions = engine._left_pad([engine.encode(p) for p in PROMPTS[:3]])
        past = engine._forward(ids, mask, positions, keep=1, past=_new_cache()).past_key_values
        held = [(layer.keys, layer.values) for layer in past.layers]
        on = ids.device  # the model's: a CPU tensor beside CUDA ones fails on a GPU
        rows = torch.tensor([2, 0, 0, 1], device=on)  # a context twice: two continuations of one prompt
        ext = torch.tensor([[5, 9], [6, 9], [7, 9], [8, 9]], device=on)
        ext_mask = torch.cat([mask[rows], torch.ones_like(ext)], dim=1)
        ext_pos = positions[rows, -1:] + torch.arange(1, 3, device=on)
        passing = rows_in_passing(past, rows)
        got = engine._forward(ext, ext_mask, ext_pos, keep=2, past=passing).logits
        want = engine._forward(ext, ext_mask, ext_pos, keep=2, past=cache_rows(past, rows)).logits
    assert torch.equal(got, want)
    assert all(layer.keys is k and layer.values is v for layer, (k, v) in zip(passing.layers, held))
    assert all(layer.keys is k and layer.values is v for layer, (k, v) in zip(past.layers, held))


def test_a_sampled_run_holds_what_its_looks_reach_of_genderpair_not_the_pools(monkeypatch):
    """Under --sample auto GenderPair's probes are the whole benchmark (with --data-dir 103,854
    prompts, and 415,416 under the four wordings: 0.6 GB held beside the model). The suite holds
    the first item-cap units of each pool's seeded order, and every number a run takes from the
    pool is the whole pool's: its units, the looks' items, its content hash, its provenance."""
    from bias_core.gating import adaptive_sampling as ad
    from bias_core.gating.regression.items import probe_sha256
    from bias_core.suites.genderpair import GenderPairAudit

    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")  # the project's pair sets: 11,664 prompts
    plan = ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=False)
    sampled = GenderPairAudit(lm=None, sample=None, sampling=plan)
    whole = GenderPairAudit(lm=None, sample=None)
    for name in ("genderpair-group1", "genderpair-robustness"):
        kept, pool = sampled.probe(name), whole.probe(name)
        cap = plan.cap_for(name)
        assert ad.pool_units(kept) == ad.pool_units(pool) > 4 * cap
        assert len({ad.item_unit(name, item) for item in kept.items}) == cap
        assert len(kept.items) == len(pool.items) * cap // ad.pool_units(pool)
        for n in (plan.first, 2 * plan.first, cap):
            assert ad.prefix_probe(kept, n, 0).items == ad.prefix_probe(pool, n, 0).items
        assert probe_sha256(kept) == probe_sha256(pool) and kept.provenance == pool.provenance
    # --sample N sizes its own samples from the whole pool, as before
    numbered = GenderPairAudit(lm=None, sample=None, sampling=ad.plan_for(ad.SampleOptions("300"), False, False))
    assert len(numbered.probe("genderpair-group1").items) == len(whole.probe("genderpair-group1").items)
