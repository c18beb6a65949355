"""The adapter cache: hit, miss on any key change, corrupt entries detected and rebuilt,
interrupted builds leave nothing behind."""

from __future__ import annotations

import json

import pytest

from bias_core.mitigation.training.adapter_cache import MARKER, AdapterCache, data_hash, key_hash


def make_key(**change):
    key = {
        "base": {"model": "gguf:abc", "tokenizer": "tok1", "dtype": "torch.float32"},
        "method": "debias-tuning",
        "hyperparameters": {"r": 8, "lr": 0.001},
        "data_sha256": data_hash(["My friend is cooking, and"]),
        "seed": 0,
    }
    key.update(change)
    return key


class Builder:
    def __init__(self):
        self.calls = 0

    def __call__(self, folder):
        self.calls += 1
        (folder / "adapter_model.safetensors").write_bytes(b"weights-%d" % self.calls)
        (folder / "adapter_config.json").write_text('{"r": 8}')


def test_second_lookup_hits(tmp_path):
    cache, build = AdapterCache(tmp_path), Builder()
    first = cache.get_or_build(make_key(), build)
    second = cache.get_or_build(make_key(), build)
    assert first == second and build.calls == 1 and cache.hits == 1
    marker = json.loads((first / MARKER).read_text())
    assert marker["key"] == make_key()
    assert set(marker["files"]) == {"adapter_model.safetensors", "adapter_config.json"}


@pytest.mark.parametrize(
    "change",
    [
        {"base": {"model": "gguf:other", "tokenizer": "tok1", "dtype": "torch.float32"}},
        {"base": {"model": "gguf:abc", "tokenizer": "tok2", "dtype": "torch.float32"}},
        {"base": {"model": "gguf:abc", "tokenizer": "tok1", "dtype": "torch.bfloat16"}},
        {"method": "gendercare-cda-sft"},
        {"hyperparameters": {"r": 8, "lr": 0.002}},
        {"data_sha256": data_hash(["My friend is baking, and"])},
        {"seed": 1},
    ],
)
def test_any_key_change_misses(tmp_path, change):
    cache, build = AdapterCache(tmp_path), Builder()
    first = cache.get_or_build(make_key(), build)
    other = cache.get_or_build(make_key(**change), build)
    assert other != first and build.calls == 2
    assert key_hash(make_key()) != key_hash(make_key(**change))


def test_data_hash_depends_on_order_and_content():
    assert data_hash(["a", "b"]) != data_hash(["b", "a"])
    assert data_hash(["a", "b"]) != data_hash(["a", "c"])
    assert data_hash(["a", "b"]) == data_hash(["a", "b"])


def _garble(folder):
    (folder / "adapter_model.safetensors").write_bytes(b"garbled")


def _remove(folder):
    (folder / "adapter_model.safetensors").unlink()


def _bad_marker(folder):
    (folder / MARKER).write_text("{not json")


def _no_marker(folder):
    (folder / MARKER).unlink()


def _other_key_marker(folder):
    marker = json.loads((folder / MARKER).read_text())
    marker["key"]["seed"] = 99
    (folder / MARKER).write_text(json.dumps(marker))


@pytest.mark.parametrize("corrupt", [_garble, _remove, _bad_marker, _no_marker, _other_key_marker])
def test_corrupt_entry_is_detected_and_rebuilt(tmp_path, corrupt):
    cache, build = AdapterCache(tmp_path), Builder()
    folder = cache.get_or_build(make_key(), build)
    corrupt(folder)
    assert cache.problem(folder, make_key()) is not None
    again = cache.get_or_build(make_key(), build)
    assert again == folder and build.calls == 2
    assert cache.problem(again, make_key()) is None
    assert (again / "adapter_model.safetensors").read_bytes() == b"weights-2"


def test_interrupted_build_leaves_no_entry(tmp_path):
    cache = AdapterCache(tmp_path)

    def interrupted(folder):
        (folder / "adapter_model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_build(make_key(), interrupted)
    assert cache.lookup(make_key()) is None
    assert list((tmp_path / "adapters").iterdir()) == []  # no half-built folder left
    build = Builder()
    cache.get_or_build(make_key(), build)
    assert build.calls == 1


def test_build_that_writes_nothing_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="wrote no files"):
        AdapterCache(tmp_path).get_or_build(make_key(), lambda folder: None)
    assert list((tmp_path / "adapters").iterdir()) == []
