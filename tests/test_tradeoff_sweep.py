"""CDS and ER training on tiny models of each kind, and a tiny end-to-end trade-off sweep."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
import torch

from bias_core.mitigation.evaluation.strength_sweep import run_sweep
from bias_core.mitigation.evaluation.tradeoff_curves import BASE, write_outputs
from bias_core.mitigation.methods.corpus_tuning import CorpusTuningConfig, train_cds_adapter, train_er_adapter
from bias_core.mitigation.methods.swap import GenderSwapper
from bias_core.mitigation.training.adapter_cache import AdapterCache
from bias_core.mitigation.training.apply_adapter import with_adapter
from bias_core.mitigation.training.corpus import DebiasCorpus
from bias_core.mitigation.training.objectives import encode, make_batch, sentence_representations

QUICK = CorpusTuningConfig(r=4, alpha=8, dropout=0.0, lr=2e-2, batch_size=4, steps=15, max_length=32)
TINY_CORPUS = DebiasCorpus(
    "tiny test corpus", ("He is a nurse.", "He said his job is hard.", "The man read a book.", "My friend is a doctor.",
                         "He is a teacher.", "The father and the boy."), "written in the test", True, "Apache-2.0")


def _checksum(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


def test_cds_teaches_the_swapped_sentences(tiny_lm, tmp_path):
    before = _checksum(tiny_lm.engine.model)
    folder = train_cds_adapter(tiny_lm, TINY_CORPUS, 1.0, QUICK, seed=0, cache_dir=tmp_path, progress=False)
    tuned = with_adapter(tiny_lm, folder)
    assert _checksum(tiny_lm.engine.model) == before
    swapped = ["She is a nurse.", "She said her job is hard."]
    gain = tuned.sentence_logprob(swapped) - tiny_lm.sentence_logprob(swapped)
    assert (gain > 0).all()
    key = json.loads((folder / "bias_core_adapter.json").read_text())["key"]
    assert key["method"] == "cds" and key["hyperparameters"]["swap_rate"] == 1.0
    # same inputs: the cache answers; another seed or rate: another adapter
    cache = AdapterCache(tmp_path)
    assert train_cds_adapter(tiny_lm, TINY_CORPUS, 1.0, QUICK, 0, tmp_path, progress=False) == folder
    assert train_cds_adapter(tiny_lm, TINY_CORPUS, 0.5, dataclasses.replace(QUICK, steps=1), 0, tmp_path,
                             progress=False) != folder
    assert cache.root.is_dir()


def test_cds_adapter_is_deterministic(tiny_lm, tmp_path):
    config = dataclasses.replace(QUICK, steps=3)
    a = train_cds_adapter(tiny_lm, TINY_CORPUS, 0.6, config, 1, tmp_path / "a", progress=False)
    b = train_cds_adapter(tiny_lm, TINY_CORPUS, 0.6, config, 1, tmp_path / "b", progress=False)
    assert (a / "adapter_model.safetensors").read_bytes() == (b / "adapter_model.safetensors").read_bytes()


def _pair_distance(lm, sentences):
    swapper = GenderSwapper()
    orig = make_batch(lm.training(), [encode(lm.training(), s, 32) for s in sentences], corrupt=False)
    swap = make_batch(lm.training(), [encode(lm.training(), swapper.swap(s)[0], 32) for s in sentences], corrupt=False)
    with torch.no_grad():
        a = sentence_representations(lm.engine.model, lm.kind, orig, lm.engine.device)
        b = sentence_representations(lm.engine.model, lm.kind, swap, lm.engine.device)
    return float((1 - torch.nn.functional.cosine_similarity(a, b)).mean())


def test_er_pulls_swapped_representations_together(tiny_lm, tmp_path):
    folder = train_er_adapter(tiny_lm, TINY_CORPUS, 20.0, QUICK, seed=0, cache_dir=tmp_path, progress=False)
    tuned = with_adapter(tiny_lm, folder)
    sentences = list(TINY_CORPUS.sentences)
    assert _pair_distance(tuned, sentences) < 0.5 * _pair_distance(tiny_lm, sentences)
    history = json.loads((folder / "training_log.json").read_text())["history"]
    assert history[-1]["distance"] < history[0]["distance"]


@pytest.mark.parametrize("builder", ["build_tiny_masked_lm", "build_tiny_bart"])
def test_cds_and_er_train_masked_and_bart(builder, tmp_path, torch_single_thread):
    from bias_core.models import LoadOptions, load_model, resolve_model

    import tiny_model

    folder = getattr(tiny_model, builder)(tmp_path / "model")
    lm = load_model(resolve_model(str(folder)), LoadOptions(cache_dir=tmp_path / "c", use_cache=False, progress=False))
    corpus = DebiasCorpus("t", ("the nurse said that she was tired .", "he is a good person .",
                                "the doctor said that he was tired ."), "test", True, "x")
    before = _checksum(lm.engine.model)
    config = dataclasses.replace(QUICK, steps=2, batch_size=2)
    for train, strength in ((train_cds_adapter, 1.0), (train_er_adapter, 1.0)):
        adapter = train(lm, corpus, strength, config, 0, tmp_path / "adapters", progress=False)
        tuned = with_adapter(lm, adapter)
        assert not np.allclose(tuned.sentence_logprob(["he is a good person ."]), lm.sentence_logprob(["he is a good person ."]))
        history = json.loads((adapter / "training_log.json").read_text())["history"]
        assert all(np.isfinite(h["loss"]) for h in history)
    assert _checksum(lm.engine.model) == before


def test_tiny_end_to_end_sweep(tiny_lm, tmp_path):
    from bias_core.probes import da_gender, kurita, seat
    from bias_core.runners.da_gender import run_da_score
    from bias_core.runners.kurita import run_logprob_effect
    from bias_core.runners.seat import run_seat_effect

    da = da_gender.load_da_gender()
    da = dataclasses.replace(da, items=da.items[:60])
    seat_v1 = seat.load_seat_v1("test")
    professions = kurita.load_logprob_professions("test")
    # two targets of each gender, every profession of both genders, so every target is scored
    keep = {"he", "this man", "she", "this woman"}
    items = tuple(i for i in professions.items if i.meta["target"] in keep and i.meta["template"] == "{targ} is a {attr}.")
    professions = dataclasses.replace(professions, items=items)
    measured = []

    def measure(handle, base):
        measured.append(handle.fingerprint)
        results = {"DA_score": run_da_score(handle, da), "SEAT-v1": run_seat_effect(handle, seat_v1),
                   "logprob_effect": run_logprob_effect(handle, professions)}
        guards = {} if base is None else {"DA_score_drop": base["DA_score"].value - results["DA_score"].value}
        return results, guards

    before = _checksum(tiny_lm.engine.model)
    grid = {"cds": (0.6, 0.95), "er": (0.2, 2.0), "sentence-debias": (0.01, 1.0)}
    config = dataclasses.replace(QUICK, steps=2)
    points = run_sweep(tiny_lm, grid, measure, corpus=TINY_CORPUS, cache_dir=tmp_path / "cache", config=config,
                       progress=False)
    assert [p.variant for p in points] == ["base", "cds@0.6", "cds@0.95", "er@0.2", "er@2", "sentence-debias@0.01",
                                           "sentence-debias@1"]
    assert len(set(measured)) == len(points)  # every variant is measured under its own fingerprint
    assert _checksum(tiny_lm.engine.model) == before and not tiny_lm.engine.model.base_model._forward_hooks
    for p in points[1:]:
        assert set(p.bias) == {"SEAT-v1", "logprob_effect"} and "DA_score_drop" in p.guards
        assert p.info["stand_in"] is True and p.info["corpus"] == "tiny test corpus"
    assert points[1].info["adapter"].startswith(str(tmp_path / "cache" / "adapters"))
    assert points[-1].info["sentence_pairs"] >= points[-2].info["sentence_pairs"]
    assert points[0].method == BASE
    paths = write_outputs(points, tmp_path / "run", {"DA_score_drop": 0.05}, note="tiny")
    assert set(paths) == {"csv", "SEAT-v1", "logprob_effect"}
    lines = paths["csv"].read_text().splitlines()
    assert len(lines) == 1 + len(points)


def test_lasting_variants(tiny_lm, tmp_path):
    from bias_core.mitigation.evaluation.strength_sweep import lasting_variant

    before = _checksum(tiny_lm.engine.model)
    config = dataclasses.replace(QUICK, steps=2)
    cds, info = lasting_variant(tiny_lm, "cds", corpus=TINY_CORPUS, cache_dir=tmp_path, config=config, progress=False)
    assert info["variant"] == "cds@0.9" and cds.engine.model is not tiny_lm.engine.model
    sd, info = lasting_variant(tiny_lm, "sentence-debias", 1.0, corpus=TINY_CORPUS, cache_dir=tmp_path)
    assert info["variant"] == "sentence-debias@1" and sd.engine.model.base_model._forward_hooks
    assert not np.allclose(sd.sentence_logprob(["He is a nurse."]), tiny_lm.sentence_logprob(["He is a nurse."]))
    assert _checksum(tiny_lm.engine.model) == before and not tiny_lm.engine.model.base_model._forward_hooks
