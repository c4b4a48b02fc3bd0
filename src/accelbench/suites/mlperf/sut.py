"""The system under test: LoadGen's queries sent through accelbench's own client.

LoadGen calls ``issue`` from its issue thread; the samples go to an asyncio loop in a
thread of their own (uvloop where installed), where each becomes one OpenAI request
sent by ``OpenAIClient`` exactly as ``accelbench run`` sends it. The moment the client
marks the first token (``t_first``) LoadGen hears ``FirstTokenComplete``; when the
response ends, ``QuerySamplesComplete`` with the number of output tokens, so LoadGen
computes TTFT and TPOT from its own clock. How long after ``t_first`` that call was made
(the hand-over: parsing of other streams' chunks that arrived in the same loop turn, and
the call itself) is kept as a distribution (``stats["first_token_handover_ms_*"]``): it
is the part of LoadGen's TTFT that accelbench's record does not contain. Every request's record goes to the run's
journal, as in any accelbench run.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from accelbench.client.openai import build_body
from accelbench.client.session import OpenAIClient
from accelbench.documents import JsonObject
from accelbench.eventloop import install_uvloop
from accelbench.metrics.records import ErrorKind, RequestRecord, RequestRow
from accelbench.metrics.stats import counted_order_stat
from accelbench.metrics.summary import ReceiveStats
from accelbench.runner.loadgen import LoopLagMonitor
from accelbench.store.rundir import Journal
from accelbench.urls import Endpoint
from accelbench.workload.plan import PlannedRequest

_now = time.monotonic_ns
# the slot descriptor behind RequestRecord.t_first (a slots dataclass)
_T_FIRST: Any = RequestRecord.__dict__["t_first"]


class ReportingRecord(RequestRecord):
    """A record that calls ``on_first`` once, the moment its first-token mark is set
    (the client sets ``t_first`` when the first content chunk reaches the event loop)."""

    __slots__ = ("on_first", "first_reported")

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.on_first: Callable[[], None] | None = None
        self.first_reported = False
        super().__init__(*args, **kw)

    @property
    def t_first(self) -> int | None:
        value: int | None = _T_FIRST.__get__(self, RequestRecord)
        return value

    @t_first.setter
    def t_first(self, value: int | None) -> None:
        _T_FIRST.__set__(self, value)
        if value is not None and not self.first_reported and self.on_first is not None:
            self.first_reported = True
            self.on_first()


@dataclass
class SutOptions:
    """How the SUT sends requests (the same meaning as ``accelbench run``'s options)."""

    url: Endpoint
    model: str
    endpoint: str = "completions"
    stream: bool = True
    api_key: str | None = None
    timeout_s: float = 600.0
    ignore_eos: bool = True
    extra_body: JsonObject = field(default_factory=dict)
    save_text: bool = False
    transport: str = "auto"
    max_concurrency: int | None = None  # requests in flight; beyond, they wait here
    run_tag: str = "mlperf"


class SutStats(TypedDict, total=False):
    """The SUT's account of itself once its loop has ended (mlperf.json's ``sut``)."""

    sut_thread_cpu_s: float
    loop_lag_ms_p99: float
    receive: ReceiveStats | None
    first_token_handover_ms_p99: float
    first_token_handover_ms_max: float
    # from LoadGen's trace (--trace): how late queries reached the SUT (logs.IssueSide)
    loadgen_issue_delay_ms_p99: float
    loadgen_issue_delay_ms_max: float
    loadgen_issue_call_ms_max: float


class LoadGenSUT:
    """LoadGen's SUT callbacks over accelbench's client. ``start`` before LoadGen's
    StartTest, ``close`` after it returns (every issued sample has completed then)."""

    def __init__(
        self, lg: Any, samples: list[PlannedRequest], opts: SutOptions, journal: Journal
    ) -> None:
        self.lg = lg
        self.samples = samples
        self.opts = opts
        self.journal = journal
        self.issued = 0
        self.completed = 0
        self.failed = 0
        self.interrupted = 0  # stopped in flight (recorded)
        self.unsent_at_stop = 0  # waiting for a slot at the stop: answered, never sent
        self.answered_after_stop = 0  # issued after the stop: answered at once, unsent
        self.first_token_reports = 0
        self._rows: list[RequestRow] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: OpenAIClient | None = None
        # samples waiting for a slot under max_concurrency: (n, query id, index, t_sched)
        self._pending: deque[tuple[int, int, int, int]] = deque()
        self._active = 0
        self._ready = threading.Event()
        self._loop_done = threading.Event()
        # The loop thread calls into LoadGen, which keeps a logger per calling thread;
        # that thread exiting while LoadGen's test still runs crashed LoadGen's log thread
        # (SIGSEGV in TlsLogger::SwapBuffers, measured on a stop). It exits only when
        # released, after LoadGen's test returned; a parked test keeps it.
        self._may_exit = threading.Event()
        self._cpu0 = 0.0
        self.stats: SutStats = {}
        # first-token hand-over lag (ms, rounded to 10 us) -> count: bounded memory
        self.handover_ms: Counter[float] = Counter()

    # -- life cycle ---------------------------------------------------------------
    def start(self) -> None:
        install_uvloop()
        self._thread = threading.Thread(target=self._run_loop, name="accelbench-sut", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        o = self.opts
        self._client = OpenAIClient(
            o.url, endpoint=o.endpoint, stream=o.stream, api_key=o.api_key,
            timeout_s=o.timeout_s, transport=o.transport,
        )  # fmt: skip
        flusher = loop.create_task(self._flusher())
        lag = LoopLagMonitor()
        lag.start()
        self._cpu0 = time.thread_time()
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                self._wind_down(loop, flusher, lag)
            finally:  # whatever happened there: close() must not wait forever
                self._loop_done.set()
                self._may_exit.wait()

    def _wind_down(
        self, loop: asyncio.AbstractEventLoop, flusher: asyncio.Task[None], lag: LoopLagMonitor
    ) -> None:
        # after a stop LoadGen may not wait for them: the cancelled requests still
        # complete here, so that each keeps its record (marked interrupted)
        if self._tasks:
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
        flusher.cancel()
        lag.stop()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(flusher, return_exceptions=True))
        assert self._client is not None
        loop.run_until_complete(self._client.close())
        self._flush()
        self.stats["sut_thread_cpu_s"] = time.thread_time() - self._cpu0
        self.stats["loop_lag_ms_p99"] = lag.order_stat(0.99)
        self.stats["receive"] = self._client.receive_stats()
        if self.handover_ms:
            self.stats["first_token_handover_ms_p99"] = counted_order_stat(self.handover_ms, 0.99)
            self.stats["first_token_handover_ms_max"] = max(self.handover_ms)
        loop.close()

    def close(self) -> None:
        """Stop the loop (after LoadGen's test returned, or after a stop) and write the
        last records; the thread stays until ``release``. Idempotent."""
        if self._loop is not None and not self._loop_done.is_set():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_done.wait()

    def release(self) -> None:
        """LoadGen's test has returned: the loop's thread may end."""
        self._may_exit.set()
        if self._thread is not None:
            self._thread.join()

    def stop_requests(self) -> None:
        """Interrupted: cancel what is in flight and answer every later query at once
        (LoadGen still needs each sample completed before its test returns). Safe from
        a signal handler: it sets a flag and schedules the cancellation."""
        self._stopping = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cancel_all)

    def _cancel_all(self) -> None:
        self._answer_pending()
        for t in list(self._tasks):
            t.cancel()

    def _answer_pending(self) -> None:
        """Stopped: the samples still waiting for a slot are answered to LoadGen in one
        call each (not one task each: 24,576 for an Offline run). Never sent, they are
        no requests: counted (``unsent_at_stop``), not recorded."""
        items = list(self._pending)
        self._pending.clear()
        if not items:
            return
        lg = self.lg
        ids = [qid for _, qid, _, _ in items]
        lg.FirstTokenComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0, 0) for i in ids])
        self.first_token_reports += len(items)
        self.unsent_at_stop += len(items)

    # -- LoadGen callbacks (LoadGen's threads) -------------------------------------
    def issue(self, query_samples: list[Any]) -> None:
        t = _now()
        items = [(s.id, s.index) for s in query_samples]
        if not self._stopping and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._spawn, items, t)
                return
            except RuntimeError:  # the loop closed under us (a stop): answer below
                pass
        # Stopped: never raise into LoadGen's thread (it would terminate the process)
        # and never touch the loop, which may be closed: answer at once, here.
        ids = [qid for qid, _ in items]
        self.answered_after_stop += len(ids)
        lg = self.lg
        lg.FirstTokenComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0, 0) for i in ids])

    def flush_queries(self) -> None:
        """LoadGen's hint that no more queries come soon: nothing is held back here."""

    # -- the loop thread ----------------------------------------------------------
    def _spawn(self, items: list[tuple[int, int]], t_sched: int) -> None:
        for qid, index in items:
            self._pending.append((self.issued, qid, index, t_sched))
            self.issued += 1
        self._pump()

    def _pump(self) -> None:
        """Start waiting samples while a slot is free (every one without a cap)."""
        cap = self.opts.max_concurrency
        while self._pending and (cap is None or self._active < cap):
            if self._stopping:
                self._answer_pending()
                return
            n, qid, index, t_sched = self._pending.popleft()
            self._active += 1
            task = asyncio.ensure_future(self._one(n, qid, index, t_sched))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._active -= 1
        self._pump()

    def _first_token(self, qid: int, t_first: int | None = None) -> None:
        self.first_token_reports += 1
        self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(qid, 0, 0)])
        if t_first is not None:
            self.handover_ms[round((_now() - t_first) / 1e6, 2)] += 1

    async def _one(self, n: int, qid: int, index: int, t_sched: int) -> None:
        o = self.opts
        req = self.samples[index]
        rec = ReportingRecord(
            idx=n, request_id=f"{o.run_tag}-{n}-s{index}", t_sched=t_sched,
            max_tokens=req.max_tokens, isl_planned=req.isl_planned,
        )  # fmt: skip
        rec.on_first = lambda: self._first_token(qid, rec.t_first)
        body = build_body(
            endpoint=o.endpoint, model=o.model, prompt=req.prompt, max_tokens=req.max_tokens,
            stream=o.stream, ignore_eos=o.ignore_eos, extra=o.extra_body,
        )  # fmt: skip
        assert self._client is not None
        try:
            if self._stopping:
                raise asyncio.CancelledError
            await self._client.send(rec, body)
        except asyncio.CancelledError:
            rec.interrupt("the run was stopped before this request finished")
        finally:
            self._complete(qid, rec)

    def _complete(self, qid: int, rec: ReportingRecord) -> None:
        if rec.t_send == 0:
            rec.t_send = _now()
        if not rec.first_reported:
            # no token came (an error): LoadGen still needs the first-token mark
            rec.first_reported = True
            self._first_token(qid)
        n_tokens = rec.osl_server if rec.osl_server is not None else len(rec.chunk_times)
        data = array.array("B", (rec.output_text or "").encode())
        ptr, size = data.buffer_info()
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(qid, ptr, size, n_tokens)])
        self.completed += 1
        if rec.error_kind == ErrorKind.INTERRUPTED:
            self.interrupted += 1
        elif not rec.ok:
            self.failed += 1
        if not (self.opts.save_text or (rec.ok and rec.osl_server is None)):
            rec.output_text = None  # kept only where it is needed (OSL fallback)
        self._rows.append(rec.to_row())
        if len(self._rows) >= 256:
            self._flush()

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self.journal.write(rows)
