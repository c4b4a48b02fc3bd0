"""Chunk arrival times from the kernel (client/http1.py ``ReceiveHub``): a chunk that
waits in the socket while the worker's event loop is blocked keeps the time it arrived,
not the time the loop got to it; the loop-side time (``ACCELBENCH_KERNEL_STAMPS=0``) is
late by the block, which is what the kernel stamp removes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
import time

import pytest

from accelbench.client import http1
from accelbench.client.http1 import HTTP1Pool, ReceiveDelays, kernel_stamps_available

# A stamp is on the wall clock, converted with the offset read at the look at the clocks
# nearer its arrival; a wall-clock step between that look and the arrival moves it by
# the step. This development VM's wall clock was at times stepped 0.5 ms every 100 ms
# against the monotonic one (measured; docs/METRICS.md), so times are checked within two
# steps.
STEP_NS = 1_000_000

pytestmark = pytest.mark.skipif(
    sys.platform != "linux",
    reason="Linux only: kernel receive stamps (SO_TIMESTAMPNS) and epoll exist only there; "
    "elsewhere the client uses the loop's time (docs/METRICS.md), run these on Linux",
)


def test_kernel_stamps_are_available_on_this_linux_machine():
    # the CI machine is Linux x86_64: a failure here means the feature silently fell back
    assert kernel_stamps_available()
    # and the compiled read loop was built by the install (else the Python fallback runs)
    assert http1._c_read_ready is not None, "client/_recvstamp.c was not built"


@pytest.fixture(params=["compiled", "python"])
def read_loop(request, monkeypatch):
    """Each behaviour below holds for the compiled read loop and its Python fallback."""
    if request.param == "python":
        monkeypatch.setattr(http1, "_c_read_ready", None)
    return request.param


def test_receive_delays_quantiles_hand_checked():
    d = ReceiveDelays()
    assert d.quantile_ms(0.5) is None
    for _ in range(98):
        d.add(100 * 1024)  # 100 "us" (1.024 us units): bucket [96, 112) us -> upper 112
    for _ in range(2):
        d.add(10_000_000)  # 10 ms = 9,765 units: bucket [8192, 10240) -> capped at the max
    assert d.n == 100
    assert d.quantile_ms(0.5) == pytest.approx(112 * 1024 / 1e6)  # 0.114688 ms
    assert d.quantile_ms(0.98) == pytest.approx(0.114688)
    assert d.quantile_ms(0.99) == pytest.approx(10.0)  # the bucket's top is above the max
    small = ReceiveDelays()
    small.add(2048)  # 2 units: bucket [2, 3)
    small.add(5000)  # 4 units: bucket [4, 5)
    assert small.quantile_ms(0.5) == pytest.approx(3 * 1024 / 1e6)
    assert small.quantile_ms(1.0) == pytest.approx(0.005)  # the upper edge 5,120 > max


class _Sink:
    def __init__(self) -> None:
        self.head: int | None = None
        self.data: list[tuple[bytes, int]] = []
        self.end: int | None = None

    def on_headers(self, status: int, t_ns: int) -> None:
        self.head = t_ns

    def on_data(self, data: bytes, t_ns: int) -> bool:
        self.data.append((data, t_ns))
        return True

    def on_end(self, t_ns: int) -> None:
        self.end = t_ns


def _chunk(b: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(b), b)


class _Server:
    """One connection: after the request, the head at once; once the client's loop is
    blocked (``go``), each chunk after its delay, then ``sent``; the end of the body once
    the client's loop runs again (``unblocked``). Records the monotonic time just before
    and just after each chunk's ``send``. Events, not sleeps, order the two sides, so a
    late wake-up on a busy host cannot move a chunk out of the block."""

    def __init__(self, delays_s: list[float]) -> None:
        self.ls = socket.create_server(("127.0.0.1", 0))
        self.port = self.ls.getsockname()[1]
        self.delays = delays_s
        self.sent: list[tuple[int, int]] = []
        self.go, self.all_sent, self.unblocked = (threading.Event() for _ in range(3))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.ls.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.go.wait(10)
        for i, d in enumerate(self.delays):
            time.sleep(d)
            before = time.monotonic_ns()
            conn.sendall(_chunk(b"data: %d\n\n" % i))
            self.sent.append((before, time.monotonic_ns()))
        self.all_sent.set()
        self.unblocked.wait(10)
        time.sleep(0.05)  # the end comes after the client's loop is unblocked
        conn.sendall(b"0\r\n\r\n")
        time.sleep(0.5)
        conn.close()
        self.ls.close()


def _fetch(server: _Server, block_s: float) -> tuple[_Sink, int, dict | None]:
    """Send the request, wait for the head, then block the event loop while the server
    sends its chunks and for ``block_s`` after the last (so every chunk waits in the
    socket at least that long), then read; returns the sink, when the block ended, and
    the hub's stats."""

    async def go() -> tuple[_Sink, int, dict | None]:
        pool = HTTP1Pool("127.0.0.1", server.port)
        conn, _ = await pool.acquire()
        sink = _Sink()
        fut = conn.start(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", sink)
        for _ in range(1000):  # the head arrives and is read unblocked
            if sink.head is not None:
                break
            await asyncio.sleep(0.01)
        server.go.set()
        # blocking the loop is the point
        assert server.all_sent.wait(10)  # noqa: ASYNC251
        time.sleep(block_s)  # noqa: ASYNC251
        unblocked = time.monotonic_ns()
        server.unblocked.set()
        await asyncio.wait_for(fut, 10)
        stats = pool.receive_stats()
        pool.close()
        return sink, unblocked, stats

    return asyncio.run(go())


def test_a_chunk_keeps_its_arrival_time_while_the_loop_is_blocked(monkeypatch, read_loop):
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    srv = _Server([0.05])
    sink, unblocked, stats = _fetch(srv, block_s=0.3)
    ((data, t),) = sink.data
    before, after = srv.sent[0]
    # stamped by the kernel inside the server's send(), not when the loop got to it
    assert before - STEP_NS <= t <= after + STEP_NS, (t - before) / 1e6
    assert unblocked - t > 200_000_000  # it did wait in the socket
    assert stats is not None
    assert stats["kernel_stamped"] == stats["reads"] >= 2  # the head and the chunk
    assert stats["read_delay_ms_max"] > 200


def test_without_kernel_stamps_the_time_is_the_loops(monkeypatch):
    """The control: the same blocked loop, loop-side times are late by the block."""
    monkeypatch.setenv("ACCELBENCH_KERNEL_STAMPS", "0")
    srv = _Server([0.05])
    sink, unblocked, stats = _fetch(srv, block_s=0.3)
    ((data, t),) = sink.data
    assert t >= unblocked
    assert t - srv.sent[0][1] > 200_000_000
    assert stats is None  # no hub: the asyncio transport path


def test_two_chunks_read_together_share_the_later_arrival(monkeypatch, read_loop):
    """What a kernel stamp cannot tell apart: both chunks waited in the socket and came
    in one read, so both get the later one's time (as docs/METRICS.md says)."""
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    srv = _Server([0.05, 0.05])
    sink, unblocked, _ = _fetch(srv, block_s=0.4)
    times = [t for _, t in sink.data]
    assert len(times) in (1, 2)  # one payload or two, handed over from one read
    second_before, second_after = srv.sent[1]
    assert all(second_before - STEP_NS <= t <= second_after + STEP_NS for t in times)


def test_a_stepped_wall_clock_falls_back_to_the_loop_time(monkeypatch, read_loop):
    """Kernel stamps are on the realtime clock; if it jumps between arrival and read
    (here: the conversion sees it 120 s ahead), the stamp is not trusted."""
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    real = http1._clock_offset
    monkeypatch.setattr(http1, "_clock_offset", lambda: (real()[0] + 120_000_000_000, 1))
    srv = _Server([0.05])
    sink, unblocked, stats = _fetch(srv, block_s=0.2)
    ((_, t),) = sink.data
    assert t >= unblocked
    assert stats is not None and stats["kernel_stamped"] == 0 and stats["reads"] >= 2


def test_a_wall_clock_step_after_the_arrival_does_not_move_it(monkeypatch, read_loop):
    """Every look at the clocks after the chunk was sent sees the wall clock 5 ms ahead
    (a step between the arrival and the read). The arrival is nearer the look before
    the block than the read after it, so it is converted with that look's offset and
    stays at the send; with the read's offset it would be 5 ms early."""
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    real_offset = http1._clock_offset
    srv = _Server([0.05])
    monkeypatch.setattr(
        http1,
        "_clock_offset",
        lambda: (lambda o, u: (o + (5_000_000 if srv.all_sent.is_set() else 0), u))(*real_offset()),
    )
    sink, unblocked, stats = _fetch(srv, block_s=0.3)
    ((data, t),) = sink.data
    before, after = srv.sent[0]
    assert before - STEP_NS <= t <= after + STEP_NS, (t - before) / 1e6
    assert stats is not None and stats["kernel_stamped"] == stats["reads"]


def test_clock_offset_survives_a_preemption_between_the_two_readings(monkeypatch):
    """Hand-built clocks: realtime = monotonic + 7 s. On the first two tries the thread
    loses the CPU for 3 ms between the realtime reading and the next monotonic one;
    reading the two clocks one after the other would be 3 ms off, the narrowest
    bracket is exact."""
    now = [1_000_000_000]
    calls = [0]

    def mono() -> int:
        now[0] += 100  # each reading takes 100 ns
        return now[0]

    def real() -> int:
        now[0] += 100
        t = now[0] + 7_000_000_000
        calls[0] += 1
        if calls[0] <= 2:
            now[0] += 3_000_000  # preempted after this reading
        return t

    monkeypatch.setattr(http1, "_monotonic_ns", mono)
    monkeypatch.setattr(http1, "_realtime_ns", real)
    off, slack = http1.clock_offset_ns()
    assert calls[0] == 3  # the third bracket is 200 ns wide: no further tries
    assert off == 7_000_000_000  # the middle of the bracket is the realtime reading
    assert slack == 101  # half the bracket, rounded up
    assert real() - mono() == 7_000_000_000 - 100  # what the one-after-the-other read gets


def test_the_compiled_clock_offset_agrees_with_the_python_one():
    from accelbench.client._recvstamp import clock_offset

    for _ in range(20):
        (c, cu), (p, pu) = clock_offset(), http1.clock_offset_ns()
        # a wall-clock step between the two readings moves it by that step
        assert abs(c - p) <= cu + pu + STEP_NS and 0 < cu < 1_000_000


def test_a_preempted_clock_reading_does_not_shift_the_stamps(monkeypatch, read_loop):
    """The real read path, with every other realtime reading followed by a 5 ms stall
    (as when the worker loses the CPU): the offset is still exact, so every read is
    stamped and the chunk's time lies inside the server's send(). Converting with an
    offset read without the bracket put stamps up to the stall late, or after the read
    (then unusable)."""
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    real = http1._realtime_ns
    calls = [0]

    def stalling() -> int:
        t = real()
        calls[0] += 1
        if calls[0] % 2:
            time.sleep(0.005)
        return t

    monkeypatch.setattr(http1, "_realtime_ns", stalling)
    monkeypatch.setattr(http1, "_clock_offset", http1.clock_offset_ns)  # the Python one
    srv = _Server([0.05])
    sink, unblocked, stats = _fetch(srv, block_s=0.1)
    ((data, t),) = sink.data
    before, after = srv.sent[0]
    assert calls[0] >= 2
    assert before - STEP_NS <= t <= after + STEP_NS, (t - before) / 1e6
    assert stats is not None and stats["kernel_stamped"] == stats["reads"] >= 2


_FIRST_READ = """
import socket
from accelbench.client import http1
assert http1.keep_kernel_stamping()
ls = socket.create_server(("127.0.0.1", 0))
rx = socket.create_connection(ls.getsockname())
tx, _ = ls.accept()
rx.setsockopt(socket.SOL_SOCKET, 35, 1)
tx.send(b"x")
_, anc, _, _ = rx.recvmsg(16, 64)
print("stamped" if anc else "unstamped")
"""


def test_the_first_read_of_a_fresh_process_is_stamped():
    """Linux switches receive stamping on from a kernel worker when the first socket on
    the host asks for it, so a fresh process's first segments could arrive unstamped
    (without ``keep_kernel_stamping``: 4 of 16 fresh processes here). Each process
    below checks that stamping is on before its first connection's read."""
    import subprocess

    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", _FIRST_READ], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "stamped"


def test_a_large_request_goes_out_whole_through_a_full_socket_buffer(monkeypatch, read_loop):
    """A request larger than the socket buffers (a very long prompt) is sent in parts as
    the server reads it (the transport's write buffer and writer callback)."""
    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    body = bytes(range(256)) * (128 * 1024)  # 32 MiB: more than loopback's buffers hold
    got: list[bytes] = []
    ls = socket.create_server(("127.0.0.1", 0))
    port = ls.getsockname()[1]

    def serve() -> None:
        conn, _ = ls.accept()
        time.sleep(0.3)  # not reading yet: the client's first send cannot take it all
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        need = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        data = bytearray(rest)
        while len(data) < need:
            data += conn.recv(1 << 20)
        got.append(bytes(data))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        time.sleep(0.2)
        conn.close()
        ls.close()

    threading.Thread(target=serve, daemon=True).start()

    async def go() -> tuple[_Sink, int, int]:
        pool = HTTP1Pool("127.0.0.1", port)
        conn, _ = await pool.acquire()
        sink = _Sink()
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        fut = conn.start(head + body, sink)
        waiting = len(conn.transport._wbuf)  # type: ignore[union-attr]
        await asyncio.wait_for(fut, 60)
        pending = len(conn.transport._wbuf)  # type: ignore[union-attr]
        pool.close()
        return sink, waiting, pending

    sink, waiting, pending = asyncio.run(go())
    assert waiting > 0  # part of it had to wait for the server to read
    assert got == [body] and pending == 0
    assert sink.data[0][0] == b"ok" and sink.end is not None


def test_a_server_that_resets_or_closes_ends_the_response(monkeypatch, read_loop):
    """The end of a connection reaches the protocol from either read loop: an orderly
    close mid-body and a reset both fail the request as a disconnect."""
    from accelbench.client.http1 import ConnectionClosed

    monkeypatch.delenv("ACCELBENCH_KERNEL_STAMPS", raising=False)
    for how in ("close", "reset"):
        ls = socket.create_server(("127.0.0.1", 0))
        port = ls.getsockname()[1]

        def serve(ls=ls, how=how) -> None:
            conn, _ = ls.accept()
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(b"a"))
            time.sleep(0.1)
            if how == "reset":  # RST instead of FIN
                conn.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
            conn.close()
            ls.close()

        threading.Thread(target=serve, daemon=True).start()

        async def go(port=port) -> tuple[_Sink, BaseException | None]:
            pool = HTTP1Pool("127.0.0.1", port)
            conn, _ = await pool.acquire()
            sink = _Sink()
            fut = conn.start(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", sink)
            try:
                await asyncio.wait_for(fut, 10)
                exc = None
            except ConnectionClosed as e:
                exc = e
            pool.close()
            return sink, exc

        sink, exc = asyncio.run(go())
        assert sink.data and sink.data[0][0] == b"a"
        assert isinstance(exc, ConnectionClosed) and not exc.before_response, how


def _tcp_pair(small: bool = False) -> tuple[socket.socket, socket.socket]:
    """A connected pair on loopback; ``small``: fixed 4 KiB buffers (no autotuning), so
    the pair fills and stays full."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        a = socket.socket()
        if small:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        a.connect(srv.getsockname())
        b, _ = srv.accept()
        if small:
            b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return a, b


def _relay_once(ep_fd: int, relay: dict, partial: dict) -> tuple[list, int]:
    from accelbench.client._recvstamp import read_ready

    for _ in range(200):  # until the bytes written are readable
        got, n, _, _, relayed = read_ready(ep_fd, 0, 0, 0, 10**9, 0, {}, [0] * 160, relay, partial)
        if n:
            return got, relayed
        time.sleep(0.005)
    raise AssertionError("nothing to read")


def test_compiled_relay_hand_checked():
    """The shadow proxy's compiled relay (client/_recvstamp.c ``relay``), on real sockets:
    a read of whole chunks goes to the caller's socket and each payload is queued as the
    proxy's 'D' frame (length, kind, idx, t, payload); a read of another shape goes to the
    caller too, and back to Python whole (to be parsed) with the count sent, leaving the
    relay; a read the caller's socket cannot take (full) goes back whole with the count
    of what was sent, and nothing of it is queued."""
    import select
    import struct

    up_server, up = _tcp_pair()  # the baseline writes to up_server, the proxy reads up
    caller, to_caller = _tcp_pair(small=True)  # the proxy writes to_caller, the caller reads
    up.setblocking(False)
    to_caller.setblocking(False)
    ep = select.epoll()
    ep.register(up.fileno(), select.EPOLLIN)
    out = bytearray()
    fd = up.fileno()
    relay = {fd: (to_caller.fileno(), out, 7)}
    partial: dict[int, int] = {}
    ev = b'data: {"choices":[{"text":" a"}]}\n\n'
    framed = b"%x\r\n%b\r\n" % (len(ev), ev)
    try:
        t0 = time.monotonic_ns()
        up_server.sendall(framed * 3)
        time.sleep(0.05)  # all three in one read
        got, relayed = _relay_once(ep.fileno(), relay, partial)
        assert got == [] and relayed == 1 and fd in relay
        assert caller.recv(4096) == framed * 3
        assert len(out) == 3 * (4 + 1 + 16 + len(ev))
        for k in range(3):
            f = out[k * (21 + len(ev)) : (k + 1) * (21 + len(ev))]
            size, kind, idx, t = struct.unpack("!IcQQ", f[:21])
            assert (size, kind, idx, f[21:]) == (17 + len(ev), b"D", 7, ev)
            assert t0 <= t <= time.monotonic_ns()
        # the last chunk is not a content chunk: sent, and back to Python whole to be
        # parsed (its 5 bytes sent already), out of the relay
        up_server.sendall(b"0\r\n\r\n")
        got, relayed = _relay_once(ep.fileno(), relay, partial)
        assert [g[:2] for g in got] == [(fd, b"0\r\n\r\n")] and relayed == 0 and relay == {}
        assert len(out) == 3 * (21 + len(ev)) and partial.pop(fd) == 5
        assert caller.recv(4096) == b"0\r\n\r\n"
        # the caller's socket full: fill it, then offer a read of whole chunks
        for _ in range(100):  # until the caller's receive side is full too
            sent = 0
            with contextlib.suppress(BlockingIOError):
                while True:
                    sent += to_caller.send(b"x" * 65536)
            if sent == 0:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the caller's socket never filled")
        relay[fd] = (to_caller.fileno(), out, 7)
        before = len(out)
        up_server.sendall(framed * 50)
        time.sleep(0.05)
        got, relayed = _relay_once(ep.fileno(), relay, partial)
        assert relayed == 0 and relay == {} and len(out) == before  # nothing queued
        data = b"".join(g[1] for g in got)
        assert data.startswith(framed) and 0 <= partial[fd] < len(data)
    finally:
        ep.close()
        for s in (up_server, up, caller, to_caller):
            s.close()
