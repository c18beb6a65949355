"""Progress of long model work: a tqdm bar on a terminal; in a CI log, a plain line at least every
$BIAS_CORE_PROGRESS_INTERVAL seconds saying what runs, items done of total, elapsed and an
estimate of the time left, from xdist workers too."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
from tqdm.auto import tqdm

import bias_core
from bias_core.errors import AuditUsageError
from bias_core.models import progress
from bias_core.models.progress import INTERVAL_ENV, LineProgress, duration, log_interval, progress_bar

from harness import assert_usage_error

pytest_plugins = ["pytester"]


class Log(io.StringIO):
    """A CI log: not a terminal."""

    def isatty(self) -> bool:
        return False


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def use_log(monkeypatch) -> Log:
    """stderr a log, in the test's body (pytest sets sys.stderr and PYTEST_CURRENT_TEST per phase)."""
    stream = Log()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "audits/test_disclosure.py::test_disclosure[template-color-GAS] (call)")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return stream


def test_in_a_log_every_update_writes_a_line_at_interval_zero(monkeypatch):
    log = use_log(monkeypatch)
    monkeypatch.setenv(INTERVAL_ENV, "0")
    bar = progress_bar(total=4, desc="template-color: generating")
    assert isinstance(bar, LineProgress)
    for _ in range(4):
        bar.update(1)
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 4  # the last update wrote 4/4: no separate "done" line
    for k, line in enumerate(lines, 1):
        assert line.startswith(f"bias-core progress: template-color: generating: {k}/4 ({25 * k}%), elapsed ")
        assert "left" in line and "[audits/test_disclosure.py::test_disclosure[template-color-GAS]]" in line


def test_a_line_says_done_of_total_elapsed_and_the_time_left_at_the_rate_so_far(monkeypatch):
    log = use_log(monkeypatch)
    clock = Clock()
    bar = LineProgress(200, "template-color: generating", interval=60, clock=clock)
    clock.now += 30
    bar.update(50)  # 30 s < 60 s: no line yet
    assert log.getvalue() == ""
    clock.now += 45
    bar.update(50)  # 75 s: 100 of 200 at 0.75 s per item -> 75 s left
    clock.now += 20
    bar.update(50)  # 20 s after the last line: none
    clock.now += 60
    bar.heartbeat()  # a slow batch: the timer writes a line though no item finished
    clock.now += 5
    bar.update(50)
    bar.close()
    assert log.getvalue().splitlines() == [
        "bias-core progress: template-color: generating: 100/200 (50%), elapsed 1m15s, about 1m15s left "
        "[audits/test_disclosure.py::test_disclosure[template-color-GAS]]",
        "bias-core progress: template-color: generating: 150/200 (75%), elapsed 2m35s, about 52s left "
        "[audits/test_disclosure.py::test_disclosure[template-color-GAS]]",
        "bias-core progress: template-color: generating: done 200/200 in 2m40s "
        "[audits/test_disclosure.py::test_disclosure[template-color-GAS]]",
    ]


def test_work_shorter_than_the_interval_writes_nothing(monkeypatch):
    log = use_log(monkeypatch)
    clock = Clock()
    bar = LineProgress(10, "scoring", interval=60, clock=clock)
    for _ in range(10):
        clock.now += 5
        bar.update(1)
    bar.close()
    assert log.getvalue() == ""


def test_a_line_names_the_xdist_worker_the_training_loss_and_shows_controls_escaped(monkeypatch):
    log = use_log(monkeypatch)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    bar = LineProgress(3, "CDA fine-tuning \x1b[2J", interval=0, clock=Clock())
    bar.set_postfix(loss="0.5")
    bar.update(1)
    [line] = log.getvalue().splitlines()
    assert line == ("bias-core progress: CDA fine-tuning \\x1b[2J: 1/3 (33%), elapsed 0s, about 0s left (loss 0.5) "
                    "[audits/test_disclosure.py::test_disclosure[template-color-GAS], worker gw1]")


def test_updates_from_a_pool_of_threads_are_all_counted(monkeypatch):
    log = use_log(monkeypatch)
    bar = LineProgress(800, "requests", interval=0, clock=Clock())
    threads = [threading.Thread(target=lambda: [bar.update(1) for _ in range(100)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = log.getvalue().splitlines()
    assert bar.n == 800 and len(lines) == 800 and all(line.startswith("bias-core progress: requests: ") for line in lines)


def test_the_timer_writes_while_a_batch_stalls_and_stops_when_the_bar_closes(monkeypatch):
    log = use_log(monkeypatch)
    bar = LineProgress(5, "a slow batch", interval=0.01)
    # deadline-style: the timer's line comes within seconds on any machine, no update needed
    for _ in range(3000):
        if "a slow batch: 0/5" in log.getvalue():
            break
        threading.Event().wait(0.01)
    assert "bias-core progress: a slow batch: 0/5 (0%), elapsed " in log.getvalue()
    assert "no estimate yet" in log.getvalue()
    bar.close()
    timers = [t for t in threading.enumerate() if t.name == "bias-core-progress"]
    for t in timers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in timers)


def test_a_bar_left_open_by_a_failed_test_goes_quiet_when_the_next_test_starts(monkeypatch):
    use_log(monkeypatch)
    bar = LineProgress(5, "generating", interval=0, clock=Clock())
    assert not bar.stale()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "audits/test_disclosure.py::test_disclosure[template-color-GLD] (setup)")
    assert bar.stale()


def test_on_a_terminal_the_tqdm_bar_is_unchanged(monkeypatch):
    monkeypatch.setattr("sys.stderr", Terminal())
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv(INTERVAL_ENV, "0")
    bar = progress_bar(total=3, desc="generating")
    assert isinstance(bar, tqdm) and not bar.disable
    bar.close()
    assert progress_bar(total=3, desc="generating", enabled=False).disable


def test_ci_set_means_a_log_even_on_a_terminal_and_disabled_bars_stay_silent(monkeypatch):
    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(INTERVAL_ENV, "0")
    assert isinstance(progress_bar(total=3, desc="generating"), LineProgress)
    off = progress_bar(total=3, desc="generating", enabled=False)
    off.update(3)
    off.close()
    assert stream.getvalue() == ""


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_bad_interval_is_a_usage_error_naming_the_variable_and_the_fix(monkeypatch, value):
    monkeypatch.setenv(INTERVAL_ENV, value)
    with pytest.raises(AuditUsageError, match=rf"BIAS_CORE_PROGRESS_INTERVAL='{value}': must be a number of seconds "
                                              r">= 0.*Fix: set it to e.g. 60, or unset it"):
        log_interval()


def test_the_interval_defaults_to_a_minute(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert log_interval() == 60.0 == progress.DEFAULT_INTERVAL
    monkeypatch.setenv(INTERVAL_ENV, "2.5")
    assert log_interval() == 2.5


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0, 12.4, 59.6, 61, 3599, 3600, 3725)] == ["0s", "12s", "1m00s", "1m01s", "59m59s",
                                                                          "1h00m", "1h02m"]


# ----- through the plugin, in a log, from xdist workers ------------------------------------------
LOOP = """
import pytest
from bias_core.models.progress import progress_bar
from bias_core.pytest_plugin.session_state import terminal

@pytest.mark.parametrize("probe", ["template-color", "template-hobby"])
def test_loop(request, probe):
    # as the plugin runs a suite's model work: capture suspended (suite_factory.WithTerminal)
    with terminal(request.config):
        bar = progress_bar(total=3, desc=f"{probe}: generating")
        for _ in range(3):
            bar.update(1)
        bar.close()
"""


def test_a_bad_interval_stops_the_run_before_any_test_with_a_usage_error(pytester, monkeypatch):
    pytester.makepyfile(test_loop=LOOP)
    monkeypatch.setenv(INTERVAL_ENV, "soon")
    result = pytester.runpytest("-p", "no:cacheprovider", "--no-report")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*BIAS_CORE_PROGRESS_INTERVAL='soon': must be a number of seconds >= 0*"])


@pytest.mark.slow
def test_lines_from_xdist_workers_reach_the_log(pytester, monkeypatch):
    pytester.makepyfile(test_loop=LOOP)
    monkeypatch.setenv(INTERVAL_ENV, "0")
    monkeypatch.delenv("CI", raising=False)
    # the subprocess imports the bias_core under test, not whichever one is installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(bias_core.__file__).parents[1]),
                                                      *filter(None, [os.environ.get("PYTHONPATH")])]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--no-report", "-n", "2")
    result.assert_outcomes(passed=2)
    lines = [line for line in result.errlines if line.startswith("bias-core progress: ")]
    for probe in ("template-color", "template-hobby"):
        mine = [line for line in lines if line.startswith(f"bias-core progress: {probe}: generating: ")]
        assert [line.split(": generating: ")[1].split(" ")[0] for line in mine] == ["1/3", "2/3", "3/3"]
        assert all(f"test_loop.py::test_loop[{probe}], worker gw" in line for line in mine)
