"""The proxy's candidate side, in a process of its own.

Why a process: the copies' streams are as many as the callers' and cost as much to read
and parse; on the proxy's event loop every candidate chunk would delay the baseline
chunks queued behind it (and a thread would hold the GIL). Here the proxy's loop only
queues each copy (one frame) and hands the queue over every few ms (``_FLUSH_S``), in
one write (never blocking: the transport buffers); it reads back one
short line per finished copy. A write, and the wake-up of this process, per copy had
been on the caller's path: the request that came with it, and every chunk the loop had
still to relay, waited for them.

This process runs at a lower CPU priority (``nice`` +``CANDIDATE_NICE``): where cores are
few, the callers' side (the proxy, and the baseline on the same host) goes first, and
the copies get the time left. Its timings do not suffer for it: a chunk's arrival is the
kernel's receive stamp (client/http1.py ``ReceiveHub``), not when this process got to
read it, and a copy's TTFT starts when it is sent. This process sends the copies with
accelbench's client, times them on the host's monotonic clock (the same clock as the
proxy's), and journals their records into ``candidate.jsonl`` itself.

This process also measures the baseline's side (``baseline.jsonl``). The proxy relays
the baseline's bytes to the caller and frames its HTTP; every event of a recorded
response (headers, each piece of body with its kernel receive time, the end, a failure)
comes here as a frame, and is parsed here by the same ``ResponseHandler`` as before (a
data frame that is one content event, the usual token, is taken by the compiled
``_recvstamp.take_frames``, the client's per-chunk code, without a Python call: 67 -> 28 µs
per 16-token response on the 2-core host, ``_Frames``). Why:
parsing the SSE events and building the records was half of the proxy loop's CPU, on the
loop that relays every caller's chunks (under the profiler on the 2-core host: 1.6 of
3.4 s for 1,565 requests of 16 tokens); there each chunk's parse delayed the relay of the
chunks behind it, and the loop's CPU demand decided how soon the scheduler ran it again.

Frames to this process: 4-byte big-endian length, then ``C`` + JSON config (first),
``R`` + idx, t (two uint64) + endpoint (1 byte) + the request body as received, or
``S`` + grace seconds (float64): finish, giving in-flight copies that long. The
baseline's side (idx, t: two uint64 first in each): ``N`` a recorded request
(+ max_tokens as int64, -1 for none, + flags: 1 chat, 2 stream), ``B`` an attempt
started at t (+ retries, uint32), ``H`` headers (+ status, uint16), ``D`` body bytes
(+ the bytes), ``E`` the end, ``F`` a failure (+ 1 byte: an attempt was started; +
error kind, NUL, message), ``I`` interrupted (+ why), ``J`` journal the record (+ why
it was cut, empty if not). Lines back: ``ready``, ``done <ok|error kind>`` per copy,
``end`` once the journals are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, cast

import orjson

from accelbench.client.http1 import FastFields
from accelbench.client.openai import ResponseHandler
from accelbench.errors import AccelbenchError
from accelbench.lifetime import STOP_SIGNALS, Child, spawn
from accelbench.metrics.records import ErrorKind, RequestRecord, record_row
from accelbench.metrics.summary import ReceiveStats
from accelbench.store.rundir import Journal

_now = time.monotonic_ns
_HEAD = struct.Struct("!I")
_REQ = struct.Struct("!QQB")
_EV = struct.Struct("!QQ")  # idx, t: the head of every baseline frame
_NEW = struct.Struct("!QQqB")
_TRY = struct.Struct("!QQI")
_STATUS = struct.Struct("!QQH")
ENDPOINTS = ("completions", "chat")
CANDIDATE_NICE = 10  # the candidate process's niceness, added to the proxy's
# How long queued frames wait to be written (or until _FLUSH_BYTES are queued): one write,
# and one wake-up of this process, per few ms, not per loop turn (when streams are few a
# turn relays a chunk or two, and a write per turn doubled the proxy's system calls: the
# callers' p99 chunk gap 1.8x at 64 streams, measured). Times travel in the frames, and a
# copy's own TTFT starts when this process sends it, so the wait changes no figure.
_FLUSH_S = 0.005
_FLUSH_BYTES = 1 << 16
# The baseline's data frames of the usual shape (one content event each), taken in C
# (client/_recvstamp.c take_frames); without it (no compiler, or a test setting it to
# None) every frame is parsed in Python, with identical records.
_c_take_frames: Callable[[bytearray, int, dict[int, FastFields]], int] | None
try:
    from accelbench.client._recvstamp import take_frames as _c_take_frames
except ImportError:  # pragma: no cover - a build without a C compiler
    _c_take_frames = None


class CandidateConfig(TypedDict):
    """What the proxy hands its candidate process (over the socket, never to a file)."""

    candidate: dict[str, object]  # Endpoint.secret_parts(): credentials included
    candidate_model: str | None
    candidate_api_key: str | None
    candidate_timeout_s: float
    journal: str  # the candidate's journal (candidate.jsonl)
    baseline_journal: str  # the baseline's (baseline.jsonl), from the proxy's frames


class _Frames(asyncio.Protocol):
    """Length-prefixed frames from a stream socket. With ``fast`` (idx ->
    ``ResponseHandler.c_fields``, kept by ``_Baseline``), the data frames of those
    responses that are one content event each are taken by the compiled
    ``_recvstamp.take_frames`` as ``on_data`` would take them, and never become a
    Python frame; every other frame goes to ``on_frame``."""

    def __init__(
        self,
        on_frame: Callable[[bytes], None],
        on_eof: Callable[[], None],
        fast: dict[int, FastFields] | None = None,
    ) -> None:
        self.buf = bytearray()
        self.on_frame = on_frame
        self.on_eof = on_eof
        self.transport: asyncio.Transport | None = None
        self.fast = fast if _c_take_frames is not None else None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # before any frame comes

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        fast = self.fast
        while len(buf) - pos >= 4:
            if fast and _c_take_frames is not None:
                pos = _c_take_frames(buf, pos, fast)
                if len(buf) - pos < 4:
                    break
            (n,) = _HEAD.unpack_from(buf, pos)
            if len(buf) - pos - 4 < n:
                break
            self.on_frame(bytes(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        if pos:
            del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_eof()


class _Lines(asyncio.Protocol):
    def __init__(self, on_line: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self.buf = b""
        self.on_line = on_line
        self.on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        *lines, self.buf = (self.buf + data).split(b"\n")
        for line in lines:
            self.on_line(line)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_eof()


def frame(payload: bytes) -> bytes:
    return _HEAD.pack(len(payload)) + payload


class CandidateProcess:
    """The proxy's handle on the candidate process: ``copy`` never blocks or waits;
    ``inflight`` counts copies handed over and not yet reported finished."""

    def __init__(self, on_done: Callable[[str], None]) -> None:
        self.on_done = on_done
        self.inflight = 0
        self.alive = False
        self.receive: list[ReceiveStats] = []  # the copies' arrival stamps, sent at the end
        self.proc: Child | None = None
        self.transport: asyncio.Transport | None = None
        self._ready: asyncio.Future | None = None
        self._end: asyncio.Future | None = None
        # copies and baseline events queued, written by _flush within _FLUSH_S (the
        # compiled relay appends baseline events here too: http1.ReceiveHub.relay)
        self._out = bytearray()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, config: CandidateConfig, timeout_s: float = 60.0) -> None:
        loop = self._loop = asyncio.get_running_loop()
        mine, theirs = socket.socketpair()
        try:
            self.proc = spawn(
                [sys.executable, "-m", "accelbench.suites.shadow.candidate", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        finally:
            theirs.close()
        self._ready = loop.create_future()
        self._end = loop.create_future()
        self.transport, _ = await loop.create_connection(
            lambda: _Lines(self._line, self._eof), sock=mine
        )
        self.transport.write(frame(b"C" + orjson.dumps(config)))
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout_s)
        except TimeoutError:
            self.kill()
            raise AccelbenchError("the candidate process did not start in time") from None
        if not self._ready.result():
            self.kill()
            raise AccelbenchError("the candidate process failed to start")
        self.alive = True

    def _line(self, line: bytes) -> None:
        if line.startswith(b"done "):
            self.inflight -= 1
            self.on_done(line[5:].decode())
        elif line == b"ready" and self._ready is not None and not self._ready.done():
            self._ready.set_result(True)
        elif line.startswith(b"recv "):
            with contextlib.suppress(orjson.JSONDecodeError):
                got = orjson.loads(line[5:])
                if isinstance(got, list):
                    self.receive = [cast(ReceiveStats, r) for r in got if isinstance(r, dict)]
        elif line == b"end" and self._end is not None and not self._end.done():
            self._end.set_result(None)

    def _eof(self) -> None:
        self.alive = False
        for f in (self._ready, self._end):
            if f is not None and not f.done():
                f.set_result(False)

    def copy(self, idx: int, endpoint: str, t: int, body: bytes) -> None:
        """Queue a copy; the queue goes to the process within ``_FLUSH_S``."""
        assert self.transport is not None and self._loop is not None
        self.inflight += 1
        out = self._out
        out += frame(b"R" + _REQ.pack(idx, t, ENDPOINTS.index(endpoint)) + body)
        self.kick()

    # -- the baseline's side: measured in the process ---------------------------------
    def base(self, kind: bytes, idx: int, t: int, rest: bytes = b"") -> None:
        """Queue one event of a recorded baseline response (module docstring)."""
        self._out += _HEAD.pack(17 + len(rest)) + kind + _EV.pack(idx, t) + rest
        self.kick()

    @property
    def queue(self) -> bytearray:
        """What goes to the process with the next flush (the compiled relay appends its
        baseline events here: http1.ReceiveHub.relay); ``kick`` after adding to it."""
        return self._out

    def kick(self) -> None:
        """What is queued goes out within ``_FLUSH_S``, at once past ``_FLUSH_BYTES``."""
        if len(self._out) > _FLUSH_BYTES:
            self._flush()
        elif self._out and self._timer is None and self._loop is not None:
            self._timer = self._loop.call_later(_FLUSH_S, self._flush)

    def base_new(self, idx: int, t_sched: int, max_tokens: int | None, chat: bool,
                 stream: bool) -> None:  # fmt: skip
        mt = max_tokens if max_tokens is not None and 0 <= max_tokens < 2**63 else -1
        self.base(b"N", idx, t_sched, struct.pack("!qB", mt, chat | stream << 1))

    def base_fail(self, idx: int, t: int, started: bool, kind: str, message: str) -> None:
        self.base(b"F", idx, t, bytes([started]) + kind.encode() + b"\0"
                  + message[:500].encode("utf-8", "replace"))  # fmt: skip

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._out:
            return
        data = bytes(self._out)
        self._out.clear()
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)

    async def finish(self, grace_s: float, wait_s: float = 30.0) -> None:
        """Let the copies in flight finish within ``grace_s`` (then they are cancelled
        and recorded as interrupted); returns once the journal is closed, or after
        ``wait_s`` more (a process that does not answer is killed)."""
        self._flush()  # the copies queued before the stop go first
        if self.alive and self.transport is not None and self._end is not None:
            self.transport.write(frame(b"S" + struct.pack("!d", grace_s)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._end), grace_s + wait_s)
        if self.transport is not None:
            self.transport.close()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.get_running_loop().run_in_executor(
                    None, self.proc.wait, min(wait_s, 10)
                )
            self.kill()  # reaps it, and ends what it left in its group

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace_s=0)


# -- the child process ------------------------------------------------------------------
async def _child(sock: socket.socket) -> None:
    from accelbench.client.session import OpenAIClient
    from accelbench.urls import Endpoint

    loop = asyncio.get_running_loop()
    given: list[CandidateConfig] = []  # the proxy's, once it came
    clients: dict[tuple[str, bool], OpenAIClient] = {}
    tasks: set[asyncio.Task] = set()
    journal: list[Journal] = []  # the candidate's, then the baseline's
    stop: asyncio.Future = loop.create_future()
    base = _Baseline(journal)

    def report(line: bytes) -> None:
        t = frames.transport
        if t is not None and not t.is_closing():
            t.write(line)

    async def one(idx: int, endpoint: str, t: int, raw: bytes) -> None:
        rec = RequestRecord(idx=idx, request_id=f"shadow-{idx}", t_sched=t)
        try:
            cfg = given[0]  # requests come after the configuration
            doc = orjson.loads(raw)
            stream = bool(doc.get("stream"))
            client = clients.get((endpoint, stream))
            if client is None:
                client = OpenAIClient(
                    Endpoint.from_secret_parts(cfg["candidate"]), endpoint=endpoint, stream=stream,
                    api_key=cfg["candidate_api_key"], timeout_s=cfg["candidate_timeout_s"],
                    transport="http1",
                )  # fmt: skip
                clients[(endpoint, stream)] = client
            if cfg["candidate_model"]:
                doc["model"] = cfg["candidate_model"]
            mt = doc.get("max_tokens", doc.get("max_completion_tokens"))
            rec.max_tokens = mt if isinstance(mt, int) else None
            await client.send(rec, doc)
        except asyncio.CancelledError:
            rec.interrupt("the proxy stopped before this copy finished")
        finally:
            if rec.t_send == 0:
                rec.t_send = _now()
            journal[0].write([record_row(rec)])
            report(b"done " + (b"ok" if rec.ok else (rec.error_kind or "error").encode()) + b"\n")

    def on_frame(f: bytes) -> None:
        kind = f[:1]
        if kind in _BASE_KINDS:
            base.frame(kind, f)
        elif kind == b"R":
            idx, t, e = _REQ.unpack_from(f, 1)
            task = asyncio.ensure_future(one(idx, ENDPOINTS[e], t, f[1 + _REQ.size :]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif kind == b"C":
            given.append(orjson.loads(f[1:]))
            journal.append(Journal(Path(given[0]["journal"])))
            journal.append(Journal(Path(given[0]["baseline_journal"])))
            report(b"ready\n")
        elif kind == b"S" and not stop.done():
            stop.set_result(struct.unpack("!d", f[1:9])[0])

    def on_eof() -> None:
        if not stop.done():
            stop.set_result(0.0)  # the proxy is gone: nobody waits for the copies

    frames = _Frames(on_frame, on_eof, base.fast)
    transport, _ = await loop.create_connection(lambda: frames, sock=sock)

    async def flusher() -> None:
        while True:
            await asyncio.sleep(0.25)
            for j in journal:
                j.flush_if_due()

    tick = asyncio.ensure_future(flusher())
    grace = await stop
    pending = set(tasks)
    if pending and grace > 0:
        _, pending = await asyncio.wait(pending, timeout=grace)
    if pending:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    tick.cancel()
    # how the copies' chunk times were stamped, and how long reads waited (the verdict
    # says where that was longer than the chunk gap)
    report(
        b"recv "
        + orjson.dumps([r for c in clients.values() if (r := c.receive_stats()) and r.get("reads")])
        + b"\n"
    )
    for c in clients.values():
        await c.close()
    base.close_all("the proxy ended before this request's record was complete")
    for j in journal:
        j.close()
    report(b"end\n")
    await asyncio.sleep(0)
    transport.close()


_BASE_KINDS = frozenset((b"N", b"B", b"H", b"D", b"E", b"F", b"I", b"J"))


class _Baseline:
    """The baseline's records, built from the proxy's frames exactly as the proxy built
    them before (one ``ResponseHandler`` per attempt, ``keep_text``), journalled on ``J``."""

    def __init__(self, journal: list[Journal]) -> None:
        self.journal = journal  # [candidate, baseline] once configured
        self.recs: dict[int, tuple[RequestRecord, bool, bool]] = {}  # idx: rec, chat, stream
        self.handlers: dict[int, ResponseHandler] = {}
        # idx -> the handler's c_fields, for _Frames: the responses whose next data frames
        # the compiled path may take (offered again after every frame parsed here)
        self.fast: dict[int, FastFields] = {}

    def frame(self, kind: bytes, f: bytes) -> None:
        idx, t = _EV.unpack_from(f, 1)
        self._frame(kind, idx, t, f)
        h = self.handlers.get(idx)
        fields = h.c_fields() if h is not None else None
        if fields is None:
            self.fast.pop(idx, None)
        else:
            self.fast[idx] = fields

    def _frame(self, kind: bytes, idx: int, t: int, f: bytes) -> None:
        if kind == b"D":
            h = self.handlers.get(idx)
            if h is not None:
                h.on_data(f[17:], t)
            return
        if kind == b"N":
            mt, flags = struct.unpack_from("!qB", f, 17)
            rec = RequestRecord(idx=idx, request_id=f"shadow-{idx}", t_sched=t)
            rec.max_tokens = None if mt < 0 else mt
            self.recs[idx] = (rec, bool(flags & 1), bool(flags & 2))
            return
        entry = self.recs.get(idx)
        if entry is None:
            return
        rec, chat, stream = entry
        if kind == b"B":
            (rec.retries,) = struct.unpack_from("!I", f, 17)
            self.handlers[idx] = ResponseHandler(rec, chat=chat, stream=stream, keep_text=True)
            rec.t_send = t
        elif kind == b"H":
            h = self.handlers.get(idx)
            if h is not None:
                h.on_headers(struct.unpack_from("!H", f, 17)[0], t)
        elif kind == b"E":
            h = self.handlers.get(idx)
            if h is not None:
                h.on_end(t)
        elif kind == b"F":
            started = f[17]
            err, _, msg = f[18:].partition(b"\0")
            self.fail(idx, rec, t, bool(started), err.decode(), msg.decode("utf-8", "replace"))
        elif kind == b"I":
            rec.ok = False
            rec.error_kind = ErrorKind.INTERRUPTED
            rec.error = f[17:].decode("utf-8", "replace")
            rec.t_send = rec.t_send or t
        elif kind == b"J":
            why = f[17:].decode("utf-8", "replace")
            if why and not rec.ok and rec.error_kind is None:
                rec.ok = False
                rec.error_kind = ErrorKind.INTERRUPTED
                rec.error = why
                rec.t_send = rec.t_send or t
            self.write(idx)

    def fail(
        self, idx: int, rec: RequestRecord, t: int, started: bool, kind: str, message: str
    ) -> None:
        """The request got no complete response: its record says so (unless measuring
        its response had failed it already)."""
        ek = ErrorKind(kind)
        h = self.handlers.get(idx)
        if started and h is not None:
            if not h.failed:
                h.fail(ek, message)
                rec.t_done = t
        elif not started:
            rec.t_send = rec.t_send or t
            ResponseHandler(rec, chat=False, stream=False, keep_text=False).fail(ek, message)

    def write(self, idx: int) -> None:
        entry = self.recs.pop(idx, None)
        self.handlers.pop(idx, None)
        self.fast.pop(idx, None)
        if entry is not None and len(self.journal) > 1:
            self.journal[1].write([record_row(entry[0])])

    def close_all(self, why: str) -> None:
        """Records the proxy never finished (it ended first): journalled as interrupted."""
        for idx in list(self.recs):
            rec = self.recs[idx][0]
            rec.interrupt(why)
            rec.t_send = rec.t_send or _now()
            self.write(idx)


def main(argv: list[str]) -> None:
    from accelbench.eventloop import install_uvloop

    # the proxy owns the stop signals (a terminal's Ctrl-C or hang-up reaches the whole
    # group): it asks this process to finish, or its end (EOF) does
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # the callers' side first (module docstring)
        os.nice(CANDIDATE_NICE)
    sock = socket.socket(fileno=int(argv[0]))
    install_uvloop()
    asyncio.run(_child(sock))


if __name__ == "__main__":
    main(sys.argv[1:])
