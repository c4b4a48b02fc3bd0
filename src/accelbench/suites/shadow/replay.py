"""Shadow replay: a recorded or public trace sent to the baseline and the candidate at
the trace's arrival times (scaled by ``speed``), both at once or one after the other,
into a shadow directory that ``accelbench shadow verdict`` reads like the proxy's.

Scheduling: each request is due at ``start + offset / speed``; the loop sleeps until
1 ms before and then yields until due (finer than the timer), as the run's open loop
does (benchmarks/wake_latency.py compares this with a timer thread and a blocking sleep
on this host). Every request and its copy share one clock (this process's
``monotonic_ns``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from accelbench import validate as v
from accelbench.client.openai import build_body
from accelbench.client.session import OpenAIClient, load_api_key
from accelbench.errors import AccelbenchError, UsageError
from accelbench.lifetime import loop_stop_signals
from accelbench.metrics.records import RequestRecord
from accelbench.metrics.summary import arrival_stamps
from accelbench.runner.config import BenchmarkConfig
from accelbench.store.rundir import write_json_atomic
from accelbench.suites.shadow.store import ShadowWriter
from accelbench.urls import Endpoint
from accelbench.validate import check_url

if TYPE_CHECKING:
    from accelbench.workload.traces import Trace

_now = time.monotonic_ns
Log = Callable[[str], None]
MIN_SPEED, MAX_SPEED = 0.001, 1e6  # --speed: 1,000x slower to 1,000,000x faster


@dataclass
class ReplayRequest:
    idx: int
    offset_s: float  # after the replay's start, already scaled by speed
    endpoint: str
    bodies: dict[str, dict[str, Any]]  # side -> body (each side's model)
    isl_planned: int | None
    max_tokens: int | None
    # a trace's sessions (docs/WORKLOADS.md): a later turn goes ``think_s`` (scaled) after
    # the previous turn's answer on the same side, and not before ``offset_s`` if ``timed``
    session: int | None = None
    think_s: float = 0.0
    timed: bool = True


class TraceInfo(TypedDict):
    path: str | None
    format: str
    requests: int
    duration_s: float
    notes: list[str]  # what reading the trace left out (workload.traces.Trace.notes)


class ReplayInfo(TypedDict):
    """What ``prepare`` learnt, stored in shadow.json beside the options."""

    trace: TraceInfo
    models: dict[str, str]  # side -> model
    tokenizer: str | None
    special_tokens_per_prompt: int
    api_keys: dict[str, str | None]  # side -> key: sent, never stored (``_replay`` drops it)


@dataclass
class ReplayOptions:
    baseline: Endpoint  # each side's server; a URL string is parsed here (the boundary)
    candidate: Endpoint
    out: str
    speed: float = 1.0
    sequential: bool = False
    candidate_model: str | None = None
    candidate_api_key_env: str | None = None
    trace_format: str = "auto"
    block_size: int = 512  # tokens per hash_ids block (workload.traces.DEFAULT_BLOCK_SIZE)

    def __post_init__(self) -> None:
        self.baseline, self.candidate = map(Endpoint.parse, (self.baseline, self.candidate))

    def validate(self) -> None:
        for name, server in (("--baseline", self.baseline), ("--candidate", self.candidate)):
            check_url(server.url, name)  # no credentials in it; the same scheme and host
        self.speed = v.number("--speed", self.speed, MIN_SPEED, MAX_SPEED)
        v.output_dir("--out", self.out)
        if self.candidate_api_key_env is not None:
            v.env_var("--candidate-api-key-env", self.candidate_api_key_env)

    def sides(self) -> dict[str, Endpoint]:
        """Each side's server: what requests go to, what files and messages show."""
        return {"baseline": self.baseline, "candidate": self.candidate}

    def check_span(self, span_s: float) -> float:
        """The replay's length: the trace's span at ``speed``, at most 30 days (as a
        trace's own span); checked once the trace is read, before anything is sent."""
        from accelbench.workload.traces import MAX_TRACE_SPAN_S

        scaled = span_s / self.speed
        if not scaled <= MAX_TRACE_SPAN_S:
            raise UsageError(
                f"--speed {self.speed:g} stretches the trace's {span_s:g} s to {scaled:g} s: "
                f"a replay lasts at most {MAX_TRACE_SPAN_S:g} s (30 days); give a larger --speed"
            )
        return scaled


def _side_model(server: Endpoint, wanted: str | None, api_key: str | None, name: str) -> str:
    from accelbench.runner.benchmark import discover_server

    models = [m for m in discover_server(server, api_key)["models"] if m]
    if wanted is None:
        if not models:
            raise AccelbenchError(f"the {name} at {server} lists no models: give the model")
        return str(models[0])
    if models and wanted not in models:
        raise AccelbenchError(f"model {wanted!r} is not served by the {name} at {server}")
    return wanted


# What a replay makes of a trace's entries, and the options that shape it: an entry with a
# recorded body is sent as recorded, so only the entries without one read these
_BODY_OPTIONS = (("--endpoint", "endpoint"), ("--stream/--no-stream", "stream"),
                 ("--ignore-eos/--no-ignore-eos", "ignore_eos"),
                 ("--extra-body", "extra_body"))  # fmt: skip


def check_trace_options(cfg: BenchmarkConfig, trace: Trace) -> None:
    """Refuse every load option that the replay of ``trace`` would not read (one line
    naming it, before any request; docs/SHADOW.md "Options a trace decides"): the
    arrival process without a ShareGPT file (the trace's own times), ``--burstiness``
    without ``--arrival gamma``, the body options (``--endpoint``, ``--stream``,
    ``--ignore-eos``, ``--extra-body``) and ``--tokenizer`` where every request is
    recorded (sent as recorded), ``--osl`` where every entry has its own output length,
    ``--seed`` where nothing is drawn (no prompt made from lengths, no ShareGPT
    arrivals), ``--block-size`` where no entry has ``hash_ids``, ``--num-requests N``
    beyond the trace's length (it keeps the first N)."""
    wl = cfg.workload
    if trace.format != "sharegpt":  # its own arrival times: a rate would be ignored
        shaping = [o for o, f in (("--rate", "rate"), ("--arrival", "arrival"),
                                  ("--burstiness", "burstiness")) if cfg.is_set(cfg, f)]  # fmt: skip
        if shaping:
            verb = "shapes" if len(shaping) == 1 else "shape"
            raise UsageError(
                f"{', '.join(shaping)} {verb} the arrivals of a ShareGPT file; this "
                f"{trace.format} trace has its own times (scale them with --speed)"
            )
    elif cfg.is_set(cfg, "burstiness") and cfg.arrival != "gamma":
        raise UsageError("--burstiness is the shape of --arrival gamma only")
    name = f"--trace {trace.path}"
    if not any(e.body is None for e in trace.entries):
        recorded = [o for o, f in (*_BODY_OPTIONS, ("--tokenizer", "tokenizer"))
                    if cfg.is_set(wl if f == "tokenizer" else cfg, f)]  # fmt: skip
        if recorded:
            verb = "does" if len(recorded) == 1 else "do"
            raise UsageError(
                f"{', '.join(recorded)} {verb} not apply to {name}: every request of it "
                "is recorded and replayed as recorded (body, endpoint and all)"
            )
    if cfg.is_set(wl, "osl") and not any(e.body is None and e.osl is None for e in trace.entries):
        raise UsageError(
            f"--osl is the output length of a trace's entries without one: every entry of "
            f"{trace.path} has its own or is recorded (it would change nothing)"
        )
    if cfg.is_set(wl, "seed") and trace.format != "sharegpt" and not trace.synthesised:
        raise UsageError(
            f"--seed draws the prompts of a trace's length-only entries: every request of "
            f"{trace.path} is recorded with its own prompt (it would change nothing)"
        )
    if cfg.num_requests is not None and len(trace.entries) < cfg.num_requests:
        raise UsageError(
            f"--num-requests {cfg.num_requests:,}: {trace.path} has only "
            f"{len(trace.entries):,} requests (it keeps the first N)"
        )
    if cfg.is_set(wl, "block_size") and not any(e.blocks is not None for e in trace.entries):
        raise UsageError(
            f"--block-size is the tokens per hash_ids block of a trace: {trace.path} has "
            "no hash_ids"
        )


def prepare(
    cfg: BenchmarkConfig, opt: ReplayOptions, log: Log
) -> tuple[list[ReplayRequest], ReplayInfo]:
    """Load the trace and turn it into both sides' request bodies."""
    from accelbench.runner.benchmark import probe_request
    from accelbench.workload.tokenizer import LocalTokenizer, server_tokenizer_if_any
    from accelbench.workload.traces import load_trace, trace_plan

    assert cfg.workload.trace is not None
    api_key = load_api_key(cfg.api_key_env, cfg.api_key_file)
    cand_key = (
        load_api_key(opt.candidate_api_key_env, None) if opt.candidate_api_key_env else api_key
    )
    trace = load_trace(
        cfg.workload.trace, opt.trace_format, rate=cfg.rate, arrival=cfg.arrival,
        burstiness=cfg.burstiness, seed=cfg.workload.seed, limit=cfg.num_requests,
        block_size=opt.block_size,
    )  # fmt: skip
    check_trace_options(cfg, trace)
    opt.check_span(trace.duration_s)
    log(f"trace: {len(trace.entries)} requests over {trace.duration_s:.1f} s ({trace.format})")
    for note in trace.notes:
        log(f"warning: {note}")
    models = {
        "baseline": _side_model(opt.baseline, cfg.model, api_key, "baseline"),
        "candidate": _side_model(
            opt.candidate, opt.candidate_model or cfg.model, cand_key, "candidate"
        ),
    }
    cfg.url, cfg.model = opt.baseline, models["baseline"]
    tok: Any = None
    special = 0
    if any(e.body is None for e in trace.entries):
        if cfg.workload.tokenizer:
            tok = LocalTokenizer(cfg.workload.tokenizer)
        else:
            tok = server_tokenizer_if_any(opt.baseline, models["baseline"], api_key)
        probe_text = "The quick brown fox jumps over the lazy dog."
        probe = probe_request(cfg, api_key, probe_text)
        if not probe.ok:
            raise AccelbenchError(
                f"a test request to the baseline failed ({probe.error_kind}): {probe.error}"
            )
        if tok is not None and probe.isl is not None:
            special = max(0, probe.isl - len(tok.encode(probe_text)))
    plan = trace_plan(
        trace, tok, special_tokens=special, seed=cfg.workload.seed, default_osl=cfg.workload.osl
    )
    reqs: list[ReplayRequest] = []
    for i, pr in enumerate(plan):
        endpoint = pr.endpoint or cfg.endpoint
        if pr.body is not None:
            base = pr.body
        else:
            base = build_body(
                endpoint=endpoint, model="", prompt=pr.prompt, max_tokens=pr.max_tokens,
                stream=cfg.stream, ignore_eos=cfg.ignore_eos, extra=cfg.extra_body,
            )  # fmt: skip
        bodies = {side: dict(base, model=m) for side, m in models.items()}
        if pr.offset_s is not None:
            offset = pr.offset_s / opt.speed
        else:  # a later turn with no time of its own: its predecessor's, a lower bound
            offset = reqs[-1].offset_s if reqs and pr.session is not None else 0.0
        reqs.append(
            ReplayRequest(
                i, offset, endpoint, bodies, pr.isl_planned, pr.max_tokens, pr.session,
                pr.think_s / opt.speed, pr.offset_s is not None,
            )
        )  # fmt: skip
    info: ReplayInfo = {
        "trace": {"path": trace.path, "format": trace.format, "requests": len(reqs),
                  "duration_s": trace.duration_s, "notes": trace.notes},
        "models": models, "tokenizer": getattr(tok, "name", None),
        "special_tokens_per_prompt": special, "api_keys": {"baseline": api_key, "candidate": cand_key},
    }  # fmt: skip
    return reqs, info


class _Sender:
    """Sends one side's requests and journals their records."""

    def __init__(
        self,
        side: str,
        server: Endpoint,
        api_key: str | None,
        cfg: BenchmarkConfig,
        writer: ShadowWriter,
    ) -> None:
        self.side = side
        self.server = server
        self.api_key = api_key
        self.cfg = cfg
        self.writer = writer
        self.clients: dict[tuple[str, bool], OpenAIClient] = {}
        self.sem = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None

    async def send(self, r: ReplayRequest, t_sched: int) -> None:
        body = r.bodies[self.side]
        stream = bool(body.get("stream"))
        client = self.clients.get((r.endpoint, stream))
        if client is None:
            client = OpenAIClient(
                self.server, endpoint=r.endpoint, stream=stream, api_key=self.api_key,
                timeout_s=self.cfg.timeout_s, transport=self.cfg.transport,
            )  # fmt: skip
            self.clients[(r.endpoint, stream)] = client
        rec = RequestRecord(
            idx=r.idx, request_id=f"{self.side}-{r.idx}", t_sched=t_sched,
            max_tokens=r.max_tokens, isl_planned=r.isl_planned,
        )  # fmt: skip
        try:
            if self.sem is not None:
                async with self.sem:
                    await client.send(rec, body)
            else:
                await client.send(rec, body)
        finally:
            if rec.t_send == 0:
                rec.t_send = _now()
            self.writer.add_record(self.side, rec)

    async def close(self) -> None:
        # how this side's chunk times were stamped (the verdict says where reads waited
        # longer than the chunk gap)
        got = [r for c in self.clients.values() if (r := c.receive_stats()) and r.get("reads")]
        if got:
            self.writer.meta.receive[self.side] = arrival_stamps([{"receive": r} for r in got])
        for c in self.clients.values():
            await c.close()


class _Stop:
    """Set by a stop signal; ``sleep`` (the wait for the next arrival, or for the last
    answers) ends early when it is. As cheap as ``asyncio.sleep`` (one future, one
    timer), which matters at thousands of arrivals a second."""

    def __init__(self) -> None:
        self._set = False
        self._waiters: set[asyncio.Future] = set()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        self.wake()

    def wake(self) -> None:
        for w in self._waiters:
            if not w.done():
                w.set_result(None)

    async def sleep(self, seconds: float | None) -> None:
        """Until ``seconds`` pass (None: until woken), ``set`` or ``wake``."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        w = loop.create_future()
        self._waiters.add(w)
        h = None if seconds is None else loop.call_later(seconds, _resolve, w)
        try:
            await w
        finally:
            self._waiters.discard(w)
            if h is not None:
                h.cancel()


def _resolve(w: asyncio.Future) -> None:
    if not w.done():
        w.set_result(None)


async def _until(due: int, stop: _Stop) -> None:
    while (delay := (due - _now()) / 1e9) > 0.002 and not stop.is_set():
        await stop.sleep(delay - 0.001)  # (woken early by the last answer: again)
    while _now() < due and not stop.is_set():
        await asyncio.sleep(0)


async def _session(
    s: _Sender, turns: list[ReplayRequest], start: int, due: int, stop: _Stop
) -> None:
    """One side's turns of one session, each after the previous one's answer."""
    await s.send(turns[0], due)
    for r in turns[1:]:
        due = _now() + int(r.think_s * 1e9)
        if r.timed:
            due = max(due, start + int(r.offset_s * 1e9))
        await _until(due, stop)
        if stop.is_set():
            return
        await s.send(r, due)


async def _schedule(reqs: list[ReplayRequest], senders: list[_Sender], stop: _Stop) -> None:
    tasks: set[asyncio.Task] = set()
    start = _now() + 20_000_000  # a short lead so the first request is not late
    units: list[list[ReplayRequest]] = []  # a session's turns (consecutive), or one request
    for r in reqs:
        if r.session is not None and units and units[-1][0].session == r.session:
            units[-1].append(r)
        else:
            units.append([r])

    def finished(t: asyncio.Task) -> None:
        tasks.discard(t)
        if not tasks:
            stop.wake()

    try:
        for unit in units:
            if stop.is_set():
                break
            due = start + int(unit[0].offset_s * 1e9)
            await _until(due, stop)
            if stop.is_set():
                break
            for s in senders:
                job = (
                    s.send(unit[0], due) if len(unit) == 1 else _session(s, unit, start, due, stop)
                )
                t = asyncio.ensure_future(job)
                tasks.add(t)
                t.add_done_callback(finished)
        while tasks and not stop.is_set():
            await stop.sleep(None)  # woken by the last answer or a stop signal
    finally:
        for t in list(tasks):
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def replay_async(
    cfg: BenchmarkConfig, opt: ReplayOptions, reqs: list[ReplayRequest], info: ReplayInfo
) -> tuple[Path, str]:
    """Send ``reqs`` to both sides; (shadow directory, status). SIGINT, SIGTERM and
    SIGHUP stop it at once (``interrupted``: what is in flight is cut and recorded as
    such), also while it waits for the next arrival."""
    stop = _Stop()  # set by a stop signal only: the replay is then interrupted
    # in place before the first file is written: no signal lands between the two
    with loop_stop_signals(asyncio.get_running_loop(), lambda name: stop.set()):
        return await _replay(cfg, opt, reqs, info, stop)


async def _replay(
    cfg: BenchmarkConfig,
    opt: ReplayOptions,
    reqs: list[ReplayRequest],
    info: ReplayInfo,
    stop: _Stop,
) -> tuple[Path, str]:
    keys = info["api_keys"]
    stored = {k: v for k, v in info.items() if k != "api_keys"}
    sides = opt.sides()
    writer = ShadowWriter(
        opt.out,
        {
            "mode": "replay",
            "baseline": {"url": sides["baseline"].display, "model": info["models"]["baseline"]},
            "candidate": {
                "url": sides["candidate"].display,
                "model": info["models"]["candidate"],
            },  # fmt: skip
            "speed": opt.speed,
            "sequential": opt.sequential,
            **stored,
        },
    )
    for r in reqs:
        writer.add_trace(r.idx, r.offset_s, r.endpoint, r.bodies["baseline"])
    senders = {side: _Sender(side, ep, keys[side], cfg, writer) for side, ep in sides.items()}

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.25)
            writer.tick()

    tick = asyncio.ensure_future(ticker())
    samplers = _start_telemetry(cfg, writer.dir, sides)
    cancelled = False
    try:
        if opt.sequential:
            await _schedule(reqs, [senders["baseline"]], stop)
            if not stop.is_set():
                await _schedule(reqs, [senders["candidate"]], stop)
        else:
            await _schedule(reqs, [senders["baseline"], senders["candidate"]], stop)
    except asyncio.CancelledError:  # asyncio.run's own Ctrl-C, before our handlers
        cancelled = True
    finally:
        tick.cancel()
        for sender in senders.values():
            await sender.close()
        for sampler in samplers:  # its sources' states beside the table, for the verdict
            write_json_atomic(sampler.run_dir / "telemetry.json", sampler.stop())
        status = "interrupted" if cancelled or stop.is_set() else "completed"
        writer.close(status)
    return writer.dir, status


def _start_telemetry(cfg: BenchmarkConfig, out: Path, urls: dict[str, Endpoint]) -> list[Any]:
    """One sampler per side of the side's own Prometheus ``/metrics`` (running and
    waiting requests, KV-cache use, tokens: vLLM, SGLang, llama.cpp or TGI), written to
    ``telemetry-<side>/`` for the verdict's resources. Only the server's own metrics: the
    two sides usually run on other machines than this one, so this host's GPUs and CPU
    say nothing about either (their exporters do: docs/SHADOW.md)."""
    if not cfg.telemetry:
        return []
    from accelbench.telemetry.sampler import TelemetrySampler

    out_samplers = []
    for side, url in urls.items():
        d = out / f"telemetry-{side}"
        d.mkdir(parents=True, exist_ok=True)
        sampler = TelemetrySampler(
            d, interval_s=cfg.telemetry_interval_s, server_url=url, sources=["server"]
        )
        sampler.start()
        out_samplers.append(sampler)
    return out_samplers


def replay(cfg: BenchmarkConfig, opt: ReplayOptions, log: Log | None = None) -> tuple[Path, str]:
    """Replay ``cfg.workload.trace`` to both sides; returns (shadow directory, status)."""
    from accelbench.eventloop import install_uvloop

    log = log or (lambda m: None)
    opt.validate()
    if not cfg.workload.trace:
        raise UsageError("--trace is required")
    cfg.url = opt.baseline
    if cfg.ray is not None:
        raise UsageError(
            "--ray does not apply to shadow replay: it sends both sides' requests from this "
            "one process (Ray spreads run's load workers)"
        )
    cfg.validate()
    cfg.check_common_options()
    reqs, info = prepare(cfg, opt, log)
    install_uvloop()
    return asyncio.run(replay_async(cfg, opt, reqs, info))
