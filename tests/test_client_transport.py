"""The client's transport interface (issue 21): the Endpoint value, the error kinds, the one
retry loop, and the public tee hook the shadow proxy relays through."""

from __future__ import annotations

import ast
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from accelbench.client import http1
from accelbench.client.errors import (
    ConnectError,
    ConnectionClosed,
    ErrorKind,
    ResponseTimeout,
    TransportError,
)
from accelbench.client.http1 import HTTP1Transport
from accelbench.client.transport import RETRIES, BodySink, Request, send_with_retries
from accelbench.metrics.records import ERROR_KINDS
from accelbench.urls import Endpoint, redact_url, split_credentials

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"


# -- Endpoint ------------------------------------------------------------------------------
def test_endpoint_parts_and_forms() -> None:
    e = Endpoint.parse("http://us%40er:p%3Aw@127.0.0.1:8000/v1/")
    assert e.url == "http://127.0.0.1:8000/v1"
    assert e.display == str(e) == "http://***@127.0.0.1:8000/v1"
    assert repr(e) == "Endpoint('http://***@127.0.0.1:8000/v1')"
    assert f"{e}" == e.display and "p%3Aw" not in repr(e)
    assert (e.host, e.port, e.scheme, e.root) == (
        "127.0.0.1",
        8000,
        "http",
        "http://127.0.0.1:8000",
    )
    assert e.auth == split_credentials("http://us%40er:p%3Aw@h")[1]
    assert e.headers() == {"Authorization": e.auth}
    assert e.headers("sk-1") == {"Authorization": "Bearer sk-1"}  # the key wins
    assert set(e.secrets) == {"p%3Aw", "p:w"}
    assert redact_url(e) == e.display
    plain = Endpoint.parse("https://h")
    assert (plain.url, plain.display, plain.auth, plain.port) == (
        "https://h",
        "https://h",
        None,
        443,
    )
    assert plain.headers() == {} and Endpoint.parse(plain) is plain


def test_an_endpoint_is_no_json_value() -> None:
    """A writer handed an Endpoint instead of its display form fails; it never writes the
    credentials (a dataclass would be serialized field by field by orjson)."""
    e = Endpoint.parse("http://u:SECRETMARK@h:1")
    with pytest.raises(TypeError):
        orjson.dumps({"url": e})
    with pytest.raises(TypeError):
        json.dumps({"url": e})
    assert b"SECRETMARK" not in orjson.dumps({"url": e.display, "bare": e.url})


def test_endpoint_travels_to_a_child_process_whole() -> None:
    e = Endpoint.parse("http://u:k%21ey@h:1/v1")
    back = Endpoint.from_secret_parts(orjson.loads(orjson.dumps(e.secret_parts())))
    assert back == e and back.secrets == e.secrets and back.display == e.display


# -- error kinds ---------------------------------------------------------------------------
def test_error_kind_values_are_the_stored_strings() -> None:
    """Stored files keep their error_kind strings: the enum's values are the old ones."""
    assert ERROR_KINDS == (
        "http_429", "http_4xx", "http_5xx", "http_other", "timeout", "disconnect",
        "malformed_stream", "malformed_usage", "server_error_event", "empty_response",
        "connect_error", "client_exception", "interrupted", "context_exceeded",
    )  # fmt: skip
    assert ErrorKind("timeout") is ErrorKind.TIMEOUT and ErrorKind.TIMEOUT == "timeout"
    assert orjson.dumps([ErrorKind.INTERRUPTED]) == b'["interrupted"]'
    assert ConnectError("x").kind is ErrorKind.CONNECT_ERROR
    assert ResponseTimeout("x").kind is ErrorKind.TIMEOUT
    assert ConnectionClosed("x", True).kind is ErrorKind.DISCONNECT


def test_no_error_kind_literal_is_left_in_src() -> None:
    """Every comparison with or assignment of an error kind goes through ErrorKind."""
    kinds = set(ERROR_KINDS) - {"interrupted", "timeout", "disconnect"}  # also other words
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "records.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in kinds:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}")
            if isinstance(node, ast.Compare | ast.Assign) and "error_kind" in ast.unparse(node):
                consts = [n for n in ast.walk(node) if isinstance(n, ast.Constant)]
                found += [f"{path.relative_to(SRC)}:{n.lineno} {n.value!r}" for n in consts
                          if n.value in ERROR_KINDS]  # fmt: skip
    assert not found, found


# -- the one retry loop --------------------------------------------------------------------
class _Flaky:
    """A transport whose first ``fail`` attempts raise ``exc``."""

    def __init__(self, fail: int, exc: Callable[[], TransportError]) -> None:
        self.fail = fail
        self.exc = exc
        self.attempts = 0

    async def send(self, req, new_sink, *, deadline_ns, tee=None) -> bool:  # noqa: ANN001
        self.attempts += 1
        new_sink()
        if self.attempts <= self.fail:
            raise self.exc()
        return True

    def receive_stats(self) -> None:
        return None

    async def close(self) -> None:
        pass


def _stale() -> TransportError:
    e = ConnectionClosed("server closed the connection before responding", True)
    e.retryable = True
    return e


def _send(t: _Flaky, **kw) -> tuple[bool | TransportError, int]:  # noqa: ANN003
    retries = []

    async def go() -> bool | TransportError:
        try:
            return await send_with_retries(
                t, Request("/", b""), lambda: None, timeout_s=5,  # type: ignore[arg-type,return-value]
                on_retry=lambda: retries.append(1), **kw,
            )  # fmt: skip
        except TransportError as exc:
            return exc

    return asyncio.run(go()), len(retries)


def test_retries_only_what_is_retryable_and_at_most_RETRIES_times() -> None:
    t = _Flaky(RETRIES, _stale)
    assert _send(t) == (True, RETRIES) and t.attempts == RETRIES + 1
    t = _Flaky(RETRIES + 1, _stale)
    out, n = _send(t)
    assert isinstance(out, ConnectionClosed) and n == RETRIES and t.attempts == RETRIES + 1
    for exc in (lambda: ConnectionClosed("mid-response", False), lambda: ConnectError("no")):
        t = _Flaky(1, exc)
        out, n = _send(t)
        assert isinstance(out, TransportError) and n == 0 and t.attempts == 1


def test_a_started_first_attempt_is_finished_not_sent_again() -> None:
    t = _Flaky(0, _stale)
    seen: list[int] = []

    async def first(deadline_ns: int) -> bool:
        seen.append(deadline_ns)
        raise _stale()

    out, n = _send(t, first=first)
    assert out is True and n == 1 and len(seen) == 1 and t.attempts == 1


def test_a_timeout_names_the_whole_budget() -> None:
    out, _ = _send(_Flaky(1, lambda: ResponseTimeout("late")))
    assert isinstance(out, ResponseTimeout) and str(out) == "no complete response within 5 s"


# -- the tee -------------------------------------------------------------------------------
class _Sink:
    def __init__(self) -> None:
        self.status = 0
        self.body = b""
        self.ended = False

    def on_headers(self, status: int, t_ns: int) -> None:
        self.status = status

    def on_data(self, data: bytes, t_ns: int) -> bool:
        self.body += data
        return True

    def on_end(self, t_ns: int) -> None:
        self.ended = True


RESPONSE = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"6\r\ndata: \r\n3\r\nabc\r\n0\r\n"  # the final CRLF follows (or not)
)


async def _serve_once(writes: list[tuple[float, bytes]]) -> tuple[asyncio.Server, int]:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        for delay, data in writes:
            await asyncio.sleep(delay)
            w.write(data)
        await asyncio.sleep(1.0)
        w.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


def _tee_run(writes: list[tuple[float, bytes]]) -> tuple[bytes, _Sink, bool]:
    async def go() -> tuple[bytes, _Sink, bool]:
        srv, port = await _serve_once(writes)
        t = HTTP1Transport("127.0.0.1", port, parse_after_io=True)
        teed: list[bytes] = []
        sink = _Sink()

        def new_sink() -> BodySink:
            return sink

        try:
            keep = await t.send(
                Request("/x", b"{}"), new_sink, deadline_ns=time.monotonic_ns() + 10**10,
                tee=teed.append,
            )  # fmt: skip
        finally:
            await t.close()
            srv.close()
        return b"".join(teed), sink, keep

    return asyncio.run(go())


@pytest.mark.parametrize("split", [len(RESPONSE), 10, len(RESPONSE) - 3])
def test_the_tee_gets_the_response_whole_however_it_arrives(split: int) -> None:
    """Every byte of the response, unparsed, in order; the final CRLF of a chunked body
    that comes after the parser ended the body too; nothing after the response."""
    whole = RESPONSE + b"\r\n"
    teed, sink, keep = _tee_run(
        [(0, whole[:split]), (0.05, whole[split:]), (0.05, b"HTTP/1.1 200 junk")]
    )
    assert teed == whole
    assert (sink.status, sink.body, sink.ended, keep) == (200, b"data: abc", True, True)


def test_a_final_crlf_that_never_comes_is_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "TAIL_WAIT_S", 0.2)
    teed, sink, _ = _tee_run([(0, RESPONSE)])
    assert teed == RESPONSE + b"\r\n" and sink.ended


def test_the_shadow_proxy_uses_the_client_through_its_public_interface() -> None:
    """No subclass of the client's classes, no private attribute of another object."""
    path = SRC / "suites" / "shadow" / "proxy.py"
    tree = ast.parse(path.read_text())
    client_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("accelbench.client") for a in n.names}  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
            assert not bases & client_names, (node.name, bases)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            is_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            assert is_self or node.attr.startswith("__"), (node.lineno, ast.unparse(node))


# -- both transports behind the one loop ---------------------------------------------------
EVENTS = (
    b'data: {"choices":[{"text":"hi","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"text":"","finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n',
    b"data: [DONE]\n\n",
)
SSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in EVENTS)
    + b"0\r\n\r\n"
)


@pytest.mark.parametrize("transport", ["http1", "aiohttp"])
def test_each_transport_retries_a_connection_closed_before_responding(transport: str) -> None:
    """A server that answers each connection's first request and closes it, without a
    byte, on the second (as llama-server does with idle ones): every later request is
    sent again once, on a new connection, and succeeds."""
    from accelbench.client.session import OpenAIClient
    from accelbench.metrics.records import RequestRecord

    async def go() -> tuple[list[RequestRecord], int]:
        conns = 0

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal conns
            conns += 1
            for first in (True, False):
                try:
                    head = await r.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:  # the client closed it
                    break
                n = next(int(x.split(b":")[1]) for x in head.split(b"\r\n")
                         if x.lower().startswith(b"content-length:"))  # fmt: skip
                await r.readexactly(n)
                if not first:
                    break
                w.write(SSE)
                await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://user:SECRETMARK@127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1"
        c = OpenAIClient(url, transport=transport, timeout_s=10)
        recs = []
        for i in range(3):
            rec = RequestRecord(idx=i, request_id=f"r{i}", max_tokens=1)
            await c.send(rec, {"model": "m", "prompt": "x", "max_tokens": 1, "stream": True})
            recs.append(rec)
            await asyncio.sleep(0.05)
        await c.close()
        srv.close()
        await asyncio.sleep(0.05)  # the handlers see the client's close
        return recs, conns

    recs, conns = asyncio.run(go())
    assert [(r.ok, r.output_text) for r in recs] == [(True, "hi")] * 3, [r.error for r in recs]
    assert [r.retries for r in recs] == [0, 1, 1] and conns == 3
