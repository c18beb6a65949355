"""Progress of long model work (generation, scoring, classifiers, training, endpoint requests):
a tqdm bar on a terminal; in a CI log, plain lines.

Outside a terminal (stderr not a tty, or ``$CI`` set) a bar's \\r redraws would fill a log with
one unreadable line, and no bar at all left a CI job silent for over ten minutes. There a
``LineProgress`` writes to stderr a line at least every ``$BIAS_CORE_PROGRESS_INTERVAL`` seconds
(default 60; 0: a line per update) while the work runs, and one when work that has printed
ends::

    bias-core progress: template-color: generating: 96/400 (24%), elapsed 1m02s, about 3m16s left
      [audits/test_disclosure.py::test_disclosure[template-color-GAS], worker gw1]

(one line in the log). What runs is the bar's label (the probe and the kind of work) and, under
pytest, the test (``$PYTEST_CURRENT_TEST``, whose setup runs session fixtures' work) and the xdist
worker. A timer thread writes a line even while one slow batch holds the loop; it stops when the
bar is closed, dropped, or its test has ended. Lines go to ``sys.stderr`` as it is when written:
the plugin runs model work with pytest's capture suspended, so they reach the terminal or the
log of ``pytest ... > log 2>&1``, from xdist workers too (a worker's stderr is the controller's).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref
from typing import Any

from tqdm.auto import tqdm

from bias_core.errors import AuditUsageError
from bias_core.storage.visible import visible

INTERVAL_ENV = "BIAS_CORE_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 60.0


def interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


def log_interval() -> float:
    """Seconds between progress lines in a log: ``$BIAS_CORE_PROGRESS_INTERVAL`` or 60.
    Raises AuditUsageError for a value that is not a number >= 0 (the plugin checks it at start)."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise AuditUsageError(f"{INTERVAL_ENV}={raw!r}: must be a number of seconds >= 0 (0: a progress line per "
                              f"batch). Fix: set it to e.g. 60, or unset it for the default ({DEFAULT_INTERVAL:g} s).")
    return value


def progress_bar(total: int, desc: str, enabled: bool = True) -> Any:
    """A progress bar over ``total`` items (``update(n)``, ``set_postfix(**kw)``, ``close()``):
    tqdm on a terminal, ``LineProgress`` in a log, a disabled tqdm when not ``enabled``."""
    if not enabled or interactive():
        return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
    return LineProgress(total, desc, log_interval())


def duration(seconds: float) -> str:
    """12s, 4m05s, 1h02m."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _test_id() -> str:
    """The pytest test whose work this is ("" outside pytest), without the phase."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


class LineProgress:
    """tqdm's ``update`` / ``set_postfix`` / ``close`` as plain lines in a log (module doc).
    Thread-safe: endpoint requests update it from a pool."""

    def __init__(self, total: int, desc: str, interval: float, clock=time.monotonic):
        self.total, self.desc, self.interval, self.n = int(total), desc, float(interval), 0
        self.disable, self.closed = False, False
        self._clock, self._lock, self._postfix = clock, threading.Lock(), ""
        self._start = self._last = clock()
        self._printed_at: int | None = None  # n when the last line was written; None: none yet
        self._test = _test_id()
        self._stop = threading.Event()
        if self.interval > 0 and self.total > 0:
            threading.Thread(target=_beat, args=(weakref.ref(self), self._stop, self.interval), daemon=True,
                             name="bias-core-progress").start()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.n += n
            if self._clock() - self._last >= self.interval:
                self._write()

    def set_postfix(self, **values: Any) -> None:
        with self._lock:
            self._postfix = ", ".join(f"{k} {v}" for k, v in values.items())

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._stop.set()
            if self._printed_at is not None and self._printed_at != self.n:  # long work: say it ended
                self._write(final=True)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def stale(self) -> bool:
        """Whether the work is over though the bar was never closed (its test has ended)."""
        return self.closed or _test_id() != self._test

    def line(self, final: bool = False) -> str:
        elapsed = self._clock() - self._start
        if final:
            status = f"done {self.n}/{self.total} in {duration(elapsed)}"
        else:
            share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            left = (f"about {duration(elapsed / self.n * (self.total - self.n))} left" if 0 < self.n <= self.total
                    else "no estimate yet")
            status = f"{self.n}/{self.total}{share}, elapsed {duration(elapsed)}, {left}"
        text = f"bias-core progress: {self.desc or 'working'}: {status}"
        if self._postfix and not final:
            text += f" ({self._postfix})"
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        where = [p for p in (self._test, worker and f"worker {worker}") if p]
        if where:
            text += f" [{', '.join(where)}]"
        return visible(text).replace("\n", " ")

    def heartbeat(self) -> None:
        """The timer's call: a line when none was written for ``interval`` seconds."""
        with self._lock:
            if not self.closed and self._clock() - self._last >= self.interval:
                self._write()

    def _write(self, final: bool = False) -> None:
        text = self.line(final)
        self._last, self._printed_at = self._clock(), self.n
        stream = sys.stderr
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed or full stream: progress is never worth an error
            pass


def _beat(ref: weakref.ref, stop: threading.Event, interval: float) -> None:
    """Write a line each ``interval`` in which the bar wrote none, until it is closed, dropped
    (only a weak reference is held between beats) or stale."""
    while True:
        bar = ref()
        if bar is None or bar.stale():
            return
        wait = max(0.05, bar._last + interval - bar._clock())
        del bar
        if stop.wait(wait):
            return
        bar = ref()
        if bar is None or bar.stale():
            return
        bar.heartbeat()
        del bar
