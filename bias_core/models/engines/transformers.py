"""The reference engine: Hugging Face transformers in this process (``--engine transformers``).

Its loading is here: a causal LM becomes a ``CausalLM``, a BERT/RoBERTa-family masked LM or
BART a ``MaskedLM`` (the handles are in engines/hf/), the kind read from the model's
config.json (registry aliases also declare it up front). It honours what the other engines
refuse: ``--precision`` (applied to the cached handle by ``wrap``), ``--adapter`` merged into
the weights, ``--device-map`` and 4-bit loading (``check`` refuses what cannot run here). Its
own options, ``--load-in-4bit`` and ``--device-map``, are declared in engines/hf/options.py
(the placement modules read them too); ``--precision`` and ``--dtype`` are the run's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.cached import CachedModel
from bias_core.models.engines import EngineEntry
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.engines.hf.masked import MaskedLM
from bias_core.models.engines.hf.options import DEVICE_MAP, DEVICE_MAPS, FOUR_BIT, OPTIONS
from bias_core.models.loading import (
    LoadOptions,
    _weights_dir,
    cuda_available,
    precision_conflict,
    resolve_device,
    restore_fix,
    tokenizer_fingerprint,
    unreadable_weights,
    where_named,
)
from bias_core.models.placement.gpu_fit import check_gpu_fit
from bias_core.models.precision.modes import apply_precision, effective_precision
from bias_core.models.registry import ModelSpec, detect_kind
from bias_core.models.weights.load_report import check_loading_info


def check(opts: LoadOptions) -> None:
    """``--device-map`` and ``--load-in-4bit``, before anything loads."""
    device_map = DEVICE_MAP.of(opts)
    if device_map is not None:
        if device_map not in DEVICE_MAPS:
            raise AuditUsageError(f"--device-map {device_map}: choose one of {', '.join(DEVICE_MAPS)}.")
        if opts.device == "cpu":
            raise AuditUsageError("--device-map spreads a model over GPUs; it means nothing with --device cpu. "
                                  "Fix: drop one of the two.")
    if FOUR_BIT.of(opts):
        if not cuda_available() or opts.device == "cpu":
            raise AuditUsageError(
                "--load-in-4bit needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on this CPU-only "
                "machine. Fix: drop --load-in-4bit (full precision on CPU), or run on a CUDA machine."
            )
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as exc:
            raise AuditUsageError("--load-in-4bit needs bitsandbytes. Fix: pip install bitsandbytes.") from exc
        if opts.precision in ("exact", "half"):
            raise precision_conflict(opts.precision, "--load-in-4bit")


def resolve_dtype(opts: LoadOptions, device: str):
    import torch

    if opts.dtype == "auto":
        if FOUR_BIT.of(opts) and device == "cuda":  # NF4 weights: the rest (and the compute) in half
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        # --precision decides: the model loads in fp32, and exact/half build their half copy from it.
        return torch.float32
    return getattr(torch, opts.dtype)


def auto_batch_size(opts: LoadOptions, device: str) -> int:
    if opts.batch_size:
        return opts.batch_size
    if device == "cuda":
        # The most rows a pass may hold; a causal model's rows per width come from its memory
        # plan (models/placement/memory.py). Encoders of the masked-LM papers are small.
        from bias_core.models.placement.memory import MAX_ROWS

        return MAX_ROWS
    # Decoding on CPU is bound by reading all weights once per step: more rows per read pay
    # off (SmolLM2-135M here: 209 new tokens/s at 32 rows, 288 at 64, 329 at 128).
    return 128


def check_checkpoint_fills(spec: ModelSpec, source: str, opts: LoadOptions) -> tuple[str, ...]:
    """For an engine that reads the weights itself (vLLM): the transformers engine's refusal of a
    checkpoint that does not fill its model (models/weights/load_report.py), before that engine
    starts. transformers matches checkpoint to model on the meta device, so it applies its own key
    rules (tied weights, prefixes, ignored keys) without reading or allocating a weight."""
    kind = detect_kind(source, default=spec.kind)
    with unreadable_weights(spec, source, opts.option):
        model, info = model_class(kind).from_pretrained(source, device_map="meta", output_loading_info=True,
                                                         ignore_mismatched_sizes=True,
                                                         trust_remote_code=opts.trust_remote_code)
    return check_loading_info(info, model, where_named(spec, source, opts.option), fix=restore_fix(spec, source))


def model_class(kind: str):
    import transformers

    # AutoModelForSeq2SeqLM maps BART to BartForConditionalGeneration, whose head fills masks.
    return {"causal": transformers.AutoModelForCausalLM, "masked": transformers.AutoModelForMaskedLM,
            "seq2seq": transformers.AutoModelForSeq2SeqLM}[kind]


def load(spec: ModelSpec, opts: LoadOptions) -> Any:
    """The transformers engine on ``spec``: a CausalLM or MaskedLM, with ``--adapter`` merged."""
    import torch
    from transformers import AutoTokenizer

    option = opts.option

    device = resolve_device(opts)
    dtype = resolve_dtype(opts, device)
    source, fingerprint, weights_sha256 = _weights_dir(spec, opts, option)
    kind = detect_kind(source, default=spec.kind)
    kwargs = {"dtype": dtype, "trust_remote_code": opts.trust_remote_code}
    if FOUR_BIT.of(opts):
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": torch.cuda.current_device()}  # this xdist worker's GPU
        fingerprint += ":nf4"
    if DEVICE_MAP.of(opts):
        kwargs["device_map"] = DEVICE_MAP.of(opts)
    check_gpu_fit(Path(source), dataclasses.replace(opts, precision=effective_precision(opts.precision, device)),
                  device, spec.name)
    with unreadable_weights(spec, source, option):
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=opts.trust_remote_code)
        # Mismatched shapes are loaded (as random values) to be named below, not raised as
        # transformers' "look at the above report" with the report logged out of sight.
        model, info = model_class(kind).from_pretrained(source, output_loading_info=True, ignore_mismatched_sizes=True,
                                                         **kwargs)
    load_notes = check_loading_info(info, model, where_named(spec, source, option), fix=restore_fix(spec, source))
    if "device_map" not in kwargs:
        model.to(device)
    torch.manual_seed(0)
    common = dict(
        model=model,
        tokenizer=tokenizer,
        name=spec.name,
        fingerprint=fingerprint,
        weights_sha256=weights_sha256,
        tokenizer_fingerprint=tokenizer_fingerprint(Path(source)),
        batch_size=auto_batch_size(opts, device),
        progress=opts.progress,
        load_notes=load_notes,
    )
    if kind == "causal":
        lm = CausalLM(**common, **_gpu_settings(opts, device, model))
    else:
        lm = MaskedLM(kind=kind, **common)
    if opts.adapter is not None:  # before precision: a half copy is made of the adapted weights
        from bias_core.models.weights.adapter import apply_adapter

        lm = apply_adapter(lm, opts.adapter, in_place=True)
    return lm


def wrap(handle: CachedModel, opts: LoadOptions) -> Any:
    """``--precision`` on the cached transformers handle (an explicit --dtype is taken as asked)."""
    four_bit = FOUR_BIT.of(opts)
    if opts.dtype != "auto" or four_bit:
        handle.precision = "4-bit NF4" if four_bit else opts.dtype  # as asked, unchecked
        return handle
    return apply_precision(handle, opts.precision, resolve_device(opts), opts.cache_dir if opts.use_cache else None)


def _gpu_settings(opts: LoadOptions, device: str, model) -> dict:
    """A causal model's GPU throughput settings: the memory plan (unless --batch-size fixes the
    rows) and when decoding drops finished rows. None on CPU: its batching stays as it was."""
    if device != "cuda":
        return {}
    from bias_core.models.placement.memory import GPU_COMPACT_FRACTION, gpu_plan

    return {"compact_fraction": GPU_COMPACT_FRACTION, "plan": None if opts.batch_size else gpu_plan(model)}


ENGINE = EngineEntry(name="transformers", load=load, check=check, wrap=wrap, options=OPTIONS,
                     summary="Hugging Face transformers in this process (the reference)")
