"""JSON over HTTP to one server, bounded in count and time: what the endpoint engine sends.

- Requests go to the base URL given and nowhere else: paths are joined onto it, redirects are
  refused, and proxy settings, ``.netrc`` files and other environment defaults are ignored
  (``trust_env`` off), so neither the prompts nor the API key can be routed elsewhere.
- The API key is sent as a bearer token and kept out of every message this module writes.
- At most ``max_concurrency`` requests are in flight (a thread pool of that size).
- 429, 500, 502, 503 and 504 answers, timeouts and refused connections are retried with
  exponential backoff (urllib3's ``Retry``, honouring a server's Retry-After up to ``MAX_WAIT``),
  at most ``retries`` times per request; a request therefore ends within
  (retries + 1) x timeout + retries x MAX_WAIT seconds, and a call within that per request.
- A server that still does not answer is ``EngineUnavailable``: the run stops there, its report
  says it is partial, and every result computed before is already in the result cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from bias_core.errors import AuditUsageError, EngineUnavailable
from bias_core.models.progress import progress_bar

RETRY_STATUS = (429, 500, 502, 503, 504)
MAX_WAIT = 30.0  # seconds: the longest backoff or Retry-After wait between two tries


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
    """The server refused a request (a 4xx other than 429): the request, not the server, is wrong."""


class EndpointClient:
    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 120.0, retries: int = 4,
                 backoff: float = 0.5, max_concurrency: int = 8, progress: bool = True):
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util import Retry

        self.base_url = check_url(base_url)
        self.timeout, self.max_concurrency, self.progress = float(timeout), int(max_concurrency), progress
        self.sent = 0  # requests answered, for the message when the server goes away
        self._lock = threading.Lock()
        retry = Retry(total=retries, connect=retries, read=retries, status=retries, other=0, redirect=0,
                      status_forcelist=RETRY_STATUS, allowed_methods=None, backoff_factor=backoff,
                      backoff_max=MAX_WAIT, retry_after_max=int(MAX_WAIT), raise_on_status=False,
                      raise_on_redirect=True)
        self.session = requests.Session()
        self.session.trust_env = False  # no proxies, no .netrc: nothing goes anywhere but base_url
        adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=self.max_concurrency)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer; ``EndpointError`` on a refusal, ``EngineUnavailable`` when the
        server does not answer within the retries."""
        import requests

        try:
            answer = self.session.request(method, self.url(path), json=body, headers=self._headers,
                                          timeout=self.timeout, allow_redirects=False)
        except requests.RequestException as exc:  # refused connection, timeouts after every retry
            raise EngineUnavailable(
                f"the server at {self.base_url} did not answer {method} /{path.lstrip('/')} after the retries "
                f"({type(exc).__name__}; {self.sent} request(s) had been answered this run). Fix: check that the "
                "server is up and reachable; results computed so far are in the result cache, so a re-run "
                "continues where this one stopped.") from None
        if answer.status_code in RETRY_STATUS:
            raise EngineUnavailable(
                f"the server at {self.base_url} still answered {answer.status_code} to {method} "
                f"/{path.lstrip('/')} after the retries ({self.sent} request(s) had been answered this run). Fix: "
                "lower --max-concurrency or wait for the server; results computed so far are in the result cache.")
        if answer.status_code >= 300:
            raise EndpointError(f"the server at {self.base_url} refused {method} /{path.lstrip('/')} with "
                                f"{answer.status_code}: {answer.text[:300]!r}.", )
        with self._lock:
            self.sent += 1
        try:
            return answer.json()
        except ValueError:
            raise EndpointError(f"the server at {self.base_url} answered {method} /{path.lstrip('/')} with something "
                                f"other than JSON: {answer.text[:200]!r}.") from None

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def map(self, make: Callable[[Any], Any], items: Sequence[Any], desc: str = "") -> list[Any]:
        """``make(item)`` for every item, at most ``max_concurrency`` at a time, in item order."""
        if not items:
            return []
        bar = progress_bar(total=len(items), desc=desc, enabled=self.progress)
        out: list[Any] = [None] * len(items)

        def run(i: int) -> None:
            out[i] = make(items[i])
            bar.update(1)

        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
            futures = [pool.submit(run, i) for i in range(len(items))]
            try:
                for future in futures:
                    future.result()  # the first failure ends the call (the rest are cancelled)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
            finally:
                bar.close()
        return out
