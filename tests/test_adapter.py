"""--adapter DIR: a PEFT adapter folder applied to a loaded model, on the tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bias_core.errors import AuditUsageError
from bias_core.models import LoadOptions, check_options, load_model, resolve_model
from bias_core.models.weights.adapter import adapter_sha256, apply_adapter, check_adapter_dir

from tiny_model import save_lora
from tolerances import Forward, assert_close, assert_close_logprobs, longest_word_tokens

PROMPTS = ["My friend is a nurse, and", "The person likes to read books, and"]
WORDS = ["she", "he", "her", "his"]


@pytest.fixture
def adapter_dir(tiny_lm, tmp_path):
    import copy

    return save_lora(copy.deepcopy(tiny_lm.engine.model), tmp_path / "adapter")


def test_adapter_is_merged_into_a_copy_and_changes_the_fingerprint(tiny_lm, adapter_dir):
    from peft import PeftModel

    before = tiny_lm.word_probs(PROMPTS, WORDS)
    adapted = apply_adapter(tiny_lm, adapter_dir)
    after = adapted.word_probs(PROMPTS, WORDS)
    assert not np.allclose(before, after, atol=1e-4)  # the adapter matters
    np.testing.assert_array_equal(tiny_lm.word_probs(PROMPTS, WORDS), before)  # the base handle is untouched
    assert adapted.fingerprint == f"{tiny_lm.fingerprint}:adapter:{adapter_sha256(adapter_dir)}"
    assert not any("lora" in name for name, _ in adapted.engine.model.named_parameters())  # merged: a plain model
    # merged weights score like the unmerged PEFT model
    import copy

    import torch

    unmerged = PeftModel.from_pretrained(copy.deepcopy(tiny_lm.engine.model), str(adapter_dir)).eval()
    ids = tiny_lm.engine.tokenizer(PROMPTS[0], return_tensors="pt")["input_ids"].to(tiny_lm.engine.model.device)
    with torch.no_grad():
        assert_close(adapted.engine.model(ids).logits, unmerged(ids).logits, Forward.of(adapted, PROMPTS[:1]).logit_atol(),
                     kind="logits")


def test_the_fingerprint_follows_the_adapter_weights(tiny_lm, tmp_path):
    import copy

    a = save_lora(copy.deepcopy(tiny_lm.engine.model), tmp_path / "a", seed=0)
    b = save_lora(copy.deepcopy(tiny_lm.engine.model), tmp_path / "b", seed=1)
    a2 = save_lora(copy.deepcopy(tiny_lm.engine.model), tmp_path / "a2", seed=0)
    assert adapter_sha256(a) == adapter_sha256(a2) != adapter_sha256(b)


def test_load_model_applies_the_adapter_option(tiny_model_dir, adapter_dir, tmp_path, torch_single_thread):
    opts = LoadOptions(cache_dir=tmp_path / "cache", use_cache=False, progress=False)
    base = load_model(resolve_model(str(tiny_model_dir)), opts)
    adapted = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(**{**opts.__dict__, "adapter": str(adapter_dir)}))
    assert adapted.fingerprint == f"{base.fingerprint}:adapter:{adapter_sha256(adapter_dir)}"
    bound = Forward.of(adapted, PROMPTS, WORDS).word_logprob_atol(longest_word_tokens(adapted, WORDS))
    assert_close_logprobs(adapted.word_probs(PROMPTS, WORDS), apply_adapter(base, adapter_dir).word_probs(PROMPTS, WORDS),
                          bound, probabilities=True)


def test_folder_problems_are_usage_errors_before_any_model_loads(tiny_model_dir, adapter_dir, tmp_path):
    with pytest.raises(AuditUsageError, match="no such folder"):
        check_options(LoadOptions(adapter=str(tmp_path / "nowhere")))
    with pytest.raises(AuditUsageError, match="looks like a whole model .* pass it to --model"):
        check_adapter_dir(tiny_model_dir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AuditUsageError, match="not a PEFT adapter folder"):
        check_adapter_dir(tmp_path / "empty")
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    (weightless / "adapter_config.json").write_text((adapter_dir / "adapter_config.json").read_text())
    with pytest.raises(AuditUsageError, match="no weights"):
        check_adapter_dir(weightless)
    (weightless / "adapter_config.json").write_text(json.dumps({"r": 4}))
    with pytest.raises(AuditUsageError, match="no peft_type"):
        check_adapter_dir(weightless)


def _llama(hidden=32, layers=2, vocab=400):
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                        num_attention_heads=4, num_key_value_heads=4, intermediate_size=64))


@pytest.mark.parametrize("other, match", [
    (lambda vocab: _llama(hidden=48, vocab=vocab), "do not fit this model's shapes"),
    (lambda vocab: _llama(layers=3, vocab=vocab), r"made for another base model: \d+ of its weights have no place"),
])
def test_an_adapter_of_another_architecture_is_refused(tiny_lm, tmp_path, other, match):
    folder = save_lora(other(len(tiny_lm.engine.tokenizer)), tmp_path / "other")
    with pytest.raises(AuditUsageError, match=match):
        apply_adapter(tiny_lm, folder)


def test_an_adapter_for_modules_this_model_lacks_is_refused(tiny_lm, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=len(tiny_lm.engine.tokenizer)))
    folder = save_lora(gpt2, tmp_path / "gpt2", target_modules=["c_attn"])
    with pytest.raises(AuditUsageError, match="does not fit this model"):
        apply_adapter(tiny_lm, folder)
