"""The benchmark scripts' helpers that reach into the library: they break silently when a
library function's signature changes, since no audit runs them."""

from __future__ import annotations

from pathlib import Path

from harness import script_module
from paths import REPO


def test_bench_audit_warms_the_imports_of_a_local_model_folder(tiny_model_dir, tmp_path):
    from bias_core.models import LoadOptions, resolve_model

    bench_audit = script_module("benchmarks/bench_audit.py")
    seconds = bench_audit.warm_imports(resolve_model(str(tiny_model_dir)), LoadOptions(cache_dir=tmp_path))
    assert seconds >= 0.0


def test_bench_engines_finds_the_served_models_folder(tiny_model_dir, tmp_path):
    from bias_core.models import resolve_model

    bench_engines = script_module("benchmarks/bench_engines.py")
    assert Path(bench_engines.served_folder(resolve_model(str(tiny_model_dir)), tmp_path)) == tiny_model_dir


def test_rss_timeline_finds_a_childs_peak_and_the_line_before_it(tmp_path):
    import re
    import subprocess
    import sys

    out = tmp_path / "trace"
    # The child holds its 300 MB until the trace has recorded them (no race with the sampler's
    # timing), or 100 s, then exits 3.
    child = ("import sys, time; from pathlib import Path; print('before', flush=True); b = b'x' * 300_000_000; "
             "print('allocated', flush=True); rss = Path(sys.argv[1]); end = time.monotonic() + 100\n"
             "while time.monotonic() < end and not any(float(l.split()[1]) >= 0.3 for l in "
             "(rss.read_text().splitlines() if rss.exists() else [])): time.sleep(0.05)\n"
             "raise SystemExit(3)")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "rss_timeline.py"), str(out), "--every", "0.1",
                           "--", sys.executable, "-c", child, f"{out}.rss"], capture_output=True, text=True, timeout=200)
    assert done.returncode == 3, done.stderr  # the command's exit code is passed on
    samples = [line.split() for line in (out.parent / "trace.rss").read_text().splitlines()]
    assert max(float(largest) for _, largest, _ in samples) >= 0.3  # 300 MB written in the child
    stamped = (out.parent / "trace.log").read_text().splitlines()
    assert [line.split()[1] for line in stamped] == ["before", "allocated"]
    # A line is stamped when read from the pipe, so the line named before the peak may be the
    # one printed just before the allocation: attribution is to within the pipe's latency.
    assert re.search(r"peak RSS 0\.[3-9]\d GB .* the last line before it: (before|allocated)$", done.stdout.strip())
