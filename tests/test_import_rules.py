"""The layering rules of bias_core, read from the source with ``ast`` (nothing is imported).

- No import cycles among bias_core modules at import time.
- Nor through imports deferred into a function (KNOWN_DEFERRED_CYCLES is empty and stays so:
  a cycle hidden in a function is still a cycle).
- Probes hold data and metrics are pure functions: no module under ``bias_core/probes/`` or
  ``bias_core/metrics/`` imports models, runners or suites, not even inside a function.
- The layers: each part of bias_core imports only what ``MAY_IMPORT`` lets it (stats and gating
  no models, runners or suites; models nothing above them; only ``pytest_plugin`` imports pytest,
  and only ``bias_core.plugin`` imports ``pytest_plugin``); the top of bias_core holds only the
  entry point and the public declarations, and every package's docstring says what it holds.
- The model seam: outside ``bias_core/models/`` nothing imports an engine's modules (only the
  seam's public ones: the protocol, loading, decoding, precision, training, ...), and nothing
  reads a model handle's engine internals (``lm.model``, ``lm.tokenizer``, ``lm.cache``,
  ``lm.engine``, ...): fine-tuning reaches the torch module through ``lm.training()``.

Relative and absolute imports both count. ``from pkg import sub`` counts as importing the
submodule ``pkg.sub`` (that is what the code depends on), ``from pkg import name`` as importing
``pkg``. Imports under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bias_core"

# Cycles closed only by an import inside a function (it runs when called, after both modules
# are loaded). Each is a debt of issue #11, not a pattern to copy:
KNOWN_DEFERRED_CYCLES: set[frozenset[str]] = set()  # none left: a new one fails below

LOWER_LAYERS = ("bias_core.probes", "bias_core.metrics")
UPPER_LAYERS = ("bias_core.models", "bias_core.runners", "bias_core.suites")


def _modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """(import node, deferred: inside a function) for every import that can run."""
    def walk(node: ast.AST, deferred: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk_one(other, deferred)
                continue
            yield from walk_one(child, deferred)

    def walk_one(node: ast.AST, deferred: bool):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, deferred
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from walk(node, inner)

    yield from walk(tree, False)


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_init: bool, modules) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if node.level:
        here = name.split(".") if is_init else name.split(".")[:-1]
        base = here[: len(here) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    subs = {f"{module}.{a.name}" for a in node.names} & modules.keys()
    return subs if len(subs) == len(node.names) else subs | {module}


def import_graph(deferred_too: bool, package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    graph = {}
    for name, (path, is_init) in modules.items():
        deps = set()
        for node, deferred in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if deferred and not deferred_too:
                continue
            deps |= {t for t in _targets(node, name, is_init, modules) if t in modules and t != name}
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_import_cycles_at_import_time():
    assert cycles(import_graph(deferred_too=False)) == []


def test_deferred_import_cycles_are_only_the_known_ones():
    found = set(cycles(import_graph(deferred_too=True)))
    new = [sorted(c) for c in found - KNOWN_DEFERRED_CYCLES]
    assert not new, f"new import cycles (through imports inside functions): {new}"
    # a fixed one is taken off the list, so the list stays true
    assert not KNOWN_DEFERRED_CYCLES - found, "a known cycle is gone: remove it from KNOWN_DEFERRED_CYCLES"


def test_probes_and_metrics_do_not_import_models_runners_or_suites():
    graph = import_graph(deferred_too=True)
    bad = {name: sorted(d for d in deps if d.startswith(UPPER_LAYERS))
           for name, deps in graph.items() if name.startswith(LOWER_LAYERS)}
    assert {k: v for k, v in bad.items() if v} == {}


# The seam's public modules: what code outside bias_core/models/ may import from it.
MODEL_SEAM = {"bias_core.models", "bias_core.models.protocol", "bias_core.models.decoding", "bias_core.models.loading",
              "bias_core.models.registry", "bias_core.models.scored_tokens", "bias_core.models.precision.modes",
              "bias_core.models.placement.devices", "bias_core.models.weights.preflight", "bias_core.models.weights.adapter",
              "bias_core.models.engines", "bias_core.models.engines.options", "bias_core.models.training",
              "bias_core.models.progress"}
# Attributes of an engine that a model handle does not expose; read on anything named like a
# model handle (lm, self.lm, variant.lm, audit_model, baseline_lm, ...) they mean reaching past the seam.
ENGINE_INTERNALS = {"model", "tokenizer", "cache", "engine", "device", "mask_token", "stats", "plan", "eos_ids",
                    "split_request", "split_requests", "encode", "prefix_token_id", "weights_sha256", "_key"}
HANDLE_NAMES = ("lm", "audit_model", "model_handle")


def _handle_name(node: ast.expr) -> str | None:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name if name and (name in HANDLE_NAMES or name.endswith("_lm")) else None


def seam_violations(package: Path = PACKAGE) -> list[str]:
    """Imports of engine modules and reads of engine internals outside bias_core/models/."""
    modules = _modules(package)
    found = []
    for name, (path, is_init) in modules.items():
        if name == "bias_core.models" or name.startswith("bias_core.models."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, _ in _imports(tree):
            for target in _targets(node, name, is_init, modules):
                if target.startswith("bias_core.models.") and target not in MODEL_SEAM:
                    found.append(f"{name}:{node.lineno} imports {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ENGINE_INTERNALS and _handle_name(node.value):
                found.append(f"{name}:{node.lineno} reads {_handle_name(node.value)}.{node.attr}")
    return found


def test_nothing_outside_models_touches_an_engines_internals():
    assert seam_violations() == []


# ----- the layers, package by package ----------------------------------------------------------
# What each part of bias_core may import of bias_core (besides itself), deferred imports
# included. The table is the architecture (docs/architecture.md, "The import rules"): a new edge
# is a decision, made here in one line, not an accident. ``bias_core`` alone is the package's
# own __init__ (its version).
MAY_IMPORT = {
    "bias_core.errors": set(),
    "bias_core.storage": set(),
    "bias_core.metric_spec": set(),
    "bias_core.stats": {"bias_core.errors"},
    "bias_core.probes": {"bias_core.errors", "bias_core.storage"},
    "bias_core.catalogue": {"bias_core.metric_spec", "bias_core.probes"},
    # models read the placeholders probes write into their texts, and no other part of probes
    "bias_core.models": {"bias_core.errors", "bias_core.storage", "bias_core.probes.placeholders"},
    "bias_core.metrics": {"bias_core.errors", "bias_core.probes", "bias_core.stats"},
    "bias_core.classifiers": {"bias_core.errors", "bias_core.probes", "bias_core.models"},
    # a runner of several metrics computes, by default, those the catalogue declares of it
    # (catalogue.computed_by), never a table of names of its own
    "bias_core.runners": {"bias_core.errors", "bias_core.probes", "bias_core.models", "bias_core.metrics",
                          "bias_core.stats", "bias_core.catalogue"},
    "bias_core.gating": {"bias_core.errors", "bias_core.storage", "bias_core.metric_spec", "bias_core.catalogue",
                         "bias_core.probes", "bias_core.metrics", "bias_core.stats"},
    # mitigation reads the catalogue for what its tables are keyed by (the trade-off's axes, the
    # mitigation table's metrics and data sets), never a list of names of its own
    "bias_core.mitigation": {"bias_core.errors", "bias_core.storage", "bias_core.catalogue", "bias_core.probes",
                             "bias_core.models", "bias_core.metrics", "bias_core.stats"},
    "bias_core.suites": {"bias_core.errors", "bias_core.catalogue", "bias_core.probes", "bias_core.models",
                         "bias_core.classifiers", "bias_core.runners", "bias_core.metrics", "bias_core.stats",
                         "bias_core.gating", "bias_core.mitigation"},
    # the HTML report rebuilds the trade-off figures and the mitigation table from a run's files
    "bias_core.reports": {"bias_core", "bias_core.errors", "bias_core.storage", "bias_core.catalogue",
                          "bias_core.metrics", "bias_core.gating", "bias_core.mitigation", "bias_core.suites"},
    # writes a new metric's files from the catalogue's declarations (python -m bias_core.scaffold)
    "bias_core.scaffold": {"bias_core.errors", "bias_core.metric_spec", "bias_core.catalogue"},
    "bias_core.pytest_plugin": {"*"},  # ties everything together; nothing but bias_core.plugin imports it
    "bias_core.plugin": {"bias_core.pytest_plugin"},
}
# The modules that may sit at the top of bias_core: the rest lives in a package named for its role.
TOP_LEVEL = {"__init__.py", "plugin.py", "errors.py", "catalogue.py", "metric_spec.py"}
# Third-party modules only the pytest integration imports.
PYTEST_ONLY = ("pytest", "_pytest", "pluggy", "xdist")


def _part(module: str) -> str | None:
    """The MAY_IMPORT key a module belongs to (the longest that is it or a package above it)."""
    keys = [k for k in MAY_IMPORT if module == k or module.startswith(k + ".")]
    return max(keys, key=len) if keys else None


def layer_violations(package: Path = PACKAGE) -> list[str]:
    found = []
    for name, deps in import_graph(deferred_too=True, package=package).items():
        part = _part(name)
        allowed = MAY_IMPORT.get(part, set()) if part else set()
        if "*" in allowed:
            continue
        for dep in sorted(deps):
            if _part(dep) == part or (dep == "bias_core" and "bias_core" in allowed):
                continue
            if not any(dep == a or dep.startswith(a + ".") for a in allowed if a != "bias_core"):
                found.append(f"{name} imports {dep}")
    return found


def test_each_part_imports_only_what_its_layer_may():
    assert layer_violations() == [], "an import across the layers (MAY_IMPORT; docs/architecture.md)"


def test_every_module_belongs_to_a_part_of_the_table():
    assert [name for name in _modules() if name != "bias_core" and _part(name) is None] == []


def test_only_the_pytest_integration_imports_pytest():
    found = []
    for name, (path, _) in _modules().items():
        if name.startswith("bias_core.pytest_plugin"):
            continue
        for node, _deferred in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{name}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in PYTEST_ONLY]
    assert found == []


def test_the_top_level_holds_only_the_entry_point_and_the_public_declarations():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == sorted(TOP_LEVEL), ("a module at the top of bias_core: put it in the package named for "
                                        "its role (docs/architecture.md, 'Where a new piece goes')")


def test_every_package_says_what_it_holds():
    missing = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("__init__.py"))
               if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert missing == []


def test_layer_checker_flags_an_import_outside_the_table(tmp_path):
    pkg = _write(tmp_path, {"__init__.py": "", "stats/__init__.py": "", "stats/s.py": "import bias_core.gating.g\n",
                            "gating/__init__.py": "", "gating/g.py": "from bias_core.stats import s\n",
                            "models/__init__.py": "", "models/m.py": "from bias_core.probes.placeholders import MASK\n"
                                                                      "def f():\n    from bias_core.probes import base\n",
                            "probes/__init__.py": "", "probes/base.py": "", "probes/placeholders.py": ""})
    assert layer_violations(pkg) == ["bias_core.models.m imports bias_core.probes.base",
                                     "bias_core.stats.s imports bias_core.gating.g"]


# ----- the checker itself, on a package written here ------------------------------------------
def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "bias_core" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "bias_core"


def test_checker_sees_relative_absolute_and_deferred_imports(tmp_path):
    pkg = _write(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "from bias_core.c import x\n",
        "c.py": "def f():\n    from .a import y\n",
        "probes/__init__.py": "",
        "probes/p.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bias_core.models import m\n"
                       "def g():\n    from ..models.m import z\n",
        "models/__init__.py": "",
        "models/m.py": "",
    })
    assert import_graph(False, pkg)["bias_core.a"] == {"bias_core.b"}
    assert cycles(import_graph(False, pkg)) == []
    assert cycles(import_graph(True, pkg)) == [frozenset({"bias_core.a", "bias_core.b", "bias_core.c"})]
    assert import_graph(False, pkg)["bias_core.probes.p"] == set()  # TYPE_CHECKING and deferred left out
    assert import_graph(True, pkg)["bias_core.probes.p"] == {"bias_core.models.m"}


@pytest.mark.parametrize("line", ["import bias_core.runners.x", "from bias_core.runners import x", "from ..runners.x import f"])
def test_checker_flags_a_metric_importing_a_runner(tmp_path, line):
    pkg = _write(tmp_path, {"__init__.py": "", "metrics/__init__.py": "", "metrics/m.py": line + "\n",
                            "runners/__init__.py": "", "runners/x.py": ""})
    assert "bias_core.runners.x" in import_graph(True, pkg)["bias_core.metrics.m"]


def test_seam_checker_flags_engine_imports_and_internal_reads(tmp_path):
    pkg = _write(tmp_path, {
        "__init__.py": "", "models/__init__.py": "", "models/engines/hf/causal.py": "", "models/protocol.py": "",
        "models/inner.py": "from bias_core.models.engines.hf.causal import x\n",  # inside the seam: allowed
        "plugin.py": "from bias_core.models.protocol import ScoringModel\ndef f(lm):\n    return lm.cache.hits\n",
        "runners/__init__.py": "",
        "runners/r.py": "def f(self):\n    from bias_core.models.engines.hf.causal import CausalLM\n    return self.lm.tokenizer\n",
        "mitigation/__init__.py": "",
        "mitigation/m.py": "def f(lm):\n    t = lm.training()\n    return t.model, lm.name\n",
    })
    assert sorted(seam_violations(pkg)) == ["bias_core.plugin:3 reads lm.cache",
                                            "bias_core.runners.r:2 imports bias_core.models.engines.hf.causal",
                                            "bias_core.runners.r:3 reads lm.tokenizer"]
