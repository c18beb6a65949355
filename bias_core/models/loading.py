"""Turn a ModelSpec and the command-line options into a loaded model handle.

Causal LMs load as CausalLM; BERT/RoBERTa-family masked LMs and BART as MaskedLM. The kind is
read from the model's config.json (registry aliases also declare it up front).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from bias_core.cache import ResultCache
from bias_core.errors import AuditUsageError
from bias_core.models.causal import CausalLM
from bias_core.models.gguf_cache import converted_dir, file_sha256, locate_gguf
from bias_core.models.masked import MaskedLM
from bias_core.models.registry import ModelSpec, detect_kind

log = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
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
    adapter: str | None = None  # --adapter DIR: a PEFT adapter folder applied to the loaded model


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def check_options(opts: LoadOptions) -> None:
    """Usage errors that need no model: raised before anything loads."""
    if opts.device not in DEVICES:
        raise AuditUsageError(f"--device {opts.device}: choose one of {', '.join(DEVICES)}.")
    if opts.dtype not in DTYPES:
        raise AuditUsageError(f"--dtype {opts.dtype}: choose one of {', '.join(DTYPES)}.")
    if opts.batch_size is not None and opts.batch_size < 1:
        raise AuditUsageError(f"--batch-size {opts.batch_size}: must be a positive integer or 'auto'.")
    if opts.device == "cuda" and not cuda_available():
        raise AuditUsageError("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False). "
                              "Fix: use --device cpu or auto.")
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
        from bias_core.models.adapter import check_adapter_dir

        check_adapter_dir(opts.adapter)


def resolve_device(opts: LoadOptions) -> str:
    if opts.device == "auto":
        return "cuda" if cuda_available() else "cpu"
    return opts.device


def resolve_dtype(opts: LoadOptions, device: str):
    import torch

    if opts.dtype == "auto":
        # fp32 on CPU: bf16 moves log-likelihoods by nats and is slow without AMX.
        if device == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, opts.dtype)


def auto_batch_size(opts: LoadOptions, device: str, n_params: int) -> int:
    if opts.batch_size:
        return opts.batch_size
    if device == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info()
        # Rough: leave room for activations proportional to model size.
        return int(max(8, min(128, free // max(1, 8 * n_params))))
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
        digest.update(file_sha256(f, memo_dir).encode())
    return digest.hexdigest()


def tokenizer_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for name in _TOKENIZER_FILES:
        f = path / name
        if f.is_file():
            digest.update(name.encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


def _weights_dir(spec: ModelSpec, opts: LoadOptions) -> tuple[str, str]:
    """(what to pass to from_pretrained, model fingerprint)."""
    if spec.gguf_file:
        folder, sha = converted_dir(locate_gguf(spec, opts.cache_dir), opts.cache_dir, opts.progress)
        return str(folder), f"gguf:{sha}"
    if spec.local_dir:
        return spec.local_dir, f"dir:{dir_fingerprint(Path(spec.local_dir), opts.cache_dir)}"
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
            f"--model {spec.name}: could not fetch {spec.hub_id} from the Hugging Face hub ({type(exc).__name__}: "
            f"{str(exc)[:200]}). Fix: check the id and your network/HF token (gated models need "
            "`huggingface-cli login`), or use an offline model such as smollm2-135m or a local directory."
        ) from exc
    # The snapshot folder name is the hub commit: it pins the weights exactly.
    return folder, f"hub:{spec.hub_id}@{Path(folder).name}"


def _model_class(kind: str):
    import transformers

    # AutoModelForSeq2SeqLM maps BART to BartForConditionalGeneration, whose head fills masks.
    return {"causal": transformers.AutoModelForCausalLM, "masked": transformers.AutoModelForMaskedLM,
            "seq2seq": transformers.AutoModelForSeq2SeqLM}[kind]


def load_model(spec: ModelSpec, opts: LoadOptions) -> CausalLM | MaskedLM:
    check_options(opts)
    import torch
    from transformers import AutoTokenizer

    device = resolve_device(opts)
    dtype = resolve_dtype(opts, device)
    source, fingerprint = _weights_dir(spec, opts)
    kind = detect_kind(source, default=spec.kind)
    kwargs = {"dtype": dtype, "trust_remote_code": opts.trust_remote_code}
    if opts.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": 0}
        fingerprint += ":nf4"
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=opts.trust_remote_code)
    model = _model_class(kind).from_pretrained(source, **kwargs)
    if not opts.load_in_4bit:
        model.to(device)
    torch.manual_seed(0)
    n_params = sum(p.numel() for p in model.parameters())
    common = dict(
        model=model,
        tokenizer=tokenizer,
        name=spec.name,
        fingerprint=fingerprint,
        tokenizer_fingerprint=tokenizer_fingerprint(Path(source)),
        batch_size=auto_batch_size(opts, device, n_params),
        cache=ResultCache(opts.cache_dir, enabled=opts.use_cache),
        progress=opts.progress,
    )
    lm = CausalLM(**common) if kind == "causal" else MaskedLM(kind=kind, **common)
    if opts.adapter is not None:
        from bias_core.models.adapter import apply_adapter

        lm = apply_adapter(lm, opts.adapter, in_place=True)
    return lm
