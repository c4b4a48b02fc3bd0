"""Waking an event loop at scheduled arrival times, to a fraction of a millisecond.

Why a thread: the loop's own timers have millisecond resolution (uvloop), and spinning
the loop for the last millisecond of every wait costs ~10 % of a core at 100 arrivals/s
and, on a busy host, makes the scheduler treat the process as a CPU hog: it is
preempted more often, just when it should send (measured: p90 lateness 1.5-1.8 ms
spinning vs 0.3-0.7 ms with a timer thread on the loaded 2-core VM). A thread that
sleeps in the kernel (high-resolution timer) until just before the time, then wakes the
loop (``call_soon_threadsafe``), is a waking sleeper the scheduler favours, and costs a
tenth of the CPU. The last ``lead`` (the measured wake-up cost) is waited out in the
loop's callback, so arrivals are neither early nor late by the wake-up itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable

_now = time.monotonic_ns
# a GIL hand-over from a busy loop thread to the timer thread takes up to the switch
# interval (5 ms by default); while pacing, the timer thread waits at most this
_SWITCH_S = 0.0005


class Pacer:
    """``await pacer.wait_until(t_ns)`` for one waiter at a time (an arrival schedule).
    Use as an async context manager (starts and stops the timer thread)."""

    def __init__(self, lead_ns: int = 200_000) -> None:
        self.lead_ns = lead_ns
        self._cv = threading.Condition()
        self._job: tuple[int, asyncio.Future[bool]] | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._switch = sys.getswitchinterval()

    async def __aenter__(self) -> Pacer:
        self._loop = asyncio.get_running_loop()
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, _SWITCH_S))
        self._thread = threading.Thread(target=self._run, name="accelbench-pacer", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            sys.setswitchinterval(self._switch)

    async def wait_until(self, t_ns: int, stopped: Callable[[], bool] | None = None) -> bool:
        """Return at ``t_ns`` (True), or False once ``stopped()`` (checked every 20 ms)."""
        assert self._loop is not None, "use the Pacer as an async context manager"
        while True:
            if stopped is not None and stopped():
                return False
            left = t_ns - _now()
            if left <= 0:
                return True
            step = min(t_ns, _now() + 20_000_000)
            fut: asyncio.Future[bool] = self._loop.create_future()
            with self._cv:
                self._job = (step, fut)
                self._cv.notify()
            try:
                await fut
            finally:
                with self._cv:
                    if self._job is not None and self._job[1] is fut:
                        self._job = None
            if step == t_ns:
                return not (stopped is not None and stopped())

    def _fire(self, due: int, fut: asyncio.Future[bool]) -> None:
        # the last stretch (at most the lead): wait it out here, not in another wake-up
        end = min(due, _now() + self.lead_ns)
        while _now() < end:
            pass
        if not fut.done():
            fut.set_result(True)

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        cv = self._cv
        while True:
            with cv:
                while self._job is None and not self._closed:
                    cv.wait()
                if self._closed:
                    return
                assert self._job is not None
                due, fut = self._job
                wake = due - self.lead_ns
                left = wake - _now()
                if left > 0:
                    cv.wait(left / 1e9)  # a new job or close wakes it early
                    if self._closed:
                        return
                    if self._job is None or self._job[1] is not fut or _now() < wake:
                        continue
                self._job = None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._fire, due, fut)
