"""Keep the metric table of the docs equal to the catalogue (``bias_core.catalogue.markdown_table``).

    .venv/bin/python scripts/metric_table.py          # rewrite the table in docs/audits/index.md
    .venv/bin/python scripts/metric_table.py --check  # exit 1 if it is stale (tests/test_catalogue.py asserts it)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "audits" / "index.md"
BEGIN = "<!-- metric-table:begin -->\n"
END = "<!-- metric-table:end -->"


def split(text: str, where: str = str(PAGE)) -> tuple[str, str, str]:
    """(before, table, after) around the markers; the table excludes them."""
    start = text.find(BEGIN)
    end = text.find(END, start + len(BEGIN)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise ValueError(f"{where} has no metric table markers: put {BEGIN.strip()!r} and {END!r} on lines "
                         "of their own where the table goes")
    return text[: start + len(BEGIN)], text[start + len(BEGIN): end], text[end:]


def with_table(text: str, table: str, where: str = str(PAGE)) -> str:
    before, _, after = split(text, where)
    return before + table + after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the table is current")
    args = parser.parse_args(argv)
    from bias_core.catalogue import markdown_table

    text = PAGE.read_text(encoding="utf-8")
    new = with_table(text, markdown_table())
    if new == text:
        print(f"{PAGE.relative_to(ROOT)}: the metric table is current")
        return 0
    if args.check:
        print(f"{PAGE.relative_to(ROOT)}: the metric table is stale; run .venv/bin/python scripts/metric_table.py")
        return 1
    PAGE.write_text(new, encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)}: metric table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
