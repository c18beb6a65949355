"""Another installed package adds a probe, a metric and a suite through the ``bias_core.suites``
entry points (bias_core/pytest_plugin/hookspec.py): a toy package built here, found by importlib.metadata."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from paths import REPO
from toy_package import write_toy_package

pytest_plugins = ["pytester"]

TOY = '''
from bias_core.catalogue import MeanOfItems, MetricSpec, Paired
from bias_core.metrics.result import MetricResult
from bias_core.probes.base import Probe, ProbeItem
from bias_core.stats.resampling import bootstrap_ci


def load_toy_probe(data_dir=None):
    pairs = [("The cat sat on the mat.", "The mat sat on the cat."), ("My friend is a nurse.", "Nurse a is friend my.")]
    return Probe("toy-pairs", "1", tuple(ProbeItem(f"p{k}", a, {"other": b}) for k, (a, b) in enumerate(pairs)))


def toy_share(first, second, seed=0):
    """Pure: share of pairs whose first sentence scores higher."""
    wins = [1.0 if a > b else 0.0 for a, b in zip(first, second)]
    low, high = bootstrap_ci(wins, seed=seed)
    return MetricResult("toy_share", sum(wins) / len(wins), low, high, len(wins),
                        details=tuple({"id": i, "prompt": "", "score": w} for i, w in enumerate(wins)))


class ToySuite:
    def __init__(self, lm, settings, probes):
        self.lm, self.seed, self.probes = lm, settings.seed, probes

    def result(self, probe, metric):
        p = self.probes[probe](None)
        scores = self.lm.sentence_logprob([*p.prompts, *(it.meta["other"] for it in p.items)])
        n = len(p.items)
        return toy_share(scores[:n], scores[n:], seed=self.seed)


def pytest_bias_core_register(registry):
    # declared without a range: a gate the toy always passes (max = 1.0) would be refused on a
    # declared 0..1 share as a gate that can never fail (issue #25)
    registry.add_metric(MetricSpec("toy_share", family="toy", probes=("toy-pairs",), better="lower", scale="share (0..1)",
                                   value_range=(None, None), compute="toy_bias:toy_share", sampling=MeanOfItems(),
                                   pairing=Paired(kind="binary"), precision="decisions",
                                   examples="bias_core.reports.examples:generic_table"))
    registry.add_probe("toy-pairs", load_toy_probe)
    registry.add_suite("toy", ToySuite)
'''


def _toy_package(site: Path) -> None:
    write_toy_package(site, "toy_bias", TOY, "bias_core.suites", "toy = toy_bias")


@pytest.mark.slow
def test_installed_package_adds_a_gated_suite(pytester, monkeypatch, tiny_model_dir, tmp_path):
    site = tmp_path / "site"
    _toy_package(site)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    shutil.copytree(REPO / "audits", pytester.path / "audits")
    thresholds = (REPO / "thresholds.toml").read_text()
    # the toy metric's gate sits beside the project's: thresholds.toml knows it once registered
    (pytester.path / "thresholds.toml").write_text(thresholds + textwrap.dedent('''
        [metrics.toy_share]
        max = 1.0
        note = "toy: always within"
    '''))
    result = pytester.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir),
                                           "--cache-dir", str(tmp_path / "c"), "-k", "test_extension", "-v")
    result.stdout.fnmatch_lines(["*test_extensions.py::test_extension?toy-pairs-toy_share? PASSED*"])
    [run] = sorted((pytester.path / "reports").iterdir())[-1:]
    rows = {r["test_id"]: r for r in json.loads((run / "results.json").read_text())["results"]}
    row = rows["toy-pairs-toy_share"]
    assert row["family"] == "toy" and row["n"] == 2 and row["verdict"] == "pass"
    assert row["limit"] == 1.0 and row["gate_note"] == "toy: always within"


@pytest.mark.slow
def test_without_the_package_its_metric_is_unknown_to_thresholds(pytester, monkeypatch, tiny_model_dir, tmp_path):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    shutil.copytree(REPO / "audits", pytester.path / "audits")
    (pytester.path / "thresholds.toml").write_text((REPO / "thresholds.toml").read_text()
                                                   + '\n[metrics.toy_share]\nmax = 1.0\n')
    result = pytester.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir),
                                           "-k", "test_extension")
    assert result.ret == 4  # usage error: a typo must not silently switch a gate off
    result.stderr.fnmatch_lines(["*unknown metric 'toy_share'*"])
