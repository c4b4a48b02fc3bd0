"""One MLPerf scenario run on LoadGen, end to end (the typed API under ``accelbench
mlperf``; it prints nothing).

The run directory is an ordinary accelbench run (run.json, requests.jsonl,
requests.parquet, summary.json: every other command works on it) plus LoadGen's own
``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``, untouched, and ``mlperf.json``:
LoadGen's verdict, the settings it ran under, and whether the run is compliant.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from accelbench.errors import UsageError
from accelbench.lifetime import STOP_SIGNALS
from accelbench.metrics.summary import ClientSection, MlperfSection, WorkerStats, arrival_stamps
from accelbench.metrics.verdict import Status, from_word, word
from accelbench.runner.benchmark import (
    Log,
    connect,
    embedded_engine,
    new_run_doc,
)
from accelbench.runner.config import BenchmarkConfig, new_run_dir
from accelbench.runner.finalize import finalize_run
from accelbench.store.rundir import JOURNAL, Journal
from accelbench.store.rundoc import RunDoc, write_run_doc
from accelbench.suites.mlperf import loadgen
from accelbench.suites.mlperf.document import MlperfDoc, write_mlperf
from accelbench.suites.mlperf.logs import (
    SUMMARY_FILE,
    TRACE_FILE,
    LoadGenResult,
    read_issue_side,
    read_loadgen,
)
from accelbench.suites.mlperf.qsl import is_mlperf_dataset, read_records, samples_from_records
from accelbench.suites.mlperf.settings import MlperfSettings, build, compliance
from accelbench.suites.mlperf.sut import LoadGenSUT, SutOptions
from accelbench.workload.plan import PlannedRequest, build_plan
from accelbench.workload.tokenizer import Tokenizer

DATASET_FORMATS = ("auto", "mlperf", "sharegpt", "prompts", "chat")
MAX_SAMPLES = 1_000_000
SWITCH_INTERVAL_S = 0.0002
# Offline hands LoadGen's every sample over at once: without a cap each would hold a
# socket (24,576 for llama2-70b). 512 is above the batch of common engines (vLLM's
# max_num_seqs 256), so the server stays full; --max-concurrency changes it.
OFFLINE_MAX_CONCURRENCY = 512
# open files beside the requests' sockets: LoadGen's logs, the journal, the engine's
# pipes, Python's own; measured in use at the check, plus this margin
FD_MARGIN = 64
# After a stop signal, once the SUT has answered every sample, LoadGen gets this long to
# return by itself (Offline does; 6,608 samples took 0.1-0.35 s here); otherwise its
# issue thread is left asleep in its schedule and the run is finalized without it.
STOP_GRACE_S = 0.25
DEFAULT_SAMPLES = 1024  # synthetic set size without --samples


@dataclass
class QslOptions:
    """Where the query sample library comes from."""

    samples: int | None = None  # set size (LoadGen draws queries from it); None: 1024
    dataset: str | None = None
    dataset_format: str = "auto"  # auto | mlperf | sharegpt | prompts | chat
    allow_pickle: bool = False

    @property
    def size(self) -> int:
        """The synthetic or accelbench-dataset set size: --samples, else 1024."""
        return DEFAULT_SAMPLES if self.samples is None else self.samples

    @property
    def mlperf_dataset(self) -> bool:
        """Whether --dataset is an MLPerf set (its records are the samples)."""
        return bool(self.dataset) and (
            self.dataset_format == "mlperf"
            or (self.dataset_format == "auto" and is_mlperf_dataset(str(self.dataset)))
        )


@dataclass
class MlperfResult:
    """What one run found. ``result`` is LoadGen's VALID / INVALID (None when LoadGen
    gave none); ``compliant`` is False with ``noncompliance`` naming each reason."""

    run_dir: Path
    status: str
    result: str | None
    reasons: list[str]
    compliant: bool
    noncompliance: list[str]
    figures: dict[str, float | None]
    peak_qps: float | None
    wall_s: float
    summary_text: str
    doc: MlperfDoc | None = None  # mlperf.json as written
    # interrupted while LoadGen's issue thread slept in its schedule: it is still there,
    # parked; the CLI leaves with os._exit (docs/MLPERF.md, "Stopping")
    loadgen_running: bool = False

    @property
    def ok(self) -> bool:
        """Completed and VALID; for a peak search, completed with a peak found (LoadGen's
        logs then describe its last step, which may be the invalid one above the peak).
        The CLI exits 0 only then."""
        if self.status != "completed":
            return False
        if self.doc is not None and self.doc.requests.get("not_ok"):
            return False  # a failed sample is never a pass, whatever LoadGen said
        if self.doc is not None and self.doc.find_peak:
            return self.peak_qps is not None
        return self.verdict_status == Status.PASS

    @property
    def verdict_status(self) -> Status:
        """The result in the one status vocabulary (VALID / INVALID are MLPerf's words
        for pass / fail); ``unknown`` when LoadGen gave none."""
        return Status.UNKNOWN if self.result is None else from_word(self.result, "mlperf")


def loadgen_version() -> str | None:
    try:
        return version("mlcommons-loadgen")
    except PackageNotFoundError:
        return None


def run_mlperf(
    cfg: BenchmarkConfig, ms: MlperfSettings, qsl: QslOptions, *, log: Log | None = None
) -> MlperfResult:
    """Run one scenario (or a Server peak search) and return its result."""
    log = log or (lambda msg: None)
    ms.validate()
    _check_qsl(qsl)
    if cfg.ray is not None:  # before validate(), which would ask for Ray itself
        raise UsageError(
            "--ray does not apply to mlperf: MLPerf runs on one LoadGen process (Ray "
            "spreads run's load workers)"
        )
    cfg.validate()
    _check_combinations(cfg, qsl)
    if ms.lg_scenario == "SingleStream" and cfg.max_concurrency is not None:
        # LoadGen issues the next query when the last completes: the cap changed nothing,
        # yet the run said "at most 4 in flight"
        raise UsageError("--max-concurrency does not apply to single-stream (one query at a time)")
    if ms.lg_scenario == "Server" and not cfg.stream:
        # unstreamed, the first token is marked when the whole reply came: LoadGen judged
        # TTFT as the full latency and TPOT as ~0 ms against the benchmark's limits
        raise UsageError(
            f"--no-stream does not apply to {ms.scenario}: LoadGen judges its TTFT and TPOT "
            "limits, which need the tokens streamed"
        )
    lg = loadgen()  # fail before an engine is started
    build(ms, qsl.size)  # the effective settings and the schedule checked before a connect
    if _PARKED:
        raise UsageError(
            "an interrupted LoadGen test is still asleep in this process (LoadGen has no "
            "way to stop it): start the next run in a new process"
        )
    root = Path(cfg.out_dir).parent if cfg.out_dir else Path(cfg.results_root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {root}: {exc.strerror or exc}") from None
    with embedded_engine(cfg, log) as engine:
        return _run(lg, cfg, ms, qsl, log, engine)


def _check_combinations(cfg: BenchmarkConfig, q: QslOptions) -> None:
    """What `run` refuses as unused is refused here too (``check_common_options``): a
    dataset (any format) gives the prompts, so the synthetic lengths' shape is unused."""
    c = replace(cfg, workload=replace(cfg.workload))
    if q.dataset is not None:
        c.workload.dataset = q.dataset
    c.check_common_options()
    if q.dataset is None and (q.dataset_format != "auto" or q.allow_pickle):
        raise UsageError("--dataset-format and --allow-pickle apply to --dataset only")
    if q.mlperf_dataset and c.is_set(c.workload, "seed"):
        # it draws synthetic prompts or an accelbench dataset's; LoadGen draws its queries
        # with mlperf.conf's own seeds (recorded in run.json, the seed changed nothing)
        raise UsageError(
            f"--seed does not apply to an MLPerf dataset ({q.dataset}): its records are the "
            "samples and LoadGen draws queries with mlperf.conf's seeds"
        )


def _check_qsl(q: QslOptions) -> None:
    from accelbench import validate as v

    if q.samples is not None:
        q.samples = v.integer("--samples", q.samples, 1, MAX_SAMPLES)
    v.choice("--dataset-format", q.dataset_format, DATASET_FORMATS)
    if q.dataset is not None:
        v.input_file("--dataset", q.dataset)
        if q.samples is not None and q.mlperf_dataset:
            # every record is a sample: --samples 3 over 8 records ran all 8 without a word
            raise UsageError(
                f"--samples does not apply to an MLPerf dataset ({q.dataset}): each of "
                "its records is one sample; give a file of the records to use"
            )


def _samples(
    cfg: BenchmarkConfig,
    q: QslOptions,
    tok: Tokenizer | None,
    special: int,
    notes: list[str] | None = None,
) -> tuple[list[PlannedRequest], str]:
    """The QSL's samples and what they are ("synthetic", "mlperf-dataset", "dataset");
    ``notes`` gets the dataset loader's notes (records left out)."""
    if q.dataset and q.mlperf_dataset:
        rows = read_records(q.dataset, allow_pickle=q.allow_pickle)
        return samples_from_records(rows, tok=tok, default_osl=cfg.workload.osl), "mlperf-dataset"
    if q.dataset:
        cfg.workload.dataset = q.dataset
        cfg.workload.dataset_format = q.dataset_format
        plan = build_plan(cfg.workload, q.size, tok, special_tokens=special, notes=notes)
        return plan, "dataset"
    return build_plan(cfg.workload, q.size, tok, special_tokens=special), "synthetic"


def verdict(
    loadgen_result: str | None, reasons: list[str], completed: int, failed: int, stopped: int
) -> tuple[str | None, list[str]]:
    """accelbench's result from LoadGen's and the SUT's counts. LoadGen counts a sample
    completed however it ended (a failed request is answered with an empty response):
    a run with any failed or interrupted sample is INVALID, with the count as a reason."""
    if loadgen_result is None:
        return None, list(reasons)
    bad = failed + stopped
    if not bad:
        return loadgen_result, list(reasons)
    why = []
    if failed:
        why.append(f"{failed:,} of {completed:,} samples failed")
    if stopped:
        why.append(f"{stopped:,} of {completed:,} samples were interrupted")
    return word(Status.FAIL, "mlperf"), [
        f"{' and '.join(why)} (LoadGen counts them as completed and said {loadgen_result})",
        *reasons,
    ]


class OpenFiles(TypedDict):
    """The open-files limits a run found (mlperf.json's ``open_files``)."""

    soft_before: int
    soft: int
    hard: int
    in_use: int
    lowered_from: NotRequired[int]  # the default cap on requests in flight, lowered


def open_files_for(cap: int | None, *, explicit: bool) -> tuple[int | None, OpenFiles]:
    """Raise this process's soft RLIMIT_NOFILE toward its hard limit (an unprivileged
    process may) and fit the cap on requests in flight to it: each holds a socket. A
    default cap is lowered to what fits (and says so); an explicit one that cannot fit
    is one line, exit 2. Returns (the cap, what was found)."""
    soft0, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft = soft0
    target = hard if hard != resource.RLIM_INFINITY else max(soft0, 1 << 20)
    if soft0 != resource.RLIM_INFINITY and soft0 < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # the kernel's nr_open may be below the hard limit: keep what is there
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = FD_MARGIN
    room = (soft if soft != resource.RLIM_INFINITY else 1 << 30) - in_use - FD_MARGIN
    info: OpenFiles = {"soft_before": soft0, "soft": soft, "hard": hard, "in_use": in_use}
    if cap is not None and cap > room:
        if explicit:
            raise UsageError(
                f"--max-concurrency {cap} needs about {cap + in_use + FD_MARGIN} open files "
                f"({cap} sockets, {in_use} in use, {FD_MARGIN} spare); the open-files limit "
                f"is {soft} (hard {hard}): lower --max-concurrency or raise 'ulimit -n'"
            )
        if room < 1:
            raise UsageError(
                f"the open-files limit {soft} (hard {hard}) leaves no room for a request "
                f"({in_use} in use, {FD_MARGIN} spare): raise 'ulimit -n'"
            )
        info["lowered_from"] = cap
        cap = room
    return cap, info


def _run(
    lg: Any, cfg: BenchmarkConfig, ms: MlperfSettings, q: QslOptions, log: Log, engine: Any
) -> MlperfResult:
    target = connect(cfg, log)
    assert cfg.url is not None  # connect() needs it; the embedded engine has set it
    api_key, tok, special = target.api_key, target.tok, target.special

    log("preparing the query sample library")
    notes: list[str] = []
    samples, kind = _samples(cfg, q, tok, special, notes)
    for note in notes:
        log(f"warning: {note}")
    ts, defaults, effective = build(ms, len(samples))
    noncompliance = compliance(defaults, effective, synthetic=kind != "mlperf-dataset")

    explicit = cfg.max_concurrency is not None
    cap = cfg.max_concurrency
    if cap is None and ms.lg_scenario == "Offline":
        cap = OFFLINE_MAX_CONCURRENCY
    cap, open_files = open_files_for(cap, explicit=explicit)
    if "lowered_from" in open_files:
        log(
            f"in flight at most {cap} (the default {open_files['lowered_from']} does not fit "
            f"the open-files limit {open_files['soft']})"
        )
    cfg.max_concurrency = cap

    run_dir, short = new_run_dir(cfg)

    # The load is LoadGen's, not a closed or open loop of accelbench's.
    cfg.rate = None
    cfg.concurrency = 1 if ms.lg_scenario == "SingleStream" else None
    cfg.num_requests = None
    cfg.telemetry = False
    # mlperf.json as built (checked and typed by its writer: MlperfDoc.of)
    mlperf_doc: dict[str, object] = {
        "benchmark": ms.benchmark,
        "scenario": ms.scenario,
        "loadgen_scenario": ms.lg_scenario,
        "conf_model": ms.conf_model,
        "find_peak": ms.find_peak,
        "user_conf": str(ms.user_conf) if ms.user_conf else None,
        "user_conf_lines": ms.user_conf_lines,
        "loadgen_version": loadgen_version(),
        "qsl": {"kind": kind, "samples": len(samples), "dataset": q.dataset},
        "settings": {"benchmark_defaults": defaults, "effective": effective},
        "compliant": not noncompliance,
        "noncompliance": noncompliance,
        "max_concurrency": cap,
        "max_concurrency_source": "option" if explicit else ("default" if cap else None),
        "open_files": open_files,
    }
    # run.json: the one builder and writer (store/rundoc.py) names the engine that ran
    meta = new_run_doc(cfg, run_dir, target, engine, planned=None, kind="mlperf",
                       mlperf=mlperf_doc)  # fmt: skip

    for x in ms.user_conf_lines:
        if "replaced_by" in x:
            log(f"user.conf line {x['line']} ({x['text'][:60]}): replaced by {x['replaced_by']}")
    skipped = [x for x in ms.user_conf_lines if not x["applies"]]
    if skipped:
        log(
            f"user.conf: {len(skipped)} line(s) for another benchmark or scenario, not applied "
            f"(lines {', '.join(str(x['line']) for x in skipped[:10])})"
        )
    log(
        f"LoadGen {ms.lg_scenario} ({ms.conf_model}"
        f"{', peak search' if ms.find_peak else ''}): min duration "
        f"{effective['min_duration_ms'] / 1000:g} s, {len(samples)} samples"
        f"{f', at most {cap} in flight' if cap else ''}"
    )
    journal = Journal(run_dir / JOURNAL)
    opts = SutOptions(
        url=cfg.url, model=cfg.model or "", endpoint=cfg.endpoint, stream=cfg.stream,
        api_key=api_key or None, timeout_s=cfg.timeout_s, ignore_eos=cfg.ignore_eos,
        extra_body=cfg.extra_body, save_text=cfg.save_text, transport=cfg.transport,
        max_concurrency=cap, run_tag=short,
    )  # fmt: skip
    sut = LoadGenSUT(lg, samples, opts, journal)
    # One stop path for SIGINT, SIGTERM and SIGHUP from here to the last file written:
    # the handler only sets a flag and stops the requests (nothing calls into LoadGen
    # from it); a second signal changes nothing.
    with _stop_on_signals(sut.stop_requests) as stopped:
        write_run_doc(run_dir, meta)
        status, wall, crash, parked = _drive(
            lg, sut, ts, run_dir, len(samples), stopped, trace=ms.trace
        )
        journal.close()
        issue = read_issue_side(run_dir / TRACE_FILE) if ms.trace and not parked else None
        if issue is not None:
            sut.stats["loadgen_issue_delay_ms_p99"] = issue.delay_ms_p99
            sut.stats["loadgen_issue_delay_ms_max"] = issue.delay_ms_max
            sut.stats["loadgen_issue_call_ms_max"] = issue.call_ms_max
        if crash:
            status = "failed"
        elif sut.issued and sut.failed == sut.issued:
            status = "failed"
        return _finish(
            run_dir, meta, mlperf_doc, noncompliance, sut, tok, status, wall, crash, parked, stopped
        )


def _finish(
    run_dir: Path,
    meta: RunDoc,
    mlperf_doc: dict[str, object],
    noncompliance: list[str],
    sut: LoadGenSUT,
    tok: Tokenizer | None,
    status: str,
    wall: float,
    crash: str | None,
    parked: bool,
    stopped: StopFlag,
) -> MlperfResult:
    # LoadGen's logs are complete only when its test returned
    lg_result = read_loadgen(run_dir) if not parked else LoadGenResult()
    if parked:
        lg_result.reasons = [
            "interrupted during LoadGen's schedule: LoadGen gave no result (its logs are partial)"
        ]
    # every sample LoadGen saw answered: sent and ended, or answered unsent after a stop
    unsent = sut.unsent_at_stop + sut.answered_after_stop
    answered = sut.completed + unsent
    n_stopped = sut.interrupted + unsent
    result, reasons = verdict(lg_result.result, lg_result.reasons, answered, sut.failed, n_stopped)
    figures: dict[str, float | None] = dict(lg_result.figures)
    ok = answered - sut.failed - n_stopped
    lg_sps = figures.get("completed_samples_per_s")
    if isinstance(lg_sps, int | float) and answered:
        # LoadGen's rate counts every sample answered; the rate of those that succeeded,
        # over LoadGen's own span, is the completed rate
        figures["ok_samples_per_s"] = lg_sps * ok / answered
    if sut.failed:
        noncompliance.append(f"{sut.failed} of {sut.issued} requests failed")
    if status == "interrupted":
        noncompliance.append("the run was interrupted")
    mlperf_doc.update(
        {
            "result": result,
            "loadgen_result": lg_result.result,
            "reasons": reasons,
            "checks": lg_result.checks,
            "figures": figures,
            "peak_qps": lg_result.peak_qps,
            "loadgen_errors": lg_result.errors,
            "loadgen_running": parked,
            "compliant": not noncompliance,
            "noncompliance": noncompliance,
            "wall_s": wall,
            "requests": {
                "issued": sut.issued, "completed": sut.completed, "ok": ok,
                "failed": sut.failed, "interrupted": sut.interrupted,
                "not_ok": sut.failed + n_stopped,
                "unsent_at_stop": sut.unsent_at_stop,
                "answered_after_stop": sut.answered_after_stop,
            },
            "sut": {
                k: sut.stats.get(k)
                for k in (
                    "loop_lag_ms_p99",
                    "first_token_handover_ms_p99",
                    "first_token_handover_ms_max",
                    "loadgen_issue_delay_ms_p99",
                    "loadgen_issue_delay_ms_max",
                    "loadgen_issue_call_ms_max",
                )
            },
        }
    )  # fmt: skip
    worker = WorkerStats(
        worker=0,
        wall_s=wall,
        cpu_s=sut.stats.get("sut_thread_cpu_s", 0.0),
        sent=sut.issued,
        loop_lag_ms_p99=sut.stats.get("loop_lag_ms_p99", 0.0),
        receive=sut.stats.get("receive"),
    )
    client = ClientSection(
        workers=[worker], n_workers=1, cpu_s=sut.stats.get("sut_thread_cpu_s", 0.0)
    )
    client.update(arrival_stamps([worker]))
    client["warnings"] = [crash] if crash else []
    short_doc = cast(MlperfSection, {
        k: mlperf_doc[k]
        for k in ("benchmark", "scenario", "result", "loadgen_result", "reasons", "compliant",
                  "noncompliance", "requests", "peak_qps", "figures")
    })  # fmt: skip
    t_fin = time.monotonic()
    finalize_run(run_dir, doc=meta, tok=tok, status=status, client=client, mlperf=short_doc)
    if stopped.is_set():
        mlperf_doc["stop"] = {
            "signal": stopped.signal,
            "released_s": stopped.released_s,
            "finalize_s": time.monotonic() - t_fin,
        }
    meta.mlperf = mlperf_doc
    write_run_doc(run_dir, meta)
    typed = write_mlperf(run_dir, mlperf_doc)
    try:
        summary_text = (run_dir / SUMMARY_FILE).read_text() if not parked else ""
    except OSError:
        summary_text = ""
    return MlperfResult(
        run_dir=run_dir,
        status=status,
        result=result,
        reasons=reasons,
        compliant=not noncompliance,
        noncompliance=noncompliance,
        figures=figures,
        peak_qps=lg_result.peak_qps,
        wall_s=wall,
        summary_text=summary_text,
        doc=typed,
        loadgen_running=parked,
    )


def loadgen_parked() -> bool:
    """Whether an interrupted LoadGen test is still asleep in this process."""
    return bool(_PARKED)


# LoadGen tests left asleep in this process by an interruption (their handles are kept
# alive: destroying them under LoadGen's running thread is what crashed on SIGHUP)
_PARKED: list[tuple[threading.Thread, Any, Any]] = []


class StopFlag(threading.Event):
    """Set by the first stop signal; ``at`` is when (monotonic s), ``released_s`` how
    long after it the SUT had answered every sample and LoadGen returned or was left."""

    def __init__(self) -> None:
        super().__init__()
        self.at: float | None = None
        self.signal: str | None = None
        self.released_s: float | None = None


@contextlib.contextmanager
def _stop_on_signals(on_stop: Callable[[], None]) -> Iterator[StopFlag]:
    """SIGINT, SIGTERM and SIGHUP set one flag and call ``on_stop`` once (main thread
    only; elsewhere the caller's own handling stays)."""
    stopped = StopFlag()

    def handler(signum: int, frame: Any) -> None:
        if not stopped.is_set():
            stopped.at = time.monotonic()
            stopped.signal = signal.Signals(signum).name
            stopped.set()
            on_stop()

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS} if main else {}
    for s in old:
        signal.signal(s, handler)
    try:
        yield stopped
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _drive(
    lg: Any,
    sut: LoadGenSUT,
    ts: Any,
    run_dir: Path,
    n_samples: int,
    stopped: StopFlag,
    *,
    trace: bool = False,
) -> tuple[str, float, str | None, bool]:
    """LoadGen's test in a thread of its own, so that signals reach this one. On a stop
    the SUT answers every query at once (in flight: cancelled and recorded as
    interrupted); LoadGen gets STOP_GRACE_S to return, else its thread is left asleep
    in its schedule (a Server query may be minutes away; LoadGen cannot be woken) and
    the run ends without it. Returns (status, wall s, crash, LoadGen still running)."""
    out = lg.LogOutputSettings()
    out.outdir = str(run_dir)
    out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = out
    log_settings.enable_trace = trace
    sut.start()
    handle_sut = lg.ConstructSUT(sut.issue, sut.flush_queries)
    handle_qsl = lg.ConstructQSL(n_samples, n_samples, _no_op, _no_op)
    crash: list[str] = []

    def test() -> None:
        try:
            lg.StartTestWithLogSettings(handle_sut, handle_qsl, ts, log_settings)
        except Exception as exc:  # noqa: BLE001 - reported as a failed run
            crash.append(f"LoadGen stopped: {type(exc).__name__}: {exc}")

    # Three threads share the GIL (LoadGen's issue thread, the SUT's event loop, this
    # one): with Python's default 5 ms switch interval a query could wait that long to
    # be issued or a first token to be reported. 0.2 ms keeps both under a millisecond.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    t0 = time.monotonic()
    runner = threading.Thread(target=test, name="loadgen", daemon=True)
    parked = False
    try:
        if not stopped.is_set():
            runner.start()
            while runner.is_alive() and not stopped.wait(0.1):  # a signal ends the wait
                pass
    finally:
        if stopped.is_set():
            # the SUT first: its loop answers every sample (in flight: cancelled and
            # recorded; waiting: at once); then LoadGen, which returns now unless its
            # issue thread sleeps before a scheduled query
            sut.close()
            if runner.ident is not None:
                runner.join(STOP_GRACE_S)
            parked = runner.is_alive()
            stopped.released_s = time.monotonic() - (stopped.at or 0.0)
        else:
            runner.join()
        sys.setswitchinterval(switch)
        wall = time.monotonic() - t0
        sut.close()
        if parked:
            _PARKED.append((runner, handle_sut, handle_qsl))
        else:
            lg.DestroyQSL(handle_qsl)
            lg.DestroySUT(handle_sut)
            sut.release()
    status = "interrupted" if stopped.is_set() else "completed"
    return status, wall, crash[0] if crash else None, parked


def _no_op(_samples: list[int]) -> None:
    """Load / unload: the prompts are in memory from the start."""
