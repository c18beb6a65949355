"""The metric catalogue is the one place a metric is declared: what the audits parametrize, the
gates, the suites' runners and probe loaders, the sampling forms, the regression pairing, the
precision rules, the report's examples and the docs' metric table all agree with it, and an entry
is complete or it does not load."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bias_core import catalogue
from bias_core.catalogue import BY_NAME, METRICS, MetricSpec, ProbeSpec
from bias_core.errors import ThresholdsError
from bias_core.gating.regression import spec as regression_spec
from bias_core.gating.thresholds import METRIC_RANGES, load_thresholds
from bias_core.metric_spec import FixedSample, GapOfGroups, MeanOfItems, NotPaired, OwnInterval, Propagated, resolve
from bias_core.suites import known_metrics, known_probes

from harness import script_module
from paths import REPO

metric_table = script_module("scripts/metric_table.py")


class _Metafunc:
    """What the audits' pytest_generate_tests use of pytest's metafunc."""

    def __init__(self, function: str, options: dict[str, str]):
        self.function = SimpleNamespace(__name__=function)
        self.config = SimpleNamespace(getoption=options.get)
        self.params: list = []

    def parametrize(self, names, params):
        self.params += params


def _audit_module(name: str):
    return script_module(f"audits/{name}.py", f"_catalogue_audit_{name}")


def _generated(module, function: str, options: dict[str, str]) -> set[tuple[str, str]]:
    metafunc = _Metafunc(function, options)
    module.pytest_generate_tests(metafunc)
    return {tuple(p.values[-2:]) for p in metafunc.params}  # (probe, metric)


def _audited(monkeypatch) -> set[tuple[str, str]]:
    """Every (probe, metric) some audit test is parametrized with, for every option that changes it."""
    from bias_core import classifiers
    from bias_core.mitigation.methods.names import WEIGHT_CHANGING

    found = set()
    for name in ("test_disclosure", "test_association", "test_genderbench"):
        found |= {tuple(p.values) for p in _audit_module(name).CASES}
    genderpair = _audit_module("test_genderpair")
    for proxy in (False, True):
        monkeypatch.setattr(classifiers, "get_regard", lambda _name, proxy=proxy: SimpleNamespace(is_proxy=proxy))
        found |= _generated(genderpair, "test_genderpair", {"--regard-classifier": "auto"})
    mitigation = _audit_module("test_mitigation")
    for function in ("test_mitigation_reduces_bias", "test_mitigation_guard"):
        found |= _generated(mitigation, function, {"--mitigation": WEIGHT_CHANGING[0]})
    for proxy in (False, True):  # GenderCARE's re-audit, named for the regard scorer in use
        monkeypatch.setattr(classifiers, "get_regard", lambda _name, proxy=proxy: SimpleNamespace(is_proxy=proxy))
        found |= _generated(mitigation, "test_gendercare_reaudit",
                            {"--mitigation": "gendercare-cda", "--regard-classifier": "auto"})
    found |= _generated(_audit_module("test_tradeoff"), "test_tradeoff_point_guard", {"--mitigation-sweep": "quick"})
    return found


def test_audits_parametrize_exactly_the_catalogue(monkeypatch):
    audited = _audited(monkeypatch)
    declared = {(p, m.name) for m in METRICS for p in m.probes}
    assert audited - declared == set(), "audited but not in bias_core/catalogue.py"
    assert declared - audited == set(), "in the catalogue but no audit runs it"


def test_names_are_unique_and_the_suites_know_them_all():
    assert len(BY_NAME) == len(METRICS)
    assert known_metrics() == set(BY_NAME)
    assert known_probes() == {p for m in METRICS for p in m.probes}


def test_every_reference_is_a_function_and_every_family_but_mitigation_has_runners():
    for m in METRICS:
        assert callable(m.compute_function()) and callable(m.examples_function()), m.name
        # every metric is sent through the model by the runner its entry names, but a mitigation
        # metric of another, which compares that metric's results of two models
        assert (m.runner is None) == (m.family == "mitigation" and m.of is not None), m.name
        assert m.runner is None or callable(m.runner_function()), m.name
        if isinstance(m.sampling, OwnInterval):
            assert callable(resolve(m.sampling.function)), m.name
        if isinstance(m.precision, Propagated):
            assert callable(resolve(m.precision.error)), m.name


@pytest.mark.parametrize("field", ["sampling", "pairing", "precision", "examples"])
def test_an_entry_that_leaves_out_a_field_fails_where_it_is_written(field):
    fields = {"family": "association", "probes": ("p",), "better": "lower", "scale": "", "value_range": (0.0, 1.0),
              "compute": "m:f", "sampling": MeanOfItems(), "pairing": NotPaired("why"), "precision": "decisions",
              "examples": "m:g"}
    MetricSpec("x", **fields)
    del fields[field]
    with pytest.raises(TypeError, match=field):
        MetricSpec("x", **fields)


def test_fields_are_keyword_only_and_of_their_kind():
    with pytest.raises(TypeError):
        MetricSpec("x", "association", ("p",), "lower", "", (0.0, 1.0), "m:f", MeanOfItems(), NotPaired("why"),
                   "decisions", "m:g")
    good = {"family": "association", "probes": ("p",), "better": "lower", "scale": "", "value_range": (0.0, 1.0),
            "compute": "m:f", "sampling": MeanOfItems(), "pairing": NotPaired("why"), "precision": "decisions",
            "examples": "m:g"}
    for field, bad in (("sampling", "mean"), ("pairing", True), ("precision", "half"), ("examples", "generic_table"),
                       ("runner", "bias_core.runners.gbm.run_gbm")):
        with pytest.raises(ValueError, match=f"x: {field} must be"):
            MetricSpec("x", **{**good, field: bad})


def test_every_metric_on_a_sampled_probe_has_a_bounded_form():
    """--sample auto grows a sampled probe until its gate decides; a metric there with no bounded
    per-item form would run the whole pool, fixed (the mitigation family keeps its probes whole)."""
    sampled = {p.name for p in catalogue.sampled_probes()}
    for m in METRICS:
        if m.family != "mitigation" and sampled & set(m.probes):
            assert not isinstance(m.sampling, FixedSample), m.name
        if isinstance(m.sampling, GapOfGroups):  # a gap compares the group means of a mean-form metric
            of = BY_NAME[m.sampling.of]
            assert isinstance(of.sampling, MeanOfItems) and of.family == m.family, m.name
            assert set(of.probes) == set(catalogue.GROUP_PROBES) and m.probes == (catalogue.ACROSS_GROUPS,), m.name


def test_every_example_builder_makes_a_table():
    from bias_core.reports.examples import ExampleTable, example_table

    ex = [{"id": "a", "prompt": "p", "score": 1.0, "response": "r", "continuation": "c", "margin": 0.5}]
    for m in METRICS:
        table = example_table({"metric": m.name, "examples": ex})
        assert isinstance(table, ExampleTable) and len(table.rows) == 1, m.name
        assert all(len(row) == len(table.columns) for row in table.rows), m.name


def test_every_probe_has_a_loader_its_suite_can_call():
    """Each probe a metric names has a loader in the one table, and every parameter the loader
    needs is one its family's suite offers (bias_core/suites/base.py call_with)."""
    import inspect

    from bias_core.suites.association import AssociationAudit
    from bias_core.suites.disclosure import DisclosureAudit
    from bias_core.suites.genderpair import GenderPairAudit

    suites = {"disclosure": DisclosureAudit(lm=None), "association": AssociationAudit(lm=None),
              "genderpair": GenderPairAudit(lm=None)}
    for m in METRICS:
        for probe in m.probes:
            if probe == catalogue.ACROSS_GROUPS:  # no items of its own: the group probes, compared
                continue
            loader = catalogue.probe_loader(probe)
            offered = {"data_dir", "name", "seed"} | set(suites[m.family].probe_options() if m.family in suites else ())
            needed = {p.name for p in inspect.signature(loader).parameters.values() if p.default is p.empty}
            assert needed <= offered, (m.name, probe, needed - offered)


def test_a_package_adds_a_probe_but_cannot_replace_a_project_one(monkeypatch):
    from bias_core.pytest_plugin.extensions import Registry

    monkeypatch.setattr(catalogue, "PROBES", dict(catalogue.PROBES))
    registry = Registry()
    registry.add_probe("toy-pairs", load := (lambda data_dir=None: "toy"))
    assert catalogue.probe_loader("toy-pairs") is load and registry.probes == {"toy-pairs": load}
    assert catalogue.PROBES["toy-pairs"] == ProbeSpec("toy-pairs", family=None, loader=load)  # a bare loader, wrapped
    with pytest.raises(ValueError, match="'da-gender' is the project's own"):
        registry.add_probe("da-gender", load)
    with pytest.raises(KeyError, match="no loader for probe 'toy-pair'"):
        catalogue.probe_loader("toy-pair")


def test_docs_metric_table_is_the_catalogue():
    _, table, _ = metric_table.split(metric_table.PAGE.read_text(encoding="utf-8"))
    assert table == catalogue.markdown_table(), "regenerate it: .venv/bin/python scripts/metric_table.py"
    listed = {row.split("|")[1].strip() for row in table.splitlines()[2:]}
    assert listed == set(BY_NAME)


def test_metric_table_script_rewrites_only_between_the_markers():
    page = "# Metrics\n\n<!-- metric-table:begin -->\n| old | table |\n<!-- metric-table:end -->\n\nAfter.\n"
    new = metric_table.with_table(page, catalogue.markdown_table())
    assert new == ("# Metrics\n\n<!-- metric-table:begin -->\n" + catalogue.markdown_table()
                   + "<!-- metric-table:end -->\n\nAfter.\n")
    assert metric_table.with_table(new, catalogue.markdown_table()) == new
    with pytest.raises(ValueError, match="no metric table markers"):
        metric_table.split("# Metrics without a table\n", "page.md")


def test_gate_ranges_and_regression_pairing_come_from_the_catalogue():
    assert METRIC_RANGES == {m.name: m.value_range for m in METRICS}
    paired = {m.name for m in METRICS if m.paired}
    assert set(regression_spec.PAIRED) == paired
    assert set(regression_spec.NOT_PAIRED) == set(BY_NAME) - paired  # every unpaired metric says why
    assert all(why.strip() for why in regression_spec.NOT_PAIRED.values())
    for name, spec in regression_spec.PAIRED.items():
        m = BY_NAME[name]
        assert spec.direction == m.better and (spec.ideal is None or spec.ideal == m.ideal)
        assert (spec.kind, spec.aggregation, spec.item_scale, spec.group_field, spec.output_field, spec.difference) == (
            m.pairing.kind, m.pairing.aggregation, m.pairing.item_scale, m.pairing.group_field, m.pairing.output_field,
            m.pairing.difference)


def test_shipped_thresholds_agree_with_the_catalogue():
    t = load_thresholds(REPO / "thresholds.toml", known_metrics(), known_probes())
    for name, gate in t.defaults.items():
        m = BY_NAME[name]
        assert gate.direction == m.gate_direction, name
        assert gate.ideal == (m.ideal if m.gate_direction == "max" else None), name
    # the release gate (--baseline) runs every paired metric and refuses to start without its margin
    assert set(t.regression) == {m.name for m in METRICS if m.paired}


def _load(tmp_path: Path, body: str):
    path = tmp_path / "thresholds.toml"
    path.write_text(body, encoding="utf-8")
    return load_thresholds(path, set(BY_NAME), known_probes(), required_metrics=set())


@pytest.mark.parametrize(("body", "said"), [
    ("[metrics.GLD]\nmin = 0.1\n", "direction 'min' contradicts the catalogue: lower GLD is better"),
    ("[metrics.DA_score]\nmax = 0.9\n", "direction 'max' contradicts the catalogue: higher DA_score is better"),
    ("[metrics.stereo_score]\nmax = 10\n", "no ideal contradicts the catalogue: stereo_score is gated by its distance from 50"),
    ("[metrics.stereo_score]\nideal = 40\nmax = 10\n", "ideal = 40 contradicts the catalogue"),
    ("[metrics.GLD]\nideal = 0.1\nmax = 0.2\n", "GLD has no ideal in the catalogue"),
])
def test_a_default_gate_that_disagrees_with_the_catalogue_is_an_error(tmp_path, body, said):
    with pytest.raises(ThresholdsError, match=re.escape(said)):
        _load(tmp_path, body)


def test_agreeing_gates_load(tmp_path):
    t = _load(tmp_path, "[metrics.GLD]\nmax = 0.3\n[metrics.lm_score]\nideal = 100\nmax = 25\n[metrics.DA_score]\nmin = 0.6\n")
    assert t.defaults["lm_score"].ideal == 100 and t.defaults["DA_score"].direction == "min"


def test_metric_spec_rejects_contradictions():
    fields = {"probes": ("p",), "scale": "", "value_range": (None, None), "compute": "m:f",
              "sampling": FixedSample("why"), "pairing": NotPaired("why"), "precision": "fp32", "examples": "m:g"}
    with pytest.raises(ValueError, match="needs an ideal"):
        MetricSpec("x", family="association", better="ideal", **fields)
    with pytest.raises(ValueError, match="family"):
        MetricSpec("x", family="", better="lower", **fields)
    # an installed package may bring a family of its own (bias_core.pytest_plugin.hookspec); the project may not
    assert {m.family for m in catalogue.METRICS} <= set(catalogue.FAMILIES)


# ----- the classifier fields: scorer, stand_in, variant_of ------------------------------------------
_SCORED = {"family": "genderpair", "probes": ("p",), "better": "lower", "scale": "", "value_range": (0.0, 1.0),
           "compute": "m:f", "sampling": MeanOfItems(), "pairing": NotPaired("why"), "precision": "decisions",
           "examples": "m:g"}


@pytest.mark.parametrize("field", ["scorer", "stand_in", "variant_of"])
@pytest.mark.parametrize("bad", ["", "  ", 3, ("regard",)])
def test_a_classifier_field_is_a_name_or_none(field, bad):
    with pytest.raises(ValueError, match=f"x: {field} must be None or a name"):
        MetricSpec("x", **{"scorer": "regard", "stand_in": "VADER sentiment", **_SCORED, field: bad})


def test_a_stand_in_needs_its_scorer_and_a_variant_its_stand_in():
    with pytest.raises(ValueError, match="x: stand_in says what replaces its scorer's classifier"):
        MetricSpec("x", **_SCORED, stand_in="VADER sentiment")
    with pytest.raises(ValueError, match="x: variant_of is the paper's metric a stand-in's takes the place of"):
        MetricSpec("x", **_SCORED, scorer="regard", variant_of="y")
    with pytest.raises(ValueError, match="x: variant_of names another metric"):
        MetricSpec("x", **_SCORED, scorer="regard", stand_in="VADER sentiment", variant_of="x")
    MetricSpec("x", **_SCORED, scorer="regard", stand_in="VADER sentiment", variant_of="y")


def test_a_run_audits_the_metrics_of_the_scorer_it_has():
    paper = MetricSpec("x", **_SCORED, scorer="regard")
    proxy = MetricSpec("x_proxy", **_SCORED, scorer="regard", stand_in="VADER sentiment", variant_of="x")
    unscored = MetricSpec("y", **_SCORED)
    toxicity = MetricSpec("z", **_SCORED, scorer="toxicity")
    assert [m.audited_with(()) for m in (paper, proxy, unscored, toxicity)] == [True, False, True, True]
    assert [m.audited_with(("regard",)) for m in (paper, proxy, unscored, toxicity)] == [False, True, True, True]


def test_every_regard_proxy_metric_declares_its_stand_in_and_the_papers_metric_it_replaces():
    """regard_proxy_* (VADER sentiment standing in for the regard model): the report's caveat, the
    scorer a run audits with and the paper tables' rows read the declaration, not the name."""
    stand_ins = [m for m in METRICS if m.stand_in is not None]
    assert {m.name for m in stand_ins} == {m.name for m in METRICS if "proxy" in m.name}
    for m in stand_ins:
        paper = BY_NAME[m.variant_of]  # every one declares the paper's metric, which exists
        assert (m.scorer, m.stand_in) == ("regard", "VADER sentiment"), m.name
        assert paper.scorer == m.scorer and paper.stand_in is None, m.name
        assert (paper.family, paper.probes, paper.better, paper.value_range, paper.runner) == (
            m.family, m.probes, m.better, m.value_range, m.runner), m.name
    # each paper metric has one stand-in's variant at most: a report shows that one in its place
    variants = [m.variant_of for m in stand_ins]
    assert len(variants) == len(set(variants))
    assert {m.name for m in METRICS if m.scorer == "regard" and m.stand_in is None} == set(variants)


def test_a_declared_scorer_is_the_classifier_input_its_runner_takes():
    """The GenderPair suite hands a runner the scores of the classifier its parameter names
    (``toxicity``, ``regard``): the declared scorer is that one, and a comparison's is its metric's."""
    import inspect

    for m in METRICS:
        if m.family == "genderpair":
            taken = inspect.signature(m.runner_function()).parameters
            assert m.scorer == next((r for r in ("toxicity", "regard") if r in taken), None), m.name
        elif m.of is not None and m.of in BY_NAME:
            assert m.scorer == BY_NAME[m.of].scorer and m.stand_in == BY_NAME[m.of].stand_in, m.name
        elif m.runner is not None and m.family != "mitigation":
            assert m.scorer is None, m.name


def test_a_runner_of_several_metrics_computes_those_the_catalogue_declares_of_it():
    from bias_core.runners.bbq import run_bbq

    bbq = {m.name: m.compute_function() for m in METRICS if m.runner == "bias_core.runners.bbq:run_bbq"}
    assert len(bbq) == 4 and catalogue.computed_by(run_bbq) == bbq == catalogue.computed_by("bias_core.runners.bbq:run_bbq")
    assert list(catalogue.computed_by(run_bbq, "bbq-gender")) == list(bbq)
    assert catalogue.computed_by(run_bbq, "winogender") == {}
    regard = catalogue.computed_by("bias_core.runners.genderpair:run_group_regard", "genderpair-group1")
    assert list(regard) == ["regard_negative", "regard_proxy_negative"]
