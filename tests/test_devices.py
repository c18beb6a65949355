"""The model layer on every device: rows that end early, dropped finished rows, half precision,
and a stand-in accelerator that catches CPU/GPU tensor mixing on a CPU-only machine.

Device-parametrized tests run a "cpu" case everywhere and a "cuda" case on a GPU machine
(tests/conftest.py). The stand-in accelerator (tests/stand_in_accelerator.py) runs the CPU
computations with CUDA's device rules enforced, so a tensor made on the wrong device fails here
too, not only on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bias_core.models import DecodingConfig
from bias_core.models.cached import CachedModel
from bias_core.models.engines.hf.causal import CausalLM

from harness import load_tiny, usable_device
from lm_references import PROMPTS, WORDS, direct_greedy_ids, ids_of, next_token_logits, token_bound
from stand_in_accelerator import STAND_IN, OnAccelerator, stand_in_accelerator
from tiny_model import build_tiny_bart, build_tiny_masked_lm, with_eos_bias
from tolerances import (
    Forward,
    assert_close_logprobs,
    assert_close_rows,
    assert_same_continuations,
    longest_word_tokens,
)

MAX_NEW = 12


# ----- a tiny model whose rows end at different steps ----------------------------------------------
def _eos_margins(model, ids: list[int], steps: int, eos: int) -> list[float]:
    """Along the greedy path without EOS: by how much the best other token beats EOS at each step."""
    margins, out = [], []
    for _ in range(steps):
        logits = next_token_logits(model, ids + out)
        eos_logit = float(logits[eos])
        logits[eos] = -float("inf")
        tok = int(logits.argmax())
        margins.append(float(logits[tok]) - eos_logit)
        out.append(tok)
    return margins


def _end_step(margins: list[float], bias: float) -> int | None:
    return next((t for t, m in enumerate(margins) if m < bias), None)


def _eos_bias(model, prompts_ids: list[list[int]], eos: int, atol: float) -> float:
    """The smallest EOS bias under which at least two rows end early, at different steps, and
    another row runs to MAX_NEW tokens; it lies further than the fp32 bound ``atol`` (twice
    over) from every margin, so no EOS decision rests on rounding."""
    margins = [_eos_margins(model, ids, MAX_NEW, eos) for ids in prompts_ids]
    levels = sorted({m for row in margins for m in row})
    for low, high in zip(levels, levels[1:]):
        if (high - low) / 2 <= 2 * atol:
            continue
        bias = (low + high) / 2
        ends = [_end_step(row, bias) for row in margins]
        early = {e for e in ends if e is not None and e > 0}
        if len(early) >= 2 and None in ends:
            return bias
    raise AssertionError("no EOS bias makes rows end at different steps")


@pytest.fixture(scope="module")
def eos_lm(tiny_model_dir, device):
    """(handle, greedy references): the tiny model on each device, with an EOS bias that ends
    rows of one batch at different steps, and each prompt's greedy decode done alone."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see torch_single_thread
    try:
        base = load_tiny(tiny_model_dir, device)
        tok = base.engine.tokenizer
        bias = _eos_bias(base.engine.model, [ids_of(tok, p) for p in PROMPTS], tok.eos_token_id, token_bound(base))
        model = with_eos_bias(base.engine.model, tok.eos_token_id, bias)
        lm = CachedModel(CausalLM(model, tok, "tiny-eos", "dir:tiny-eos", "tok:tiny", batch_size=32, progress=False))
        refs = [direct_greedy_ids(model, ids_of(tok, p), MAX_NEW, tok.eos_token_id) for p in PROMPTS]
        yield lm, refs
    finally:
        torch.set_num_threads(threads)


def _hf_greedy(lm, prompt: str) -> list[int]:
    """transformers' own greedy generate, one unpadded row at a time."""
    tok = lm.engine.tokenizer
    ids = torch.tensor([ids_of(tok, prompt)], device=lm.engine.model.device)
    with torch.no_grad():
        out = lm.engine.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW,
                                do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    return new[: new.index(tok.eos_token_id)] if tok.eos_token_id in new else new


def test_rows_ending_at_different_steps_equal_their_unbatched_decode(eos_lm, torch_single_thread):
    """One batch (every prompt pads to one generation width) whose rows end at different steps:
    each row equals a greedy decode of that row alone and transformers' generate, whether
    finished rows leave the batch at once (CPU), at half the batch, or never."""
    lm, refs = eos_lm
    tok = lm.engine.tokenizer
    ends = {len(r) for r in refs}
    assert len(ends - {MAX_NEW}) >= 2 and MAX_NEW in ends, "rows must end at different steps"
    assert len({len(lm.engine.encode(p)) for p in PROMPTS}) >= 5 and max(len(lm.engine.encode(p)) for p in PROMPTS) <= 16
    expected = [tok.decode(r, skip_special_tokens=True) for r in refs]
    for compact_fraction in (0.0, 0.5, 1.0):
        lm.engine.compact_fraction = compact_fraction
        got = lm.generate(PROMPTS, DecodingConfig(max_new_tokens=MAX_NEW))
        assert_same_continuations(lm, PROMPTS, got, expected, MAX_NEW, token_bound(lm))
    assert_same_continuations(lm, PROMPTS, [tok.decode(_hf_greedy(lm, p)) for p in PROMPTS], expected, MAX_NEW,
                              token_bound(lm))


def test_dropping_finished_rows_late_changes_no_sample(eos_lm, torch_single_thread):
    eos_lm = eos_lm[0]
    sampled = DecodingConfig(max_new_tokens=MAX_NEW, do_sample=True, temperature=0.7)
    eos_lm.engine.compact_fraction = 0.0
    at_once = eos_lm.generate(PROMPTS, sampled, seed=4)
    eos_lm.engine.compact_fraction = 1.0
    assert eos_lm.generate(PROMPTS, sampled, seed=4) == at_once


# ----- CUDA float32 against the CPU -----------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_float32_reproduces_cpu(tiny_model_dir, pytestconfig, torch_single_thread):
    """docs/gpu.md: in float32 a GPU gives the CPU's scores within 1e-5 relative and the same
    greedy continuations."""
    usable_device(pytestconfig, "cuda")
    cpu, cuda = load_tiny(tiny_model_dir, "cpu"), load_tiny(tiny_model_dir, "cuda")
    sizes = Forward.of(cpu, [p + " she said that her job is hard." for p in PROMPTS], WORDS)
    assert_close_logprobs(cuda.word_probs(PROMPTS, WORDS), cpu.word_probs(PROMPTS, WORDS),
                          sizes.word_logprob_atol(longest_word_tokens(cpu, WORDS)), probabilities=True)
    requests = [(p, " she said that her job is hard.") for p in PROMPTS]
    assert_close_logprobs(cuda.loglikelihood(requests), cpu.loglikelihood(requests),
                          sizes.word_logprob_atol(len(ids_of(cpu.engine.tokenizer, requests[0][1], special=False))))
    assert_close_logprobs(cuda.sentence_logprob(PROMPTS), cpu.sentence_logprob(PROMPTS),
                          [sizes.word_logprob_atol(len(ids_of(cpu.engine.tokenizer, p))) for p in PROMPTS])
    assert_close_rows(cuda.embed(PROMPTS), cpu.embed(PROMPTS), sizes.hidden_rtol())
    greedy = DecodingConfig(max_new_tokens=MAX_NEW)
    assert_same_continuations(cpu, PROMPTS, cuda.generate(PROMPTS, greedy), cpu.generate(PROMPTS, greedy), MAX_NEW,
                              sizes.token_logprob_atol())


# ----- half precision ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_scores_come_from_a_float32_log_softmax(tiny_model_dir, device, dtype, torch_single_thread):
    """In bf16/fp16 the logits are half precision, but the log-softmax over them runs in float32:
    a single-token word's probability equals softmax(logits.float()) of the very logits the
    model returned, to float32 rounding (a half-precision softmax is ~1e-3 off or worse)."""
    lm = load_tiny(tiny_model_dir, device, dtype=dtype)
    assert lm.engine.model.dtype == getattr(torch, dtype)
    seen = []
    lm.engine.model.register_forward_hook(lambda module, args, output: seen.append(output.logits[:, -1].detach()))
    words = ["she", "he"]
    tokens = [ids_of(lm.engine.tokenizer, " " + w, special=False)[0] for w in words]
    half_off = []
    for prompt in PROMPTS[:4]:
        seen.clear()
        got = lm.word_probs([prompt], words)[0]
        [logits] = seen
        assert logits.dtype == getattr(torch, dtype)
        expected = torch.softmax(logits[0].float(), dim=-1)[tokens].double().cpu().numpy()
        # the very same logits: only the float32 log-softmax's rounding differs
        assert_close_logprobs(got, expected, Forward.of(lm).token_logprob_atol(), probabilities=True)
        half = torch.softmax(logits[0], dim=-1)[tokens].double().cpu().numpy()
        half_off.append(np.max(np.abs(half / expected - 1)))
    assert max(half_off) > 1e-4, "the test could not tell a half-precision softmax apart"
    assert np.isfinite(lm.loglikelihood([(p, " she said") for p in PROMPTS[:4]])).all()
    assert all(isinstance(t, str) for t in lm.generate(PROMPTS[:4], DecodingConfig(max_new_tokens=4)))


# ----- the stand-in accelerator ----------------------------------------------------------------------
def test_stand_in_accelerator_enforces_cuda_device_rules():
    from stand_in_accelerator import _Mode

    with _Mode():
        keep = torch.tensor([0, 2], device=STAND_IN)
        assert isinstance(keep, OnAccelerator) and keep.device == STAND_IN
        alive = torch.arange(3)  # issue 9: a CPU tensor indexed by an accelerator index
        with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same device"):
            alive[keep]
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([keep, torch.tensor([1])])
        with pytest.raises(TypeError, match="numpy"):
            keep.numpy()
        assert isinstance(torch.arange(3, device=keep.device)[keep], OnAccelerator)
        assert isinstance(keep[torch.tensor([1])], OnAccelerator)  # a CPU index into it: allowed
        assert (keep + torch.tensor(1)).tolist() == [1, 3]  # a 0-dim CPU scalar: allowed
        assert type(keep.cpu()) is torch.Tensor and keep.cpu().tolist() == [0, 2]


def _causal_ops(lm):
    texts = [p + " [MASK]" for p in PROMPTS[:6]]
    return (lm.word_probs(PROMPTS, WORDS).tolist(),
            lm.loglikelihood([(p, " she said that her job is hard.") for p in PROMPTS[:6]]),
            lm.sentence_logprob(PROMPTS[:6]).tolist(),
            lm.topk_fills(texts, 4),
            lm.embed(PROMPTS[:6]).tolist(),
            lm.generate(PROMPTS, DecodingConfig(max_new_tokens=MAX_NEW)),
            lm.generate(PROMPTS, DecodingConfig(max_new_tokens=6, do_sample=True, top_p=0.9, top_k=50), seed=2))


@pytest.mark.parametrize("compact_fraction", [0.0, 0.5])
def test_causal_model_layer_on_a_stand_in_accelerator(tiny_model_dir, torch_single_thread, compact_fraction):
    """Every causal operation, rows ending early included, obeys CUDA's device rules and gives
    the plain CPU numbers bit for bit."""
    base = load_tiny(tiny_model_dir, "cpu")
    tok = base.engine.tokenizer
    bias = _eos_bias(base.engine.model, [ids_of(tok, p) for p in PROMPTS], tok.eos_token_id, token_bound(base))
    model = with_eos_bias(base.engine.model, tok.eos_token_id, bias)
    lm = CachedModel(CausalLM(model, tok, "tiny-eos", "dir:tiny-eos", "tok:tiny", batch_size=8, progress=False,
                              compact_fraction=compact_fraction))
    plain = _causal_ops(lm)
    with stand_in_accelerator(lm):
        on_accelerator = _causal_ops(lm)
    assert on_accelerator == plain


@pytest.mark.parametrize("build", [build_tiny_masked_lm, build_tiny_bart], ids=["bert", "bart"])
def test_masked_model_layer_on_a_stand_in_accelerator(build, tmp_path, torch_single_thread):
    lm = load_tiny(build(tmp_path / "model", seed=0), "cpu")
    sentences = ["My friend is a nurse, and she said that her job is hard.", "He is a good person.", "The man and the woman."]
    texts = ["My friend is a [MASK].", "The [MASK] said that she was tired.", "[MASK] is a good person."]

    def ops():
        return (lm.sentence_logprob(sentences).tolist(), lm.fill_probs(texts, ["nurse", "she", "nurses"]).tolist(),
                lm.topk_fills(texts, 3), lm.embed(sentences).tolist())

    plain = ops()
    with stand_in_accelerator(lm):
        assert ops() == plain


def test_debias_tuning_step_on_a_stand_in_accelerator(tiny_model_dir, torch_single_thread):
    """The training-time word probabilities and their gradients, under CUDA's device rules."""
    from bias_core.mitigation.methods import debias_tuning as dt
    from bias_core.mitigation.training.losses import debias_loss

    lm = load_tiny(tiny_model_dir, "cpu")
    pairs = (("she", "he"), ("niece", "nephew"), ("woman", "man"))
    req = dt._requests(lm.training(), dt.training_prompts()[:4], pairs, 512)

    def loss_and_grad():
        lm.engine.model.zero_grad(set_to_none=True)
        loss, _ = debias_loss(*dt.pair_probabilities(lm.engine.model, lm.training(), req, [0, 1, 2, 3]))
        loss.backward()
        return float(loss.detach()), lm.engine.model.get_output_embeddings().weight.grad.clone()

    plain_loss, plain_grad = loss_and_grad()
    with stand_in_accelerator(lm):
        loss, grad = loss_and_grad()
    assert loss == plain_loss and torch.equal(grad.as_subclass(torch.Tensor), plain_grad)
