"""The benchmark scripts' own functions, imported from their files (benchmarks/ is no package)."""

from __future__ import annotations

import importlib.util
import sys

from paths import REPO


def gate_catches(monkeypatch):
    """benchmarks/gate_catches.py as a module, registered for the test only."""
    spec = importlib.util.spec_from_file_location("gate_catches", REPO / "benchmarks" / "gate_catches.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gate_catches", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
