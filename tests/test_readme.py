"""The README's front door stays true to the code: its family table names the catalogue's families,
its links into docs/ resolve (anchors included), and it links every audit page of the manual."""

from __future__ import annotations

import re
import unicodedata

from bias_core import catalogue

from paths import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
# A Markdown link to a page of the manual: [text](docs/page.md) or [text](docs/page.md#heading).
DOCS_LINK = re.compile(r"\]\((docs/[^)\s#]+)(?:#([^)\s]+))?\)")
MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|[`*_]")  # a link keeps its text; code and emphasis marks go


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def family_table_rows(text: str) -> list[str]:
    """The first column of the Markdown table whose first header cell is "family", markup removed."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and _cells(line)[0].lower() == "family":
            rows = []
            for row in lines[i + 2:]:  # past the header and its |---| line
                if not row.lstrip().startswith("|"):
                    break
                rows.append(MARKUP.sub(lambda m: m.group(1) or "", _cells(row)[0]).strip())
            return rows
    raise AssertionError('README.md has no table whose first column is headed "family"')


def catalogue_families() -> set[str]:
    """The families of the project's own probes (PROBE_SPECS: not those a test or package registered)."""
    return {p.family for p in catalogue.PROBE_SPECS if p.family is not None}


def heading_slug(heading: str) -> str:
    """The anchor MkDocs' toc (and GitHub) give a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", MARKUP.sub(lambda m: m.group(1) or "", text)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_readme_family_table_lists_exactly_the_catalogue_families():
    rows = family_table_rows(README.read_text(encoding="utf-8"))
    assert len(rows) == len(set(rows)), f"a family has two rows in README.md's table: {rows}"
    families = catalogue_families()
    assert "mitigation" in families  # the mitigation row is the catalogue's mitigation family, not an extra
    assert set(rows) == families, (f"README.md's family table ({sorted(rows)}) is not the catalogue's families "
                                   f"({sorted(families)}): add or remove the row in the table of 'What it is'")


def test_family_table_check_catches_a_catalogue_family_without_a_readme_row():
    text = README.read_text(encoding="utf-8")
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| association |"))
    assert set(family_table_rows(text)) == catalogue_families()
    assert set(family_table_rows(without)) != catalogue_families()


def test_family_table_rows_drop_links_and_code_marks():
    text = "| family | from |\n|---|---|\n| [disclosure](docs/audits/disclosure.md) | x |\n| `genderpair` | y |\n\nafter\n"
    assert family_table_rows(text) == ["disclosure", "genderpair"]


def test_readme_links_into_docs_point_at_existing_pages_and_headings():
    links = DOCS_LINK.findall(README.read_text(encoding="utf-8"))
    assert links, "README.md links to no page under docs/"
    missing = [page for page, _ in links if not (REPO / page).is_file()]
    assert missing == [], f"README.md links to docs pages that do not exist: {missing}"
    broken = []
    for page, anchor in links:
        if anchor and page.endswith(".md"):
            headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", (REPO / page).read_text(encoding="utf-8"), re.MULTILINE)
            if anchor not in {heading_slug(h) for h in headings}:
                broken.append(f"{page}#{anchor}")
    assert broken == [], f"README.md links to headings that do not exist: {broken}"


def test_heading_slug_matches_the_manuals_anchors():
    assert heading_slug("What ran on a GPU (one H100, 2026-11-27)") == "what-ran-on-a-gpu-one-h100-2026-11-27"
    assert heading_slug("GenderCARE's re-audit after CDA") == "gendercares-re-audit-after-cda"


def test_readme_links_every_audit_page_of_the_manual():
    linked = {page for page, _ in DOCS_LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {f"docs/audits/{p.name}" for p in (DOCS / "audits").glob("*.md")}
    assert pages - linked == set(), f"README.md's list of docs leaves out audit pages: {sorted(pages - linked)}"
