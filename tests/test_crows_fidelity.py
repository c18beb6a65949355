"""Our causal-LM CrowS-Pairs numbers agree with lm-evaluation-harness's crows_pairs computation.

Runs benchmarks/check_crows_fidelity.py's comparison: lm-eval's own crows_pairs_english_gender
task (dataset swapped for the local CSV) scored by its HFLM backend on SmolLM2-135M's local
folder, float32, CPU, against bias_core's loader, sentence_logprob and crows_score, on the CSV's
first 80 of its 262 gender pairs (about a minute on 2 shared cores; the benchmark script compares
all 262). The comparison runs in its own process, offline from its start (datasets and
huggingface_hub read HF_*_OFFLINE once, at import: set in this process, they would outlive the
test).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from paths import REPO, SHARED
from tolerances import Forward, assert_close, assert_close_logprobs, value_atol

COMPARE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from check_crows_fidelity import compare
r = compare(__import__("pathlib").Path(sys.argv[2]), "smollm2-135m", batch_size=16, pairs=int(sys.argv[3]))
print(json.dumps({"sentences": list(r.sentences), "ours": r.ll_ours.tolist(), "lm_eval": r.ll_lm_eval.tolist(),
                  "pct_ours": r.pct_ours, "pct_lm_eval": r.pct_lm_eval, "diff_ours": r.diff_ours,
                  "diff_lm_eval": r.diff_lm_eval}))
"""


PAIRS = 80  # the first of the CSV's 262 gender pairs: `check_crows_fidelity.py` without --pairs runs all


@pytest.mark.slow
def test_crows_pairs_agree_with_lm_eval(smollm2_lm):
    if importlib.util.find_spec("lm_eval") is None:
        pytest.skip("lm_eval is not installed (dev-only reference): pip install lm_eval")
    if not (SHARED / "crows-pairs" / "crows_pairs_anonymized.csv").is_file():
        pytest.skip(f"the full CrowS-Pairs CSV is not at {SHARED / 'crows-pairs'}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", COMPARE, str(REPO / "benchmarks"), str(SHARED), str(PAIRS)],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    ours, theirs = np.array(result["ours"]), np.array(result["lm_eval"])  # (pairs, 2): more, less
    assert ours.shape == (PAIRS, 2)

    # Each sentence's log-likelihood: one token bound per scored token (fp32 passes of other
    # batches and paddings in the two harnesses). The logit scale is read on every 8th sentence.
    sentences = result["sentences"]
    sizes = Forward.of(smollm2_lm, sentences[::8])
    tokens = np.array([len(smollm2_lm.engine.tokenizer(s)["input_ids"]) for s in sentences]).reshape(ours.shape)
    bound = np.vectorize(sizes.word_logprob_atol)(tokens)
    assert_close_logprobs(ours, theirs, bound, kind="sentence log-likelihoods")

    # A pair whose two sentences lie within rounding of each other may be decided either way.
    margin, tie_bound = theirs[:, 0] - theirs[:, 1], bound.sum(axis=1) + value_atol(theirs[:, 0], theirs[:, 1])
    clear = np.abs(margin) > tie_bound
    assert np.array_equal((ours[:, 0] > ours[:, 1])[clear], (margin > 0)[clear])
    assert abs(result["pct_ours"] - result["pct_lm_eval"]) <= np.mean(~clear) + 1e-12
    # the mean |LL(more) - LL(less)| moves by at most the mean of the pairs' bounds
    assert_close(result["diff_ours"], result["diff_lm_eval"], tie_bound.mean(), kind="likelihood_diff")
