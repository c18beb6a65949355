"""The benchmark scripts' helpers that reach into the library: they break silently when a
library function's signature changes, since no audit runs them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_audit_warms_the_imports_of_a_local_model_folder(tiny_model_dir, tmp_path):
    from bias_core.models import LoadOptions, resolve_model

    bench_audit = _load("bench_audit")
    seconds = bench_audit.warm_imports(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path))
    assert seconds >= 0.0


def test_bench_engines_finds_the_served_models_folder(tiny_model_dir, tmp_path):
    from bias_core.models import resolve_model

    bench_engines = _load("bench_engines")
    assert Path(bench_engines.served_folder(resolve_model(str(tiny_model_dir)), tmp_path)) == tiny_model_dir
