"""Worker processes: each runs a LoadWorker on its own event loop (uvloop where
available) and streams record batches to the parent through a queue.

The parent owns signals: workers ignore SIGINT and stop when the shared stop event is
set, cancelling in-flight requests (recorded as ``interrupted``) and flushing what they have.
Workers never outlive the parent: on Linux the kernel kills them when it dies
(PR_SET_PDEATHSIG), and everywhere they check that their parent is still theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from accelbench.eventloop import install_uvloop
from accelbench.runner.loadgen import LoadWorker, WorkerSpec

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> Callable[[], bool]:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), and return
    a check that says whether the parent is still alive (any OS; a dead parent's
    children are re-parented, so the parent pid changes). If the parent already died
    before this ran, exit now."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def parent_alive() -> bool:
        return os.getppid() == parent_pid

    if not parent_alive():
        os._exit(1)
    return parent_alive


def _worker_main(
    spec: WorkerSpec,
    out: Any,
    stop: Any,
    go: Any,
    barrier: Any,
    counters: dict[str, Any],
    parent_pid: int,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent_alive = die_with_parent(parent_pid)
    install_uvloop()
    try:
        out.put(("ready", spec.worker, None))
        while not go.wait(0.2):
            if not parent_alive():
                os._exit(1)

        def emit(rows: list[dict]) -> None:
            out.put(("records", spec.worker, rows))

        def phase_barrier() -> None:
            if barrier is not None:
                with contextlib.suppress(Exception):  # broken barrier: stop waiting
                    barrier.wait(timeout=3600)

        worker = LoadWorker(spec, emit, stop.is_set, phase_barrier, counters, parent_alive)
        stats = asyncio.run(worker.run())
        out.put(("stats", spec.worker, stats))
    except BaseException as exc:  # noqa: BLE001 - report any crash to the parent
        out.put(("crash", spec.worker, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class WorkerPool:
    """Starts N worker processes; ``events()`` yields their messages until all are done."""

    def __init__(self, specs: list[WorkerSpec]) -> None:
        ctx = mp.get_context("spawn")  # no fork: the parent has threads (progress, telemetry)
        self.out = ctx.Queue()
        self.stop_event = ctx.Event()
        self.go = ctx.Event()
        n_phases = max(len(s.phases) for s in specs)
        self.barrier = ctx.Barrier(len(specs)) if len(specs) > 1 and n_phases > 1 else None
        # closed loop over several workers: one shared next-request counter per phase
        shared = len(specs) > 1 and all(p.offsets is None for s in specs for p in s.phases)
        self.counters = {p.name: ctx.Value("q", 0) for p in specs[0].phases} if shared else {}
        self.procs = [
            ctx.Process(
                target=_worker_main,
                args=(
                    s,
                    self.out,
                    self.stop_event,
                    self.go,
                    self.barrier,
                    self.counters,
                    os.getpid(),
                ),  # fmt: skip
                daemon=True,
                name=f"accelbench-worker-{s.worker}",
            )
            for s in specs
        ]

    def start(self, ready_timeout: float = 60.0) -> None:
        for p in self.procs:
            p.start()
        ready = 0
        while ready < len(self.procs):
            try:
                kind, w, payload = self.out.get(timeout=ready_timeout)
            except queue_mod.Empty:
                self.kill()
                raise RuntimeError("load workers did not start in time") from None
            if kind == "ready":
                ready += 1
            elif kind == "crash":
                self.kill()
                raise RuntimeError(f"load worker {w} failed to start: {payload}")

    def release(self) -> None:
        self.go.set()

    def stop(self) -> None:
        self.stop_event.set()
        if self.barrier is not None:
            with contextlib.suppress(Exception):
                self.barrier.abort()

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()

    def events(self, poll_s: float = 0.1):
        """Yield (kind, worker, payload) messages, and ("tick", -1, None) while idle."""
        done = 0
        n = len(self.procs)
        while done < n:
            try:
                msg = self.out.get(timeout=poll_s)
            except queue_mod.Empty:
                if not any(p.is_alive() for p in self.procs):
                    # drain what is left, then stop
                    try:
                        while True:
                            yield self.out.get_nowait()
                    except queue_mod.Empty:
                        return
                yield ("tick", -1, None)
                continue
            if msg[0] in ("stats", "crash"):
                done += 1
            yield msg
        for p in self.procs:
            p.join(timeout=5)
