"""--baseline, --baseline-adapter, --adapter and --summary-md: what each value means, and usage
errors (exit 4) that name the fix, before any model loads."""

from __future__ import annotations

import pytest

from bias_core.errors import AuditUsageError
from bias_core.gating.regression import RunConfig, write_items
from bias_core.pytest_plugin.regression_options import parse_options

from harness import assert_usage_error

pytest_plugins = ["pytester"]


def options(**given):
    values = {"--baseline": None, "--baseline-adapter": None, "--summary-md": None, "--trust-remote-code": False,
              "--allow-adapter-base-mismatch": False, "--baseline-max-missing": None, "--candidate-log": None,
              "--baseline-log": None, "--log-allow": None, "--log-metrics": None}
    values.update({f"--{k.replace('_', '-')}": v for k, v in given.items()})
    return parse_options(values.__getitem__)


@pytest.fixture
def stored_run(tmp_path):
    run = tmp_path / "run"
    write_items(run / "items.jsonl.gz", RunConfig(model="m", seed=0), ())
    (run / "results.json").write_text('{"run": {"model": "m", "seed": 0}, "results": []}')
    return run


def test_a_run_folder_or_its_results_file_is_a_stored_baseline(stored_run):
    for value in (stored_run, stored_run / "results.json", stored_run / "items.jsonl.gz"):
        parsed = options(baseline=str(value))
        assert parsed.stored is not None and parsed.live is None and parsed.stored.run.model == "m"
        assert parsed.stored_path == stored_run / "items.jsonl.gz"


def test_a_model_folder_is_a_live_baseline(tiny_model_dir):
    parsed = options(baseline=str(tiny_model_dir))
    assert parsed.live is not None and parsed.stored is None and parsed.live.local_dir == str(tiny_model_dir.resolve())
    assert parsed.label() == f"live {tiny_model_dir}"


@pytest.mark.parametrize(("given", "message"), [
    ({"baseline_adapter": "x"}, "--baseline-adapter needs --baseline MODEL"),
    ({"baseline": "./no/such/run/"}, "--baseline ./no/such/run/: no such run folder or file. Fix:"),
    ({"baseline": "no-such-alias"}, "--baseline no-such-alias: unknown model"),
])
def test_bad_values_are_usage_errors(given, message):
    with pytest.raises(AuditUsageError, match=message.replace(".", r"\.").replace("/", "/")):
        options(**given)


def test_a_run_folder_without_items_names_the_fix(tmp_path):
    (tmp_path / "old-run").mkdir()
    (tmp_path / "old-run" / "results.json").write_text("{}")
    with pytest.raises(AuditUsageError, match="no per-item results file.*items.jsonl.gz next to results.json"):
        options(baseline=str(tmp_path / "old-run"))


def test_baseline_adapter_needs_a_live_baseline_and_an_adapter_folder(stored_run, tiny_model_dir, tmp_path):
    with pytest.raises(AuditUsageError, match="applies to a live baseline model"):
        options(baseline=str(stored_run), baseline_adapter=str(tmp_path))
    with pytest.raises(AuditUsageError, match="--baseline-adapter .*not a PEFT adapter folder"):
        options(baseline=str(tiny_model_dir), baseline_adapter=str(tmp_path))


def test_summary_md_must_name_a_file(tmp_path):
    with pytest.raises(AuditUsageError, match="is a folder"):
        options(summary_md=str(tmp_path))
    assert options(summary_md=str(tmp_path / "s.md")).summary_md == tmp_path / "s.md"


@pytest.mark.slow
def test_command_line_usage_errors_exit_4(pytester, tmp_path):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--adapter", str(tmp_path / "none"), "--no-report")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*--adapter *none: no such folder*"])
    result = pytester.runpytest_subprocess("--baseline-adapter", str(tmp_path), "--no-report")
    assert_usage_error(result)
    result.stderr.fnmatch_lines(["*--baseline-adapter needs --baseline MODEL*"])
