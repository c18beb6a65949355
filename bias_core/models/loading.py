"""Turn a ModelSpec and the command-line options into a loaded model handle, whatever the engine.

``load_model`` checks the options (``check_options``: before anything loads), asks the run's
engine (``--engine``, models/engines/) for an ``Engine`` and puts the one result cache around
it (cached.py). What every engine shares is here: the options (``LoadOptions``, with each
engine's own in ``engine_options``), where a model's files are (hub, local folder, GGUF
conversion) and their fingerprints, and the local tokenizer of an engine that runs the model
elsewhere. The transformers engine's loading is in models/engines/transformers.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from bias_core.errors import AuditUsageError
from bias_core.models.cached import CachedModel
from bias_core.models.engines import get_engine
from bias_core.models.engines.options import with_engine_options
from bias_core.models.precision.modes import check_precision
from bias_core.models.registry import ModelSpec
from bias_core.models.weights import integrity
from bias_core.models.weights.gguf_cache import converted_dir, file_sha256, locate_gguf, read_marker
from bias_core.storage.result_cache import ResultCache

log = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt",
                    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


@dataclass(frozen=True)
class LoadOptions:
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int | None = None  # None: automatic
    cache_dir: Path = Path(".bias_cache")
    use_cache: bool = True
    progress: bool = True
    trust_remote_code: bool = False
    # auto | exact | fp32 | half (models/precision/modes.py); applies with dtype "auto". The command
    # line's default is auto; the library's stays fp32, the reference its callers were written against.
    precision: str = "fp32"
    adapter: str | None = None  # --adapter DIR: a PEFT adapter folder applied to the loaded model
    # The engine (models/engines/) and its own options (each engine's ``EngineOption``s), by
    # ``EngineOption.key``: as given (the rest take their defaults when the options are checked).
    engine: str = "transformers"
    engine_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # Adapters will be applied this run (--adapter, --baseline-adapter): an engine that must
    # prepare for them when it starts (vLLM's LoRA) does so.
    adapters_expected: bool = False
    # The command-line option that names this model (--model, --baseline): messages say it.
    option: str = "--model"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def check_options(opts: LoadOptions) -> LoadOptions:
    """Usage errors that need no model, raised before anything loads: each option's own value
    (the engine's options typed and in range, another engine's refused; device, dtype,
    precision, batch size), then what the engine cannot honour (its ``check``), then the
    combinations. Returns ``opts`` with every option of its engine filled in."""
    entry = get_engine(opts.engine)
    opts = with_engine_options(opts)
    if opts.device not in DEVICES:
        raise AuditUsageError(f"--device {opts.device}: choose one of {', '.join(DEVICES)}.")
    if opts.dtype not in DTYPES:
        raise AuditUsageError(f"--dtype {opts.dtype}: choose one of {', '.join(DTYPES)}.")
    check_precision(opts.precision)
    if opts.batch_size is not None and opts.batch_size < 1:
        raise AuditUsageError(f"--batch-size {opts.batch_size}: must be a positive integer or 'auto'.")
    if opts.device == "cuda" and not cuda_available():
        raise AuditUsageError("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False). "
                              "Fix: use --device cpu or auto.")
    if entry.check is not None:  # what this engine cannot honour, before the combinations below
        entry.check(opts)
    if opts.precision in ("exact", "half") and opts.dtype != "auto":  # with --load-in-4bit: transformers' check
        raise precision_conflict(opts.precision, "--dtype " + opts.dtype)
    if opts.adapter is not None:
        from bias_core.models.weights.adapter import check_adapter_dir

        check_adapter_dir(opts.adapter)
    return opts


def precision_conflict(precision: str, chosen: str) -> AuditUsageError:
    """The refusal of ``--precision exact``/``half`` with an option that chose the dtype itself
    (``--dtype X``, or the transformers engine's ``--load-in-4bit``)."""
    return AuditUsageError(
        f"--precision {precision} with {chosen}: the precision mode chooses the dtypes itself. Fix: drop one of the "
        "two options (--dtype/--load-in-4bit alone compute in that dtype, unchecked).")


def resolve_device(opts: LoadOptions) -> str:
    if opts.device == "auto":
        return "cuda" if cuda_available() else "cpu"
    return opts.device


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
    with unreadable_weights(spec, str(source), opts.option):
        tokenizer = AutoTokenizer.from_pretrained(str(source), trust_remote_code=opts.trust_remote_code)
    return tokenizer, source, fingerprint, tokenizer_fingerprint(source)


@contextlib.contextmanager
def unreadable_weights(spec: ModelSpec, source: str, option: str):
    """Files transformers cannot read (a truncated safetensors header, a garbled config) are a
    usage error naming the folder and the fix, not a traceback repeated by every test."""
    try:
        yield
    except AuditUsageError:
        raise
    except Exception as exc:  # SafetensorError, OSError, ValueError...: all mean "cannot read this folder"
        fix = restore_fix(spec, source)
        raise AuditUsageError(
            f"{option} {spec.name}: transformers could not load {source} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:300] if str(exc) else ''}). Fix: {fix}.") from exc


def where_named(spec: ModelSpec, source: str, option: str) -> str:
    return f"{option} {spec.name}" + (f" ({source})" if source != spec.name else "")


def restore_fix(spec: ModelSpec, source: str) -> str:
    if spec.gguf_file:
        return f"delete the converted folder {source} (it is rebuilt on the next run)"
    return f"re-save the model into {source} (save_pretrained), or restore its files from their source"


def load_model(spec: ModelSpec, opts: LoadOptions, option: str = "--model") -> Any:
    """The model under audit through the run's engine, inside the result cache: a ``ScoringModel``
    (models/protocol.py). ``option`` (--model, --baseline) is the one messages name."""
    opts = check_options(dataclasses.replace(opts, option=option))
    entry = get_engine(opts.engine)
    handle = CachedModel(entry.load(spec, opts), ResultCache(opts.cache_dir, enabled=opts.use_cache))
    return entry.wrap(handle, opts) if entry.wrap is not None else handle
