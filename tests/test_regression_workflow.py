"""The release gate's documented workflow (docs/release-gate.md), run as written, per family: a
baseline stored with ``--sample fixed`` pairs with the candidate's run against it, whatever the
probe's sampling (BBQ and discrim-eval cut to their declared fixed size, CrowS-Pairs and WinoBias
sampled pools, GenderPair's own sample); a candidate run with another ``--sample`` is refused,
naming the difference, before any model loads.

Each family's selection is small (the tiny random model; GenderPair on three prompts): these check
that the two commands fit together, not what the rows catch (benchmarks/gate_power.py does).
"""

from __future__ import annotations

import json

import pytest

from harness import audit_subprocess, copy_project, no_traceback
from tiny_model import build_tiny_causal_lm

pytestmark = pytest.mark.slow  # whole audits in subprocesses

GENDERPAIR_SMALL = ("--genderpair-sample", "3", "--toxicity-classifier", "offline", "--regard-classifier", "offline")
FAMILIES = {
    # a probe of each sampling kind the family has: fixed-size pools, adaptive pools, whole probes
    "disclosure": ("template-color", ()),
    "association": ("bbq or discrim or crows or winobias", ()),
    "genderpair": ("genderpair-group3", GENDERPAIR_SMALL),
    # GenderPair's own default sample (72 prompts of group 3), which a candidate run without
    # --sample once drew adaptively and so never paired with a --sample fixed baseline
    "genderpair-default-sample": ("genderpair-group3", GENDERPAIR_SMALL[2:]),
}


BOTH_FORMS = {"association", "genderpair"}


@pytest.fixture(scope="module")
def long_context_model(tmp_path_factory):
    """The tiny random model with room for discrim-eval's real prompts (691 tokens here)."""
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-1024"), seed=0, context=1024)


def regression_rows(run) -> dict[str, dict]:
    doc = json.loads((run / "results.json").read_text())
    return {r["test_id"]: r for r in doc["results"] if r.get("kind") == "regression"}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_documented_baseline_pairs_with_the_documented_candidate_run(tmp_path, long_context_model, family):
    select, extra = FAMILIES[family]
    project = copy_project(tmp_path / "project", own_rootdir=True)
    # once, for the release: audit the baseline with whole samples and keep its run folder
    code, out, baseline = audit_subprocess(project, long_context_model, project / "baseline", select,
                                           "--sample", "fixed", *extra)
    assert code in (0, 1) and baseline is not None, out[-3000:]  # absolute gates may fail on random weights
    # every candidate, as the docs write it (no --sample: a run with --baseline keeps whole samples),
    # and, where the families sample pools of their own, with the --sample fixed the baseline was
    # stored with (a template probe has one size; the default-sample case is the first form's)
    for sample in ((), ("--sample", "fixed")) if family in BOTH_FORMS else ((),):
        code, out, run = audit_subprocess(project, long_context_model, project / f"candidate{len(sample)}", select,
                                          "--baseline", str(baseline), *sample, *extra)
        assert code in (0, 1), out[-3000:]
        rows = regression_rows(run)
        assert rows, f"no regression row ran for {family}:\n{out[-3000:]}"
        for test_id, row in rows.items():
            # the same model on the same items: every row paired whole, deltas exactly 0
            assert row["verdict"] == "pass" and row["value"] == 0.0, (test_id, row)
            assert row["baseline_value"] == row["candidate_value"], (test_id, row)
    # a third run sized another way is refused, naming the difference, before any model loads
    code, out, _ = audit_subprocess(project, long_context_model, project / "other", select,
                                    "--baseline", str(baseline), "--sample", "8", *extra)
    assert code == 4, out[-3000:]
    assert 'sample_sizes differs' in out and 'sample: candidate "8", baseline "fixed"' in out, out[-3000:]
    no_traceback(out)


def test_a_baseline_stored_with_sample_n_pairs_with_a_candidate_run_with_the_same_sample_n(tmp_path,
                                                                                        long_context_model):
    """More pairs than the declared fixed sizes (docs/release-gate.md): both runs under --sample N
    audit each sampled probe's first N units; the candidate's rows pair on all of them."""
    project = copy_project(tmp_path / "project", own_rootdir=True)
    select = "bbq or discrim"
    code, out, baseline = audit_subprocess(project, long_context_model, project / "baseline", select, "--sample", "24")
    assert code in (0, 1) and baseline is not None, out[-3000:]
    code, out, run = audit_subprocess(project, long_context_model, project / "candidate", select,
                                      "--baseline", str(baseline), "--sample", "24")
    assert code in (0, 1), out[-3000:]
    rows = regression_rows(run)
    assert {t.split("-")[1] for t in rows} == {"bbq", "discrim"}, list(rows)
    for test_id, row in rows.items():
        assert row["verdict"] == "pass" and row["value"] == 0.0, (test_id, row)
        assert not row["missing_candidate"] and not row["missing_baseline"], (test_id, row)
    # BBQ's unit is a question: its rows stand on the 24 (the metric's context condition, the rest unused)
    for metric in ("bbq_s_amb", "bbq_acc_disambig"):
        row = next(r for t, r in rows.items() if t.endswith(metric))
        assert row["n_items"] + row["n_unused"] == 24, row
    no_traceback(out)
