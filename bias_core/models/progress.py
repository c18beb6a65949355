"""Progress bars on a terminal, silence in CI logs."""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    return tqdm(total=total, desc=desc, disable=not (enabled and interactive()), leave=False, dynamic_ncols=True)
