"""One benchmark run, end to end: check the server, plan the workload, drive the load
from worker processes, journal every record as it arrives, and finalize the run
directory (also when interrupted). The CLI's ``run`` is a thin wrapper over
``run_benchmark``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from accelbench import __version__
from accelbench.client.openai import build_body
from accelbench.client.session import OpenAIClient, get_json, load_api_key
from accelbench.errors import AccelbenchError, UsageError
from accelbench.lifetime import deferred_stop_signals, noted_stops, raised_stops
from accelbench.metrics.records import ErrorKind, RequestRecord
from accelbench.metrics.summary import ClientSection, Summary, WorkerStats, arrival_stamps
from accelbench.runner.config import BenchmarkConfig, discard_run_dir, new_run_dir
from accelbench.runner.finalize import STREAMS_PER_WORKER_KNEE, TelemetryStop, finalize_run
from accelbench.runner.loadgen import LOST_SERVER_AFTER, PhaseSpec, WorkerSpec
from accelbench.runner.probe import probe_with_retry
from accelbench.runner.servercache import read_counters, server_cache
from accelbench.runner.workers import WorkerPool
from accelbench.store.reader import RunInfo
from accelbench.store.rundir import JOURNAL, PARQUET, Journal
from accelbench.store.rundoc import (
    EMBEDDED_ENGINE_NAMES,
    EmbeddedEngine,
    Environment,
    RunDoc,
    Schedule,
    ServerInfo,
    ToolInfo,
    emulated_accelerator,
    write_run_doc,
)
from accelbench.urls import Endpoint
from accelbench.validate import missing_dirs, remove_empty_dirs
from accelbench.workload.plan import PlannedRequest, arrival_offsets, build_plan
from accelbench.workload.tokenizer import LocalTokenizer, Tokenizer, server_tokenizer_if_any
from accelbench.workload.traces import DEFAULT_BLOCK_SIZE

Log = Callable[[str], None]


# -- server discovery ------------------------------------------------------------------
def discover_server(url: str | Endpoint, api_key: str | None) -> ServerInfo:
    """The server's model list (required: proves it speaks the OpenAI API) and whatever
    version information it exposes (best effort)."""

    server = Endpoint.parse(url)

    async def go() -> ServerInfo:
        models = await get_json(server, "/v1/models", api_key)
        if not isinstance(models, dict) or not isinstance(models.get("data"), list):
            raise AccelbenchError(
                f"{server.display}/v1/models did not return an OpenAI model list: not an "
                "OpenAI-compatible server?"
            )
        info = ServerInfo(models=[_model_id(m) for m in models["data"]])
        if (acc := emulated_accelerator(info["models"])) is not None:
            info["emulated"] = acc
        for path, key in (("/version", "version"), ("/props", "props"),
                          ("/server_info", "server_info")):  # fmt: skip
            try:
                doc = await get_json(server, path, api_key, timeout=3)
            except AccelbenchError:
                continue
            if isinstance(doc, dict):
                keep = {
                    k: doc[k]
                    for k in ("version", "build_info", "model_path", "total_slots", "n_ctx")
                    if k in doc
                }
                if path == "/props" and "default_generation_settings" in doc:
                    keep["n_ctx"] = doc["default_generation_settings"].get("n_ctx")
                if keep:
                    info[key] = keep  # type: ignore[literal-required]  # one of the three
        return info

    return asyncio.run(go())


def _model_id(m: object) -> str | None:
    """A model's id from a /v1/models entry (a server's: anything may be there)."""
    mid = m.get("id") if isinstance(m, dict) else None
    return mid if isinstance(mid, str) else None if mid is None else str(mid)


def probe_request(
    cfg: BenchmarkConfig, api_key: str | None, prompt: str, max_tokens: int = 1
) -> RequestRecord:
    """One real request through the benchmark's own client path."""

    async def go() -> RequestRecord:
        assert cfg.url is not None  # connect() needs it; the embedded engine has set it
        client = OpenAIClient(
            cfg.url, endpoint=cfg.endpoint, stream=cfg.stream, api_key=api_key,
            timeout_s=min(cfg.timeout_s, 120.0), transport=cfg.transport,
        )  # fmt: skip
        rec = RequestRecord(idx=-1, request_id="probe")
        rec.t_sched = time.monotonic_ns()
        body = build_body(
            endpoint=cfg.endpoint, model=cfg.model or "", prompt=prompt, max_tokens=max_tokens,
            stream=cfg.stream, ignore_eos=cfg.ignore_eos, extra=cfg.extra_body,
        )  # fmt: skip
        try:
            await client.send(rec, body)
        finally:
            await client.close()
        return rec

    return asyncio.run(go())


def environment() -> Environment:
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    pkgs = {}
    for name in ("aiohttp", "uvloop", "orjson", "numpy", "pyarrow"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            pkgs[name] = version(name)
    return Environment(
        host=socket.gethostname(),
        platform=platform.platform(),
        cpu=cpu,
        cpu_count=os.cpu_count(),
        python=sys.version.split()[0],
        packages=pkgs,
    )


def auto_workers(cfg: BenchmarkConfig) -> int:
    """One worker per STREAMS_PER_WORKER_KNEE streams (the measured knee of the timing
    error; an open loop counts 2 s of arrivals as its streams), capped locally at half
    the cores: more only pay off with spare cores (on a 2-core box the server under test
    needs the other one). On Ray the cluster's cores, not this host's, decide."""
    cores = os.cpu_count() or 1
    rate = cfg.rate
    if cfg.workload.trace:  # the trace's mean arrival rate
        from accelbench.workload.traces import trace_stats

        stats = trace_stats(cfg.workload.trace, block_size=cfg.workload.trace_block_size)
        n, span = stats.requests, stats.span_s
        rate = n / span if span > 0 else None
    load = cfg.concurrency or cfg.max_concurrency or int((rate or 1) * 2)
    wanted = max(1, math.ceil(load / STREAMS_PER_WORKER_KNEE))
    if cfg.ray == "local":  # joined before the plan: the actors it can place, one CPU each
        from accelbench.runner.cluster.ray_workers import local_cpus

        return max(1, min(wanted, int(local_cpus())))
    if cfg.ray is not None:
        return wanted
    if cores <= 2:
        return 1
    return min(cores // 2, wanted)


def planned_measured(cfg: BenchmarkConfig) -> int:
    """How many measured requests to plan: ``BenchmarkConfig.planned_measured``."""
    return cfg.planned_measured()


def resolve_workers(cfg: BenchmarkConfig, n_measured: int) -> int:
    """The load workers the run uses: ``--workers`` as given (``check_run_options``
    refused more than the streams or requests can feed), else ``auto_workers`` within
    those bounds."""
    if cfg.workers is not None:
        return cfg.workers
    n = auto_workers(cfg)
    closed = cfg.rate is None and not cfg.workload.trace
    streams = cfg.concurrency if closed else cfg.max_concurrency
    return max(1, min(n, streams or n, n_measured))


def _split(n: int | None, k: int, parts: int) -> int | None:
    if n is None:
        return None
    return n // parts + (1 if k < n % parts else 0)


# -- the run -------------------------------------------------------------------------
@contextlib.contextmanager
def embedded_engine(cfg: BenchmarkConfig, log: Log) -> Iterator[Any]:
    if cfg.url is not None:
        yield None
        return
    from accelbench.engines.embedded import running_engine

    with running_engine(cfg.embedded_engine, cfg.embedded_model,
                        parallel=cfg.embedded_parallel, log=log) as s:  # fmt: skip
        cfg.url, cfg.engine_started = Endpoint.parse(s.url), True
        cfg.model = cfg.model or s.alias
        yield s


@dataclass(frozen=True)
class RunResult:
    """What a run ended with: its status (run.json ``status``), its directory, its
    summary and its run.json, as written, so that callers need not read them back."""

    status: str  # completed | interrupted | failed | partial
    directory: Path
    summary: Summary
    doc: RunDoc
    # failed only because no measured request succeeded (the load itself ran to its end)
    all_requests_failed: bool = False

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    def run_info(self) -> RunInfo:
        """The run as analysis sees it (``store.reader.load_run``), from what is held."""
        return RunInfo(self.directory, self.doc.run_id, self.doc, self.summary,
                       has_requests=(self.directory / PARQUET).exists())  # fmt: skip


def run_benchmark(
    cfg: BenchmarkConfig,
    *,
    progress: bool = False,
    log: Log | None = None,
) -> RunResult:
    """Run one benchmark and return its result (the run directory is always finalized,
    also when interrupted: every completed record and a valid summary of what finished).

    Prints nothing unless asked: ``progress`` shows Rich progress bars on stderr and
    ``log`` receives one-line status messages (the CLI passes both).
    """
    from accelbench.console import console as make_console

    console = make_console(stderr=True)
    log = log or (lambda msg: None)
    cfg.validate()
    cfg.check_run_options()
    root = Path(cfg.out_dir).parent if cfg.out_dir else Path(cfg.results_root)
    made = missing_dirs(root)  # removed again, while empty, when the run fails to start
    try:  # fail before an engine is started or a prompt is planned
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {root}: {exc.strerror or exc}") from None
    try:
        if cfg.ray is not None:  # join (or start) the cluster before anything is written
            from accelbench.runner.cluster.ray_workers import connect as ray_connect

            ray_connect(cfg.ray)
        stop = LoadStop()
        # a stop signal while the run prepares (the engine starting, the plan being made)
        # raises KeyboardInterrupt; once the load starts it is noted, and the run ends in
        # order: every file finished, the engine stopped (docs/PROCESSES.md)
        with noted_stops(stop), contextlib.ExitStack() as stack:
            with raised_stops():
                engine = stack.enter_context(embedded_engine(cfg, log))
            return _run(cfg, log, progress, console, engine, stop)
    except BaseException:  # an unknown model, no server, a bad key file: no empty results/
        remove_empty_dirs(made)
        raise


@dataclass
class Target:
    """The server a run talks to, as found before the first measured request."""

    api_key: str | None
    server: ServerInfo  # what /v1/models and the server's version endpoints said
    tok: Tokenizer | None  # the server's own tokenizer, or --tokenizer
    special: int  # tokens the server adds to every prompt (BOS, chat template)


def connect(cfg: BenchmarkConfig, log: Log) -> Target:
    """Find the server's models (filling in ``cfg.model``), its tokenizer, and with a
    probe request (retried) what it adds to every prompt, so synthetic ISLs are exact
    in its own count. Used by every command that sends load."""
    assert cfg.url is not None
    api_key = load_api_key(cfg.api_key_env, cfg.api_key_file)
    server = discover_server(cfg.url, api_key)
    models = [m for m in server["models"] if m]
    if cfg.model is None:
        if not models:
            raise AccelbenchError("the server lists no models: give --model")
        cfg.model = models[0]
    elif models and cfg.model not in models:
        raise AccelbenchError(
            f"model {cfg.model!r} is not served at {cfg.url.display}; "
            f"it serves: {', '.join(models)}"
        )
    tok: Tokenizer | None
    if cfg.workload.tokenizer:
        tok = LocalTokenizer(cfg.workload.tokenizer)
    else:
        tok = server_tokenizer_if_any(cfg.url, cfg.model, api_key)
    probe_text = "The quick brown fox jumps over the lazy dog."
    probe = probe_with_retry(lambda: probe_request(cfg, api_key, probe_text), cfg.url, log=log)
    special = 0
    if tok is not None and probe.isl is not None:
        special = max(0, probe.isl - len(tok.encode(probe_text)))
    return Target(api_key, server, tok, special)


def new_run_doc(
    cfg: BenchmarkConfig,
    run_dir: Path,
    target: Target,
    engine: Any,
    *,
    planned: int | None,
    kind: str | None = None,
    mlperf: dict[str, object] | None = None,
) -> RunDoc:
    """run.json at a run's start (status ``running``): what ran, against what, where.
    ``engine`` is the embedded engine that was started (None: ``--url``); run.json names
    it as it really is (``EMBEDDED_ENGINE_NAMES``)."""
    assert cfg.url is not None
    server = ServerInfo(url=cfg.url.display)
    server.update(target.server)
    if engine is not None:
        name = EMBEDDED_ENGINE_NAMES.get(cfg.embedded_engine, cfg.embedded_engine)
        server["embedded"] = EmbeddedEngine(engine=name, args=[str(a) for a in engine.args[1:]])
    doc = RunDoc(
        run_id=run_dir.name,
        status="running",
        config=cfg.to_json(),
        kind=kind,
        tool=ToolInfo(name="accelbench", version=__version__),
        started_at=datetime.now(UTC).isoformat(),
        planned_requests=planned,
        environment=environment(),
        server=server,
        tokenizer=getattr(target.tok, "name", None),
        special_tokens_per_prompt=target.special,
        mlperf=mlperf,
    )
    with contextlib.suppress(Exception):
        from accelbench.doctor import quick_summary

        doc.doctor = dict(quick_summary())
    return doc


def _run(
    cfg: BenchmarkConfig, log: Log, progress: bool, console: Any, engine: Any, stop: LoadStop
) -> RunResult:
    """The run, under ``run_benchmark``'s ``noted_stops(stop)``: until the load starts a
    stop signal raises KeyboardInterrupt (nothing to keep: the run directory, if made, is
    removed; exit 130); from then on it is noted, stops the load, and the run's files are
    finished (status interrupted; docs/PROCESSES.md)."""
    wl = cfg.workload
    structured = wl.sessions is not None or wl.shared_prefixes or wl.trace
    run_dir: Path | None = None
    sampler = None
    try:
        with raised_stops():
            target = connect(cfg, log)
            assert cfg.url is not None  # connect() needs it; the embedded engine has set it
            api_key, tok, special = target.api_key, target.tok, target.special

            n_warm = cfg.warmup_requests
            n_measured = planned_measured(cfg)
            total = n_warm + n_measured
            what = "sessions" if cfg.workload.sessions is not None else "requests"
            kind = "synthetic" if not cfg.workload.dataset else "dataset"
            log(f"planning {total} {what} ({kind})")
            notes: list[str] = []  # what the dataset or trace loader left out: printed, recorded
            plan = _plan_with_progress(cfg, total, tok, special, progress and total >= 200,
                                       console, notes)  # fmt: skip
            for note in notes:
                log(f"warning: {note}")
            if _has_sessions(plan):  # warm-up: whole sessions; count turns
                n_warm, n_measured = _session_warmup(plan, cfg, notes)

            with deferred_stop_signals():  # the directory, and the name that removes it
                run_dir, short = new_run_dir(cfg)
            # a duration alone plans no count (null); with -n (or a trace) too, the
            # run stops at whichever comes first and that count is the plan
            bounded = cfg.duration_s is None or cfg.known_measured() is not None
            doc = new_run_doc(cfg, run_dir, target, engine,
                              planned=n_measured if bounded else None)  # fmt: skip
            write_run_doc(run_dir, doc)
            n_workers = resolve_workers(cfg, n_measured)
            specs = _worker_specs(cfg, plan, n_warm, n_workers, api_key or None, short)
            sampler = _start_telemetry(cfg, run_dir, engine)
            before = read_counters(cfg.url) if structured else None
    except KeyboardInterrupt:  # before the first request: nothing to keep
        if sampler is not None:
            sampler.halt()
        if run_dir is not None:
            discard_run_dir(run_dir)
        raise
    status, client = _drive(specs, run_dir, doc, cfg, n_warm, n_measured, progress, console,
                            sampler, stop)  # fmt: skip
    client["warnings"] = notes + client["warnings"]  # summary.json and run.json ``client``
    if structured:
        client["server_cache"] = server_cache(
            before, read_counters(cfg.url), block_size=wl.block_size,
            capacity_tokens=wl.kv_capacity_tokens,
            trace_block_size=(wl.block_size or DEFAULT_BLOCK_SIZE) if wl.trace else None,
        )  # fmt: skip
        doc.client = client
    del specs, plan  # the prompts: the end of the run has no use for them
    summary = end_run(run_dir, doc=doc, tok=tok, status=status, client=client, sampler=sampler)
    # a run that ran to its end with no measured request succeeding has failed
    # (finalize.no_request_succeeded): its run.json says so
    requests_failed = status == "completed" and doc.status == "failed"
    status = doc.status
    return RunResult(status=status, directory=run_dir, summary=summary, doc=doc,
                     all_requests_failed=requests_failed)  # fmt: skip


class LoadStop:
    """What a stop signal does during a run (``noted_stops``' callback): the first asks
    the load workers to finish (in flight: recorded ``interrupted``, every record
    flushed), a second kills them. Before the workers exist and after they are done, it
    is only counted; ``_drive`` takes the count when the load ends (the run's status)."""

    def __init__(self) -> None:
        self.count = 0
        self.pool: Any = None  # the load's WorkerPool while it runs

    def __call__(self, name: str) -> None:
        self.count += 1
        if self.pool is not None:
            self.pool.stop()
            if self.count >= 2:
                self.pool.kill()


def end_run(
    run_dir: Path,
    *,
    doc: RunDoc | None = None,
    tok: Tokenizer | None = None,
    status: str,
    client: ClientSection,
    sampler: TelemetryStop | None,
) -> Summary:
    """The end of a run, in one pass (``finalize_run``): requests.parquet, the summary,
    the sampler stopped with the summary's window and token counts, summary.json once."""
    return finalize_run(run_dir, doc=doc, tok=tok, status=status, client=client,
                        sampler=sampler)  # fmt: skip


def _plan_with_progress(
    cfg: BenchmarkConfig,
    total: int,
    tok: Tokenizer | None,
    special: int,
    show: bool,
    console: Any,
    notes: list[str],
) -> list[PlannedRequest]:
    """Build the plan; prompts of exact length cost tokenizer round trips, so show progress.
    ``notes`` gets the loaders' notes (``build_plan``)."""
    chat = cfg.endpoint == "chat"
    if not show:
        return build_plan(cfg.workload, total, tok, special_tokens=special, chat=chat,
                          notes=notes)  # fmt: skip
    from rich.progress import Progress

    with Progress(console=console, transient=True) as prog:
        task = prog.add_task("preparing prompts", total=total)
        return build_plan(
            cfg.workload, total, tok, special_tokens=special, chat=chat, notes=notes,
            progress=lambda done, n: prog.update(task, completed=done, total=n),
        )  # fmt: skip


def _worker_specs(
    cfg: BenchmarkConfig,
    plan: list[PlannedRequest],
    n_warm: int,
    n_workers: int,
    api_key: str | None,
    tag: str,
) -> list[WorkerSpec]:
    if _has_sessions(plan):
        return _session_specs(cfg, plan, n_warm, n_workers, api_key, tag)
    offsets = None
    if plan and plan[0].offset_s is not None:  # --trace: its own arrival times
        arr = np.array([p.offset_s or 0.0 for p in plan])
        warm, meas = arr[:n_warm], arr[n_warm:]
        offsets = (warm - (warm[0] if warm.size else 0), meas - (meas[0] if meas.size else 0))
    elif cfg.rate is not None:
        seed = cfg.workload.seed
        warm_off = arrival_offsets(max(n_warm, 1), cfg.rate, cfg.arrival, cfg.burstiness, seed)
        meas_off = arrival_offsets(
            len(plan) - n_warm, cfg.rate, cfg.arrival, cfg.burstiness, seed + 1
        )
        offsets = (warm_off, meas_off)
    specs = []
    for k in range(n_workers):
        phases = []
        for name, lo, hi in (("warmup", 0, n_warm), ("measured", n_warm, len(plan))):
            if hi <= lo:
                continue
            if cfg.rate is None and offsets is None and n_workers > 1:
                idxs = list(range(lo, hi))  # shared: workers take turns through a counter
            else:
                idxs = list(range(lo + k, hi, n_workers))
            items = [(i, plan[i]) for i in idxs]
            offs = None
            if offsets is not None:
                arr = offsets[0] if name == "warmup" else offsets[1]
                offs = [float(arr[i - lo]) for i in idxs]
            phases.append(
                PhaseSpec(
                    name=name,
                    items=items,
                    offsets=offs,
                    concurrency=None
                    if cfg.rate is not None
                    else _split(cfg.concurrency, k, n_workers),
                    max_concurrency=_split(cfg.max_concurrency, k, n_workers),
                    duration_s=cfg.duration_s if name == "measured" else None,
                    cycle=cfg.num_requests is None,  # -n and -d: whichever comes first
                    drain_timeout_s=cfg.drain_timeout_s,
                )
            )
        specs.append(_worker_spec(cfg, k, n_workers, api_key, tag, phases))
    # a worker with no closed-loop slots gets none of the requests
    return [s for s in specs if any(p.items for p in s.phases) or s.worker == 0]


def _worker_spec(
    cfg: BenchmarkConfig,
    k: int,
    n_workers: int,
    api_key: str | None,
    tag: str,
    phases: list[PhaseSpec],
) -> WorkerSpec:
    return WorkerSpec(
        worker=k,
        n_workers=n_workers,
        base_url=cfg.url or Endpoint.parse(""),  # connect() has made sure of one
        model=cfg.model or "",
        endpoint=cfg.endpoint,
        stream=cfg.stream,
        api_key=api_key,
        timeout_s=cfg.timeout_s,
        ignore_eos=cfg.ignore_eos,
        extra_body=cfg.extra_body,
        save_text=cfg.save_text,
        run_tag=tag,
        phases=phases,
        transport=cfg.transport,
    )


Session = list[tuple[int, PlannedRequest]]


def _has_sessions(plan: list[PlannedRequest]) -> bool:
    """Whether any request is a session's turn (a trace's first request may be a lone
    one, its sessions later): then the session-aware workers send the plan."""
    return any(r.session is not None for r in plan)


def _session_groups(plan: list[PlannedRequest]) -> list[Session]:
    """The plan's sessions: runs of consecutive turns of one session, in plan order."""
    groups: list[Session] = []
    for i, req in enumerate(plan):
        if not groups or req.turn == 0 or groups[-1][-1][1].session != req.session:
            groups.append([])
        groups[-1].append((i, req))
    return groups


def _warm_sessions(groups: list[Session], cfg: BenchmarkConfig) -> list[Session]:
    """The warm-up's sessions: ``--warmup`` sessions with --sessions; of a trace, every
    session that starts within its first ``--warmup`` requests (whole sessions)."""
    if cfg.workload.sessions is not None:
        return groups[: cfg.warmup_requests]
    return [g for g in groups if g[0][0] < cfg.warmup_requests]


def _session_warmup(
    plan: list[PlannedRequest], cfg: BenchmarkConfig, notes: list[str]
) -> tuple[int, int]:
    """(warm-up requests, measured requests) of a plan of sessions. A trace's warm-up
    is the whole sessions that start within its first ``--warmup`` requests, so it can
    hold more requests than ``--warmup`` (said in ``notes``), and all of them (refused:
    nothing would be measured)."""
    warm = _warm_sessions(_session_groups(plan), cfg)
    n_warm = sum(len(g) for g in warm)
    n_measured = len(plan) - n_warm
    if cfg.workload.sessions is None and n_warm > cfg.warmup_requests:
        trace = cfg.workload.trace
        if n_measured == 0:
            raise UsageError(
                f"--warmup {cfg.warmup_requests} leaves nothing to measure: the warm-up takes "
                f"whole sessions, and the {len(warm):,} sessions (or requests) that start "
                f"within the trace's first {cfg.warmup_requests:,} requests hold all "
                f"{len(plan):,} of {trace}'s planned requests"
            )
        notes.append(
            f"--warmup {cfg.warmup_requests}: the warm-up takes whole sessions: the "
            f"{len(warm):,} sessions (or requests) that start within the trace's first "
            f"{cfg.warmup_requests:,} requests are {n_warm:,} requests; {n_measured:,} are "
            "measured"
        )
    return n_warm, n_measured


def _first_offset(g: Session) -> float:
    return g[0][1].offset_s or 0.0


def _shifted(gs: list[Session]) -> list[Session]:
    """Trace times counted from the phase's first session (its schedule's zero)."""
    if not gs:
        return gs
    first = _first_offset(gs[0])
    if first == 0:
        return gs
    return [[(i, replace(r, offset_s=None if r.offset_s is None else r.offset_s - first))
             for i, r in g] for g in gs]  # fmt: skip


def _session_specs(
    cfg: BenchmarkConfig,
    plan: list[PlannedRequest],
    n_warm: int,
    n_workers: int,
    api_key: str | None,
    tag: str,
) -> list[WorkerSpec]:
    """Workers for a plan of sessions: a session's turns stay on one worker. A closed
    loop over several workers shares the sessions through a counter; an open loop
    deals them out, each starting at its arrival offset (``--rate`` counts sessions
    per second; a trace gives its first turn's time)."""
    groups = _session_groups(plan)
    warm_n = len(_warm_sessions(groups, cfg))
    phase_groups: list[tuple[str, list[Session]]] = [
        ("warmup", groups[:warm_n]), ("measured", groups[warm_n:])
    ]  # fmt: skip
    traced = plan[0].offset_s is not None
    if traced:  # a trace's sessions start in time order, from the phase's first one
        phase_groups = [(name, _shifted(sorted(gs, key=_first_offset)))
                        for name, gs in phase_groups]  # fmt: skip
    closed = cfg.rate is None and not traced
    specs = []
    for k in range(n_workers):
        phases = []
        for name, gs in phase_groups:
            if not gs:
                continue
            offsets: list[float] | None = None
            if traced:
                offsets = [_first_offset(g) for g in gs]
            elif cfg.rate is not None:
                seed = cfg.workload.seed + (0 if name == "warmup" else 1)
                arr = arrival_offsets(len(gs), cfg.rate, cfg.arrival, cfg.burstiness, seed)
                offsets = [float(x) for x in arr]
            mine = list(range(len(gs))) if closed and n_workers > 1 else list(
                range(k, len(gs), n_workers))  # fmt: skip
            sessions = [gs[i] for i in mine]
            phases.append(
                PhaseSpec(
                    name=name,
                    items=[it for g in sessions for it in g],
                    offsets=None if offsets is None else [offsets[i] for i in mine],
                    concurrency=_split(cfg.concurrency, k, n_workers) if closed else None,
                    max_concurrency=_split(cfg.max_concurrency, k, n_workers),
                    duration_s=cfg.duration_s if name == "measured" else None,
                    cycle=False,
                    drain_timeout_s=cfg.drain_timeout_s,
                    sessions=sessions,
                )
            )
        specs.append(_worker_spec(cfg, k, n_workers, api_key, tag, phases))
    return [s for s in specs if any(p.items for p in s.phases) or s.worker == 0]


def _drive(
    specs: list[WorkerSpec],
    run_dir: Path,
    doc: RunDoc,
    cfg: BenchmarkConfig,
    n_warm: int,
    n_measured: int,
    progress: bool,
    console: Any,
    sampler: Any,
    stop: LoadStop,
) -> tuple[str, ClientSection]:
    """Start the workers, journal their records, stop them on a stop signal (``stop``,
    under the caller's ``noted_stops``); return (status, client). run.json (``doc``) gets
    the schedule (and with Ray the cluster) as they are known."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    journal = Journal(run_dir / JOURNAL)
    pool: Any
    if cfg.ray is not None:  # load workers as Ray actors across a cluster (cluster/)
        from accelbench.runner.cluster.ray_workers import RayWorkerPool

        pool = RayWorkerPool(specs, cfg.ray)
    else:
        pool = WorkerPool(specs)
    stop.pool = pool
    if stop.count:  # stopped in the instant before: start no worker
        pool.stop()
    stopped = 0  # the stop signals that came before the load ended
    cpu0 = time.process_time()
    crashes: list[str] = []
    lost_actors: list[str] = []  # Ray: actors or nodes that died (their streamed records are kept)
    worker_stats: list[WorkerStats] = []
    t_start = time.monotonic()
    counts = {"done": 0, "measured": 0, "errors": 0, "tokens": 0}
    lost = 0  # consecutive connection failures
    abort_reason: str | None = None
    total = None if cfg.duration_s else n_warm + n_measured
    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )
    try:
        try:
            pool.start()
        except AccelbenchError:  # no actor placed, a version mismatch: nothing was sent
            if sampler is not None:
                sampler.halt()
            journal.close()
            discard_run_dir(run_dir)
            raise
        if cfg.ray is not None:
            doc.cluster = pool.cluster_info()
            write_run_doc(run_dir, doc)
        if sampler is not None:
            sampler.set_phase("warmup" if n_warm else "measured")
        with prog:
            task = prog.add_task("requests", total=total, info="")
            pool.release()
            doc.schedule = schedule_doc(cfg, specs, pool.start_ns)
            write_run_doc(run_dir, doc)
            for kind, w, payload in pool.events():
                if kind == "records":
                    journal.write(payload)
                    for r in payload:
                        # a server that stopped accepting connections: stop, don't spin
                        if r.get("error_kind") == ErrorKind.CONNECT_ERROR:
                            lost += 1
                            if lost == LOST_SERVER_AFTER:
                                abort_reason = (
                                    f"stopped: {lost} connection attempts in a row failed "
                                    f"({r.get('error')})"
                                )
                                pool.stop()
                        elif r.get("error_kind") != ErrorKind.INTERRUPTED:
                            lost = 0
                        counts["done"] += 1
                        if not r["warmup"]:
                            counts["measured"] += 1
                        if not r["ok"] and r.get("error_kind") != ErrorKind.INTERRUPTED:
                            counts["errors"] += 1
                        if r["ok"]:  # a failed response's usage counts nothing
                            counts["tokens"] += r.get("osl_server") or len(r["chunk_times"])
                    if (
                        sampler is not None
                        and n_warm
                        and counts["done"] - counts["measured"] >= n_warm
                    ):
                        sampler.set_phase("measured")
                    el = max(1e-9, time.monotonic() - t_start)
                    prog.update(
                        task,
                        completed=counts["done"],
                        info=f"{counts['tokens'] / el:,.0f} tok/s  errors {counts['errors']}",
                    )
                elif kind == "tick":
                    journal.flush_if_due()
                elif kind == "stats":
                    worker_stats.append(payload)
                elif kind == "crash":
                    crashes.append(f"worker {w}: {payload.splitlines()[0]}")
                    pool.stop()
                elif kind == "lost":
                    lost_actors.append(payload)
    finally:
        stopped = stop.count  # a stop after this cut nothing short: the load was done
        stop.pool = None
        journal.close()
        pool.kill()
        if cfg.ray is not None and pool.start_ns is not None:
            doc.cluster = pool.cluster_info()
            write_run_doc(run_dir, doc)
    if sampler is not None:
        sampler.set_phase("drain")
    cpu_parent = time.process_time() - cpu0
    cpu_workers = sum(s.get("cpu_s", 0.0) for s in worker_stats)
    wall = time.monotonic() - t_start
    chunks = max(1, counts["tokens"])
    client = ClientSection(
        workers=worker_stats,
        n_workers=len(specs),
        cpu_s=cpu_parent + cpu_workers,
        cpu_s_workers=cpu_workers,
        cpu_s_parent=cpu_parent,
        cpu_util=(cpu_parent + cpu_workers) / wall if wall > 0 else None,
        cpu_us_per_chunk=1e6 * cpu_workers / chunks,
        loop_lag_ms_p99=max((s.get("loop_lag_ms_p99", 0.0) for s in worker_stats), default=None),
    )
    client.update(arrival_stamps(worker_stats))
    client["start_late_ms_max"] = max(
        (ph["late_ms"] for st in worker_stats for ph in st.get("phases", [])), default=None
    )
    client["warnings"] = (
        [f"load worker crashed: {c}" for c in crashes]
        + [
            f"load worker {st.get('worker')} stopped: {st['driver_lost']}"
            for st in worker_stats
            if st.get("driver_lost")
        ]  # fmt: skip
        + ([abort_reason] if abort_reason else [])
        + [f"{x}; the run is partial" for x in lost_actors]
    )
    if crashes or abort_reason:
        status = "failed"
    elif stopped:
        status = "interrupted"
    elif lost_actors:
        status = "partial"
    else:
        status = "completed"
    return status, client


def schedule_doc(cfg: BenchmarkConfig, specs: list[WorkerSpec], start_ns: int | None) -> Schedule:
    """run.json's ``schedule``: how the load was sent, as it was (docs/RESULTS.md). The
    workers share one start instant (``start_ns``, the driver's monotonic clock); each
    worker's residual against it is in summary.json ``client.workers[].phases``."""
    measured = [p for s in specs for p in s.phases if p.name == "measured"]
    return Schedule(
        mode=cfg.mode,
        open_loop=cfg.mode != "concurrency",
        workers=len(specs),
        start_ns=start_ns,
        # closed loop: streams per worker; open loop: the cap per worker (None: uncapped)
        concurrency=[p.concurrency for p in measured] if cfg.mode == "concurrency" else None,
        max_concurrency=[p.max_concurrency for p in measured]
        if cfg.max_concurrency is not None
        else None,
        duration_s=cfg.duration_s,
        num_requests=cfg.num_requests,
        warmup_requests=cfg.warmup_requests,
    )


def _start_telemetry(cfg: BenchmarkConfig, run_dir: Path, engine: Any) -> Any:
    if not cfg.telemetry:
        return None
    try:
        from accelbench.health.sampler import HealthSampler as TelemetrySampler
    except ImportError:
        return None
    try:
        s = TelemetrySampler(
            run_dir,
            interval_s=cfg.telemetry_interval_s,
            server_url=cfg.url,
            server_pid=engine.pid if engine is not None else None,
        )
        s.start()
        return s
    except Exception:  # noqa: BLE001 - telemetry must never break a benchmark
        return None
