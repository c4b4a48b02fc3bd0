"""Starting ``python -m accelbench ...`` as a test's child and checking that nothing it
started outlives it (tests/test_lifetime.py, tests/test_vllm_engine.py; docs/PROCESSES.md).

While :func:`subreaper` is on, orphans come to the test process instead of init, so a
zombie left for the test means accelbench exited without reaping it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

_PR_SET_CHILD_SUBREAPER = 36
STOPS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "crash")
# a crash: an exception raised in accelbench's main thread at whatever point it is
# (the wrapper turns SIGUSR1 into one; in a running event loop, which would only log it,
# the loop is stopped under the server instead), which the CLI reports as an internal
# error (70)
# SIGUSR2: every thread's stack to stderr (faulthandler, in C: works while Python is stuck),
# asked for by the test when accelbench does not exit in time
_CRASHABLE = textwrap.dedent(
    """
    import asyncio, faulthandler, signal, sys
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    def crash(signum, frame):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("injected crash") from None
        loop.stop()
    signal.signal(signal.SIGUSR1, crash)
    if len(sys.argv) > 2 and sys.argv[1] == "--hold-after":  # the test's, not accelbench's
        import time, typer
        hold, echo = sys.argv[2], typer.echo
        def held_echo(message=None, *a, **k):  # as if descheduled right after the write
            echo(message, *a, **k)
            if hold in str(message):
                time.sleep(1.0)
        typer.echo = held_echo
        del sys.argv[1:3]
    sys.argv[0] = "accelbench"
    from accelbench.cli.main import main
    main()
    """
)


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class Accelbench:
    """``python -m accelbench ARGS`` in its own session (the test is its terminal).
    ``hold_after``: accelbench sleeps 1 s right after it writes a line (``typer.echo``)
    containing that text, as a busy host may deschedule it there."""

    def __init__(self, args: list[str], hold_after: str | None = None) -> None:
        hold = ["--hold-after", hold_after] if hold_after else []
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CRASHABLE, *hold, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.seen: dict[int, psutil.Process] = {}
        self.parent: dict[int, int] = {}  # pid -> its parent when first seen
        self.cmd: dict[int, str] = {}  # pid -> its command line when first seen
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def descendants(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                if p.pid not in self.seen:
                    self.seen[p.pid] = p
                    with contextlib.suppress(psutil.Error):
                        self.parent[p.pid] = p.ppid()
                        self.cmd[p.pid] = " ".join(p.cmdline())[:80]
        return list(self.seen.values())

    def wait_for(self, what: str, ok: Callable[[list[psutil.Process]], bool], t: float) -> None:
        deadline = time.monotonic() + t
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"accelbench exited before {what}: {self.stderr()}")
            if ok(self.descendants()):
                return
            time.sleep(0.05)
        pytest.fail(f"no {what} after {t} s; descendants: {self._names()}")

    def _names(self) -> list[str]:
        out = []
        for p in self.seen.values():
            with contextlib.suppress(psutil.Error):
                out.append(f"{p.pid} {' '.join(p.cmdline())[:80]}")
        return out

    def stderr(self) -> str:
        time.sleep(0.2)  # the reader's last lines
        return "".join(self.lines)[-2000:]

    def stop(self, how: str) -> int:
        self.descendants()  # the last look before it stops
        if how == "SIGINT":  # Ctrl-C: the terminal signals the whole foreground group
            os.killpg(self.proc.pid, signal.SIGINT)
        elif how == "crash":
            self.proc.send_signal(signal.SIGUSR1)
        else:
            self.proc.send_signal(getattr(signal, how))
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"accelbench did not exit within 60 s of {how}: {self.dump_and_kill()}")

    def dump_and_kill(self) -> str:
        """Its threads' stacks (SIGUSR2: faulthandler) and descendants, then SIGKILL: what a
        hang was waiting for."""
        kids = self._names()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGUSR2)
        time.sleep(1.0)
        self.proc.kill()
        self.proc.wait()
        time.sleep(0.2)
        return "".join(self.lines)[-8000:] + f"\ndescendants seen: {kids}"

    def assert_none_left(self, how: str, timeout: float = 10.0) -> None:
        """Every recorded descendant gone: running ones within ``timeout`` (a SIGKILLed
        parent's children die by the parent-death signal or their watchdog), and a
        zombie only where accelbench was SIGKILLed (then the test reaps it)."""
        deadline = time.monotonic() + timeout
        left: list[str] = []
        for pid, p in self.seen.items():
            while True:
                try:
                    zombie = p.status() == psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    break
                # A zombie handed to the test: its parent exited without reaping it. That
                # is accelbench's fault only where accelbench was that parent; a
                # grandchild whose own parent (Ray's raylet, say) ended first is reaped by
                # whoever adopts it, and it has ended all the same.
                if zombie and self.parent.get(pid) == self.proc.pid:
                    assert how == "SIGKILL", (
                        f"{pid} {self.cmd.get(pid, '?')} left unreaped after {how}"
                    )
                if zombie:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)  # ours as subreaper
                    break
                if time.monotonic() > deadline:
                    left.append(f"{pid} {' '.join(p.cmdline())[:80]}")
                    with contextlib.suppress(psutil.Error):
                        p.kill()
                    break
                time.sleep(0.05)
        assert not left, f"still running {timeout} s after {how}: {left}"


def port_free(port: int, timeout: float = 5.0) -> bool:
    """A server can listen on ``port`` again (SO_REUSEADDR as servers do: connections in
    TIME_WAIT do not count, a listener that survived does)."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
        time.sleep(0.05)
