"""Every model handle satisfies the typed scoring protocol (bias_core/models/protocol.py), and
the model kinds share one batching module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bias_core.models.causal import CausalLM
from bias_core.models.masked import MaskedLM
from bias_core.models.precision import ExactLM, apply_precision
from bias_core.models.protocol import GeneratingModel, ScoringModel

from conftest import load_tiny
from tiny_model import build_tiny_bart, build_tiny_masked_lm

MODELS = Path(__file__).resolve().parents[1] / "bias_core" / "models"


def test_causal_handle_satisfies_the_protocol(tiny_lm):
    assert isinstance(tiny_lm, CausalLM)
    assert isinstance(tiny_lm, ScoringModel) and isinstance(tiny_lm, GeneratingModel)


def test_exact_precision_handle_satisfies_the_protocol(tiny_lm):
    exact = apply_precision(tiny_lm, "exact", "cpu", cache_dir=None)
    assert isinstance(exact, ExactLM)
    assert isinstance(exact, ScoringModel) and isinstance(exact, GeneratingModel)


@pytest.mark.parametrize("build, kind", [(build_tiny_masked_lm, "masked"), (build_tiny_bart, "seq2seq")])
def test_masked_and_seq2seq_handles_satisfy_the_protocol(build, kind, tmp_path, torch_single_thread):
    lm = load_tiny(build(tmp_path / kind, seed=0), "cpu", cache_dir=tmp_path / "cache")
    assert isinstance(lm, MaskedLM) and lm.kind == kind
    assert isinstance(lm, ScoringModel)
    assert not isinstance(lm, GeneratingModel)  # no next-word probabilities, no generation


def test_masked_lm_takes_no_helper_from_causal():
    tree = ast.parse((MODELS / "masked.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "bias_core.models.causal" not in imported
    assert "bias_core.models.batching" in imported
