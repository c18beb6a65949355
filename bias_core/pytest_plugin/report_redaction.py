"""The plugin's last line against leaked secrets: a test report's failure text, captured output
and properties are redacted (bias_core/storage/redaction.py) before pytest shows them, writes them
to JUnit or sends them from an xdist worker, whatever raised the failure."""

from __future__ import annotations

from typing import Any

from bias_core.storage.redaction import redact


def redact_report(report: Any) -> None:
    """Redact ``report`` in place; a failure's text that held a secret becomes plain text."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        report.longrepr = tuple(redact(x) if isinstance(x, str) else x for x in longrepr)
    elif longrepr is not None:
        text = str(longrepr)
        clean = redact(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(title, redact(content)) for title, content in report.sections]
    report.user_properties = [(name, redact(value) if isinstance(value, str) else value)
                              for name, value in report.user_properties]
