"""--precision exact|fp32|half on the tiny model: exact decisions and continuations equal fp32's,
and it is the fp32 re-check that keeps them equal where half precision would not."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bias_core.gating.precision_recheck import needs_fp32, propagated_error
from bias_core.gating.thresholds import Gate
from bias_core.metrics.disclosure import add, gender_lean, gld
from bias_core.models.decoding import DecodingConfig
from bias_core.models.precision import modes
from bias_core.models.precision.modes import (
    ExactLM,
    Rechecks,
    apply_precision,
    compared_loglikelihood,
    compared_sentence_logprob,
    settle_pairs,
)

pytest.importorskip("torch")

# Long prompts: the first positions of a text run in fp32 (half.py), so ties are engineered
# where half precision computes.
LONG_PROMPTS = [
    "My friend is a nurse, and she said that her job is hard. My neighbour is a pilot, and",
    "The man and the woman, the boy and the girl, the father and the mother. My cousin is a dancer, and",
    "She said he would come. He said she would come. Her book, his book. The person is a teacher, and",
    "My friend likes to read books, and he likes to paint. Our colleague is a mechanic, and",
]


# ----- the pair rule, by hand ------------------------------------------------------------------
def test_settle_pairs_rescores_exactly_the_pairs_the_bound_could_flip():
    values = np.array([-10.0, -10.5, -20.0, -23.0])
    bounds = np.full(4, 0.3)
    calls = []

    def rescore(idx):
        calls.append(list(idx))
        return [{0: -10.4, 1: -10.3}[i] for i in idx]

    # pair (0, 1): margin 0.5 <= 0.3 + 0.3 -> both re-scored; pair (2, 3): margin 3 > 0.6 -> kept
    out, n = settle_pairs(values, bounds, [(0, 1), (2, 3)], None, rescore)
    assert calls == [[0, 1]] and n == 2
    assert out.tolist() == [-10.4, -10.3, -20.0, -23.0]


def test_settle_pairs_weights_scale_margins_and_bounds():
    # 2 * -10 vs 1 * -19.5: margin 0.5; bounds 2 * 0.1 + 1 * 0.1 = 0.3 < 0.5: safe
    out, n = settle_pairs(np.array([-10.0, -19.5]), np.array([0.1, 0.1]), [(0, 1)], np.array([2.0, 1.0]),
                          lambda idx: pytest.fail("nothing to re-score"))
    assert n == 0 and out.tolist() == [-10.0, -19.5]
    out, n = settle_pairs(np.array([-10.0, -19.5]), np.array([0.2, 0.2]), [(0, 1)], np.array([2.0, 1.0]),
                          lambda idx: [-1.0 for _ in idx])
    assert n == 2


def test_settle_pairs_an_exact_tie_is_always_rechecked():
    out, n = settle_pairs(np.array([-3.0, -3.0]), np.zeros(2), [(0, 1)], None, lambda idx: [-3.0, -2.0])
    assert n == 2 and out.tolist() == [-3.0, -2.0]


# ----- the continuous-metric gate check, by hand -------------------------------------------------
def _result(low, high):
    from bias_core.metrics import MetricResult

    return MetricResult("GLD", (low + high) / 2, low, high, 10)


@pytest.mark.parametrize(("low", "high", "error", "expected"), [
    (0.10, 0.20, 0.05, False),   # both endpoints more than 0.05 from 0.30
    (0.10, 0.26, 0.05, True),    # high endpoint 0.04 from the limit
    (0.31, 0.40, 0.05, True),    # low endpoint 0.01 above it
    (0.36, 0.40, 0.05, False),
    (0.10, 0.20, None, True),    # no propagation known: always recompute
])
def test_needs_fp32_one_sided(low, high, error, expected):
    assert needs_fp32(_result(low, high), Gate("GLD", 0.30, "max", "metrics.GLD"), error) is expected


def test_needs_fp32_two_sided_checks_both_thresholds():
    gate = Gate("crows_stereo", 10.0, "max", "metrics.crows_stereo", ideal=50.0)  # [40, 60]
    assert needs_fp32(_result(41.0, 45.0), gate, 2.0) is True     # 41 within 2 of 40
    assert needs_fp32(_result(45.0, 58.5), gate, 2.0) is True     # 58.5 within 2 of 60
    assert needs_fp32(_result(45.0, 55.0), gate, 2.0) is False


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), b=st.floats(0.001, 0.5), metric=st.sampled_from(["GLD", "ADD", "gender_lean"]))
def test_propagated_error_bounds_the_move_of_the_ci_endpoints(seed, b, metric):
    """Every word probability moved by a factor within e^{+-b}: GLD/ADD/gender_lean CI endpoints
    move by at most propagated_error (the derivation in gating/precision_recheck.py; gender_lean's items
    are GLD's with their sign, tanh(ln(F/M) / 2), so GLD's bound holds for them)."""
    rng = np.random.default_rng(seed)
    pf = np.exp(rng.uniform(-12, -1, size=(12, 5)))
    pm = np.exp(rng.uniform(-12, -1, size=(12, 5)))
    fn = {"GLD": gld, "ADD": add, "gender_lean": gender_lean}[metric]
    half = fn(pf, pm, seed=3)
    moved = fn(pf * np.exp(rng.uniform(-b, b, pf.shape)), pm * np.exp(rng.uniform(-b, b, pm.shape)), seed=3)
    error = propagated_error(half, b, metric)
    assert abs(moved.ci_low - half.ci_low) <= error + 1e-12
    assert abs(moved.ci_high - half.ci_high) <= error + 1e-12
    assert abs(moved.value - half.value) <= error + 1e-12


def test_only_metrics_whose_catalogue_entry_propagates_the_error_get_one():
    half = _result(0.2, 0.3)
    assert propagated_error(half, 0.01, "GLD") == 0.01  # GLD moves by at most the word bound
    assert propagated_error(half, 0.01, "DA_score") is None  # a share of decisions: nothing to propagate
    assert propagated_error(half, 0.01, "not_a_metric") is None


# ----- the tiny model --------------------------------------------------------------------------------
@pytest.fixture
def exact_lm(tiny_lm) -> ExactLM:
    _needs_bf16(tiny_lm)
    return apply_precision(tiny_lm, "exact", _device_of(tiny_lm), cache_dir=None)


def _device_of(lm) -> str:
    return lm.engine.model.device.type  # exact mode on the handle's own device: its cuda case runs on the GPU


def _needs_bf16(lm=None):
    from bias_core.models.precision.half import half_dtype

    if half_dtype(_device_of(lm) if lm is not None else "cpu")[0] is None:
        pytest.skip("this CPU computes bf16 slowly, so --precision exact runs fp32 only here")


def test_modes_and_fallback_note(tiny_lm):
    from bias_core.models.precision.half import half_dtype

    assert apply_precision(tiny_lm, "fp32", "cpu", None) is tiny_lm
    handle = apply_precision(tiny_lm, "exact", "cpu", None)
    if half_dtype("cpu")[0] is None:
        assert handle is tiny_lm and "neither AVX512-BF16 nor AMX-BF16" in handle.precision_note
    else:
        assert isinstance(handle, ExactLM) and handle.fp32() is tiny_lm
        info = handle.precision_info()
        assert info["mode"] == "exact" and info["bound"]["margin"] > 0 and info["bound"]["safety"] == 2.0


def test_half_values_are_cached_apart_from_fp32(tiny_model_dir, tmp_path, torch_single_thread):
    _needs_bf16()
    from bias_core.models import LoadOptions, load_model, resolve_model

    sentences = ["My friend is a nurse, and she said that her job is hard."]
    opts = dict(cache_dir=tmp_path / "cache", use_cache=True, progress=False)
    fp32 = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(precision="fp32", **opts)).sentence_logprob(sentences)
    half = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(precision="half", **opts)).sentence_logprob(sentences)
    again = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(precision="fp32", **opts)).sentence_logprob(sentences)
    assert half[0] != fp32[0]  # not read from the fp32 entry
    assert again[0] == fp32[0]  # and the fp32 entry is untouched


def test_half_values_do_not_depend_on_the_batch(exact_lm):
    """Each row gets fp32 at the same positions whatever it is batched with (half.py)."""
    _needs_bf16(exact_lm.full)
    sentences = [p + " she" for p in LONG_PROMPTS] + ["She said.", "My friend is a nurse, and he said that his job is hard."]
    half = exact_lm.half
    half.batch_size = 1
    one = half.sentence_logprob(sentences)
    half.batch_size = 8
    many = half.sentence_logprob(sentences)
    # a row whose position ran in fp32 in one batch and bf16 in the other would move by ~0.05
    np.testing.assert_allclose(one, many, atol=5e-3)


def test_exact_gives_fp32_decisions_and_continuations_on_the_tiny_model(tiny_lm, exact_lm):
    _needs_bf16(tiny_lm)
    from tiny_model import CORPUS

    sentences = list(CORPUS[:40])
    pairs = [(k, k + 1) for k in range(0, 40, 2)]
    fp32 = tiny_lm.sentence_logprob(sentences)
    got = compared_sentence_logprob(exact_lm, sentences, pairs)
    assert [got[i] > got[j] for i, j in pairs] == [fp32[i] > fp32[j] for i, j in pairs]
    prompts = [c.split(", and")[0] + ", and" for c in CORPUS[::5]] + LONG_PROMPTS
    config = DecodingConfig(max_new_tokens=12)
    assert exact_lm.generate(prompts, config) == tiny_lm.generate(prompts, config)
    # rows resumed after a corrected step are decoded, and counted, again
    assert exact_lm.rechecks.counts["decoding_rows"][1] >= len(prompts)
    assert exact_lm.rechecks.seconds > 0  # the re-checks' fp32 passes were timed
    assert set(exact_lm.setup_seconds) == {"half_copy", "calibration"}


def _near_tie(tiny_lm, prompt: str, eps: float):
    """(fp32 handle, exact handle, the two tied tokens): the tiny model with two output rows moved
    so that, after ``prompt``, two whole-word tokens lead fp32's next-token logits, eps apart."""
    import torch

    model = copy.deepcopy(tiny_lm.engine.model)
    ids = torch.tensor([tiny_lm.engine.encode(prompt)], device=model.device)
    with torch.inference_mode():
        h = model.model(input_ids=ids).last_hidden_state[0, -1]
        logits = model.lm_head(h)
    # tokens the continuation " word" is scored as, alone: the tie is then the decision itself
    words = [t for t in logits.argsort(descending=True).tolist()
             if tiny_lm.engine.split_request(prompt, tiny_lm.engine.tokenizer.decode([t]))[1] == [t]][:2]
    first, second = words
    with torch.no_grad():
        w = model.lm_head.weight
        w[first] += (logits.max() + 1.0 - logits[first]) * h / h.dot(h)
        w[second] += (logits.max() + 1.0 + eps - logits[second]) * h / h.dot(h)
    full = tiny_lm.with_engine(dataclasses.replace(tiny_lm.engine, model=model))
    return full, apply_precision(full, "exact", model.device.type, cache_dir=None), (first, second)


def _decisions(lm, prompt, tokens, exact):
    requests = [(prompt, lm.engine.tokenizer.decode([t])) for t in tokens]
    scores = compared_loglikelihood(lm, requests, [(0, 1)]) if exact else lm.loglikelihood(requests)
    return scores[0] > scores[1]


@pytest.mark.slow_on_cpu
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.sampled_from(LONG_PROMPTS), eps=st.floats(-0.05, 0.05).filter(lambda e: abs(e) > 1e-4))
def test_near_ties_come_out_as_fp32_decides_them(tiny_lm, prompt, eps):
    _needs_bf16(tiny_lm)
    full, exact, tokens = _near_tie(tiny_lm, prompt, eps)
    config = DecodingConfig(max_new_tokens=3)
    assert exact.generate([prompt], config) == full.generate([prompt], config)
    assert _decisions(exact, prompt, tokens, True) == _decisions(full, prompt, tokens, False)


@pytest.mark.slow_on_cpu
def test_without_the_recheck_near_ties_differ(tiny_lm):
    """The same engineered ties, re-check off: half precision decides some of them otherwise,
    so it is the re-check that keeps exact equal to fp32."""
    _needs_bf16(tiny_lm)
    config = DecodingConfig(max_new_tokens=3)
    differ = {"continuations": 0, "decisions": 0}
    for prompt in LONG_PROMPTS:
        for eps in (-0.003, -0.001, 0.001, 0.003):
            full, exact, tokens = _near_tie(tiny_lm, prompt, eps)
            exact.recheck = False
            differ["continuations"] += exact.generate([prompt], config) != full.generate([prompt], config)
            differ["decisions"] += _decisions(exact, prompt, tokens, True) != _decisions(full, prompt, tokens, False)
            exact.recheck = True
            assert exact.generate([prompt], config) == full.generate([prompt], config)
            assert _decisions(exact, prompt, tokens, True) == _decisions(full, prompt, tokens, False)
    assert differ["continuations"] > 0 and differ["decisions"] > 0, differ


def test_sampled_decoding_runs_in_fp32(tiny_lm, exact_lm):
    _needs_bf16(tiny_lm)
    config = DecodingConfig(max_new_tokens=6, do_sample=True, temperature=0.7, top_k=10)
    prompts = LONG_PROMPTS[:2]
    assert exact_lm.generate(prompts, config, seed=5) == tiny_lm.generate(prompts, config, seed=5)


def test_bound_of_a_sum_grows_like_sqrt_of_its_tokens():
    from bias_core.models.precision.calibration import PrecisionBound

    b = PrecisionBound(token=0.3, margin=0.4, per_sqrt_token=0.1)
    assert b.of_sum(1) == 0.3                       # one token: the per-token bound
    assert b.of_sum(16) == pytest.approx(0.4)       # 0.1 * sqrt(16)
    assert b.of_sum(100) == pytest.approx(1.0)
    assert math.isclose(b.of_sum(0), 0.3)


def test_calibrated_bound_is_cached_as_json(tiny_lm, tmp_path):
    _needs_bf16(tiny_lm)
    import json

    first = apply_precision(tiny_lm, "exact", _device_of(tiny_lm), cache_dir=tmp_path)
    [stored] = list((tmp_path / "precision").glob("*.json"))
    doc = json.loads(stored.read_text())
    assert doc["key"]["model"] == tiny_lm.fingerprint and doc["bound"]["margin"] == first.bound.margin
    second = apply_precision(tiny_lm, "exact", _device_of(tiny_lm), cache_dir=tmp_path)
    assert second.bound == first.bound


@pytest.mark.slow_on_cpu
def test_exact_gate_recomputes_in_fp32_exactly_when_the_verdict_could_differ(tiny_lm, exact_lm):
    _needs_bf16(tiny_lm)
    from bias_core.gating.precision_recheck import ExactGate
    from bias_core.probes.lexicon import FEMALE_WORDS, MALE_WORDS
    from bias_core.suites.disclosure import DisclosureAudit

    reference = DisclosureAudit(tiny_lm).result("natural-default", "GLD")
    half = DisclosureAudit(exact_lm).compute("natural-default", "GLD")
    error = propagated_error(half, exact_lm.word_bound(list(FEMALE_WORDS) + list(MALE_WORDS)), "GLD")
    assert abs(half.ci_high - reference.ci_high) <= error  # the propagation holds on a real model

    far = ExactGate(lambda metric, probe: Gate("GLD", half.ci_high + 2 * error + 0.01, "max", "test"))
    kept = DisclosureAudit(exact_lm, precision_check=far).result("natural-default", "GLD")
    assert kept.value == half.value and kept.breakdown["precision"]["computed_in"] == "bfloat16"
    assert far.recomputed == []

    near = ExactGate(lambda metric, probe: Gate("GLD", half.ci_high + error / 2, "max", "test"))
    redone = DisclosureAudit(exact_lm, precision_check=near).result("natural-default", "GLD")
    assert (redone.value, redone.ci_low, redone.ci_high) == (reference.value, reference.ci_low, reference.ci_high)
    assert redone.breakdown["precision"]["half_value"] == half.value
    assert near.recomputed == ["natural-default-GLD"]

    direct = ExactGate(lambda metric, probe: pytest.fail("fp32 straight away: no gate needed"))
    suite = DisclosureAudit(exact_lm, precision_check=direct)
    assert direct(suite, "natural-default", "GAS").value == DisclosureAudit(tiny_lm).result("natural-default", "GAS").value


def test_auto_is_fp32_on_cpu_and_exact_on_cuda(tiny_lm):
    from bias_core.models.precision.modes import AUTO_CPU_NOTE, effective_precision

    assert effective_precision("auto", "cpu") == "fp32" and effective_precision("auto", "cuda") == "exact"
    assert effective_precision("auto", "cuda:1") == "exact"
    for mode in ("exact", "fp32", "half"):
        assert effective_precision(mode, "cpu") == mode == effective_precision(mode, "cuda")
    saved = {k: tiny_lm.__dict__[k] for k in ("precision", "precision_note") if k in tiny_lm.__dict__}
    try:
        handle = apply_precision(tiny_lm, "auto", "cpu", None)
        assert handle is tiny_lm and handle.precision == "fp32" and handle.precision_note == AUTO_CPU_NOTE
    finally:  # the model is shared by the session's tests
        for k in ("precision", "precision_note"):
            tiny_lm.__dict__.pop(k, None)
        tiny_lm.__dict__.update(saved)


def test_fp32_work_is_timed_per_test_even_when_it_raises(monkeypatch):
    """Exact mode's fp32 seconds: what a timed block took (on a fake clock), kept when the block
    raises, and a test's share is the difference since its start."""
    ticks = iter([10.0, 12.5, 20.0, 21.25])
    monkeypatch.setattr(modes.time, "perf_counter", lambda: next(ticks))
    rechecks = Rechecks()
    with rechecks.timed():
        pass
    with pytest.raises(RuntimeError), rechecks.timed():
        raise RuntimeError("an fp32 pass that failed still took its time")
    assert rechecks.seconds == 3.75

    class Handle:
        def __init__(self):
            self.rechecks = rechecks

        def precision_info(self):
            return {"mode": "exact", "bound": {"token": 0.1, "margin": 0.2, "per_sqrt_token": 0.3, "safety": 2.0}}

    fields = modes.test_precision_fields(Handle(), {}, seconds_before=1.25)
    assert fields["fp32_s"] == 2.5 and fields["rechecked"] == "none"
    assert "fp32_s" not in modes.test_precision_fields(Handle(), {})  # no start taken: no share claimed
