"""The JUnit file of a partial run: what CI systems read to tell a run that did not finish.

pytest writes its JUnit file only when the session ends. A file with one error is written when
the run starts, so a killed run leaves an error for CI to see (never an earlier run's file, or
none); an interrupted run's file gets the interruption added: the properties
``bias_core.complete=false`` and ``bias_core.partial_reason``, and an errored testcase. pytest
writes to a temporary file (bias_core/pytest_plugin/outputs.py) that ``finish`` checks and moves into place.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from bias_core.storage.files import atomic_write_text
from bias_core.storage.redaction import redact
from bias_core.reports.table import NOT_FINISHED


def write_unfinished(path: Path, reason: str = NOT_FINISHED) -> None:
    """A JUnit file holding only the error that the run has not finished."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="pytest", errors="0", failures="0", skipped="0", tests="0")
    _add_partial(suite, reason)
    atomic_write_text(path, ET.tostring(suites, encoding="unicode", xml_declaration=True), durable=True)


def _add_partial(suite: ET.Element, reason: str) -> None:
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    ET.SubElement(props, "property", name="bias_core.complete", value="false")
    ET.SubElement(props, "property", name="bias_core.partial_reason", value=reason)
    case = ET.SubElement(suite, "testcase", classname="bias_core", name="audit run", time="0")
    error = ET.SubElement(case, "error", message=f"partial run: {reason}")
    error.text = f"The audit run is partial: {reason}. Its results cover only the tests listed; re-run it."
    for key in ("errors", "tests"):
        suite.set(key, str(int(suite.get(key, "0") or 0) + 1))


def finish(written: Path, final: Path, partial_reason: str | None = None) -> None:
    """Move the JUnit file pytest wrote at ``written`` to ``final`` whole: parsed first (a cut file
    is an error, never moved in), marked partial where the run was."""
    try:
        tree = ET.parse(written)
    except ET.ParseError as exc:
        written.unlink(missing_ok=True)
        raise OSError(f"pytest's JUnit file was not whole XML ({exc})") from exc
    if partial_reason is None:
        text = written.read_text(encoding="utf-8")
        if redact(text) != text:  # a secret in what pytest wrote: the redacted copy instead
            atomic_write_text(final, text, durable=True)
            written.unlink(missing_ok=True)
            return
        with written.open("rb") as fh:
            os.fsync(fh.fileno())  # durable, as the report files are
        os.replace(written, final)
        return
    root = tree.getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        suite = ET.SubElement(root, "testsuite", name="pytest", errors="0", tests="0")
    _add_partial(suite, partial_reason)
    atomic_write_text(final, ET.tostring(root, encoding="unicode", xml_declaration=True), durable=True)
    written.unlink(missing_ok=True)
