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
from typing import Any, NamedTuple, Protocol

from accelbench import validate
from accelbench.documents import not_a_file
from accelbench.errors import AccelbenchError, DocumentError
from accelbench.metrics.completion import complete_row, first_of_each
from accelbench.metrics.prefixcache import server_counter_problem
from accelbench.metrics.records import RequestRow, records_to_table
from accelbench.metrics.summary import (
    DENSE_CHUNKS,
    ChunkSource,
    ClientSection,
    JournalSection,
    MlperfSection,
    Summary,
    TelemetrySection,
    reads_waited,
    stat_value,
    summarize,
)
from accelbench.runner.config import MAX_GPUS, run_mode
from accelbench.store.rundir import (
    JOURNAL,
    PARQUET,
    RUN_JSON,
    SUMMARY,
    ParquetColumns,
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
    if doc.source is not None:
        # an imported run has no journal, and its figures came from the file's own totals
        # and duration: rebuilt from requests.parquet, its throughput, source and absent
        # were lost (summary.json overwritten with less, exit 1)
        tool, file = doc.source.get("tool"), doc.source.get("file")
        came = f"{tool if isinstance(tool, str) else 'another tool'}" + (
            f" ({file})" if isinstance(file, str) else ""
        )
        raise validate.UsageError(
            f"{run_dir} was imported from {came}: there is no journal to rebuild it from; "
            "its summary.json stays as imported (import it again with other --gpus)"
        )
    cfg = _recorded_config(doc.config, run_dir / RUN_JSON)
    try:
        table, journal, chunks = _requests_table(run_dir, tok, cfg.save_text, doc.planned_requests)
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
    _server_count_warnings(summary)
    _unused_cache_options(summary, doc.config)
    if status in ("completed", "failed") and (why := no_request_succeeded(summary)):
        status = summary["status"] = "failed"
        warnings = summary["client"].setdefault("warnings", [])
        if why not in warnings:
            warnings.insert(0, why)
    if journal is not None:
        summary["journal"] = journal
    if sampler is not None:
        _stop_telemetry(summary, sampler)
    elif (run_dir / SUMMARY).is_file():
        # recomputing: keep what only the live run could measure
        with contextlib.suppress(DocumentError):  # an unreadable old summary is replaced
            old, _ = read_summary(run_dir, figures=False)  # the figures are recomputed
            for key in ("telemetry", "energy", "health", "mlperf"):
                if key in old:
                    summary[key] = old[key]
    if mlperf is not None:
        summary["mlperf"] = mlperf
    write_summary(run_dir, summary)
    # a recount with --gpus / --slo is the run's from now on: run.json says so, and a
    # later summarize without them keeps them (it went back to the run's own)
    if gpus is not None:
        doc.config["gpus"] = gpus
    if slo is not None:
        doc.config["slo"] = dict(slo)
    doc.status = status
    doc.finished_at = doc.finished_at or datetime.now(UTC).isoformat()
    if client:
        doc.client = client
    write_run_doc(run_dir, doc)
    return summary


def no_request_succeeded(summary: Summary) -> str | None:
    """Why a run that ran to its end failed all the same: not one of its measured
    requests succeeded (README "Exit codes": a run that failed, exit 1). None where one
    did, or where none was measured. A run with some successes keeps its status: its
    errors are counted (``errors``), and a sweep stops on its error rate."""
    counts = summary["counts"]
    if counts["completed"] or not counts["failed"]:
        return None
    kinds = summary["errors"]["by_kind"]
    top = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:3])
    return f"no measured request succeeded ({counts['failed']} failed: {top}): the run failed"


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
    run_dir: Path, tok: Tokenizer | None, save_text: bool, planned: int | None = None
) -> tuple[Any, JournalSection | None, ChunkSource | None]:
    """requests.parquet rebuilt from the journal, unless that would hold fewer rows than
    the requests.parquet already there: a damaged journal never replaces a complete
    result with less. Returns the table and what was wrong with the journal (None: all
    of it was read), and, for a kept requests.parquet too large to hold with its chunk
    times, where to read them (store.rundir.read_for_summary). Each request counts once
    (a repeated ``idx`` is left out and counted, in the journal and in a kept
    requests.parquet), and a table with more measured requests than run.json
    ``planned`` is refused (DocumentError) before anything is written."""
    import pyarrow.parquet as pq

    parquet = run_dir / PARQUET
    old_rows: int | None = None
    old_repeated = 0
    try:
        if not_a_file(parquet) is not None:  # a FIFO's read would wait for ever
            raise FileNotFoundError(parquet)
        old_rows = pq.read_metadata(parquet).num_rows
        _, old_repeated, _ = first_of_each(pq.read_table(parquet, columns=["idx"]).column("idx"))
    except Exception:  # noqa: BLE001 - absent or unreadable: nothing to keep
        old_rows = None
    lines: list[int] = []
    path = run_dir / JOURNAL
    rows: Iterable[Mapping[str, object]] = ()
    unusable = journal_unusable(path)
    if unusable is None:
        rows = iter_journal(path, lines)  # streamed: never the whole journal in memory
    elif old_rows is None:
        raise AccelbenchError(f"{path} {unusable}: nothing to summarise")
    done = complete_table(rows, tok, save_text)
    table = done.table
    problems: JournalSection | None = None
    if lines or done.wrong_shape or done.repeated or unusable:
        problems = JournalSection(
            missing=unusable == MISSING,
            unreadable_lines=len(lines),
            line_numbers=lines[:20],
            bad_records=done.wrong_shape,
            rows_read=table.num_rows,
            kept_parquet_rows=None,
        )
        if unusable not in (None, MISSING):
            problems["unusable"] = unusable
        if done.repeated:
            problems["repeated_records"] = done.repeated
            problems["repeated_idx"] = done.repeated_idx
    if old_rows is not None and old_rows - old_repeated > table.num_rows:
        if problems is None:  # fewer rows than before without damage: a shorter journal
            problems = JournalSection(missing=False, unreadable_lines=0, line_numbers=[],
                                      bad_records=0, rows_read=table.num_rows)  # fmt: skip
        del table
        _check_kept(parquet)  # impossible latencies: never summarised as figures
        if old_repeated:  # each request once: the kept table without its repeats
            kept = pq.read_table(parquet)
            keep, _, _ = first_of_each(kept.column("idx"))
            kept = kept.filter(keep)
            problems["kept_parquet_rows"] = kept.num_rows
            problems["kept_parquet_repeated"] = old_repeated
            _within_plan(kept, planned, parquet)
            write_parquet_atomic(parquet, kept)
            return kept, problems, None
        problems["kept_parquet_rows"] = old_rows
        lazy, chunks = read_for_summary(parquet, DENSE_CHUNKS)
        _within_plan(lazy, planned, parquet)
        return lazy, problems, chunks
    _within_plan(table, planned, path)
    write_parquet_atomic(parquet, table)
    return table, problems, None


def _check_kept(parquet: Path) -> None:
    """Refuse to keep a requests.parquet holding a latency no request can have (its
    reader's check, ``check_latencies``): its summary would replace a good summary.json
    with a median TTFT of -5 ms."""
    from accelbench.store.reader import check_latencies

    cols = ParquetColumns(parquet)
    for piece in cols.batches(("ttft_ms", "tpot_ms", "e2e_ms", "ntpot_ms")):
        check_latencies(piece, parquet)


MISSING = "is missing"


def journal_unusable(path: Path) -> str | None:
    """Why the journal at ``path`` cannot be read as one (None: a regular file): it is
    missing (``MISSING``), is not a regular file (a directory, a FIFO), or the OS refuses
    it (a symbolic link to itself: its error)."""
    return not_a_file(path)


def _within_plan(table: Any, planned: int | None, source: Path) -> None:
    """Refuse a requests table with more measured (not warm-up) requests than run.json
    plans: the summary would claim more completed than planned (records of another run,
    or repeated ones the idx does not tell apart)."""
    import pyarrow.compute as pc

    if planned is None:
        return
    warm = pc.fill_null(table.column("warmup"), False)
    measured = table.num_rows - int(pc.sum(warm.cast("int64")).as_py() or 0)
    if measured > planned:
        raise DocumentError(
            f"{source} holds {measured} measured requests, more than the {planned} run.json "
            "plans (records of another run?): nothing was written"
        )


# Journal records completed and turned into Arrow per batch: finalize holds the table
# (columnar, ~0.5 KB a request with its chunk times) and one batch of Python dicts, not a
# dict per request (a 1-hour soak segment of 180,000 requests peaked at +650 MB that way).
TABLE_BATCH = 16_384


class Completed(NamedTuple):
    """A journal's records as a table (``complete_table``), and what was left out."""

    table: Any
    wrong_shape: int  # records of the wrong shape (types, times that cannot be)
    repeated: int  # records repeating an earlier record's idx
    repeated_idx: list[int]  # the first few repeated idx


def complete_table(
    rows: Iterable[Mapping[str, object]], tok: Tokenizer | None, save_text: bool
) -> Completed:
    """The completed rows as a table: each record once (the first of an ``idx`` the
    journal repeats), and how many journal records were of the wrong shape or repeats
    (skipped, counted)."""
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
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    del tables
    keep, repeated, sample = first_of_each(table.column("idx"))
    if keep is not None:
        table = table.filter(keep)
    return Completed(table, bad, repeated, sample)


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
    if j.get("unusable"):
        parts.append(f"requests.jsonl {j['unusable']}")
    if j.get("unreadable_lines"):
        nums = ", ".join(map(str, j["line_numbers"]))
        more = ", ..." if j["unreadable_lines"] > len(j["line_numbers"]) else ""
        parts.append(f"{j['unreadable_lines']} unreadable line(s) in requests.jsonl "
                     f"(line {nums}{more})")  # fmt: skip
    if j.get("bad_records"):
        parts.append(f"{j['bad_records']} journal record(s) of the wrong shape skipped")
    if j.get("repeated_records"):
        idx = ", ".join(map(str, j.get("repeated_idx") or []))
        parts.append(f"{j['repeated_records']} journal record(s) repeating an earlier "
                     f"record's idx skipped (first: idx {idx})")  # fmt: skip
    if j.get("kept_parquet_rows") is not None:  # the number of rows kept
        parts.append(f"kept the existing requests.parquet ({j['kept_parquet_rows']} rows) "
                     f"instead of the {j['rows_read']} the journal gave")  # fmt: skip
        if j.get("kept_parquet_repeated"):
            parts.append(f"{j['kept_parquet_repeated']} repeated record(s) left out of it")
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
# a load worker's CPU share is judged over at least this long a life
MIN_CPU_WALL_S = 1.0


# the server's and the client's output counts differing by more than this fraction of the
# client's, summed over the requests where both exist, is named in a warning
OSL_MISMATCH_WARN = 0.10


def _server_count_warnings(summary: Summary) -> None:
    """Say where the server's counts were not used (could not be true) or are far from
    the client's own: token counts (docs/METRICS.md "Token counts the server cannot
    have") and prefix-cache counters ("Prefix cache")."""
    c = summary["client"]
    warnings: list[str] = list(c.get("warnings") or [])
    tokens = summary["tokens"]
    new = []
    rej = tokens.get("usage_rejected")
    if rej and rej["requests"]:
        new.append(
            f"{rej['requests']} request(s): the server's usage token counts could not be true "
            f"({rej['example']}); the client's own counts were used for them"
        )
    mism = tokens.get("osl_mismatch")
    client_total = (mism or {}).get("client_total") or 0
    if mism and mism["requests"] and mism["sum_abs"] > OSL_MISMATCH_WARN * max(client_total, 1):
        new.append(
            f"the server's completion_tokens differ from the client's own count (its "
            f"tokenizer's, else the chunks') by {mism['sum_abs']:,} tokens in all against "
            f"{client_total:,} counted by the client, over {mism['requests']} of "
            f"{mism['compared']} requests: the server's counts are in the token figures "
            "(several tokens per chunk, such as speculative decoding, make a chunk count low)"
        )
    counters = server_counter_problem(c.get("server_cache"))
    if counters:
        new.append(counters)
    far = tokens.get("isl_vs_planned")
    if far and far["far"]:
        new.append(
            f"{far['far']} of {far['compared']} request(s): the server's prompt_tokens is "
            "below half or above twice (+256) the planned prompt; the server's counts are in "
            "the token figures (a prompt truncated by the server, or another tokenizer?)"
        )
    c["warnings"] = warnings + [w for w in new if w not in warnings]


def _unused_cache_options(summary: Summary, config: object) -> None:
    """``--kv-capacity-tokens`` and ``--block-size`` shape the prefix-cache figures only:
    a run that has none (no sessions, shared prefixes or trace blocks, and no response
    said what was cached) says that they were given and not used."""
    workload = config.get("workload") if isinstance(config, dict) else None
    if "cache" in summary or not isinstance(workload, dict):
        return
    given = [opt for opt, key in (("--kv-capacity-tokens", "kv_capacity_tokens"),
                                  ("--block-size", "block_size"))
             if workload.get(key) is not None]  # fmt: skip
    if given:
        why = (f"{' and '.join(given)} not used: the run has no prefix-cache figures (no "
               "sessions, shared prefixes or trace blocks, and no response said what was "
               "cached)")  # fmt: skip
        warnings = summary["client"].setdefault("warnings", [])
        if why not in warnings:
            warnings.append(why)


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
        # CPU time counts in 10 ms ticks: over less than a second of a worker's life the
        # ratio is noise (0.02 s of 0.021 s read as 94% of a core in a run stopped at once)
        if util > 0.9 and (w.get("wall_s") or 0) >= MIN_CPU_WALL_S:
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
        if waited := reads_waited(delay, gap):
            warnings.append(waited + "; add --workers")
    elif spw and spw > STREAMS_PER_WORKER_KNEE:
        # The loop-side timing error grows with streams per worker (benchmarks/README.md)
        warnings.append(
            f"{spw:.0f} streams per load worker: above {STREAMS_PER_WORKER_KNEE}, chunk "
            f"timestamps may be late by more than {TIMING_BOUND_MS:g} ms (p99); add --workers"
        )
    c["bottleneck"] = bottleneck
    c["warnings"] = warnings
