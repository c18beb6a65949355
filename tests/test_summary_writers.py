"""Two runs writing one --summary-md file: the one that writes second finds the file changed
since it started, keeps the other run's summary above its own and warns, naming the file and
the fix. A file left by an earlier job is replaced as before."""

from __future__ import annotations

import warnings

import pytest

from bias_core.gating.regression.summary import SharedSummaryWarning, mark_file, write_summary

pytest_plugins = ["pytester"]


def test_a_run_that_finds_the_summary_rewritten_since_it_started_keeps_both_and_warns(tmp_path):
    path = tmp_path / "summary.md"
    first_started, second_started = mark_file(path), mark_file(path)  # both runs start: no file yet
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first writer finds the file as it started: no warning
        write_summary("## Bias audit: first\n", path, environ={}, since=first_started)
    with pytest.warns(SharedSummaryWarning) as caught:
        assert write_summary("## Bias audit: second\n", path, environ={}, since=second_started) == [path]
    text = path.read_text()
    assert text.index("## Bias audit: first") < text.index("Another run wrote this file") < text.index(
        "## Bias audit: second")
    [warning] = caught
    assert f"--summary-md {path}: another run wrote this file while this run ran" in str(warning.message)
    assert "Fix: give each job its own summary file" in str(warning.message)


def test_the_same_holds_when_the_other_run_replaced_a_file_that_was_there_before(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("## Bias audit: last week's job\n")
    mine = mark_file(path)
    write_summary("## Bias audit: other job\n", path, environ={}, since=mark_file(path))
    with pytest.warns(SharedSummaryWarning):
        write_summary("## Bias audit: mine\n", path, environ={}, since=mine)
    text = path.read_text()
    assert "other job" in text and "mine" in text and "last week" not in text


def test_a_summary_left_by_an_earlier_job_is_replaced_without_a_warning(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("## Bias audit: earlier job\n")
    started = mark_file(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_summary("## Bias audit: this job\n", path, environ={}, since=started)
    assert path.read_text() == "## Bias audit: this job\n"


def test_a_summary_removed_since_the_run_started_is_written_without_a_warning(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("old\n")
    started = mark_file(path)
    path.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_summary("new\n", path, environ={}, since=started)
    assert path.read_text() == "new\n"


def test_the_plugin_marks_the_summary_when_the_run_starts(tmp_path, monkeypatch):
    """write_run_summary compares against the mark its state took at configure time."""
    from bias_core.pytest_plugin.regression_options import RegressionOptions
    from bias_core.pytest_plugin.regression_summary import write_run_summary

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    path = tmp_path / "summary.md"

    class Settings:
        strict, model_value = False, "cand"

    row = {"kind": "absolute", "test_id": "template-color-GLD", "verdict": "pass", "value": 0.1}
    mark = mark_file(path)
    path.write_text("## Bias audit: another run\n")  # written by another run meanwhile
    with pytest.warns(SharedSummaryWarning):
        write_run_summary([row], RegressionOptions(summary_md=path), Settings(), 0, since=mark)
    text = path.read_text()
    assert text.startswith("## Bias audit: another run\n") and "## Bias audit: cand" in text


def test_the_check_and_the_write_happen_under_an_exclusive_lock_of_the_folder(tmp_path, monkeypatch):
    """Two runs finishing at once cannot both find the file unchanged: while one checks and
    writes, another's lock of the folder is refused."""
    import fcntl
    import os

    from bias_core.gating.regression import summary

    held = []
    real_write = summary.atomic_write_text

    def write(path, text):
        fd = os.open(tmp_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return real_write(path, text)

    monkeypatch.setattr(summary, "atomic_write_text", write)
    write_summary("x\n", tmp_path / "summary.md", environ={}, since=mark_file(tmp_path / "summary.md"))
    assert held == [True]


AUDIT = """
import pathlib
import pytest
from bias_core.metrics import MetricResult

@pytest.mark.audit(family="disclosure")
@pytest.mark.parametrize(("probe", "metric"), [pytest.param("template-occupation", "GLD", id="template-occupation-GLD")])
def test_synthetic(probe, metric, gate):
    # another job given the same --summary-md finishes while this run is still going
    pathlib.Path("summary.md").write_text("## Bias audit: the other job\\n")
    gate(MetricResult(metric, 0.1, 0.05, 0.2, 40, ()), family="disclosure", probe=probe, metric=metric)
"""


def test_a_run_keeps_a_summary_another_run_wrote_to_its_file_and_says_so(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makefile(".toml", thresholds="[metrics.GLD]\nmax = 0.30\n")
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest("-p", "no:cacheprovider", "--summary-md", "summary.md")
    result.assert_outcomes(passed=1)
    text = (pytester.path / "summary.md").read_text()
    assert text.startswith("## Bias audit: the other job\n") and "PASSED" in text.split("Another run wrote")[1]
    result.stdout.fnmatch_lines(["*SharedSummaryWarning: --summary-md summary.md: another run wrote this file while "
                                 "this run ran*"])
