"""--precision exact's greedy decoding when a row's half-precision choices part from fp32's at
step after step: it resumes in half precision at most HALF_RESUMES times, then fp32 decodes the
rest of that row, and the continuations are still fp32's (bias_core/models/precision/exact_decoding.py).

The "half" handle here is the tiny model with its output layer perturbed, so that its greedy
choices differ from the fp32 model's at most steps (what random 7B weights did in bf16 on the
first GPU run), and the bound flags every step."""

from __future__ import annotations

import copy
import dataclasses

from bias_core.models.decoding import DecodingConfig
from bias_core.models.precision import exact_decoding
from bias_core.models.precision.calibration import PrecisionBound
from bias_core.models.precision.modes import ExactLM

from lm_references import PROMPTS


def _disagreeing_exact(tiny_lm, scale: float = 3.0) -> ExactLM:
    import torch

    model = copy.deepcopy(tiny_lm.engine.model)
    with torch.no_grad():
        weight = model.get_output_embeddings().weight
        weight.add_(torch.randn(weight.shape, generator=torch.Generator().manual_seed(0)).to(weight) * scale * weight.std())
    other = tiny_lm.with_engine(dataclasses.replace(tiny_lm.engine, model=model))
    every_step = PrecisionBound(token=1e9, margin=1e9, per_sqrt_token=1e9)
    return ExactLM(tiny_lm, other, every_step)


def test_rows_corrected_again_and_again_finish_in_fp32_with_fp32s_continuations(tiny_lm, monkeypatch):
    exact = _disagreeing_exact(tiny_lm)
    engines = []
    real = exact_decoding._half_decode

    def counted(engine, *args):
        engines.append(engine)
        return real(engine, *args)

    monkeypatch.setattr(exact_decoding, "_half_decode", counted)
    config = DecodingConfig(max_new_tokens=12)
    got = exact.generate(PROMPTS, config)
    assert got == tiny_lm.generate(PROMPTS, config)  # fp32's greedy continuations
    fp32_rows = exact.rechecks.counts["fp32_rows"][0]
    assert fp32_rows > 0  # the perturbed model parts from fp32 more than HALF_RESUMES times in some row
    # one half decode, HALF_RESUMES resumed ones, then one fp32 decode: bounded whatever the row
    assert len(engines) == exact_decoding.HALF_RESUMES + 2
    assert engines[-1] is tiny_lm.engine and all(e is exact.half.engine for e in engines[:-1])


def test_without_the_fallback_the_same_rows_need_more_half_decodes(tiny_lm, monkeypatch):
    """What the bound prevents: with resuming unlimited, the same rows go through more rounds of
    half decoding (one per correction), with the same continuations in the end."""
    exact = _disagreeing_exact(tiny_lm)
    monkeypatch.setattr(exact_decoding, "HALF_RESUMES", 10**6)
    rounds = []
    real = exact_decoding._half_decode
    monkeypatch.setattr(exact_decoding, "_half_decode", lambda engine, *a: rounds.append(engine) or real(engine, *a))
    config = DecodingConfig(max_new_tokens=12)
    assert exact.generate(PROMPTS, config) == tiny_lm.generate(PROMPTS, config)
    assert len(rounds) > 2 + 2 and "fp32_rows" not in exact.rechecks.counts
