"""Bad input, faulty setups: the cache (converted models, trained adapters, results).

Read-only, full or corrupted caches, converted models edited on disk, two processes on one cache,
and a run killed while it stored a call. How each case ends: tests/test_bad_inputs_options.py's
docstring.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from harness import finish, import_before_in_process_runs, no_traceback, rewrite_in_place
from paths import REPO

pytest_plugins = ["pytester"]
import_before_in_process_runs()


# ----- the converted (GGUF -> safetensors) model in the cache --------------------------------
@pytest.fixture
def fake_gguf(tmp_path, tiny_model_dir, monkeypatch):
    """A GGUF file whose "dequantizing" writes the tiny model (no GGUF reader needed); counts calls."""
    from bias_core.models.weights import gguf_cache

    gguf = tmp_path / "pkg" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake weights")
    calls = []

    def dequantize(path, out):
        calls.append(path)
        for f in tiny_model_dir.iterdir():
            if f.is_file():
                shutil.copy(f, out / f.name)

    monkeypatch.setattr(gguf_cache, "dequantize", dequantize)
    return gguf, calls


def test_corrupted_converted_model_is_rebuilt(fake_gguf, tmp_path):
    from bias_core.models.weights import integrity
    from bias_core.models.weights.gguf_cache import ConvertedModelWarning, converted_dir, read_marker

    gguf, calls = fake_gguf
    folder, _ = converted_dir(gguf, tmp_path / "cache")
    recorded = read_marker(folder)["weights"]
    weights = folder / "model.safetensors"
    rewrite_in_place(weights, weights.stat().st_size // 2, os.urandom(4096))
    integrity.forget()
    with pytest.warns(ConvertedModelWarning, match="does not match the weights recorded at conversion"):
        again, _ = converted_dir(gguf, tmp_path / "cache")
    assert len(calls) == 2, "the corrupted folder must be converted again"
    assert integrity.sha256_file(again / "model.safetensors") == recorded["model.safetensors"]["sha256"]
    assert not integrity.check_weights(again, read_marker(again)["weights"])


def test_converted_model_without_recorded_hashes_is_rebuilt_once(fake_gguf, tmp_path):
    from bias_core.models.weights.gguf_cache import MARKER, converted_dir

    gguf, calls = fake_gguf
    folder, _ = converted_dir(gguf, tmp_path / "cache")
    (folder / MARKER).write_text(json.dumps({"gguf": str(gguf)}))  # the layout before hashes were recorded
    converted_dir(gguf, tmp_path / "cache")
    converted_dir(gguf, tmp_path / "cache")
    assert len(calls) == 2


def test_read_only_cache_cannot_hold_a_conversion(fake_gguf, tmp_path, monkeypatch):
    import tempfile

    from bias_core.errors import AuditUsageError
    from bias_core.models.weights import gguf_cache

    gguf, _ = fake_gguf
    monkeypatch.setattr(gguf_cache.tempfile, "mkdtemp", _raising(tempfile.mkdtemp, str(tmp_path / "cache"), errno.EROFS))
    with pytest.raises(AuditUsageError, match=r"--cache-dir .*cannot write the converted model .*Read-only"):
        gguf_cache.converted_dir(gguf, tmp_path / "cache")


def test_read_only_cache_cannot_hold_a_trained_adapter(tmp_path, monkeypatch):
    """Said before training starts (minutes to hours), not when its result is to be stored."""
    import tempfile

    from bias_core.errors import AuditUsageError
    from bias_core.mitigation.training import adapter_cache

    monkeypatch.setattr(adapter_cache.tempfile, "mkdtemp", _raising(tempfile.mkdtemp, str(tmp_path), errno.EROFS))
    trained = []
    with pytest.raises(AuditUsageError, match=r"--cache-dir .*cannot store a trained adapter \(Read-only"):
        adapter_cache.AdapterCache(tmp_path).get_or_build({"method": "debias-tuning"}, trained.append)
    assert trained == []


def _raising(real, prefix: str, code: int):
    def wrapper(*args, **kwargs):
        where = str(kwargs.get("dir") or (args[2] if len(args) > 2 else ""))
        if where.startswith(prefix):
            raise OSError(code, os.strerror(code), where)
        return real(*args, **kwargs)

    return wrapper


# ----- the result cache -----------------------------------------------------------------------
def test_read_only_cache_dir_falls_back_to_no_cache(project, tiny_model_dir, monkeypatch):
    import tempfile

    from bias_core.storage import files as files_mod

    monkeypatch.setattr(files_mod.tempfile, "mkstemp", _raising(tempfile.mkstemp, str(project.cache), errno.EROFS))
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir))
    assert result.ret in (0, 1), out[-2000:]
    assert f"--cache-dir {project.cache}: cannot store results (Read-only file system)" in out
    assert "running as with --no-cache" in out
    doc = project.results()
    assert doc["results"][0]["value"] is not None and doc["run"]["cache"]["enabled"] is False
    no_traceback(out)


def test_cache_dir_that_is_a_file_falls_back_to_no_cache(project, tiny_model_dir):
    project.cache.parent.mkdir(parents=True, exist_ok=True)
    project.cache.write_text("not a folder")
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), "--collect-only")
    assert result.ret == pytest.ExitCode.OK and "cannot store results" in out and "--no-cache" in out


def test_full_disk_while_storing_keeps_the_result(project, tiny_model_dir, monkeypatch):
    from bias_core.storage import result_cache as cache_mod

    real = cache_mod.atomic_write_text

    def full(path, text, durable=False):
        if "entries" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text, durable)

    monkeypatch.setattr(cache_mod, "atomic_write_text", full)
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir))
    assert result.ret in (0, 1), out[-2000:]
    assert "cannot store results (No space left on device)" in out
    assert project.results()["results"][0]["value"] is not None
    no_traceback(out)


@pytest.mark.parametrize("garbage", [b"{not json", b"[1, 2]", b"", b"\xff\xfe\x00"])
def test_corrupt_cache_entry_is_a_miss_and_is_replaced(tmp_path, garbage):
    from bias_core.storage.result_cache import ResultCache, canonical_key

    cache = ResultCache(tmp_path)
    parts = {"op": "x", "prompt": "p"}
    cache.put(parts, 0.25)
    key = canonical_key(parts)
    (tmp_path / "entries" / key[:2] / f"{key}.json").write_bytes(garbage)
    assert cache.get(parts) is None
    cache.put(parts, 0.25)
    assert cache.get(parts) == 0.25


_WRITER = """
import os, sys, time
from pathlib import Path
from bias_core.storage.result_cache import ResultCache
# Both writers start together: each waits until the other is ready (deadline 300 s).
meet = Path(sys.argv[2])
(meet / f"ready-{os.getpid()}").touch()
deadline = time.monotonic() + 300
while len(list(meet.iterdir())) < 2:
    if time.monotonic() > deadline:
        sys.exit("waited 300 s for the other writer to start")
    time.sleep(0.01)
cache = ResultCache(sys.argv[1])
for i in range(300):
    cache.put({"op": "x", "i": i % 50}, [i % 50] * 20)
"""


def test_two_processes_on_one_cache(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "meet").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "cache"), str(tmp_path / "meet")], env=env,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [err for _, err in finish(procs, "two cache writers")]
    assert [p.returncode for p in procs] == [0, 0], errors
    entries = list((tmp_path / "cache" / "entries").rglob("*.json"))
    assert len(entries) == 50
    from bias_core.storage.result_cache import ResultCache

    cache = ResultCache(tmp_path / "cache")
    for i in range(50):  # every entry whole (written to a temporary file and renamed): it proves its key and value
        assert cache.get({"op": "x", "i": i}) == [i] * 20
    assert cache.rejected == 0
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_result_cache_keys_carry_the_verified_weights(tiny_model_dir, tmp_path, torch_single_thread):
    """Values computed from other weight bytes are never served, even under the same model name."""
    import dataclasses

    from bias_core.models import LoadOptions, load_model, resolve_model

    lm = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path, use_cache=True, progress=False))
    assert len(lm.cache_identity()["weights"]) == 64
    lm.word_probs(["My friend is a nurse, and"], ["she"])
    other = lm.with_engine(dataclasses.replace(lm.engine, weights_sha256="0" * 64))
    misses = other.cache.misses
    other.word_probs(["My friend is a nurse, and"], ["she"])
    assert other.cache.misses == misses + 1


def test_digest_of_recorded_weights_ignores_order():
    from bias_core.models.weights.integrity import weights_digest

    a = {"a.safetensors": {"sha256": "1"}, "b.safetensors": {"sha256": "2"}}
    assert weights_digest(a) == weights_digest(dict(reversed(list(a.items()))))
    assert weights_digest(a) != weights_digest({**a, "b.safetensors": {"sha256": "3"}})
    assert len(hashlib.sha256().hexdigest()) == len(weights_digest(a))


def test_call_stored_in_part_is_recomputed_with_its_batch_mates(tiny_model_dir, tmp_path, torch_single_thread):
    """A run killed while one call stored its entries: the next run computes that call's missing
    prompts together with its stored ones (the same batch mates), so the numbers are bitwise those
    of an uninterrupted run; entries stored by other calls are used as they are."""
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.probes.disclosure import template_probe

    prompts = template_probe("color").prompts
    words = ["she", "he", "her", "his"]
    lm = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path, use_cache=True, progress=False))
    first = lm.word_probs(prompts, words)
    entries = sorted((tmp_path / "entries").rglob("*.json"))
    assert len(entries) == len(prompts)
    for entry in entries[::2]:  # half of the call's entries never reached the disk
        entry.unlink()
    scored = []
    real = lm.engine._score_tokens
    lm.engine._score_tokens = lambda requests, desc: scored.append(len(requests)) or real(requests, desc)
    again = lm.word_probs(prompts, words)
    assert scored == [len(prompts) * len(words)], "the whole call is computed again"
    assert again.tolist() == first.tolist()  # bit for bit
    scored.clear()
    lm.word_probs(prompts[:3] + ["My friend has a new bike, and"], words)  # another call: its hits stay
    assert scored == [len(words)]
