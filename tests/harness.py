"""The tests' harness: running an audit as a user does, and reading what it wrote.

- **A project**: ``copy_project`` gives a folder the repository's audits/ and thresholds.toml, as
  a user's checkout holds them; ``offline`` keeps its audits off the hub. tests/conftest.py builds
  its fixtures on these: ``audit_project`` (a pytester folder so set up, run in subprocesses),
  ``project`` (the same, run in-process with the model loader recorded: ``Project``) and
  ``synthetic`` (the gate fixture alone on made-up values: ``SYNTHETIC``).
- **The run folder**: ``run_folders``, ``only_run`` and ``last_run`` find what a run wrote under
  its report dir; ``results`` and ``rows_by_id`` read its results.json.
- **A usage error**: ``assert_usage_error`` checks that a run stopped with exit code 4, named what
  it must and printed no traceback; ``no_traceback`` is the last check alone.
- **Models and processes**: ``load_tiny`` (a handle on a tiny test model), ``usable_device`` (a
  device case, or its skip), ``bias_core_cache_dir``, ``finish`` (subprocesses under a deadline),
  and the damage the bad-input tests do to files (``cut_short``, ``rewrite_in_place``).

Test modules import these from here, never from conftest.py or from one another.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bias_core.pytest_plugin import fixtures as plugin_fixtures

from paths import REPO

# ----- a project: the repository's audits and thresholds ------------------------------------------


def copy_project(root: Path, extra_thresholds: str = "", *, own_rootdir: bool = True) -> Path:
    """``root`` set up as a user's project: the repository's audits/ and thresholds.toml, with
    ``extra_thresholds`` appended to the latter. ``own_rootdir`` adds an empty pytest.ini, which
    makes ``root`` pytest's rootdir (reports/ go there) for a run started in it: without it, an
    option's value written as a separate word (``--cache-dir DIR``) roots the run above the
    project (tests/conftest.py says what that did). Returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "audits", root / "audits")
    if extra_thresholds:
        (root / "thresholds.toml").write_text((REPO / "thresholds.toml").read_text() + extra_thresholds)
    else:
        shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    if own_rootdir:
        (root / "pytest.ini").write_text("[pytest]\n")
    return root


def offline(monkeypatch) -> None:
    """No hub look-ups from this test's audits, in-process or in the subprocesses it starts."""
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")


# The bad-input tests' default selection: one probe's one metric, the smallest audit there is.
SELECT = "template-color and GLD"


class Project:
    """A temporary project with the repository's audits and thresholds, run in-process, whose
    model loader records each load and refuses it unless ``real_load`` is set: a usage error that
    slipped past to the model would show."""

    def __init__(self, pytester, monkeypatch, cache: Path):
        self.pytester, self.cache, self.loads, self.real_load = pytester, cache, [], False
        original = plugin_fixtures._load

        def recording_load(spec, settings):
            self.loads.append(spec.name)
            if not self.real_load:
                raise RuntimeError("the model loader ran in a case that must stop before it")
            return original(spec, settings)

        monkeypatch.setattr(plugin_fixtures, "_load", recording_load)

    @property
    def path(self) -> Path:
        return self.pytester.path

    def run(self, *args, select: str | None = SELECT):
        """(pytester's result, its stdout and stderr) of ``pytest audits ARGS -k SELECT``."""
        # importlib mode: the copied audits/test_genderpair.py must not clash with tests/test_genderpair.py
        base = ["audits", "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib",
                "--cache-dir", str(self.cache)]
        result = self.pytester.runpytest(*base, *(["-k", select] if select else []), *args)
        return result, result.stdout.str() + "\n" + result.stderr.str()

    def usage_error(self, *args, names, select: str | None = SELECT) -> str:
        """The output of a run that stops with a usage error naming ``names``, before any model loads."""
        out = assert_usage_error(self.run(*args, select=select)[0], names)
        assert self.loads == [], "the model loader ran before the usage error"
        return out

    def results(self) -> dict:
        """The newest run's results.json."""
        return results(last_run(self.path / "reports"))


# Synthetic audits: the gate fixture alone, no model, one verdict per case. BASE gates them.
BASE = "[metrics.GAS]\nmax = 0.35\n[metrics.GLD]\nmax = 0.30\n[metrics.ADD]\nmax = 0.10\n"
SYNTHETIC = """
import math, os, signal, pytest
from bias_core.metrics import MetricResult

CASES = {"template-occupation": (0.10, 0.05, 0.20), "template-hobby": (0.12, 0.02, 0.20),
         "template-color": (0.20, 0.10, 0.25)}

@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), [pytest.param(p, "GLD", id=f"{p}-GLD") for p in CASES])
def test_synthetic(probe, metric, gate):
    action = os.environ.get("SYNTHETIC_" + probe.replace("-", "_").upper(), "")
    if action == "nan":
        value = (math.nan, math.nan, math.nan)
    else:
        value = CASES[probe]
    if action in ("SIGINT", "SIGTERM", "SIGKILL"):
        os.kill(os.getpid(), getattr(signal, action))
    if action == "exit":
        pytest.exit("usage error: something found mid-run", returncode=4)
    gate(MetricResult(metric, *value, 40, ()), family="disclosure", probe=probe, metric=metric)
"""


def import_before_in_process_runs() -> None:
    """Call at a test module's import when its tests run audits in-process (``project``,
    ``synthetic``): pytester drops every module first imported inside such a run, and peft,
    dropped and imported again, registered bitsandbytes' torch ops twice. (bias_core's own
    modules are imported by tests/conftest.py.)"""
    try:
        import peft  # noqa: F401
    except ImportError:
        pass


# ----- the run folder -----------------------------------------------------------------------------


def audit_subprocess(project: Path, model: Path, reports: Path, select: str, *args: str,
                     cache: Path | None = None) -> tuple[int, str, Path | None]:
    """(exit code, output, newest run folder or None) of ``pytest audits -k SELECT ARGS`` on
    ``model``, run as a user runs it: a subprocess in ``project``, offline, one thread."""
    import sys

    env = {**os.environ, "BIAS_CORE_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("GITHUB_STEP_SUMMARY", None)
    cmd = [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--model", str(model), "--cache-dir", str(cache or project / "cache"), "--report-dir", str(reports),
           "-k", select, *args]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    runs = run_folders(reports)
    return proc.returncode, proc.stdout + proc.stderr, (runs[-1] if runs else None)


def run_folders(reports: Path) -> list[Path]:
    """The run folders under a report dir, oldest first: a run id starts with its start time, to
    the second, and ends with a random suffix, so two runs started in one second are ordered by
    when their files were last written (a run writes until it ends, before the next starts);
    [] where the report dir does not exist."""
    if not reports.is_dir():
        return []
    return sorted((p for p in reports.iterdir() if p.is_dir()), key=lambda p: (p.name[:15], p.stat().st_mtime_ns))


def only_run(reports: Path) -> Path:
    """The one run folder under ``reports``; fails the test where there is none or several."""
    runs = run_folders(reports)
    assert len(runs) == 1, f"expected one run folder under {reports}, found {[p.name for p in runs]}"
    return runs[0]


def last_run(reports: Path) -> Path:
    """The newest run folder under ``reports``; fails the test where there is none."""
    runs = run_folders(reports)
    assert runs, f"no run folder under {reports}"
    return runs[-1]


def results(run: Path) -> dict:
    """A run folder's results.json."""
    return json.loads((run / "results.json").read_text())


def rows_by_id(run: Path) -> dict[str, dict]:
    """A run folder's result rows by test id."""
    return {r["test_id"]: r for r in results(run)["results"]}


# ----- a usage error ------------------------------------------------------------------------------


def no_traceback(out: str) -> None:
    """``out`` holds no Python traceback and no INTERNALERROR: the user is told, not shown a crash."""
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    assert "INTERNALERROR" not in out, out[-3000:]
    assert not re.search(r'^\s+File "[^"]+", line \d+', out, re.M), out[-3000:]


def assert_usage_error(result, names=()) -> str:
    """Checks that pytester's ``result`` stopped with a usage error (exit code 4) whose output
    holds each of ``names``, without a traceback. Returns its stdout and stderr."""
    out = result.stdout.str() + "\n" + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    for name in names:
        assert name in out, f"{name!r} not in:\n{out[-3000:]}"
    no_traceback(out)
    return out


# ----- models, processes, damaged files -----------------------------------------------------------


def script_module(relative: str, name: str | None = None):
    """A script of the repository (benchmarks/, scripts/, audits/) imported from its path, without
    putting its folder on sys.path for the rest of the session."""
    import importlib.util

    path = REPO / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bias_core_cache_dir() -> Path:
    """Where converted packaged models live between runs: the plugin's default cache dir."""
    from bias_core.pytest_plugin.options import default_cache_dir

    return default_cache_dir()


NO_GPU = ("no CUDA GPU visible (torch.cuda.is_available() is False); the cuda case runs on a GPU "
          "machine: pytest tests --device cuda")


def usable_device(config, device: str) -> str:
    """``device`` when this run covers it, else a skip that says why."""
    import torch

    chosen = config.getoption("--device", default="auto")
    if chosen not in ("auto", device):
        pytest.skip(f"--device {chosen}: the {device} case is left out")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip(NO_GPU)
    return device


def load_tiny(folder, device: str = "cpu", dtype: str = "float32", **options):
    """A handle on a tiny test model on ``device`` (float32 unless asked), without progress bars."""
    from bias_core.models import LoadOptions, load_model, resolve_model

    # Beside the folder, never inside it: the folder is a model other tests copy file by file.
    options.setdefault("cache_dir", Path(folder).parent / f"{Path(folder).name}-unused-cache")
    options.setdefault("use_cache", False)
    return load_model(resolve_model(str(folder)), LoadOptions(device=device, dtype=dtype, progress=False, **options))


def finish(procs: list[subprocess.Popen], what: str, deadline_s: float = 600) -> list[tuple[str, str]]:
    """Each process's (stdout, stderr) once all have ended; a process still running at the
    deadline is killed (none is left behind) and the test fails saying which."""
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=deadline_s))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.communicate()
            raise AssertionError(f"{what}: process {proc.args[:3]}... did not end within {deadline_s:.0f} s") from None
    return outputs


def cut_short(path: Path, keep: float = 0.5) -> None:
    """The file cut to its first ``keep`` share of bytes, as an interrupted copy leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def rewrite_in_place(path: Path, offset: int, payload: bytes) -> None:
    """Overwrite bytes keeping the file's size and modification time (what a size/mtime check misses)."""
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(payload)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
