"""gate_logs on small lm-eval logs written here: every number it reports against a computation done
here by hand, and the refusals (settings that differ, unknown metrics, samples that do not pair).

What is independent of bias_core: the differences and values (plain means), McNemar's p (a binomial
tail summed with math.comb, and scipy's binomtest), Holm's adjustment (written out for two rows),
the verdicts (the rule applied to the interval). The interval is the project's paired percentile
bootstrap (``bootstrap_ci``, scipy.stats.bootstrap): it is recomputed here with numpy alone,
following scipy's resampling convention (``rng.integers(0, n, (n_resamples, n))`` from
``default_rng(seed)``, linear quantiles); so it checks bias_core's and scipy's code, not the
convention itself.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from external_log_files import binary_samples, lm_eval_results, sample, write_lm_eval
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from bias_core.errors import AuditUsageError, BaselineMismatch, ThresholdsError
from bias_core.gating.external_logs import gate_logs, load_external, parse_external, toml_fix
from bias_core.stats.paired import N_BOOTSTRAP

BASE_ACC = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1]
CAND_ACC = [0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1]  # 5 worse, none better
BASE_NORM = [1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1]
CAND_NORM = [1, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0]  # 2 worse, 1 better


def _write(folder: Path, values: dict[str, list[float]], *, model: str, docs=None, **kw) -> Path:
    results, samples = lm_eval_results({"toy_mc": docs if docs is not None else binary_samples(values)}, model=model, **kw)
    return write_lm_eval(folder, results, samples)


def _pair(tmp_path: Path, cand: dict, base: dict, cand_kw: dict | None = None, base_kw: dict | None = None):
    c = _write(tmp_path / "cand", cand, model="org/candidate", **(cand_kw or {}))
    b = _write(tmp_path / "base", base, model="org/baseline", **(base_kw or {}))
    return c, b


def _tail(worse: int, better: int) -> float:
    """P(X >= worse), X ~ Binomial(worse + better, 1/2): McNemar's exact one-sided p, by hand."""
    n = worse + better
    return sum(math.comb(n, k) for k in range(worse, n + 1)) / 2 ** n if n else 1.0


def _bootstrap(diffs: np.ndarray, seed: int, n_resamples: int = N_BOOTSTRAP) -> tuple[float, float]:
    point = float(diffs.mean())
    if np.all(diffs == diffs[0]):
        return point, point
    idx = np.random.default_rng(seed).integers(0, diffs.size, (n_resamples, diffs.size))
    lo, hi = np.quantile(diffs[idx].mean(axis=-1), [0.025, 0.975])
    return min(float(lo), point), max(float(hi), point)


def _verdict(harm_ci: tuple[float, float], margin: float) -> str:
    return "pass" if harm_ci[1] <= margin else "fail" if harm_ci[0] > margin else "inconclusive"


@pytest.mark.parametrize("seed", [0, 7])
def test_every_reported_number_matches_an_independent_computation(tmp_path, seed):
    c, b = _pair(tmp_path, {"acc": CAND_ACC, "acc_norm": CAND_NORM}, {"acc": BASE_ACC, "acc_norm": BASE_NORM})
    result = gate_logs(c, b, seed=seed)
    raw_p = {}
    for metric, cand, base, worse, better in (("acc", CAND_ACC, BASE_ACC, 5, 0), ("acc_norm", CAND_NORM, BASE_NORM, 2, 1)):
        row = result.row("toy_mc", metric)
        cv, bv = np.array(cand, float), np.array(base, float)
        assert row.n_pairs == 12 and row.unpaired.total == 0 and row.filter == "none"
        assert row.baseline_value == pytest.approx(sum(base) / 12, abs=1e-15) == row.logged_baseline
        assert row.candidate_value == pytest.approx(sum(cand) / 12, abs=1e-15) == row.logged_candidate
        assert row.difference == pytest.approx(sum(cand) / 12 - sum(base) / 12, abs=1e-15)
        assert row.harm == pytest.approx(-row.difference, abs=1e-15)  # higher is better: a drop is the harm
        # discordant pairs counted here: worse = 1 in the baseline and 0 in the candidate
        assert (int(np.sum((bv == 1) & (cv == 0))), int(np.sum((bv == 0) & (cv == 1)))) == (worse, better)
        assert row.p_value == pytest.approx(_tail(worse, better), abs=1e-12)
        assert row.p_value == pytest.approx(binomtest(worse, worse + better, 0.5, alternative="greater").pvalue, abs=1e-12)
        assert "McNemar" in row.test
        lo, hi = _bootstrap(cv - bv, seed)
        assert row.difference_ci == pytest.approx((lo, hi), abs=1e-12)
        assert row.harm_ci == pytest.approx((-hi, -lo), abs=1e-12)
        assert row.margin == 0.05 and "default for" in row.gate_source
        assert row.verdict == _verdict(row.harm_ci, 0.05)
        raw_p[metric] = row.p_value
    assert raw_p == {"acc": 1 / 32, "acc_norm": 0.5}
    # Holm over the two rows, written out: the smaller p times 2, the larger times 1, kept monotone
    small, large = sorted(raw_p.values())
    assert result.row("toy_mc", "acc").p_holm == pytest.approx(min(1.0, 2 * small))
    assert result.row("toy_mc", "acc_norm").p_holm == pytest.approx(max(min(1.0, 2 * small), large))
    assert result.row("toy_mc", "acc").verdict == "fail" and result.verdict == "fail"
    assert "model: candidate org/candidate, baseline org/baseline" in result.card.notes
    assert "toy_mc acc [none]: 12 pairs" in result.text()


def test_identical_logs_pass_with_a_zero_difference(tmp_path):
    c, b = _pair(tmp_path, {"acc": BASE_ACC}, {"acc": BASE_ACC})
    row = gate_logs(c, b).row("toy_mc", "acc")
    assert (row.difference, row.difference_ci, row.harm_ci, row.p_value, row.verdict) == (0.0, (0.0, 0.0), (0.0, 0.0), 1.0,
                                                                                            "pass")


@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1), st.floats(0.0, 5.0), st.floats(0.0, 5.0)),
                min_size=2, max_size=24))
def test_swapping_candidate_and_baseline_flips_the_difference(tmp_path_factory, docs):
    folder = tmp_path_factory.mktemp("swap")
    a = {"acc": [d[0] for d in docs], "likelihood_diff": [d[2] for d in docs]}
    b = {"acc": [d[1] for d in docs], "likelihood_diff": [d[3] for d in docs]}
    pa = _write(folder / "a", a, model="org/a")
    pb = _write(folder / "b", b, model="org/b")
    forward, backward = gate_logs(pa, pb, n_bootstrap=200, n_resamples=500), gate_logs(pb, pa, n_bootstrap=200,
                                                                                       n_resamples=500)
    for metric in ("acc", "likelihood_diff"):
        f, r = forward.row("toy_mc", metric), backward.row("toy_mc", metric)
        assert r.difference == -f.difference
        assert (r.baseline_value, r.candidate_value) == (f.candidate_value, f.baseline_value)
        assert r.difference_ci == pytest.approx((-f.difference_ci[1], -f.difference_ci[0]), abs=1e-9)


def test_a_task_version_that_differs_is_a_usage_error(tmp_path):
    c, b = _pair(tmp_path, {"acc": BASE_ACC}, {"acc": BASE_ACC}, {"version": 2.0}, {"version": 1.0})
    with pytest.raises(BaselineMismatch, match=r'toy_mc: version differs \(candidate "2.0", baseline "1.0"\)') as err:
        gate_logs(c, b)
    assert isinstance(err.value, AuditUsageError) and "allow={'version'}" in str(err.value)


def test_a_few_shot_count_that_differs_is_refused_unless_allowed(tmp_path):
    c, b = _pair(tmp_path, {"acc": BASE_ACC}, {"acc": BASE_ACC}, {"n_shot": 5}, {"n_shot": 0})
    with pytest.raises(BaselineMismatch, match=r"toy_mc: num_fewshot differs \(candidate 5, baseline 0\)"):
        gate_logs(c, b)
    result = gate_logs(c, b, allow={"num_fewshot"})
    assert result.card.allowed == ("toy_mc: num_fewshot differs (candidate 5, baseline 0), allowed",)
    assert result.row("toy_mc", "acc").verdict == "pass"


def test_a_run_setting_that_differs_is_refused_and_a_typo_in_allow_is_named(tmp_path):
    c, b = _pair(tmp_path, {"acc": BASE_ACC}, {"acc": BASE_ACC}, {"config": {"gen_kwargs": {"temperature": 1.0}}})
    with pytest.raises(BaselineMismatch, match="gen_kwargs differs"):
        gate_logs(c, b)
    with pytest.raises(AuditUsageError, match="allow names 'num_fewshots'"):
        gate_logs(c, b, allow={"num_fewshots"})


def test_a_metric_without_direction_or_default_is_refused_with_the_toml_lines(tmp_path):
    values = {"acc": BASE_ACC, "brier_like": [0.25] * 12}
    c, b = _pair(tmp_path, values, values, {"higher_is_better": {"brier_like": False}})
    with pytest.raises(AuditUsageError) as err:
        gate_logs(c, b)
    text = str(err.value)
    assert "a direction is never guessed" in text and "[regression.external.toy_mc.brier_like]" in text
    assert "the tool itself says lower is better" in text and "margin = <largest tolerated worsening" in text
    declared = {"regression": {"external": {"toy_mc": {"brier_like": {"direction": "lower", "kind": "bounded",
                                                                      "margin": 0.02, "note": "two points"}}}}}
    row = gate_logs(c, b, thresholds=declared).row("toy_mc", "brier_like")
    assert row.verdict == "pass" and row.margin == 0.02 and "thresholds.toml [regression.external.toy_mc.brier_like]" in row.gate_source
    assert gate_logs(c, b, metrics=["acc"]).rows[0].metric == "acc"  # or leave it out


def test_declarations_in_a_thresholds_file_override_the_default(tmp_path):
    c, b = _pair(tmp_path, {"acc": CAND_NORM}, {"acc": BASE_NORM})
    toml = tmp_path / "thresholds.toml"
    toml.write_text('[regression.external."*".acc]\nmargin = 0.5\nnote = "loose, for the test"\n', encoding="utf-8")
    row = gate_logs(c, b, thresholds=toml).row("toy_mc", "acc")
    assert row.margin == 0.5 and row.direction == "higher" and row.verdict == "pass"
    assert row.gate_source.startswith(f"{toml} [regression.external.\"*\".acc] over default for acc")


def test_samples_whose_hashes_differ_are_counted_and_beyond_the_share_refused(tmp_path):
    n = 40
    base_docs = binary_samples({"acc": [1] * n})
    one_other = list(base_docs)
    one_other[3] = sample(3, {"acc": 1.0}, doc={"question": "another question", "choices": ["yes", "no"]})
    c = _write(tmp_path / "cand", {}, model="org/candidate", docs=one_other)
    b = _write(tmp_path / "base", {}, model="org/baseline", docs=base_docs)
    row = gate_logs(c, b).row("toy_mc", "acc")
    assert (row.n_pairs, row.unpaired.identity_differs, row.unpaired.total) == (n - 1, 1, 1)
    assert row.unpaired.examples == ("'3' (doc_hash, prompt_hash)",)
    three_other = list(one_other)
    for i in (5, 9):
        three_other[i] = sample(i, {"acc": 1.0}, prompt=f"Another prompt {i}")
    c3 = _write(tmp_path / "cand3", {}, model="org/candidate", docs=three_other)
    with pytest.raises(BaselineMismatch) as err:
        gate_logs(c3, b)
    text = str(err.value)
    assert "toy_mc acc" in text and "37 of 40 samples pair" in text and "3 with the same id but other content" in text
    # the per-sample files are named: that is where the samples that did not pair are
    assert f"{c3.parent}/samples_toy_mc_" in text and f"{b.parent}/samples_toy_mc_" in text and "Fix:" in text
    assert gate_logs(c3, b, max_missing_share=0.1).row("toy_mc", "acc").n_pairs == 37
    # another prompt alone (a chat template) may be allowed: the two prompt-only differences then pair
    assert gate_logs(c3, b, allow={"prompt_hash"}).row("toy_mc", "acc").n_pairs == 39


def test_samples_on_one_side_only_are_counted(tmp_path):
    base_docs = binary_samples({"acc": [1] * 30})
    c = _write(tmp_path / "cand", {}, model="org/candidate", docs=base_docs[:29])
    b = _write(tmp_path / "base", {}, model="org/baseline", docs=base_docs)
    row = gate_logs(c, b).row("toy_mc", "acc")
    assert (row.n_pairs, row.unpaired.only_baseline, row.unpaired.only_candidate) == (29, 1, 0)


def test_filters_must_match_unless_allowed(tmp_path):
    c = _write(tmp_path / "cand", {}, model="org/candidate", docs=binary_samples({"exact_match": BASE_ACC}, "strict"))
    b = _write(tmp_path / "base", {}, model="org/baseline", docs=binary_samples({"exact_match": BASE_ACC}, "flexible"))
    with pytest.raises(BaselineMismatch, match="filter"):
        gate_logs(c, b)
    row = gate_logs(c, b, allow={"filter"}).row("toy_mc", "exact_match")
    assert row.filter == "strict (baseline flexible)" and row.n_pairs == 12


def test_a_metric_that_is_not_a_mean_is_listed_not_gated_and_refused_when_asked_for(tmp_path):
    docs = [sample(i, {"acc": float(BASE_ACC[i]), "f1": [BASE_ACC[i], 1]}) for i in range(12)]
    kw = {"aggregations": {"f1": "f1"}, "aggregates": {("toy_mc", "f1,none"): 0.8}}
    c = _write(tmp_path / "cand", {}, model="org/candidate", docs=docs, **kw)
    b = _write(tmp_path / "base", {}, model="org/baseline", docs=docs, **kw)
    result = gate_logs(c, b)
    assert [r.metric for r in result.rows] == ["acc"]
    assert [(n.metric, "not by the mean" in n.why) for n in result.not_gated] == [("f1", True)]
    with pytest.raises(AuditUsageError, match="f1 was asked for, but cannot be gated"):
        gate_logs(c, b, metrics=[("toy_mc", "f1")])
    with pytest.raises(AuditUsageError, match="metrics= names nope"):
        gate_logs(c, b, metrics=["nope"])


def test_the_threshold_table_reports_every_problem():
    with pytest.raises(ThresholdsError) as err:
        parse_external({"t": {"m": {"direction": "up", "margin": "0.1", "colour": 1},
                              "n": {"direction": "higher", "ideal": 0.5, "margin": 0.1}}})
    text = str(err.value)
    assert "4 problems" in text and "direction: 'up'" in text and "margin: '0.1'" in text
    assert "colour: unknown key" in text and "ideal: given with direction = 'higher'" in text
    never_fails = load_external({"t": {"m": {"direction": "higher", "kind": "binary", "margin": 1.0}}})
    with pytest.raises(ThresholdsError, match="no candidate can fail"):
        never_fails.gate("lm-evaluation-harness", "t", "m")
    no_margin = load_external({"t": {"m": {"direction": "lower"}}})
    with pytest.raises(ThresholdsError, match="no margin"):
        no_margin.gate("lm-evaluation-harness", "t", "m")


def test_crows_pairs_pct_stereotype_is_gated_by_its_distance_from_one_half():
    gate = load_external(None).gate("lm-evaluation-harness", "crows_pairs_english_gender", "pct_stereotype")
    assert (gate.spec.direction, gate.spec.ideal, gate.spec.kind, gate.margin.margin) == ("ideal", 0.5, "binary", 0.05)
    bbq = load_external(None).gate("lm-evaluation-harness", "bbq", "amb_bias_score_Gender_identity")
    assert (bbq.spec.direction, bbq.spec.ideal) == ("ideal", 0.0)
    assert load_external(None).gate("lm-evaluation-harness", "t", "bleu") is None
    assert toml_fix("t", "choice/accuracy").startswith('[regression.external.t."choice/accuracy"]')


def test_settings_that_differ_only_by_the_models_name_are_not_said_twice(tmp_path):
    c, b = _pair(tmp_path, {"acc": BASE_ACC}, {"acc": BASE_ACC})
    notes = gate_logs(c, b).card.notes
    # model_args and the task's metadata name each side's model: the "model" line says it once
    assert notes[0] == "model: candidate org/candidate, baseline org/baseline"
    assert not any("model_args" in n or "metadata" in n for n in notes), notes
    # a model argument that is not the name is said
    c2 = _write(tmp_path / "cand-bf16", {"acc": BASE_ACC}, model="org/candidate",
                config={"model_args": {"pretrained": "org/candidate", "dtype": "bfloat16"}})
    said = [n for n in gate_logs(c2, b).card.notes if "model_args" in n]
    assert len(said) == 1 and "bfloat16" in said[0] and "float32" in said[0]
