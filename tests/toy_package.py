"""A package written into a folder, found by importlib.metadata: how tests stand in for another
installed package that registers an entry point (a suite, an engine)."""

from __future__ import annotations

from pathlib import Path


def write_toy_package(site: Path, module: str, source: str, group: str, entry: str) -> None:
    """``site/module/__init__.py`` holding ``source``, and a dist-info declaring ``entry`` (e.g.
    ``toy = toy_bias``) in the entry-point ``group``."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
