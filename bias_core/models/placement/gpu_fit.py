"""Will the weights fit on the GPU? Said before loading, not as a CUDA out-of-memory traceback.

``--precision exact`` (auto's choice on CUDA) and ``half`` load the model in fp32 and add a half-precision
copy of its linear layers: about 6 bytes per parameter, so a 13B model needs ~78 GB before any
activation, more than an 80 GB card leaves free. The parameter count comes from the
safetensors headers (no tensor is read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.engines.hf.options import DEVICE_MAP, FOUR_BIT

GB = 1e9
# Share of free memory the weights may take: the rest is for activations and the KV cache.
WEIGHTS_SHARE = 0.9
BYTES_PER_PARAMETER = {"fp32": 4.0, "exact": 6.0, "half": 6.0}


def parameter_count(folder: Path) -> int | None:
    """Parameters stored in ``folder``'s safetensors files, from their headers; None without any."""
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with safe_open(str(f), framework="pt") as handle:
            for name in handle.keys():
                n = 1
                for dim in handle.get_slice(name).get_shape():
                    n *= int(dim)
                total += n
    return total


def check_gpu_fit(folder: Path, opts: Any, device: str, model_name: str) -> None:
    """A usage error when the model's weights, as this run would hold them, exceed the GPU's free
    memory. Runs that choose their own placement or dtype (4-bit, --dtype, --device-map) are
    not second-guessed."""
    if device != "cuda" or FOUR_BIT.of(opts) or opts.dtype != "auto" or DEVICE_MAP.of(opts):
        return
    n = parameter_count(folder)
    if n is None:
        return
    import torch

    free, _ = torch.cuda.mem_get_info(torch.cuda.current_device())
    need = n * BYTES_PER_PARAMETER.get(opts.precision, 4.0)
    if need <= WEIGHTS_SHARE * free:
        return
    held = ("fp32 weights plus a bf16 copy of the linear layers, ~6 bytes per parameter"
            if opts.precision in ("exact", "half") else "fp32 weights, 4 bytes per parameter")
    raise AuditUsageError(
        f"--model {model_name}: {n / 1e9:.1f}B parameters need ~{need / GB:.0f} GB on the GPU under --precision "
        f"{opts.precision} ({held}), but {free / GB:.0f} GB are free. Fix: --dtype bfloat16 (2 bytes per "
        "parameter, values as bf16 computes them, no fp32 re-checks), --load-in-4bit, or --device-map auto to "
        "spread it over several GPUs.")
