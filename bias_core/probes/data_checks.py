"""The up-front check of ``--data-dir``: every published file the audits would read, checked
before any model loads (the loaders check again as they read, with the same declarations)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bias_core.probes.published import DataDirFile, check_published


def check_data_dir(data_dir: Path, files: Iterable[DataDirFile]) -> list[str]:
    """Check the first present candidate of each of ``files`` (the catalogue's ``data_files()``:
    the one its loader reads) in ``data_dir``, before any model loads. Raises DataFileError for a
    cut or broken copy; returns the notices for valid but modified copies."""
    notices = []
    for file in files:
        path = file.present(Path(data_dir))
        if path is not None:
            notice = check_published(path, file)
            if notice:
                notices.append(notice)
    return notices
