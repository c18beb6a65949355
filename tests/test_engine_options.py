"""Engines own their options: each engine declares its options (``EngineOption``) in its own
file, and a third-party engine adds one without any change to bias_core: the plugin puts it in
``pytest --help``, validates it before any model loads (exit status 4), and the engine's
``load`` receives its value, typed (docs/engines.md, "Adding a model backend")."""

from __future__ import annotations

import shutil
import sys

import pytest

from bias_core.errors import AuditUsageError
from bias_core.models import LoadOptions, check_options
from bias_core.models.engines import BUILTIN, EngineEntry, EngineOption, at_least_one, get_engine
from bias_core.models.engines import options as engine_options
from bias_core.models.engines.options import declared, engine_fields, engine_option_values

from harness import assert_usage_error, no_traceback
from paths import REPO
from toy_package import write_toy_package

pytest_plugins = ["pytester"]

# A third party's engine with two options of its own, written against the documented seam
# only. Its load records what it received; it never computes (no audit test asks it to).
TOY_ENGINE = '''
from bias_core.models.engines import EngineEntry, EngineOption, at_least_one
from bias_core.models.engines.fake import FakeEngine

LOADED = []  # the engine options each load received
DEPTH = EngineOption("--toy-depth", "how deep the toy looks", int, default=3, what="a positive integer", example="2",
                     check=at_least_one)
LABEL = EngineOption("--toy-label", "what the toy calls its answers", default="plain")


def load(spec, opts):
    LOADED.append(dict(opts.engine_options))
    return FakeEngine(name=spec.name, fingerprint=f"toy:{DEPTH.of(opts)}")


ENGINE = EngineEntry(name="toy", load=load, options=(DEPTH, LABEL), summary="a toy with options",
                     describe=lambda opts: {"engine": "toy 1", "device": f"pen and paper (depth {DEPTH.of(opts)})",
                                            "dtype": "exact"})
# A package whose option's name is already bias_core's: pytest keeps working, the engine is refused.
CLASH = EngineEntry(name="clash", load=load, options=(EngineOption("--device", "not ours to take"),))
'''

AUDIT = '''
def test_the_model_loads_through_the_chosen_engine(audit_model):
    assert audit_model.info().engine == "fake"
'''


@pytest.fixture
def toy(pytester, monkeypatch, tmp_path):
    """The toy engine's package on this process's path (found by its entry points), and a project
    with the repository's thresholds; the engines it loads are forgotten afterwards."""
    from bias_core.models import engines

    site = tmp_path / "site"
    write_toy_package(site, "toy_engine", TOY_ENGINE, "bias_core.engines",
                      "toy = toy_engine:ENGINE\nclash = toy_engine:CLASH")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(engines, "_LOADED", dict(engines._LOADED))
    monkeypatch.setattr(engine_options, "_CLASHES", {})
    monkeypatch.delitem(sys.modules, "toy_engine", raising=False)
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    shutil.copy(REPO / "thresholds.toml", pytester.path / "thresholds.toml")
    pytester.makepyfile(test_audit=AUDIT)
    return pytester


def run(pytester, tmp_path, *args):
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--no-report",
                                "--cache-dir", str(tmp_path / "cache"), *args)
    out = result.stdout.str() + "\n" + result.stderr.str()
    no_traceback(out)
    return result, " ".join(out.split())  # argparse wraps help at the terminal's width


def loaded() -> list[dict]:
    """What the toy's load received (its module, which pytester's run took out of sys.modules again)."""
    return get_engine("toy").load.__globals__["LOADED"]


def test_a_packages_engine_option_is_in_pytest_help_beside_the_builtin_ones(toy, tmp_path):
    result, out = run(toy, tmp_path, "--help")
    assert result.ret == 0
    assert "--toy-depth=TOY_DEPTH --engine toy: how deep the toy looks" in out
    assert "--toy-label=TOY_LABEL --engine toy: what the toy calls its answers" in out
    # the built-in engines' options read as they always have
    assert "--max-concurrency=MAX_CONCURRENCY --engine openai: requests in flight at once (default: 8)" in out
    assert "--tensor-parallel-size=TENSOR_PARALLEL_SIZE --engine vllm: GPUs one model is split over" in out
    # the default engine's own options read as the run's: their help alone
    assert "--load-in-4bit 4-bit NF4 weights via bitsandbytes (CUDA only)" in out
    assert ("--device-map=DEVICE_MAP spread a model too large for one GPU over all visible GPUs with accelerate "
            "(auto)") in out
    assert out.count("--device=DEVICE") == 1  # the clashing package's option was left out, not added twice


@pytest.mark.parametrize("args, message", [
    (["--engine", "toy", "--toy-depth", "0"], "--toy-depth 0: must be a positive integer. Fix: e.g. --toy-depth 2."),
    (["--engine", "toy", "--toy-depth", "deep"],
     "--toy-depth deep: must be a positive integer. Fix: e.g. --toy-depth 2."),
    (["--toy-depth", "4"], "--toy-depth: not an option of --engine transformers. Fix: drop it, or choose the engine"),
    (["--engine", "openai", "--engine-url", "http://h:1", "--toy-label", "x"],
     "--toy-label: not an option of --engine openai"),
    (["--engine", "clash"], "--engine clash: its option --device is already an option of pytest or another plugin"),
    # the transformers engine's own options, refused with another engine the same way
    (["--engine", "toy", "--load-in-4bit"], "--load-in-4bit: not an option of --engine toy. Fix: drop it, or choose"),
    (["--engine", "vllm", "--device-map", "auto"], "--device-map: not an option of --engine vllm. Fix: drop it"),
])
def test_a_packages_engine_option_is_refused_before_any_model_loads(toy, tmp_path, args, message):
    result, out = run(toy, tmp_path, *args)
    assert_usage_error(result)
    assert message in out, out[-3000:]  # out: whitespace joined, as argparse wraps lines at the terminal's width
    assert loaded() == []  # the engine never loaded


def test_a_packages_engine_option_reaches_its_load_typed(toy, tmp_path):
    result, out = run(toy, tmp_path, "--engine", "toy", "--toy-depth", "5")
    assert result.ret == 0, out[-3000:]
    assert loaded() == [{"toy_depth": 5, "toy_label": "plain"}]  # an int; the option not given: its default
    assert "engine toy 1, device pen and paper (depth 5)" in out  # the run header's describe sees it too


# ----- the declarations themselves, in-process ------------------------------------------------------------
def test_each_builtin_option_is_declared_once_by_the_engine_that_takes_it():
    owners = {flag: [name for name, _ in found] for flag, found in declared(builtin_only=True).items()}
    assert owners == {"--tensor-parallel-size": ["vllm"], "--pipeline-parallel-size": ["vllm"], "--torch-compile": ["vllm"],
                      "--engine-url": ["openai"], "--api-key-env": ["openai"], "--served-model": ["openai"],
                      "--max-concurrency": ["openai"], "--request-timeout": ["openai"],
                      "--max-response-mb": ["openai"], "--load-in-4bit": ["transformers"],
                      "--device-map": ["transformers"]}
    assert [o.flag for o in get_engine("transformers").options] == ["--load-in-4bit", "--device-map"]
    assert set(BUILTIN) == {"transformers", "vllm", "openai"}


def test_an_engine_receives_every_option_of_its_own_given_or_defaulted():
    depth = EngineOption("--toy-depth", "h", int, default=3, what="a positive integer", example="2", check=at_least_one)
    scale = EngineOption("--toy-scale", "h", float, default=1.5, what="a number")
    entry = EngineEntry(name="toy-in-process", load=lambda spec, opts: None, options=(depth, scale))
    assert engine_option_values(entry, {}) == {"toy_depth": 3, "toy_scale": 1.5}
    assert engine_option_values(entry, {"toy_depth": "7", "toy_scale": 2}) == {"toy_depth": 7, "toy_scale": 2.0}
    assert engine_option_values(entry, {"toy_depth": None}) == {"toy_depth": 3, "toy_scale": 1.5}  # None: not given
    with pytest.raises(AuditUsageError, match=r"^--toy-depth 1\.5: must be a positive integer\. Fix: e\.g\. --toy-depth 2\.$"):
        engine_option_values(entry, {"toy_depth": 1.5})  # never truncated to 1
    with pytest.raises(AuditUsageError, match=r"^--toy-depth True: must be a positive integer"):
        engine_option_values(entry, {"toy_depth": True})  # a bool is no count
    with pytest.raises(AuditUsageError, match=r"^--toy-depth -2: must be a positive integer\. Fix"):
        engine_option_values(entry, {"toy_depth": -2})
    with pytest.raises(AuditUsageError, match=r"^--engine-url: not an option of --engine toy-in-process\."):
        engine_option_values(entry, {"engine_url": "http://h:1"})


def test_the_command_line_values_are_converted_by_the_declaring_engine():
    given = {"--engine": "openai", "--engine-url": "http://h:1", "--max-concurrency": "3", "--request-timeout": "2.5"}
    fields = engine_fields(lambda name, default=None: given.get(name, default))
    assert fields["engine_options"] == {"engine_url": "http://h:1", "max_concurrency": 3, "request_timeout": 2.5}
    opts = check_options(LoadOptions(**fields))
    assert opts.engine_options == {"engine_url": "http://h:1", "api_key_env": None, "served_model": None,
                                   "max_concurrency": 3, "request_timeout": 2.5, "max_response_mb": 16.0}


# The transformers engine's own options (engines/hf/options.py), as the command line gives them.
TRANSFORMERS_ONLY = {"--load-in-4bit": True, "--device-map": "auto"}


@pytest.mark.parametrize("engine", ["vllm", "openai", "toy-in-process"])
@pytest.mark.parametrize("flag", sorted(TRANSFORMERS_ONLY))
def test_each_transformers_option_is_refused_with_another_engine_as_not_its_own(engine, flag, monkeypatch):
    """The generic refusal of another engine's option, before that engine's own check runs."""
    from bias_core.models import engines

    monkeypatch.setattr(engines, "_LOADED", dict(engines._LOADED))
    engines.register(EngineEntry(name="toy-in-process", load=lambda spec, opts: None))
    given = {"--engine": engine, "--engine-url": "http://h:1" if engine == "openai" else None,
             flag: TRANSFORMERS_ONLY[flag]}
    fields = engine_fields(lambda name, default=None: given.get(name, default))
    with pytest.raises(AuditUsageError, match=rf"^{flag}: not an option of --engine {engine}\. Fix: drop it, or "
                                              "choose the engine it belongs to"):
        check_options(LoadOptions(**fields))


def test_the_transformers_options_are_taken_by_the_transformers_engine(monkeypatch):
    import types

    from bias_core.models.engines import transformers

    monkeypatch.setattr(transformers, "cuda_available", lambda: True)  # 4-bit's own check: CUDA, bitsandbytes
    monkeypatch.setitem(sys.modules, "bitsandbytes", types.ModuleType("bitsandbytes"))
    given = {"--engine": "transformers", **TRANSFORMERS_ONLY}
    fields = engine_fields(lambda name, default=None: given.get(name, default))
    taken = {"load_in_4bit": True, "device_map": "auto"}
    assert fields["engine_options"] == taken
    assert check_options(LoadOptions(**fields)).engine_options == taken
    assert check_options(LoadOptions(engine_options=taken)).engine_options == taken  # the library's default engine
    assert check_options(LoadOptions()).engine_options == {"load_in_4bit": False, "device_map": None}  # not given
    with pytest.raises(AuditUsageError, match=r"^--precision exact with --load-in-4bit: the precision mode chooses"):
        check_options(LoadOptions(precision="exact", engine_options={"load_in_4bit": True}))


@pytest.mark.parametrize("flag", ["engine-url", "--Engine-url", "--engine_url", "--", "-x"])
def test_an_option_that_is_not_a_long_lowercase_option_is_refused_when_declared(flag):
    with pytest.raises(ValueError, match="not a long option"):
        EngineOption(flag, "h")


NUMERIC = [(name, option) for found in declared(builtin_only=True).values() for name, option in found
           if option.type in (int, float)]


@pytest.mark.parametrize("engine, option", NUMERIC, ids=[option.flag for _, option in NUMERIC])
def test_every_numeric_builtin_option_refuses_text_and_zero_naming_a_value_that_works(engine, option):
    """The class: each count or amount a built-in engine takes (five of them) refuses a word and 0."""
    with pytest.raises(AuditUsageError, match=rf"^{option.flag} many: must be .*\. Fix: e\.g\. {option.flag} [0-9]+\.$"):
        engine_fields(lambda name, default=None: {"--engine": engine, option.flag: "many"}.get(name, default))
    with pytest.raises(AuditUsageError, match=rf"^{option.flag} 0(\.0)?: must be a positive.*Fix: e\.g\. {option.flag} "):
        engine_option_values(get_engine(engine), {option.key: "0"})
    example = option.parse(option.example)  # the value the message offers is one the engine takes
    assert example > 0 and engine_option_values(get_engine(engine), {option.key: option.example})[option.key] == example
    assert len(NUMERIC) == 5
