"""Bad input, faulty setups: PEFT adapters (--adapter, --baseline-adapter).

An adapter trained on another base model, cut weight files, a rank its weights do not have. How
each case ends: tests/test_bad_inputs_options.py's docstring.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from harness import cut_short, import_before_in_process_runs

pytest_plugins = ["pytester"]
import_before_in_process_runs()


@pytest.fixture
def tiny_adapter(tiny_model_dir, tmp_path, torch_single_thread):
    """A LoRA adapter trained (randomly) on the tiny model: it declares tiny_model_dir as its base."""
    from harness import load_tiny
    from tiny_model import save_lora

    folder = save_lora(load_tiny(tiny_model_dir).engine.model, tmp_path / "adapter")
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
    return folder


def test_adapter_declaring_another_base_is_refused_or_named(project, tiny_copy, tiny_adapter, tiny_model_dir):
    out = project.usage_error("--model", str(tiny_copy), "--adapter", str(tiny_adapter),
                              names=[f"--adapter {tiny_adapter}", f"declares its base model as '{tiny_model_dir}'",
                                     "base_model_name_or_path", f"not {tiny_copy}", "--allow-adapter-base-mismatch"])
    assert "Fix: pass its base model" in out
    project.real_load = True
    result, out = project.run("--model", str(tiny_copy), "--adapter", str(tiny_adapter), "--allow-adapter-base-mismatch")
    assert result.ret in (0, 1), out[-3000:]
    assert "bias-core: model card: --adapter" in out
    [card] = project.results()["run"]["model_card"]
    assert f"declares its base model as '{tiny_model_dir}'" in card and "applied anyway (--allow-adapter-base-mismatch)" in card


def test_adapter_on_its_own_base_needs_no_option(tiny_model_dir, tiny_adapter, tmp_path):
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.adapter import adapter_card

    spec = resolve_model(str(tiny_model_dir))
    assert adapter_card(tiny_adapter, "--adapter", str(tiny_model_dir), spec, tmp_path, False) == []
    config = json.loads((tiny_adapter / "adapter_config.json").read_text())
    (tiny_adapter / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": None}))
    [note] = adapter_card(tiny_adapter, "--adapter", str(tiny_model_dir), spec, tmp_path, False)
    assert "declares no base model" in note


def test_adapter_of_the_packaged_model_matches_its_converted_folder(tmp_path, monkeypatch):
    """smollm2-135m loads from a converted folder named by the GGUF's hash: an adapter trained on it
    (on any machine) declares that folder, or the hub model the GGUF came from."""
    from bias_core.models.registry import MODEL_ALIASES
    from bias_core.models.weights import adapter_checks, gguf_cache

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"gguf bytes")
    monkeypatch.setattr(gguf_cache, "locate_gguf", lambda spec, cache: gguf)
    sha = hashlib.sha256(b"gguf bytes").hexdigest()
    spec = MODEL_ALIASES["smollm2-135m"]
    for declared in (f"/elsewhere/.cache/bias-core/models/gguf-{sha[:32]}", "HuggingFaceTB/SmolLM2-135M-Instruct",
                     "smollm2-135m"):
        assert adapter_checks.declares_this_base(declared, "smollm2-135m", spec, tmp_path), declared
    assert not adapter_checks.declares_this_base(f"/x/gguf-{'0' * 32}", "smollm2-135m", spec, tmp_path)
    assert not adapter_checks.declares_this_base("meta-llama/Llama-2-7b-hf", "smollm2-135m", spec, tmp_path)


@pytest.mark.parametrize("option", ["--adapter", "--baseline-adapter"])
def test_truncated_adapter_weights_are_named(project, tiny_model_dir, tiny_adapter, option):
    weights = tiny_adapter / "adapter_model.safetensors"
    cut_short(weights)
    extra = ["--baseline", str(tiny_model_dir)] if option == "--baseline-adapter" else []
    project.usage_error("--model", str(tiny_model_dir), *extra, option, str(tiny_adapter),
                        names=[f"{option} {tiny_adapter}", str(weights), "not a readable safetensors file", "cut short",
                               "Fix: save the adapter again"])


def test_truncated_pickled_adapter_weights_are_named(project, tiny_model_dir, tiny_adapter):
    import torch
    from safetensors.torch import load_file

    weights = tiny_adapter / "adapter_model.bin"
    torch.save(load_file(tiny_adapter / "adapter_model.safetensors"), weights)
    (tiny_adapter / "adapter_model.safetensors").unlink()
    cut_short(weights)
    project.usage_error("--model", str(tiny_model_dir), "--adapter", str(tiny_adapter),
                        names=[str(weights), "not a readable torch checkpoint"])


def test_adapter_whose_rank_does_not_match_its_weights_names_both_ranks(project, tiny_model_dir, tiny_adapter):
    config = json.loads((tiny_adapter / "adapter_config.json").read_text())
    (tiny_adapter / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))
    out = project.usage_error("--model", str(tiny_model_dir), "--adapter", str(tiny_adapter),
                              names=["LoRA rank mismatch", "declares rank r=8", "holds rank 4", "model.layers.0.mlp.down_proj",
                                     "lora_A has shape (4, 64)", "set r to 4"])
    assert "another base model" not in out
