"""The open model seam: a backend from another installed package audits through the documented
protocol alone (docs/engines.md, "Adding a model backend"), the result cache wraps any engine
keyed by its identity, and what an engine cannot do is a skip with the reason."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from bias_core.models.cached import CachedModel
from bias_core.models.engines import EngineEntry, engine_names, get_engine, register
from bias_core.models.engines.fake import FakeEngine
from bias_core.models.protocol import EngineCannot
from bias_core.storage.result_cache import ResultCache

from harness import only_run
from toy_package import write_toy_package

pytest_plugins = ["pytester"]


# A third party's backend, written against the documented seam only: the protocol's members,
# an EngineEntry, and an entry point. Scores follow a rule a reader can check by hand: a
# sentence's log-likelihood is minus its number of letters "e" (so "she" < "he" by one).
TOY_ENGINE = '''
import numpy as np

from bias_core.models.engines import EngineEntry
from bias_core.models.protocol import EngineInfo


class ToyEngine:
    kind = "causal"
    capabilities = frozenset({"scoring", "next_word", "generation"})  # no embeddings: SEAT is skipped
    batch_size = 1

    def __init__(self, name):
        self.name, self.fingerprint, self.tokenizer_fingerprint = name, "toy:1", "toy:words"

    def cache_identity(self):
        return {"engine": "toy 1", "model": self.fingerprint}

    def info(self):
        return EngineInfo(engine="toy", version="1", dtype="exact", device="pen and paper")

    def token_counts(self, texts):
        return [len(t.split()) for t in texts]

    def scored_token_counts(self, texts):
        return np.asarray(self.token_counts(texts))

    def render_chat(self, text):
        return text

    def sentence_logprob(self, sentences, desc=""):
        return np.asarray([-float(s.count("e")) for s in sentences])

    def loglikelihood(self, requests, desc=""):
        return [-float(cont.count("e")) for _, cont in requests]

    def word_probs(self, prompts, words, desc=""):
        return np.asarray([[np.exp(-w.count("e")) / 10 for w in words] for _ in prompts])

    def fill_probs(self, texts, words, desc=""):
        return self.word_probs(texts, words)

    def topk_fills(self, texts, k, desc=""):
        return [[("person", 0.5)][:k] for _ in texts]

    def embed(self, sentences, desc=""):
        raise AssertionError("never called: not a declared capability")

    def generate(self, prompts, config=None, seed=0, desc=""):
        return [" and so on." for _ in prompts]


ENGINE = EngineEntry(name="toy", load=lambda spec, opts: ToyEngine(spec.name), summary="a toy backend",
                     describe=lambda opts: {"engine": "toy 1", "device": "pen and paper", "dtype": "exact"})
'''


def _toy_backend(site: Path) -> None:
    write_toy_package(site, "toy_engine", TOY_ENGINE, "bias_core.engines", "toy = toy_engine:ENGINE")


def test_a_third_party_backend_audits_without_any_change_to_bias_core(audit_project, monkeypatch, tmp_path):
    site = tmp_path / "site"
    _toy_backend(site)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    result = audit_project.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--engine", "toy", "--cache-dir",
                                           str(tmp_path / "c"), "-k", "occupation-pronouns or seat-v1", "-v")
    result.stdout.fnmatch_lines(["*bias-core: model smollm2-135m, engine toy 1, device pen and paper, dtype exact*"])
    run = only_run(audit_project.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    rows = {r["test_id"]: r for r in doc["results"]}
    pronoun = rows["occupation-pronouns-pronoun_stereo"]
    # "he" has one "e" fewer than "she": every pair prefers "he", so the share is the male-typed half
    assert pronoun["verdict"] in ("pass", "fail", "inconclusive") and pronoun["value"] == pytest.approx(0.5)
    assert rows["seat-v1-SEAT_effect"]["verdict"] == "skipped"
    assert "the toy engine cannot give sentence encodings" in rows["seat-v1-SEAT_effect"]["reason"]
    assert "--engine transformers" in rows["seat-v1-SEAT_effect"]["reason"]  # and the fix
    assert doc["run"]["engine"] == "toy 1" and doc["run"]["engine_card"]["engine"] == "toy"
    case = next(c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if "occupation" in c.get("name"))
    assert {p.get("name"): p.get("value") for p in case.iter("property")}["engine"] == "toy 1"


def test_the_registry_lists_the_builtin_engines_and_names_the_unknown():
    assert engine_names()[:3] == ["transformers", "vllm", "openai"]
    assert get_engine("transformers").name == "transformers"
    from bias_core.errors import AuditUsageError

    with pytest.raises(AuditUsageError, match="unknown engine.*bias_core.engines"):
        get_engine("no-such-engine")


def test_an_engine_registered_in_process_is_choosable(tiny_model_dir, tmp_path):
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.models.engines import fake

    register(EngineEntry(name="fake-for-test", load=fake.load))
    lm = load_model(resolve_model(str(tiny_model_dir)), LoadOptions(engine="fake-for-test", cache_dir=tmp_path))
    assert isinstance(lm, CachedModel) and isinstance(lm.engine, FakeEngine) and lm.info().engine == "fake"


# ----- the one cache, around any engine -----------------------------------------------------------------
def test_the_cache_wraps_any_engine_keyed_by_its_identity(tmp_path):
    cache = ResultCache(tmp_path)
    a = CachedModel(FakeEngine(fingerprint="fake:a"), cache)
    first = a.sentence_logprob(["She is a nurse.", "He is a pilot."])
    again = a.sentence_logprob(["She is a nurse.", "He is a pilot."])
    assert first.tolist() == again.tolist() and len(a.engine.calls) == 1  # the second call was all hits
    b = CachedModel(FakeEngine(fingerprint="fake:b"), cache)  # another identity: nothing shared
    b.sentence_logprob(["She is a nurse."])
    assert len(b.engine.calls) == 1
    # each method is cached under its own operation: the same text is another request there
    a.loglikelihood([("She is", " a nurse.")])
    assert [m for m, _ in a.engine.calls] == ["sentence_logprob", "loglikelihood"]


def test_only_the_misses_reach_the_engine_in_one_call(tmp_path):
    lm = CachedModel(FakeEngine(), ResultCache(tmp_path))
    lm.word_probs(["a b", "c d"], ["she", "he"])
    lm.word_probs(["c d", "e f", "e f"], ["she", "he"])
    assert lm.engine.calls[-1] == ("word_probs", (["e f"], ["she", "he"]))  # the repeat asked once


def test_a_capability_the_engine_lacks_is_refused_before_the_cache(tmp_path):
    engine = FakeEngine(kind="causal", capabilities={"scoring"})
    lm = CachedModel(engine, ResultCache(tmp_path))
    for call, what in [(lambda: lm.embed(["x"]), "give sentence encodings"), (lambda: lm.generate(["x"]), "generate text"),
                       (lambda: lm.word_probs(["x"], ["y"]), "give next-word probabilities"),
                       (lambda: lm.training(), "fine-tune"), (lambda: lm.with_adapter("d", "t"), "apply a LoRA adapter")]:
        with pytest.raises(EngineCannot, match=f"fake engine cannot {what}.*--engine transformers"):
            call()
    assert engine.calls == [] and lm.cache_stats()["misses"] == 0


def test_a_masked_engine_fills_mid_sentence_slots_and_a_causal_one_end_slots():
    masked = CachedModel(FakeEngine(kind="masked"))
    assert masked.fill_probs(["The [MASK] is here."], ["he"]).shape == (1, 1)
    causal = CachedModel(FakeEngine(kind="causal", capabilities={"scoring"}))
    with pytest.raises(EngineCannot, match="next-word"):
        causal.fill_probs(["The person is a [MASK]"], ["he"])
    assert np.isfinite(CachedModel(FakeEngine()).fill_probs(["The person is a [MASK]"], ["he"])).all()


# ----- fine-tuning on an engine that only serves -----------------------------------------------------------
class ServedEngine(FakeEngine):
    """An engine that serves (as vLLM): it trains on a transformers copy and serves adapters itself."""

    def __init__(self, trainer, fingerprint=None):
        super().__init__(capabilities={"scoring", "next_word", "generation", "training", "adapters"},
                         fingerprint=fingerprint or trainer.fingerprint)
        self.trainer, self.tokenizer_fingerprint, self.served_adapters = trainer, trainer.tokenizer_fingerprint, []

    def info(self):
        from bias_core.models.protocol import EngineInfo

        return EngineInfo(engine="served", version="1", dtype="float32", device="cpu")

    def training_engine(self):
        return self.trainer

    def with_adapter(self, folder, tag):
        self.served_adapters.append(folder)
        return ServedEngine(self.trainer, fingerprint=f"{self.fingerprint}:{tag}")


def test_an_engine_that_serves_trains_on_a_copy_and_audits_the_adapter_through_its_own_lora(tiny_lm, tmp_path):
    from bias_core.mitigation.methods.debias_tuning import DebiasTuningConfig, train_debias_adapter
    from bias_core.mitigation.methods.sentence_debias import sentence_debiased
    from bias_core.mitigation.training.apply_adapter import with_adapter

    served = ServedEngine(tiny_lm.engine)
    lm = CachedModel(served, ResultCache(tmp_path / "results"))
    prompts = ["My friend is a nurse, and", "The person is a pilot, and", "My cousin is a dancer, and",
               "Our colleague is a teacher, and"]
    config = DebiasTuningConfig(r=4, alpha=8, lr=1e-2, batch_size=2, steps=2)
    folder = train_debias_adapter(lm, prompts, config, seed=0, cache_dir=tmp_path, progress=False,
                                  pairs=(("she", "he"),))
    variant = with_adapter(lm, folder)  # trained on the transformers copy, served by the engine itself
    assert served.served_adapters == [str(folder)] and variant.info().engine == "served"
    assert variant.fingerprint.startswith(lm.fingerprint + ":") and variant.fingerprint != lm.fingerprint
    # a hooked torch module cannot be served by it: refused, saying why (no mixed-engine comparison)
    with pytest.raises(EngineCannot, match="hooks such as SentenceDebias's cannot"):
        with sentence_debiased(lm, np.eye(1, 32)):
            pass
