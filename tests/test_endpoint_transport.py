"""The endpoint engine's transport (bias_core/models/engines/http_client.py) against a stub server
that delivers its answers badly (tests/openai_stub_server.py): --request-timeout is a deadline for
each try whatever the server sends, answers are read only up to --max-response-mb, resets and
answers cut short are retried, and a call's failure stops its other requests at once; however a
call ends (a refusal, the deadline, the size cap, Ctrl-C, SIGTERM), no connection of it is open
when it returns.

No assertion here is about how fast a machine is: each checks a mechanism (how many tries the
server saw, whether the client hung up before the end, how much memory the client held, which
sockets the process holds), and the few wall-clock bounds are far above what a loaded machine
needs and far below what the broken behaviour takes (a stub that drips or stays silent gives up
only after 120 s). Where the order of events matters, the stub holds an answer until an event
(``hold=fault.reached(n)``), and a test waits only for what the client's close guarantees the
server will see (``fault.wait_hung_up()``), never for a thread to have run by some time."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import tracemalloc

import numpy as np
import psutil
import pytest

from bias_core.errors import AuditUsageError, EngineUnavailable
from bias_core.models import LoadOptions, check_options, load_model, resolve_model
from bias_core.models.engines.http_client import (
    MAX_WAIT,
    EndpointAnswerError,
    EndpointAuthError,
    EndpointClient,
    EndpointError,
    worst_case_seconds,
)
from bias_core.models.engines.options import engine_fields

from harness import load_tiny
from openai_stub_server import Chain, Drip, Fault, Oversize, Refuse, Reset, Silent, StubServer

MODELS = "/v1/models"  # answered without running the model: the transport alone is under test
LISTING = {"object": "list", "data": [{"id": "stub-model", "object": "model"}]}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tiny_model import build_tiny_causal_lm

    folder = build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-transport"), seed=0)
    return folder, load_tiny(folder, "cpu", cache_dir=tmp_path_factory.mktemp("ref-cache"))


@pytest.fixture
def server(reference):
    _, ref = reference
    with StubServer(ref.engine.model, ref.engine.tokenizer) as stub:
        yield stub


def client(url: str, **kw) -> EndpointClient:
    kw.setdefault("retries", 1)
    kw.setdefault("backoff", 0.0)
    kw.setdefault("progress", False)
    return EndpointClient(url, **kw)


# ----- the deadline ------------------------------------------------------------------------------------
def test_a_body_dripped_forever_is_cut_at_the_deadline_of_every_try(server):
    server.transport = drip = Drip(every=0.05, forever=True, path=MODELS)
    start = time.monotonic()
    with pytest.raises(EngineUnavailable, match=r"in 2 tries \(") as raised:
        client(server.url, timeout=0.5).get(MODELS)
    # both tries were cut by the deadline: named once as "2 x ..." when both had received as many
    # bytes, else once each (how many bytes arrive before the cut depends on the machine's load)
    message = str(raised.value)
    cut = "no whole answer within --request-timeout 0.5 s"
    assert message.count(f"2 x {cut}") == 1 or message.count(cut) == 2, message
    assert time.monotonic() - start < 60  # each try would last the stub's 120 s without the deadline
    assert drip.seen == 2 and drip.wait_hung_up()  # the client hung up on both


def test_a_slow_body_with_its_length_is_cut_and_the_retry_answers(server):
    # ~70 bytes at one per 0.5 s: 35 s, against a deadline of 3 s (room for the retry's whole answer
    # on a loaded machine); per-read timeouts never fire
    server.transport = drip = Drip(every=0.5, path=MODELS, times=1)
    assert client(server.url, timeout=3.0).get(MODELS) == LISTING
    assert drip.seen == 1 and drip.wait_hung_up()
    assert [r["path"] for r in server.requests] == [MODELS, MODELS]


def test_a_server_that_never_answers_is_cut_at_the_deadline(server):
    server.transport = silent = Silent(path=MODELS)
    with pytest.raises(EngineUnavailable, match="2 x no whole answer within --request-timeout 0.3 s"):
        client(server.url, timeout=0.3).get(MODELS)
    assert silent.seen == 2 and silent.wait_hung_up()


def test_the_worst_case_of_a_request_is_the_documented_formula(server):
    assert worst_case_seconds(120, 4) == 5 * 120 + 4 * MAX_WAIT == 720  # docs/engines.md
    server.transport = Silent(path=MODELS)
    start = time.monotonic()
    with pytest.raises(EngineUnavailable, match="in 3 tries"):
        client(server.url, timeout=0.3, retries=2, backoff=0.1).get(MODELS)
    assert time.monotonic() - start <= worst_case_seconds(0.3, 2)


def test_a_failed_request_stops_the_others_of_its_call_at_once(server):
    """Four requests in flight: three held by a silent server with a 100 s deadline, then the
    fourth refused (401), in that order whatever the machine's load (the refusal waits for the
    three). The call ends with the refusal; the three are cut, not waited for, and no connection
    of the call is open when it returns."""
    silent = Silent(path=MODELS)
    server.transport = Chain(Refuse(401, path=MODELS, times=1, hold=silent.reached(3)), silent)
    c = client(server.url, timeout=100, max_concurrency=4)
    start = time.monotonic()
    with pytest.raises(EndpointAuthError, match="401"):
        c.map(lambda i: c.get(MODELS), list(range(8)))
    assert time.monotonic() - start < 60
    assert open_connections(server) == []
    assert silent.seen >= 3 and silent.wait_hung_up()


# ----- a call that ends early leaves no connection open -----------------------------------------------
def open_connections(server) -> list:
    """This process's TCP sockets connected to the stub: the client's ends (the stub's own ends
    have its port as their local port). A socket shut down but not closed still counts."""
    port = int(server.url.rsplit(":", 1)[1])
    return [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port]


# Set while the test's main thread waits on the call the signal is aimed at. A signal outside it
# (the call ended otherwise first, on a loaded machine) would reach pytest itself: a
# KeyboardInterrupt there ends the whole worker and with it the run (xdist: "node down"), so it
# is neither sent nor, if already on its way, raised; the test fails on what ended the call.
IN_CALL = threading.Event()
STRAY: list[str] = []


def _interrupt(how: str):
    """What the server does when its third request arrives: interrupt the test's main thread
    (the one waiting on the call), as Ctrl-C or a CI job's SIGTERM would."""
    def on_seen(n: int) -> None:
        if n == 3 and IN_CALL.is_set():
            # a real signal (as Ctrl-C's), not _thread.interrupt_main(): that one only flags the main thread,
            # which would go on waiting for the call instead of being woken
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT if how == "sigint" else signal.SIGTERM)
        elif n == 3:
            STRAY.append(how)
    return on_seen


@contextlib.contextmanager
def interruptible_call():
    """The window in which the test's own SIGINT/SIGTERM may interrupt: the call. Outside it a
    late signal is recorded in STRAY, not raised (see IN_CALL)."""
    def only_in_the_call(signum, frame):
        if IN_CALL.is_set():
            raise KeyboardInterrupt(signal.Signals(signum).name)
        STRAY.append(signal.Signals(signum).name)

    previous = {s: signal.signal(s, only_in_the_call) for s in (signal.SIGINT, signal.SIGTERM)}
    STRAY.clear()
    IN_CALL.set()
    try:
        yield
    finally:
        IN_CALL.clear()
        for s, handler in previous.items():
            signal.signal(s, handler)


# how a call ends early: the fault that ends it (holding three requests where it can), the client's
# options, what the call raises, and whether the server holds the requests open (so it must see them hung up)
ENDINGS = {
    "refused-while-others-wait": (lambda: _refused_behind(Silent(path=MODELS)), {"timeout": 100}, EndpointAuthError, True),
    "refused-while-others-stream": (lambda: _refused_behind(Drip(every=0.05, forever=True, path=MODELS)),
                                    {"timeout": 100}, EndpointAuthError, True),
    "sigint": (lambda: Silent(path=MODELS, on_seen=_interrupt("sigint")), {"timeout": 100}, KeyboardInterrupt, True),
    "sigterm": (lambda: Silent(path=MODELS, on_seen=_interrupt("sigterm")), {"timeout": 100}, KeyboardInterrupt, True),
    "deadline": (lambda: Silent(path=MODELS), {"timeout": 0.5}, EngineUnavailable, True),
    "size-cap-announced": (lambda: Oversize(20, path=MODELS), {"max_response_mb": 1}, EndpointAnswerError, True),
    "size-cap-streamed": (lambda: Oversize(20, chunked=True, path=MODELS), {"max_response_mb": 1}, EndpointAnswerError, True),
    "compressed-answer": (lambda: _Gzipped(path=MODELS), {}, EndpointAnswerError, False),
    "refused-request": (lambda: Refuse(400, path=MODELS), {}, EndpointError, False),
}


def _refused_behind(held: Fault) -> Chain:
    chain = Chain(Refuse(401, path=MODELS, times=1, hold=held.reached(3)), held)
    chain.held = held
    return chain


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_call_that_ends_early_leaves_no_connection_open(server, ending):
    make_fault, options, raised, held = ENDINGS[ending]
    if raised is KeyboardInterrupt and threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal reaches the main thread only, and this test runs in another")
    server.transport = fault = make_fault()
    fault = getattr(fault, "held", fault)
    c = client(server.url, max_concurrency=4, **options)
    with pytest.raises(raised) as failure:
        with interruptible_call():  # SIGTERM raised as KeyboardInterrupt, as the plugin's handler does
            c.map(lambda i: c.get(MODELS), list(range(8)))
    # checked while the error is alive: its traceback holds the frames of the tries it ended
    assert open_connections(server) == [], failure.value
    assert not STRAY, f"a signal came after the call had ended: {STRAY}"
    assert fault.seen >= 1
    if held:
        assert fault.wait_hung_up(), (fault.seen, fault.hung_up)


def test_ctrl_c_while_the_call_is_still_handed_out_stops_what_it_had_started(server, monkeypatch):
    """SIGINT comes while the client is still handing out the call's requests (the first four in
    flight, the fifth being submitted): the four are cut, the rest never start, no socket stays."""
    from bias_core.models.engines import http_client

    silent = Silent(path=MODELS, on_seen=_interrupt("sigint"))
    server.transport = silent
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal reaches the main thread only, and this test runs in another")

    class SlowToHandOut(http_client.ThreadPoolExecutor):
        handed = 0

        def submit(self, fn, *args):
            SlowToHandOut.handed += 1
            if SlowToHandOut.handed == 5:  # held here until the signal ends the wait
                assert not threading.Event().wait(Fault.HOLD_S), "the signal never came"
            return super().submit(fn, *args)

    monkeypatch.setattr(http_client, "ThreadPoolExecutor", SlowToHandOut)
    c = client(server.url, timeout=100, max_concurrency=4)
    with pytest.raises(KeyboardInterrupt):
        with interruptible_call():
            c.map(lambda i: c.get(MODELS), list(range(8)))
    assert open_connections(server) == []
    assert not STRAY, f"a signal came after the call had ended: {STRAY}"
    assert silent.seen >= 3 and silent.wait_hung_up()
    assert len(server.requests) == silent.seen <= 4


def test_a_request_not_yet_sent_when_its_call_fails_is_never_sent(server):
    """The refusal comes back before the other requests of the call are sent (on a loaded machine
    their threads may not have run yet): they are dropped, none reaches the server. Held here by
    making the seven wait for the call's stop; the earlier form of the test above assumed at least
    one of them reached the server first, and failed when none had."""
    silent = Silent(path=MODELS)
    server.transport = Chain(Refuse(401, path=MODELS, times=1), silent)
    c = client(server.url, timeout=100, max_concurrency=4)

    def make(i: int):
        if i:
            assert c._local.stop.wait(Fault.HOLD_S)  # the call's stop (thread-local: this request's call)
        return c.get(MODELS)

    with pytest.raises(EndpointAuthError):
        c.map(make, list(range(8)))
    assert silent.seen == 0 and [r["path"] for r in server.requests] == [MODELS]
    assert open_connections(server) == []


def test_a_try_cut_while_it_connects_is_closed_once_connected(server):
    """A try the call's stop cuts before its socket exists (nothing to shut down yet) gives up as
    soon as the connection is made, sends nothing and closes it."""
    silent = Silent(path=MODELS)
    server.transport = Chain(Refuse(401, path=MODELS, times=1), silent)
    c = client(server.url, timeout=100, max_concurrency=4)
    new_connection = c._new_connection
    first = threading.Lock()

    def connecting_after_the_stop():
        conn = new_connection()
        connect = conn.connect

        def connect_late():
            if not first.acquire(blocking=False):  # every try but the first connects once the call has stopped
                assert c._local.stop.wait(Fault.HOLD_S)
            connect()
        conn.connect = connect_late
        return conn

    c._new_connection = connecting_after_the_stop
    with pytest.raises(EndpointAuthError):
        c.map(lambda i: c.get(MODELS), list(range(8)))
    assert silent.seen == 0 and [r["path"] for r in server.requests] == [MODELS]
    assert open_connections(server) == []


# ----- resets and answers cut short -------------------------------------------------------------------
@pytest.mark.parametrize("rst", [True, False], ids=["reset", "closed-short"])
def test_an_answer_cut_half_way_is_retried(server, rst):
    server.transport = cut = Reset(0.5, rst=rst, path=MODELS, times=1)
    assert client(server.url).get(MODELS) == LISTING
    assert cut.seen == 1 and len(server.requests) == 2


def test_an_answer_cut_every_time_is_engine_unavailable_after_the_retries(server):
    server.transport = Reset(0.5, path=MODELS)
    with pytest.raises(EngineUnavailable, match=r"in 5 tries \(5 x the connection ended after \d+ bytes of the answer"):
        client(server.url, retries=4).get(MODELS)
    assert len(server.requests) == 5


def test_a_reset_mid_run_is_retried_and_the_numbers_stay(server, reference, tmp_path):
    folder, ref = reference
    lm = load_model(resolve_model(str(folder)), LoadOptions(engine="openai", progress=False, cache_dir=tmp_path,
                                                            use_cache=False,
                                                            engine_options={"engine_url": server.url,
                                                                            "max_concurrency": 1}))
    server.transport = cut = Reset(0.5, times=2)
    pairs = [("My friend is a nurse, and", " she"), ("The pilot said that", " he")]
    np.testing.assert_allclose(lm.loglikelihood(pairs), ref.loglikelihood(pairs), atol=1e-4)
    assert cut.seen == 2


# ----- the size cap --------------------------------------------------------------------------------------
@pytest.mark.parametrize("chunked, seen", [(False, r"20\.0 MB announced"), (True, "more than that received")],
                         ids=["content-length", "chunked"])
def test_an_answer_over_the_size_cap_is_refused_while_it_streams(server, chunked, seen):
    server.transport = big = Oversize(20, chunked=chunked, path=MODELS)
    tracemalloc.start()
    try:
        with pytest.raises(EndpointAnswerError, match=f"larger than --max-response-mb 1 \\({seen}\\)"):
            client(server.url, max_response_mb=1).get(MODELS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20  # what was read: at most the cap and one piece, never the 20 MiB
    assert big.seen == 1  # a size is not retried
    assert big.wait_hung_up()  # the client stopped reading: the server could not finish


def test_an_answer_over_the_size_cap_at_load_is_named_as_such(server, reference, tmp_path):
    folder, _ = reference
    server.transport = Oversize(20)
    with pytest.raises(AuditUsageError, match=r"larger than --max-response-mb 16 \(20\.0 MB announced\)") as failure:
        load_model(resolve_model(str(folder)), LoadOptions(engine="openai", progress=False,
                                                           engine_options={"engine_url": server.url},
                                                           cache_dir=tmp_path, use_cache=False))
    assert "log-probabilit" not in str(failure.value)


class _Gzipped(Fault):
    def send(self, handler, status, data):
        import gzip

        body = gzip.compress(data)
        handler.send_response(status)
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def test_an_answer_compressed_without_being_asked_is_refused(server):
    server.transport = _Gzipped(path=MODELS)
    with pytest.raises(EndpointAnswerError, match="Content-Encoding 'gzip', which was not asked for"):
        client(server.url).get(MODELS)
    assert server.requests[0]["headers"]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("options, message", [
    ({"max_response_mb": 0.0}, "--max-response-mb 0.0: must be a positive, finite number"),
    ({"max_response_mb": float("inf")}, "--max-response-mb inf: must be a positive, finite number"),
    ({"request_timeout": float("inf")}, "--request-timeout inf: must be a positive, finite number"),
    ({"request_timeout": float("nan")}, "--request-timeout nan"),
])
def test_the_deadline_and_the_size_cap_are_checked_before_any_model_loads(options, message):
    with pytest.raises(AuditUsageError, match=message):
        check_options(LoadOptions(engine="openai", engine_options={"engine_url": "http://h:1", **options}))
    with pytest.raises(AuditUsageError, match="--max-response-mb lots: must be a positive number of MiB"):
        engine_fields(lambda name, default=None: "lots" if name == "--max-response-mb" else default)
    with pytest.raises(AuditUsageError, match="not an option of --engine transformers"):
        check_options(LoadOptions(engine_options={"max_response_mb": 4.0}))


# ----- kept-alive connections ------------------------------------------------------------------------------
def test_connections_the_server_closed_while_idle_are_not_a_failed_try():
    """An HTTP/1.1 server that keeps each connection for one answer and then closes it without
    saying so: the client finds the idle connection closed and opens another (no try is lost),
    and reuses connections the server keeps."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen, connections = [], []

    class OneShot(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            connections.append(self.client_address)

        def do_GET(self):
            seen.append(self.path)
            data = json.dumps(LISTING).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = self.path.endswith("close")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), OneShot)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        c = client(f"http://127.0.0.1:{httpd.server_address[1]}", retries=0)
        for _ in range(5):
            assert c.get("/close") == LISTING  # retries=0: a stale connection would have failed
        assert len(seen) == 5 and len(connections) == 5
        for _ in range(5):
            assert c.get("/keep") == LISTING
        assert len(connections) == 6  # one connection for the five kept-alive answers
        c.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
