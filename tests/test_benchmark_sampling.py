"""BBQ and discrim-eval under each sampling mode: sized by their gate under ``--sample auto``, cut
to their fixed size whenever they are not sampled adaptively, whole outside a plan."""

from __future__ import annotations

import pytest
from test_bbq import ANSWERS, LABELS, row

from bias_core import catalogue
from bias_core.gating import adaptive_sampling as ad
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes.base import Probe
from bias_core.probes.bbq import item_from_row
from bias_core.suites.association import AssociationAudit


def small_bbq(data_dir=None) -> Probe:
    rows = [row(k, ("neg", "nonneg")[k % 2], ("ambig", "disambig")[(k // 2) % 2], ANSWERS, LABELS, ["F"],
                1 if (k // 2) % 2 == 0 else 2, context=f"Context {k}.") for k in range(40)]
    return Probe("bbq-gender", "1", tuple(item_from_row(r, f"row {k}", "test") for k, r in enumerate(rows)))


@pytest.fixture
def forty_questions(monkeypatch):
    monkeypatch.setitem(catalogue.PROBES, "bbq-gender", small_bbq)
    monkeypatch.setitem(ad.FIXED_SIZES, "bbq-gender", 12)


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


def test_under_auto_the_pool_is_whole_and_the_gate_sizes_the_sample(forty_questions):
    auto = suite(ad.plan_for(ad.SampleOptions("auto"), genderpair_fixed=True, paired=False))
    assert len(auto.probe("bbq-gender").items) == 40
    result = auto.result("bbq-gender", "bbq_s_amb")
    assert result.breakdown["sampling"]["mode"] == "auto" and result.breakdown["sampling"]["pool"] == 40


def test_outside_a_plan_the_probe_is_whole(forty_questions):
    assert len(suite(None).probe("bbq-gender").items) == 40


def test_both_probes_are_capped_and_sized_in_every_mode():
    for probe in ("bbq-gender", "discrim-eval-gender"):
        assert probe in ad.SAMPLED_PROBES and probe in ad.PROBE_CAPS and probe in ad.FIXED_SIZES
        assert ad.PROBE_CAPS[probe] <= ad.FIXED_SIZES[probe]
