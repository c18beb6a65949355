"""Paired original-vs-mitigated comparisons, the over-debiasing guards, the held-out text and the
mitigation results table (issue 4)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.errors import AuditUsageError
from bias_core.metrics.association import da_score
from bias_core.metrics.disclosure import gas, gld
from bias_core.metrics.preference import stereoset_scores
from bias_core.metrics.result import MetricResult
from bias_core.mitigation.evaluation.bias_reduction import paired_reduction
from bias_core.mitigation.evaluation.guards import (
    da_score_drop,
    lm_score_drop,
    perplexity,
    perplexity_rise,
)
from bias_core.mitigation.evaluation.results_table import mitigation_table, table_html, write_table_csv
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.heldout import load_heldout_text
from bias_core.probes.lexicon import COMPLETION_FEMALE_WORDS, COMPLETION_MALE_WORDS, gendered_words
from bias_core.probes.sources import project_data, read_lines

from harness import load_tiny
from tiny_model import build_tiny_causal_lm
from tolerances import Forward, assert_close


def mean_result(scores, ids=None, metric="gld") -> MetricResult:
    """A per-item-mean metric result, as bias_core.metrics.disclosure builds them."""
    scores = [float(s) for s in scores]
    ids = list(range(len(scores))) if ids is None else list(ids)
    details = tuple({"id": i, "prompt": f"prompt {i}", "score": s} for i, s in zip(ids, scores))
    value = float(np.mean(scores))
    return MetricResult(metric=metric, value=value, ci_low=value, ci_high=value, n=len(scores), details=details)


# ----- paired_reduction ------------------------------------------------------------------------
def test_paired_reduction_small_n_is_exact_by_hand():
    res = paired_reduction(mean_result([3, 4, 5]), mean_result([2, 2, 2]))
    # d = [1, 2, 3]: of the 8 sign patterns only the all-plus one reaches mean 2.
    assert res.metric == "gld_reduction"
    assert res.value == pytest.approx(2.0)
    assert res.p_value == pytest.approx(1 / 8)
    assert 1.0 <= res.ci_low <= 2.0 <= res.ci_high <= 3.0
    assert res.n == 3
    assert [d["score"] for d in res.details] == [1.0, 2.0, 3.0]
    assert res.details[1] == {"id": 1, "prompt": "prompt 1", "score": 2.0, "original": 4.0, "mitigated": 2.0}
    b = res.breakdown
    assert (b["original"], b["mitigated"], b["n_pairs"]) == (4.0, 2.0, 3)
    assert b["relative_change"] == pytest.approx(-0.5)  # (2 - 4) / 4: bias halved
    assert "exact" in b["test"]


def test_paired_reduction_mixed_signs_by_hand():
    # d = [2, -1]: patterns (+2,-1)=1, (-2,-1)=-3, (+2,+1)=3, (-2,+1)=-1 -> 2 of 4 reach >= 1.
    res = paired_reduction(mean_result([2, 0]), mean_result([0, 1]), metric="custom")
    assert res.metric == "custom"
    assert res.value == pytest.approx(0.5)
    assert res.p_value == pytest.approx(0.5)


def test_paired_reduction_matches_items_by_id_not_position():
    orig = mean_result([0.9, 0.1], ids=["a", "b"])
    mit = mean_result([0.0, 0.8], ids=["b", "a"])  # a: 0.9 -> 0.8, b: 0.1 -> 0.0
    res = paired_reduction(orig, mit)
    assert [d["id"] for d in res.details] == ["a", "b"]
    assert [d["score"] for d in res.details] == pytest.approx([0.1, 0.1])


def test_paired_reduction_large_n_uses_at_least_10000_draws():
    # n = 20 > 16: Monte Carlo. With every d > 0 the observed mean is the largest possible, so
    # p = (0 + 1) / (draws + 1) unless a draw hits the all-plus pattern (chance ~1%, seeded).
    res = paired_reduction(mean_result(np.arange(20) + 1.0), mean_result(np.zeros(20)), n_resamples=100)
    assert res.p_value == pytest.approx(1 / 10001, abs=1.5e-4)
    assert res.p_value < 1 / 101  # n_resamples=100 was raised to the minimum
    assert "10000 seeded draws" in res.breakdown["test"]


def test_paired_reduction_is_seeded():
    a = mean_result(np.linspace(0, 1, 30) ** 2)
    b = mean_result(np.linspace(0, 1, 30)[::-1] * 0.5)
    r1, r2 = paired_reduction(a, b, seed=3), paired_reduction(a, b, seed=3)
    assert (r1.ci_low, r1.ci_high, r1.p_value) == (r2.ci_low, r2.ci_high, r2.p_value)


def test_paired_reduction_on_real_gas_and_gld_results():
    ids = ["p0", "p1", "p2"]
    before = gas(["she smiled", "he left", "it rained"], ["she", "he"], ids=ids)
    after = gas(["they smiled", "he left", "it rained"], ["she", "he"], ids=ids)
    res = paired_reduction(before, after)
    assert res.metric == "gas_reduction" and res.value == pytest.approx(1 / 3)
    assert res.p_value == pytest.approx(1 / 2)  # d = [1, 0, 0]: 4 of 8 patterns reach sum 1
    # GLD per prompt: |0.3 - 0.1| / 0.4 = 0.5 -> |0.2 - 0.2| / 0.4 = 0; |0.1 - 0.3| / 0.4 = 0.5 -> 0.25
    g0 = gld([[0.3], [0.1]], [[0.1], [0.3]], ids=["x", "y"])
    g1 = gld([[0.2], [0.15]], [[0.2], [0.25]], ids=["x", "y"])
    res = paired_reduction(g0, g1)
    assert [d["score"] for d in res.details] == pytest.approx([0.5, 0.25])
    assert res.value == pytest.approx(0.375) and res.p_value == pytest.approx(1 / 4)


def test_paired_reduction_names_missing_ids():
    orig = mean_result([1, 2, 3], ids=["a", "b", "c"])
    mit = mean_result([1, 2, 3], ids=["a", "b", "z"])
    with pytest.raises(ValueError, match=r"only in the original result: 'c'.*only in the mitigated result: 'z'"):
        paired_reduction(orig, mit)


def test_paired_reduction_rejects_duplicate_ids_and_other_metrics():
    with pytest.raises(ValueError, match="repeats item ids 'a'"):
        paired_reduction(mean_result([1, 2], ids=["a", "a"]), mean_result([1, 2], ids=["a", "b"]))
    with pytest.raises(ValueError, match="cannot compare 'gld' with 'add'"):
        paired_reduction(mean_result([1]), mean_result([1], metric="add"))


def test_paired_reduction_refuses_a_macro_percentage_metric_unless_allowed():
    # stereo_score: percentages averaged per target term, ideal 50 -> not a mean of item scores.
    s, a, u = [0.0, 0.0, -5.0], [-1.0, -1.0, 0.0], [-9.0, -9.0, -9.0]
    orig = stereoset_scores(s, a, u, ["t1", "t1", "t2"])["stereo_score"]
    mit = stereoset_scores(a, s, u, ["t1", "t1", "t2"])["stereo_score"]
    with pytest.raises(ValueError, match="is not the mean of its per-item scores.*allow_non_mean=True"):
        paired_reduction(orig, mit)
    res = paired_reduction(orig, mit, allow_non_mean=True)
    # item scores (0/1): orig [1, 1, 0], mitigated [0, 0, 1] -> d = [1, 1, -1]
    assert res.value == pytest.approx(1 / 3)
    assert "item_scale_note" in res.breakdown
    assert res.breakdown["original"] == pytest.approx(50.0)  # t1: 100, t2: 0 -> macro 50


def test_relative_change_is_none_for_a_zero_original():
    res = paired_reduction(mean_result([0, 0]), mean_result([0, 0]))
    assert res.breakdown["relative_change"] is None
    assert (res.value, res.ci_low, res.ci_high, res.p_value) == (0.0, 0.0, 0.0, 1.0)


scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(st.lists(st.tuples(scores, scores), min_size=1, max_size=24), st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_swapping_original_and_mitigated_negates_the_reduction(pairs, seed):
    a = mean_result([p[0] for p in pairs])
    b = mean_result([p[1] for p in pairs])
    forward, backward = paired_reduction(a, b, seed=seed), paired_reduction(b, a, seed=seed)
    assert backward.value == pytest.approx(-forward.value, abs=1e-12)
    assert forward.value == pytest.approx(a.value - b.value, abs=1e-12)
    assert forward.ci_low <= forward.value <= forward.ci_high
    # Same seed, same resampled indices: the bootstrap interval mirrors.
    assert backward.ci_low == pytest.approx(-forward.ci_high, abs=1e-9)
    assert backward.ci_high == pytest.approx(-forward.ci_low, abs=1e-9)


# ----- DA-score and LM-score guards --------------------------------------------------------------
def test_da_score_drop_by_hand():
    templates = ["a", "a", "b", "b"]
    orig = da_score([1.0, 2.0, -1.0, 0.5], templates, ids=list("pqrs"))  # correct 1 1 0 1 -> 0.75
    mit = da_score([3.0, 0.0, 0.2, -0.5], templates, ids=list("pqrs"))  # correct 1 0 1 0 -> 0.5 (tie = wrong)
    res = da_score_drop(orig, mit)
    assert res.metric == "DA_score_drop"
    assert res.value == pytest.approx(0.25)
    assert [d["score"] for d in res.details] == [0.0, 1.0, -1.0, 1.0]
    assert res.breakdown["original"] == 0.75 and res.breakdown["mitigated"] == 0.5
    assert (res.breakdown["pairs_lost"], res.breakdown["pairs_gained"]) == (2, 1)
    assert res.breakdown["per_template_drop"] == {"a": 0.5, "b": 0.0}
    assert res.ci_low <= 0.25 <= res.ci_high
    # d = [0, 1, -1, 1], sum 1: the sums of ±1 ±1 ±1 are 3, 1, 1, 1, -1, -1, -1, -3, so 4 of 8
    # reach 1 (the 0 entry doubles both counts) -> p = 1/2.
    assert res.p_value == pytest.approx(0.5)


def test_da_score_drop_needs_da_results():
    with pytest.raises(ValueError, match="expected a 'DA_score' result"):
        da_score_drop(mean_result([1.0]), mean_result([1.0]))


def _stereo(related_pattern):
    """Sentence scores giving each item's (stereotype > unrelated, anti > unrelated) outcome."""
    s, a, u = [], [], []
    for k, (s_wins, a_wins) in enumerate(related_pattern):
        s.append(-1.0 if s_wins else -9.0)
        a.append(-2.0 - 0.1 * k if a_wins else -8.0)
        u.append(-5.0)
    return s, a, u


def test_lm_score_drop_is_the_macro_difference_in_points_by_hand():
    targets = ["t1", "t1", "t1", "t2"]
    orig = stereoset_scores(*_stereo([(1, 1)] * 4), targets)["lm_score"]  # LMS 100
    # mitigated related shares: t1: 0.5, 0, 1 -> 50 %; t2: 0 -> 0 %; LMS = (50 + 0) / 2 = 25
    mit = stereoset_scores(*_stereo([(1, 0), (0, 0), (1, 1), (0, 0)]), targets)["lm_score"]
    assert (orig.value, mit.value) == (100.0, 25.0)
    res = lm_score_drop(orig, mit)
    assert res.value == pytest.approx(75.0)  # the micro (item) average would give 62.5
    assert [d["score"] for d in res.details] == [50.0, 100.0, 0.0, 100.0]
    assert res.ci_low <= 75.0 <= res.ci_high
    # Weighted terms 50*2/3, 100*2/3, 0, 100*2: the observed sum is the maximum, reached by the
    # all-plus pattern with the 0 term either sign -> p = 2/16.
    assert res.p_value == pytest.approx(1 / 8)
    assert res.breakdown["n_targets"] == 2


def test_lm_score_drop_checks_targets_and_metric():
    orig = stereoset_scores(*_stereo([(1, 1)] * 2), ["t1", "t2"])["lm_score"]
    other = stereoset_scores(*_stereo([(1, 1)] * 2), ["t1", "t3"])["lm_score"]
    with pytest.raises(ValueError, match="has target 't2' in the original result but 't3'"):
        lm_score_drop(orig, other)
    stereo = stereoset_scores(*_stereo([(1, 1)] * 2), ["t1", "t2"])["stereo_score"]
    with pytest.raises(ValueError, match="expected a 'lm_score' result"):
        lm_score_drop(stereo, orig)


# ----- perplexity -------------------------------------------------------------------------------
def FakeLM(logprobs, tokens=None):
    """A causal LM with fixed sentence log-probabilities (for hand arithmetic); one token per
    word unless ``tokens`` splits otherwise."""
    return FakeEngine(kind="causal", sentence=dict(logprobs).__getitem__, tokens=tokens)


def test_perplexity_rise_by_hand():
    texts = ["a b", "c d e f"]  # 2 and 4 tokens
    orig = FakeLM({"a b": -2.0, "c d e f": -4.0})  # total NLL 6 over 6 tokens -> ppl e
    mit = FakeLM({"a b": -2.0, "c d e f": -10.0})  # 12 / 6 -> ppl e^2
    nll, counts = perplexity(orig, texts)
    assert nll.tolist() == [1.0, 1.0] and counts.tolist() == [2, 4]
    res = perplexity_rise(orig, mit, texts)
    assert res.metric == "perplexity_rise"
    assert res.value == pytest.approx(math.e - 1)
    assert res.breakdown["ppl_original"] == pytest.approx(math.e)
    assert res.breakdown["ppl_mitigated"] == pytest.approx(math.e**2)
    assert res.breakdown["tokens"] == 6
    assert [d["score"] for d in res.details] == pytest.approx([0.0, 1.5])  # per-token NLL rise
    # Resamples: both texts once -> e - 1; text 1 twice -> e^(12/8) - 1; text 0 twice -> 0.
    assert 0.0 <= res.ci_low <= res.value <= res.ci_high <= math.exp(1.5) - 1 + 1e-12


def test_perplexity_rise_is_token_weighted_not_a_mean_of_text_ratios():
    texts = ["a", "b c d e f g h i j"]  # 1 and 9 tokens
    orig = FakeLM({"a": -1.0, "b c d e f g h i j": -9.0})
    mit = FakeLM({"a": -11.0, "b c d e f g h i j": -9.0})
    # total NLL 10 -> 20 over 10 tokens: ppl e -> e^2. A mean of per-text ratios would be (e^10 + 1)/2 - 1.
    assert perplexity_rise(orig, mit, texts).value == pytest.approx(math.e - 1)


def test_perplexity_rise_refuses_different_tokenizers():
    orig = FakeLM({"a b": -2.0})
    mit = FakeLM({"a b": -2.0}, tokens=list)  # one token per character
    with pytest.raises(AuditUsageError, match="into 2 and 3 tokens"):
        perplexity_rise(orig, mit, ["a b"])
    with pytest.raises(ValueError, match="no texts"):
        perplexity(orig, [])


def _direct_nll(lm, text: str) -> tuple[float, int]:
    """Total NLL of text's tokens after BOS, straight from the model's logits."""
    tok, model = lm.engine.tokenizer, lm.engine.model
    cont = tok(text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[tok.bos_token_id, *cont]], device=model.device)
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    return -float(sum(logp[k, t] for k, t in enumerate(cont))), len(cont)


TEXTS = ["The kettle switches off automatically when the water boils.",
         "Sound travels faster through water than through air.",
         "The clock in the hallway runs five minutes fast."]


def test_perplexity_equals_direct_computation(tiny_lm):
    nll, counts = perplexity(tiny_lm, TEXTS)
    bound = Forward.of(tiny_lm, TEXTS).token_logprob_atol()  # a per-token mean: one token's bound
    for k, text in enumerate(TEXTS):
        total, n = _direct_nll(tiny_lm, text)
        assert counts[k] == n
        assert_close(nll[k], total / n, bound, kind="per-token NLL")


def test_perplexity_rise_zero_for_identical_models(tiny_lm, tiny_model_dir, tmp_path, device):
    twin = load_tiny(tiny_model_dir, device, cache_dir=tmp_path / "c2")
    res = perplexity_rise(tiny_lm, twin, TEXTS)
    assert (res.value, res.ci_low, res.ci_high) == (0.0, 0.0, 0.0)
    assert res.breakdown["ppl_original"] == res.breakdown["ppl_mitigated"] > 1.0


def test_perplexity_rise_between_two_tiny_models_matches_direct_computation(tiny_lm, tmp_path, device):
    other_dir = build_tiny_causal_lm(tmp_path / "other", seed=1)
    other = load_tiny(other_dir, device, cache_dir=tmp_path / "c2")
    res = perplexity_rise(tiny_lm, other, TEXTS, seed=0)
    o = [_direct_nll(tiny_lm, t) for t in TEXTS]
    m = [_direct_nll(other, t) for t in TEXTS]
    tokens = sum(n for _, n in o)
    expected = math.exp(sum(x for x, _ in m) / tokens) / math.exp(sum(x for x, _ in o) / tokens) - 1
    # exp(mean NLL) of each model moves by its mean's bound, relatively: the ratio by both
    eta = max(Forward.of(lm, TEXTS).token_logprob_atol() for lm in (tiny_lm, other))
    assert_close(res.value, expected, (1 + expected) * 2 * eta, kind="perplexity rise")
    assert res.ci_low <= res.value <= res.ci_high


# ----- held-out neutral text ---------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def test_heldout_text_is_neutral_and_held_out():
    texts = load_heldout_text().prompts
    assert 140 <= len(texts) <= 170 and len(set(texts)) == len(texts)
    gendered = set(gendered_words()) | COMPLETION_MALE_WORDS | COMPLETION_FEMALE_WORDS
    for t in texts:
        words = set(re.findall(r"[a-z]+(?:-[a-z]+)*", t.lower()))
        assert not words & gendered, t
    heldout = {_norm(t) for t in texts}
    for name in ("natural_default_predicates.txt", "debias_training_predicates.txt"):
        others = [_norm(p) for p in read_lines(project_data(name))]
        assert not heldout & set(others), name
        # not even a predicate inside a sentence ("My friend <predicate>" style leaks)
        assert not [p for p in others for t in heldout if p in t], name


def test_heldout_text_ignores_data_dir(tmp_path):
    folder = tmp_path / "Debias-LLMs"
    folder.mkdir()
    (folder / "total_neutral_validation.csv").write_text("is playing a flute\n")
    assert load_heldout_text(tmp_path) == load_heldout_text()


# ----- results table -----------------------------------------------------------------------------
def _row(variant, probe, metric, value, model="m"):
    row = {"family": "disclosure", "probe": probe, "metric": metric, "value": value, "ci_low": value,
           "ci_high": value, "model": model}
    if variant is not None:
        row["variant"] = variant
    return row


ROWS = [
    _row("debias-tuning-no-Ld", "template-occupation", "GAS", 0.35),
    _row("debias-tuning", "natural-stsb", "GAS", 0.05),
    _row("debias-tuning", "template-occupation", "ADD", 0.01),
    _row("debias-tuning", "template-occupation", "GAS", 0.1),
    _row("debias-tuning", "template-hobby", "GAS", 0.3),
    _row("instruction", "template-occupation", "GAS", 0.25),
    _row(None, "llm-generated-1", "GLD", 0.7),
    _row("original", "llm-generated-2", "GLD", 0.3),
    _row("original", "template-occupation", "ADD", 0.02),
    _row("original", "template-occupation", "GAS", 0.4),
    _row("original", "template-hobby", "GAS", 0.6),
    _row("original", "natural-stsb", "GAS", 0.2),
    _row("original", "natural-snli", "GAS", 0.8),
    _row("original", "natural-default", "GAS", 0.5),
    _row("original", "da-gender", "DA_score", 0.9),
    _row("cda", "template-occupation", "GAS", 0.3),
]


def test_table_rows_in_paper_order_and_one_column_block_per_dataset():
    df = mitigation_table(ROWS)
    assert list(df.index) == ["original", "instruction", "debias-tuning", "cda", "debias-tuning-no-Ld"]
    # the paper's tables never merge STS-B with SNLI or LLM (1) with LLM (2); the stand-in is named apart
    assert list(df.columns) == ["Template GAS", "Template ADD", "STS-B GAS", "SNLI GAS",
                                "Natural (offline stand-in) GAS", "LLM (1) GLD", "LLM (2) GLD", "da-gender DA_score"]
    assert df.loc["original", "Template GAS"] == pytest.approx(0.5)  # mean of occupation 0.4 and hobby 0.6
    assert df.loc["debias-tuning", "Template GAS"] == pytest.approx(0.2)
    assert (df.loc["original", "STS-B GAS"], df.loc["original", "SNLI GAS"]) == (0.2, 0.8)
    assert df.loc["original", "LLM (1) GLD"] == 0.7  # no variant key -> original
    assert df.loc["original", "LLM (2) GLD"] == 0.3
    assert df.loc["instruction", "Template GAS"] == 0.25
    assert math.isnan(df.loc["instruction", "STS-B GAS"])
    assert df.loc["original", "da-gender DA_score"] == 0.9


def test_table_per_probe_adds_the_template_topics_and_model_filter():
    df = mitigation_table(ROWS, per_probe=True)
    assert list(df.columns) == ["Template GAS", "Template ADD", "STS-B GAS", "SNLI GAS",
                                "Natural (offline stand-in) GAS", "LLM (1) GLD", "LLM (2) GLD",
                                "template-hobby GAS", "template-occupation GAS", "template-occupation ADD",
                                "da-gender DA_score"]
    assert df.loc["original", "template-hobby GAS"] == 0.6
    assert df.loc["debias-tuning", "template-occupation GAS"] == 0.1
    rows = ROWS + [_row("original", "template-occupation", "GAS", 0.9, model="other")]
    with pytest.raises(ValueError, match="several rows for variant/probe/metric original/template-occupation/GAS"):
        mitigation_table(rows)
    assert mitigation_table(rows, model="other").loc["original", "Template GAS"] == 0.9


def test_table_csv_round_trip(tmp_path):
    df = mitigation_table(ROWS)
    path = write_table_csv(df, tmp_path / "out" / "mitigation.csv")
    back = pd.read_csv(path, index_col="variant")
    pd.testing.assert_frame_equal(back, df)
    assert path.read_text().splitlines()[0] == ("variant,Template GAS,Template ADD,STS-B GAS,SNLI GAS,"
                                                "Natural (offline stand-in) GAS,LLM (1) GLD,LLM (2) GLD,da-gender DA_score")


def test_report_section_shows_each_dataset_and_the_topics(tmp_path):
    from bias_core.reports.render import mitigation_sections

    rows = []
    for probe, before, after in (("natural-stsb", 0.4, 0.1), ("natural-snli", 0.6, 0.2),
                                 ("template-color", 0.5, 0.3), ("template-hobby", 0.7, 0.5)):
        rows.append({"variant": "instruction", "probe": probe, "metric": "GAS_reduction", "value": before - after,
                     "breakdown": {"original": before, "mitigated": after}})
    [(key, title, body)] = mitigation_sections(rows, tmp_path / "mitigation_table.csv")
    header = (tmp_path / "mitigation_table.csv").read_text().splitlines()[0]
    assert header == "variant,Template GAS,STS-B GAS,SNLI GAS,template-color GAS,template-hobby GAS"
    assert ">STS-B GAS<" in body and ">SNLI GAS<" in body and ">template-hobby GAS<" in body
    assert "0.6" in body  # the original's Template GAS: (0.5 + 0.7) / 2


def test_table_html_escapes_labels():
    df = mitigation_table([_row("<script>x</script>", "a&b", "GAS", 0.123456), _row("original", "a&b", "GAS", None)])
    out = table_html(df)
    assert "<script>" not in out
    assert "&lt;script&gt;x&lt;/script&gt;" in out and "a&amp;b GAS" in out
    assert "0.1235" in out and "—" in out  # 4 significant digits; missing value as a dash
    assert out.startswith('<table class="mitigation-table">') and out.endswith("</table>")
