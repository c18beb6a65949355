"""--sample auto through the repository's own audits on the tiny model: what each row reports,
and the same items and numbers whatever the batch size or the number of xdist workers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from bias_core.gating.adaptive_sampling import BOOTSTRAP_KIND, CS_KIND

from harness import assert_usage_error, load_tiny, only_run, rows_by_id
from tolerances import assert_close, disclosure_atol, disclosure_eta

pytest_plugins = ["pytester"]

FIELDS = ("items_used", "stop_reason", "interval")


@pytest.fixture(autouse=True)
def stsb_data(tmp_path):
    """The --data-dir every test here audits natural-stsb from: tmp_path / "data"."""
    data = tmp_path / "data" / "Debias-LLMs"
    data.mkdir(parents=True)
    # The published file's name and row count (364), the project's own predicates.
    (data / "stsb_neutral_test.csv").write_text("\n".join(f"is reading book number {i}" for i in range(364)) + "\n")


def _run(pytester, tiny_model_dir, tmp_path, *extra):
    report = tmp_path / f"reports{len(list(tmp_path.glob('reports*')))}"
    result = pytester.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "-p", "no:randomly", "--model", str(tiny_model_dir),
        "--cache-dir", str(tmp_path / "cache"), "--data-dir", str(tmp_path / "data"), "--report-dir", str(report),
        "-k", "natural-stsb and (GLD or ADD) or da-gender", "--sample-cap", "128", *extra)
    run = only_run(report)
    return result, run, rows_by_id(run)


@pytest.mark.slow
def test_auto_rows_say_items_used_stopping_reason_and_interval(audit_project, tiny_model_dir, tmp_path):
    result, run, rows = _run(audit_project, tiny_model_dir, tmp_path)
    result.stdout.fnmatch_lines(["*bias-audit sampling: auto: item cap 128, budget none*"])
    for test_id in ("natural-stsb-GLD", "natural-stsb-ADD", "da-gender-DA_score"):
        row = rows[test_id]
        assert row["interval"] == CS_KIND, row
        assert row["stop_reason"] in ("decided", "item cap", "pool exhausted", "budget")
        assert row["items_used"] == row["breakdown"]["sampling"]["looks"][-1] in (64, 128)
        assert row["n"] == row["items_used"]
        if row["stop_reason"] == "pool exhausted":
            assert row["items_used"] == row["breakdown"]["sampling"]["pool"]
    assert rows["natural-stsb-GLD"]["breakdown"]["sampling"]["pool"] == 364
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["sampling"]["mode"] == "auto" and doc["run"]["sampling"]["budget_s"] is None
    case = next(c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if "natural-stsb-GLD" in c.get("name"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["interval"] == CS_KIND and int(props["items_used"]) == rows["natural-stsb-GLD"]["items_used"]
    html = (run / "report.html").read_text()
    assert f"items used {rows['natural-stsb-GLD']['items_used']}; stop: " in html

    # Same seed: same items and numbers with another batch size and two xdist workers: GLD and
    # ADD within the fp32 bound (tests/tolerances.py); DA_score, a share of pair decisions, exactly.
    _, _, again = _run(audit_project, tiny_model_dir, tmp_path, "-n", "2", "--batch-size", "5")
    eta = disclosure_eta(load_tiny(tiny_model_dir), ("natural-default",))
    for test_id, row in rows.items():
        same = again[test_id]
        assert (same["items_used"], same["stop_reason"]) == (row["items_used"], row["stop_reason"])
        assert [e["id"] for e in same["examples"]] == [e["id"] for e in row["examples"]]
        if row["metric"] in ("GLD", "ADD"):
            assert_close([same["value"], same["ci_low"]], [row["value"], row["ci_low"]],
                         disclosure_atol(row["metric"], eta), kind=test_id)
        else:
            assert (same["value"], same["ci_low"]) == (row["value"], row["ci_low"])


@pytest.mark.slow
def test_fixed_sample_keeps_the_whole_set_and_its_bootstrap(audit_project, tiny_model_dir, tmp_path):
    _, _, rows = _run(audit_project, tiny_model_dir, tmp_path, "--sample", "fixed", "-k", "GLD")
    row = rows["natural-stsb-GLD"]
    assert (row["n"], row["items_used"], row["interval"], row["stop_reason"]) == (364, 364, BOOTSTRAP_KIND, "fixed sample")
    _, _, rows = _run(audit_project, tiny_model_dir, tmp_path, "--sample", "100", "-k", "GLD")
    assert (rows["natural-stsb-GLD"]["n"], rows["natural-stsb-GLD"]["interval"]) == (100, BOOTSTRAP_KIND)


@pytest.mark.parametrize(("args", "message"), [
    (["--sample", "some"], "*--sample some: must be auto, fixed or a positive integer*"),
    (["--sample-cap", "0"], "*--sample-cap 0: must be a positive integer*"),
    (["--sample-budget", "-3"], "*--sample-budget -3: must be a positive number of seconds or 'none'*"),
])
def test_bad_sample_options_are_usage_errors(audit_project, args, message):
    result = audit_project.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--co", *args)
    assert_usage_error(result)
    result.stderr.fnmatch_lines([message])
