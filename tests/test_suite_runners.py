"""Every family's suite computes a metric with the runner its catalogue entry names, handing it
the inputs its parameters name, one run per probe and runner (no if-chain on the metric's name).
Stand-in models and scorers with hand-computable outputs; no model loads."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from bias_core.catalogue import ACROSS_GROUPS, GROUP_PROBES
from bias_core.metrics import MetricResult
from bias_core.suites.association import PAPER_SPLIT, AssociationAudit
from bias_core.suites.base import call_with
from bias_core.suites.disclosure import DisclosureAudit
from bias_core.suites.genderpair import GenderPairAudit


class _Speaker:
    """Continuations that name the lexicon's first female word on every other prompt, and next-word
    probabilities 0.3 on the first female word and 0.1 on the first male word, 0 elsewhere."""

    kind, name = "causal", "stand-in"

    def __init__(self, lexicon):
        self.lexicon, self.word_calls = lexicon, 0

    def generate(self, prompts, config=None, seed=0, desc=""):
        return [f"then {self.lexicon.female_words[0]} left" if k % 2 == 0 else "then it rained" for k in range(len(prompts))]

    def word_probs(self, prompts, words, desc=""):
        self.word_calls += 1
        probs = np.zeros((len(prompts), len(words)))
        probs[:, 0], probs[:, len(self.lexicon.female_words)] = 0.3, 0.1
        return probs


def test_disclosure_runs_gas_and_one_next_word_pass_for_gld_add_and_gender_lean():
    suite = DisclosureAudit(lm=None)
    suite.lm = lm = _Speaker(suite.lexicon)
    n = len(suite.probe("template-hobby").items)
    gas = suite.result("template-hobby", "GAS")
    assert gas.value == pytest.approx(math.ceil(n / 2) / n)
    gld, add = suite.result("template-hobby", "GLD"), suite.result("template-hobby", "ADD")
    assert gld.value == pytest.approx(0.2 / 0.4)  # |0.3 - 0.1| / (0.3 + 0.1)
    assert add.value == pytest.approx((0.3 * math.log(1.5) + 0.1 * math.log(0.5)) / 2, abs=1e-8)
    assert suite.result("template-hobby", "gender_lean").value == pytest.approx(0.2 / 0.4)  # towards female
    assert lm.word_calls == 1  # the metrics naming run_next_word share its one pass
    assert gld.breakdown["definition"] == {"lexicon": suite.lexicon.name, "articles": suite.articles}


def test_association_hands_its_runner_the_probe_and_causal_likelihood_once_per_probe(monkeypatch):
    from bias_core.runners import preference

    calls = []

    def run_stereoset(lm, probe, seed=0, causal="mean"):
        calls.append((lm, probe, seed, causal))
        return {"stereo_score": MetricResult("stereo_score", 60.0, 50.0, 70.0, 3),
                "lm_score": MetricResult("lm_score", 90.0, 80.0, 95.0, 3)}

    monkeypatch.setattr(preference, "run_stereoset", run_stereoset)
    suite = AssociationAudit(lm="the model", seed=7, causal_likelihood="total")
    suite._probes["stereoset-gender"] = "the probe"  # loaded: the runner gets it as it is
    assert suite.result("stereoset-gender", "stereo_score").value == 60.0
    assert suite.result("stereoset-gender", "lm_score").value == 90.0
    assert calls == [("the model", "the probe", 7, "total")]
    with pytest.raises(KeyError, match="GBM is not measured on stereoset-gender"):
        suite.compute("stereoset-gender", "GBM")


def test_association_loaders_get_the_papers_split_and_articles():
    from bias_core.probes.da_gender import load_da_gender
    from bias_core.probes.kurita import load_logprob_professions

    suite = AssociationAudit(lm=None, articles="grammatical")
    assert suite.probe_options() == {"articles": "grammatical", "split": PAPER_SPLIT}
    assert suite.probe("da-gender").items == load_da_gender("grammatical").items != load_da_gender("paper").items
    assert suite.probe("logprob-professions").items == load_logprob_professions(PAPER_SPLIT).items


def _genderpair():
    """Group k's responses have toxicity 0.1 k and regard rows with negative 0.2 k, positive 0.5;
    the biased descriptor is marked on all but every third prompt."""
    from bias_core.classifiers import REGARD_COLUMNS
    from bias_core.runners.genderpair import decide_choices

    suite = GenderPairAudit(lm=SimpleNamespace(kind="causal", name="stand-in"), sample=12)
    suite._scorers["regard"] = SimpleNamespace(is_proxy=True, name="a proxy")
    for k, p in enumerate(GROUP_PROBES, start=1):
        probe = suite.probe(p)
        responses = [f"{{{it.meta['anti'] if j % 3 == 0 else it.meta['biased']}}}" for j, it in enumerate(probe.items)]
        row = {c: 0.0 for c in REGARD_COLUMNS} | {"negative": 0.2 * k, "positive": 0.5}
        suite._responses[p] = {"probe": probe, "responses": responses, "records": decide_choices(None, probe.items, responses),
                               "toxicity": np.full(len(responses), 0.1 * k), "regard": [dict(row) for _ in responses]}
    return suite


def test_genderpair_metrics_come_from_the_runs_records_and_scores():
    suite = _genderpair()
    n = len(suite.probe("genderpair-group1").items)
    assert n == 4  # 12 prompts over three groups
    assert suite.result("genderpair-group1", "BPR").value == pytest.approx(sum(j % 3 != 0 for j in range(n)) / n)
    assert suite.result("genderpair-group2", "toxicity").value == pytest.approx(0.2)
    assert suite.result("genderpair-group3", "regard_proxy_negative").value == pytest.approx(0.6)
    assert suite.result(ACROSS_GROUPS, "BPR_gap").value == pytest.approx(0.0)  # every group alike
    assert suite.result(ACROSS_GROUPS, "toxicity_gap").value == pytest.approx(0.3 - 0.1)
    assert suite.result(ACROSS_GROUPS, "regard_proxy_negative_gap").value == pytest.approx(0.6 - 0.2)
    assert suite.result(ACROSS_GROUPS, "regard_proxy_positive_gap").value == pytest.approx(0.0)


def test_genderpair_rows_record_the_classifier_that_scored_them_and_the_cda_reaudit_carries_it():
    from bias_core.classifiers import JigsawBiLSTM, VaderRegardProxy
    from bias_core.suites.mitigation import MitigationAudit

    def suite():
        made = _genderpair()
        made._scorers.update(toxicity=JigsawBiLSTM(), regard=VaderRegardProxy())  # constructing them loads nothing
        return made

    original = suite()
    toxicity = original.result("genderpair-group1", "toxicity").breakdown["classifier"]
    assert toxicity == {"role": "toxicity", "name": "jigsaw-bilstm", "label": JigsawBiLSTM.label,
                        "stand_in": "offline Jigsaw BiLSTM"}
    assert original.result(ACROSS_GROUPS, "toxicity_gap").breakdown["classifier"] == toxicity
    regard = original.result("genderpair-group1", "regard_proxy_negative").breakdown["classifier"]
    assert (regard["role"], regard["stand_in"]) == ("regard", "VADER proxy")
    assert original.result(ACROSS_GROUPS, "regard_proxy_positive_gap").breakdown["classifier"] == regard
    assert "classifier" not in original.result("genderpair-group1", "BPR").breakdown  # no classifier decides it
    # scores the suite was handed, by no scorer of its own: nothing is claimed
    handed = _genderpair()
    assert "classifier" not in handed.result("genderpair-group1", "toxicity").breakdown

    mitigation = MitigationAudit(lm=SimpleNamespace(kind="causal", name="stand-in"))
    mitigation._variants["gendercare-cda"] = SimpleNamespace(info={"method": "gendercare-cda"})
    mitigation._genderpairs.update({None: original, "gendercare-cda": suite()})
    reduction = mitigation.reaudit("gendercare-cda", "genderpair-group1", "toxicity_reduction")
    assert reduction.value == pytest.approx(0.0) and reduction.breakdown["classifier"] == toxicity


def test_call_with_hands_over_what_is_named_and_says_what_is_missing():
    made = []

    def offered(name, value):
        return lambda: made.append(name) or value

    def runner(lm, probe, seed=0, causal="mean"):
        return (lm, probe, seed, causal)

    got = call_with(runner, {"lm": offered("lm", 1), "probe": offered("probe", 2), "seed": offered("seed", 3),
                             "lexicon": offered("lexicon", 4)}, "a runner")
    assert got == (1, 2, 3, "mean") and "lexicon" not in made  # what it does not name is never made
    with pytest.raises(TypeError, match="needs probe, which its suite does not offer"):
        call_with(runner, {"lm": offered("lm", 1)}, "a runner")
