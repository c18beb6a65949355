"""Are two audit runs the same, number for number? For refactors that must not move a result.

    python benchmarks/compare_results.py A/results.json B/results.json [--rel-tol 0]

Rows are lined up by ``test_id``; for each, ``value``, ``ci_low``, ``ci_high``, ``n``, ``verdict``
and ``p_value`` (reported where a paper tests significance; None elsewhere) must be equal
(exactly, unless --rel-tol is given for the four numbers). A test
present in one run only is a difference too. Prints one line per difference and a summary.
Exit status: 0 when the runs agree, 1 on any difference, 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FIELDS = ("value", "ci_low", "ci_high", "n", "verdict", "p_value")
NUMBERS = ("value", "ci_low", "ci_high", "p_value")


def load_rows(path: Path) -> dict[str, Mapping[str, Any]]:
    """test_id -> row; a test_id seen twice (one row per variant) gets its occurrence appended."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = doc["results"] if isinstance(doc, Mapping) else doc
    out: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        key = str(row["test_id"])
        seen, k = key, 1
        while seen in out:
            k += 1
            seen = f"{key} #{k}"
        out[seen] = row
    return out


def _same(field: str, a: Any, b: Any, rel_tol: float) -> bool:
    if field in NUMBERS and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0)
    return a == b


def differences(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]],
                rel_tol: float = 0.0) -> list[str]:
    out = [f"{t}: only in A" for t in a if t not in b] + [f"{t}: only in B" for t in b if t not in a]
    for t in (t for t in a if t in b):
        for field in FIELDS:
            va, vb = a[t].get(field), b[t].get(field)
            if not _same(field, va, vb, rel_tol):
                out.append(f"{t}: {field} {va!r} != {vb!r}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--rel-tol", type=float, default=0.0, help="relative tolerance for value, CI and p-value (default 0: exact)")
    args = parser.parse_args(argv)
    try:
        a, b = load_rows(args.a), load_rows(args.b)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read the results: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    diffs = differences(a, b, args.rel_tol)
    for line in diffs:
        print(line)
    shared = sum(1 for t in a if t in b)
    print(f"{len(diffs)} difference(s); {shared} test(s) in both, {len(a)} in A, {len(b)} in B")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
