"""ResultCache: content-addressed JSON entries, written atomically, corrupt entries are misses
(entries that do not prove their key and value: tests/test_cache_integrity.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

import bias_core.storage.files as files_mod
import bias_core.storage.result_cache as cache_mod
from bias_core.storage.files import atomic_write_text
from bias_core.storage.result_cache import ResultCache, canonical_key

PARTS = {
    "op": "generate",
    "model": "dir:abc",
    "tokenizer": "tok123",
    "dtype": "torch.float32",
    "prompt": "My friend is a nurse, and",
    "config": {"max_new_tokens": 50, "do_sample": True, "temperature": 1.0, "top_p": 0.9, "top_k": 0},
    "seed": 0,
}


def entry_files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "value",
    ["she said that", "", [0.25, 1e-30, 0.1 + 0.2], {"a": [1, 2], "b": None}, 3, -12.345678901234567],
    ids=["text", "empty", "floats", "dict", "int", "float"],
)
def test_round_trip(tmp_path, value):
    cache = ResultCache(tmp_path)
    assert cache.get(PARTS) is None
    cache.put(PARTS, value)
    assert cache.get(PARTS) == value  # floats exactly, not approximately
    assert (cache.hits, cache.misses) == (1, 1)


def test_round_trip_survives_a_new_instance(tmp_path):
    ResultCache(tmp_path).put(PARTS, [0.5, 0.25])
    fresh = ResultCache(tmp_path)
    assert fresh.get(PARTS) == [0.5, 0.25]
    assert fresh.hits == 1


def test_dict_order_does_not_matter(tmp_path):
    cache = ResultCache(tmp_path)
    cache.put(PARTS, "x")
    assert cache.get(dict(reversed(list(PARTS.items())))) == "x"


@pytest.mark.parametrize("cache", [
    pytest.param(lambda root: ResultCache(root, enabled=False), id="enabled=False"),
    pytest.param(lambda root: ResultCache(None), id="root=None"),
])
def test_disabled_cache_stores_nothing_and_always_misses(tmp_path, cache):
    c = cache(tmp_path)
    assert not c.enabled
    c.put(PARTS, "value")
    assert c.get(PARTS) is None
    assert c.get(PARTS) is None
    assert (c.hits, c.misses) == (0, 2)
    assert entry_files(tmp_path) == []


@pytest.mark.parametrize(
    "garbage",
    [b"", b"{\"key\": {}, \"val", b"\xff\xfe\x00not json", b"not json at all"],
    ids=["empty", "truncated", "binary", "text"],
)
def test_corrupt_entry_is_a_miss_and_is_overwritten(tmp_path, garbage):
    cache = ResultCache(tmp_path)
    cache.put(PARTS, "good")
    [path] = entry_files(tmp_path)
    path.write_bytes(garbage)
    assert cache.get(PARTS) is None
    assert cache.misses == 1 and cache.hits == 0
    cache.put(PARTS, "rewritten")
    assert entry_files(tmp_path) == [path]
    assert cache.get(PARTS) == "rewritten"


@pytest.mark.parametrize("content", ["null", "[]", "{}", "\"text\"", "{\"key\": {}}"])
def test_valid_json_of_the_wrong_shape_is_a_miss(tmp_path, content):
    cache = ResultCache(tmp_path)
    cache.put(PARTS, "good")
    [path] = entry_files(tmp_path)
    path.write_text(content)
    assert cache.get(PARTS) is None
    cache.put(PARTS, "rewritten")
    assert cache.get(PARTS) == "rewritten"


def test_entries_are_json_with_key_value_and_checksum(tmp_path):
    cache = ResultCache(tmp_path)
    cache.put(PARTS, {"text": "she said", "p": [0.5]}, call="c1")
    [path] = entry_files(tmp_path)
    assert path.suffix == ".json"
    assert path.stem == canonical_key(PARTS)
    entry = json.loads(path.read_text(encoding="utf-8"))  # plain JSON, never pickle
    text = entry["value_json"]
    assert entry == {"format": 2, "key": PARTS, "call": "c1", "value_json": text, "sha256": entry["sha256"]}
    assert json.loads(text) == {"text": "she said", "p": [0.5]}
    # The checksum is the SHA-256 of the key hash, the call and the value's text, one per line.
    blob = f"{canonical_key(PARTS)}\nc1\n{text}".encode()
    assert entry["sha256"] == hashlib.sha256(blob).hexdigest()


def test_writes_leave_no_temporary_files(tmp_path):
    cache = ResultCache(tmp_path)
    for seed in range(20):
        cache.put({**PARTS, "seed": seed}, f"text {seed}")
    files = entry_files(tmp_path)
    assert len(files) == 20
    assert all(p.suffix == ".json" and not p.name.startswith(".") for p in files)
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_failed_write_leaves_neither_entry_nor_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "entry.json"

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(files_mod.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "{}")
    assert not target.exists()
    assert entry_files(tmp_path) == []


def test_failed_write_keeps_the_previous_entry(tmp_path, monkeypatch):
    cache = ResultCache(tmp_path)
    cache.put(PARTS, "old")

    def interrupted(src, dst):
        raise OSError("interrupted")

    with monkeypatch.context() as patch:
        patch.setattr(files_mod.os, "replace", interrupted)
        # The value just computed is not lost to a failed write: the run goes on, warned.
        with pytest.warns(cache_mod.CacheWarning, match="cannot store results.*interrupted"):
            cache.put(PARTS, "new")
    assert cache.get(PARTS) == "old"
    assert len(entry_files(tmp_path)) == 1


@pytest.mark.parametrize("field", sorted(PARTS))
def test_key_changes_with_any_part(tmp_path, field):
    changed = dict(PARTS)
    value = PARTS[field]
    if isinstance(value, dict):
        changed[field] = {**value, "top_p": 0.95}
    elif isinstance(value, int):
        changed[field] = value + 1
    else:
        changed[field] = value + " "  # even a trailing space is another key
    assert canonical_key(changed) != canonical_key(PARTS)
    cache = ResultCache(tmp_path)
    cache.put(PARTS, "original")
    assert cache.get(changed) is None


def test_key_changes_with_added_part_and_scoring_version(monkeypatch):
    base = canonical_key(PARTS)
    assert canonical_key({**PARTS, "extra": 1}) != base
    assert canonical_key({**PARTS, "seed": "0"}) != base  # type matters: 0 vs "0"
    monkeypatch.setattr(cache_mod, "SCORING_VERSION", cache_mod.SCORING_VERSION + 1)
    assert canonical_key(PARTS) != base


def test_key_is_stable_sha256():
    key = canonical_key(PARTS)
    assert key == canonical_key(json.loads(json.dumps(PARTS)))
    assert len(key) == 64 and int(key, 16) >= 0
