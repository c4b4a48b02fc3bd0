"""The end of a run, in one pass: the journal to requests.parquet, the summary, the
telemetry sampler stopped with the summary's window and token counts, summary.json
written once and run.json's status. Used at the end of a run and by ``accelbench
summarize`` to rebuild a run that was killed or to recompute it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from accelbench import validate
from accelbench.errors import AccelbenchError, DocumentError
from accelbench.metrics.completion import complete_row
from accelbench.metrics.records import RequestRow, records_to_table
from accelbench.metrics.summary import (
    DENSE_CHUNKS,
    ChunkSource,
    ClientSection,
    JournalSection,
    MlperfSection,
    Summary,
    TelemetrySection,
    stat_value,
    summarize,
)
from accelbench.runner.config import MAX_GPUS, run_mode
from accelbench.store.rundir import (
    JOURNAL,
    PARQUET,
    RUN_JSON,
    SUMMARY,
    iter_journal,
    read_for_summary,
    write_parquet_atomic,
)
from accelbench.store.rundoc import (
    UNKNOWN_STATUS,
    RunDoc,
    read_run_doc,
    read_summary,
    write_run_doc,
    write_summary,
)
from accelbench.workload.tokenizer import Tokenizer


class TelemetryStop(Protocol):
    """What the end of a run needs of the sampler beside it (telemetry/sampler.py)."""

    def halt(self) -> None: ...

    def stop(
        self,
        measured_window_ns: tuple[int, int] | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
    ) -> TelemetrySection: ...


def finalize_run(
    run_dir: Path,
    *,
    doc: RunDoc | None = None,
    tok: Tokenizer | None = None,
    status: str | None = None,
    client: ClientSection | None = None,
    sampler: TelemetryStop | None = None,
    mlperf: MlperfSection | None = None,
    gpus: int | None = None,
    slo: dict[str, float] | None = None,
) -> Summary:
    """Write requests.parquet and summary.json from the journal; update run.json.

    ``doc`` is the run's run.json as the caller holds it (None: read it). With a
    ``sampler``, it is stopped here with the summary's measured window and token counts
    (the one definition every rate and J/token use: docs/METRICS.md), and its sections
    (``telemetry``, ``energy``, ``health``) go into the summary before it is written,
    once. Without one, a recomputed summary keeps what only the live run could measure."""
    run_dir = Path(run_dir)
    # the caller's overrides first: a bad --gpus or --slo must not reach summary.json
    gpus = validate.optional_integer("--gpus", gpus, 1, MAX_GPUS)
    slo = None if slo is None else validate.slo(slo)
    if sampler is not None:
        sampler.halt()  # the load has ended: sampling stops before the summary's work
    if doc is None:
        doc = read_run_doc(run_dir)
    cfg = _recorded_config(doc.config, run_dir / RUN_JSON)
    try:
        table, journal, chunks = _requests_table(run_dir, tok, cfg.save_text)
    except BaseException:
        if sampler is not None:  # the sampler's thread and file end with the run, always
            with contextlib.suppress(Exception):
                sampler.stop()
        raise
    recorded = doc.status if doc.status != UNKNOWN_STATUS else None
    status = status or recorded or "completed"
    if status == "running":
        status = "interrupted"  # the client died before it could say
    client = (client if client is not None else doc.client or ClientSection()).copy()
    summary = summarize(
        table,
        gpus=gpus or cfg.gpus,
        slo=slo if slo is not None else (cfg.slo or None),
        mode=cfg.mode or "concurrency",
        target_concurrency=cfg.concurrency or cfg.max_concurrency,
        requested_rate=cfg.rate,
        client=client,
        status=status,
        planned=doc.planned_requests,
        chunks=chunks,
    )
    del table  # the telemetry's rows and the table are never held together
    _client_health(summary, cfg)
    if journal is not None:
        summary["journal"] = journal
    if sampler is not None:
        _stop_telemetry(summary, sampler)
    elif (run_dir / SUMMARY).is_file():
        # recomputing: keep what only the live run could measure
        with contextlib.suppress(DocumentError):  # an unreadable old summary is replaced
            old, _ = read_summary(run_dir)
            for key in ("telemetry", "energy", "health", "mlperf"):
                if key in old:
                    summary[key] = old[key]
    if mlperf is not None:
        summary["mlperf"] = mlperf
    write_summary(run_dir, summary)
    doc.status = status
    doc.finished_at = doc.finished_at or datetime.now(UTC).isoformat()
    if client:
        doc.client = client
    write_run_doc(run_dir, doc)
    return summary


def measured_window(summary: Summary) -> tuple[int, int] | None:
    """The measured window (first send to last content chunk of the measured requests,
    docs/METRICS.md): the one every rate of the summary divides by, and the one energy
    is taken over."""
    w = summary["window"]
    a, b = w.get("start_ns"), w.get("end_ns")
    return (a, b) if a is not None and b is not None else None


def _stop_telemetry(summary: Summary, sampler: TelemetryStop) -> None:
    """Stop the sampler with the summary's window and token counts; its sections into
    the summary (``energy`` and ``health`` also at the top, where reports look)."""
    tokens = summary["tokens"]
    out_tok, in_tok = int(tokens["output"]), int(tokens["input"])
    try:
        tel = sampler.stop(
            measured_window_ns=measured_window(summary),
            output_tokens=out_tok,
            total_tokens=out_tok + in_tok,
        )
    except Exception as exc:  # noqa: BLE001 - telemetry must never break a benchmark
        tel = TelemetrySection(error=f"telemetry failed: {exc}")
    summary["telemetry"] = tel
    if tel.get("energy"):
        summary["energy"] = tel["energy"]
    if tel.get("health"):
        summary["health"] = tel["health"]


MAX_RECORDED = 1 << 62  # in-flight caps as recorded: any whole number int64 holds


@dataclass(frozen=True)
class RecordedConfig:
    """The fields of run.json's config that the summary uses, checked."""

    gpus: int = 1
    slo: dict[str, float] | None = None
    rate: float | None = None
    concurrency: int | None = None
    max_concurrency: int | None = None
    save_text: bool = False
    mode: str | None = None  # None: rate where a rate was asked, else concurrency


def _recorded_config(cfg: Mapping[str, object], path: Path) -> RecordedConfig:
    """The fields of run.json's config that the summary uses, each checked as the run
    options are: a damaged run.json is one clear error naming the field, never a summary
    with negative per-GPU figures or an exit 70 deep inside the statistics."""
    try:
        slo = cfg.get("slo") or {}
        if not isinstance(slo, dict):
            raise validate.UsageError(f"slo must be an object (got {slo!r:.40})")
        return RecordedConfig(
            gpus=validate.integer("gpus", cfg.get("gpus") or 1, 1, MAX_GPUS),
            slo=validate.slo(slo),
            # wider than the run options: imported runs (vllm bench, MLPerf) record theirs
            rate=validate.optional_number("rate", cfg.get("rate"), 0, None, lo_open=True),
            concurrency=validate.optional_integer(
                "concurrency", cfg.get("concurrency"), 1, MAX_RECORDED
            ),
            max_concurrency=validate.optional_integer(
                "max_concurrency", cfg.get("max_concurrency"), 1, MAX_RECORDED
            ),
            save_text=cfg.get("save_text") is True,
            mode=run_mode(cfg),
        )
    except validate.UsageError as exc:
        raise DocumentError(f"{path} is damaged: config {exc}") from None


def _requests_table(
    run_dir: Path, tok: Tokenizer | None, save_text: bool
) -> tuple[Any, JournalSection | None, ChunkSource | None]:
    """requests.parquet rebuilt from the journal, unless that would hold fewer rows than
    the requests.parquet already there: a damaged journal never replaces a complete
    result with less. Returns the table and what was wrong with the journal (None: all
    of it was read), and, for a kept requests.parquet too large to hold with its chunk
    times, where to read them (store.rundir.read_for_summary)."""
    import pyarrow.parquet as pq

    parquet = run_dir / PARQUET
    try:
        old_rows: int | None = pq.read_metadata(parquet).num_rows
    except Exception:  # noqa: BLE001 - absent or unreadable: nothing to keep
        old_rows = None
    lines: list[int] = []
    path = run_dir / JOURNAL
    rows: Iterable[Mapping[str, object]] = ()
    missing = not path.is_file()
    if not missing:
        rows = iter_journal(path, lines)  # streamed: never the whole journal in memory
    elif old_rows is None:
        raise AccelbenchError(f"{path} is missing: nothing to summarise")
    table, bad_records = complete_table(rows, tok, save_text)
    problems: JournalSection | None = None
    if lines or bad_records or missing:
        problems = JournalSection(
            missing=missing,
            unreadable_lines=len(lines),
            line_numbers=lines[:20],
            bad_records=bad_records,
            rows_read=table.num_rows,
            kept_parquet_rows=None,
        )
    if old_rows is not None and old_rows > table.num_rows:
        if problems is None:  # fewer rows than before without damage: a shorter journal
            problems = JournalSection(missing=False, unreadable_lines=0, line_numbers=[],
                                      bad_records=0, rows_read=table.num_rows)  # fmt: skip
        problems["kept_parquet_rows"] = old_rows
        del table
        kept, chunks = read_for_summary(parquet, DENSE_CHUNKS)
        return kept, problems, chunks
    write_parquet_atomic(parquet, table)
    return table, problems, None


# Journal records completed and turned into Arrow per batch: finalize holds the table
# (columnar, ~0.5 KB a request with its chunk times) and one batch of Python dicts, not a
# dict per request (a 1-hour soak segment of 180,000 requests peaked at +650 MB that way).
TABLE_BATCH = 16_384


def complete_table(
    rows: Iterable[Mapping[str, object]], tok: Tokenizer | None, save_text: bool
) -> tuple[Any, int]:
    """The completed rows as a table, and how many journal records were of the wrong
    shape (skipped, counted)."""
    import pyarrow as pa

    tables: list[Any] = []
    done: list[RequestRow] = []
    bad = 0
    for r in rows:
        try:
            done.append(complete_row(r, tok, save_text))
        except Exception:  # noqa: BLE001 - a damaged record is counted, never fatal
            bad += 1
        if len(done) >= TABLE_BATCH:
            table, b = _batch_table(done)
            tables.append(table)
            bad += b
            done = []
    if done or not tables:
        table, b = _batch_table(done)
        tables.append(table)
        bad += b
    return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)), bad


def _batch_table(done: list[RequestRow]) -> tuple[Any, int]:
    try:
        return records_to_table(done), 0
    except Exception:  # noqa: BLE001 - find the rows Arrow refuses (types, ranges)
        good = []
        bad = 0
        for r in done:
            try:
                records_to_table([r])
                good.append(r)
            except Exception:  # noqa: BLE001
                bad += 1
        return records_to_table(good), bad


def journal_problem(summary: Summary) -> str | None:
    """One line on what of the journal could not be used (None: all of it was read)."""
    j = summary.get("journal")
    if not j:
        return None
    parts = []
    if j.get("missing"):
        parts.append("requests.jsonl is missing")
    if j.get("unreadable_lines"):
        nums = ", ".join(map(str, j["line_numbers"]))
        more = ", ..." if j["unreadable_lines"] > len(j["line_numbers"]) else ""
        parts.append(f"{j['unreadable_lines']} unreadable line(s) in requests.jsonl "
                     f"(line {nums}{more})")  # fmt: skip
    if j.get("bad_records"):
        parts.append(f"{j['bad_records']} journal record(s) of the wrong shape skipped")
    if j.get("kept_parquet_rows") is not None:  # the number of rows kept
        parts.append(f"kept the existing requests.parquet ({j['kept_parquet_rows']} rows) "
                     f"instead of the {j['rows_read']} the journal gave")  # fmt: skip
    return "; ".join(parts) if parts else None


# Event-loop lag (p99) above which chunk timestamps are no longer within the client's
# timing-error bound, and the streams per worker where the measured TTFT error passed
# that bound (benchmarks/README.md, "Timing error against streams per worker").
TIMING_BOUND_MS = 2.0
STREAMS_PER_WORKER_KNEE = 128
# the wall clock's drift against the monotonic clock above which it was stepped during
# the run: NTP's and adjtime's gradual corrections move both clocks alike (clock_gettime(2));
# only jumps move one against the other (50 ppm: well above the offsets' reading noise)
REALTIME_STEP_PPM = 50


def _client_health(summary: Summary, cfg: RecordedConfig) -> None:
    """Achieved vs requested rate, schedule lag, CPU: say so when the client, not the
    server, was the bottleneck."""
    c = summary["client"]
    warnings: list[str] = list(c.get("warnings") or [])
    lag_p99 = stat_value(summary["latency"].get("schedule_lag_ms"), "p99")
    c["schedule_lag_ms_p99"] = lag_p99
    c["mode"] = cfg.mode or ("rate" if cfg.rate else "concurrency")
    c["requested_rate"] = cfg.rate
    c["target_concurrency"] = cfg.concurrency
    window = summary["window"]["duration_s"] or 0
    n_sent = summary["counts"]["completed"] + summary["counts"]["failed"]
    # offered rate: requests sent over the span of sends (n - 1 gaps), so long outputs
    # finishing after the last send do not make the client look slow
    span = summary["window"].get("send_span_s")
    if span:
        c["achieved_rate"] = (n_sent - 1) / span
    else:
        c["achieved_rate"] = (n_sent / window) if window > 0 else None
    bottleneck = False
    kernel = c.get("arrival_stamps") == "kernel"
    rate = cfg.rate
    achieved = c["achieved_rate"]
    if rate and achieved is not None and achieved < 0.95 * rate:
        if not cfg.max_concurrency:
            warnings.append(f"achieved {achieved:.2f} req/s of the requested {rate:g} req/s")
            bottleneck = True
    if rate and lag_p99 is not None and lag_p99 > 10 and not cfg.max_concurrency:
        warnings.append(f"schedule lag p99 {lag_p99:.1f} ms: requests went out late")
        bottleneck = True
    niced = sorted({(w.get("nice") or 0, w["worker"]) for w in c.get("workers", [])
                    if (w.get("nice") or 0) > 0})  # fmt: skip
    if niced:
        who = ", ".join(str(k) for _, k in niced)
        warnings.append(
            f"load worker(s) {who} ran at nice {max(n for n, _ in niced)}: where they share "
            "cores with the server they read late, and chunks that wait together share one "
            "time; run accelbench at nice 0"
        )
    for w in c.get("workers", []):
        util = w["cpu_s"] / w["wall_s"] if w.get("wall_s") else 0
        lag: float = w.get("loop_lag_ms_p99", 0.0)
        if util > 0.9:
            warnings.append(
                f"load worker {w['worker']} used {100 * util:.0f}% of a core: "
                "add --workers or the client may be the limit"
            )
            bottleneck = True
        if lag > TIMING_BOUND_MS:
            # A busy worker lags because of its own work; an idle one because the OS did
            # not run it (the server or something else holds the cores).
            cause = (
                "it was busy"
                if util > 0.5
                else f"it used only {100 * util:.0f}% of a core, so other processes (the "
                "server on the same cores?) kept it waiting"
            )
            late = (
                "requests may have gone out late by that much (chunk times are the "
                "kernel's receive times, not delayed by it)"
                if kernel
                else "timestamps may be late by that much"
            )
            warnings.append(
                f"load worker {w['worker']} event loop lagged (p99 {lag:.1f} ms; {cause}): {late}"
            )
            bottleneck = bottleneck or util > 0.5
    streams = cfg.concurrency or cfg.max_concurrency
    spw = streams / max(1, c.get("n_workers") or 1) if streams else None
    c["streams_per_worker"] = spw
    if kernel:
        # Kernel stamps are exact unless a read takes two chunks of one stream: then the
        # earlier one gets the later one's time. That needs a read delay above the gap.
        delay = c.get("read_delay_ms_p99")
        gap = stat_value(summary["latency"].get("chunk_gap_ms"), "p50")
        drift = c.get("realtime_drift_ppm")
        if drift is not None and abs(drift) > REALTIME_STEP_PPM:
            step = c.get("realtime_step_ms_max") or 0.0
            warnings.append(
                f"the wall clock, which kernel stamps are on, was stepped against the "
                f"monotonic clock during the run ({drift:+.0f} ppm, steps up to {step:.2f} ms): "
                "a chunk that arrived between a step and the worker's next read can be off "
                "by one step"
            )
        if delay is not None and gap and delay > gap:
            warnings.append(
                f"reads waited in the socket up to {delay:.1f} ms (p99), longer than the "
                f"median chunk gap ({gap:.1f} ms): some chunks were read together and share "
                "the later one's arrival time; add --workers"
            )
    elif spw and spw > STREAMS_PER_WORKER_KNEE:
        # The loop-side timing error grows with streams per worker (benchmarks/README.md)
        warnings.append(
            f"{spw:.0f} streams per load worker: above {STREAMS_PER_WORKER_KNEE}, chunk "
            f"timestamps may be late by more than {TIMING_BOUND_MS:g} ms (p99); add --workers"
        )
    c["bottleneck"] = bottleneck
    c["warnings"] = warnings
