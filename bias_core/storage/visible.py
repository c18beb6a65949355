"""Text from outside the run (a generation, a served answer, a data file, a downloaded baseline)
made safe to show: no character in it can drive a terminal, cut a file or hide what surrounds it.

``visible(text)`` writes each such character as a ``\\xNN`` or ``\\uNNNN`` escape (``\\x1b``,
``\\x00``, ``\\x0d``, ``\\x9b``, ``\\u202e``), so a reader sees that something was there and what:

- C0 controls but tab and newline (NUL, BEL, ESC, carriage return, ...), DEL, and C1 controls
  (U+0080-U+009F: CSI U+009B is ESC [ to some terminals);
- the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which
  reorder the text around them on screen;
- lone surrogates (U+D800-U+DFFF), which UTF-8 cannot encode (a file write would fail on them).

The human-readable outputs go through it (report.html, results.csv, the Markdown summary, the
terminal's lines and progress lines); JSON files keep the exact text (JSON escapes controls).
"""

from __future__ import annotations

import re

_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control, bidi override and lone surrogate written as its escape;
    tab and newline kept. Idempotent: its output holds none of them."""
    return _HIDDEN.sub(_escape, text)

