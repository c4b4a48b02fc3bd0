"""Worker processes: each runs a LoadWorker on its own event loop (uvloop where
available) and streams record batches to the parent through a queue.

The parent owns Ctrl-C: workers ignore SIGINT (it reaches the whole foreground group)
and stop when the shared stop event is set, cancelling in-flight requests (recorded as
``interrupted``) and flushing what they have. A SIGTERM sent to a worker itself (a
container runtime or systemd ends every process of the group) stops it the same way; a
second one ends it at once. Workers never outlive the parent (``lifetime.die_with_parent``:
on Linux the kernel kills them when it dies, and a watchdog thread exits within 0.2 s
once their parent is no longer theirs).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import time
import traceback
from collections.abc import Mapping
from typing import Any

from accelbench.eventloop import install_uvloop
from accelbench.lifetime import die_with_parent, reap_resource_tracker_at_exit
from accelbench.runner.loadgen import LoadWorker, SharedCounter, WorkerSpec

# The common start instant is this far after the release (the workers are ready and
# waiting; this covers a loaded host waking them), and a later phase this far after the
# last worker reached its barrier. A worker that wakes later records by how much.
START_MARGIN_NS = 250_000_000
PHASE_MARGIN_NS = 50_000_000


def _worker_main(
    spec: WorkerSpec,
    out: Any,
    stop: Any,
    go: Any,
    barrier: Any,
    counters: Mapping[str, SharedCounter],
    parent_pid: int,
    start_at: Any,
    arrivals: Any,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_alive = die_with_parent(parent_pid)
    terminated = {"n": 0}

    def on_term(signum: int, frame: Any) -> None:
        terminated["n"] += 1
        if terminated["n"] >= 2:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    install_uvloop()
    try:
        out.put(("ready", spec.worker, None))
        while not go.wait(0.2):
            if terminated["n"]:
                return

        def emit(rows: list[dict]) -> None:
            out.put(("records", spec.worker, rows))

        def phase_barrier() -> int | None:
            """Meet the other workers; all then start the phase at one instant: the
            last arrival plus a margin (every worker reads the same arrivals once the
            barrier has let it through, so all compute the same instant)."""
            if barrier is None:
                return None
            arrivals[spec.worker] = time.monotonic_ns()
            try:
                barrier.wait(timeout=3600)
            except Exception:  # noqa: BLE001 - broken barrier (a stop): stop waiting
                return None
            return max(arrivals[:]) + PHASE_MARGIN_NS

        def should_stop() -> bool:
            return bool(terminated["n"]) or stop.is_set()

        worker = LoadWorker(
            spec, emit, should_stop, phase_barrier, counters, parent_alive, start_at.value
        )
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
        # one start instant on the host's monotonic clock (one clock for all processes)
        self.start_at = ctx.Value("q", 0, lock=False)
        self.arrivals = ctx.Array("q", max(s.worker for s in specs) + 1, lock=False)
        self.start_ns: int | None = None
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
                    self.start_at,
                    self.arrivals,
                ),  # fmt: skip
                daemon=True,
                name=f"accelbench-worker-{s.worker}",
            )
            for s in specs
        ]

    def start(self, ready_timeout: float = 60.0) -> None:
        """Start the workers and wait until each is ready. A stop (``stop``, and a second
        one's ``kill``, from the parent's signal handling) while they start ends the wait
        without an error: a worker killed by it did not fail to start."""
        if self.stop_event.is_set():  # stopped before: start none
            return
        reap_resource_tracker_at_exit()
        # SIGINT blocked while forking: the workers inherit the blocked mask, so a Ctrl-C
        # (sent to the whole group) never reaches one still importing; the parent gets it
        # right after
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for p in self.procs:
                p.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        ready = 0
        deadline = time.monotonic() + ready_timeout
        while ready < len(self.procs):
            if self.stop_event.is_set():  # stopped while starting: wait for nobody
                return
            try:
                kind, w, payload = self.out.get(timeout=0.1)
            except queue_mod.Empty:
                if self.stop_event.is_set():  # stopped meanwhile (killed by a second stop)
                    return
                dead = [p.name for p in self.procs if p.exitcode is not None]
                if dead or time.monotonic() > deadline:
                    self.kill()
                    why = f"{', '.join(dead)} exited" if dead else "they did not start in time"
                    raise RuntimeError(f"load workers failed to start: {why}") from None
                continue
            if kind == "ready":
                ready += 1
            elif kind == "crash":
                self.kill()
                raise RuntimeError(f"load worker {w} failed to start: {payload}")

    def release(self) -> None:
        """Let the workers go: all start at one instant, START_MARGIN_NS from now."""
        self.start_ns = time.monotonic_ns() + START_MARGIN_NS
        self.start_at.value = self.start_ns
        self.go.set()

    def stop(self) -> None:
        self.stop_event.set()
        if self.barrier is not None:
            with contextlib.suppress(Exception):
                self.barrier.abort()

    def kill(self) -> None:
        """SIGKILL the workers still running and reap every one (no zombie)."""
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            if p.pid is not None:
                p.join(timeout=5)

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
