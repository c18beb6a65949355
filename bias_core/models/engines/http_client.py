"""JSON over HTTP to one server, bounded in count, time and size: what the endpoint engine sends.

- Requests go to the base URL given and nowhere else: paths are joined onto it, redirects are
  refused, and proxy settings, ``.netrc`` files and other environment defaults are never read
  (the standard library's ``http.client``, which reads none), so neither the prompts nor the API
  key can be routed elsewhere. HTTPS is verified against certifi's roots, as requests does.
- The API key is sent as a bearer token and registered for redaction (storage/redaction.py):
  no message this module writes holds it, whatever the server sends back; a refusal's body is
  quoted only after every credential in it is blanked, and a 401/403's not at all.
- ``timeout`` is a deadline: each try ends ``timeout`` seconds after it starts, connection to last
  byte, however slowly the server sends (a watchdog shuts the socket down at the deadline).
  An answer is read in pieces and abandoned beyond ``max_response_bytes``.
- At most ``max_concurrency`` requests are in flight (a thread pool of that size); when one of a
  call's requests fails for good, the call's other requests are stopped at once.
- 429, 500, 502, 503 and 504 answers, tries cut by the deadline, refused or reset connections and
  answers cut short are retried, at most ``retries`` times per request, after waits of
  ``backoff`` x 1, 2, 4, ... seconds (a server's Retry-After instead, where it sends one), each at
  most ``MAX_WAIT``. A request therefore ends within ``worst_case_seconds(timeout, retries)`` =
  (retries + 1) x timeout + retries x MAX_WAIT; so does a call to a server that answers nothing
  (dead, silent or dripping), however many requests it makes, since its requests run side by
  side and the first to fail stops the rest.
- A server that still does not answer is ``EndpointUnavailable``, one that refuses the key (401,
  403) ``EndpointAuthError``, both ``EngineUnavailable``: the run stops there and its report says
  it is partial.
  Other refusals are ``EndpointError``, answers too large, compressed or not JSON
  ``EndpointAnswerError`` (usage errors both).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from bias_core.errors import AuditUsageError, EngineUnavailable
from bias_core.models.progress import progress_bar
from bias_core.storage.redaction import redact, register_secret, scrub_credentials

RETRY_STATUS = (429, 500, 502, 503, 504)
AUTH_STATUS = (401, 403)
MAX_WAIT = 30.0  # seconds: the longest backoff or Retry-After wait between two tries
RETRIES = 4
BACKOFF = 0.5
DEFAULT_MAX_RESPONSE_MB = 16.0  # 40x the largest answer an audit asks for (a 4,096-token echo with its top tokens)
_PIECE = 1 << 16


def worst_case_seconds(timeout: float, retries: int = RETRIES) -> float:
    """The longest one request (and so one call, and a run against a dead server) can take."""
    return (retries + 1) * timeout + retries * MAX_WAIT


def check_url(url: str) -> str:
    """The base URL without a trailing slash, or a usage error naming what is wrong."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AuditUsageError(f"--engine-url {url!r}: not an http(s) URL with a host. Fix: e.g. "
                              "--engine-url http://127.0.0.1:8000 (the server's base, without /v1/...).")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise AuditUsageError(f"--engine-url {urlsplit(url)._replace(netloc=parts.hostname or '').geturl()}: holds "
                              "credentials, a query or a fragment. Fix: give the bare base URL; the key goes in the "
                              "environment variable named by --api-key-env.")
    return url.rstrip("/").removesuffix("/v1")


class EndpointError(AuditUsageError):
    """The server refused a request (a 4xx other than 429) or answered something unusable: the
    request or the server's answer, not the server's availability, is wrong. Its message, which
    may quote the server, never holds a registered secret."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class EndpointAnswerError(AuditUsageError):
    """The server's answer cannot be read as one: larger than the cap, compressed unasked, not JSON.
    Not an ``EndpointError``, so it is never taken for a refused request option."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class EndpointUnavailable(EngineUnavailable):
    """The server did not answer within the retries (a registered secret never in the message)."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class EndpointAuthError(EndpointUnavailable):
    """The server refused the API key (401) or its rights (403): every later request would be
    refused too, so the run stops, as when the server goes away."""


class _Transient(Exception):
    """A try that failed in a way a later try may not (a reset, a deadline, a retryable status)."""

    def __init__(self, what: str, retry_after: float | None = None):
        super().__init__(what)
        self.what, self.retry_after = what, retry_after


class _Stale(Exception):
    """A kept-alive connection was closed by the server before this request reached it."""


class _Stopped(Exception):
    """The call this request belongs to already failed: give up without a word."""


class _Try:
    """One try of one request: its connection, and whether the deadline or a stop cut it."""

    def __init__(self, conn: http.client.HTTPConnection, stop: threading.Event | None):
        self.conn, self.stop = conn, stop
        # the connection's socket, kept: http.client lets go of it when the answer ends the connection
        self.sock: socket.socket | None = None
        self.expired = self.aborted = self.done = False
        self.received = 0
        self._lock = threading.Lock()

    def cut(self, expired: bool) -> None:
        """Shut the socket down (from another thread): a blocked read or write returns at once."""
        with self._lock:
            if self.done:
                return
            self.expired, self.aborted = self.expired or expired, self.aborted or not expired
            sock = self.sock or self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self.done = True


class EndpointClient:
    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 120.0, retries: int = RETRIES,
                 backoff: float | None = None, max_concurrency: int = 8, progress: bool = True,
                 max_response_mb: float = DEFAULT_MAX_RESPONSE_MB, api_key_env: str | None = None):
        self.base_url = check_url(base_url)
        parts = urlsplit(self.base_url)
        self._https, self._host, self._port = parts.scheme == "https", parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self.timeout, self.retries = float(timeout), int(retries)
        self.backoff = float(BACKOFF if backoff is None else backoff)
        self.max_concurrency, self.progress = int(max_concurrency), progress
        self.max_response_mb = float(max_response_mb)
        self.max_response_bytes = int(self.max_response_mb * 2**20)
        self.api_key_env = api_key_env
        self.sent = 0  # requests answered, for the message when the server goes away
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._inflight: set[_Try] = set()
        self._local = threading.local()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "Accept-Encoding": "identity", "User-Agent": "bias-core"}
        self._keyed = bool(api_key)
        if api_key:
            register_secret(api_key)
            self._headers["Authorization"] = f"Bearer {api_key}"

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    # ----- one request, with its retries --------------------------------------------------------
    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer; ``EndpointError`` on a refusal, ``EndpointAnswerError`` on an unusable answer,
        ``EndpointAuthError`` on 401/403, ``EngineUnavailable`` when the server does not answer
        within the retries."""
        what = f"{method} /{path.lstrip('/')}"
        target = f"{self._prefix}/{path.lstrip('/')}"
        data = json.dumps(body).encode() if body is not None else None
        failures: list[str] = []
        asked: float | None = None  # the server's Retry-After, if its last answer had one
        for attempt in range(self.retries + 1):
            if attempt:
                self._pause(min(MAX_WAIT, asked if asked is not None else self.backoff * 2 ** (attempt - 1)))
            try:
                status, reason, headers, content = self._once(method, target, data)
            except _Transient as exc:
                failures.append(exc.what)
                asked = None
                continue
            if status in RETRY_STATUS:
                failures.append(f"{status} {reason}".strip())
                asked = _retry_after(headers.get("retry-after"))
                continue
            break
        else:
            raise EndpointUnavailable(
                f"the server at {self.base_url} did not answer {what} in {len(failures)} tries "
                f"({_tally(failures)}; {self.sent} request(s) had been answered this run). Fix: check that the "
                f"server is up and reachable, or raise --request-timeout (now {self.timeout:g} s) if it is only "
                "slow, or lower --max-concurrency if it is overloaded.")
        if status in AUTH_STATUS:
            raise EndpointAuthError(self._auth_message(status, reason, what))
        if status >= 300:
            hint = " (a redirect, which is never followed)" if status < 400 else ""
            raise EndpointError(f"the server at {self.base_url} refused {what} with {status} {reason}{hint}: "
                                f"{_excerpt(content, 300)}.")
        with self._lock:
            self.sent += 1
        try:
            return json.loads(content)
        except ValueError:
            raise EndpointAnswerError(f"the server at {self.base_url} answered {what} with something other than JSON: "
                                f"{_excerpt(content, 200)}.") from None

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def _auth_message(self, status: int, reason: str, what: str) -> str:
        problem = ("did not accept the API key" if status == 401 else "refused the API key the rights") \
            if self._keyed else "asks for an API key and none was sent"
        if self.api_key_env and self._keyed:
            fix = (f"set the environment variable {self.api_key_env} (named by --api-key-env) to a key this server "
                   f"accepts{' for this model' if status == 403 else ''}")
        else:
            fix = "pass --api-key-env NAME, NAME being the environment variable that holds the server's key"
        return (f"the server at {self.base_url} answered {what} with {status} {reason}: it {problem} "
                f"(authentication, not the audit, failed; the answer's body is not shown, as it may echo the key). "
                f"Fix: {fix}.")

    def _pause(self, pause: float) -> None:
        stop = getattr(self._local, "stop", None)
        if stop is None:
            time.sleep(pause)
        elif stop.wait(pause):
            raise _Stopped()

    # ----- one try ------------------------------------------------------------------------------
    def _once(self, method: str, target: str, data: bytes | None) -> tuple[int, str, dict[str, str], bytes]:
        conn, reused = self._connection()
        try:
            return self._over(conn, reused, method, target, data)
        except _Stale:  # a kept-alive connection the server had closed: a new one, in the same try
            return self._over(self._new_connection(), False, method, target, data)

    def _over(self, conn: http.client.HTTPConnection, reused: bool, method: str, target: str,
              data: bytes | None) -> tuple[int, str, dict[str, str], bytes]:
        stop = getattr(self._local, "stop", None)
        attempt = _Try(conn, stop)
        with self._lock:
            self._inflight.add(attempt)
        if stop is not None and stop.is_set():  # after joining the in-flight set: a stop sees this try or this sees it
            with self._lock:
                self._inflight.discard(attempt)
            self._release(conn)
            raise _Stopped()
        watchdog = threading.Timer(self.timeout, attempt.cut, args=(True,))
        watchdog.daemon = True
        watchdog.start()
        reuse = answered = whole = False
        answer: http.client.HTTPResponse | None = None
        try:
            if conn.sock is None:
                conn.connect()
            attempt.sock = conn.sock
            if attempt.expired or attempt.aborted:  # cut while connecting, before there was a socket to shut
                raise TimeoutError()
            conn.request(method, target, body=data, headers=self._headers)
            answer = conn.getresponse()
            answered = True
            headers = {k.lower(): v for k, v in answer.getheaders()}
            content = self._body(answer, headers, attempt)
            reuse = not answer.will_close
            answer.close()  # read to its end: the connection can take the next request
            whole = True
            return answer.status, answer.reason or "", headers, content
        except (OSError, http.client.HTTPException) as exc:
            if attempt.aborted:
                raise _Stopped() from None
            if reused and not answered and not attempt.expired and isinstance(exc, ConnectionError):
                raise _Stale() from None
            if attempt.expired or isinstance(exc, TimeoutError):  # the watchdog's, or a socket's (as long)
                raise _Transient(f"no whole answer within --request-timeout {self.timeout:g} s "
                                 f"({attempt.received:,} bytes of it received)") from None
            raise _Transient(_describe(exc, attempt.received)) from None
        finally:
            attempt.finish()
            watchdog.cancel()
            with self._lock:
                self._inflight.discard(attempt)
            if reuse and not (attempt.expired or attempt.aborted):
                self._release(conn)
            else:
                _hang_up(conn, answer, attempt.sock, abort=not whole)

    def _body(self, answer: http.client.HTTPResponse, headers: dict[str, str], attempt: _Try) -> bytes:
        """The whole body, read a socket read at a time (so the deadline can cut it) and never
        more than ``max_response_bytes`` of it."""
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise EndpointAnswerError(f"the server at {self.base_url} answered with Content-Encoding {encoding[:40]!r}, "
                                "which was not asked for (Accept-Encoding: identity). Fix: turn compression off "
                                "for this client in the server or the proxy in front of it.")
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_response_bytes:
            raise self._too_large(f"{int(declared) / 2**20:,.1f} MB announced")
        pieces = []
        while True:
            piece = answer.read1(_PIECE)
            if not piece:
                break
            attempt.received += len(piece)
            if attempt.received > self.max_response_bytes:
                raise self._too_large("more than that received")
            pieces.append(piece)
        if attempt.expired or attempt.aborted:  # cut: the end of what came is not the end of the answer
            raise TimeoutError()
        if answer.length:  # the connection ended before the announced length
            raise http.client.IncompleteRead(b"", answer.length)
        return b"".join(pieces)

    def _too_large(self, seen: str) -> EndpointAnswerError:
        return EndpointAnswerError(f"the server at {self.base_url} sent an answer larger than --max-response-mb "
                             f"{self.max_response_mb:g} ({seen}); it was not read further. Fix: check that "
                             "--engine-url is the model server; raise --max-response-mb if its answers really "
                             "are that large.")

    # ----- connections: kept alive between tries, at most max_concurrency idle ----------------------
    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection the server has not closed, else a new one; and whether it is kept-alive."""
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if conn.sock is not None and not _dropped(conn.sock):
                    conn.sock.settimeout(self.timeout)
                    return conn, True
                conn.close()
        return self._new_connection(), False

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=_tls())
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.max_concurrency:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ----- many requests ------------------------------------------------------------------------
    def map(self, make: Callable[[Any], Any], items: Sequence[Any], desc: str = "") -> list[Any]:
        """``make(item)`` for every item, at most ``max_concurrency`` at a time, in item order. The
        first failure (in item order, among those that failed before the call stopped) ends the
        call: requests not started are dropped and those in flight are cut."""
        if not items:
            return []
        bar = progress_bar(total=len(items), desc=desc, enabled=self.progress)
        out: list[Any] = [None] * len(items)
        stop = threading.Event()

        def run(i: int) -> None:
            if stop.is_set():
                raise _Stopped()
            self._local.stop = stop
            try:
                out[i] = make(items[i])
            finally:
                self._local.stop = None
            bar.update(1)

        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items)))
        futures: list[Any] = []
        try:
            # inside the try: Ctrl-C can come while the call is still being handed out, its first
            # requests already in flight
            for i in range(len(items)):
                futures.append(pool.submit(run, i))
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None
                      and not isinstance(f.exception(), _Stopped)]
            if failed:
                raise failed[0].exception()
        except BaseException:  # a failure, Ctrl-C or SIGTERM: nothing more is sent for this call
            self._stop(stop, futures)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
        return out

    def _stop(self, stop: threading.Event, futures: list[Any]) -> None:
        stop.set()
        for future in futures:
            future.cancel()
        with self._lock:
            cut = [t for t in self._inflight if t.stop is stop]
        for attempt in cut:
            attempt.cut(expired=False)


def _hang_up(conn: http.client.HTTPConnection, answer: http.client.HTTPResponse | None,
             sock: socket.socket | None, abort: bool) -> None:
    """Close a try's connection now, whatever ended the try.

    ``conn.close()`` alone is not enough: http.client hands the socket to an answer that will close
    the connection, and a socket whose answer's file is still open (referenced by the traceback of
    the error that ended the try, which the caller may keep) is only released by the garbage
    collector, the server's slot held till then. ``abort`` (the answer was not read to its end):
    a reset, not a FIN, so that a server blocked writing an answer nobody reads (its window full)
    learns at once that the client has gone, instead of at its own timeout."""
    if abort and sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        if answer is not None:
            answer.close()
    with contextlib.suppress(OSError):
        conn.close()
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), or None."""
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


def _tally(failures: list[str]) -> str:
    """The tries' failures in order, a run of the same one said once with its count."""
    runs: list[list[Any]] = []
    for failure in failures:
        if runs and runs[-1][0] == failure:
            runs[-1][1] += 1
        else:
            runs.append([failure, 1])
    return "; ".join(f"{n} x {failure}" if n > 1 else failure for failure, n in runs)


def _describe(exc: BaseException, received: int) -> str:
    if isinstance(exc, http.client.IncompleteRead) or (received and isinstance(exc, ConnectionError)):
        return f"the connection ended after {received:,} bytes of the answer ({type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"{type(exc).__name__}"


def _excerpt(content: bytes, limit: int) -> str:
    """The start of a server's answer, as a quoted string: credentials blanked, control characters escaped."""
    text = scrub_credentials(content[: 16 * limit].decode("utf-8", errors="replace"))
    return repr(text[:limit]) + ("..." if len(text) > limit or len(content) > 16 * limit else "")


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle kept-alive connection was closed by the server (readable means EOF or junk)."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


_TLS: Any = None


def _tls() -> Any:
    global _TLS
    if _TLS is None:
        import ssl

        try:
            import certifi

            _TLS = ssl.create_default_context(cafile=certifi.where())
        except ImportError:
            _TLS = ssl.create_default_context()
    return _TLS
