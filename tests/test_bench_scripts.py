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


def test_rss_timeline_finds_a_childs_peak_and_the_line_before_it(tmp_path):
    import subprocess
    import sys

    child = ("import time; print('before', flush=True); b = b'x' * 300_000_000; print('allocated', flush=True); "
             "time.sleep(2); raise SystemExit(3)")
    out = tmp_path / "trace"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "rss_timeline.py"), str(out), "--every", "0.1",
                           "--", sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # the command's exit code is passed on
    samples = [line.split() for line in (out.parent / "trace.rss").read_text().splitlines()]
    assert max(float(largest) for _, largest, _ in samples) >= 0.3  # 300 MB written in the child
    stamped = (out.parent / "trace.log").read_text().splitlines()
    assert [line.split()[1] for line in stamped] == ["before", "allocated"]
    assert "the last line before it: allocated" in done.stdout
