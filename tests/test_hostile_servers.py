"""Broken or hostile HTTP/1.1 servers (real sockets on 127.0.0.1) against the client:
each case ends in the record the truth calls for, at once, never a wait for the timeout,
a swallowed framing error or a record that grows without end. Both read loops of the
http1 transport (compiled and Python) decide alike; aiohttp (https) where it differs."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
from pathlib import Path

import pytest

from accelbench.client import http1
from accelbench.client.openai import chunk_limit
from accelbench.client.session import OpenAIClient
from accelbench.metrics.records import RequestRecord
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from hostile_server import GOOD, HostileServer

EV = b'data: {"choices":[{"text":" a","finish_reason":null}]}\n\n'
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(b: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(b), b)


def _len(body: bytes, status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


@pytest.fixture(params=["compiled", "python", "aiohttp"])
def transport(request, monkeypatch):
    """The http1 transport with either read loop (test_kernel_stamps' ``read_loop``), and
    aiohttp."""
    if request.param == "python":
        monkeypatch.setattr(http1, "_c_read_ready", None)
    return "aiohttp" if request.param == "aiohttp" else "http1"


def _send(respond, transport: str, max_tokens: int | None = None, **kw):
    async def go(url: str) -> RequestRecord:
        client = OpenAIClient(url, transport=transport, timeout_s=20)
        rec = RequestRecord(idx=0, request_id="r-0", max_tokens=max_tokens)
        try:
            await client.send(rec, {"model": "hostile", "prompt": "x", "stream": True})
        finally:
            await client.close()
        return rec

    with HostileServer(lambda rid: respond, **kw) as srv:
        t0 = time.monotonic()
        rec = asyncio.run(go(srv.url))
        return rec, time.monotonic() - t0


def _keep_open(data: bytes):
    def act(sock: socket.socket) -> None:
        sock.sendall(data)
        time.sleep(3)  # and never close: the client must not wait for us

    return act


# -- framing the client used to accept or time out on --------------------------------
BROKEN_FRAMING = [
    # not HTTP at all, on a connection kept open: was a wait for the whole timeout
    ("not_http_kept_open", _keep_open(b"SSH-2.0-OpenSSH_9.0\r\n"), "not an HTTP response"),
    # int(b"-5", 16) == -5: the negative chunk was skipped and the data read as a size
    ("negative_chunk", CHUNKED + b"-5\r\n" + GOOD + b"\r\n0\r\n\r\n", "bad chunk size b'-5'"),
    ("0x_chunk", CHUNKED + b"0x%x\r\n" % len(GOOD) + GOOD + b"\r\n0\r\n\r\n", "0x"),
    ("2**70_chunk", CHUNKED + b"%x\r\n" % 2**70 + GOOD, "4000000000"),
    (
        "gzip_chunked",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        + _chunk(gzip.compress(GOOD))
        + b"0\r\n\r\n",
        "gzip",
    ),  # fmt: skip
    (
        "chunked_gzip",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n" + gzip.compress(GOOD),
        "",
    ),  # fmt: skip
    ("negative_length", b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n" + GOOD, "Content-Length"),
]


@pytest.mark.parametrize("name, respond, words", BROKEN_FRAMING, ids=[c[0] for c in BROKEN_FRAMING])
def test_broken_framing_is_malformed_stream_at_once(transport, name, respond, words):
    rec, took = _send(respond, transport)
    assert rec.error_kind == "malformed_stream", (rec.error_kind, rec.error)
    assert not rec.ok and (words in rec.error or transport == "aiohttp")  # its own words
    assert took < 2.0  # not the timeout (20 s), nor the server's 3 s


# -- statuses ------------------------------------------------------------------------
def test_interim_100_continue_is_skipped(transport):
    rec, _ = _send(b"HTTP/1.1 100 Continue\r\n\r\n" + _len(GOOD), transport)
    assert rec.ok and rec.http_status == 200 and len(rec.chunk_times) == 2, rec.error


@pytest.mark.parametrize("status", [b"301 Moved Permanently", b"204 No Content", b"201 Created"])
def test_a_status_neither_200_nor_error_is_http_other(transport, status):
    """A redirect is not followed (aiohttp did: POST became a GET elsewhere) and was
    counted as http_5xx; a 204 keeping the connection open was a wait for the timeout."""
    head = b"HTTP/1.1 " + status + b"\r\nLocation: /elsewhere\r\n"
    head += b"Content-Length: 0\r\n\r\n" if status[:3] != b"204" else b"\r\n"
    rec, took = _send(_keep_open(head), transport)
    assert rec.error_kind == "http_other" and rec.http_status == int(status[:3]), rec.error
    assert took < 2.0


# -- the stream goes on after its end, or without end --------------------------------
@pytest.mark.parametrize("tail", [EV, b"data: [DONE]\n\n"], ids=["content", "second_done"])
def test_events_after_done_fail_the_request(transport, tail):
    """They were counted: chunk times after t_done, so a negative tail and a wrong E2E."""
    rec, _ = _send(GOOD + tail, transport)
    assert rec.error_kind == "malformed_stream" and "after [DONE]" in rec.error
    assert len(rec.chunk_times) == 2  # nothing after [DONE] was taken as output


def _endless(sock: socket.socket) -> None:
    sock.sendall(CHUNKED)
    burst = _chunk(EV) * 200
    end = time.monotonic() + 5
    while time.monotonic() < end:
        sock.sendall(burst)


def test_an_endless_stream_is_cut_off_not_kept_until_the_timeout(transport):
    """Tiny chunks forever: the record grew by 230,000 chunk times a second until the
    timeout (600 s by default: gigabytes). It stops at the chunk limit for max_tokens."""
    rec, took = _send(_endless, transport, max_tokens=100)
    assert rec.error_kind == "malformed_stream" and "kept streaming" in rec.error
    assert len(rec.chunk_times) == chunk_limit(100) + 1 == 16 * 100 + 1024 + 1
    assert took < 3.0  # the server would go on for 5 s, the timeout is 20 s


def test_the_chunk_limit_follows_max_tokens(tmp_path: Path):
    """A whole run (osl 8): every endless response fails after 16 x 8 + 1024 chunks;
    the good ones count; the summary adds up."""

    def respond(rid: str):
        return _endless if int(rid.rsplit("-", 1)[1]) % 2 else GOOD

    with HostileServer(respond) as srv:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "run"), concurrency=2,
                              num_requests=6, telemetry=False, timeout_s=20,
                              workload=WorkloadConfig(isl=4, osl=8, tokenizer=None))  # fmt: skip
        t0 = time.monotonic()
        run_dir = run_benchmark(cfg, progress=False, log=lambda m: None).directory
        took = time.monotonic() - t0
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["counts"]["completed"] == 3 and s["counts"]["failed"] == 3
    assert s["errors"]["by_kind"] == {"malformed_stream": 3}
    assert chunk_limit(8) == 16 * 8 + 1024
    assert took < 15.0


# -- a server that answers before reading the request ---------------------------------
def test_an_answer_before_the_request_body_is_read(transport):
    def act(sock: socket.socket) -> None:
        sock.sendall(_len(GOOD))
        time.sleep(0.5)

    rec, _ = _send(act, transport, early=True)
    assert rec.ok and len(rec.chunk_times) == 2, rec.error


@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_a_split_crlf_before_the_next_response_is_not_garbage(loop, monkeypatch):
    """The final CRLF of a chunked body may come late, a byte a read, after the next
    request went out on the kept-alive connection: that response still parses (the
    check for a non-HTTP answer must not take a lone CR for garbage). The http1
    transport's own parser, with either read loop."""
    if loop == "python":
        monkeypatch.setattr(http1, "_c_read_ready", None)
    import asyncio
    import threading

    from accelbench.client.http1 import HTTP1Pool

    ls = socket.create_server(("127.0.0.1", 0))
    port = ls.getsockname()[1]

    def serve() -> None:
        conn, _ = ls.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(CHUNKED + _chunk(b"abc") + b"0\r\n")
            conn.recv(65536)  # the second request
            for piece in (b"\r", b"\n", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"):
                conn.sendall(piece)
                time.sleep(0.05)
            time.sleep(0.5)
        ls.close()

    threading.Thread(target=serve, daemon=True).start()

    class Sink:
        def __init__(self) -> None:
            self.status, self.body = 0, b""

        def on_headers(self, status: int, t: int) -> None:
            self.status = status

        def on_data(self, data: bytes, t: int) -> bool:
            self.body += data
            return True

        def on_end(self, t: int) -> None:
            pass

    async def go() -> list[Sink]:
        pool = HTTP1Pool("127.0.0.1", port)
        sinks = []
        for _ in range(2):
            conn, _ = await pool.acquire()
            sinks.append(Sink())
            await asyncio.wait_for(conn.start(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", sinks[-1]), 5)
            pool.release(conn)
        pool.close()
        return sinks

    first, second = asyncio.run(go())
    assert first.body == b"abc" and (second.status, second.body) == (200, b"ok")


# -- a run in which no request succeeds -----------------------------------------------
ERROR_200 = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n"
ERROR_200 += b'{"error":{"message":"oops"}}\n'


def test_a_run_whose_every_request_fails_has_failed(tmp_path: Path):
    """audit_srv #8: every request failing (here a 200 with a JSON error) exited 0 with
    status completed; only 32 connection errors in a row made a run fail. Now run.json
    and summary.json say failed, the warning says why, the CLI exits 1, and summarize
    keeps it so. A run with one success among failures stays completed."""
    from accelbench.runner.finalize import finalize_run
    from cli_inprocess import run_cli

    with HostileServer(lambda rid: ERROR_200) as srv:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "run"), concurrency=2,
                              num_requests=4, telemetry=False,
                              workload=WorkloadConfig(isl=4, osl=4, tokenizer=None))  # fmt: skip
        res = run_benchmark(cfg, progress=False, log=lambda m: None)
        rc, out, err, _ = run_cli(["run", "--url", srv.url, "-c", "2", "-n", "4", "--isl", "4",
                                   "--osl", "4", "--no-telemetry", "-o",
                                   str(tmp_path / "cli")], tmp_path)  # fmt: skip
    assert res.status == "failed" and res.all_requests_failed
    run = json.loads((res.directory / "run.json").read_text())
    s = json.loads((res.directory / "summary.json").read_text())
    assert run["status"] == s["status"] == "failed"
    assert s["client"]["warnings"][0].startswith("no measured request succeeded (4 failed:")
    assert rc == 1 and "run failed" in err, (rc, err)
    again = finalize_run(res.directory)
    assert again["status"] == "failed" and sum(
        w.startswith("no measured request succeeded") for w in again["client"]["warnings"]
    ) == 1  # fmt: skip

    with HostileServer(lambda rid: GOOD if rid.endswith("-0") else ERROR_200) as srv:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "one"), concurrency=1,
                              num_requests=4, telemetry=False,
                              workload=WorkloadConfig(isl=4, osl=4, tokenizer=None))  # fmt: skip
        res = run_benchmark(cfg, progress=False, log=lambda m: None)
    assert res.status == "completed" and res.summary["counts"]["completed"] == 1


# -- failure reasons that say what came (audit_srv #7) --------------------------------
def _typed(ctype: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: %d\r\n\r\n"
            % len(body) + body)  # fmt: skip


def test_a_json_error_to_a_stream_is_the_servers_error(transport):
    """A 200 with a JSON error body to a streamed request was 'malformed_stream: stream
    ended inside an event (truncated)'; --no-stream said server_error_event: oops."""
    rec, _ = _send(_typed(b"application/json", b'{"error": {"message": "oops"}}'), transport)
    assert rec.error_kind == "server_error_event" and rec.error == "oops", rec.error


@pytest.mark.parametrize(
    "ctype, body",
    [(b"application/json", b'{"choices": [{"text": " t t", "finish_reason": "length"}]}'),
     (b"text/html; charset=utf-8", b"<html><body>hello</body></html>")],
    ids=["json_completion", "html"],
)  # fmt: skip
def test_a_stream_answered_with_another_type_names_it(transport, ctype, body):
    rec, _ = _send(_typed(ctype, body), transport)
    assert rec.error_kind == "malformed_stream" and not rec.ok
    assert f"the response is {ctype.decode()}, not text/event-stream" in rec.error, rec.error


@pytest.mark.parametrize("status", [b"302 Found", b"307 Temporary Redirect"])
def test_a_redirect_says_where_it_pointed(transport, status):
    """Redirects were http_other with an empty reason."""
    head = (
        b"HTTP/1.1 " + status + b"\r\nLocation: http://elsewhere:1/v1\r\nContent-Length: 0\r\n\r\n"
    )
    rec, _ = _send(head, transport)
    assert rec.error_kind == "http_other"
    assert (
        rec.error == f"HTTP {status[:3].decode()} redirect to http://elsewhere:1/v1 (not followed)"
    )


def test_a_reset_mid_stream_is_a_disconnect(transport):
    """A TCP RST after one event of a close-delimited stream was malformed_stream
    ('ended without [DONE]'): the connection was lost, not the stream malformed. A
    server's orderly close there stays malformed_stream (the body ended, unfinished)."""
    import struct

    def reset(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EV)
        time.sleep(0.2)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    rec, took = _send(reset, transport)
    assert took < 3.0 and not rec.ok
    if transport == "aiohttp":  # it reads a reset as the body's end: it cannot tell
        assert rec.error_kind == "malformed_stream" and "without [DONE]" in rec.error
        return
    assert rec.error_kind == "disconnect", (rec.error_kind, rec.error)
    assert "connection reset mid-stream" in rec.error


def test_content_after_a_finish_reason_fails_the_request(transport):
    """audit_srv #9 finish_then_more: a content chunk after a finish_reason:"length" chunk
    was taken as output. The server said the output had ended: more of it is
    malformed_stream, as after [DONE], in every read loop (the compiled one included:
    each event in a read of its own)."""
    fin = b'data: {"choices":[{"text":" b","finish_reason":"length"}]}\n\n'

    def act(sock: socket.socket) -> None:
        sock.sendall(CHUNKED)
        for ev in (EV, EV, fin, EV, b"data: [DONE]\n\n"):
            sock.sendall(_chunk(ev))
            time.sleep(0.03)
        sock.sendall(b"0\r\n\r\n")

    rec, _ = _send(act, transport)
    assert rec.error_kind == "malformed_stream", (rec.error_kind, rec.error)
    assert "content after finish_reason 'length'" in rec.error
    assert len(rec.chunk_times) == 3  # the two before and the finishing one
