"""Where models run: one GPU per pytest-xdist worker, --device-map, and the device and dtype a
run reports. The GPU queries are replaced by fakes, so this runs on any machine."""

from __future__ import annotations

import pytest
import torch

from bias_core.errors import AuditUsageError
from bias_core.models.loading import LoadOptions, check_options
from bias_core.models.placement.devices import describe, take_worker_gpu, worker_gpu


@pytest.mark.parametrize(("worker", "gpus", "expected"), [
    ("gw0", 4, 0), ("gw3", 4, 3), ("gw4", 4, 0), ("gw5", 4, 1), ("gw7", 2, 1), ("gw12", 1, 0),
    (None, 4, None), ("", 4, None), ("gw1", 0, None),
])
def test_each_worker_takes_its_own_gpu_round_robin(worker, gpus, expected):
    assert worker_gpu(worker, gpus) == expected


def test_a_worker_id_xdist_never_gives_is_an_error():
    with pytest.raises(ValueError, match="gw0"):
        worker_gpu("master", 2)


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two fake GPUs; records set_device."""
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: chosen[-1] if chosen else 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"Fake GPU {index}")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    return chosen


def test_workers_make_their_gpu_current(fake_gpus):
    assert take_worker_gpu("gw3", LoadOptions()) == 1
    assert fake_gpus == [1]
    assert describe(LoadOptions()) == {"device": "cuda:1 (Fake GPU 1)", "dtype": "float32"}
    assert describe(LoadOptions(precision="exact"))["dtype"] == "bfloat16, fp32 re-checks (--precision exact)"
    assert describe(LoadOptions(precision="half"))["dtype"] == "bfloat16 (--precision half)"


@pytest.mark.parametrize("opts", [LoadOptions(device="cpu"), LoadOptions(engine_options={"device_map": "auto"})])
def test_cpu_runs_and_device_maps_take_no_worker_gpu(fake_gpus, opts):
    assert take_worker_gpu("gw1", opts) is None and fake_gpus == []


def test_run_description_on_gpus(fake_gpus):
    assert describe(LoadOptions(), workers=2)["device"] == "cuda (2 GPUs, one per xdist worker)"
    assert describe(LoadOptions(engine_options={"device_map": "auto"}))["device"] == "cuda (2 GPUs, --device-map auto)"
    assert describe(LoadOptions(dtype="float32")) == {"device": "cuda:0 (Fake GPU 0)", "dtype": "float32"}
    assert describe(LoadOptions(engine_options={"load_in_4bit": True}))["dtype"] == "nf4 weights, bfloat16 compute"


def test_run_description_on_a_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert describe(LoadOptions()) == {"device": "cpu", "dtype": "float32"}
    assert describe(LoadOptions(dtype="bfloat16"), workers=4) == {"device": "cpu", "dtype": "bfloat16"}


def test_device_map_usage_errors():
    with pytest.raises(AuditUsageError, match="--device-map everywhere: choose one of auto"):
        check_options(LoadOptions(engine_options={"device_map": "everywhere"}))
    with pytest.raises(AuditUsageError, match="nothing with --device cpu"):
        check_options(LoadOptions(device="cpu", engine_options={"device_map": "auto"}))
    check_options(LoadOptions(engine_options={"device_map": "auto"}))
