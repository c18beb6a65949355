"""The pytest plugin's modules import one another without a cycle, counting every import: those
inside functions and those under ``if TYPE_CHECKING:`` too (a type-only cycle still ties two
modules' designs together, as ``RunState`` and the regression gate once were). Read with ``ast``,
nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent.parent / "bias_core" / "pytest_plugin"
PACKAGE = "bias_core.pytest_plugin"


def plugin_import_graph(folder: Path = PLUGIN, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports (the package itself is its ``__init__``)."""
    modules = {package if p.stem == "__init__" else f"{package}.{p.stem}": p for p in sorted(folder.glob("*.py"))}
    graph = {}
    for name, path in modules.items():
        here = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - (node.level - 1)] + ([base] if base else []))
                # ``from pkg import sub`` depends on the submodule, ``from pkg import name`` on pkg
                targets = {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            else:
                continue
            deps |= (targets & modules.keys()) - {name}
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == 1:
                return [*path[path.index(child):], child]
            if child not in state:
                found = visit(child)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for root in sorted(graph):
        if root not in state:
            found = visit(root)
            if found:
                return found
    return None


def test_the_plugin_modules_import_one_another_without_a_cycle():
    graph = plugin_import_graph()
    assert f"{PACKAGE}.regression_session" in graph and f"{PACKAGE}.session_state" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_run_state_knows_nothing_of_the_regression_gate():
    assert not {m for m in plugin_import_graph()[f"{PACKAGE}.session_state"] if ".regression" in m}


def test_the_checker_sees_type_only_deferred_and_relative_imports(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from .a import x\n")
    graph = plugin_import_graph(pkg, "p")
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}
    assert find_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    (pkg / "c.py").write_text("import p\n")
    assert find_cycle(plugin_import_graph(pkg, "p")) is None
