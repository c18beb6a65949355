"""A project without a pytest configuration file, run with an option's value written as a
separate word: pytest takes the value for a path to test and roots the run above the project.
The plugin says so, naming the fix; with a configuration file, or with ``--option=value``,
nothing is said."""

from __future__ import annotations

from pathlib import Path

from bias_core.pytest_plugin.rootdir_check import swallowed_values

pytest_plugins = ["pytester"]


def test_only_two_word_values_that_exist_and_are_not_the_run_s_paths_count(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "audits").mkdir()
    args = ["audits", "--cache-dir", "cache", "--seed", "3", "--report-dir", "missing", "--data-dir=cache", "-k",
            "GLD", "--model", "audits"]
    assert swallowed_values(args, ["audits"], tmp_path) == [("--cache-dir", "cache")]
    assert swallowed_values(["audits"], ["audits"], tmp_path) == []


def _collect(project, *extra: str):
    return project.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--collect-only", "-q", "-k",
                                        "template-color and GLD", *extra)


def test_a_run_rooted_above_the_project_by_an_option_value_is_named_with_its_fix(audit_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (audit_project.path / "pytest.ini").unlink()  # a user's project with no configuration file
    result = _collect(audit_project, "--cache-dir", str(elsewhere))
    out = result.stdout.str()
    # the node ids start above the project, at the folder pytester named after this test
    assert f"{audit_project.path.name}/audits/test_disclosure.py::test_disclosure[template-color-GLD]" in out, out
    assert "pytest rooted this run at" in out and f"--cache-dir={elsewhere}" in out, out
    assert "Fix: add a pytest.ini" in out
    quiet = _collect(audit_project, f"--cache-dir={elsewhere}")
    assert "pytest rooted this run at" not in quiet.stdout.str()


def test_a_project_with_a_configuration_file_keeps_its_rootdir_and_hears_nothing(audit_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert Path(audit_project.path / "pytest.ini").is_file()
    result = _collect(audit_project, "--cache-dir", str(elsewhere))
    assert "pytest rooted this run at" not in result.stdout.str()
    # node ids relative to the project: it is the rootdir
    assert "audits/test_disclosure.py::test_disclosure[template-color-GLD]" in result.stdout.lines
