"""Where a model runs and in what precision: the GPU each pytest-xdist worker takes, and the
device and dtype shown in the run header, JUnit and the run's results.json."""

from __future__ import annotations

import re
from typing import Any

from bias_core.models.engines.hf.options import DEVICE_MAP, FOUR_BIT


def worker_gpu(worker_id: str | None, n_gpus: int) -> int | None:
    """The GPU a pytest-xdist worker takes: ``gw0`` the first, ``gw1`` the second, and so on,
    round robin when there are more workers than GPUs. None outside xdist or without a GPU."""
    if not worker_id or n_gpus < 1:
        return None
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if match is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r} (expected gw0, gw1, ...)")
    return int(match.group(1)) % n_gpus


def take_worker_gpu(worker_id: str | None, opts: Any) -> int | None:
    """Make this worker's GPU the current one (``-n <number of GPUs>``: one model per GPU).
    Nothing for CPU runs, or with ``--device-map``, where one model spans the GPUs."""
    if opts.device == "cpu" or DEVICE_MAP.of(opts):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    index = worker_gpu(worker_id, torch.cuda.device_count())
    if index is not None:
        torch.cuda.set_device(index)
    return index


def describe(opts: Any, workers: int = 0) -> dict[str, str]:
    """{"device": ..., "dtype": ...} a run with these LoadOptions uses, resolved ("auto" never
    shows): e.g. "cuda:0 (NVIDIA H100 80GB HBM3)" and "bfloat16", or "cpu" and "float32".
    Another engine than transformers says what it knows before loading (engine, dtype, URL)."""
    from bias_core.models.engines.transformers import resolve_dtype
    from bias_core.models.loading import resolve_device
    from bias_core.models.precision.modes import effective_precision

    if getattr(opts, "engine", "transformers") != "transformers":
        from bias_core.models.engines import get_engine
        from bias_core.models.engines.options import with_engine_options

        describe_opts = getattr(get_engine(opts.engine), "describe", None)
        return describe_opts(with_engine_options(opts)) if describe_opts else {"engine": opts.engine}

    device = resolve_device(opts)
    dtype = str(resolve_dtype(opts, device)).removeprefix("torch.")
    if FOUR_BIT.of(opts):
        dtype = f"nf4 weights, {dtype} compute"
    elif opts.dtype == "auto" and effective_precision(getattr(opts, "precision", "fp32"), device) != "fp32":
        from bias_core.models.precision.half import half_dtype

        half, _ = half_dtype(device)
        if half is not None:
            dtype = _with_precision(str(half).removeprefix("torch."), effective_precision(opts.precision, device))
    if device == "cuda":
        import torch

        count = torch.cuda.device_count()
        if DEVICE_MAP.of(opts):
            device = f"cuda ({count} GPU{'s' if count > 1 else ''}, --device-map {DEVICE_MAP.of(opts)})"
        elif workers > 1 and count > 1:
            device = f"cuda ({min(workers, count)} GPUs, one per xdist worker)"
        else:
            index = torch.cuda.current_device()
            device = f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return {"device": device, "dtype": dtype}


def of_model(lm: Any) -> dict[str, str]:
    """{"device": ..., "dtype": ...} of a loaded model handle, and its engine when that is not
    the reference (transformers): name and version, and any parallelism."""
    info = lm.info()
    mode = getattr(lm, "precision", None)
    dtype = _with_precision(info.dtype, mode) if mode in ("exact", "half") else info.dtype
    out = {"device": info.device, "dtype": dtype}
    if info.engine != "transformers":
        out["engine"] = f"{info.engine} {info.version}".strip()
        out.update({k: str(v) for k, v in info.parallelism.items()})
    return out


def _with_precision(half: str, mode: str) -> str:
    """How a run's dtype reads under --precision: exact computes in ``half`` and decides in fp32."""
    return f"{half}, fp32 re-checks (--precision exact)" if mode == "exact" else f"{half} (--precision half)"
