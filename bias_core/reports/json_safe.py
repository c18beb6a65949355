"""Turning run data into values strict JSON accepts.

A leaf module: both the results table and the HTML report need it, and keeping it here stops
``reports/html.py`` and ``reports/table.py`` from importing each other.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any


def jsonable(obj: Any) -> Any:
    """A deep copy of ``obj`` that ``json.dumps(..., allow_nan=False)`` accepts.

    NaN/inf become ``None`` (strict JSON), numpy scalars become Python numbers, tuples and sets
    become lists, anything else unknown becomes its ``str``.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((jsonable(v) for v in obj), key=repr)
    item = getattr(obj, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return str(obj)
