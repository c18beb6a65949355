"""The API key of a served endpoint never leaves the request: every failure of the endpoint (at
load and mid-run: 401, 403, other refusals echoing the request's headers, 5xx bodies, answers
that are not JSON or not an answer, timeouts) is run with a key, and the messages, the terminal
and every file of the run folder are searched for it, whole, encoded or in part. Refusals of the
key say so and name the variable to fix. The redaction itself (bias_core/storage/redaction.py) is
checked on every form it promises, and on JSON, XML and HTML it must leave well-formed."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
import xml.etree.ElementTree as ET
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core.errors import AuditUsageError, EngineUnavailable
from bias_core.models import LoadOptions, load_model, resolve_model
from bias_core.storage import redaction
from bias_core.storage.files import atomic_write_text
from bias_core.storage.redaction import MARK, WINDOW, redact, register_secret, scrub_credentials

from harness import load_tiny, run_folders
from openai_stub_server import Chain, Refuse, Silent, StubServer

pytest_plugins = ["pytester"]

# '+', '/' and '~' change under URL-encoding; long enough for its runs to count (MIN_PARTIAL)
SECRET = "sk-live+7f3a/9c~Q4never-written-anywhere"
KEY_ENV = "BIAS_CORE_TEST_KEY"


def leaks(text: str, secret: str = SECRET) -> list[str]:
    """The ways ``text`` gives ``secret`` away: whole (any case), URL-encoded, base64 after
    'Bearer ', or any run of WINDOW of its characters."""
    low = text.lower()
    forms = {secret, quote(secret, safe=""), base64.b64encode(f"Bearer {secret}".encode()).decode().rstrip("=")}
    found = [f for f in forms if f.lower() in low]
    found += [secret[i:i + WINDOW] for i in range(len(secret) - WINDOW + 1) if secret[i:i + WINDOW].lower() in low]
    return found


@pytest.fixture
def secret():
    redaction.forget_secrets()
    register_secret(SECRET)
    yield SECRET
    redaction.forget_secrets()


# ----- the redaction ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shown", [
    SECRET, SECRET.upper(), f"Bearer {SECRET}", quote(SECRET, safe=""), quote(f"Bearer {SECRET}", safe=""),
    json.dumps(SECRET), repr(SECRET), html.escape(SECRET),
    base64.b64encode(f"Bearer {SECRET}".encode()).decode(), base64.b64encode(f"user:{SECRET}".encode()).decode(),
    SECRET[:14] + "****" + SECRET[-4:], SECRET[7:7 + WINDOW],
], ids=["whole", "upper", "bearer", "url", "url-bearer", "json", "repr", "html", "b64-bearer", "b64-basic",
        "start-shown", "one-run"])
def test_every_form_of_the_secret_is_redacted(secret, shown):
    text = f"the server said: {shown} (request 12)"
    out = redact(text)
    assert not leaks(out) and MARK in out
    assert out.startswith("the server said: ") and out.endswith(" (request 12)")


def test_text_without_the_secret_is_left_as_it_is(secret):
    text = "GLD 0.0755 [0.061, 0.090]; sk-live is a prefix; never-wr alone; " + SECRET[:WINDOW - 1]
    assert redact(text) == text


def test_a_short_secret_is_redacted_only_whole():
    redaction.forget_secrets()
    register_secret("abc123XYZ")
    try:
        assert redact("key abc123XYZ, part abc123") == f"key {MARK}, part abc123"
    finally:
        redaction.forget_secrets()


def test_credentials_a_server_sends_back_are_blanked_registered_or_not(secret):
    text = ('{"headers": {"Authorization": "Bearer other-token-123", "Cookie": "session=abcdef; x=1"}}\n'
            "X-Api-Key: zzz999\nset-cookie: id=42\n basic dXNlcjpwYXNz")
    out = scrub_credentials(text)
    for value in ("other-token-123", "session=abcdef", "zzz999", "id=42", "dXNlcjpwYXNz"):
        assert value not in out
    assert out.count(MARK) == 5


def test_files_bias_core_writes_never_hold_the_secret(secret, tmp_path):
    path = atomic_write_text(tmp_path / "results.json", json.dumps({"reason": f"refused: Bearer {SECRET}"}))
    assert not leaks(path.read_text()) and json.loads(path.read_text())["reason"] == f"refused: Bearer {MARK}"


# Secrets with the characters that JSON, XML and HTML escape: a cut must not break an escape.
_secrets = st.text(alphabet=st.sampled_from('ab7Z-_+/~%&<>"\'\\é'), min_size=16, max_size=40)
_text = st.text(st.one_of(st.sampled_from('"\'\\&<>;7a'), st.characters(blacklist_categories=("Cc", "Cs"))),
                max_size=20)  # what XML can hold, escape characters often


@settings(max_examples=150, deadline=None)
@given(key=_secrets, before=_text, after=_text, start=st.integers(0, 30),
       length=st.integers(WINDOW, 40))
def test_redacted_json_xml_and_html_stay_well_formed(key, before, after, start, length):
    redaction.forget_secrets()
    register_secret(key)
    try:
        shown = key[start:start + length] if start + WINDOW <= len(key) else key
        value = before + shown + after
        doc = json.loads(redact(json.dumps({"reason": value, "n": 1})))
        assert doc["n"] == 1 and not leaks(doc["reason"], key)
        elem = ET.fromstring(redact(ET.tostring(ET.Element("property", name="reason", value=value), encoding="unicode")))
        assert not leaks(elem.get("value"), key)
        assert not leaks(html.unescape(redact(html.escape(value))), key)
    finally:
        redaction.forget_secrets()


# ----- every failure of the endpoint, in the engine ------------------------------------------------------
@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tiny_model import build_tiny_causal_lm

    folder = build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-secrets"), seed=0)
    return folder, load_tiny(folder, "cpu", cache_dir=tmp_path_factory.mktemp("ref-cache"))


FAULTS = {  # name -> (a fault on the completions, what the message must say)
    "401-json": (lambda **kw: Refuse(401, "json", **kw), r"401 Unauthorized: it did not accept the API key.*"
                                                          rf"Fix: set the environment variable {KEY_ENV}"),
    "401-partial": (lambda **kw: Refuse(401, "partial", **kw), rf"401 Unauthorized.*{KEY_ENV}"),
    "403-text": (lambda **kw: Refuse(403, "text", **kw), rf"403 Forbidden: it refused the API key the rights.*"
                                                         rf"{KEY_ENV}.*for this model"),
    "400-echo": (lambda **kw: Refuse(400, "json", **kw), r"400 Bad Request: .*Authorization.*\[redacted\]"),
    "422-quoted": (lambda **kw: Refuse(422, "quoted", **kw), r"422 Unprocessable Entity: .*\[redacted\]"),
    "500-echo": (lambda **kw: Refuse(500, "text", retry_after="0", **kw), r"in 5 tries \(5 x 500 Internal Server Error"),
    "200-not-json": (lambda **kw: Refuse(200, "text", **kw), r"other than JSON: .*Authorization: \[redacted\]"),
    "200-not-an-answer": (lambda **kw: Refuse(200, "json", **kw), "without choices"),
    "timeout": (lambda **kw: Silent(**kw), r"5 x no whole answer within --request-timeout 1 s"),
}
AUTH = {"401-json", "401-partial", "403-text"}
# failures of the key, the server or its answer, never of a request option: not blamed on prompt log-probabilities
NOT_OPTIONS = AUTH | {"500-echo", "200-not-json", "timeout"}


def _endpoint(folder, url, tmp_path, timeout):
    return load_model(resolve_model(str(folder)), LoadOptions(
        engine="openai", progress=False, cache_dir=tmp_path / "cache", use_cache=False,
        engine_options={"engine_url": url, "max_concurrency": 1, "api_key_env": KEY_ENV, "request_timeout": timeout}))


@pytest.mark.parametrize("when", ["load", "mid-run"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_no_endpoint_failure_message_holds_the_key(reference, tmp_path, monkeypatch, fault, when):
    folder, ref = reference
    make, message = FAULTS[fault]
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.setattr("bias_core.models.engines.http_client.BACKOFF", 0.0)  # the retries' waits, not their count
    # The stub computes an answer before a fault replaces it: only the silent server's tries have a
    # short deadline (at load it answers /v1/models at once, then is silent).
    timeout = 1.0 if fault == "timeout" and when == "load" else 120
    with StubServer(ref.engine.model, ref.engine.tokenizer) as server:
        if when == "load":
            server.transport = make()
            with pytest.raises(AuditUsageError) as failure:
                _endpoint(folder, server.url, tmp_path, timeout)
        else:
            lm = _endpoint(folder, server.url, tmp_path, timeout)
            if fault == "timeout":  # the other faults answer after the stub computed (seconds on a loaded machine)
                lm.engine.client.timeout = 1.0
            server.transport = make()
            with pytest.raises((AuditUsageError, EngineUnavailable)) as failure:
                lm.loglikelihood([("My friend is a nurse, and", " she")])
        assert all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    text = str(failure.value)
    assert not leaks(text) and not leaks(repr(failure.value)), text
    assert re.search(message, text), text
    if fault in NOT_OPTIONS:
        assert "log-probabilit" not in text and "llama.cpp" not in text
    if fault in AUTH:  # the key failed: the run cannot go on (mid-run it stops, as for a server gone away)
        assert isinstance(failure.value, EngineUnavailable if when == "mid-run" else AuditUsageError)


def test_a_refusal_without_a_key_says_to_pass_one(reference, tmp_path, monkeypatch):
    folder, ref = reference
    with StubServer(ref.engine.model, ref.engine.tokenizer) as server:
        server.transport = Refuse(401, path=None)
        with pytest.raises(AuditUsageError, match="asks for an API key and none was sent.*Fix: pass --api-key-env NAME"):
            load_model(resolve_model(str(folder)), LoadOptions(engine="openai", progress=False,
                                                               engine_options={"engine_url": server.url},
                                                               cache_dir=tmp_path, use_cache=False))


# ----- whole runs: the terminal and every file of the run folder ---------------------------------------------
def _everything(result, run_dirs) -> str:
    parts = [result.stdout.str(), result.stderr.str()]
    for run in run_dirs:
        for path in sorted(p for p in run.rglob("*") if p.is_file()):
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            parts.append(f"\n== {path.name}\n" + data.decode("utf-8", errors="replace"))
    return "".join(parts)


RUNS = {  # name -> (the fault, exit status, what the terminal says); mid-run faults start after 30 answers
    "load-401": (lambda: Refuse(401, "json"), 4, [f"*usage error*401 Unauthorized*did not accept the API key*{KEY_ENV}*"]),
    "load-403-text": (lambda: Refuse(403, "text"), 4, ["*usage error*403 Forbidden*"]),
    "load-400-echo": (lambda: Refuse(400, "json"), 4, ["*usage error*400 Bad Request*[[]redacted[]]*"]),
    "load-500-echo": (lambda: Refuse(500, "text", retry_after="0"), 4, ["*usage error*5 x 500 Internal Server Error*"]),
    "load-not-json": (lambda: Refuse(200, "text"), 4, ["*usage error*other than JSON*"]),
    "load-timeout": (lambda: Silent(), 4, ["*usage error*no whole answer within --request-timeout 2 s*"]),
    "mid-401-partial": (lambda: Refuse(401, "partial", after=30), 2, ["*engine error*401 Unauthorized*"]),
    "mid-403-quoted": (lambda: Refuse(403, "quoted", after=30), 2, ["*engine error*403 Forbidden*"]),
    "load-not-an-answer": (lambda: Refuse(200, "json"), 4, ["*usage error*without choices*"]),
    # two tests end in errors quoting what the server sent, then 503s stop the run
    "mid-errors-then-503": (lambda: Chain(Refuse(422, "quoted", after=30, times=1), Refuse(200, "text", after=30, times=1),
                                          Refuse(503, "text", retry_after="0", after=30)),
                            2, ["*engine error*5 x 503 Service Unavailable*No result cache is kept*"]),
    "mid-timeout": (lambda: Silent(after=30), 2, ["*engine error*no whole answer within --request-timeout 10 s*"]),
}
FAST = {"load-401", "mid-errors-then-503"}  # the others are the same paths with other faults

# Runs first, before the model loads: a failure whose text, output and log hold the
# key (as a library's error might), caught only by the plugin's and the writers' redaction.
LEAKY = f"""
import logging, os, pytest

@pytest.mark.parametrize("probe", ["natural-default"])
def test_a_library_quotes_the_key(probe):
    key = os.environ["{KEY_ENV}"]
    print("the key is", key)
    logging.getLogger("somelib").warning("sending %s", key)
    raise RuntimeError("a library quoting the key: " + repr(key))
"""


@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in RUNS])
def test_a_run_against_a_failing_endpoint_writes_the_key_nowhere(audit_project, reference, tmp_path, monkeypatch, case):
    folder, ref = reference
    make, status, lines = RUNS[case]
    monkeypatch.setenv(KEY_ENV, SECRET)
    (audit_project.path / "audits" / "test_aa_leaky.py").write_text(LEAKY)
    summary = tmp_path / "summary.md"
    # A deadline far above the stub's answers on a loaded machine, and short enough for 5 silent tries;
    # where the server is silent from the first request, no answer has to arrive within it
    timeout = {"load-timeout": "2", "mid-timeout": "10"}.get(case, "120")
    with StubServer(ref.engine.model, ref.engine.tokenizer) as server:
        server.transport = make()
        result = audit_project.runpytest_subprocess(
            "audits", "-p", "no:cacheprovider", "--model", str(folder), "--engine", "openai", "--engine-url",
            server.url, "--api-key-env", KEY_ENV, "--max-concurrency", "1", "--request-timeout", timeout, "--no-cache",
            "--summary-md", str(summary), "-k", "natural-default or occupation-pronouns", "--sample", "fixed")
        sent = [r["headers"].get("Authorization") for r in server.requests]
    assert sent and set(sent) == {f"Bearer {SECRET}"}  # the key did go to the server, on every request
    assert result.ret == status, result.stdout.str()
    result.stdout.fnmatch_lines(["*RuntimeError: a library quoting the key: '[[]redacted[]]'*", "*the key is [[]redacted[]]*"])
    result.stdout.fnmatch_lines(lines)
    runs = run_folders(audit_project.path / "reports")
    files = {p.name for run in runs for p in run.iterdir()}
    assert {"results.json", "report.html", "junit.xml"} <= files, files
    everything = _everything(result, runs) + (summary.read_text() if summary.exists() else "")
    assert not leaks(everything), leaks(everything)
    if case == "mid-errors-then-503":  # what the server sent was quoted, and redacted where it was
        rows = json.loads((runs[0] / "results.json").read_text())["results"]
        errors = [r for r in rows if r["verdict"] == "error"]
        assert len(errors) >= 2 and all(MARK in r["reason"] for r in errors[:2]), errors
