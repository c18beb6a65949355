"""Every engine satisfies the typed engine protocol, every loaded model the scoring protocol
(bias_core/models/protocol.py), and the model kinds share one batching module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bias_core.models.cached import CachedModel
from bias_core.models.engines.fake import FakeEngine
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.engines.hf.masked import MaskedLM
from bias_core.models.precision.modes import ExactLM, apply_precision
from bias_core.models.protocol import CAPABILITIES, Engine, ScoringModel

from harness import load_tiny
from tiny_model import build_tiny_bart, build_tiny_masked_lm

MODELS = Path(__file__).resolve().parents[1] / "bias_core" / "models"


def test_causal_handle_satisfies_the_protocol(tiny_lm):
    assert isinstance(tiny_lm, CachedModel) and isinstance(tiny_lm.engine, CausalLM)
    assert isinstance(tiny_lm.engine, Engine) and isinstance(tiny_lm, ScoringModel)
    assert {"generation", "next_word", "training"} <= tiny_lm.capabilities <= set(CAPABILITIES)


def _statically_missing(obj, protocol) -> list[str]:
    """The protocol's members that ``inspect.getattr_static`` does not find on ``obj``: from
    Python 3.12 isinstance looks them up that way, so a member served only by ``__getattr__``
    leaves ``obj`` outside the protocol there (and inside it on 3.10 and 3.11)."""
    import inspect
    import typing

    missing = []
    for name in sorted(typing._get_protocol_attrs(protocol)):
        try:
            inspect.getattr_static(obj, name)
        except AttributeError:
            missing.append(name)
    return missing


def test_exact_precision_handle_satisfies_the_protocol(tiny_lm, device, monkeypatch):
    # A CPU without fast bf16 runs exact mode as fp32 (no ExactLM); bf16 still computes there, only
    # slowly, so the handle is built on every CPU by saying the CPU has it.
    monkeypatch.setattr("bias_core.models.precision.half._cpu_has_bf16", lambda: True)
    exact = apply_precision(tiny_lm, "exact", device, cache_dir=None)
    assert isinstance(exact, ExactLM)
    assert isinstance(exact, ScoringModel)
    assert _statically_missing(exact, ScoringModel) == []
    for name in ("name", "kind", "fingerprint", "tokenizer_fingerprint", "capabilities"):
        assert getattr(exact, name) == getattr(tiny_lm, name)  # the fp32 handle's
    assert exact.token_counts(["She is a nurse."]) == tiny_lm.token_counts(["She is a nurse."])


def test_every_handle_satisfies_the_protocol_as_python_3_12_checks_it(tiny_lm):
    assert _statically_missing(tiny_lm, ScoringModel) == []
    assert _statically_missing(tiny_lm.engine, Engine) == []


@pytest.mark.parametrize("build, kind", [(build_tiny_masked_lm, "masked"), (build_tiny_bart, "seq2seq")])
def test_masked_and_seq2seq_handles_satisfy_the_protocol(build, kind, tmp_path, torch_single_thread):
    lm = load_tiny(build(tmp_path / kind, seed=0), "cpu", cache_dir=tmp_path / "cache")
    assert isinstance(lm.engine, MaskedLM) and lm.kind == kind
    assert isinstance(lm.engine, Engine) and isinstance(lm, ScoringModel)
    # no next-word probabilities, no generation: a masked LM fills slots inside a sentence
    assert "generation" not in lm.capabilities and "next_word" not in lm.capabilities
    assert "mask_filling" in lm.capabilities


@pytest.mark.parametrize("kind", ["causal", "masked"])
def test_the_fake_engine_implements_the_whole_engine_protocol(kind):
    engine = FakeEngine(kind=kind)
    assert isinstance(engine, Engine)
    assert isinstance(CachedModel(engine), ScoringModel)
    # every member the protocol declares is really there (isinstance checks methods only by name)
    declared = {n for n in vars(Engine) if not n.startswith("_")} | set(Engine.__annotations__)
    assert declared <= set(dir(engine))


def test_masked_lm_takes_no_helper_from_causal():
    tree = ast.parse((MODELS / "engines" / "hf" / "masked.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "bias_core.models.engines.hf.causal" not in imported
    assert "bias_core.models.batching" in imported


def test_engines_never_cache():
    """Caching is one wrapper (cached.py): no engine module calls the cache itself."""
    for path in [MODELS / "precision" / "half.py", *sorted((MODELS / "engines").rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        assert "cached_map" not in text and "ResultCache" not in text, path.name
