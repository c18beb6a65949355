"""``--mitigation-sweep paper``: Table 11's grids, Table 12's strengths and schedule per model
kind, five seeds averaged, full fine-tuning, and the CPU refusal. (The real CUDA schedule, 8
epochs over GAP per point and seed, cannot run here; these tests run its parts on tiny models.)"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest
import torch

from bias_core.errors import AuditUsageError
from bias_core.metrics import MetricResult
from bias_core.mitigation.evaluation.strength_sweep import average_over_seeds, check_paper_schedule, run_sweep
from bias_core.mitigation.evaluation.tradeoff_curves import (
    KNOWLEDGE,
    PAPER_GRID,
    QUICK_GRID,
    csv_rows,
    figure_svg,
    parse_grid,
    sweep_schedule,
)
from bias_core.mitigation.methods import paper_settings as ps
from bias_core.mitigation.methods.corpus_tuning import CorpusTuningConfig, cds_job, er_job, fully_tuned, train_cds_adapter
from bias_core.mitigation.training.corpus import DebiasCorpus
from bias_core.mitigation.training.lora import LoraTrainConfig

TINY_CORPUS = DebiasCorpus(
    "tiny test corpus", ("He is a nurse.", "He said his job is hard.", "The man read a book.", "My friend is a doctor.",
                         "He is a teacher.", "The father and the boy."), "written in the test", True, "Apache-2.0")
QUICK = CorpusTuningConfig(r=4, alpha=8, dropout=0.0, lr=2e-2, batch_size=4, steps=1, max_length=32)


def _checksum(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


# ----- Tables 11 and 12, as the paper prints them ---------------------------------------------------
def test_the_paper_grid_is_table_11_with_every_table_12_strength():
    # Table 11 as printed, plus Table 12's CDS 1.0 (BERT, BART), ER 1.25 and SD 0.07 (BART)
    assert PAPER_GRID == {"cds": (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0),
                          "er": (0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0),
                          "sentence-debias": (0.01, 0.05, 0.07, 0.1, 0.15, 0.2, 0.4, 0.6, 1.0)}
    assert parse_grid("paper") == PAPER_GRID
    for column in ps.TABLE12.values():  # Tables 7 and 8 find their point whatever the model's kind
        for method, strength in column.strengths().items():
            assert strength in PAPER_GRID[method]
    for method, points in QUICK_GRID.items():  # the quick sweep stays a subset of Table 11's points
        assert set(points) <= set(PAPER_GRID[method])


@pytest.mark.parametrize(("kind", "n", "column", "strengths", "batch", "lr"), [
    ("causal", 124_000_000, "gpt2", {"cds": 0.9, "er": 0.5, "sentence-debias": 1.0}, 8, 5e-5),
    ("causal", 355_000_000, "gpt2-medium", {"cds": 0.9, "er": 1.0, "sentence-debias": 1.0}, 2, 5e-5),
    ("masked", 110_000_000, "bert-base", {"cds": 1.0, "er": 0.5, "sentence-debias": 0.05}, 8, 2e-5),
    ("masked", 336_000_000, "bert-large", {"cds": 1.0, "er": 0.5, "sentence-debias": 0.05}, 2, 2e-5),
    ("seq2seq", 140_000_000, "bart-base", {"cds": 1.0, "er": 1.25, "sentence-debias": 0.07}, 8, 2e-5),
    ("seq2seq", 406_000_000, "bart-large", {"cds": 1.0, "er": 1.25, "sentence-debias": 0.07}, 2, 2e-5),
])
def test_table_12_column_per_model_kind_and_size(kind, n, column, strengths, batch, lr):
    assert ps.table12_column(kind, n) == column
    assert ps.TABLE12[column].strengths() == strengths
    config = CorpusTuningConfig.paper(column)
    assert (config.batch_size, config.lr, config.epochs, config.steps) == (batch, lr, 8, 0)
    assert config.full_finetune and config.max_grad_norm == 1.0 and config.max_length == 128
    assert (config.lr_scheduler, config.warmup_steps) == ("linear", 100)


def test_a_model_kind_without_a_column_is_a_usage_error():
    with pytest.raises(AuditUsageError, match="no column for a embedding model"):
        ps.table12_column("embedding", 1)


def test_single_variants_take_the_strength_of_their_kind(tiny_lm, tmp_path, torch_single_thread):
    from bias_core.models import LoadOptions, load_model, resolve_model

    import tiny_model

    assert ps.paper_strengths(tiny_lm) == {"cds": 0.9, "er": 0.5, "sentence-debias": 1.0}  # causal: GPT2's
    for builder, expected in (("build_tiny_masked_lm", 0.05), ("build_tiny_bart", 0.07)):
        folder = getattr(tiny_model, builder)(tmp_path / builder)
        lm = load_model(resolve_model(str(folder)), LoadOptions(cache_dir=tmp_path / "c", use_cache=False, progress=False))
        assert ps.paper_strengths(lm)["sentence-debias"] == expected


def test_five_seeds_from_the_run_seed():
    assert ps.paper_seeds(0) == (0, 1, 2, 3, 4) and ps.paper_seeds(7) == (7, 8, 9, 10, 11)


def test_adapter_keys_stay_as_they_were_and_a_full_tuning_has_no_lora_fields():
    lora_fields = set(dataclasses.asdict(LoraTrainConfig())) | {"mlm_probability"}
    assert set(CorpusTuningConfig.cpu_quick().hyperparameters()) == lora_fields
    assert set(CorpusTuningConfig.cuda_lora().hyperparameters()) == lora_fields
    full = CorpusTuningConfig.paper("gpt2").hyperparameters()
    assert full["full_finetune"] is True and full["max_grad_norm"] == 1.0
    assert not {"r", "alpha", "dropout", "target_modules", "load_in_4bit"} & set(full)


def test_schedule_and_grid_of_each_sweep_value():
    assert sweep_schedule("paper") == "paper" and sweep_schedule("paper:cds=0.9") == "paper"
    assert sweep_schedule("quick") == "quick" and sweep_schedule("cds=0.9") == "quick" and sweep_schedule(None) == "quick"
    assert parse_grid("paper:cds=0.9;er=0.5,1") == {"cds": (0.9,), "er": (0.5, 1.0)}
    with pytest.raises(AuditUsageError, match="paper:cds=2: .*cds strength 2.0 is out of range"):
        parse_grid("paper:cds=2")


# ----- full fine-tuning ------------------------------------------------------------------------------
def test_full_fine_tuning_trains_every_parameter_of_a_copy(tiny_lm, monkeypatch):
    clipped = []
    real_clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, norm: clipped.append(norm) or real_clip(params, norm))
    base = tiny_lm.engine.model
    before = _checksum(base)
    flags = {n: p.requires_grad for n, p in base.named_parameters()}
    # the paper's configuration, two steps without the warm-up (whose first step has lr 0)
    config = dataclasses.replace(CorpusTuningConfig.paper("gpt2"), steps=2, epochs=0, batch_size=2, warmup_steps=0,
                                 max_length=32)
    for job in (cds_job(tiny_lm, TINY_CORPUS, 0.9, config, 0), er_job(tiny_lm, TINY_CORPUS, 0.5, config, 0)):
        handle, info = fully_tuned(tiny_lm, job, config, 0, progress=False)
        tuned = handle.engine.model
        assert tuned is not base and ":full:" in handle.fingerprint and handle.fingerprint != tiny_lm.fingerprint
        old = dict(base.named_parameters())
        unchanged = [n for n, p in tuned.named_parameters() if torch.equal(p, old[n])]
        assert unchanged == [], f"full fine-tuning left {unchanged} as they were"
        assert all(p.dtype == old[n].dtype and not p.requires_grad for n, p in tuned.named_parameters())
        assert info["steps"] == 2 and info["parameters"] == sum(p.numel() for p in base.parameters())
    assert clipped == [1.0] * 4  # every step clipped at the paper code's norm
    assert _checksum(base) == before and {n: p.requires_grad for n, p in base.named_parameters()} == flags


def test_lora_and_full_configurations_are_not_mixed_up(tiny_lm, tmp_path, monkeypatch):
    full = CorpusTuningConfig.paper("gpt2")
    with pytest.raises(AuditUsageError, match="trains no adapter"):
        train_cds_adapter(tiny_lm, TINY_CORPUS, 0.9, full, 0, tmp_path, progress=False)
    with pytest.raises(AuditUsageError, match="needs a full fine-tuning configuration"):
        fully_tuned(tiny_lm, cds_job(tiny_lm, TINY_CORPUS, 0.9, QUICK, 0), QUICK, 0, progress=False)
    calls = []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a: calls.append(a))
    train_cds_adapter(tiny_lm, TINY_CORPUS, 0.9, QUICK, 0, tmp_path, progress=False)
    assert calls == []  # the LoRA configurations do not clip (their adapters' keys are unchanged)


def test_the_paper_schedule_refuses_the_cpu_and_takes_a_gpu(tiny_lm, device):
    if device == "cuda":
        check_paper_schedule(tiny_lm)  # a model on a GPU: the paper's schedule runs
        return
    with pytest.raises(AuditUsageError) as info:
        check_paper_schedule(tiny_lm)
    assert "needs a CUDA GPU; this model runs on cpu" in str(info.value)
    assert "Fix: use --mitigation-sweep quick (the CPU quick sweep" in str(info.value)


def test_the_paper_schedule_is_refused_on_the_cpu_when_the_options_are_read(monkeypatch):
    from bias_core.models import LoadOptions
    from bias_core.pytest_plugin import options

    with pytest.raises(AuditUsageError, match=r"--mitigation-sweep paper: .*needs a CUDA GPU.*--mitigation-sweep quick"):
        options._sweep_schedule("paper", LoadOptions(device="cpu"))
    monkeypatch.setattr(options, "_cuda_available", lambda: False)
    with pytest.raises(AuditUsageError, match="paper:cds=0.9: the paper's schedule"):
        options._sweep_schedule("paper:cds=0.9", LoadOptions(device="auto"))
    assert options._sweep_schedule("quick", LoadOptions(device="cpu")) == "quick"
    monkeypatch.setattr(options, "_cuda_available", lambda: True)
    assert options._sweep_schedule("paper", LoadOptions(device="auto")) == "paper"


# ----- five seeds averaged -----------------------------------------------------------------------------
def _result(metric, value, half=0.1):
    return MetricResult(metric=metric, value=value, ci_low=value - half, ci_high=value + half, n=10)


def test_a_point_is_the_mean_over_its_seeds_with_their_spread(tiny_lm, tmp_path):
    # what each measurement returns, in call order: the base model, cds@0.9 at seeds 5, 6, 7, then SD once
    da = iter([0.9, 0.8, 0.6, 0.7, 0.5])
    seat = iter([1.2, 0.4, -0.2, 0.7, 0.3])
    fingerprints, on_point = [], {}

    def measure(handle, base):
        fingerprints.append(handle.fingerprint)
        results = {"DA_score": _result("DA_score", next(da)), "SEAT-v1": _result("SEAT_effect", next(seat), 0.2)}
        guards = {} if base is None else {
            "DA_score_drop": _result("DA_score_drop", base["DA_score"].value - results["DA_score"].value),
            "lm_score_drop": ValueError("StereoSet missing") if len(fingerprints) == 3 else 1.0}
        return results, guards

    points = run_sweep(tiny_lm, {"cds": (0.9,), "sentence-debias": (1.0,)}, measure, corpus=TINY_CORPUS,
                       cache_dir=tmp_path, config=QUICK, progress=False, seeds=(5, 6, 7),
                       on_point=lambda name, results, guards: on_point.setdefault(name, (results, guards)))
    assert len(fingerprints) == 5 and len(set(fingerprints[1:4])) == 3  # one model per seed, SD once
    base, cds, sd = points
    assert cds.variant == "cds@0.9" and cds.info["seeds"] == [5, 6, 7]
    assert cds.knowledge_lost.value == pytest.approx(1 - (0.8 + 0.6 + 0.7) / 3)
    assert cds.bias["SEAT-v1"].value == pytest.approx(abs((0.4 - 0.2 + 0.7) / 3))  # the distance of the mean
    assert cds.bias["SEAT-v1"].ci_high == pytest.approx(0.3 + 0.2)  # the mean CI's far end from 0
    assert cds.spread["SEAT-v1"] == pytest.approx((0.4, 0.2, 0.7))  # each seed's distance from 0
    assert cds.values["SEAT-v1"] == pytest.approx(0.3)  # signed: the mean of 0.4, -0.2, 0.7 (DA-Gender's Table 7)
    assert cds.spread[KNOWLEDGE] == pytest.approx((0.2, 0.4, 0.3))
    drop = on_point["cds@0.9"][1]["DA_score_drop"]  # the gated guard: the mean over the seeds
    assert drop.value == pytest.approx(0.9 - 0.7) and drop.breakdown["per_seed"] == pytest.approx([0.1, 0.3, 0.2])
    assert drop.breakdown["seed_sd"] == pytest.approx(0.1)  # sd of 0.1, 0.3, 0.2 (n - 1)
    assert isinstance(on_point["cds@0.9"][1]["lm_score_drop"], ValueError)  # failed in one seed: not averaged
    assert "lm_score_drop" not in cds.guards and cds.guards["DA_score_drop"] == pytest.approx(0.2)
    assert sd.spread == {} and sd.knowledge_lost.value == pytest.approx(0.5) and "seeds" not in sd.info
    row = {r["variant"]: r for r in csv_rows(points)}["cds@0.9"]
    assert row["seeds"] == 3 and row["SEAT-v1_seed_min"] == pytest.approx(0.2) and row["SEAT-v1_seed_max"] == 0.7
    assert row["SEAT-v1_value"] == pytest.approx(0.3) and row["SEAT-v1_bias"] == pytest.approx(0.3)
    assert row["SEAT-v1_seed_sd"] == pytest.approx(math.sqrt(((0.4 - 13 / 30) ** 2 + (0.2 - 13 / 30) ** 2
                                                             + (0.7 - 13 / 30) ** 2) / 2))
    assert "<svg" in figure_svg(points, "SEAT-v1")


def test_averaging_floats_and_a_single_run():
    runs = [{"x": 1.0, "y": _result("m", 2.0)}, {"x": 3.0, "y": _result("m", 4.0)}]
    out = average_over_seeds(runs)
    assert out["x"] == 2.0 and out["y"].value == 3.0 and (out["y"].ci_low, out["y"].ci_high) == pytest.approx((2.9, 3.1))
    assert average_over_seeds(runs[:1]) == runs[0]
    missing = average_over_seeds([{"x": 1.0}, {}])
    assert isinstance(missing["x"], KeyError)
    assert np.isclose(average_over_seeds([{"x": 0.1}, {"x": 0.2}, {"x": 0.6}])["x"], 0.3)
