"""Every table keyed by a metric's name is read from the catalogue: the gates' ranges (installed
packages' metrics included), the trade-off sweep's axes and ideals, the mitigation table's metrics
and data sets, and the metric the decoding grid searches."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bias_core import catalogue
from bias_core.catalogue import MeanOfItems, MetricSpec, NotPaired
from bias_core.errors import ProbeNotApplicable, ThresholdsError
from bias_core.gating.thresholds import METRIC_RANGES, load_thresholds
from bias_core.metrics import MetricResult
from bias_core.mitigation.evaluation import results_table, tradeoff_curves
from bias_core.pytest_plugin import extensions
from bias_core.suites import known_metrics, known_probes


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(catalogue, "BY_NAME", dict(catalogue.BY_NAME))
    monkeypatch.setattr(catalogue, "PROBES", dict(catalogue.PROBES))
    monkeypatch.setattr(extensions, "EXTENSIONS", extensions.Registry())
    return extensions.EXTENSIONS


def test_a_package_metrics_range_refuses_a_gate_it_can_never_fail(registry, tmp_path):
    registry.add_metric(MetricSpec("toy_share", family="toy", probes=("toy-pairs",), better="lower", scale="share",
                                   value_range=(0.0, 1.0), compute="toy:share", sampling=MeanOfItems(),
                                   pairing=NotPaired("toy"), precision="decisions", examples="toy:table"))
    assert METRIC_RANGES["toy_share"] == (0.0, 1.0)  # registered after the thresholds module was imported
    path = tmp_path / "thresholds.toml"
    path.write_text("[metrics.toy_share]\nmax = 1.0\n")
    with pytest.raises(ThresholdsError, match=r"max = 1 .*no result can fail"):
        load_thresholds(path, known_metrics(), known_probes(), required_metrics=set())


def test_the_tradeoff_axes_are_dagender_figure_2s_from_the_declared_roles():
    """DA-Gender's Figure 2: SEAT-v1, SEAT-v2, the Kurita log-probability effect and StereoSet's
    stereotype score against 1 - DA_score; each bias axis the distance from its metric's ideal."""
    assert tradeoff_curves.BIAS_METRICS == {"logprob_effect": ("logprob_effect", 0.0), "SEAT-v1": ("SEAT_effect", 0.0),
                                            "SEAT-v2": ("SEAT_effect", 0.0), "stereo_score": ("stereo_score", 50.0)}
    assert tradeoff_curves.KNOWLEDGE == "1-DA_score"
    for axis in catalogue.tradeoff_axes():
        m = catalogue.spec(axis.metric)
        assert m.tradeoff == "bias" and axis.probe in m.probes and axis.ideal == m.ideal


@pytest.mark.parametrize(("fields", "said"), [
    ({"tradeoff": "bias", "better": "lower"}, "give the ideal"),
    ({"tradeoff": "knowledge", "better": "lower"}, "a share where higher is better"),
    ({"tradeoff": "axis"}, "tradeoff must be None, bias or knowledge"),
])
def test_a_tradeoff_role_the_sweep_cannot_plot_fails_where_it_is_written(fields, said):
    base = dict(family="association", probes=("p",), better="higher", scale="", value_range=(0.0, 1.0),
                compute="m:f", sampling=MeanOfItems(), pairing=NotPaired("why"), precision="decisions", examples="m:g")
    with pytest.raises(ValueError, match=said):
        MetricSpec("x", **{**base, **fields})


def test_the_mitigation_table_prints_the_metrics_and_data_sets_the_reductions_compare():
    assert results_table.METRIC_ORDER == tuple(m.of for m in catalogue.reductions())
    assert list(dict.fromkeys(results_table.DATASETS.values())) == [
        "Template", "STS-B", "SNLI", "Natural (offline stand-in)", "LLM (1)", "LLM (2)"]
    rows = [{"probe": p, "metric": m, "value": 0.1 * k, "variant": "original"}
            for k, (p, m) in enumerate([("template-color", "GLD"), ("template-hobby", "GLD"), ("natural-stsb", "ADD"),
                                        ("natural-stsb", "GAS"), ("da-gender", "DA_score")])]
    table = results_table.mitigation_table(rows)
    assert list(table.columns) == ["Template GLD", "STS-B GAS", "STS-B ADD", "da-gender DA_score"]
    assert table.loc["original", "Template GLD"] == pytest.approx(0.05)  # the topics' unweighted mean


def _result(metric: str, scores: list[float]) -> MetricResult:
    details = tuple({"id": f"i{k}", "prompt": "", "score": s} for k, s in enumerate(scores))
    return MetricResult(metric, sum(scores) / len(scores), 0.0, 1.0, len(scores), details=details)


def test_the_decoding_grid_searches_the_disclosure_metric_of_generated_text():
    from bias_core.suites.mitigation import MitigationAudit

    [decoded] = [m.name for m in catalogue.metrics_of("disclosure") if m.decoded]
    original = SimpleNamespace(result=lambda probe, metric: _result(metric, [1.0, 1.0, 0.0, 1.0]))
    audit = MitigationAudit(lm=None, original=original)
    audit._grids[("template-color", decoded)] = {"top_k=10": _result(decoded, [0.0, 1.0, 0.0, 1.0]),
                                                 "top_p=0.3": _result(decoded, [0.0, 0.0, 0.0, 1.0])}
    reduced = audit._grid_reduction("template-color", decoded)
    assert reduced.metric == f"{decoded}_reduction" and reduced.value == pytest.approx(0.5)
    assert reduced.breakdown["best_setting"] == "top_p=0.3" and set(reduced.breakdown[f"grid_{decoded}"]) == {
        "top_k=10", "top_p=0.3"}
    logits = next(m.name for m in catalogue.metrics_of("disclosure") if not m.decoded)
    with pytest.raises(ProbeNotApplicable, match=f"decoding settings cannot change {logits}"):
        audit._grid_reduction("template-color", logits)
