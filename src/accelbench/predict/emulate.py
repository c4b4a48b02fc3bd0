"""The emulated server: hardware the user does not own, served in real time.

``accelbench serve emulated --accelerator mi355x --model llama-3.1-70b --tp 8`` answers
the OpenAI API as the reference server does (same framing, same byte tokens, same
``/tokenize``), but its timing comes from the continuous-batching scheduler
(``predict.scheduler``) over a step-time model: every request joins the emulated
engine's batch, and each token is written at the end of the step that computes it on
the emulated hardware. Queueing, TTFT under load and the batch's slowdown therefore come
out of the schedule, so every accelbench command can run against the emulated machine.

Its results are labelled: the served model is ``emulated:<accelerator>:<model>`` (in
``/v1/models`` and in every response) and every response carries the header
``x-accelbench-emulated: <accelerator>``. With ``--ground-truth`` it logs, per request,
each token's due time (the schedule) and write time (the ground truth the client's
measurements are compared with), in the reference server's format plus the request's
admission time.

**Prefix cache.** As vLLM and SGLang do by default, the emulated engine keeps the KV of
earlier prompts (and replies) and does not prefill a prompt's leading blocks it still
holds: the reference server's prefix cache (``reference/prefix_cache.py``, the rule
accelbench's ideal hit rate uses), in blocks of the scheduler's block size, as large as
the step model's KV capacity (``--no-prefix-cache``: none). Each response reports its
``cached_tokens`` in ``usage.prompt_tokens_details`` and ``/metrics`` the cache's
counters, so a session workload's hit rate and TTFT by turn come out as they would on an
engine. The cache is an LRU of the whole KV pool beside the running sequences, not
shared with them as an engine's is: under memory pressure an engine evicts sooner.

:func:`step_model_for` is the one place that chooses the step model: ``predict``'s, with
its factors fitted on the public measurements (docs/PREDICT.md), so the emulated server
streams what ``accelbench predict`` predicts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench import validate
from accelbench.errors import AccelbenchError
from accelbench.eventloop import install_uvloop
from accelbench.hardware.catalog import find_accelerator
from accelbench.plan.models import resolve_model
from accelbench.predict.point import fitted_step_model, model_id
from accelbench.predict.scheduler import (
    DEFAULT_BATCHED_TOKENS,
    DEFAULT_BLOCK_SIZE,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    StepResult,
)
from accelbench.predict.stepmodel import Layout
from accelbench.predict.steps import Step, StepModel, StepTime
from accelbench.reference.prefix_cache import Admission
from accelbench.reference.server import (
    _WORDS,
    _WORDS_JSON,
    MAX_PREFIX_CACHE_BLOCKS,
    MAX_TOKENS_CAP,
    STREAM_HEAD,
    GroundTruthLine,
    ReferenceConfig,
    ReferenceProtocol,
    StreamFraming,
    _chunk,
    _State,
    serve_until_stopped,
    whole_response,
)

# -- the step model ---------------------------------------------------------------------


def step_model_for(
    accelerator: str, model: str, tp: int, precision: str = "bf16", engine: str = "sglang"
) -> StepModel:
    """The step model the emulated server runs: ``predict``'s, with the factors fitted on
    the public measurements (``predict.point.fitted_step_model``). A layout whose weights
    leave no room for 1,024 tokens of KV cache is refused with the memory arithmetic."""
    acc = find_accelerator(accelerator)
    arch = resolve_model(model)  # a catalog id or a config.json, as predict's --model
    validate.integer("--tp", tp, 1, 64)
    sm, _ = fitted_step_model(arch, acc, Layout(tp=tp), engine=engine,
                              precision=precision)  # fmt: skip
    if sm.kv_capacity_tokens() < 1024:
        raise AccelbenchError(
            f"{model_id(arch)} at {precision} does not fit on {tp} x {acc.id}: "
            f"{sm.memory_arithmetic(1024).split(': ', 1)[-1]}"  # "weights ... usable = ..."
        )
    return sm


def emulated_label(accelerator: str, model: str) -> str:
    """The served model name: ``emulated:<accelerator id>:<model id>`` (catalog ids; a
    config.json's model: its name)."""
    return f"emulated:{find_accelerator(accelerator).id}:{model_id(resolve_model(model))}"


# -- the server --------------------------------------------------------------------


@dataclass
class EmulatedConfig:
    accelerator: str
    model: str
    tp: int = 1
    precision: str = "bf16"
    host: str = "127.0.0.1"
    port: int = 8000
    ground_truth: Path | None = None
    speed: float = 1.0  # the emulated hardware runs this many times faster than predicted
    max_num_batched_tokens: int = DEFAULT_BATCHED_TOKENS
    default_max_tokens: int = 16
    prefix_cache: bool = True  # keep earlier prompts' KV blocks (vLLM's and SGLang's default)

    def validate(self) -> None:
        validate.integer("--port", self.port, 0, 65535)
        if self.ground_truth is not None:  # a FIFO blocked the server's start for ever
            validate.output_file("--ground-truth", self.ground_truth)
        validate.integer("--tp", self.tp, 1, 64)
        validate.number("--speed", self.speed, 0.001, 1e6)
        validate.integer("--max-num-batched-tokens", self.max_num_batched_tokens, 1, 1 << 24)
        validate.integer("default max_tokens", self.default_max_tokens, 1, MAX_TOKENS_CAP)


class EmulatedTruthLine(GroundTruthLine, total=False):
    """A ground-truth line of the emulated server: the reference server's fields (each
    token's due time in ``scheduled``, its write in ``token_times``) and when the
    request joined the batch (``t_admitted``), on the same monotonic clock (ns)."""

    t_admitted: int
    prompt_tokens: int
    output_tokens: int


class _Scaled:
    """A step model ``speed`` times faster."""

    def __init__(self, model: StepModel, speed: float) -> None:
        self.model, self.speed = model, speed

    def step_time(self, step: Step) -> StepTime:
        t = self.model.step_time(step)
        return StepTime(t.seconds / self.speed, t.bound)

    def kv_capacity_tokens(self) -> int:
        return self.model.kv_capacity_tokens()

    def max_batch(self) -> int:
        return self.model.max_batch()


# A step's end is timed by waking this early on the loop's millisecond timers, then
# sleeping (nanosleep: about 50-100 us late) to _SPIN_NS before it and spinning the rest.
_EARLY_S = 1.2e-3
_SPIN_NS = 100_000
# Later than this behind the schedule, the server catches up: the steps already due
# are run together and each stream's tokens of them go out in one write.
_CATCH_UP_S = 2e-3


class _Stream:
    """One request's response, written token by token as the engine's steps end.

    A step's writes are due together, so each is made ready while the step runs
    (:meth:`prepare`); at the due moment the token is queued (:meth:`queue`) and
    written (:meth:`flush`: a stamp and a write); :meth:`finish` ends the response
    after its last token is out."""

    __slots__ = ("proto", "n", "i", "word0", "fr", "tail", "log", "sent", "due", "doc_args",
                 "out", "doc", "pend", "ended", "adm")  # fmt: skip

    def __init__(self, proto: EmulatedProtocol, n: int, word0: int, fr: StreamFraming,
                 tail: bytes, log: EmulatedTruthLine, doc_args: tuple | None) -> None:  # fmt: skip
        self.proto, self.n, self.i, self.word0, self.fr, self.tail = proto, n, 0, word0, fr, tail
        self.log = log
        self.sent: list[int] = log["token_times"]
        self.due: list[int] = log["scheduled"]
        self.doc_args = doc_args  # not streamed: the whole response's arguments
        self.out = b""  # streamed: the bytes of the next token's write
        self.doc: dict[str, Any] | None = None  # not streamed: the response, at the last token
        self.pend: list[bytes] = []  # tokens computed, not yet written
        self.ended = False
        self.adm: Admission | None = None  # what the prefix cache did for the prompt

    def text(self) -> str:
        return "".join(_WORDS[(self.word0 + k) % len(_WORDS)] for k in range(self.n))

    def prepare(self) -> None:
        """Make the next token's write."""
        i = self.i
        last = i + 1 == self.n
        if self.doc_args is not None:
            if last:
                chat, rid, created, model, usage = self.doc_args
                self.doc = whole_response(chat, rid, created, model, self.text(), usage)
            return
        fr = self.fr
        ev = fr.pre + _WORDS_JSON[(self.word0 + i) % len(_WORDS)]
        if last:
            self.out = _chunk(ev + fr.post_last) + _chunk(self.tail) + b"0\r\n\r\n"
        else:
            self.out = _chunk(ev + fr.post_open)

    def queue(self, due_ns: int) -> None:
        """The step due at ``due_ns`` computed the next token."""
        self.pend.append(self.out)
        self.i += 1
        self.due.append(due_ns)

    def flush(self, stamp: Any) -> None:
        """Write the queued tokens (one write; each token's time is that write's)."""
        p = self.proto
        if p.closed:
            self.pend.clear()
            return
        if self.doc_args is None:
            t = stamp()  # just before the write: causality
            self.sent.extend([t] * len(self.pend))
            p.transport.write(b"".join(self.pend))  # type: ignore[union-attr]
        elif self.i == self.n and self.doc is not None:
            self.sent.append(stamp())
            p._simple(200, self.doc)
            self.doc = None
        self.pend.clear()

    def finish(self) -> None:
        """After the last token's write: log the request, free the connection."""
        p = self.proto
        if self.i == self.n and not self.ended and not p.closed:
            self.ended = True
            cache = p.st.cache
            if self.adm is not None and cache is not None:  # the reply's blocks too
                cache.complete(self.adm, self.text().encode())
            self.log["t_end"] = time.monotonic_ns()
            p.st.log(self.log)
            p.current_log = None
            p.sid = None
            p._done_response()


_Formed = tuple[StepResult, list[_Stream]]


class _Engine:
    """The emulated engine: the scheduler run in real time on the monotonic clock (the
    event loop's)."""

    def __init__(self, cfg: EmulatedConfig, model: StepModel) -> None:
        self.cfg = cfg
        self.sched = Scheduler(
            _Scaled(model, cfg.speed), SchedulerConfig(max_num_batched_tokens=cfg.max_num_batched_tokens)
        )  # fmt: skip
        self.streams: dict[int, _Stream] = {}  # scheduler id -> its response
        self.active: dict[int, _Stream] = {}  # those past their first token
        self.in_flight: StepResult | None = None
        self.kicked = False
        self.steps_total = 0
        self.tokens_total = 0
        self.catch_ups = 0  # steps whose tokens went out with the next one's (behind schedule)
        self.bound_s: dict[str, float] = {}

    def submit(self, stream: _Stream, prompt_tokens: int, arrival_s: float, cached: int = 0) -> int:
        sid = self.sched.add(SimRequest(arrival_s, prompt_tokens, stream.n, cached))
        self.streams[sid] = stream
        if self.in_flight is None and not self.kicked:
            self.kicked = True  # requests that arrive in this loop turn share the step
            asyncio.get_running_loop().call_soon(self._kick)
        return sid

    def _kick(self) -> None:
        self.kicked = False
        if self.in_flight is None:  # (a step may have started since the kick was asked)
            self._start(None)

    def abort(self, sid: int) -> None:
        self.sched.abort(sid)
        self.streams.pop(sid, None)
        self.active.pop(sid, None)

    def _form(self, now: float | None) -> _Formed | None:
        """The step starting at ``now`` (None: idle until now, so when the first waiting
        request came), with its writes made ready; None when there is nothing to run."""
        if now is None:
            now = self.sched.next_arrival() or time.monotonic()
        res = self.sched.step(now)
        if res is None and (nxt := self.sched.next_arrival()) is not None:
            res = self.sched.step(nxt)  # idle, and one came after ``now`` (a late loop)
        self.in_flight = res
        if res is None:
            return None
        self.steps_total += 1
        self.bound_s[res.bound] = self.bound_s.get(res.bound, 0.0) + res.end_s - res.start_s
        streams = self.streams
        for sid in res.admitted:
            st = streams.get(sid)
            if st is not None:
                st.log["t_admitted"] = int(res.start_s * 1e9)
        # who writes at the step's end: the decoding, then those whose prompt it finishes
        batch = list(self.active.values())
        for sid in res.first:
            st = streams.get(sid)
            if st is not None:
                batch.append(st)
        for st in batch:
            st.prepare()
        return res, batch

    def _start(self, now: float | None) -> None:
        formed = self._form(now)
        if formed is not None:
            loop = asyncio.get_running_loop()
            loop.call_at(formed[0].end_s - _EARLY_S, self._end, *formed)

    def _ended(self, res: StepResult, batch: list[_Stream]) -> None:
        """The step's tokens are computed: queue them; the sequences it started or
        ended join or leave the decoding set."""
        due_ns = int(res.end_s * 1e9)
        for st in batch:
            st.queue(due_ns)
        streams, active = self.streams, self.active
        for sid in res.first:
            new = streams.get(sid)
            if new is not None:
                active[sid] = new
        self.tokens_total += len(batch)
        for sid in res.finished:
            streams.pop(sid, None)
            active.pop(sid, None)

    def _end(self, res: StepResult, batch: list[_Stream]) -> None:
        """The step's tokens are due: write them, then start the next step at the due
        time (not now: a late loop does not shift the schedule). Far behind, the steps
        already due are run first and each stream's tokens written together."""
        stamp = time.monotonic_ns
        # the loop's timers are whole milliseconds (uvloop, libuv), so this was called
        # up to _EARLY_S before the due time: sleep, then spin the last microseconds
        # (the loop has nothing else due: a step's writes are the only timed ones)
        due_ns = int(res.end_s * 1e9)
        wait = due_ns - stamp() - _SPIN_NS
        if wait > 0:
            time.sleep(wait / 1e9)
        while stamp() < due_ns:
            pass
        self._ended(res, batch)
        touched = batch
        nxt = None
        if time.monotonic() - res.end_s > _CATCH_UP_S:
            seen = {id(st): st for st in batch}
            while (nxt := self._form(res.end_s)) is not None and nxt[0].end_s <= time.monotonic():
                res, batch = nxt
                self._ended(res, batch)
                self.catch_ups += 1
                for st in batch:
                    seen[id(st)] = st
            touched = list(seen.values())
        for st in touched:
            if st.pend:
                st.flush(stamp)
        for st in touched:
            st.finish()
        if nxt is None:
            self._start(res.end_s)
        else:
            asyncio.get_running_loop().call_at(nxt[0].end_s - _EARLY_S, self._end, *nxt)


class EmulatedProtocol(ReferenceProtocol):
    """The reference server's connection (framing, routes, /tokenize) with generation
    answered by the emulated engine."""

    def __init__(self, state: _State, engine: _Engine, accelerator: str) -> None:
        super().__init__(state)
        self.eng = engine
        self.extra_headers = b"x-accelbench-emulated: " + accelerator.encode() + b"\r\n"
        self.sid: int | None = None  # the request being answered (scheduler id)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.sid is not None:  # the client went away: the engine drops its request
            self.eng.abort(self.sid)
            self.sid = None

    def _metrics(self) -> None:
        eng, st = self.eng, self.st
        s = eng.sched
        acc, _, model = st.cfg.model.removeprefix("emulated:").partition(":")
        lines = [
            "# TYPE accelbench_emulated_info gauge",
            f'accelbench_emulated_info{{accelerator="{acc}",model="{model}",tp="{eng.cfg.tp}"}} 1',
            "# TYPE emulated_requests_total counter",
            f"emulated_requests_total {st.requests_total}",
            "# TYPE emulated_tokens_total counter",
            f"emulated_tokens_total {eng.tokens_total}",
            "# TYPE emulated_steps_total counter",
            f"emulated_steps_total {eng.steps_total}",
            "# TYPE emulated_catch_up_steps_total counter",
            f"emulated_catch_up_steps_total {eng.catch_ups}",
            "# TYPE emulated_step_seconds_total counter",
            *(f'emulated_step_seconds_total{{bound="{b}"}} {v:.6f}' for b, v in sorted(eng.bound_s.items())),
            # vLLM's names, so accelbench's server telemetry reads the emulated engine
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running {s.running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting {len(s.waiting)}",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc {s.kv_used / s.kv_capacity:.6f}",
            *st.cache_metrics(),
        ]  # fmt: skip
        self._simple(200, ("\n".join(lines) + "\n").encode(), ctype="text/plain; version=0.0.4")

    def _generate(self, chat: bool, headers: dict, body: bytes, t_recv: int) -> None:
        st, cfg = self.st, self.st.cfg
        gen = self._read_generation(body, chat)
        if gen is None:
            return
        n = gen.max_tokens  # as a benchmark asks: no early stop
        rid = headers.get("x-request-id", f"emu-{st.counter}")
        st.counter += 1
        st.requests_total += 1
        created = int(time.time())
        fr = StreamFraming.of(chat, rid, created, cfg.model)
        # the prefix cache sees the prompt on arrival, prompt + reply when the last
        # token is out (_Stream.finish)
        adm = st.cache.arrive(str(gen.prompt).encode()) if st.cache is not None else None
        cached = adm.cached_tokens if adm is not None else 0
        usage: dict[str, Any] = {"prompt_tokens": gen.prompt_tokens, "completion_tokens": n,
                                 "total_tokens": gen.prompt_tokens + n}  # fmt: skip
        if adm is not None:  # where vLLM and OpenAI put it
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        log = EmulatedTruthLine(request_id=rid, t_recv=t_recv, fault=None, token_times=[],
                                scheduled=[], prompt_tokens=gen.prompt_tokens, output_tokens=n,
                                cached_tokens=cached)  # fmt: skip
        doc_args = None if gen.stream else (chat, rid, created, cfg.model, usage)
        stream = _Stream(self, n, st.counter, fr, fr.tail(usage if gen.usage_wanted else None),
                         log, doc_args)  # fmt: skip
        stream.adm = adm
        try:
            sid = self.eng.submit(stream, max(1, gen.prompt_tokens), t_recv / 1e9, cached)
        except AccelbenchError as exc:  # longer than the KV cache holds: as a context overflow
            msg = f"this request exceeds the maximum context the emulated engine holds: {exc}"
            self._simple(400, {"error": {"message": msg, "type": "invalid_request_error"}})
            return
        self.sid = sid
        self.busy = True
        self.current_log = log
        if gen.stream:
            assert self.transport is not None
            self.transport.write(
                STREAM_HEAD[:-2] + self.extra_headers + b"\r\n" + _chunk(fr.head_events)
                if fr.head_events
                else STREAM_HEAD[:-2] + self.extra_headers + b"\r\n"
            )
            log["t_headers"] = time.monotonic_ns()


async def serve_emulated(cfg: EmulatedConfig, ready: Any = None) -> None:
    """Serve until cancelled or SIGINT/SIGTERM."""
    cfg.validate()
    model = step_model_for(cfg.accelerator, cfg.model, cfg.tp, cfg.precision)
    acc = find_accelerator(cfg.accelerator).id
    blocks = min(model.kv_capacity_tokens() // DEFAULT_BLOCK_SIZE, MAX_PREFIX_CACHE_BLOCKS)
    ref = ReferenceConfig(
        host=cfg.host, port=cfg.port, model=emulated_label(cfg.accelerator, cfg.model),
        ground_truth=cfg.ground_truth, default_max_tokens=cfg.default_max_tokens,
        prefix_block_size=DEFAULT_BLOCK_SIZE, prefix_cache_blocks=blocks if cfg.prefix_cache else 0,
    )  # fmt: skip
    state = _State(ref)
    engine = _Engine(cfg, model)
    await serve_until_stopped(lambda: EmulatedProtocol(state, engine, acc), state, ready)


def run_emulated(cfg: EmulatedConfig, ready: Any = None) -> None:
    install_uvloop()
    asyncio.run(serve_emulated(cfg, ready))
