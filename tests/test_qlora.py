"""QLoRA end to end: training leaves the session's model exactly as it was audited (dtype,
requires_grad, weights), and an adapter trained on a 4-bit base applies to that base, unmerged.

QLoRA is a CUDA configuration, but its code path runs on CPU too: the preparation on a bf16
model, forced here past the "needs a CUDA GPU" check, and a real NF4 model where bitsandbytes
has its CPU backend (0.50 does). The CUDA kernels themselves are exercised by the GPU check
(benchmarks/gpu_check.sh; on an H100 on 2026-11-27, benchmarks/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods import debias_tuning as dt
from bias_core.mitigation.methods.debias_tuning import DebiasTuningConfig, train_debias_adapter
from bias_core.mitigation.methods.variants import debias_config
from bias_core.mitigation.training import lora
from bias_core.mitigation.training.adapter_cache import base_fingerprint
from bias_core.mitigation.training.apply_adapter import is_quantized, with_adapter
from bias_core.models.cached import CachedModel
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.protocol import EngineInfo

from tiny_model import build_tiny_causal_lm
from tolerances import Forward, assert_close_logprobs, longest_word_tokens

PAIRS = (("she", "he"), ("her", "his"), ("woman", "man"), ("niece", "nephew"))
WORDS = [w for pair in PAIRS for w in pair]
QLORA_QUICK = DebiasTuningConfig(r=4, alpha=8, dropout=0.0, lr=2e-2, batch_size=6, steps=6, load_in_4bit=True)


def model_state(model) -> tuple[dict, dict]:
    """(name -> (class, dtype, requires_grad) of every parameter, name -> SHA-256 of every
    state_dict tensor), a 4-bit weight's quantization constants included."""
    flags = {name: (type(p).__name__, str(p.dtype), p.requires_grad) for name, p in model.named_parameters()}
    digests = {name: hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
               for name, t in model.state_dict().items() if isinstance(t, torch.Tensor)}
    return flags, digests


@pytest.fixture(scope="module")
def prompts():
    return dt.training_prompts()[:24]


def _handle(model, tokenizer, name):
    return CachedModel(CausalLM(model, tokenizer, name, f"dir:{name}", "tok:tiny", progress=False))


def _force_qlora_checks_past_cuda(monkeypatch):
    """Run check_quantization as on a CUDA machine (bitsandbytes present, model 4-bit), so
    QLoRA training runs on this CPU. bitsandbytes is imported first, outside the patch: imported
    under it, it loads its CUDA backend on this CPU and stays half-imported for every later test
    in the worker (issue 22)."""
    import bitsandbytes  # noqa: F401

    real = lora.check_quantization

    def check(config, model=None):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: True)
            real(config, model)

    monkeypatch.setattr(dt, "check_quantization", check)


def _record_training_dtype(monkeypatch):
    """The embedding's dtype while the optimiser runs."""
    seen = []
    real = dt.optimise

    def recording(peft_model, *args, **kwargs):
        seen.append(peft_model.get_input_embeddings().weight.dtype)
        return real(peft_model, *args, **kwargs)

    monkeypatch.setattr(dt, "optimise", recording)
    return seen


# ----- the preparation on a bf16 model -----------------------------------------------------------
def test_qlora_preparation_leaves_a_bf16_session_model_as_it_was(tiny_model_dir, prompts, tmp_path, monkeypatch,
                                                                  torch_single_thread):
    """QLoRA's preparation casts the non-quantized weights to float32 in place and freezes all;
    after training the model has its bf16 weights, its flags and its fingerprint back, and the
    adapter applies to it (the bug: "adapter ... was trained on another base model")."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    model.model.norm.weight.requires_grad_(False)  # a flag that differs from the rest, to be kept
    lm = _handle(model, AutoTokenizer.from_pretrained(tiny_model_dir), "tiny-bf16")
    before, fingerprint = model_state(lm.engine.model), base_fingerprint(lm.training())
    probs_before = lm.word_probs(prompts[:6], WORDS)
    monkeypatch.setattr(dt, "check_quantization", lambda config, model=None: None)  # the CUDA check, forced past
    during = _record_training_dtype(monkeypatch)

    folder = train_debias_adapter(lm, prompts, QLORA_QUICK, 0, tmp_path, progress=False, pairs=PAIRS)

    assert during == [torch.float32], "the preparation ran (it widens the embeddings to float32)"
    assert model_state(lm.engine.model) == before
    assert base_fingerprint(lm.training()) == fingerprint and lm.engine.model.dtype == torch.bfloat16
    np.testing.assert_array_equal(lm.word_probs(prompts[:6], WORDS), probs_before)
    debiased = with_adapter(lm, folder)
    assert not np.allclose(debiased.word_probs(prompts[:6], WORDS), probs_before)
    assert model_state(lm.engine.model) == before


def test_failed_preparation_restores_the_model(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    before = model_state(model)

    def broken(*args, **kwargs):
        raise RuntimeError("no LoRA today")

    monkeypatch.setattr("peft.get_peft_model", broken)
    with pytest.raises(RuntimeError, match="no LoRA today"):
        with lora.attached_lora(model, QLORA_QUICK):
            pass
    assert model_state(model) == before


# ----- applying an adapter unmerged --------------------------------------------------------------
def test_unmerged_adapter_shares_the_base_weights_and_equals_merged(tiny_model_dir, prompts, tmp_path,
                                                                    torch_single_thread):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = _handle(AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir),
                 "tiny")
    cfg = dataclasses.replace(QLORA_QUICK, load_in_4bit=False)
    folder = train_debias_adapter(lm, prompts, cfg, 0, tmp_path, progress=False, pairs=PAIRS)
    before = model_state(lm.engine.model)
    merged, unmerged = with_adapter(lm, folder, merge=True), with_adapter(lm, folder, merge=False)
    assert with_adapter(lm, folder).fingerprint == merged.fingerprint  # full precision on CPU: merged
    assert unmerged.fingerprint == merged.fingerprint + ":unmerged"
    assert model_state(lm.engine.model) == before
    assert not any("lora" in name for name, _ in lm.engine.model.named_modules())
    assert any("lora" in name for name, _ in unmerged.engine.model.named_modules())
    base_weights = {p.data_ptr() for p in lm.engine.model.parameters()}
    lora_free = [p for name, p in unmerged.engine.model.named_parameters() if "lora_" not in name]
    assert lora_free and all(p.data_ptr() in base_weights for p in lora_free), "unmerged shares, never copies"
    bound = Forward.of(merged, prompts, WORDS).word_logprob_atol(longest_word_tokens(merged, WORDS))
    assert_close_logprobs(unmerged.word_probs(prompts, WORDS), merged.word_probs(prompts, WORDS), bound, probabilities=True)
    assert not np.allclose(unmerged.word_probs(prompts, WORDS), lm.word_probs(prompts, WORDS))


# ----- a real 4-bit base -------------------------------------------------------------------------
@pytest.fixture
def nf4_lm(tmp_path_factory):
    """A tiny model (hidden size 64: bitsandbytes quantizes in blocks of 64) in bitsandbytes NF4
    on this CPU (bitsandbytes' CPU backend)."""
    pytest.importorskip("bitsandbytes")
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    tiny_model_dir = build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-64"), seed=0, hidden_size=64)

    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    try:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, quantization_config=quant, dtype=torch.bfloat16,
                                                     device_map={"": "cpu"})
        # bitsandbytes 0.50's CPU backend repacks a 4-bit weight for its AVX512-BF16 kernel on
        # first inference and unpacks it in state_dict(), and the round trip is not exact (the
        # logits moved by up to 2 after one model.state_dict() here): keep the plain layout.
        # CUDA has no such repacking.
        for module in model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
        model(input_ids=torch.tensor([[1, 5, 6], [1, 7, 8]]))
    except Exception as exc:  # a bitsandbytes build without the CPU backend
        pytest.skip(f"bitsandbytes cannot run NF4 on this CPU: {type(exc).__name__}: {str(exc)[:120]}")
    return _handle(model, AutoTokenizer.from_pretrained(tiny_model_dir), "tiny-nf4")


def test_qlora_on_a_4bit_base_trains_applies_unmerged_and_leaves_the_base_alone(nf4_lm, prompts, tmp_path,
                                                                                 monkeypatch, torch_single_thread):
    lm = nf4_lm
    assert is_quantized(lm.engine.model) and any(type(p).__name__ == "Params4bit" for p in lm.engine.model.parameters())
    before, fingerprint = model_state(lm.engine.model), base_fingerprint(lm.training())
    probs_before = lm.word_probs(prompts, WORDS)
    _force_qlora_checks_past_cuda(monkeypatch)
    during = _record_training_dtype(monkeypatch)

    folder = train_debias_adapter(lm, prompts, QLORA_QUICK, 0, tmp_path, progress=False, pairs=PAIRS)

    assert during == [torch.float32]
    assert model_state(lm.engine.model) == before and base_fingerprint(lm.training()) == fingerprint
    np.testing.assert_array_equal(lm.word_probs(prompts, WORDS), probs_before)
    debiased = with_adapter(lm, folder)  # a 4-bit base: unmerged, over the shared 4-bit weights
    assert debiased.fingerprint.endswith(":unmerged") and is_quantized(debiased.engine.model)
    assert model_state(lm.engine.model) == before
    after = debiased.word_probs(prompts, WORDS)
    np.testing.assert_array_equal(lm.word_probs(prompts, WORDS), probs_before)
    assert after.sum(axis=1).mean() < probs_before.sum(axis=1).mean()  # L_g: less gender mass


def test_qlora_refuses_a_full_precision_base(tiny_model_dir, prompts, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = _handle(AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir),
                 "tiny")
    _force_qlora_checks_past_cuda(monkeypatch)
    with pytest.raises(AuditUsageError, match="loaded in full precision"):
        train_debias_adapter(lm, prompts, QLORA_QUICK, 0, tmp_path, progress=False, pairs=PAIRS)


# ----- which configuration runs where -------------------------------------------------------------
class _StubLM:
    """Where a model runs and whether it is 4-bit: all that choosing a training configuration reads."""

    def __init__(self, device: str, four_bit: bool):
        self.device = torch.device(device)
        self.model = type("M", (), {"is_loaded_in_4bit": four_bit})()

    def info(self) -> EngineInfo:
        return EngineInfo(engine="stub", device=str(self.device))

    def training(self) -> "_StubLM":
        return self


@pytest.mark.parametrize("four_bit", [True, False])
def test_cuda_trains_the_papers_configuration(four_bit):
    cfg = debias_config(_StubLM("cuda", four_bit), "debias-tuning")
    assert (cfg.r, cfg.alpha, cfg.dropout, cfg.lr, cfg.batch_size, cfg.steps, cfg.max_length) == (
        64, 16, 0.1, 2e-4, 16, 500, 512)
    assert cfg.load_in_4bit is four_bit
    quick = debias_config(_StubLM("cpu", False), "debias-tuning-no-Lg")
    assert (quick.r, quick.steps, quick.load_in_4bit, quick.switches.gender_mass) == (8, 150, False, False)
