"""The tests' own layering, read with ``ast``: a test module (``test_*.py``) shares nothing by
being imported. What tests share lives in helper modules (tests/harness.py, tiny_model.py,
lm_references.py, ...) or is a fixture in tests/conftest.py, requested by name; and the audit
project is set up in one place, harness.copy_project (docs/testing.md, "The harness")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from paths import REPO, TESTS


def _shared_by_import(path: Path) -> list[str]:
    """The modules ``path`` imports that are conftest or a test module, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [f"{path.name}:{node.lineno} imports {name}" for name in names
                  if name.split(".")[0] == "conftest" or name.split(".")[0].startswith("test_")]
    return found


def test_no_module_imports_conftest_or_a_test_module():
    files = sorted(TESTS.glob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
    assert [hit for path in files for hit in _shared_by_import(path)] == []


def test_the_import_checker_sees_both_kinds_at_any_depth(tmp_path):
    bad = tmp_path / "test_x.py"
    bad.write_text("import conftest\n\ndef test_a():\n    from test_models import PROMPTS\n    from harness import only_run\n")
    assert _shared_by_import(bad) == ["test_x.py:1 imports conftest", "test_x.py:4 imports test_models"]


def test_only_the_harness_copies_the_repositorys_audits():
    copies = re.compile(r'copytree\(\s*\w+\s*/\s*"audits"')
    assert [p.name for p in sorted(TESTS.glob("*.py")) if p.name != "harness.py" and copies.search(p.read_text())] == []
