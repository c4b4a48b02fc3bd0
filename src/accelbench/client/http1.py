"""A minimal HTTP/1.1 client on asyncio protocols, for plain-http benchmarking.

Why not aiohttp for this path: arrival times are taken in ``data_received``, the moment
the event loop hands over the bytes, not after a coroutine wake-up that may be delayed by
hundreds of other streams; and the per-chunk cost is a few microseconds, so one core
streams far more tokens than the server under test. HTTPS goes through aiohttp.

On Linux each read also carries the kernel's receive time (``SO_TIMESTAMPNS``), and that is
the arrival time a chunk gets: it does not depend on when the worker's event loop got to
run (``ReceiveHub``). Elsewhere the time is taken when the loop hands the bytes over.

Keep-alive connections are pooled; a connection that the server closed while idle (as
llama-server does after some streamed replies) is detected, and ``HTTP1Transport``
raises a ``retryable`` error if, and only if, no response byte had arrived (the retry
itself is ``client.transport.send_with_retries``, the one retry loop).

A request may be started with a tee (``HTTP1Protocol.start``): every byte of its
response is copied there first, unparsed, as it arrives. The shadow proxy relays the
baseline's responses to its callers so, through this public hook.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import select
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from accelbench.client.errors import ConnectError, ConnectionClosed, ErrorKind, ResponseTimeout
from accelbench.client.transport import BodySink, Request, Tee, head_info
from accelbench.metrics.records import MAX_STAMP_AGE_NS
from accelbench.metrics.summary import ReceiveStats

_monotonic_ns = time.monotonic_ns
_realtime_ns = time.time_ns

# SO_TIMESTAMPNS (socket(7)): a TCP read's control message carries the time, on the
# realtime clock, at which the last segment it returns reached the socket. 35 on the
# 64-bit Linux architectures below (asm-generic/socket.h and x86's); their struct
# timespec is two 64-bit fields. Anywhere else the loop's hand-over time is used.
_SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", None)
if _SO_TIMESTAMPNS is None and sys.platform == "linux" and platform.machine() in (
    "x86_64", "aarch64", "ppc64le", "s390x", "riscv64"
):  # fmt: skip
    _SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("qq")
_unpack_timespec = _TIMESPEC.unpack_from
_CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
# one read's buffer: below glibc's mmap threshold (128 KiB), or every read maps and
# unmaps a fresh buffer (measured: 36 instead of 17 us of CPU per read)
_READ_SIZE = 65536
# a kernel stamp more than this before the read means the wall clock was stepped between
# the arrival and the read: the read's own time is used instead
_MAX_STAMP_AGE_NS = MAX_STAMP_AGE_NS


def clock_offset_ns(tries: int = 5) -> tuple[int, int]:
    """(realtime minus monotonic, its uncertainty) in ns (compiled: _recvstamp.clock_offset):
    a realtime reading bracketed by two monotonic ones, the narrowest bracket of a few
    tries, the offset taken at its middle. Why: reading the two clocks one after the other is off by however long the
    thread was not running in between (milliseconds on a busy host), and every kernel
    stamp converted with that offset would be off by as much."""
    best_w, best_off = -1, 0
    for _ in range(tries):
        m1 = _monotonic_ns()
        r = _realtime_ns()
        m2 = _monotonic_ns()
        w = m2 - m1
        if best_w < 0 or w < best_w:
            best_w, best_off = w, r - (m1 + m2) // 2
        if w < 20_000:
            break
    return best_off, best_w // 2 + 1


# (handler, record, record.chunk_times, handler.texts, chat, max_chunks, max_chars): what
# the compiled path needs to take a response's content chunks itself
# (``ResponseHandler.c_fields``)
FastFields = tuple[Any, Any, list[int], list[str], bool, int, int]
# (caller_fd, out, idx): where the compiled relay sends a baseline read, and where it
# queues the read's payload for the candidate process (``ReceiveHub.relay``)
RelayFields = tuple[int, bytearray | None, int]
_c_read_ready: (
    Callable[
        [
            int, int, int, int, int, int, dict[int, FastFields], list[int],
            dict[int, RelayFields], dict[int, int],
        ],
        tuple[list[tuple[int, bytes | None, int, int]], int, int, int, int],
    ]
    | None
)  # fmt: skip
_clock_offset: Callable[[], tuple[int, int]]
# the compiled read loop and per-chunk path (client/_recvstamp.c); where it is absent (or
# a test sets ``_c_read_ready`` to None), ReceiveHub._read_py and the Python parsers
try:
    from accelbench.client._recvstamp import clock_offset as _clock_offset
    from accelbench.client._recvstamp import read_ready as _c_read_ready
except ImportError:  # pragma: no cover - a build without a C compiler
    _c_read_ready = None
    _clock_offset = clock_offset_ns


def kernel_stamps_available() -> bool:
    """Whether pooled connections carry the kernel's receive time: on this platform, and
    unless ``ACCELBENCH_KERNEL_STAMPS=0`` asks for the loop's hand-over time instead."""
    if os.environ.get("ACCELBENCH_KERNEL_STAMPS", "1").strip() == "0":
        return False
    return _SO_TIMESTAMPNS is not None and _CMSG_SPACE > 0 and hasattr(select, "epoll")


# a loopback TCP pair with receive stamps on, held for the process's life (see below)
_stamp_keeper: list[socket.socket] = []


def keep_kernel_stamping(timeout_s: float = 0.5) -> bool:
    """Make sure the kernel stamps segments before the first request, and keeps doing so.

    Why: Linux stamps received packets only while some socket on the host asks for it,
    and when the first one asks, it switches stamping on later, from a kernel worker
    (``net_enable_timestamp``); segments that arrive before that carry no stamp, and a
    TCP read of them has none (measured here: the first read of a fresh process was
    unstamped in 1 of 2 tries). So, once per process: a loopback pair with stamps on,
    probed until a read carries a stamp, then kept open, which keeps later sockets'
    switching-on immediate. Returns whether a stamp came within ``timeout_s``."""
    if _stamp_keeper:
        return True
    ls = socket.create_server(("127.0.0.1", 0))
    try:
        rx = socket.create_connection(ls.getsockname(), timeout=timeout_s)
        tx, _ = ls.accept()
    finally:
        ls.close()
    rx.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)  # type: ignore[arg-type]
    _stamp_keeper.extend((rx, tx))
    deadline = _monotonic_ns() + int(timeout_s * 1e9)
    while True:
        tx.send(b"x")
        try:
            _, anc, _, _ = rx.recvmsg(16, _CMSG_SPACE)
        except OSError:
            return False
        if anc or _monotonic_ns() > deadline:
            return bool(anc)
        time.sleep(0.001)


class ArrivalQueue:
    """Reads stamped on arrival, parsed after the loop's I/O phase.

    When many streams' bytes arrive together (a server writing every stream's token on
    the same tick), the event loop calls ``data_received`` for each in turn; if each call
    also parsed its event, the last stream's timestamp would be late by the parsing of
    all the others. Connections of one pool therefore only take the time and queue the
    bytes; one callback per loop iteration parses them in arrival order. The arrival
    time is still when the bytes reached the event loop (docs/METRICS.md)."""

    __slots__ = ("items", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.items: list[tuple[HTTP1Protocol, bytes, int]] = []
        self.loop = loop

    def drain(self) -> None:
        while self.items:  # a parse may queue nothing, but be safe against reentry
            items, self.items = self.items, []
            for proto, data, t in items:
                proto._deferred -= 1
                proto._process(data, t)


# Longest chunk-size line accepted (hex size plus extensions); a server sending more
# without a line end is not speaking HTTP/1.1 chunked coding.
_MAX_CHUNK_LINE = 4096
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _chunk_size(text: bytes) -> int:
    """A chunk-size (RFC 9112 7.1: 1*HEXDIG) as an int, or -1 when it is none: a sign,
    ``0x``, ``_``, or more than 15 digits (a chunk of 2**60 bytes or more is a lie that
    ``int(text, 16)`` would accept)."""
    if not 0 < len(text) < 16 or not _HEX.issuperset(text):
        return -1
    return int(text, 16)


class HTTP1Protocol(asyncio.Protocol):
    __slots__ = (
        "transport",
        "closed",
        "_sink",
        "_fut",
        "_state",
        "_buf",
        "_remaining",
        "_chunked",
        "_keep_alive",
        "_queue",
        "_deferred",
        "_tee",
        "_tee_last",
        "_tail_wait",
        "_fast",
        "_relay",
        "_tee_skip",
        "_fd",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._sink: BodySink | None = None
        self._fut: asyncio.Future | None = None
        self._state = 0  # 0 idle, 1 head, 2 body, 3 done
        self._buf = b""
        self._remaining = -1
        self._chunked = False
        self._keep_alive = True
        self._queue: ArrivalQueue | None = None  # set by the pool: parse after the I/O phase
        self._deferred = 0  # reads of this connection waiting in the queue
        self._tee: Tee | None = None  # the response's bytes are copied here first
        self._tee_last = b""  # the last 4 bytes teed (to see the end of a chunked body)
        self._tail_wait: asyncio.Future | None = None
        # the hub's ``fast`` map where the compiled per-chunk path reads this connection
        self._fast: dict[int, FastFields] | None = None
        # the hub's ``relay`` map, where the compiled relay sends this connection's reads
        self._relay: dict[int, RelayFields] | None = None
        self._tee_skip = 0  # bytes of the next read the compiled relay sent already
        self._fd = -1

    # -- asyncio callbacks ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deferred and self._queue is not None:
            self._queue.drain()  # what arrived before the end comes first
        self.closed = True
        if self._fut is not None and not self._fut.done():
            if self._state == 2 and self._remaining < 0 and not self._chunked:
                # body delimited by connection close: this is its normal end; a reset
                # (an error, not the server's close) is told to the sink, which decides
                # whether what came was whole
                if exc is not None:
                    reset = getattr(self._sink, "on_reset", None)
                    if reset is not None:
                        reset(f"{type(exc).__name__}: {exc}")
                self._finish(_monotonic_ns())
                return
            # nothing of a response yet (a late CRLF of the previous one does not count):
            # the request may be retried on another connection
            before = self._state == 1 and not self._buf.strip(b"\r\n")
            self._fut.set_exception(
                ConnectionClosed(
                    "server closed the connection"
                    + (" before responding" if before else " mid-response"),
                    before_response=before,
                )
            )
        self._wake_tail()

    def data_received(self, data: bytes) -> None:
        self.arrived(data, _monotonic_ns())

    def arrived(self, data: bytes, t: int) -> None:
        """``data`` reached the loop at ``t``: copy it to the tee (if any), then parse it
        now, or after the I/O phase."""
        if self._tee is not None:
            data = self._teed(self._tee, data)
        if self._sink is None:
            return  # unsolicited bytes on an idle connection: ignore
        q = self._queue
        if q is None:
            self._process(data, t)
            return
        items = q.items
        if not items:
            q.loop.call_soon(q.drain)
        items.append((self, data, t))
        self._deferred += 1

    # -- the tee ---------------------------------------------------------------------
    def _teed(self, tee: Tee, data: bytes) -> bytes:
        """Copy this response's part of ``data`` to the tee; returns what is left for
        the parser. While a response is read, every byte is its own. The parser ends a
        chunked body at its ``0\\r\\n``; the final CRLF (after any trailers) belongs to
        the same response, also when it comes in a later read, after the parser ended."""
        if self._tail_wait is not None or (self._sink is None and self.tail_open()):
            buf = self._tee_last + data
            k = buf.find(b"\r\n\r\n")
            take = len(data) if k < 0 else k + 4 - len(self._tee_last)
            # (a read the compiled relay began never lands here: it is offered only while
            # the response is read; skipped all the same, never sent twice)
            skip, self._tee_skip = min(self._tee_skip, take), 0
            tee(data[skip:take])
            self._tee_last = (self._tee_last + data[:take])[-4:]
            if k < 0:
                return b""
            self._wake_tail()
            return data[take:]
        if self._sink is not None:
            if self._tee_skip:  # the compiled relay sent the first part of this read
                skip, self._tee_skip = self._tee_skip, 0
                tee(data[skip:])
            else:
                tee(data)
            self._tee_last = (self._tee_last + data)[-4:]
        return data

    def tail_open(self) -> bool:
        """Whether the teed response is a chunked body whose final CRLF the tee has not
        had yet."""
        return self._chunked and not self._tee_last.endswith(b"\r\n\r\n")

    def _wake_tail(self) -> None:
        fut, self._tail_wait = self._tail_wait, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def finish_tee(self, wait_s: float) -> None:
        """After the response: give the tee the rest of a chunked body's end (waiting up
        to ``wait_s`` for it; a CRLF of our own if it does not come, so what the tee got
        is a whole response), then detach it."""
        tee = self._tee
        if tee is None:
            return
        if self.tail_open() and not self.closed:
            self._tail_wait = asyncio.get_running_loop().create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._tail_wait, wait_s)
        if self.tail_open():
            tee(b"\r\n")  # the final CRLF the body was closed on
        self._tee = None

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may serve another request: the last response did not
        ask to close it, and it is open."""
        return self._keep_alive and not self.closed

    def _process(self, data: bytes, t: int) -> None:
        sink = self._sink
        if sink is None:
            return  # the response was given up (aborted) before this read was parsed
        try:
            if self._state == 2 and self._remaining == -1 and self._chunked and not self._buf:
                # Fast path: whole chunks, each handed over alone (a paced server writes one
                # SSE event per chunk per write; a late reader finds several). The rest of
                # the read (the last chunk, a partial one, anything odd) goes the general way.
                pos = 0
                n = len(data)
                while True:
                    eol = data.find(b"\r\n", pos, pos + 18)
                    if eol <= pos:
                        break
                    size = _chunk_size(data[pos:eol])
                    end = eol + 2 + size
                    if size <= 0 or end + 2 > n or not data.startswith(b"\r\n", end):
                        break
                    if not sink.on_data(data[eol + 2 : end], t):
                        self._abort(None)
                        return
                    pos = end + 2
                    if pos == n:
                        return
                if pos:
                    data = data[pos:]
            self._received(data, t)
        except Exception as exc:  # noqa: BLE001 - never let a parser bug kill the transport
            self._abort(f"client error while reading the response: {type(exc).__name__} {exc}",
                        kind=ErrorKind.CLIENT_EXCEPTION)  # fmt: skip
        finally:
            if self._fast is not None:  # the compiled path may take the next reads
                self._offer_fast()

    def _offer_fast(self) -> None:
        """Let the compiled path take this response's next reads (``ReceiveHub.fast``):
        where the body is between whole chunks of a chunked event stream that nothing
        else reads first (no tee, no deferred parsing) and the sink says it can be
        (``c_fields``). The compiled path takes the fd out again at the first read it
        leaves to Python, which puts it back here once that read is parsed.

        A teed response (the shadow proxy's relay) is offered to the compiled relay
        instead (``ReceiveHub.relay``), between whole chunks, with nothing of it waiting
        to be parsed or teed, where the tee says it can be (``c_relay``)."""
        sink = self._sink
        if self._tee is not None:
            if (
                self._relay is not None
                and self._state == 2
                and self._chunked
                and self._remaining == -1
                and not self._buf
                and not self._deferred
                and self._tail_wait is None
                and sink is not None
            ):
                c_relay = getattr(self._tee, "c_relay", None)
                fields = c_relay(sink, self._relay, self._fd) if c_relay is not None else None
                if fields is not None:
                    self._relay[self._fd] = fields
            return
        if (
            self._state == 2
            and self._chunked
            and self._remaining == -1
            and not self._buf
            and self._tee is None
            and self._queue is None
            and sink is not None
        ):
            c_fields = getattr(sink, "c_fields", None)
            fields = c_fields() if c_fields is not None else None
            if fields is not None and self._fast is not None:
                self._fast[self._fd] = fields

    def _unoffer(self) -> None:
        if self._fast is not None:
            self._fast.pop(self._fd, None)
        if self._relay is not None:
            self._relay.pop(self._fd, None)

    def _received(self, data: bytes, t: int) -> None:
        while self._state == 1:  # again after an interim (1xx) response
            buf = self._buf + data if self._buf else data
            if buf[:1] in b"\r\n":  # stray CRLF ending the previous chunked body
                buf = buf.lstrip(b"\r\n")
            if buf[:5] != b"HTTP/"[: len(buf)]:  # not waiting for an end that is no HTTP
                self._abort(f"not an HTTP response: {buf[:60]!r}", kind=ErrorKind.MALFORMED_STREAM)
                return
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    self._abort(
                        "response headers larger than 64 KiB", kind=ErrorKind.MALFORMED_STREAM
                    )
                self._buf = buf
                return
            self._head(buf[:end], t)
            if self._state == 3:
                return
            data = buf[end + 4 :]
            self._buf = b""
            if self._state == 1:
                continue  # an interim response: the final one follows
            if not data:
                if self._remaining == 0:
                    self._finish(t)
                return
        if self._state == 2:
            self._body(data, t)

    # -- response parsing --------------------------------------------------------
    def _head(self, head: bytes, t: int) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        code = parts[1] if len(parts) > 1 else b""
        if not (parts[0][:5] == b"HTTP/" and len(code) == 3 and code.isdigit()):
            self._abort(f"not an HTTP response: {lines[0][:60]!r}", kind=ErrorKind.MALFORMED_STREAM)
            return
        status = int(code)
        if 100 <= status < 200 and status != 101:
            return  # interim (100 Continue, 103 Early Hints): the final response follows
        chunked = False
        length = -1
        keep = not lines[0].startswith(b"HTTP/1.0")
        ctype = location = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip()
            if name == b"content-type":
                ctype = value
            elif name == b"location":
                location = value
            elif name == b"content-length":
                if not value.isdigit() or len(value) > 18 or (length >= 0 and int(value) != length):
                    self._abort(
                        f"bad Content-Length {value[:30]!r}", kind=ErrorKind.MALFORMED_STREAM
                    )
                    return
                length = int(value)
            elif name == b"transfer-encoding":
                codings = [c.strip() for c in value.lower().split(b",") if c.strip()]
                if codings != [b"chunked"]:  # nothing else was asked for (no TE header)
                    self._abort(f"unsupported Transfer-Encoding {value[:40]!r}",
                                kind=ErrorKind.MALFORMED_STREAM)  # fmt: skip
                    return
                chunked = True
            elif name == b"connection":
                v = value.lower()
                keep = b"close" not in v and (keep or b"keep-alive" in v)
        if status in (204, 304):
            chunked, length = False, 0  # never a body (RFC 9112 6.3)
        self._chunked = chunked
        self._remaining = -1 if chunked else length
        if not chunked and length < 0:
            keep = False  # body runs to connection close
        self._keep_alive = keep
        self._state = 2
        self._sink.on_headers(status, t)  # type: ignore[union-attr]
        if ctype is not None or location is not None:
            head_info(self._sink, ctype, location)  # type: ignore[arg-type]

    def _body(self, data: bytes, t: int) -> None:
        sink = self._sink
        if not self._chunked:
            if self._remaining >= 0:
                if len(data) >= self._remaining:
                    data = data[: self._remaining]
                    self._remaining = 0
                else:
                    self._remaining -= len(data)
            if data and not sink.on_data(data, t):  # type: ignore[union-attr]
                self._abort(None)
                return
            if self._remaining == 0:
                self._finish(t)
            return
        # chunked transfer coding: de-frame every complete chunk of this read, then hand
        # the payload over once (it all arrived at the same instant)
        buf = self._buf + data if self._buf else data
        pos = 0
        n = len(buf)
        pieces: list[bytes] = []
        last = False
        while pos < n:
            if self._remaining > 0:
                take = min(self._remaining, n - pos)
                pieces.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                continue
            if self._remaining == 0:  # CRLF after a chunk's data
                if n - pos < 2:
                    break
                pos += 2
                self._remaining = -1
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > _MAX_CHUNK_LINE:
                    self._abort("chunk-size line without an end", kind=ErrorKind.MALFORMED_STREAM)
                    return
                break
            size_line = buf[pos:eol].split(b";", 1)[0].strip(b" \t")
            size = _chunk_size(size_line)
            if size < 0:
                self._abort(f"bad chunk size {size_line[:20]!r}", kind=ErrorKind.MALFORMED_STREAM)
                return
            pos = eol + 2
            if size == 0:  # last chunk; a late final CRLF is skipped by the next head
                last = True
                break
            self._remaining = size
        self._buf = b"" if last else buf[pos:]
        if pieces:
            payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if not sink.on_data(payload, t):  # type: ignore[union-attr]
                self._abort(None)
                return
        if last:
            self._finish(t)

    def _finish(self, t: int) -> None:
        self._state = 3
        self._unoffer()
        sink, fut = self._sink, self._fut
        self._sink = None
        self._fut = None
        if not self._keep_alive and self.transport is not None:
            self.transport.close()
            self.closed = True
        if sink is not None:
            sink.on_end(t)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _abort(self, reason: str | None, kind: ErrorKind = ErrorKind.DISCONNECT) -> None:
        """Drop the connection: broken framing, or the sink gave up on the response."""
        self.closed = True
        fut = self._fut
        self._sink = None
        self._fut = None
        self._state = 3
        self._unoffer()
        if self.transport is not None:
            self.transport.abort()
        if fut is not None and not fut.done():
            if reason is None:
                fut.set_result(None)  # the sink already recorded why
            else:
                fut.set_exception(ConnectionClosed(reason, before_response=False, kind=kind))

    # -- request -----------------------------------------------------------------
    def start(self, payload: bytes, sink: BodySink, tee: Tee | None = None) -> asyncio.Future:
        """Send ``payload`` (a whole request) and read its response into ``sink``; every
        byte of the response is first copied, unparsed and as it arrives, to ``tee``
        (the shadow proxy relays the baseline's response so). The future ends with the
        response, or with ``ConnectionClosed``."""
        assert self.transport is not None
        self._unoffer()
        self._sink = sink
        self._tee = tee
        self._tee_last = b""
        self._tee_skip = 0
        self._fut = asyncio.get_running_loop().create_future()
        self._state = 1
        self._buf = b""
        self._remaining = -1
        self._chunked = False
        self.transport.write(payload)
        return self._fut


class ReceiveDelays:
    """How long reads waited in the socket before the worker read them (kernel arrival to
    ``recvmsg``): the error a loop-side timestamp would have had. A histogram of
    quarter-octave buckets in microseconds, so it is O(1) per read and bounded in size."""

    __slots__ = ("counts", "n", "max_ns")

    def __init__(self) -> None:
        self.counts = [0] * 160
        self.n = 0
        self.max_ns = 0

    def add(self, d_ns: int) -> None:
        self.n += 1
        if d_ns > self.max_ns:
            self.max_ns = d_ns
        us = d_ns >> 10  # ~microseconds (1.024)
        if us < 4:
            self.counts[us] += 1
            return
        b = us.bit_length()
        self.counts[min(159, 4 * b + ((us >> (b - 3)) & 3) - 8)] += 1

    @staticmethod
    def _upper_ns(i: int) -> int:
        if i < 4:
            return (i + 1) << 10
        b, q = (i + 8) // 4, (i + 8) % 4
        return ((4 + q + 1) << (b - 3)) << 10

    def quantile_ms(self, q: float) -> float | None:
        """Upper edge of the bucket holding the q-quantile (at most ~25 % high)."""
        if not self.n:
            return None
        need = q * self.n
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if c and seen >= need:
                return min(self._upper_ns(i), self.max_ns) / 1e6
        return self.max_ns / 1e6


class ReceiveHub:
    """Reads for a pool's connections, each stamped with the kernel's receive time.

    Why: a time taken when the event loop gets to a read is late by however long the
    loop was busy or not scheduled; on a shared 2-core host, with 256 streams per worker,
    that reached 19 ms at the p99 (benchmarks/README.md). The kernel stamps every segment
    when it reaches the socket, and ``recvmsg`` returns the stamp of the last segment a
    read takes (socket(7), SO_TIMESTAMPNS). So a chunk's arrival time no longer depends on
    the worker: only when two chunks of one stream wait in its socket together does the
    earlier one get the later one's time, as with any single read.

    The connections are in one epoll set, which the event loop watches as one file: one
    loop wake-up per batch of ready sockets, one ``recvmsg`` per ready socket, and each
    read parsed at once (its stamp is already taken; ``HTTP1Pool.parse_after_io`` defers
    the parsing for protocols that relay first).

    Compiled (client/_recvstamp.c), the reads of the connections in ``fast`` (fd ->
    ``ResponseHandler.c_fields``: a streamed response between whole chunks) are also
    parsed there, chunked framing, SSE event and JSON, into the record, while they are
    content chunks of the usual shape; the rest goes to the protocol as before. Why:
    with one SSE event per read, that per-chunk path in Python was about half of the
    client's CPU per chunk (benchmarks/README.md, section 1)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ep = select.epoll()
        self.epfd = self.ep.fileno()
        self.conns: dict[int, _HubTransport] = {}
        self.fast: dict[int, FastFields] = {}  # filled by HTTP1Protocol._offer_fast
        # the compiled relay (the shadow proxy): fd -> RelayFields, filled by _offer_fast;
        # partial: fd -> bytes of a read it gave back that it had sent (all, or as many as
        # the caller's socket took)
        self.relay: dict[int, RelayFields] = {}
        self.partial: dict[int, int] = {}
        self.relayed = 0
        self.caller_full = 0  # reads it gave back, the caller's socket full (sent in part or not)
        self.on_relayed: Callable[[], None] | None = None  # after a wake-up that relayed
        self.reads = 0
        self.stamped = 0
        self.delays = ReceiveDelays()
        self.closed = False
        # the previous look at the clocks: (monotonic time, realtime offset, uncertainty)
        off, unc = _clock_offset()
        self._look = (_monotonic_ns(), off, unc)
        self._first = self._look
        self._max_step = 0  # the largest move of the offset between two close looks
        keep_kernel_stamping()
        loop.add_reader(self.ep.fileno(), self._ready)

    def _ready(self) -> None:
        """Once per loop wake-up: every ready socket read first (in C where built), so a
        burst of streams is off the sockets before the next tokens can join it in one
        read; then each read handed over with its time.

        The realtime-to-monotonic offset is read at every wake-up, and each stamp is
        converted with the reading nearer its arrival, this one or the previous: the
        offset moves whenever the wall clock is stepped or slewed (on the development VM
        of docs/METRICS.md, by 0.5 ms every 100 ms), so one taken long before or after
        the arrival would be off by the steps in between."""
        off, unc = _clock_offset()  # 0.2 us compiled, 0.9 us in Python (measured)
        now = _monotonic_ns()
        prev_at, prev_off, prev_unc = self._look
        self._look = (now, off, unc)
        if now - prev_at < 20_000_000:  # close looks: one step at most between them
            self._max_step = max(self._max_step, abs(off - prev_off) - unc - prev_unc)
        slack = abs(off - prev_off) + unc + prev_unc
        read = _c_read_ready
        conns = self.conns
        delays = self.delays
        if read is not None:
            # the reads it took whole are counted and in the records already; the others
            # (and what is left of a read it took in part) come back for the protocol
            partial = self.partial
            got, n, stamped, max_d, relayed = read(
                self.epfd, off, prev_off, prev_at, _MAX_STAMP_AGE_NS, slack, self.fast,
                delays.counts, self.relay, partial,
            )  # fmt: skip
            self.reads += n
            self.stamped += stamped
            delays.n += stamped
            if max_d > delays.max_ns:
                delays.max_ns = max_d
            if relayed:
                self.relayed += relayed
                if self.on_relayed is not None:
                    self.on_relayed()
            for fd, data, t, d in got:
                tr = conns.get(fd)
                if tr is None:
                    continue
                if data is None:  # ended: d is the errno, 0 for the server's orderly close
                    tr._shut(OSError(d, os.strerror(d)) if d else None)
                    continue
                if partial and fd in partial:
                    sent = tr.proto._tee_skip = partial.pop(fd)
                    if sent < len(data):
                        self.caller_full += 1
                tr.arrived(data, t)
            return
        n = self.reads
        stamped = 0
        for fd, data, t, d in self._read_py(off, prev_off, prev_at, slack):
            tr = conns.get(fd)
            if tr is None:
                continue
            if data is None:  # ended: d is the errno, 0 for the server's orderly close
                tr._shut(OSError(d, os.strerror(d)) if d else None)
                continue
            n += 1
            if d >= 0:
                stamped += 1
                delays.add(d)
            tr.arrived(data, t)
        self.reads = n
        self.stamped += stamped

    def _read_py(
        self, off: int, prev_off: int, prev_at: int, slack: int
    ) -> list[tuple[int, bytes | None, int, int]]:
        """``_recvstamp.read_ready`` in Python (the fallback): (fd, data, t_ns, delay_ns
        or -1) per read; (fd, None, 0, errno or 0) for a socket that ended. A stamp is
        converted with ``off`` (now) or ``prev_off`` (taken at ``prev_at``), whichever
        reading is nearer its arrival; one up to ``slack`` after the read (the offsets'
        uncertainty) is the read's own time."""
        conns = self.conns
        got: list[tuple[int, bytes | None, int, int]] = []
        for fd, _ in self.ep.poll(0):
            tr = conns.get(fd)
            if tr is None:
                continue
            try:
                data, anc, _, _ = tr.recvmsg(_READ_SIZE, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                got.append((fd, None, 0, exc.errno or 0))
                continue
            if not data:
                got.append((fd, None, 0, 0))
                continue
            t = _monotonic_ns()
            d = -1
            if anc:
                _, kind, raw = anc[0]
                if kind == _SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = _unpack_timespec(raw)
                    real = sec * 1_000_000_000 + nsec
                    k = real - off
                    if t - k > k - prev_at:  # nearer the previous look at the clocks
                        k = real - prev_off
                    if -slack <= t - k < _MAX_STAMP_AGE_NS:  # else the clock was stepped
                        t, d = min(t, k), max(t - k, 0)
            got.append((fd, data, t, d))
        return got

    def add(self, tr: _HubTransport) -> None:
        self.conns[tr.fd] = tr
        self.ep.register(tr.fd, select.EPOLLIN)

    def remove(self, tr: _HubTransport) -> None:
        self.fast.pop(tr.fd, None)
        self.relay.pop(tr.fd, None)
        self.partial.pop(tr.fd, None)
        if self.conns.pop(tr.fd, None) is not None and not self.closed:
            with contextlib.suppress(OSError, ValueError):
                self.ep.unregister(tr.fd)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.ep.fileno())
        self.ep.close()

    def stats(self) -> ReceiveStats:
        return {
            "reads": self.reads,
            "kernel_stamped": self.stamped,
            "read_delay_ms_p50": self.delays.quantile_ms(0.5),
            "read_delay_ms_p99": self.delays.quantile_ms(0.99),
            "read_delay_ms_max": self.delays.max_ns / 1e6 if self.delays.n else None,
            # how the wall clock (the stamps' clock) moved against the monotonic one
            "realtime_drift_ppm": self.realtime_drift_ppm(),
            "realtime_step_ms_max": self._max_step / 1e6,
        }

    def realtime_drift_ppm(self) -> float | None:
        """How fast the wall clock moved against the monotonic clock over the hub's life,
        in parts per million (None under 0.1 s). Gradual corrections (NTP, adjtime)
        move both alike (clock_gettime(2)); only steps move one against the other, and a
        stamp whose arrival falls between a step and the next look at the clocks is off
        by that step."""
        span = self._look[0] - self._first[0]
        if span < 100_000_000:
            return None
        return round((self._look[1] - self._first[1]) / span * 1e6, 1)


class _HubTransport:
    """What the pool and protocol use of ``asyncio.Transport``, over a non-blocking socket
    whose reads the hub does."""

    __slots__ = ("sock", "fd", "proto", "hub", "recvmsg", "arrived", "_wbuf", "_closed")

    def __init__(self, sock: socket.socket, proto: HTTP1Protocol, hub: ReceiveHub) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.proto = proto
        self.recvmsg = sock.recvmsg
        self.arrived = proto.arrived
        self.hub = hub
        self._wbuf = bytearray()
        self._closed = False
        hub.add(self)
        if _c_read_ready is not None:  # the compiled path may parse (or relay) its reads
            proto._fast = hub.fast
            proto._relay = hub.relay
            proto._fd = self.fd

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default

    def is_closing(self) -> bool:
        return self._closed

    def write(self, data: bytes) -> None:
        if self._closed:
            return
        if not self._wbuf:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self._shut(exc)
                return
            if n == len(data):
                return
            data = data[n:]
            self.hub.loop.add_writer(self.fd, self._write_ready)
        self._wbuf += data

    def _write_ready(self) -> None:
        try:
            n = self.sock.send(self._wbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._shut(exc)
            return
        del self._wbuf[:n]
        if not self._wbuf:
            self.hub.loop.remove_writer(self.fd)

    def close(self) -> None:
        self._shut(None)

    def abort(self) -> None:
        self._shut(None)

    def _shut(self, exc: Exception | None) -> None:
        """Close the socket; the protocol hears of it on the next loop turn, as from an
        asyncio transport."""
        if self._closed:
            return
        self._closed = True
        self.hub.remove(self)
        if self._wbuf:
            self._wbuf.clear()
            with contextlib.suppress(Exception):
                self.hub.loop.remove_writer(self.fd)
        self.sock.close()
        self.hub.loop.call_soon(self.proto.connection_lost, exc)


class HTTP1Pool:
    """Keep-alive connection pool to one host:port, read through a ``ReceiveHub`` where
    ``kernel_stamps_available()`` (arrival = kernel receive time)."""

    def __init__(
        self, host: str, port: int, *, connect_timeout: float = 10.0, parse_after_io: bool = False
    ) -> None:
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        # parse reads after the loop's I/O phase (ArrivalQueue) even with kernel stamps,
        # for connections whose reads are teed first (the shadow proxy relays them)
        self.parse_after_io = parse_after_io
        self._idle: deque[HTTP1Protocol] = deque()
        self._all: set[HTTP1Protocol] = set()
        self._queue: ArrivalQueue | None = None
        self._hub: ReceiveHub | None = None
        self._addrs: list[tuple] | None = None
        # called after a hub wake-up in which the compiled relay took reads (the shadow
        # proxy flushes what it queued for the candidate process)
        self.relay_hook: Callable[[], None] | None = None

    async def _addresses(self, loop: asyncio.AbstractEventLoop) -> list[tuple]:
        """The host's addresses, resolved once per pool (an IP literal is not resolved)."""
        if self._addrs is None:
            for family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    socket.inet_pton(family, self.host)
                    self._addrs = [(family, socket.SOCK_STREAM, 0, "", (self.host, self.port))]
                    break
            else:
                self._addrs = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        return self._addrs

    async def _open_socket(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        err: OSError | None = None
        for family, type_, proto, _, addr in await self._addresses(loop):
            sock = socket.socket(family, type_, proto)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, addr)
                return sock
            except OSError as exc:
                sock.close()
                err = exc
            except BaseException:
                sock.close()
                raise
        raise err or OSError(f"no address for {self.host}:{self.port}")

    async def _connect(self) -> HTTP1Protocol:
        loop = asyncio.get_running_loop()
        if kernel_stamps_available():
            sock = await asyncio.wait_for(self._open_socket(loop), self.connect_timeout)
            with contextlib.suppress(OSError):  # without it, reads get the loop's time
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)  # type: ignore[arg-type]
            if self._hub is None or self._hub.loop is not loop or self._hub.closed:
                self._hub = ReceiveHub(loop)
                self._hub.on_relayed = self.relay_hook
            hub_proto = HTTP1Protocol()
            if self.parse_after_io:
                hub_proto._queue = self._arrival_queue(loop)
            hub_proto.connection_made(_HubTransport(sock, hub_proto, self._hub))  # type: ignore[arg-type]
            self._all.add(hub_proto)
            return hub_proto
        _, proto = await asyncio.wait_for(
            loop.create_connection(HTTP1Protocol, self.host, self.port), self.connect_timeout
        )
        proto._queue = self._arrival_queue(loop)
        self._all.add(proto)
        return proto

    def _arrival_queue(self, loop: asyncio.AbstractEventLoop) -> ArrivalQueue:
        if self._queue is None or self._queue.loop is not loop:
            self._queue = ArrivalQueue(loop)
        return self._queue

    def take_idle(self) -> HTTP1Protocol | None:
        """A kept-alive connection that is idle now, or None (never waits)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return None

    async def connect(self) -> HTTP1Protocol:
        """A new connection."""
        return await self._connect()

    async def acquire(self) -> tuple[HTTP1Protocol, bool]:
        """A connection, and whether it was reused (reused ones may be stale)."""
        conn = self.take_idle()
        if conn is not None:
            return conn, True
        return await self._connect(), False

    def release(self, conn: HTTP1Protocol) -> None:
        if conn.closed or conn._state != 3:
            self._all.discard(conn)
            if conn.transport is not None and not conn.closed:
                conn.transport.abort()
            return
        self._idle.append(conn)

    def discard(self, conn: HTTP1Protocol) -> None:
        if conn._deferred and conn._queue is not None:
            conn._queue.drain()  # what arrived before the request was given up counts
        self._all.discard(conn)
        if conn.transport is not None:
            conn.transport.abort()
        conn.closed = True

    def receive_stats(self) -> ReceiveStats | None:
        """Reads, how many carried a kernel stamp, and how long they waited to be read."""
        return self._hub.stats() if self._hub is not None else None

    def relay_stats(self) -> dict[str, int]:
        """Reads, how many the compiled relay sent, and how many it gave back because the
        caller's socket was full (``ReceiveHub.relay``)."""
        h = self._hub
        if h is None:
            return {}
        return {"reads": h.reads, "compiled": h.relayed, "caller_full": h.caller_full}

    def close(self) -> None:
        for conn in list(self._all):
            if conn.transport is not None:
                conn.transport.close()
        self._all.clear()
        self._idle.clear()
        if self._hub is not None:
            self._hub.close()


class Exchange:
    """One request started on a connection of an ``HTTP1Transport``."""

    __slots__ = ("conn", "fut", "reused", "tee")

    def __init__(
        self, conn: HTTP1Protocol, fut: asyncio.Future, reused: bool, tee: Tee | None
    ) -> None:
        self.conn = conn
        self.fut = fut
        self.reused = reused
        self.tee = tee


# how long a teed chunked response's final CRLF is waited for once its body has ended
TAIL_WAIT_S = 5.0


class HTTP1Transport:
    """The plain-http transport (``client.transport.Transport``): keep-alive connections
    of one ``HTTP1Pool``, one request at a time on each.

    ``send`` is one attempt; failures raise ``client.errors`` exceptions (a connection
    the server had closed while it was idle is ``retryable``). ``start_idle`` and
    ``finish`` split ``send`` for a caller that must start a request inside the callback
    that received it (the shadow proxy), when an idle connection is there."""

    def __init__(self, host: str, port: int, *, parse_after_io: bool = False) -> None:
        self.host = host
        self.port = port
        self.pool = HTTP1Pool(host, port, parse_after_io=parse_after_io)
        self._head: tuple[dict[str, str], str, bytes] | None = None  # see ``wire``

    def wire(self, req: Request) -> bytes:
        """The request as it goes on the wire. The head up to the per-request fields is
        built once per path and headers dict (a client sends one of each)."""
        if req.wire:
            return req.wire
        cached = self._head
        if cached is None or cached[0] is not req.headers or cached[1] != req.path:
            lines = [f"POST {req.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
            lines += [f"{k}: {v}\r\n" for k, v in req.headers.items()]
            head = (lines[0] + "\r\n" + lines[1] + "\r\n" + "".join(lines[2:])).encode("latin-1")
            cached = self._head = (req.headers, req.path, head)
        rid = b"X-Request-Id: %s\r\n" % req.request_id.encode("latin-1") if req.request_id else b""
        return b"%s%sContent-Length: %d\r\n\r\n%s" % (cached[2], rid, len(req.body), req.body)

    def start_idle(
        self, req: Request, new_sink: Callable[[], BodySink], tee: Tee | None = None
    ) -> Exchange | None:
        """Start the request now on an idle kept-alive connection; None if there is none."""
        conn = self.pool.take_idle()
        if conn is None:
            return None
        return Exchange(conn, conn.start(self.wire(req), new_sink(), tee), True, tee)

    def abandon(self, ex: Exchange) -> None:
        """Give up a started request that will not be finished: its connection is closed."""
        self.pool.discard(ex.conn)

    def send(
        self,
        req: Request,
        new_sink: Callable[[], BodySink],
        *,
        deadline_ns: int,
        tee: Tee | None = None,
    ) -> Awaitable[bool]:
        """One attempt: a connection (``new_sink`` is called once it is there, right
        before the request is written), the request, its response. Its result says
        whether the connection stays open for another request. On an idle kept-alive
        connection the request is written before this returns (one coroutine less per
        request: the client's hot path)."""
        ex = self.start_idle(req, new_sink, tee)
        if ex is not None:
            return self.finish(ex, deadline_ns)
        return self._connect_and_send(req, new_sink, deadline_ns, tee)

    async def _connect_and_send(
        self, req: Request, new_sink: Callable[[], BodySink], deadline_ns: int, tee: Tee | None
    ) -> bool:
        try:
            conn = await self.pool.connect()
        except (TimeoutError, OSError) as exc:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        ex = Exchange(conn, conn.start(self.wire(req), new_sink(), tee), False, tee)
        return await self.finish(ex, deadline_ns)

    async def finish(self, ex: Exchange, deadline_ns: int) -> bool:
        """Wait for a started request's response (see ``send``)."""
        pool, conn = self.pool, ex.conn
        try:
            await asyncio.wait_for(ex.fut, max(0.001, (deadline_ns - _monotonic_ns()) / 1e9))
            if ex.tee is not None:
                await conn.finish_tee(TAIL_WAIT_S)
        except TimeoutError:
            pool.discard(conn)
            raise ResponseTimeout("no complete response before the deadline") from None
        except ConnectionClosed as exc:
            pool.discard(conn)
            exc.retryable = exc.before_response and ex.reused
            raise
        except asyncio.CancelledError:
            pool.discard(conn)
            raise
        keep = conn.keep_alive
        pool.release(conn)
        return keep

    def receive_stats(self) -> ReceiveStats | None:
        return self.pool.receive_stats()

    def relay_stats(self) -> dict[str, int]:
        return self.pool.relay_stats()

    async def close(self) -> None:
        self.pool.close()


def request_head(method: str, host: str, port: int, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
