"""Turn a ModelSpec and the command-line options into a loaded model handle.

``load_model`` asks the run's engine (``--engine``, models/engines/) for an ``Engine`` and puts
the one result cache around it (cached.py). The transformers engine (the reference) loads here:
causal LMs as CausalLM, BERT/RoBERTa-family masked LMs and BART as MaskedLM. The kind is read
from the model's config.json (registry aliases also declare it up front).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.cached import CachedModel
from bias_core.models.engines.hf.causal import CausalLM
from bias_core.models.engines.hf.masked import MaskedLM
from bias_core.models.placement.gpu_fit import check_gpu_fit
from bias_core.models.precision.modes import apply_precision, check_precision, effective_precision
from bias_core.models.registry import ModelSpec, detect_kind
from bias_core.models.weights import integrity
from bias_core.models.weights.gguf_cache import converted_dir, file_sha256, locate_gguf, read_marker
from bias_core.models.weights.load_report import check_loading_info
from bias_core.storage.result_cache import ResultCache

log = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt",
                    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


@dataclass(frozen=True)
class LoadOptions:
    device: str = "auto"
    dtype: str = "auto"
    load_in_4bit: bool = False
    batch_size: int | None = None  # None: automatic
    cache_dir: Path = Path(".bias_cache")
    use_cache: bool = True
    progress: bool = True
    trust_remote_code: bool = False
    device_map: str | None = None  # accelerate's placement over several GPUs, e.g. "auto"
    # auto | exact | fp32 | half (models/precision/modes.py); applies with dtype "auto". The command
    # line's default is auto; the library's stays fp32, the reference its callers were written against.
    precision: str = "fp32"
    adapter: str | None = None  # --adapter DIR: a PEFT adapter folder applied to the loaded model
    # The engine (models/engines/) and its options; None: not given (each engine has its default).
    engine: str = "transformers"
    engine_url: str | None = None  # openai: the server's base URL
    api_key_env: str | None = None  # openai: the environment variable holding the API key
    served_model: str | None = None  # openai: the server's name of the model (default: the one it serves)
    tensor_parallel_size: int | None = None  # vllm
    pipeline_parallel_size: int | None = None  # vllm
    max_concurrency: int | None = None  # openai: requests in flight at once
    request_timeout: float | None = None  # openai: seconds per request
    max_response_mb: float | None = None  # openai: the largest answer read, in MiB
    # Adapters will be applied this run (--adapter, --baseline-adapter): an engine that must
    # prepare for them when it starts (vLLM's LoRA) does so.
    adapters_expected: bool = False
    # The command-line option that names this model (--model, --baseline): messages say it.
    option: str = "--model"


# LoadOptions field -> its command-line option, for messages about engine options.
ENGINE_OPTIONS = {"engine_url": "--engine-url", "api_key_env": "--api-key-env", "served_model": "--served-model",
                  "tensor_parallel_size": "--tensor-parallel-size", "pipeline_parallel_size": "--pipeline-parallel-size",
                  "max_concurrency": "--max-concurrency", "request_timeout": "--request-timeout",
                  "max_response_mb": "--max-response-mb"}


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def check_options(opts: LoadOptions) -> None:
    """Usage errors that need no model: raised before anything loads."""
    from bias_core.models.engines import get_engine

    entry = get_engine(opts.engine)
    given = [f for f in ENGINE_OPTIONS if getattr(opts, f) is not None and f not in entry.options]
    if given:
        names = ", ".join(ENGINE_OPTIONS[f] for f in given)
        raise AuditUsageError(f"{names}: not an option of --engine {opts.engine}. Fix: drop it, or choose the engine "
                              "it belongs to (docs/engines.md lists each engine's options).")
    for field in ("tensor_parallel_size", "pipeline_parallel_size", "max_concurrency"):
        value = getattr(opts, field)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise AuditUsageError(f"{ENGINE_OPTIONS[field]} {value}: must be a positive integer.")
    if opts.request_timeout is not None and not opts.request_timeout > 0:
        raise AuditUsageError(f"--request-timeout {opts.request_timeout}: must be a positive number of seconds.")
    if entry.check is not None:
        entry.check(opts)
    if opts.device not in DEVICES:
        raise AuditUsageError(f"--device {opts.device}: choose one of {', '.join(DEVICES)}.")
    if opts.dtype not in DTYPES:
        raise AuditUsageError(f"--dtype {opts.dtype}: choose one of {', '.join(DTYPES)}.")
    check_precision(opts.precision)
    if opts.precision in ("exact", "half") and (opts.dtype != "auto" or opts.load_in_4bit):
        raise AuditUsageError(
            f"--precision {opts.precision} with {'--load-in-4bit' if opts.load_in_4bit else '--dtype ' + opts.dtype}: "
            "the precision mode chooses the dtypes itself. Fix: drop one of the two options "
            "(--dtype/--load-in-4bit alone compute in that dtype, unchecked).")
    if opts.batch_size is not None and opts.batch_size < 1:
        raise AuditUsageError(f"--batch-size {opts.batch_size}: must be a positive integer or 'auto'.")
    if opts.device == "cuda" and not cuda_available():
        raise AuditUsageError("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False). "
                              "Fix: use --device cpu or auto.")
    if opts.device_map is not None:
        if opts.device_map not in DEVICE_MAPS:
            raise AuditUsageError(f"--device-map {opts.device_map}: choose one of {', '.join(DEVICE_MAPS)}.")
        if opts.device == "cpu":
            raise AuditUsageError("--device-map spreads a model over GPUs; it means nothing with --device cpu. "
                                  "Fix: drop one of the two.")
    if opts.load_in_4bit:
        if not cuda_available() or opts.device == "cpu":
            raise AuditUsageError(
                "--load-in-4bit needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on this CPU-only "
                "machine. Fix: drop --load-in-4bit (full precision on CPU), or run on a CUDA machine."
            )
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as exc:
            raise AuditUsageError("--load-in-4bit needs bitsandbytes. Fix: pip install bitsandbytes.") from exc
    if opts.adapter is not None:
        from bias_core.models.weights.adapter import check_adapter_dir

        check_adapter_dir(opts.adapter)


def resolve_device(opts: LoadOptions) -> str:
    if opts.device == "auto":
        return "cuda" if cuda_available() else "cpu"
    return opts.device


def resolve_dtype(opts: LoadOptions, device: str):
    import torch

    if opts.dtype == "auto":
        if opts.load_in_4bit and device == "cuda":  # NF4 weights: the rest (and the compute) in half
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


def dir_fingerprint(path: Path, memo_dir: Path) -> str:
    """Content hash of a model folder's config and weight files (each file hash memoised)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.iterdir() if p.is_file() and (
        p.suffix in (".safetensors", ".bin", ".json", ".model", ".txt", ".gguf") or p.name.endswith(".pt")))
    for f in files:
        digest.update(f.name.encode())
        digest.update(file_sha256(f, memo_dir, verify=True).encode())
    return digest.hexdigest()


def tokenizer_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for name in _TOKENIZER_FILES:
        f = path / name
        if f.is_file():
            digest.update(name.encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


def _weights_dir(spec: ModelSpec, opts: LoadOptions, option: str = "--model") -> tuple[str, str, str]:
    """(what to pass to from_pretrained, model fingerprint, hash of the verified weight files)."""
    if spec.gguf_file:
        folder, sha = converted_dir(locate_gguf(spec, opts.cache_dir), opts.cache_dir, opts.progress)
        return str(folder), f"gguf:{sha}", integrity.weights_digest((read_marker(folder) or {})["weights"])
    if spec.local_dir:
        folder = Path(spec.local_dir)
        fingerprint = f"dir:{dir_fingerprint(folder, opts.cache_dir)}"
        recorded = {p.name: {"sha256": file_sha256(p, opts.cache_dir, verify=True)} for p in integrity.weight_files(folder)}
        return spec.local_dir, fingerprint, integrity.weights_digest(recorded)
    assert spec.hub_id
    try:
        from huggingface_hub import snapshot_download

        # Configs and tokenizer files (tokenizer.json, vocab.txt, vocab.json, merges.txt,
        # *.model) and safetensors weights; pickled .bin weights only for repos without them.
        patterns = ["*.json", "*.safetensors", "*.model", "*.txt"]
        folder = snapshot_download(spec.hub_id, allow_patterns=patterns)
        if not list(Path(folder).glob("*.safetensors")):
            folder = snapshot_download(spec.hub_id, allow_patterns=patterns + ["pytorch_model*.bin"])
    except Exception as exc:  # offline, gated repo, typo: all end here
        raise AuditUsageError(
            f"{option} {spec.name}: could not fetch {spec.hub_id} from the Hugging Face hub ({type(exc).__name__}: "
            f"{str(exc)[:200]}). Fix: check the id and your network/HF token (gated models need "
            "`huggingface-cli login`), or use an offline model such as smollm2-135m or a local directory."
        ) from exc
    # The snapshot folder name is the hub commit: it pins the weights exactly. The hub's cache
    # stores large files as blobs named by their SHA-256, which stand for their hashes here.
    blobs = {p.name: {"sha256": Path(p).resolve().name} for p in integrity.weight_files(Path(folder))}
    return folder, f"hub:{spec.hub_id}@{Path(folder).name}", integrity.weights_digest(blobs)


def local_tokenizer(spec: ModelSpec, opts: LoadOptions) -> tuple[Any, Path, str, str]:
    """(tokenizer, folder, model fingerprint, tokenizer fingerprint) of ``spec`` for an engine that
    runs the model elsewhere (a server) but tokenizes here. A hub id fetches only its config and
    tokenizer files; a package or folder is read as the transformers engine reads it."""
    from transformers import AutoTokenizer

    if spec.hub_id and not spec.local_dir:
        try:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(spec.hub_id, allow_patterns=["*.json", "*.model", "*.txt"])
        except Exception as exc:  # offline, gated repo, typo
            raise AuditUsageError(f"--model {spec.name}: could not fetch the tokenizer of {spec.hub_id} from the "
                                  f"Hugging Face hub ({type(exc).__name__}). Fix: pass --model a local folder holding "
                                  "the served model's tokenizer files.") from exc
        source, fingerprint = Path(folder), f"hub:{spec.hub_id}@{Path(folder).name}"
    else:
        folder, fingerprint, _ = _weights_dir(spec, opts, opts.option)
        source = Path(folder)
    with _unreadable_weights(spec, str(source), opts.option):
        tokenizer = AutoTokenizer.from_pretrained(str(source), trust_remote_code=opts.trust_remote_code)
    return tokenizer, source, fingerprint, tokenizer_fingerprint(source)


@contextlib.contextmanager
def _unreadable_weights(spec: ModelSpec, source: str, option: str):
    """Files transformers cannot read (a truncated safetensors header, a garbled config) are a
    usage error naming the folder and the fix, not a traceback repeated by every test."""
    try:
        yield
    except AuditUsageError:
        raise
    except Exception as exc:  # SafetensorError, OSError, ValueError...: all mean "cannot read this folder"
        fix = _restore_fix(spec, source)
        raise AuditUsageError(
            f"{option} {spec.name}: transformers could not load {source} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:300] if str(exc) else ''}). Fix: {fix}.") from exc


def check_checkpoint_fills(spec: ModelSpec, source: str, opts: LoadOptions) -> tuple[str, ...]:
    """For an engine that reads the weights itself (vLLM): the transformers engine's refusal of a
    checkpoint that does not fill its model (models/weights/load_report.py), before that engine
    starts. transformers matches checkpoint to model on the meta device, so it applies its own key
    rules (tied weights, prefixes, ignored keys) without reading or allocating a weight."""
    kind = detect_kind(source, default=spec.kind)
    with _unreadable_weights(spec, source, opts.option):
        model, info = _model_class(kind).from_pretrained(source, device_map="meta", output_loading_info=True,
                                                         ignore_mismatched_sizes=True,
                                                         trust_remote_code=opts.trust_remote_code)
    return check_loading_info(info, model, _where(spec, source, opts.option), fix=_restore_fix(spec, source))


def _where(spec: ModelSpec, source: str, option: str) -> str:
    return f"{option} {spec.name}" + (f" ({source})" if source != spec.name else "")


def _restore_fix(spec: ModelSpec, source: str) -> str:
    if spec.gguf_file:
        return f"delete the converted folder {source} (it is rebuilt on the next run)"
    return f"re-save the model into {source} (save_pretrained), or restore its files from their source"


def _model_class(kind: str):
    import transformers

    # AutoModelForSeq2SeqLM maps BART to BartForConditionalGeneration, whose head fills masks.
    return {"causal": transformers.AutoModelForCausalLM, "masked": transformers.AutoModelForMaskedLM,
            "seq2seq": transformers.AutoModelForSeq2SeqLM}[kind]


def load_model(spec: ModelSpec, opts: LoadOptions, option: str = "--model") -> Any:
    """The model under audit through the run's engine, inside the result cache: a ``ScoringModel``
    (models/protocol.py). ``option`` (--model, --baseline) is the one messages name."""
    from bias_core.models.engines import get_engine

    opts = dataclasses.replace(opts, option=option)
    check_options(opts)
    entry = get_engine(opts.engine)
    handle = CachedModel(entry.load(spec, opts), ResultCache(opts.cache_dir, enabled=opts.use_cache))
    return entry.wrap(handle, opts) if entry.wrap is not None else handle


def load_transformers(spec: ModelSpec, opts: LoadOptions) -> Any:
    """The transformers engine on ``spec``: a CausalLM or MaskedLM, with ``--adapter`` merged."""
    import torch
    from transformers import AutoTokenizer

    option = opts.option

    device = resolve_device(opts)
    dtype = resolve_dtype(opts, device)
    source, fingerprint, weights_sha256 = _weights_dir(spec, opts, option)
    kind = detect_kind(source, default=spec.kind)
    kwargs = {"dtype": dtype, "trust_remote_code": opts.trust_remote_code}
    if opts.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": torch.cuda.current_device()}  # this xdist worker's GPU
        fingerprint += ":nf4"
    if opts.device_map:
        kwargs["device_map"] = opts.device_map
    check_gpu_fit(Path(source), dataclasses.replace(opts, precision=effective_precision(opts.precision, device)),
                  device, spec.name)
    with _unreadable_weights(spec, source, option):
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=opts.trust_remote_code)
        # Mismatched shapes are loaded (as random values) to be named below, not raised as
        # transformers' "look at the above report" with the report logged out of sight.
        model, info = _model_class(kind).from_pretrained(source, output_loading_info=True, ignore_mismatched_sizes=True,
                                                         **kwargs)
    load_notes = check_loading_info(info, model, _where(spec, source, option), fix=_restore_fix(spec, source))
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


def wrap_transformers(handle: CachedModel, opts: LoadOptions) -> Any:
    """``--precision`` on the cached transformers handle (an explicit --dtype is taken as asked)."""
    if opts.dtype != "auto" or opts.load_in_4bit:
        handle.precision = "4-bit NF4" if opts.load_in_4bit else opts.dtype  # as asked, unchecked
        return handle
    return apply_precision(handle, opts.precision, resolve_device(opts), opts.cache_dir if opts.use_cache else None)


def _gpu_settings(opts: LoadOptions, device: str, model) -> dict:
    """A causal model's GPU throughput settings: the memory plan (unless --batch-size fixes the
    rows) and when decoding drops finished rows. None on CPU: its batching stays as it was."""
    if device != "cuda":
        return {}
    from bias_core.models.placement.memory import GPU_COMPACT_FRACTION, gpu_plan

    return {"compact_fraction": GPU_COMPACT_FRACTION, "plan": None if opts.batch_size else gpu_plan(model)}
