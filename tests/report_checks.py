"""What a reader of report.html must get, checked in the tests and by benchmarks/check_report.py
(which checks the whole default audit's report): the verdict first, nothing wider than the
screen at 1280 and 500 px, no console errors, every section expanded in print, and no markup
that makes a browser fetch or run anything."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

#: report.html of the whole default audit stays small enough to mail and to open on a phone
SIZE_BUDGET = 600_000


def check_page(browser, path: Path, headline: str) -> None:
    """``path`` opened in ``browser`` (headless.HeadlessChromium) at 1280 and 500 px and in print."""
    for width in (1280, 500):
        page = browser.open(path, width=width)
        assert page["first_line"] == headline, width
        assert page["too_wide"] == [], (width, page["too_wide"][:5])
        assert page["scroll_width"] <= page["viewport"], width
        assert page["errors"] == [], width
    printed = browser.open(path, width=800, media="print")
    assert printed["closed_details"] > 0 and printed["closed_details_shown"] == printed["closed_details"]


class _LoadFinder(HTMLParser):
    """Markup that would make a browser fetch or run something. Model-generated text shown in the
    report is escaped and may legitimately contain "url(" or "http://"; only markup counts."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "link", "iframe", "object", "embed"):
            self.loads.append(f"<{tag}>")
        self._in_style = tag == "style"
        for name, value in attrs:
            value = value or ""
            if name in ("src", "href", "srcset", "data", "action") and re.match(r"\s*(https?:)?//", value, re.I):
                self.loads.append(f"{tag}[{name}]={value}")
            if name == "style" and re.search(r"url\(|@import", value, re.I):
                self.loads.append(f"{tag}[style]={value}")

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style and re.search(r"@import|url\(\s*['\"]?\s*(https?:)?//", data, re.I):
            self.loads.append("style sheet loads a URL")


def external_loads(text: str) -> list[str]:
    """Markup in ``text`` that would make a browser fetch or run something."""
    finder = _LoadFinder()
    finder.feed(text)
    return finder.loads
