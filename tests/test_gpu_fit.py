"""The GPU memory check before loading: the parameter count from safetensors headers, and the
usage error when the weights as the run would hold them exceed the free memory (fake GPU)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from bias_core.errors import AuditUsageError
from bias_core.models import LoadOptions
from bias_core.models.placement.gpu_fit import check_gpu_fit, parameter_count


@pytest.fixture
def folder(tmp_path):
    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, tmp_path / "model-1.safetensors")
    save_file({"c": torch.zeros(2, 2, 2, dtype=torch.bfloat16)}, tmp_path / "model-2.safetensors")
    return tmp_path


def test_parameter_count_reads_every_shard_header(folder, tmp_path_factory):
    assert parameter_count(folder) == 12 + 5 + 8
    assert parameter_count(tmp_path_factory.mktemp("empty")) is None


@pytest.fixture
def free_bytes(monkeypatch):
    free = {"bytes": 0}
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 80 * 10**9))
    return free


def test_exact_needs_six_bytes_per_parameter_on_the_gpu(folder, free_bytes):
    free_bytes["bytes"] = 167  # 25 parameters x 6 bytes = 150 <= 0.9 x 167
    check_gpu_fit(folder, LoadOptions(precision="exact"), "cuda", "m")
    free_bytes["bytes"] -= 2
    with pytest.raises(AuditUsageError, match=r"--model m: .*--precision exact \(fp32 weights plus a bf16 copy.*"
                                               r"Fix: --dtype bfloat16"):
        check_gpu_fit(folder, LoadOptions(precision="exact"), "cuda", "m")
    check_gpu_fit(folder, LoadOptions(precision="fp32"), "cuda", "m")  # 100 bytes fit


@pytest.mark.parametrize("opts", [LoadOptions(precision="exact", dtype="bfloat16"),
                                  LoadOptions(precision="exact", engine_options={"load_in_4bit": True}),
                                  LoadOptions(precision="exact", engine_options={"device_map": "auto"})])
def test_runs_that_choose_their_own_dtype_or_placement_are_not_checked(folder, free_bytes, opts):
    check_gpu_fit(folder, opts, "cuda", "m")
    check_gpu_fit(folder, LoadOptions(precision="exact"), "cpu", "m")
