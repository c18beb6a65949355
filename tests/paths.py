"""Where the tests find the repository, their own folder and the seed papers' data.

The data lies beside the repository in CI and on the developers' machines (../shared/data); a
checkout elsewhere (a git worktree, a fresh clone) names it with BIAS_CORE_SHARED_DATA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = Path(os.environ.get("BIAS_CORE_SHARED_DATA") or REPO.parent / "shared" / "data")

needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(),
    reason=f"the seed papers' data is not at {SHARED}: put it beside the repository (../shared/data) "
           "or set BIAS_CORE_SHARED_DATA to its folder")
