"""engine_numbers.restrict: the numbers of a subset of the requests, cut from a larger set's, are
what the model gives for that subset asked alone (the vLLM test compares the endpoint on the
subset with the in-process engine's larger set)."""

from __future__ import annotations

import numpy as np

from engine_numbers import PARTS, numbers, requests, restrict


def test_the_numbers_cut_to_a_subset_are_the_subsets_own(tiny_lm):
    asked, fewer = requests(20, 6), requests(40, 12)
    assert 0 < len(fewer["prompts"]) < len(asked["prompts"]) and 0 < len(fewer["words"]) < len(asked["words"])
    cut = restrict({"info": "kept", **numbers(tiny_lm, asked)}, asked, fewer)
    alone = numbers(tiny_lm, fewer)
    assert cut["info"] == "kept" and set(PARTS) <= cut.keys()
    assert cut["continuations"] == alone["continuations"]
    for part in ("word_probs", "sentence_logprob", "loglikelihood"):
        # other batches: fp32's last bits may differ (tests/tolerances.py), nothing more
        np.testing.assert_allclose(np.array(cut[part]), np.array(alone[part]), rtol=1e-4, atol=1e-9, err_msg=part)
    assert [[w for w, _ in row] for row in cut["topk_fills"]] == [[w for w, _ in row] for row in alone["topk_fills"]]
