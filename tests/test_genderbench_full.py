"""--genderbench-full: GenderBench's own configuration for its probes, every item of each pool at
its 300-token limit; the other families' sampling untouched."""

from __future__ import annotations

import pytest

from bias_core import catalogue
from bias_core.gating.adaptive_sampling import FIXED_SIZES, SampleOptions, plan_for, prefix_probe
from bias_core.models.cached import CachedModel
from bias_core.models.engines.fake import FakeEngine
from bias_core.probes import genderbench as gp
from bias_core.runners import genderbench as gr
from bias_core.suites.genderbench import GenderBenchAudit

GENDERBENCH = {p.name for p in catalogue.sampled_probes() if p.family == "genderbench"}


@pytest.mark.parametrize("mode", ["auto", "fixed"])
def test_the_plan_audits_every_genderbench_pool_whole_and_leaves_the_others(mode):
    plan = plan_for(SampleOptions(mode), genderpair_fixed=False, paired=False, whole_families=("genderbench",))
    default = plan_for(SampleOptions(mode), genderpair_fixed=False, paired=False)
    assert GENDERBENCH and set(plan.whole) == GENDERBENCH
    for probe in GENDERBENCH:
        assert not plan.samples(probe) and plan.fixed_size(probe) is None
        assert default.fixed_size(probe) == (None if default.samples(probe) else FIXED_SIZES[probe])
    others = [p.name for p in catalogue.sampled_probes() if p.family != "genderbench"]
    assert [plan.samples(p) for p in others] == [default.samples(p) for p in others]
    assert [plan.fixed_size(p) for p in others] == [default.fixed_size(p) for p in others]
    assert plan.describe()["whole"] == sorted(plan.whole, key=list(plan.whole).index)
    assert not set(plan.describe().get("fixed_size", {})) & GENDERBENCH


def test_a_full_run_generates_at_genderbenchs_token_limit():
    limits: list[int] = []

    def generate(prompt, config, seed):
        limits.append(config.max_new_tokens)
        return "He smiled."

    lm = CachedModel(FakeEngine(generate=generate))
    probe = prefix_probe(gp.load_jobs_lum(), 3, 0)
    short = gr.run_jobs_lum(lm, probe, seed=0)
    assert set(limits) == {gr.JOBS_LUM_MAX_NEW_TOKENS}
    limits.clear()
    full = gr.run_jobs_lum(lm, probe, seed=0, full=True)
    assert set(limits) == {gr.GENDERBENCH_MAX_TOKENS} == {300} and len(limits) == 3 * 5
    assert "at most 300 new tokens" in full["jobs_lum_masculine_rate"].breakdown["definition"]["genderbench_decoding"]
    assert "at most 96 new tokens" in short["jobs_lum_masculine_rate"].breakdown["definition"]["genderbench_decoding"]


def test_every_genderbench_runner_takes_the_full_switch_from_the_suite():
    import inspect

    runners = {m.runner for m in catalogue.metrics_of("genderbench")}
    for runner in runners:
        assert "full" in inspect.signature(catalogue.spec(next(m.name for m in catalogue.metrics_of("genderbench")
                                                                if m.runner == runner)).runner_function()).parameters, runner
    assert GenderBenchAudit(None, full=True).runner_inputs("genderbench-direct")["full"]() is True
