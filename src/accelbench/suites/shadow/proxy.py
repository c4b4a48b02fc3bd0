"""The shadow proxy: callers talk to it as to an OpenAI-compatible server; every request
goes to the baseline, whose response is relayed to the caller byte for byte as it
arrives, and a copy goes to the candidate, whose response is measured and discarded.

Why raw protocols: the baseline's bytes are written to the caller in the read callback,
the moment they reach the event loop, before anything is parsed or recorded; framing
them (the accelbench client's HTTP/1.1 parser) comes after the loop's I/O phase (the
client's ``ArrivalQueue``), so when many streams' chunks arrive together every one is
relayed before any is parsed. Measuring them (SSE events, tokens, the record) is not
done on this loop at all: each response event, with its time, is queued for the
candidate process, which builds and journals the baseline's records (``_Remote``;
candidate.py says why). Their arrival times are the kernel's receive stamps on Linux
(client/http1.py ``ReceiveHub``), as on the candidate's side, so the two sides are
timed the same way whatever either loop was doing.
A request is forwarded in the same callback that completes it when a kept-alive
connection to the baseline is idle (no task switch in the way).

The candidate can never slow or break the caller: copies go to a process of their own
(shadow/candidate.py), which sends them on its own connections with their own timeout
and journals their records; the proxy's loop only queues each copy (the queue goes over in
one write every few ms: candidate.py). At most
``max_inflight`` are in flight, and a copy that would exceed it is dropped and counted,
never queued. Its failures and timeouts become records. Request headers
(``Authorization`` and every other one) are never stored; they go to the baseline only.
The candidate gets its own key, if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import orjson

from accelbench import validate as v
from accelbench.client.errors import ConnectError, ErrorKind, ResponseTimeout, TransportError
from accelbench.client.http1 import Exchange, HTTP1Transport, RelayFields
from accelbench.client.transport import BodySink, Request, send_with_retries
from accelbench.errors import AccelbenchError, UsageError
from accelbench.httpframing import MAX_BODY, MAX_HEAD, Reject, RequestReader
from accelbench.lifetime import loop_stop_signals
from accelbench.metrics.summary import arrival_stamps
from accelbench.suites.shadow.candidate import CandidateProcess
from accelbench.suites.shadow.store import BASELINE, CANDIDATE, ShadowWriter
from accelbench.urls import Endpoint

_now = time.monotonic_ns

RECORDED_PATHS = {b"/v1/completions": "completions", b"/v1/chat/completions": "chat"}
# Not forwarded as received: hop-by-hop headers, and the framing headers the proxy sets.
_DROP = {
    b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length", b"expect",
}  # fmt: skip
_STOP_WAIT_S = 5.0  # after a stop signal: the candidate process's journal closed by then
_LINGER_S = 2.0  # after a refusal, how long the caller's further bytes are drained
_PAUSE_AT = MAX_HEAD + (1 << 20)  # pipelined bytes held while a request is in flight


@dataclass
class ProxyConfig:
    baseline: Endpoint  # a URL string is parsed into one (__post_init__)
    candidate: Endpoint
    out: str
    host: str = "127.0.0.1"
    port: int = 8100
    sample: float = 1.0  # fraction of requests copied to the candidate
    max_inflight: int = 256  # candidate copies in flight; more are dropped
    candidate_timeout_s: float = 120.0
    baseline_timeout_s: float = 600.0
    candidate_model: str | None = None  # rewrite `model` in the copies
    candidate_api_key: str | None = None
    max_requests: int | None = None  # stop after this many recorded requests
    duration_s: float | None = None
    seed: int | None = None  # of the sampling (0 when not given); only with sample < 1

    def __post_init__(self) -> None:
        self.baseline = Endpoint.parse(self.baseline)
        self.candidate = Endpoint.parse(self.candidate)

    def validate(self) -> None:
        from accelbench.validate import check_url

        for name, ep in (("--baseline", self.baseline), ("--candidate", self.candidate)):
            check_url(ep.url, name)
            if ep.scheme != "http":
                raise UsageError(f"{name} must be a plain http:// URL (got {ep.display!r})")
        # 0 would shadow nothing: a run that measures no candidate request
        self.sample = v.number("--sample", self.sample, 0, 1, lo_open=True)
        self.max_inflight = v.integer("--max-inflight", self.max_inflight, 1, 100_000)
        self.candidate_timeout_s = v.number(
            "--candidate-timeout", self.candidate_timeout_s, 0, 86400, lo_open=True, unit="s"
        )
        self.baseline_timeout_s = v.number(
            "--timeout", self.baseline_timeout_s, 0, 86400, lo_open=True, unit="s"
        )
        self.port = v.integer("--listen port", self.port, 0, 65535)
        self.max_requests = v.optional_integer("--max-requests", self.max_requests, 1, 10**9)
        self.duration_s = v.optional_number(
            "--duration", self.duration_s, 0, 30 * 86400, lo_open=True, unit="s"
        )
        if self.seed is not None:
            if self.sample == 1:
                raise UsageError(
                    "--seed applies only with --sample below 1: every request is copied, "
                    "nothing is drawn"
                )
            self.seed = v.seed("--seed", self.seed)
        if self.candidate_api_key:
            v.header_value("the candidate's API key", self.candidate_api_key)
        v.output_dir("--out", self.out)
        self.check_not_own(self.port)

    def check_not_own(self, port: int) -> None:
        """Neither side may be the proxy's own listen address: every request would come
        back to the proxy (and be copied again) until the connections ran out."""
        if port == 0:  # the system picks the port; checked again once it is known
            return
        for name, ep in (("--baseline", self.baseline), ("--candidate", self.candidate)):
            if _same_endpoint(ep, self.host, port):
                raise UsageError(
                    f"{name} {ep.display} is the proxy's own --listen address "
                    f"({self.host}:{port}): every request would come back to the proxy"
                )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same_endpoint(ep: Endpoint, host: str, port: int) -> bool:
    """Whether ``ep`` reaches a server listening on ``host:port`` of this machine, as far
    as can be told without a name lookup: the same host, two loopback names, or a listen
    on every address (0.0.0.0, ::) reached by loopback or this machine's name."""
    if ep.port != port:
        return False
    uh = ep.host.lower()
    lh = host.strip("[]").lower()
    if uh == lh or (_is_loopback(uh) and _is_loopback(lh)):
        return True
    return lh in ("", "0.0.0.0", "::") and (_is_loopback(uh) or uh == socket.gethostname().lower())


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``) for --listen."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise UsageError(f"--listen must be HOST:PORT, e.g. 127.0.0.1:8100 (got {text!r})")
    try:
        p = int(port)
    except ValueError:
        raise UsageError(f"--listen port must be a number (got {port!r})") from None
    return host.strip("[]") or "127.0.0.1", v.integer("--listen port", p, 0, 65535)


class _NullSink:
    """For requests that are relayed but not measured (GET /v1/models, /health, ...)."""

    def on_headers(self, status: int, t_ns: int) -> None:
        pass

    def on_data(self, data: bytes, t_ns: int) -> bool:
        return True

    def on_end(self, t_ns: int) -> None:
        pass


class _Remote:
    """The measuring sink of a recorded request: each event, with its time, is queued
    for the candidate process, which parses it (the same ``ResponseHandler`` as a run)
    and journals the baseline's record (candidate.py). Never asks for the connection to
    be dropped: a response the parser finds broken still reaches the caller as the
    baseline sent it."""

    __slots__ = ("idx", "cand", "base")

    def __init__(self, idx: int, cand: CandidateProcess) -> None:
        self.idx = idx
        self.cand = cand
        self.base = cand.base

    def c_measure(self) -> tuple[bytearray, int]:
        """Where the compiled relay queues this response's data events (``on_data``'s
        frames, built there), and the index they carry."""
        return self.cand.queue, self.idx

    def on_headers(self, status: int, t_ns: int) -> None:
        self.base(b"H", self.idx, t_ns, status.to_bytes(2, "big"))

    def on_data(self, data: bytes, t_ns: int) -> bool:
        self.base(b"D", self.idx, t_ns, data)
        return True

    def on_end(self, t_ns: int) -> None:
        self.base(b"E", self.idx, t_ns)


class _Relay:
    """The tee of a forwarded request: the baseline's response bytes, unchanged, to the
    caller, as they arrive (before they are parsed), and how many there were (the reads
    the compiled relay sends are not counted: they come after the head, which is).

    Between whole chunks of a chunked body, the reads go to the caller from the compiled
    read loop, without Python (client/_recvstamp.c ``relay``; ``c_relay`` says where):
    through a duplicate of the caller's socket, so that once the caller's connection is
    closed and its descriptor reused, nothing is written to the new one."""

    __slots__ = ("out", "relayed", "fd", "offered")

    def __init__(self, out: asyncio.Transport | None) -> None:
        self.out = out
        self.relayed = 0
        self.fd = -1  # the duplicate of the caller's socket, once the relay is offered
        self.offered: tuple[dict[int, Any], int] | None = None

    def __call__(self, data: bytes) -> None:
        if self.out is not None:
            self.out.write(data)
        self.relayed += len(data)

    def c_relay(self, sink: BodySink, relay: dict[int, Any], fd: int) -> RelayFields | None:
        """The compiled relay's fields for the baseline connection ``fd``, or None when
        the caller's side cannot take it now (closing, or bytes waiting to be written:
        they must go first)."""
        out = self.out
        if out is None or out.is_closing() or out.get_write_buffer_size():
            return None
        measure = getattr(sink, "c_measure", None)
        if measure is None and not isinstance(sink, _NullSink):
            return None
        if self.fd < 0:
            sock = out.get_extra_info("socket")
            try:
                self.fd = os.dup(sock.fileno())
            except (AttributeError, OSError):
                return None
        self.offered = (relay, fd)
        if measure is None:
            return (self.fd, None, 0)
        queue, idx = measure()
        return (self.fd, queue, idx)

    def close(self) -> None:
        """The request's end: the compiled relay lets go of the caller's socket."""
        if self.offered is not None:
            relay, fd = self.offered
            cur = relay.get(fd)
            if cur is not None and cur[0] == self.fd:
                del relay[fd]
            self.offered = None
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class _Forward:
    """One request on its way to the baseline: its record's index (None for a request
    that is relayed, not measured), the tee to the caller, a fresh sink per attempt. The
    record itself is built in the candidate process (``_Remote``)."""

    __slots__ = ("idx", "cand", "relay", "sink", "retries")

    def __init__(self, idx: int | None, cand: CandidateProcess, relay: _Relay) -> None:
        self.idx = idx
        self.cand = cand
        self.relay = relay
        self.sink: BodySink | None = None
        self.retries = 0

    def new_sink(self) -> BodySink:
        idx = self.idx
        if idx is None:
            self.sink = _NullSink()
        else:
            self.sink = _Remote(idx, self.cand)
            self.cand.base(b"B", idx, _now(), self.retries.to_bytes(4, "big"))
        return self.sink

    def on_retry(self) -> None:
        self.sink = None
        self.retries += 1

    def fail(self, kind: ErrorKind, message: str) -> None:
        """The request got no complete response: its record says so (unless measuring
        its response had failed it already)."""
        if self.idx is not None:
            self.cand.base_fail(self.idx, _now(), self.sink is not None, kind.value, message)

    def interrupted(self, why: str = "the caller closed the connection") -> None:
        if self.idx is not None:
            self.cand.base(b"I", self.idx, _now(), why.encode())


class _Caller(asyncio.Protocol):
    """One connection from a caller: HTTP/1.1 requests framed strictly by
    accelbench/httpframing.py (anything ambiguous is answered 400 and the connection
    closed, never forwarded), one at a time (pipelined bytes wait in the buffer, reading
    pauses when they pile up). An end of input from the caller lets the request in
    flight finish; a request it cuts short is answered 400."""

    def __init__(self, proxy: ShadowProxy) -> None:
        self.proxy = proxy
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.reader = RequestReader(MAX_HEAD, MAX_BODY)
        self.busy = False
        self.closed = False
        self.eof = False
        self.paused = False
        self.refused = False
        self.task: asyncio.Future | None = None  # the request in flight, forwarded

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.proxy.callers.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # relayed chunks are small: no Nagle delay behind an unacked one
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.proxy.callers.discard(self)
        task = self.task
        if task is not None and not task.done():
            task.cancel()  # the caller hung up: so does its request

    def data_received(self, data: bytes) -> None:
        if self.closed or self.refused:
            return  # after a refusal: read and discard until the caller closes
        t = _now()
        self.buf += data
        if not self.busy:
            self._next(t)
        elif len(self.buf) > _PAUSE_AT and self.transport is not None and not self.paused:
            self.paused = True  # pipelined bytes wait for the request in flight
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        if self.refused:
            return False  # closes now
        if not self.busy:
            self._next(_now())
        return True  # the request in flight still gets its answer

    def _next(self, t: int) -> None:
        if self.closed:
            return
        try:
            req = self.reader.feed(self.buf)
        except Reject as exc:
            self.refuse(exc.status, exc.reason)
            return
        if req is None:
            if self.eof:
                if self.reader.partial or self.buf.strip(b"\r\n"):
                    self.reply(400, "the request was cut short by the end of input", close=True)
                elif self.transport is not None:
                    self.transport.close()
            elif self.reader.wants_continue and self.transport is not None:
                assert self.reader.req is not None
                self.reader.req.expect_continue = False
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        self.busy = True
        self.proxy.handle(self, req.method, req.target, req.headers, bytes(req.body), req.close, t)

    def reply(self, status: int, message: str, close: bool = False) -> None:
        """An error of the proxy itself (bad request, baseline unreachable)."""
        if self.transport is None or self.transport.is_closing():
            return
        body = orjson.dumps({"error": {"message": message, "type": "accelbench_shadow_proxy"}})
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close or self.refused else "")
            + "\r\n"
        ).encode()
        self.transport.write(head + body)
        if close:
            self.transport.close()

    def refuse(self, status: int, message: str) -> None:
        """Answer and close, lingering (RFC 9112 section 9.6): our side is shut at once,
        what the caller still sends is read and discarded for up to ``_LINGER_S``, so
        that its unread bytes do not reset the connection before it read the answer."""
        self.refused = True
        t = self.transport
        if t is None or t.is_closing():
            return
        self.reply(status, message, close=not t.can_write_eof())
        if not t.is_closing():
            t.write_eof()
            asyncio.get_running_loop().call_later(_LINGER_S, t.close)

    def done(self, close: bool) -> None:
        self.busy = False
        self.task = None
        if self.transport is None or self.transport.is_closing():
            return
        if close:
            self.transport.close()
            return
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        if self.buf or self.eof:
            self._next(_now())


class ShadowProxy:
    def __init__(self, cfg: ProxyConfig, writer: ShadowWriter) -> None:
        self.cfg = cfg
        self.writer = writer
        self.b_host, self.b_port = cfg.baseline.host or "127.0.0.1", cfg.baseline.port
        self.host_header = f"Host: {self.b_host}:{self.b_port}\r\n".encode()
        # every ready stream's bytes are relayed (teed) before any is parsed
        self.transport = HTTP1Transport(self.b_host, self.b_port, parse_after_io=True)
        self.callers: set[_Caller] = set()
        self.rng = random.Random(cfg.seed or 0)
        self.next_idx = 0
        self.t0: int | None = None
        self.recorded_done = 0
        self.base_tasks: set[asyncio.Task] = set()
        self.cand = CandidateProcess(self._copy_done)
        # what the compiled relay queued for the candidate process goes out as the rest
        self.transport.pool.relay_hook = self.cand.kick
        self.stop = asyncio.Event()

    async def start_candidate(self) -> None:
        c = self.cfg
        await self.cand.start(
            {"candidate": c.candidate.secret_parts(), "candidate_model": c.candidate_model,
             "candidate_api_key": c.candidate_api_key,
             "candidate_timeout_s": c.candidate_timeout_s,
             "journal": str(self.writer.dir / CANDIDATE),
             "baseline_journal": str(self.writer.dir / BASELINE)}
        )  # fmt: skip

    # -- the caller's request -> baseline ------------------------------------------
    def handle(
        self,
        caller: _Caller,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        close: bool,
        t: int,
    ) -> None:
        parts = [method, b" ", target, b" HTTP/1.1\r\n", self.host_header]
        drop = _DROP.union(  # and the fields the caller's Connection names (RFC 9110 7.6.1)
            x.strip(b" \t").lower()
            for n, val in headers
            if n.lower() == b"connection"
            for x in val.split(b",")
        )
        for name, value in headers:
            if name.lower() not in drop:
                parts += [name, b": ", value, b"\r\n"]
        parts.append(b"Content-Length: %d\r\n\r\n" % len(body))
        payload = b"".join(parts) + body
        endpoint = RECORDED_PATHS.get(target.split(b"?", 1)[0]) if method == b"POST" else None
        doc: Any = None
        if endpoint is not None:
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError:
                doc = None
            if not isinstance(doc, dict):
                self.writer.count("unparsed_requests")
                endpoint = None
        idx: int | None = None
        if endpoint is not None:
            idx = self.next_idx
            self.next_idx += 1
            mt = doc.get("max_tokens", doc.get("max_completion_tokens"))
            self.cand.base_new(idx, t, mt if isinstance(mt, int) else None,
                               endpoint == "chat", bool(doc.get("stream")))  # fmt: skip
        fwd = _Forward(idx, self.cand, _Relay(caller.transport))
        req = Request("", body, wire=payload)
        # forward now, inside this callback, where a kept-alive connection is idle
        started = self.transport.start_idle(req, fwd.new_sink, fwd.relay)
        task = asyncio.ensure_future(self._forward(caller, req, fwd, close, started))
        caller.task = task
        self.base_tasks.add(task)

        def ended(task: asyncio.Future) -> None:
            self.base_tasks.discard(task)
            if task.cancelled():  # before it ran (a caller that hung up at once, a stop)
                if started is not None:
                    self.transport.abandon(started)
                self._forwarded(caller, fwd, close=True, cut=True)

        task.add_done_callback(ended)
        if idx is not None:
            if self.t0 is None:
                self.t0 = t
            self.writer.add_trace(idx, (t - self.t0) / 1e9, endpoint or "", doc)
            self._copy(idx, endpoint or "", body, t)

    async def _forward(
        self, caller: _Caller, req: Request, fwd: _Forward, close: bool, started: Exchange | None
    ) -> None:
        try:
            keep = await self._send(caller, req, fwd, started)
        except asyncio.CancelledError:  # the proxy is stopping, or the caller hung up
            self._forwarded(caller, fwd, close=True, cut=True)
            return
        finally:  # whatever ends it, the compiled relay lets go of the caller's socket
            fwd.relay.close()
        self._forwarded(caller, fwd, close or not keep, cut=False)

    def _forwarded(self, caller: _Caller, fwd: _Forward, close: bool, cut: bool) -> None:
        """The request's end: its record journalled (``interrupted`` if it was ``cut``
        before it had an outcome), the caller's connection ready for its next request or
        closed."""
        fwd.relay.close()
        if fwd.idx is not None:
            why = ""
            if cut:  # interrupted, unless it had an outcome (the candidate process checks)
                why = ("the caller closed the connection" if caller.closed
                       else "the proxy was stopped while this request was in flight")  # fmt: skip
            self.cand.base(b"J", fwd.idx, _now(), why.encode())
            if not self.cand.alive:  # the process that journals it is gone
                self.writer.count("baseline_unrecorded")
            self.recorded_done += 1
            if self.cfg.max_requests and self.recorded_done >= self.cfg.max_requests:
                self.stop.set()
        caller.done(close)

    async def _send(
        self, caller: _Caller, req: Request, fwd: _Forward, started: Exchange | None
    ) -> bool:
        """Forward one request (``client.transport.send_with_retries``: a kept-alive
        connection the baseline had closed is retried on a new one); returns whether the
        caller's connection may be kept."""
        transport = self.transport
        first = None
        if started is not None:

            def first(deadline_ns: int) -> Any:  # noqa: E306
                return transport.finish(started, deadline_ns)

        try:
            return await send_with_retries(
                transport, req, fwd.new_sink, timeout_s=self.cfg.baseline_timeout_s,
                on_retry=fwd.on_retry, first=first, tee=fwd.relay,
            )  # fmt: skip
        except ConnectError as exc:
            caller.reply(502, f"the baseline is unreachable: {exc}")
            fwd.fail(exc.kind, f"cannot connect to the baseline: {exc}")
            return True
        except ResponseTimeout as exc:
            if fwd.relay.relayed == 0:
                caller.reply(504, "the baseline did not answer in time")
            fwd.fail(exc.kind, str(exc))
            return False
        except TransportError as exc:
            if caller.closed:
                fwd.interrupted()
                return False
            keep = True
            if fwd.relay.relayed == 0:
                caller.reply(502, f"the baseline closed the connection: {exc}")
            else:
                keep = False  # the caller sees the same broken response
            fwd.fail(exc.kind, str(exc))
            return keep

    # -- the copy -> candidate -------------------------------------------------------
    def _copy(self, idx: int, endpoint: str, body: bytes, t: int) -> None:
        if self.stop.is_set():
            return
        if self.cfg.sample < 1.0 and self.rng.random() >= self.cfg.sample:
            self.writer.count("not_sampled")
            return
        if self.cand.inflight >= self.cfg.max_inflight or not self.cand.alive:
            self.writer.count("dropped")
            return
        self.writer.count("copied")
        self.cand.copy(idx, endpoint, t, body)

    def _copy_done(self, kind: str) -> None:
        if kind != "ok":
            self.writer.count(f"candidate_{kind}")

    # -- lifetime ---------------------------------------------------------------------
    async def drain(self, grace_s: float, interrupted: bool) -> None:
        """Let the callers' requests finish and give the copies ``grace_s`` (then they
        are cancelled); when interrupted by a signal, cancel both at once. Every request
        in flight is recorded, as ``interrupted`` if cut."""
        if self.base_tasks and not interrupted:
            await asyncio.wait(list(self.base_tasks), timeout=max(grace_s, 30.0))
        for task in self.base_tasks:
            task.cancel()
        if self.base_tasks:
            await asyncio.gather(*self.base_tasks, return_exceptions=True)
        if interrupted:  # cut at once; a candidate process that does not answer is killed
            await self.cand.finish(0.0, wait_s=_STOP_WAIT_S)
        else:
            await self.cand.finish(grace_s)
        # how each side's chunk times were stamped: the baseline's reads are this loop's,
        # the copies' the candidate process's
        recv = self.transport.receive_stats()
        for side, got in (
            ("baseline", [recv] if recv and recv.get("reads") else []),
            ("candidate", self.cand.receive),
        ):
            if got:
                self.writer.meta.receive[side] = arrival_stamps([{"receive": r} for r in got])
        rs = self.transport.relay_stats()
        if rs:  # how many of the baseline's reads went through the compiled relay
            self.writer.count("relayed_reads", rs["reads"])
            self.writer.count("relayed_reads_compiled", rs["compiled"])
            self.writer.count("relay_caller_full", rs["caller_full"])
        await self.transport.close()


async def serve_proxy(
    cfg: ProxyConfig,
    *,
    ready: Callable[[int], None] | None = None,
    stop: Any = None,  # anything with is_set() (threading.Event from another thread)
    grace_s: float = 5.0,
) -> tuple[Path, str]:
    """Run the proxy until a stop signal, ``stop``, ``max_requests`` or ``duration_s``;
    returns the shadow directory (finalised: journals closed, counters saved) and its
    status: ``interrupted`` after SIGINT, SIGTERM or SIGHUP (what was in flight is cut
    and recorded as such), else ``completed`` (what was in flight finished first)."""
    signalled: list[str] = []
    stop_now = asyncio.Event()

    def on_signal(name: str) -> None:
        signalled.append(name)
        stop_now.set()

    # in place before the first file is written: no signal lands between the two
    with loop_stop_signals(asyncio.get_running_loop(), on_signal):
        return await _open(cfg, ready, stop, grace_s, stop_now, signalled)


async def _open(
    cfg: ProxyConfig,
    ready: Callable[[int], None] | None,
    stop: Any,
    grace_s: float,
    stop_now: asyncio.Event,
    signalled: list[str],
) -> tuple[Path, str]:
    cfg.validate()
    writer = ShadowWriter(
        cfg.out,
        {
            "mode": "proxy",
            "baseline": {"url": cfg.baseline.display},
            "candidate": {"url": cfg.candidate.display, "model": cfg.candidate_model},
            "sample": cfg.sample,
            "max_inflight": cfg.max_inflight,
            "candidate_timeout_s": cfg.candidate_timeout_s,
        },
        journals=(),  # the candidate process journals both sides (candidate.py)
    )
    proxy = ShadowProxy(cfg, writer)
    proxy.stop = stop_now
    return await _serve(proxy, writer, cfg, ready, stop, grace_s, signalled)


async def _serve(
    proxy: ShadowProxy,
    writer: ShadowWriter,
    cfg: ProxyConfig,
    ready: Callable[[int], None] | None,
    stop: Any,
    grace_s: float,
    signalled: list[str],
) -> tuple[Path, str]:
    loop = asyncio.get_running_loop()
    try:
        await proxy.start_candidate()
    except AccelbenchError:
        writer.close("failed")
        raise
    try:
        server = await loop.create_server(lambda: _Caller(proxy), cfg.host, cfg.port, backlog=4096)
    except OSError as exc:
        await proxy.cand.finish(0.0)
        writer.close("failed")
        raise AccelbenchError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}") from None
    port = server.sockets[0].getsockname()[1]
    try:
        cfg.check_not_own(port)  # --listen HOST:0: the port the system picked
    except UsageError:
        server.close()
        await proxy.cand.finish(0.0)
        writer.close("failed")
        raise
    writer.save_meta(listen=f"{cfg.host}:{port}")
    # what exists now lives as long as the proxy: keep it out of the collector's scans
    # (a full collection over it is a pause of every stream)
    gc.collect()
    gc.freeze()
    if ready is not None and not proxy.stop.is_set():
        ready(port)

    async def ticker() -> None:
        n = 0
        while True:
            await asyncio.sleep(0.25)
            writer.tick()
            n += 1
            if n % 8 == 0:
                writer.save_meta_soon()  # its fsync off the loop: no stall of the streams
            if stop is not None and stop.is_set():
                proxy.stop.set()

    tick = asyncio.ensure_future(ticker())
    cancelled = False
    try:
        if cfg.duration_s:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proxy.stop.wait(), cfg.duration_s)
        else:
            await proxy.stop.wait()
    except asyncio.CancelledError:  # asyncio.run's own Ctrl-C, before our handlers were in
        cancelled = True
    finally:
        server.close()
        interrupted = cancelled or bool(signalled)
        await proxy.drain(grace_s, interrupted)
        for c in list(proxy.callers):
            if c.transport is not None:
                c.transport.close()
        tick.cancel()
        status = "interrupted" if interrupted else "completed"
        writer.close(status)
    return writer.dir, status


def run_proxy(cfg: ProxyConfig, ready: Callable[[int], None] | None = None) -> tuple[Path, str]:
    from accelbench.eventloop import install_uvloop

    install_uvloop()
    return asyncio.run(serve_proxy(cfg, ready=ready))
