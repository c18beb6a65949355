"""The README and the manual in docs/: links that resolve, and a manual that builds in strict mode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# A Markdown link's target: [text](target) with no scheme (http:, mailto:) and not a bare anchor.
LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s]+)\)")


def test_readme_links_point_at_files_that_exist():
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    assert targets, "the README links to no docs page"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


def test_readme_opens_with_the_two_fresh_machine_commands():
    head = README.read_text(encoding="utf-8").split("\n## ")[0]
    assert "    bash scripts/setup.sh && .venv/bin/python -m pytest audits --data-dir ../shared/data\n" in head
    assert "    bash scripts/setup.sh --dev && .venv/bin/python -m pytest tests -n 2\n" in head


def test_link_pattern_skips_urls_and_anchors():
    text = "[a](docs/x.md) [b](https://example.org/y) [c](#here) [d](docs/z.md#part) [e](mailto:a@b)"
    assert LINK.findall(text) == ["docs/x.md", "docs/z.md#part"]


def test_manual_builds_in_strict_mode(tmp_path):
    """What .ci/run does: a broken link or anchor, or a page left out of the nav, fails."""
    pytest.importorskip("mkdocs", reason="mkdocs is installed by scripts/setup.sh --dev")
    pytest.importorskip("material", reason="mkdocs-material is installed by scripts/setup.sh --dev")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "audits" / "index.html").is_file()
