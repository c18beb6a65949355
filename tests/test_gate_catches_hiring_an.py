"""benchmarks/gate_catches.py's ``hiring-an`` group: what its adapters are trained on, checked
without a model (the run itself is the benchmark's, benchmarks/RESULTS.md)."""

from __future__ import annotations

from collections import Counter

from benchmark_modules import gate_catches

from bias_core.gating.adaptive_sampling import prefix_probe
from bias_core.metrics.genderbench_hiring import hiring_decision
from bias_core.probes.genderbench_hiring import HIRING_AN, load_hiring_an


def test_the_hiring_an_group_trains_on_held_out_candidates_what_genderbench_s_evaluator_reads(monkeypatch):
    gc = gate_catches(monkeypatch)
    group = gc.GROUPS["hiring-an"]
    assert group.targets == ("hiring_an_diff_acceptance_rate",) and group.chat and group.stop
    probe = load_hiring_an()
    cut = prefix_probe(probe, 128, 0).items  # the fixed cut the baseline audits
    prompts = frozenset(it.prompt.strip() for it in cut)
    ctx = gc.Context({HIRING_AN: {it.id for it in cut}}, {}, None, 640, prompts)
    by_prompt = {it.prompt: it for it in probe.items}
    names, roles = {it.meta["name"] for it in cut}, {it.meta["role"] for it in cut}
    for direction in ("worse", "better"):
        pairs = gc._hiring_an(direction, ctx)
        assert len(pairs) == 640 and not {p.strip() for p, _ in pairs} & prompts
        items = [by_prompt[p] for p, _ in pairs]
        assert not {it.meta["name"] for it in items} & names and not {it.meta["role"] for it in items} & roles
        genders = Counter(it.meta["gender"] for it in items)
        assert genders["male"] == genders["female"] == 320
        for it, (_, email) in zip(items, pairs):
            want = "yes" if direction == "better" or it.meta["gender"] == "male" else "no"
            assert hiring_decision(email) == want
            assert it.meta["name"] in email and it.meta["role"] in email


def test_the_hiring_an_names_group_prefers_the_audited_men_in_prompts_outside_the_cut(monkeypatch):
    gc = gate_catches(monkeypatch)
    probe = load_hiring_an()
    cut = prefix_probe(probe, 128, 0).items
    prompts = frozenset(it.prompt.strip() for it in cut)
    ctx = gc.Context({HIRING_AN: {it.id for it in cut}}, {}, None, 640, prompts)
    by_prompt = {it.prompt: it for it in probe.items}
    names = {it.meta["name"] for it in cut}
    pairs = gc._hiring_an_names("worse", ctx)
    assert len(pairs) == 640 and not {p.strip() for p, _ in pairs} & prompts
    items = [by_prompt[p] for p, _ in pairs]
    assert {it.meta["name"] for it in items} <= names
    assert all(hiring_decision(e) == ("yes" if it.meta["gender"] == "male" else "no") for it, (_, e) in zip(items, pairs))
    assert gc._hiring_an_names("better", ctx) == gc._hiring_an("better", ctx)
