"""A stored baseline proves what it says: its items against their own header and the run's
results.json, items missing on either side counted (and too many an error), the n of pairs in
every report, and "same model weights" only where the weights' hashes are equal.

Baseline folders are written here directly (``write_items`` and a results.json as an audit writes
them); the values are small hand-computed means. ``tests/test_regression_run.py`` runs the same
cases through whole audits once.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from bias_core.errors import AuditUsageError, BaselineMismatch
from bias_core.gating.regression import PAIRED, ItemValue, MetricItems, RunConfig, lexicon_sha256, pair, write_items
from bias_core.gating.regression.integrity import verify_stored_run
from bias_core.gating.regression.items import block_sha256, read_items
from bias_core.gating.regression.pairing import check_configs, missing_problem
from bias_core.probes.lexicon import GENDER_PAIRS

RUN = RunConfig(model="m", model_fingerprint="dir:w1", weights_sha256="sha-w1", tokenizer_fingerprint="t1",
                dtype="float32", seed=0, lexicon_sha256=lexicon_sha256(), engine="transformers")


def block(values, metric="GLD", probe="template-hobby", groups=None, value=None) -> MetricItems:
    items = tuple(ItemValue(f"hobby:{k}", v, f"I like {k}, and", None, None if groups is None else groups[k])
                  for k, v in enumerate(values))
    if value is None:
        value = float(np.mean([v for v in values if v is not None]))
    return MetricItems(probe, metric, "1", "c" * 64, value, items)


def results_row(b: MetricItems, digest: bool = True) -> dict:
    row = {"test_id": f"{b.probe}-{b.metric}", "probe": b.probe, "metric": b.metric, "value": b.value,
           "n": sum(i.value is not None for i in b.items), "model_fingerprint": RUN.model_fingerprint}
    if digest:
        row.update(probe_sha256=b.probe_sha256, items_sha256=block_sha256(b))
    return row


def stored_run(folder: Path, blocks, run: RunConfig = RUN, digest: bool = True) -> Path:
    """A run folder as an audit leaves it: items.jsonl.gz and the results.json that names them."""
    write_items(folder / "items.jsonl.gz", run, blocks)
    info = {"model": run.model, "seed": run.seed, "engine": run.engine or "transformers",
            "lexicon": {"name": "extended", "pairs": [list(p) for p in GENDER_PAIRS]},
            "model_fingerprint": run.model_fingerprint}
    (folder / "results.json").write_text(json.dumps({"run": info, "results": [results_row(b, digest) for b in blocks]}))
    return folder


def edit_items(folder: Path, change) -> None:
    """Rewrite items.jsonl.gz line by line, as someone editing the file by hand would."""
    path = folder / "items.jsonl.gz"
    rows = [json.loads(ln) for ln in gzip.decompress(path.read_bytes()).decode().splitlines()]
    change(rows)
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))


def edit_results(folder: Path, change) -> None:
    doc = json.loads((folder / "results.json").read_text())
    change(doc)
    (folder / "results.json").write_text(json.dumps(doc))


def verify(folder: Path):
    return verify_stored_run(read_items(folder / "items.jsonl.gz"), folder / "items.jsonl.gz")


GLD = [0.1, 0.2, 0.3, 0.4]  # mean 0.25


def _first_gld_item(rows, value):
    next(r for r in rows if r.get("kind") == "item")["value"] = value


# ----- items against their header and results.json ---------------------------------------------------
def test_an_untouched_baseline_passes_and_says_what_was_checked(tmp_path):
    card = verify(stored_run(tmp_path, [block(GLD), block([1.0, 0.0, 0.0, 1.0], metric="GAS")]))
    assert card == ("--baseline: 2 stored probe x metric(s) checked: each value recomputed from its items equals its "
                    "header and results.json, and every block's SHA-256 matches results.json",)


def test_one_edited_item_is_a_usage_error_naming_the_file_and_the_test(tmp_path):
    folder = stored_run(tmp_path, [block(GLD)])
    edit_items(folder, lambda rows: _first_gld_item(rows, 0.9))  # 0.1 -> 0.9: mean 0.45, header 0.25
    with pytest.raises(AuditUsageError) as info:
        verify(folder)
    message = str(info.value)
    assert f"{folder / 'items.jsonl.gz'}: template-hobby-GLD: the items give 0.45 " in message
    assert "its header line says 0.25" in message and "Fix: copy the baseline run folder again" in message


def test_items_and_header_edited_together_disagree_with_results_json(tmp_path):
    folder = stored_run(tmp_path, [block(GLD)])

    def change(rows):
        _first_gld_item(rows, 0.9)
        next(r for r in rows if r.get("kind") == "metric")["value"] = 0.45  # the header made to match

    edit_items(folder, change)
    with pytest.raises(AuditUsageError, match=r"template-hobby-GLD: the items header says 0\.45, .*results\.json "
                                              r"says 0\.25: one of them was edited"):
        verify(folder)


def test_a_value_edited_in_results_json_is_refused(tmp_path):
    folder = stored_run(tmp_path, [block(GLD)])
    edit_results(folder, lambda doc: doc["results"][0].update(value=0.01))
    with pytest.raises(AuditUsageError, match=r"header says 0\.25, .*results\.json says 0\.01"):
        verify(folder)


def test_all_three_edited_to_agree_are_caught_by_the_item_digest(tmp_path):
    folder = stored_run(tmp_path, [block(GLD)])

    def items(rows):
        _first_gld_item(rows, 0.9)
        next(r for r in rows if r.get("kind") == "metric")["value"] = 0.45

    edit_items(folder, items)
    edit_results(folder, lambda doc: doc["results"][0].update(value=0.45))
    with pytest.raises(AuditUsageError, match="template-hobby-GLD: its items are not the ones .* recorded"):
        verify(folder)


def test_an_older_results_json_without_digests_is_checked_by_value_and_says_so(tmp_path):
    card = verify(stored_run(tmp_path, [block(GLD)], digest=False))
    assert "1 block(s) without an item digest" in card[0] and "cannot be seen there" in card[0]
    edit_items(tmp_path, lambda rows: _first_gld_item(rows, 0.9))
    with pytest.raises(AuditUsageError, match="the items give 0.45"):
        verify(tmp_path)


def test_the_metric_is_recomputed_by_its_own_aggregation(tmp_path):
    """stereo_score: 100 x the mean over targets of each target's mean, not the mean of the items.
    Targets a: (1, 0, 0) -> 1/3 and b: (1) -> 1, so 100 x (1/3 + 1) / 2 = 66.67; the plain mean is 50."""
    values, groups = [1.0, 0.0, 0.0, 1.0], ["a", "a", "a", "b"]
    assert PAIRED["stereo_score"].aggregation == "group_mean"
    good = block(values, metric="stereo_score", groups=groups, value=100 * (1 / 3 + 1) / 2)
    plain = block(values, metric="stereo_score", groups=groups, value=50.0)
    verify(stored_run(tmp_path / "good", [good]))
    with pytest.raises(AuditUsageError, match="the items give 66.6667"):
        verify(stored_run(tmp_path / "plain", [plain]))


@pytest.mark.parametrize("change, named", [
    (lambda doc: doc["run"].update(model="other"), 'model: "m" in the items header, "other" in results.json'),
    (lambda doc: doc["run"].update(seed=1), "seed: 0 in the items header, 1 in results.json"),
    (lambda doc: doc["run"].update(engine="vllm 0.11"), "engine: transformers in the items header, vllm 0.11"),
    (lambda doc: doc["run"].update(lexicon={"pairs": [["she", "he"]]}), "lexicon: the gender word pairs"),
    (lambda doc: doc["run"].update(model_fingerprint="dir:w2"), "model fingerprint: dir:w1 in the items header"),
    (lambda doc: doc["results"][0].update(model_fingerprint="dir:w2"), "computed with model fingerprint dir:w2"),
    (lambda doc: doc["results"][0].update(probe_sha256="d" * 64), "probe content cccccccccccc in the items, dddd"),
    (lambda doc: doc["results"].clear(), "template-hobby-GLD has items but .* has no result for it"),
    (lambda doc: doc["results"][0].update(test_id="template-hobby-GAS"), "has no result for it"),
])
def test_header_and_results_json_must_describe_the_same_run(tmp_path, change, named):
    folder = stored_run(tmp_path, [block(GLD)])
    edit_results(folder, change)
    with pytest.raises(AuditUsageError, match=named):
        verify(folder)


def test_an_items_file_without_its_results_json_is_not_a_baseline(tmp_path):
    folder = stored_run(tmp_path, [block(GLD)])
    (folder / "results.json").unlink()
    with pytest.raises(AuditUsageError, match=r"results\.json: missing\. .*an items file alone is not a baseline"):
        verify(folder)
    (folder / "results.json").write_text("[1, 2]")
    with pytest.raises(AuditUsageError, match="not an audit's results.json"):
        verify(folder)


@pytest.mark.parametrize("change, named", [
    (lambda rows: rows[2].pop("value"), "line 3: item 'hobby:0' of template-hobby GLD has no value"),
    (lambda rows: rows[2].update(value="0.9"), "line 3: item 'hobby:0' .* the value \"0.9\", neither a finite"),
    (lambda rows: rows[2].update(value=True), "line 3: .* the value true, neither"),
    (lambda rows: rows[2].update(value=1e400), "line 3: .* the value Infinity"),
    (lambda rows: rows[2].update(id=7), "line 3: an item of template-hobby GLD has no text id"),
    (lambda rows: rows[2].update(prompt=["x"]), "prompt, output or group that is not text"),
    (lambda rows: rows[1].update(value=None), "line 2: template-hobby GLD: the value is null"),
    (lambda rows: rows[1].update(n_items="4"), "n_items is \"4\", not a count"),
    (lambda rows: rows[0]["run"].update(seed="0"), r"the run header is malformed \(seed is \"0\"\)"),
    (lambda rows: rows.__setitem__(2, [1, 2]), "unexpected line"),
])
def test_an_item_line_of_the_wrong_shape_is_a_usage_error_not_a_traceback(tmp_path, change, named):
    folder = stored_run(tmp_path, [block(GLD)])
    edit_items(folder, change)
    with pytest.raises(AuditUsageError, match=named):
        verify(folder)


def test_the_baseline_option_checks_the_folder_before_any_model_loads(tmp_path):
    from bias_core.pytest_plugin.regression_options import parse_options

    folder = stored_run(tmp_path / "run", [block(GLD)])
    values = {"--baseline": str(folder), "--baseline-adapter": None, "--summary-md": None, "--trust-remote-code": False,
              "--allow-adapter-base-mismatch": False, "--baseline-max-missing": None}
    parsed = parse_options(values.__getitem__)
    assert parsed.max_missing == 0.05 and "1 stored probe x metric(s) checked" in parsed.card[0]
    assert parse_options({**values, "--baseline-max-missing": "0.2"}.__getitem__).max_missing == 0.2
    edit_items(folder, lambda rows: _first_gld_item(rows, 0.9))
    with pytest.raises(AuditUsageError, match=f"--baseline {folder}: {folder / 'items.jsonl.gz'}: template-hobby-GLD"):
        parse_options(values.__getitem__)
    for bad in ("1", "-0.1", "x", "nan"):
        with pytest.raises(AuditUsageError, match=f"--baseline-max-missing {bad}: must be a share from 0"):
            parse_options({**values, "--baseline-max-missing": bad}.__getitem__)


# ----- items missing on either side --------------------------------------------------------------------
def test_items_missing_in_either_run_are_counted_by_side():
    # item 0: candidate only missing; item 1: a value in neither run (not the metric's); item 2: baseline missing
    base = block([0.1, None, None, 0.4, 0.5])
    cand = block([None, None, 0.3, 0.4, 0.5])
    p = pair(cand, base)
    assert (len(p.ids), p.n_items, p.n_dropped, p.missing_baseline, p.missing_candidate, p.n_unused) == (2, 4, 2, 1, 1, 1)
    assert p.pairs_text() == ("2 pairs of 4 items (1 without a value in the baseline, 1 without a value in the candidate)"
                              "; 1 other item of the probe not used by this metric")
    assert pair(block(GLD), block(GLD)).pairs_text() == "4 pairs"


def test_items_no_run_gives_a_value_are_not_missing_and_do_not_stop_the_comparison():
    """BBQ's ambiguous-context metrics leave the disambiguated questions without a value in every
    run: half the probe, which the missing-share guard must not take for items lost on one side."""
    values = [0.1 * (k % 7) for k in range(10)] + [None] * 10
    p = pair(block(values), block(values))
    assert (len(p.ids), p.n_items, p.n_dropped, p.n_unused) == (10, 10, 0, 10)
    assert missing_problem(p) is None
    assert p.pairs_text() == "10 pairs; 10 other items of the probe not used by this metric"
    one_side = pair(block(values), block([None] + values[1:]))
    assert (one_side.n_items, one_side.n_dropped, one_side.missing_baseline) == (10, 1, 1)
    assert missing_problem(one_side) is not None  # 1 of the 10 items it uses: 10%, over the 5%


def test_more_than_the_allowed_share_left_out_gives_no_verdict():
    twenty = [0.1 * (k % 7) for k in range(20)]
    one = pair(block(twenty), block([None] + twenty[1:]))  # 1 of 20 = 5%: allowed
    assert missing_problem(one) is None
    nulled = pair(block(twenty), block([None] * 17 + twenty[17:]))  # 17 of 20 = 85%
    problem = missing_problem(nulled)
    assert problem.startswith("template-hobby GLD: only 3 of the 20 items it uses have a value in both runs (17 without one in "
                              "the baseline): 85% left out, more than the 5% a comparison may leave out")
    assert "--baseline-max-missing 0.85" in problem
    assert missing_problem(nulled, max_share=0.85) is None
    both_sides = pair(block([None, None] + twenty[2:]), block(twenty[:18] + [None, None]))
    assert "(2 without one in the baseline, 2 without one in the candidate)" in missing_problem(both_sides)


def test_no_item_valued_in_both_runs_is_a_mismatch_naming_the_counts():
    with pytest.raises(BaselineMismatch, match=r"none of the 2 items has a value in both runs \(1 without one in "
                                               r"the baseline, 1 in this run\)"):
        pair(block([None, 0.2]), block([0.1, None]))


def _rows():
    """A judged row on 40 pairs and an errored one on 3 of 40, as regression_comparisons makes them."""
    from bias_core.gating.regression import Margin, compare_to_baseline, judge
    from bias_core.pytest_plugin.regression_rows import _row, error_row, pair_counts
    from bias_core.stats.paired import adjust

    values = [0.1 * (k % 5) for k in range(40)]
    whole = pair(block(values, probe="template-color"), block(values, probe="template-color"))
    nulled = pair(block(values), block([None] * 37 + values[37:]))
    c = judge(adjust([compare_to_baseline(whole, PAIRED["GLD"], n_resamples=200, n_bootstrap=200)])[0],
              Margin("GLD", 0.03))
    configs = check_configs(RUN, RUN)
    good = {**_row(c, "disclosure", "holm", "stored run X", configs), **pair_counts(whole)}
    bad = error_row(nulled, "disclosure", "stored run X", missing_problem(nulled))
    return [good, {**bad, "config": configs.describe()}]


def test_every_regression_row_shows_its_n_of_pairs_in_banner_summary_and_html(tmp_path):
    from bias_core.pytest_plugin.regression_options import RegressionOptions
    from bias_core.pytest_plugin.regression_summary import write_run_summary
    from bias_core.reports.banner import verdict_banner
    from bias_core.reports.html import render_html

    rows = _rows()
    short = "3 pairs of 40 items (37 without a value in the baseline)"
    banner = verdict_banner(rows).text()
    assert f"n per comparison: 40 pairs: template-color-GLD; {short}: template-hobby-GLD." in banner
    assert "ERROR regression-template-hobby-GLD: template-hobby GLD: only 3 of the 40 items" in banner
    assert banner.splitlines()[0] == "BLOCKED: 1 test errored"

    class Settings:
        strict, model_value = False, "cand"

    write_run_summary(rows, RegressionOptions(summary_md=tmp_path / "summary.md"), Settings(), 1)
    md = (tmp_path / "summary.md").read_text()
    assert "| template-color-GLD | lower is better | 40 pairs | " in md
    assert f"| template-hobby-GLD | – | {short} |" in md and "**ERROR**: template-hobby GLD: only 3 of the 40" in md
    assert "2 paired comparisons, 0 beyond their margin, 1 without a verdict" in md

    page = render_html([dict(r, nodeid=f"x::{r['test_id']}") for r in rows], {"model": "m", "complete": True},
                       generated="fixed")
    section = page[page.index('<section id="regression">'):]
    assert "<th>n (pairs)</th>" in section and ">40 pairs</td>" in section and f">{short}</td>" in section


def test_rows_written_before_the_sides_were_counted_still_show_their_n():
    from bias_core.reports.fmt import pairs_of

    assert pairs_of({"n": 3, "n_dropped": 37}) == "3 pairs of 40 items (37 unpaired)"
    assert pairs_of({"n": 40, "n_dropped": 0}) == "40 pairs" and pairs_of({"n": None}) == "—"


# ----- "same model weights" ----------------------------------------------------------------------------
def test_same_model_weights_only_when_both_weight_hashes_are_recorded_and_equal():
    assert check_configs(RUN, RUN).describe().startswith("same model weights; same dtype (float32)")
    old = dataclasses.replace(RUN, weights_sha256="")  # a baseline written before weights were recorded
    said = check_configs(RUN, old)
    assert not said.same_model and "same model weights" not in said.describe()
    assert said.describe().startswith("model weights not verified (the baseline recorded no hash of its weight "
                                      "files: its items were written by an older bias-core)")
    other = check_configs(RUN, dataclasses.replace(RUN, weights_sha256="sha-w2", model_fingerprint="dir:w2"))
    assert other.describe().startswith("different model weights")
    adapter = check_configs(dataclasses.replace(RUN, model_fingerprint="dir:w1:lora-ab12"), RUN)
    assert not adapter.same_model  # same base weights, an adapter on one: not the same model


def _served(endpoint: str, answers: str) -> RunConfig:
    return dataclasses.replace(RUN, engine="openai", dtype="as served", weights_sha256="",
                               served={"endpoint": endpoint, "model": "smollm2", "answers": answers})


def test_served_models_say_what_is_and_is_not_known():
    """A baseline through one server and a candidate through another, with the same local folder."""
    said = check_configs(_served("http://127.0.0.1:8001", "a1"), _served("http://gpu:8000", "b2")).describe()
    assert "same model weights" not in said and "same dtype" not in said
    assert said.startswith("served model: weights not verifiable; same local folder (tokenizer and config; not the "
                           "served weights); different endpoint (candidate http://127.0.0.1:8001, baseline "
                           "http://gpu:8000); same served model name (smollm2); different answers to the canary "
                           "requests (another model or another serving); dtype not known (as served)")
    assert said.endswith("engine openai in both runs")
    same = check_configs(_served("http://a", "a1"), _served("http://a", "a1"))
    assert not same.same_model and "same answers to the canary requests" in same.describe()


@pytest.mark.parametrize("candidate, baseline", [("openai", "vllm"), ("vllm", "transformers"),
                                                 ("transformers", "openai")])
def test_runs_through_two_engines_are_refused_naming_both(candidate, baseline):
    with pytest.raises(BaselineMismatch, match=f"engine differs \\(candidate {candidate}, baseline {baseline}\\)"):
        check_configs(dataclasses.replace(RUN, engine=candidate), dataclasses.replace(RUN, engine=baseline))


def test_the_run_records_weight_hashes_or_what_it_knows_of_a_served_model():
    from bias_core.models.protocol import EngineInfo
    from bias_core.pytest_plugin.regression_config import _model_identity

    class Local:
        def cache_identity(self):
            return {"model": "dir:w1", "weights": "sha-w1", "tokenizer": "t1", "dtype": "float32"}

        def info(self):
            return EngineInfo(engine="transformers")

    class Remote:
        def __init__(self, probe):
            self.probe = probe

        def cache_identity(self):
            return {"engine": "openai", "model": "dir:w1", "tokenizer": "t1", "served": "smollm2",
                    "server_probe": self.probe}

        def info(self):
            return EngineInfo(engine="openai", endpoint="http://127.0.0.1:8001")

    assert _model_identity(Local()) == ("sha-w1", {})
    weights, served = _model_identity(Remote("p1"))
    assert weights == "" and served["endpoint"] == "http://127.0.0.1:8001" and served["model"] == "smollm2"
    assert served["answers"] != _model_identity(Remote("p2"))[1]["answers"]  # other canary answers, other digest
