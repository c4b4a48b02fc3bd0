"""One MLPerf scenario run on LoadGen, end to end (the typed API under ``accelbench
mlperf``; it prints nothing).

The run directory is an ordinary accelbench run (run.json, requests.jsonl,
requests.parquet, summary.json: every other command works on it) plus LoadGen's own
``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``, untouched, and ``mlperf.json``:
LoadGen's verdict, the settings it ran under, and whether the run is compliant.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.client.session import redact_url
from accelbench.errors import AccelbenchError, UsageError
from accelbench.mlperf import loadgen
from accelbench.mlperf.logs import SUMMARY_FILE, parse_result
from accelbench.mlperf.qsl import is_mlperf_dataset, read_records, samples_from_records
from accelbench.mlperf.settings import MlperfSettings, build, compliance
from accelbench.mlperf.sut import LoadGenSUT, SutOptions
from accelbench.runner.benchmark import (
    Log,
    arrival_stamps,
    connect,
    embedded_engine,
    environment,
)
from accelbench.runner.config import BenchmarkConfig, default_run_dir
from accelbench.runner.finalize import finalize_run
from accelbench.store.rundir import JOURNAL, RUN_JSON, Journal, read_json, write_json_atomic
from accelbench.workload.plan import PlannedRequest, build_plan
from accelbench.workload.tokenizer import Tokenizer

MLPERF_JSON = "mlperf.json"
DATASET_FORMATS = ("auto", "mlperf", "sharegpt", "prompts", "chat")
MAX_SAMPLES = 1_000_000
SWITCH_INTERVAL_S = 0.0002


@dataclass
class QslOptions:
    """Where the query sample library comes from."""

    samples: int = 1024  # synthetic set size (LoadGen draws queries from it)
    dataset: str | None = None
    dataset_format: str = "auto"  # auto | mlperf | sharegpt | prompts | chat
    allow_pickle: bool = False


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
    figures: dict[str, Any]
    peak_qps: float | None
    wall_s: float
    summary_text: str
    doc: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Completed and VALID; for a peak search, completed with a peak found (LoadGen's
        logs then describe its last step, which may be the invalid one above the peak).
        The CLI exits 0 only then."""
        if self.status != "completed":
            return False
        if self.doc.get("find_peak"):
            return self.peak_qps is not None
        return self.result == "VALID"


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
    cfg.validate()
    lg = loadgen()  # fail before an engine is started
    root = Path(cfg.out_dir).parent if cfg.out_dir else Path(cfg.results_root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {root}: {exc.strerror or exc}") from None
    with embedded_engine(cfg, log) as engine:
        return _run(lg, cfg, ms, qsl, log, engine)


def _check_qsl(q: QslOptions) -> None:
    from accelbench import validate as v

    q.samples = v.integer("--samples", q.samples, 1, MAX_SAMPLES)
    v.choice("--dataset-format", q.dataset_format, DATASET_FORMATS)
    if q.dataset is not None:
        v.input_file("--dataset", q.dataset)


def _samples(
    cfg: BenchmarkConfig, q: QslOptions, tok: Tokenizer | None, special: int
) -> tuple[list[PlannedRequest], str]:
    """The QSL's samples and what they are ("synthetic", "mlperf-dataset", "dataset")."""
    if q.dataset and (
        q.dataset_format == "mlperf"
        or (q.dataset_format == "auto" and is_mlperf_dataset(q.dataset))
    ):
        rows = read_records(q.dataset, allow_pickle=q.allow_pickle)
        return samples_from_records(rows, tok=tok, default_osl=cfg.workload.osl), "mlperf-dataset"
    if q.dataset:
        cfg.workload.dataset = q.dataset
        cfg.workload.dataset_format = q.dataset_format
        return build_plan(cfg.workload, q.samples, tok, special_tokens=special), "dataset"
    return build_plan(cfg.workload, q.samples, tok, special_tokens=special), "synthetic"


def _run(
    lg: Any, cfg: BenchmarkConfig, ms: MlperfSettings, q: QslOptions, log: Log, engine: Any
) -> MlperfResult:
    target = connect(cfg, log)
    assert cfg.url is not None  # connect() needs it; the embedded engine has set it
    api_key, server, tok, special = target.api_key, target.server, target.tok, target.special

    log("preparing the query sample library")
    samples, kind = _samples(cfg, q, tok, special)
    ts, defaults, effective = build(ms, len(samples))
    noncompliance = compliance(defaults, effective, synthetic=kind != "mlperf-dataset")

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    short = uuid.uuid4().hex[:6]
    run_dir = default_run_dir(cfg, stamp, short)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise AccelbenchError(f"{run_dir} exists and is not empty: choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)

    # The load is LoadGen's, not a closed or open loop of accelbench's.
    cfg.rate = None
    cfg.concurrency = 1 if ms.lg_scenario == "SingleStream" else None
    cfg.num_requests = None
    cfg.telemetry = False
    mlperf_doc: dict[str, Any] = {
        "benchmark": ms.benchmark,
        "scenario": ms.scenario,
        "loadgen_scenario": ms.lg_scenario,
        "conf_model": ms.conf_model,
        "find_peak": ms.find_peak,
        "user_conf": str(ms.user_conf) if ms.user_conf else None,
        "loadgen_version": loadgen_version(),
        "qsl": {"kind": kind, "samples": len(samples), "dataset": q.dataset},
        "settings": {"benchmark_defaults": defaults, "effective": effective},
        "compliant": not noncompliance,
        "noncompliance": noncompliance,
        "max_concurrency": cfg.max_concurrency,
    }
    meta: dict[str, Any] = {
        "schema": "accelbench.run/1",
        "run_id": run_dir.name,
        "kind": "mlperf",
        "tool": {"name": "accelbench", "version": __version__},
        "status": "running",
        "started_at": datetime.now(UTC).isoformat(),
        "config": cfg.to_json(),
        "planned_requests": None,
        "environment": environment(),
        "server": {"url": redact_url(cfg.url), **server},
        "tokenizer": getattr(tok, "name", None),
        "special_tokens_per_prompt": special,
        "mlperf": mlperf_doc,
    }
    if engine is not None:
        meta["server"]["embedded"] = {"engine": "llama.cpp llama-server", "args": engine.args[1:]}
    write_json_atomic(run_dir / RUN_JSON, meta)

    log(
        f"LoadGen {ms.lg_scenario} ({ms.conf_model}"
        f"{', peak search' if ms.find_peak else ''}): min duration "
        f"{effective['min_duration_ms'] / 1000:g} s, {len(samples)} samples"
    )
    journal = Journal(run_dir / JOURNAL)
    opts = SutOptions(
        url=cfg.url, model=cfg.model or "", endpoint=cfg.endpoint, stream=cfg.stream,
        api_key=api_key or None, timeout_s=cfg.timeout_s, ignore_eos=cfg.ignore_eos,
        extra_body=cfg.extra_body, save_text=cfg.save_text, transport=cfg.transport,
        max_concurrency=cfg.max_concurrency, run_tag=short,
    )  # fmt: skip
    sut = LoadGenSUT(lg, samples, opts, journal)
    status, wall, crash = _drive(lg, sut, ts, run_dir, len(samples))
    journal.close()
    if crash:
        status = "failed"
    elif sut.issued and sut.failed == sut.issued:
        status = "failed"

    lg_result = parse_result(run_dir)
    if sut.failed:
        noncompliance.append(f"{sut.failed} of {sut.issued} requests failed")
    if status == "interrupted":
        noncompliance.append("the run was interrupted")
    mlperf_doc.update(
        {
            "result": lg_result["result"],
            "reasons": lg_result["reasons"],
            "checks": lg_result["checks"],
            "figures": lg_result["figures"],
            "peak_qps": lg_result.get("peak_qps"),
            "loadgen_errors": lg_result["errors"],
            "compliant": not noncompliance,
            "noncompliance": noncompliance,
            "wall_s": wall,
            "requests": {"issued": sut.issued, "failed": sut.failed},
            "sut": {
                k: sut.stats.get(k)
                for k in (
                    "loop_lag_ms_p99",
                    "first_token_handover_ms_p99",
                    "first_token_handover_ms_max",
                )
            },  # fmt: skip
        }
    )
    worker = {
        "worker": 0,
        "wall_s": wall,
        "cpu_s": sut.stats.get("sut_thread_cpu_s", 0.0),
        "sent": sut.issued,
        "loop_lag_ms_p99": sut.stats.get("loop_lag_ms_p99", 0.0),
        "receive": sut.stats.get("receive"),
    }
    client = {
        "workers": [worker],
        "n_workers": 1,
        "cpu_s": sut.stats.get("sut_thread_cpu_s", 0.0),
        **arrival_stamps([worker]),
        "warnings": [crash] if crash else [],
    }
    short_doc = {
        k: mlperf_doc[k]
        for k in ("benchmark", "scenario", "result", "reasons", "compliant", "noncompliance")
    }
    short_doc["peak_qps"] = mlperf_doc["peak_qps"]
    short_doc["figures"] = mlperf_doc["figures"]
    finalize_run(run_dir, tok=tok, status=status, client=client, extra={"mlperf": short_doc})
    meta = read_json(run_dir / RUN_JSON)
    meta["mlperf"] = mlperf_doc
    write_json_atomic(run_dir / RUN_JSON, meta)
    write_json_atomic(run_dir / MLPERF_JSON, mlperf_doc)
    try:
        summary_text = (run_dir / SUMMARY_FILE).read_text()
    except OSError:
        summary_text = ""
    return MlperfResult(
        run_dir=run_dir,
        status=status,
        result=lg_result["result"],
        reasons=lg_result["reasons"],
        compliant=not noncompliance,
        noncompliance=noncompliance,
        figures=lg_result["figures"],
        peak_qps=lg_result.get("peak_qps"),
        wall_s=wall,
        summary_text=summary_text,
        doc=mlperf_doc,
    )


def _drive(
    lg: Any, sut: LoadGenSUT, ts: Any, run_dir: Path, n_samples: int
) -> tuple[str, float, str | None]:
    """LoadGen's test in a thread of its own, so that Ctrl-C reaches this one: the first
    signal stops the requests (every later query is answered at once and LoadGen runs
    out its schedule), the status becomes "interrupted"."""
    out = lg.LogOutputSettings()
    out.outdir = str(run_dir)
    out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = out
    log_settings.enable_trace = False
    sut.start()
    handle_sut = lg.ConstructSUT(sut.issue, sut.flush_queries)
    handle_qsl = lg.ConstructQSL(n_samples, n_samples, _no_op, _no_op)
    crash: list[str] = []

    def test() -> None:
        try:
            lg.StartTestWithLogSettings(handle_sut, handle_qsl, ts, log_settings)
        except Exception as exc:  # noqa: BLE001 - reported as a failed run
            crash.append(f"LoadGen stopped: {type(exc).__name__}: {exc}")

    interrupted = {"n": 0}

    def on_signal(signum: int, frame: Any) -> None:
        interrupted["n"] += 1
        sut.stop_requests()

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    for s in old:
        signal.signal(s, on_signal)
    # Three threads share the GIL (LoadGen's issue thread, the SUT's event loop, this
    # one): with Python's default 5 ms switch interval a query could wait that long to
    # be issued or a first token to be reported. 0.2 ms keeps both under a millisecond.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    t0 = time.monotonic()
    runner = threading.Thread(target=test, name="loadgen", daemon=True)
    try:
        runner.start()
        while runner.is_alive():
            runner.join(0.2)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sys.setswitchinterval(switch)
        wall = time.monotonic() - t0
        lg.DestroyQSL(handle_qsl)
        lg.DestroySUT(handle_sut)
        sut.close()
    status = "interrupted" if interrupted["n"] else "completed"
    return status, wall, crash[0] if crash else None


def _no_op(_samples: list[int]) -> None:
    """Load / unload: the prompts are in memory from the start."""
