"""A small OpenAI-compatible server on 127.0.0.1 that a test controls (stdlib ``http.server``).

It serves a transformers causal LM (the tiny test model) the way vLLM's server does: ``/v1/models``,
``/tokenize`` and ``/v1/completions`` with token-id prompts, ``echo`` + ``logprobs`` (prompt
log-probabilities, None for the first token), ``top_logprobs`` with ``token_id:N`` keys, and
greedy or seeded generation. Faults are delivered at known points, never by timing:

- ``statuses``: answers to give the next completion requests instead of computing (e.g.
  ``[429, 503]``: a 429, then a 503, then normal answers); 429s carry ``Retry-After: 0``;
- ``die_after``: after that many answered completion requests the server is down: a request
  that reached it anyway (accepted before the listening socket closed) gets its connection
  closed unanswered, and later connections are refused;
- ``prompt_logprobs=False``: llama.cpp's behaviour, logprobs only for generated tokens;
- ``chat_only=True``: /v1/completions does not exist (404);
- ``tokenize=False``: no /tokenize (404), as servers other than vLLM;
- ``other_tokenizer``: tokenize text prompts with another tokenizer (a mismatch);
- ``tamper(body, answer)``: what to send instead of each computed /v1/completions answer (JSON,
  or bytes sent as they are): impossible answers, for the engine's validation;
- ``greedy_rank``: greedy decoding picks the token of that rank (0: the most probable), a server
  whose generations changed while its log-probabilities did not;
- ``transport``: how answers travel (the faults below the class: refusals echoing the request's
  headers, bodies dripped a byte at a time or forever, a reset half-way through, oversized
  answers); set as an attribute, ``server.transport = Drip(...)``.

Every request's path and headers are recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch


class StubServer:
    transport: "Fault | None" = None  # a fault delivering answers its own way (below), or the normal answers

    def __init__(self, model: Any, tokenizer: Any, name: str = "stub-model", *, statuses: list[int] | None = None,
                 die_after: int | None = None, prompt_logprobs: bool = True, chat_only: bool = False,
                 tokenize: bool = True, other_tokenizer: Any = None, tamper: Any = None, greedy_rank: int = 0):
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name
        self.statuses = list(statuses or [])
        self.die_after, self.prompt_logprobs, self.chat_only, self.tokenize = die_after, prompt_logprobs, chat_only, tokenize
        self.other_tokenizer = other_tokenizer
        self.tamper, self.greedy_rank = tamper, greedy_rank
        self.requests: list[dict[str, Any]] = []
        self.answered = 0
        self.down = False  # set with the last answer, before it is sent: nothing is answered after it
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.handle_error = _quiet_on_hang_up(self.httpd.handle_error)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self._thread.is_alive():
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()
        self.httpd.server_close()  # the listening socket: new connections are refused from here

    # ----- the model --------------------------------------------------------------------------------
    def _logprobs(self, ids: list[int]) -> torch.Tensor:
        with torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1)

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        tok = self.other_tokenizer or self.tokenizer
        ids = list(prompt) if isinstance(prompt, list) else list(tok(prompt, add_special_tokens=True)["input_ids"])
        ids_prompt = list(ids)
        generated, gen_lps, tops = [], [], []
        n_top = body.get("logprobs")
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        name = (lambda t: f"token_id:{t}") if as_ids else (lambda t: self.tokenizer.convert_ids_to_tokens(t))
        gen = torch.Generator().manual_seed(int(body.get("seed") or 0))
        for _ in range(int(body.get("max_tokens", 16))):
            lp = self._logprobs(ids)[-1]
            if float(body.get("temperature", 1.0)) == 0.0:
                nxt = int(lp.argmax()) if not self.greedy_rank else int(lp.topk(self.greedy_rank + 1).indices[-1])
            else:
                nxt = int(torch.multinomial(lp.exp(), 1, generator=gen))
            if n_top:
                top = lp.topk(int(n_top))
                tops.append({name(int(t)): float(v) for v, t in zip(top.values, top.indices)})
            else:
                tops.append(None)
            gen_lps.append(float(lp[nxt]))
            if nxt == self.tokenizer.eos_token_id:
                break
            generated.append(nxt)
            ids.append(nxt)
        out_tokens, out_lps, out_tops = [], [], []
        if body.get("echo"):
            prompt_lp = self._logprobs(ids_prompt)
            out_tokens = [name(t) for t in ids_prompt]
            out_lps = [None] + [float(prompt_lp[i - 1, t]) for i, t in enumerate(ids_prompt) if i > 0]
            out_tops = [None] * len(ids_prompt)
            if not self.prompt_logprobs:  # llama.cpp: the prompt comes back without its logprobs
                out_tokens, out_lps, out_tops = [], [], []
        logprobs = None
        if n_top is not None:
            logprobs = {"tokens": out_tokens + [name(t) for t in generated], "token_logprobs": out_lps + gen_lps[: len(generated)],
                        "top_logprobs": out_tops + tops[: len(generated) or 1]}
        text = (self.tokenizer.decode(ids_prompt) if body.get("echo") else "") + self.tokenizer.decode(generated)
        return {"id": "cmpl-stub", "object": "text_completion", "model": self.name,
                "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "stop"}]}

    # ----- HTTP -----------------------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                if server.transport is not None and server.transport.deliver(self, status, data):
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if server.down:  # the client's next request can arrive before the socket closes
                    self.close_connection = True
                    return
                server.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers), "body": body})
                if self.path == "/tokenize" and server.tokenize:
                    tok = server.other_tokenizer or server.tokenizer
                    ids = tok(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))["input_ids"]
                    self._send(200, {"tokens": list(ids), "count": len(ids)})
                    return
                if self.path != "/v1/completions" or server.chat_only:
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                with server._lock:
                    status = server.statuses.pop(0) if server.statuses else None
                if status is not None:
                    self._send(status, {"error": f"stub status {status}"}, {"Retry-After": "0"} if status == 429 else None)
                    return
                if body.get("max_tokens", 16) == 0 and not body.get("echo"):
                    self._send(400, {"error": "max_tokens 0 needs echo"})
                    return
                answer = server._completion(body)
                if server.tamper is not None:
                    answer = server.tamper(body, answer)
                with server._lock:
                    if server.down:
                        self.close_connection = True
                        return
                    server.answered += 1
                    dying = server.die_after is not None and server.answered >= server.die_after
                    server.down = dying
                self._send(200, answer)
                if dying:
                    server.stop()

        return Handler


def _quiet_on_hang_up(report: Any) -> Any:
    """socketserver's error report, left out for a client that hung up (a deadline, a stop)."""
    import sys

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            report(request, client_address)

    return handle_error


# ----- transport faults: what a hostile or broken server sends instead of its answer ---------------------
class Fault:
    """Delivers the answers to requests for ``path`` (all paths when None) its own way, from the
    ``after``-th such request on, ``times`` times (always when None); ``seen`` counts the
    requests it delivered, ``hung_up`` those whose client went away before the end.

    ``hold``: an event to wait for (at most ``HOLD_S``) before answering, so that a test orders
    what the server does without timing, e.g. a refusal sent only once another fault holds three
    requests: ``Refuse(401, hold=silent.reached(3))``. ``on_seen(n)`` runs in the server's thread
    when the n-th request arrives (before it is answered)."""

    HOLD_S = 60.0  # far above any ordering a test waits for; a test whose event never comes fails, not hangs

    def __init__(self, path: str | None = "/v1/completions", *, after: int = 0, times: int | None = None,
                 hold: threading.Event | None = None, on_seen: Any = None):
        self.path, self.after, self.times, self.hold, self.on_seen = path, after, times, hold, on_seen
        self.matched = self.seen = self.hung_up = 0
        self._lock = threading.Lock()
        self._reached: dict[int, threading.Event] = {}
        self._all_hung_up = threading.Condition(self._lock)

    def reached(self, n: int) -> threading.Event:
        """An event set once ``n`` requests have arrived here."""
        with self._lock:
            event = self._reached.setdefault(n, threading.Event())
            if self.seen >= n:
                event.set()
            return event

    def wait_hung_up(self, timeout: float = HOLD_S) -> bool:
        """Whether every request that arrived here saw its client hang up within ``timeout``: the
        server's threads notice a closed connection when they next read or write, so this waits
        for an event the client's close guarantees, not for a time."""
        with self._all_hung_up:
            return self._all_hung_up.wait_for(lambda: self.seen >= 1 and self.hung_up == self.seen, timeout)

    def deliver(self, handler: Any, status: int, data: bytes) -> bool:
        with self._lock:
            if self.path is not None and handler.path != self.path:
                return False
            self.matched += 1
            if self.matched <= self.after or (self.times is not None and self.seen >= self.times):
                return False
            self.seen += 1
            seen = self.seen
            for n, event in self._reached.items():
                if seen >= n:
                    event.set()
        if self.on_seen is not None:
            self.on_seen(seen)
        if self.hold is not None and not self.hold.wait(self.HOLD_S):
            raise RuntimeError(f"{type(self).__name__}: the event it holds for never came in {self.HOLD_S:g} s")
        try:
            self.send(handler, status, data)
        except OSError:  # the client hung up (its deadline, or it was told to stop)
            with self._all_hung_up:
                self.hung_up += 1
                self._all_hung_up.notify_all()
        handler.close_connection = True
        return True

    def send(self, handler: Any, status: int, data: bytes) -> None:
        raise NotImplementedError

    @staticmethod
    def head(handler: Any, status: int, length: int | None, kind: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        if length is not None:
            handler.send_header("Content-Length", str(length))
        handler.end_headers()
        handler.wfile.flush()


class Refuse(Fault):
    """A refusal whose body echoes the request's headers back: ``form`` "json" (the headers as a
    JSON object), "text" (as HTTP lines in a plain-text page), "partial" (the Authorization
    value's first 14 and last 4 characters, as some APIs print a wrong key), "quoted" (the value
    URL-encoded and repr-quoted); ``retry_after``: a Retry-After header to send with it."""

    def __init__(self, status: int, form: str = "json", *, retry_after: str | None = None, **kw: Any):
        super().__init__(**kw)
        self.status, self.form, self.retry_after = status, form, retry_after

    def send(self, handler: Any, status: int, data: bytes) -> None:
        from urllib.parse import quote

        headers = dict(handler.headers)
        auth = headers.get("Authorization", "")
        if self.form == "json":
            body, kind = json.dumps({"error": {"message": "refused", "request_headers": headers}}), "application/json"
        elif self.form == "text":
            body, kind = "refused\n" + "".join(f"{k}: {v}\n" for k, v in headers.items()), "text/plain"
        elif self.form == "partial":
            body, kind = json.dumps({"error": f"Incorrect API key provided: {auth[7:21]}****{auth[-4:]}"}), "application/json"
        else:
            body, kind = json.dumps({"error": f"bad header {quote(auth, safe='')} / {auth!r}"}), "application/json"
        raw = body.encode()
        handler.send_response(self.status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(raw)))
        if self.retry_after is not None:
            handler.send_header("Retry-After", self.retry_after)
        handler.end_headers()
        handler.wfile.write(raw)


class Drip(Fault):
    """The answer's headers, then its body ``every`` seconds a byte; ``forever``: a body that never
    ends (bytes of whitespace after the answer, for at most ``give_up`` seconds so a client
    without a deadline fails its test instead of hanging it)."""

    def __init__(self, every: float = 0.05, *, forever: bool = False, give_up: float = 120.0, **kw: Any):
        super().__init__(**kw)
        self.every, self.forever, self.give_up = every, forever, give_up

    def send(self, handler: Any, status: int, data: bytes) -> None:
        import time

        self.head(handler, status, None if self.forever else len(data))
        end = time.monotonic() + self.give_up
        body = iter(data) if not self.forever else iter(lambda: 32, None)  # 32: a space, forever
        for byte in body:
            if time.monotonic() > end:
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(self.every)


class Silent(Fault):
    """Reads the request and never answers, until the client hangs up (or ``give_up`` seconds)."""

    def __init__(self, give_up: float = 120.0, **kw: Any):
        super().__init__(**kw)
        self.give_up = give_up

    def send(self, handler: Any, status: int, data: bytes) -> None:
        handler.connection.settimeout(self.give_up)
        try:
            if handler.rfile.read(1) == b"":  # the client closed: nothing more will come
                raise ConnectionResetError("client hung up")
        except TimeoutError:
            pass


class Reset(Fault):
    """The answer's headers and the first ``fraction`` of its body, then a TCP reset (``rst``) or
    an ordinary close (the body cut short of its Content-Length)."""

    def __init__(self, fraction: float = 0.5, *, rst: bool = True, **kw: Any):
        super().__init__(**kw)
        self.fraction, self.rst = fraction, rst

    def send(self, handler: Any, status: int, data: bytes) -> None:
        import socket
        import struct

        self.head(handler, status, len(data))
        handler.wfile.write(data[: int(len(data) * self.fraction)])
        handler.wfile.flush()
        if self.rst:  # linger 0: the close sends RST, not FIN
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            handler.connection.shutdown(socket.SHUT_WR)
        handler.connection.close()


class Chain(Fault):
    """The first of ``faults`` that delivers an answer delivers it; the normal answer when none does."""

    def __init__(self, *faults: Fault):
        super().__init__(path=None)
        self.faults = faults

    def deliver(self, handler: Any, status: int, data: bytes) -> bool:
        return any(f.deliver(handler, status, data) for f in self.faults)


class Oversize(Fault):
    """A valid JSON answer of ``mb`` MiB (the real answer padded with a long field), announced
    with its Content-Length or, ``chunked``, without one."""

    def __init__(self, mb: float, *, chunked: bool = False, **kw: Any):
        super().__init__(**kw)
        self.mb, self.chunked = mb, chunked
        self.sent = 0

    def send(self, handler: Any, status: int, data: bytes) -> None:
        pad = int(self.mb * 2**20)
        head, tail = data[:-1] + b', "padding": "', b'"}'
        total = len(head) + pad + len(tail)
        if self.chunked:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
        else:
            self.head(handler, status, total)
        block = b"x" * 65536
        pieces = [head] + [block] * (pad // len(block)) + [b"x" * (pad % len(block)), tail]
        for piece in pieces:
            if self.chunked:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if piece else b"")
            else:
                handler.wfile.write(piece)
            self.sent += len(piece)
        if self.chunked:
            handler.wfile.write(b"0\r\n\r\n")
