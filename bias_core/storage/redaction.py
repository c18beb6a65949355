"""Secrets kept out of everything bias_core writes: the API key of a served endpoint.

A secret is registered once, where it is read (the endpoint engine's options check and its HTTP
client); from then on ``redact`` replaces it in any text with ``[redacted]``, in the forms a
server, a traceback or a report may give it back:

- as is, in any letter case (a server may upper-case an echoed header);
- URL-encoded, JSON- or repr-escaped, HTML-escaped, and base64-encoded (alone, after ``Bearer ``,
  or as either half of a ``user:password`` pair);
- in part: any run of at least ``WINDOW`` consecutive characters of a secret of at least
  ``MIN_PARTIAL`` characters (a server printing the key's start, a message cut in the middle of
  it). A random key's 10-character runs do not occur in other text by chance.

A cut never splits a backslash escape or an ``&...;`` entity, so JSON, CSV, XML and HTML stay
well-formed. ``scrub_credentials`` also blanks the values of Authorization, Cookie, API-key and
``Bearer`` fields in text a server sent, secrets registered or not.

The last line of defence is in the writers: ``storage.files.atomic_write_text`` (results.json and
csv, report.html, junit.xml, the summary) and the per-item file redact what they write, and the
pytest plugin redacts failure reports, captured output and stop messages before pytest shows or
records them.
"""

from __future__ import annotations

import base64
import html
import json
import re
import threading
from urllib.parse import quote, quote_plus

MARK = "[redacted]"
WINDOW = 10  # characters of a secret that count as a leak of it
MIN_PARTIAL = 16  # shorter secrets are redacted only whole

_DELIMITERS = "\"'<>&;\\"
_lock = threading.Lock()
_secrets: set[str] = set()
_needles: tuple[tuple[str, int, int], ...] = ()  # lower-cased strings whose occurrences are redacted (_trimmed)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from everything written from now on (whitespace around it ignored)."""
    value = (value or "").strip()
    if not value:
        return
    global _needles
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        _needles = _trimmed({n for s in _secrets for n in _forms(s, lower=True)})


def forget_secrets() -> None:
    """Drop every registered secret (tests)."""
    global _needles
    with _lock:
        _secrets.clear()
        _needles = ()


def has_secrets() -> bool:
    return bool(_needles)


def _forms(secret: str, lower: bool) -> set[str]:
    """The strings that give ``secret`` away: its encodings, and runs of those but base64's."""
    marked_up = html.escape(secret, quote=False)  # & < >; then each way XML and HTML writers give quotes
    encoded = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), json.dumps(secret)[1:-1],
               repr(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    encoded |= {marked_up.replace('"', dq).replace("'", sq)
                for dq in ('"', "&quot;", "&#34;") for sq in ("'", "&#x27;", "&#39;", "&apos;")}
    needles = _base64_cores(secret)
    for form in encoded:
        needles.add(form)
        if len(secret) >= MIN_PARTIAL:
            needles.update(form[i:i + WINDOW] for i in range(len(form) - WINDOW + 1))
    return {n.lower() for n in needles} if lower else needles


def _trimmed(needles: set[str]) -> tuple[tuple[str, int, int], ...]:
    """Each needle with how many of its first and last characters are quotes, brackets or escape
    characters: those are matched but not redacted, as they may be the text's own delimiters
    (a JSON string's closing quote), and redacting them would break the file."""
    out = []
    for n in needles:
        core = n.strip(_DELIMITERS)
        if core:
            lead = len(n) - len(n.lstrip(_DELIMITERS))
            out.append((n, lead, len(n) - lead - len(core)))
    return tuple(out)


def _base64_cores(secret: str) -> set[str]:
    """What any base64 text holding ``secret`` holds, wherever the secret starts (three alignments):
    the characters that depend on the secret's bytes alone."""
    data = secret.encode()
    cores = set()
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + data).decode()
        start, end = (4 * lead + 2) // 3, (lead + len(data)) // 3 * 4
        cores.add(encoded[start:end])
    return {c for c in cores if len(c) >= 8}


def redact(text: str) -> str:
    """``text`` with every registered secret (whole, encoded or in part) replaced by ``[redacted]``."""
    needles = _needles
    if not needles or not text:
        return text
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters lower-case to two: match the case as written
        lowered, needles = text, _trimmed({n for s in _secrets for n in _forms(s, lower=False)})
    spans = []
    for needle, lead, trail in needles:
        start = lowered.find(needle)
        while start >= 0:
            spans.append((start + lead, start + len(needle) - trail))
            start = lowered.find(needle, start + 1)
    if not spans:
        return text
    out, at = [], 0
    for start, end in _merged(spans, text):
        out += [text[at:start], MARK]
        at = end
    out.append(text[at:])
    return "".join(out)


def _merged(spans: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(_whole_escapes(s, e, text) for s, e in spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _whole_escapes(start: int, end: int, text: str) -> tuple[int, int]:
    """The span widened so that it neither starts nor ends inside ``\\x``, ``\\uXXXX`` or ``&name;``."""
    escape = _escape_over(start, text)
    if escape is not None:
        start = escape[0]
    escape = _escape_over(end, text)
    if escape is not None:
        end = escape[1]
    amp = text.rfind("&", max(0, start - 10), start)
    if amp >= 0 and re.fullmatch(r"&#?\w*", text[amp:start]):
        start = amp
    amp = text.rfind("&", max(start, end - 10), end)
    if amp >= 0 and re.fullmatch(r"&#?\w*", text[amp:end]):
        close = text.find(";", end, end + 10)
        end = close + 1 if close >= 0 else end
    return start, min(end, len(text))


def _escape_over(at: int, text: str) -> tuple[int, int] | None:
    """The backslash escape that position ``at`` falls strictly inside, as (start, end), or None."""
    for back in range(1, 6):
        b = at - back
        if b < 0 or text[b] != "\\":
            continue
        run = 0
        while b - run >= 0 and text[b - run] == "\\":
            run += 1
        if run % 2 == 0:  # an escaped backslash, itself the end of an escape
            continue
        length = 6 if text[b + 1:b + 2] == "u" else 2
        return (b, b + length) if b < at < b + length else None
    return None


# Credentials in text a server sent back: the value after the field's name, up to the end of
# the line, a quote or a comma (a JSON string, an HTTP header line, a form field).
_CREDENTIAL = re.compile(
    r"""(?ix)
    (\b(?:proxy-)?authorization|\b(?:set-)?cookie|\bx-api-key|\bapi[-_]?key|\baccess[-_]?token)
    (["']?\s*[:=]\s*["']?)
    ([^"'\r\n,}]+)""")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")


def scrub_credentials(text: str) -> str:
    """``text`` from a server with registered secrets redacted and every credential field's value blanked."""
    text = redact(text)
    text = _CREDENTIAL.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {MARK}", text)
