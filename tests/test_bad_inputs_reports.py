"""Bad input, faulty setups: the run's reports and other outputs.

Runs interrupted, killed or stopped early say "partial" everywhere; outputs that cannot be written
are refused before the model loads, and a write that fails after the tests never loses the verdict
or leaves a half-written file. How each case ends: tests/test_bad_inputs_options.py's docstring.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bias_core.gating.regression import summary
from bias_core.pytest_plugin import hooks as plugin
from bias_core.pytest_plugin import outputs
from bias_core.reports import table

from harness import BASE, assert_usage_error, finish, import_before_in_process_runs, no_traceback, only_run, run_folders
from paths import REPO

pytest_plugins = ["pytester"]
import_before_in_process_runs()


def _junit_partial(run: Path) -> tuple[dict, list]:
    root = ET.parse(run / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property") if p.get("name", "").startswith("bias_core.")}
    errors = [c for c in root.iter("testcase") if c.get("name") == "audit run" and c.find("error") is not None]
    return props, errors


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupted_run_is_reported_partial_everywhere(synthetic, monkeypatch, sig):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", sig)  # the second test signals its own process
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "fault_points")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-2000:]
    run = only_run(synthetic.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is False and sig in doc["run"]["partial_reason"]
    assert len(doc["results"]) == 1  # the test run before the signal
    csv = (run / "results.csv").read_text().splitlines()
    assert "run_complete" in csv[0] and all(",False," in line for line in csv[1:])
    html = (run / "report.html").read_text()
    assert "PARTIAL run: interrupted by" in html and "<title>PARTIAL" in html
    props, errors = _junit_partial(run)
    assert props["bias_core.complete"] == "false" and sig in props["bias_core.partial_reason"] and len(errors) == 1


def test_killed_run_leaves_a_report_that_says_partial(synthetic, monkeypatch):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", "SIGKILL")
    result = synthetic.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == -signal.SIGKILL
    run = only_run(synthetic.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is False and "did not finish" in doc["run"]["partial_reason"]
    assert [r["test_id"] for r in doc["results"]] == ["template-occupation-GLD"]
    assert "PARTIAL" in (run / "report.html").read_text()
    props, errors = _junit_partial(run)  # pytest never wrote its file: the placeholder stands
    assert props["bias_core.complete"] == "false" and len(errors) == 1


def test_run_stopped_by_a_usage_error_mid_run_says_why(synthetic, monkeypatch):
    monkeypatch.setenv("SYNTHETIC_TEMPLATE_HOBBY", "exit")
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert_usage_error(result)
    doc = json.loads((only_run(synthetic.path / "reports") / "results.json").read_text())
    assert doc["run"]["complete"] is False and "something found mid-run" in doc["run"]["partial_reason"]


def test_run_stopped_early_by_maxfail_is_partial(synthetic):
    (synthetic.path / "thresholds.toml").write_text(BASE.replace("max = 0.30", "max = 0.01"))
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((only_run(synthetic.path / "reports") / "results.json").read_text())
    assert doc["run"]["complete"] is False and "stopped early" in doc["run"]["partial_reason"]


def test_finished_run_is_complete_and_its_junit_has_no_partial_marker(synthetic):
    synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=3)
    run = only_run(synthetic.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and doc["run"]["partial_reason"] == ""
    assert _junit_partial(run) == ({}, []) and "PARTIAL" not in (run / "report.html").read_text()


def test_run_ids_are_unique_within_one_second(tmp_path):
    ids = [plugin._new_run_id(tmp_path, "smollm2-135m") for _ in range(200)]
    assert len(set(ids)) == 200 and len(list(tmp_path.iterdir())) == 200


@pytest.mark.slow
def test_two_runs_started_together_keep_their_own_reports(synthetic):
    # Both runs wait for each other just before they make their run folders (fault_points), so
    # they make them at the same time however the machine schedules them.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "BIAS_CORE_TEST_MEET": f"{synthetic.path / 'meet'} 2"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "fault_points", "-q"]
    procs = [subprocess.Popen(cmd + ["-k", probe], cwd=synthetic.path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for probe in ("template-color", "template-hobby")]
    outs = [out for out, _ in finish(procs, "two synthetic audit runs")]
    assert [p.returncode for p in procs] == [0, 0], [out[-2000:] for out in outs]
    runs = run_folders(synthetic.path / "reports")
    assert len(runs) == 2
    found = sorted(json.loads((r / "results.json").read_text())["results"][0]["test_id"] for r in runs)
    assert found == ["template-color-GLD", "template-hobby-GLD"]


def test_unit_test_session_leaves_no_report_folder(pytester):
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert not any((pytester.path / "reports").iterdir())


# ----- outputs checked before the model loads, and never half written ----------------------------
def _read_only(monkeypatch, target: Path) -> None:
    """Root ignores permission bits: a read-only file system is simulated where the probe file goes."""

    real = outputs.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if str(kwargs.get("dir", "")).startswith(str(target)):
            raise OSError(errno.EROFS, "Read-only file system", str(target))
        return real(*args, **kwargs)

    monkeypatch.setattr(outputs.tempfile, "mkstemp", mkstemp)


def test_summary_md_in_a_read_only_folder_is_refused_up_front(project, monkeypatch):
    target = project.path / "ro"
    target.mkdir()
    _read_only(monkeypatch, target)
    project.usage_error("--summary-md", str(target / "s.md"),
                        names=[f"--summary-md {target / 's.md'}", "Read-only file system", "Fix:", "drop --summary-md"])


def test_step_summary_in_a_missing_folder_is_refused_up_front(project, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "no" / "such" / "summary.md"))
    project.usage_error(names=["$GITHUB_STEP_SUMMARY", "does not exist", "unset it"])


def test_junitxml_under_a_file_is_refused_up_front(project):
    project.usage_error("--junitxml", "thresholds.toml/junit.xml",
                        names=["--junitxml thresholds.toml/junit.xml", "thresholds.toml is a file", "drop --junitxml"])


def test_report_dir_without_free_space_is_refused_up_front(project, monkeypatch):

    monkeypatch.setattr(outputs, "MIN_REPORT_FREE", 2**62)
    project.usage_error("--report-dir", str(project.path / "runs"),
                        names=["--report-dir", "MiB needed", "--no-report"])
    assert not any((project.path / "runs").iterdir()), "the refused run's folder is left behind"


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _whole_files(run: Path) -> None:
    """Every JSON and XML file present parses, and no temporary file is left."""
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")], list(run.iterdir())
    for path in run.glob("*.json"):
        json.loads(path.read_text())
    for path in run.glob("*.xml"):
        ET.parse(path)


@pytest.mark.parametrize(("gates", "code"), [("pass", 6), ("fail", 1)])
def test_summary_that_cannot_be_written_after_the_tests_loses_nothing(synthetic, monkeypatch, gates, code):
    """The summary's write fails (ENOSPC at a known point): the other files, the banner and the
    gate's exit code (6 where nothing else failed) all stay."""

    if gates == "fail":
        (synthetic.path / "thresholds.toml").write_text(BASE.replace("max = 0.30", "max = 0.01"))
    step = synthetic.path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setattr(summary, "atomic_write_text", _enospc)
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--summary-md", "out/summary.md")
    out = result.stdout.str()
    assert result.ret == code, out[-3000:]
    assert ("PASSED: all 3 gates passed" if gates == "pass" else "BLOCKED: 3 gates failed") in out
    assert "REPORT INCOMPLETE: 1 report file(s) not written" in out and "--summary-md out/summary.md" in out
    no_traceback(out)
    assert step.read_text().startswith("earlier step\n## Bias audit")  # the other destination was written
    assert not (synthetic.path / "out" / "summary.md").exists()
    run = only_run(synthetic.path / "reports")
    _whole_files(run)
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and len(doc["results"]) == 3
    assert ET.parse(run / "junit.xml").getroot().find(".//testcase") is not None


def test_results_json_that_cannot_be_written_leaves_no_half_file(synthetic, monkeypatch):

    real = table.atomic_write_text
    monkeypatch.setattr(table, "atomic_write_text",
                        lambda path, *a, **k: _enospc() if Path(path).name == "results.json" else real(path, *a, **k))
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str()
    assert result.ret == 6, out[-3000:]
    assert "PASSED: all 3 gates passed" in out and "results.json, results.csv: not written (No space left on device)" in out
    run = only_run(synthetic.path / "reports")
    assert not (run / "results.json").exists()
    _whole_files(run)
    assert "PASSED" in (run / "report.html").read_text()


def test_junit_cut_by_a_full_disk_never_replaces_a_whole_file(synthetic, monkeypatch):
    """pytest's writer stops at 4,096 bytes (the issue's tmpfs): the destination holds whole XML
    that says why, never the cut file."""
    from _pytest.junitxml import LogXML

    def cut_write(self):
        Path(self.logfile).write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>' + "x" * 4000)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LogXML, "pytest_sessionfinish", cut_write)
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str()
    assert result.ret == 6, out[-3000:]
    assert "PASSED: all 3 gates passed" in out and "junit.xml: not written (No space left on device)" in out
    assert "generated xml file" not in out
    run = only_run(synthetic.path / "reports")
    _whole_files(run)
    props, errors = _junit_partial(run)
    assert "junit.xml could not be written (No space left on device)" in props["bias_core.partial_reason"]
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is True and doc["run"]["report_incomplete"] == [
        "junit.xml: not written (No space left on device)"]


def test_users_junitxml_is_moved_in_whole(synthetic):
    result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--no-report", "--junitxml", "ci/j.xml")
    assert result.ret == 0
    assert [p.name for p in (synthetic.path / "ci").iterdir()] == ["j.xml"]
    assert len(ET.parse(synthetic.path / "ci" / "j.xml").getroot().findall(".//testcase")) == 3
    assert f"generated xml file: {synthetic.path / 'ci' / 'j.xml'}" in result.stdout.str()  # not the temporary file


def test_full_tmpfs_under_report_dir_leaves_whole_files_and_says_incomplete(synthetic, monkeypatch, tmp_path):
    """The issue's setup, where this machine lets the test mount a 64 KB tmpfs (root on Linux)."""

    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the monkeypatched ENOSPC tests cover the same paths")
    try:
        (mount / "filler").write_bytes(b"\0" * 40_000)  # what is left fits some files, not all
        monkeypatch.setattr(outputs, "MIN_REPORT_FREE", 0)  # past the up-front check, to fail mid-run
        result = synthetic.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--report-dir", str(mount))
        out = result.stdout.str()
        assert result.ret == 6, out[-3000:]
        assert "PASSED: all 3 gates passed" in out and "REPORT INCOMPLETE" in out and "No space left on device" in out
        no_traceback(out)
        run = only_run(mount)
        _whole_files(run)
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_block_appended_to_a_full_disk_is_cut_off_again(tmp_path, monkeypatch):
    """An items block (or a step summary) whose write fails half way leaves the file as it was."""
    from bias_core.gating.regression.items import ItemValue, MetricItems, RunConfig, append_block, read_items, start_items
    from bias_core.storage import files

    path = tmp_path / "items.jsonl.gz"
    start_items(path, RunConfig(model="m", seed=0))
    block = MetricItems("p", "GLD", "1", "sha", 0.5, (ItemValue("a", 0.5, "x"),))
    append_block(path, block)
    before = path.read_bytes()
    real_open = open

    class HalfWrite:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def tell(self):
            return self.fh.tell()

        def truncate(self, size):
            return self.fh.truncate(size)

        def write(self, data):
            self.fh.write(bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "open", lambda *a, **k: HalfWrite(real_open(*a, **k)), raising=False)
    with pytest.raises(OSError):
        append_block(path, MetricItems("q", "GLD", "1", "sha", 0.5, (ItemValue("b", 0.5, "y"),)))
    assert path.read_bytes() == before
    back = read_items(path)
    assert not back.truncated and list(back.blocks) == [("p", "GLD")]


def test_items_file_that_is_not_gzipped_says_how_to_compress_it(project, tmp_path):
    from bias_core.gating.regression import RunConfig, write_items

    run = tmp_path / "run"
    write_items(run / "items.jsonl.gz", RunConfig(model="m", seed=0), ())
    (run / "items.jsonl.gz").write_bytes(gzip.decompress((run / "items.jsonl.gz").read_bytes()))
    out = project.usage_error("--baseline", str(run), names=["not gzip-compressed", "gzip -nc"])
    assert "header" not in out
