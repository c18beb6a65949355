"""A pytest plugin for the audit runs that tests start in a subprocess (``-p fault_points``, with
tests/ on PYTHONPATH or this file copied beside the run): faults delivered at a known point of
the run, never by racing a sleep.

- Signals as at a terminal. A shell that starts a job in the background without job control (a
  CI runner's step, ``cmd &`` in a script) starts it with SIGINT ignored, and Python then installs
  no KeyboardInterrupt handler: a test's own SIGINT was lost ("3 passed", exit 0; issue 22). The
  signal tests are about what a run does when the signal lands, so SIGINT and SIGTERM get the
  dispositions an interactive shell gives them, before the bias-core plugin looks at SIGTERM.
- ``BIAS_CORE_TEST_FAULT="SIGNAL POINT N"``: the run signals itself at the N-th POINT (from 1):
  ``test``, at the start of the N-th test's call; ``put``, right after the N-th result-cache
  entry is stored (a call's entries then stand on disk in part); ``write``, while the N-th entry
  is being written: its temporary file is on disk, not yet renamed into place (what SIGKILL
  between the write and the rename leaves).
- ``BIAS_CORE_TEST_MEET="FOLDER COUNT"``: the run waits, before it makes its run folder, until
  COUNT runs given the same FOLDER have reached that point, so that concurrent runs really are.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

MEET_DEADLINE_S = 300.0

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _parse_fault(text: str) -> tuple[int, str, int]:
    try:
        name, point, n = text.split()
        assert point in ("test", "put", "write") and int(n) >= 1
        return int(getattr(signal, name)), point, int(n)
    except (ValueError, AssertionError, AttributeError):
        raise pytest.UsageError(f"BIAS_CORE_TEST_FAULT={text!r}: expected 'SIGNAL test|put|write N', "
                                "e.g. 'SIGKILL put 3'") from None


class _Fault:
    def __init__(self, signum: int, point: str, n: int):
        self.signum, self.point, self.n, self.seen = signum, point, n, 0

    def reached(self, point: str) -> bool:
        if point != self.point:
            return False
        self.seen += 1
        return self.seen == self.n

    def fire(self) -> None:
        os.kill(os.getpid(), self.signum)  # os.kill checks for a Python handler before it returns


def _install_cache_points(fault: _Fault) -> None:
    from bias_core.storage import result_cache as cache

    real_put = cache.ResultCache.put

    def put(self, parts, value, call=None):
        if self.enabled and fault.reached("write"):
            path = self._path(cache.canonical_key(parts))
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, _ = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            os.write(fd, b'{"key": {"half": ')  # half an entry, never renamed into place
            os.close(fd)
            fault.fire()
        real_put(self, parts, value, call)
        if fault.reached("put"):
            fault.fire()

    cache.ResultCache.put = put


def _meet(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"arrived-{os.getpid()}").touch()
    deadline = time.monotonic() + MEET_DEADLINE_S
    while len(list(folder.glob("arrived-*"))) < count:
        if time.monotonic() > deadline:
            raise pytest.UsageError(f"BIAS_CORE_TEST_MEET: waited {MEET_DEADLINE_S:.0f} s for {count} runs to reach "
                                    f"their run-folder creation in {folder}; only "
                                    f"{len(list(folder.glob('arrived-*')))} arrived")
        time.sleep(0.01)


def _install_meeting(text: str) -> None:
    from bias_core.pytest_plugin import hooks as plugin

    folder, count = text.rsplit(" ", 1)
    real = plugin._new_run_id

    def new_run_id(report_dir, model):
        _meet(Path(folder), int(count))
        return real(report_dir, model)

    plugin._new_run_id = new_run_id


_FAULT = _Fault(*_parse_fault(os.environ["BIAS_CORE_TEST_FAULT"])) if os.environ.get("BIAS_CORE_TEST_FAULT") else None
if _FAULT is not None and _FAULT.point in ("put", "write"):
    _install_cache_points(_FAULT)
if os.environ.get("BIAS_CORE_TEST_MEET"):
    _install_meeting(os.environ["BIAS_CORE_TEST_MEET"])


def pytest_runtest_call(item) -> None:
    if _FAULT is not None and _FAULT.reached("test"):
        _FAULT.fire()
