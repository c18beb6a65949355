"""Every name that a benchmark or script imports from bias_core exists.

The benchmarks run only in slow tests or by hand, so a renamed or removed name (a runner's metric
table moved into the catalogue) would otherwise surface as an ImportError in a CI run's slow tier.
Read statically, so no benchmark's heavy imports (lm-eval, vLLM) run here.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks", "scripts")


def _imports() -> list[tuple[str, int, str, str]]:
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("bias_core"):
                    found += [(str(path.relative_to(REPO)), node.lineno, node.module, a.name) for a in node.names]
    return found


IMPORTS = _imports()


def test_the_benchmarks_import_something_from_bias_core():
    assert len({path for path, *_ in IMPORTS}) >= 5


@pytest.mark.parametrize("module", sorted({m for _, _, m, _ in IMPORTS}))
def test_every_name_a_benchmark_imports_from_bias_core_exists(module):
    owner = importlib.import_module(module)
    missing = []
    for path, line, mod, name in IMPORTS:
        if mod != module or name == "*" or hasattr(owner, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            missing.append(f"{path}:{line} imports {name!r} from {module}")
    assert not missing, "; ".join(missing)
