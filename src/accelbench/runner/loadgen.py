"""The load engine of one worker process: closed loop (fixed concurrency) or open loop
(scheduled arrivals, optional concurrency cap), phase by phase (warm-up, measured).

Runs in its own process (see workers.py) with its own event loop. Records go to the
parent in batches; nothing here touches the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from accelbench.client.openai import build_body, flatten_chat
from accelbench.client.session import OpenAIClient
from accelbench.client.sse import MAX_EVENT_BYTES
from accelbench.metrics.records import ErrorKind, RequestRecord, record_row
from accelbench.metrics.stats import counted_order_stat
from accelbench.metrics.summary import PhaseStart, ReceiveStats, WorkerStats
from accelbench.urls import Endpoint
from accelbench.workload.plan import PlannedRequest

_now = time.monotonic_ns

# Longest uninterrupted sleep while waiting for an arrival (a stop is seen after it).
_WAIT_SLICE_S = 0.02
# Arrival times beyond this (about 146 years) never come.
_FAR_NS = 2**62

# Consecutive failed connection attempts after which a worker stops: the server is gone.
LOST_SERVER_AFTER = 32


@dataclass
class PhaseSpec:
    name: str  # "warmup" | "measured"
    items: list[tuple[int, PlannedRequest]]  # (global index, request)
    offsets: list[float] | None = None  # open loop: seconds after the phase start
    concurrency: int | None = None  # closed loop slots for this worker
    max_concurrency: int | None = None  # open loop cap for this worker
    duration_s: float | None = None  # stop issuing after this; the plan is cycled...
    cycle: bool = True  # ...unless False (-n and -d: stop at whichever comes first)
    drain_timeout_s: float | None = None
    # --sessions / a trace with sessions: the turns of each session of this worker, in
    # turn order; ``offsets`` and the closed loop's counter then count sessions
    sessions: list[list[tuple[int, PlannedRequest]]] | None = None


@dataclass
class WorkerSpec:
    worker: int
    n_workers: int
    base_url: Endpoint  # pickled to the worker processes, its auth with it (never a file)
    model: str
    endpoint: str
    stream: bool
    api_key: str | None
    timeout_s: float
    ignore_eos: bool
    extra_body: dict[str, Any]
    save_text: bool
    run_tag: str
    phases: list[PhaseSpec] = field(default_factory=list)
    transport: str = "auto"
    max_event_bytes: int = MAX_EVENT_BYTES  # larger SSE events fail as malformed_stream


class SharedCounter(Protocol):
    """A counter the workers of a closed loop share (``multiprocessing.Value("q")``)."""

    value: int

    def get_lock(self) -> contextlib.AbstractContextManager[Any]: ...


class LoopLagMonitor:
    """How late the event loop wakes up: if it lags, every timestamp taken by it is late."""

    def __init__(self, period_s: float = 0.02) -> None:
        self.period = period_s
        # lag (ms, rounded to 10 us) -> count: bounded memory over a days-long soak (a
        # list of every sample grew ~5 MiB per hour)
        self.lags_ms: Counter[float] = Counter()
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        period_ns = int(self.period * 1e9)
        while True:
            t0 = _now()
            await asyncio.sleep(self.period)
            self.lags_ms[round(max(0.0, (_now() - t0 - period_ns) / 1e6), 2)] += 1

    def order_stat(self, q: float) -> float:
        """The lag at rank int(q x n) of the sorted samples (0 when there are none)."""
        return counted_order_stat(self.lags_ms, q)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        if self._task:
            self._task.cancel()


class LoadWorker:
    def __init__(
        self,
        spec: WorkerSpec,
        emit: Callable[[list[dict]], None],
        should_stop: Callable[[], bool],
        phase_barrier: Callable[[], Any] | None = None,
        counters: Mapping[str, SharedCounter] | None = None,
        parent_alive: Callable[[], bool] | None = None,
        start_ns: int | None = None,
    ) -> None:
        self.spec = spec
        # the first phase's start instant (this host's monotonic clock), shared by every
        # worker of the run; later phases get theirs from ``phase_barrier``'s answer
        self.start_ns = start_ns
        self.phase_starts: list[PhaseStart] = []
        self.parent_alive = parent_alive
        self.emit = emit
        self.should_stop = should_stop
        self.phase_barrier = phase_barrier
        self.counters = counters or {}  # phase name -> multiprocessing.Value("q")
        self.client = OpenAIClient(
            spec.base_url,
            endpoint=spec.endpoint,
            stream=spec.stream,
            api_key=spec.api_key,
            timeout_s=spec.timeout_s,
            transport=spec.transport,
            max_event_bytes=spec.max_event_bytes,
        )
        self._batch: list[dict] = []
        self._inflight: set[asyncio.Task] = set()
        self._stopping = False
        self._lost = 0  # consecutive failed connection attempts
        self.sent = 0
        self.lag = LoopLagMonitor()

    # -- per request --------------------------------------------------------------
    async def _one(
        self,
        idx: int,
        req: PlannedRequest,
        warmup: bool,
        t_sched: int,
        prompt: str | list[dict[str, Any]] | None = None,
        session_turns: int | None = None,
    ) -> RequestRecord:
        """Send one request (``prompt``: a session turn's history and message, else the
        plan's prompt; ``session_turns``: the turns its session was planned with) and
        journal its record; returns the record (its ``output_text`` is the reply,
        whatever ``save_text`` keeps in the journal)."""
        spec = self.spec
        rec = RequestRecord(
            idx=idx,
            worker=spec.worker,
            warmup=warmup,
            request_id=f"{spec.run_tag}-{idx}",
            t_sched=t_sched,
            max_tokens=req.max_tokens,
            isl_planned=req.isl_planned,
        )
        if req.session is not None or req.prefix_group is not None or req.blocks is not None:
            rec.session, rec.turn = req.session, req.turn if req.session is not None else None
            rec.session_turns = session_turns if req.session is not None else None
            rec.turn_tokens = req.turn_tokens
            rec.prefix_group = req.prefix_group
            rec.prefix_tokens = req.prefix_tokens if req.prefix_group is not None else None
            rec.blocks = list(req.blocks) if req.blocks is not None else None
        body = build_body(
            endpoint=spec.endpoint,
            model=spec.model,
            prompt=req.prompt if prompt is None else prompt,
            max_tokens=req.max_tokens,
            stream=spec.stream,
            ignore_eos=spec.ignore_eos,
            extra=spec.extra_body,
        )
        self.sent += 1
        reply = None
        try:
            await self.client.send(rec, body)
        finally:
            if rec.t_send == 0:
                rec.t_send = _now()
            reply = rec.output_text
            if not (spec.save_text or (rec.ok and rec.osl_server is None)):
                rec.output_text = None  # kept only where it is needed (OSL fallback)
            if rec.error_kind == ErrorKind.CONNECT_ERROR:
                self._lost += 1
                if self._lost >= LOST_SERVER_AFTER:
                    self._stopping = True  # the server is gone: stop issuing requests
            elif rec.error_kind != ErrorKind.INTERRUPTED:
                self._lost = 0
            self._batch.append(record_row(rec))
            if len(self._batch) >= 64:
                self.flush()
        rec.output_text = reply
        return rec

    def flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self.emit(batch)

    # -- phases -------------------------------------------------------------------
    async def run(self) -> WorkerStats:
        self.lag.start()
        flusher = asyncio.ensure_future(self._flusher())
        t0 = _now()
        cpu0 = time.process_time()
        times0 = os.times()
        try:
            for i, phase in enumerate(self.spec.phases):
                at = self.start_ns if i == 0 else None
                if self.phase_barrier is not None and at is None:
                    got = await asyncio.get_running_loop().run_in_executor(None, self.phase_barrier)
                    at = got if isinstance(got, int) else None
                if self._stopping or self.should_stop():
                    break
                start = await self._begin(phase.name, at)
                if start is None:
                    break
                if phase.sessions is not None:
                    await self._session_loop(phase, start)
                elif phase.offsets is not None:
                    await self._open_loop(phase, start)
                else:
                    await self._closed_loop(phase)
                await self._drain(phase.drain_timeout_s)
        finally:
            self.lag.stop()
            flusher.cancel()
            await self._cancel_inflight()
            self.flush()
            await self.client.close()
        wall = (_now() - t0) / 1e9
        cpu = time.process_time() - cpu0
        times1 = os.times()
        p99 = self.lag.order_stat(0.99)
        return WorkerStats(
            worker=self.spec.worker,
            wall_s=wall,
            cpu_s=cpu,
            # user: the client's own work; system: the kernel's (reads, wake-ups), which
            # depends on how the OS batched arrivals as much as on the client
            user_s=times1.user - times0.user,
            sys_s=times1.system - times0.system,
            sent=self.sent,
            loop_lag_ms_p99=p99,
            loop_lag_ms_max=max(self.lag.lags_ms, default=0.0),
            receive=cast(ReceiveStats | None, self.client.receive_stats()),
            phases=self.phase_starts,
            nice=os.getpriority(os.PRIO_PROCESS, 0),
        )

    async def _begin(self, name: str, at: int | None) -> int | None:
        """Wait for the phase's common start instant ``at`` (None: start now) and record
        how late this worker's loop woke for it (the residual every worker's schedule
        carries: docs/RESULTS.md). Returns the instant the phase's schedule counts from,
        or None when the run was stopped meanwhile."""
        if at is None:
            at = _now()
        elif (at - _now()) > 2_000_000 and not await self._wait_until(at - 1_000_000):
            return None
        while _now() < at:  # the last millisecond: finer than the timer
            await asyncio.sleep(0)
        self.phase_starts.append(PhaseStart(name=name, start_ns=at, late_ms=(_now() - at) / 1e6))
        return at

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            if self.parent_alive is not None and not self.parent_alive():
                os._exit(1)  # the parent is gone: nobody records what this would send
            self.flush()
            if self.should_stop() and not self._stopping:
                self._stopping = True
                await self._cancel_inflight()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return task

    async def _cancel_inflight(self) -> None:
        tasks = list(self._inflight)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, timeout: float | None) -> None:
        tasks = list(self._inflight)
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            await self._cancel_inflight()

    def _items(self, phase: PhaseSpec, last: asyncio.Event | None = None):
        """Requests for this worker. Closed loop over several workers: every worker holds
        the whole phase and takes the next index from a counter shared by all of them,
        so none runs dry while another still has a queue. ``last`` is set as the plan's
        last request is taken (never while a duration cycles the plan)."""
        counter = self.counters.get(phase.name) if phase.offsets is None else None
        n = len(phase.items)
        cycling = bool(phase.duration_s and phase.cycle)
        if counter is not None and n:
            base = phase.items[0][0]
            while True:
                with counter.get_lock():
                    i = counter.value
                    counter.value = i + 1
                if i >= n and not cycling:
                    return
                if i == n - 1 and not cycling and last is not None:
                    last.set()
                yield base + i, phase.items[i % n][1]
        if not cycling:
            for k, item in enumerate(phase.items):
                if k == n - 1 and last is not None:
                    last.set()
                yield item
            return
        # duration mode: cycle the plan; indices stay unique across workers
        base = phase.items[0][0] if phase.items else 0
        for cycle in itertools.count():
            for i in range(n):
                yield base + (cycle * n + i) * self.spec.n_workers, phase.items[i][1]

    async def _wait_until(self, t_ns: int) -> bool:
        """Sleep until ``t_ns`` in slices of at most 20 ms; False as soon as the run is
        stopped (noticed within the flusher's 50 ms), so a stop never waits for the next
        arrival, however far away. Short waits cost one timer, as before."""
        while not self._stopping:
            delay = (t_ns - _now()) / 1e9
            if delay <= 0:
                return True
            await asyncio.sleep(min(delay, _WAIT_SLICE_S))
        return False

    async def _until_stop(
        self, slots: list[asyncio.Task], issued: Callable[[], bool], deadline: int | None
    ) -> None:
        """Wait for a closed loop's stop: every slot done, the plan's last request taken
        (``issued()``, by this worker or another: looked at every 50 ms, as a stop
        signal is) or the deadline. The requests then in flight stay in ``_inflight``
        for :meth:`_drain` (``--drain-timeout``; awaiting the slots here waited for
        every request whatever the timeout). No slot issues a request after the stop."""
        pending: set[asyncio.Task] = set(slots)
        while pending and not issued():
            left = 0.05 if deadline is None else min(0.05, max(0.0, (deadline - _now()) / 1e9))
            _, pending = await asyncio.wait(pending, timeout=left)
            if deadline is not None and _now() >= deadline:
                return

    def _taken(self, phase: PhaseSpec, n: int, last: asyncio.Event) -> Callable[[], bool]:
        """Whether the plan's last entry (of ``n``) is taken: by this worker (``last``,
        set by :meth:`_items` / :meth:`_sessions`) or, with the counter closed-loop
        workers share, by any; never while a duration cycles the plan."""
        counter = self.counters.get(phase.name) if phase.offsets is None else None
        cycling = bool(phase.duration_s and phase.cycle and phase.sessions is None)
        if cycling:
            return lambda: False
        if counter is None:
            return last.is_set
        return lambda: last.is_set() or counter.value >= n

    async def _closed_loop(self, phase: PhaseSpec) -> None:
        warm = phase.name == "warmup"
        issued = asyncio.Event()  # the plan's last request is going out
        it = iter(self._items(phase, issued))
        deadline = _now() + int(phase.duration_s * 1e9) if phase.duration_s else None

        async def slot() -> None:
            while not self._stopping:
                if deadline is not None and _now() >= deadline:
                    return
                nxt = next(it, None)
                if nxt is None:
                    return
                idx, req = nxt
                await self._one(idx, req, warm, _now())

        n = max(1, phase.concurrency or 1)
        slots = [self._spawn(slot()) for _ in range(n)]
        await self._until_stop(slots, self._taken(phase, len(phase.items), issued), deadline)

    async def _open_loop(self, phase: PhaseSpec, start: int) -> None:
        warm = phase.name == "warmup"
        assert phase.offsets is not None
        deadline = start + int(phase.duration_s * 1e9) if phase.duration_s else None
        sem = asyncio.Semaphore(phase.max_concurrency) if phase.max_concurrency else None
        loop = asyncio.get_running_loop()

        async def capped(idx: int, req: PlannedRequest, t_sched: int) -> None:
            assert sem is not None
            async with sem:
                await self._one(idx, req, warm, t_sched)

        for (idx, req), off in zip(phase.items, phase.offsets, strict=True):
            if self._stopping:
                break
            t_sched = start + int(min(off * 1e9, _FAR_NS))  # a rate of 1e-300: "never"
            if deadline is not None and t_sched >= deadline:
                break
            delay = (t_sched - _now()) / 1e9
            if delay > 0:
                # wait most of the way (a stop ends the wait), then yield until due
                # (finer than the timer)
                if delay > 0.002 and not await self._wait_until(t_sched - 1_000_000):
                    break
                while _now() < t_sched:
                    await asyncio.sleep(0)
            if sem is not None:
                self._spawn(capped(idx, req, t_sched))
            else:
                self._spawn(self._one(idx, req, warm, t_sched))
        del loop

    # -- sessions -----------------------------------------------------------------
    def _sessions(self, phase: PhaseSpec, last: asyncio.Event | None = None):
        """This worker's sessions, in order; over several closed-loop workers the next
        session's index comes from the counter they share. ``last`` is set as the last
        session is taken."""
        sessions = phase.sessions or []
        counter = self.counters.get(phase.name) if phase.offsets is None else None
        n = len(sessions)
        for k in itertools.count():
            if counter is None:
                i = k
            else:
                with counter.get_lock():
                    i = counter.value
                    counter.value = i + 1
            if i >= n:
                return
            if i == n - 1 and last is not None:
                last.set()
            yield sessions[i]

    async def _session_loop(self, phase: PhaseSpec, start: int) -> None:
        """Closed loop: ``concurrency`` slots, each running one session at a time, turn
        after turn. Open loop: sessions start at their offsets (at most
        ``max_concurrency`` sessions at once), each running its turns in order."""
        warm = phase.name == "warmup"
        deadline = start + int(phase.duration_s * 1e9) if phase.duration_s else None
        if phase.offsets is None:
            issued = asyncio.Event()  # the last session is starting
            it = iter(self._sessions(phase, issued))

            async def slot() -> None:
                while not self._stopping:
                    if deadline is not None and _now() >= deadline:
                        return
                    turns = next(it, None)
                    if turns is None:
                        return
                    await self._session(turns, warm, _now(), start)

            n = max(1, phase.concurrency or 1)
            taken = self._taken(phase, len(phase.sessions or []), issued)
            await self._until_stop([self._spawn(slot()) for _ in range(n)], taken, deadline)
            return
        sem = asyncio.Semaphore(phase.max_concurrency) if phase.max_concurrency else None

        async def capped(turns: list[tuple[int, PlannedRequest]], t_sched: int) -> None:
            assert sem is not None
            async with sem:
                await self._session(turns, warm, t_sched, start)

        for turns, off in zip(phase.sessions or [], phase.offsets, strict=True):
            if self._stopping:
                break
            t_sched = start + int(min(off * 1e9, _FAR_NS))
            if deadline is not None and t_sched >= deadline:
                break
            if not await self._due(t_sched):
                break
            if sem is not None:
                self._spawn(capped(turns, t_sched))
            else:
                self._spawn(self._session(turns, warm, t_sched, start))

    async def _due(self, t_sched: int) -> bool:
        """Wait until ``t_sched`` (most of the way by timer, then yielding: finer than
        the timer); False when the run was stopped meanwhile."""
        delay = (t_sched - _now()) / 1e9
        if delay > 0:
            if delay > 0.002 and not await self._wait_until(t_sched - 1_000_000):
                return False
            while _now() < t_sched:
                await asyncio.sleep(0)
        return True

    async def _session(
        self, turns: list[tuple[int, PlannedRequest]], warm: bool, t_first: int, start: int
    ) -> None:
        """One session's turns in order. A turn with ``history`` sends the earlier
        prompts and the server's actual replies, then its message; turn k > 0 is due
        ``think_s`` after turn k-1's reply ended (not before its trace offset). A turn
        that fails ends the session: its history would be missing a reply."""
        history = _History(self.spec.endpoint == "chat")
        t_sched = t_first
        for k, (idx, req) in enumerate(turns):
            if self._stopping:
                return
            if k:
                t_sched = _now() + int(req.think_s * 1e9)
                if req.offset_s is not None:
                    t_sched = max(t_sched, start + int(min(req.offset_s * 1e9, _FAR_NS)))
                if not await self._due(t_sched):
                    return
            prompt = history.prompt(req)
            rec = await self._one(idx, req, warm, t_sched, prompt, len(turns))
            if not rec.ok:
                return
            history.answered(prompt, rec.output_text or "")


class _History:
    """A session's conversation so far, as the next request sends it: one text
    (completions: the earlier prompts and replies concatenated, exactly as sent and
    received) or a list of messages (chat)."""

    __slots__ = ("chat", "text", "messages")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.text = ""
        self.messages: list[dict[str, Any]] = []

    def prompt(self, req: PlannedRequest) -> str | list[dict[str, Any]]:
        if not req.history:
            return req.prompt
        msg = req.prompt if isinstance(req.prompt, str) else flatten_chat(req.prompt)
        if self.chat:
            return [*self.messages, {"role": "user", "content": msg}]
        return self.text + msg

    def answered(self, sent: str | list[dict[str, Any]], reply: str) -> None:
        if self.chat:
            sent_msgs = sent if isinstance(sent, list) else [{"role": "user", "content": sent}]
            self.messages = [*sent_msgs, {"role": "assistant", "content": reply}]
        else:
            self.text = (sent if isinstance(sent, str) else flatten_chat(sent)) + reply
