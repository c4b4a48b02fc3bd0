"""Per-request records -> run-level metrics (docs/METRICS.md "Run-level metrics").

Works on an Arrow table with the request schema, vectorised with numpy, so a run of a
million requests summarises in seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any, NotRequired, TypedDict, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from accelbench.documents import Fields
from accelbench.errors import DocumentError
from accelbench.metrics.parallel import ordered_map
from accelbench.metrics.prefixcache import CACHE_COLUMNS, CacheSection, ServerCache, cache_section
from accelbench.metrics.records import SOURCE_SERVER, ErrorKind
from accelbench.metrics.registry import FIGURES, MAX_TOKENS_PER_S, figure, out_of_range
from accelbench.metrics.stats import (
    PreparedBatch,
    StreamedDescribe,
    describe,
    describe_adjusted,
    describe_weighted,
)
from accelbench.metrics.values import column_np

try:  # the compiled chunk-gap pass (optional: numpy is the fallback)
    from accelbench.metrics import _chunkstats
except ImportError:  # pragma: no cover - where the extension did not build
    _chunkstats = None  # type: ignore[assignment]

SCHEMA_ID = "accelbench.summary/1"

# ----------------------------------------------------------------------------- the model
# summary.json as typed dictionaries (docs/RESULTS.md): the document is written from these
# and read back into them (:func:`summary_from_json`); the JSON format is unchanged.

Stats = Mapping[
    str, float | int | str | None
]  # count, mean, std, min, max, p50 ... p99.9: a number,
# null (nothing observed) or "inf" (an adjusted rank among the failures)


class Counts(TypedDict):
    planned: int | None
    completed: int
    failed: int
    warmup: int
    interrupted: int


class Window(TypedDict):
    start_ns: int | None
    end_ns: int | None
    duration_s: float
    send_span_s: NotRequired[float | None]


class SteadyState(TypedDict):
    start_ns: int
    end_ns: int
    duration_s: float
    criterion: str
    output_tokens_per_s: float | None


class Throughput(TypedDict):
    requests_per_s: float | None
    input_tokens_per_s: float | None
    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    input_tokens_per_s_per_gpu: float | None
    output_tokens_per_s_per_gpu: float | None
    total_tokens_per_s_per_gpu: float | None


class Tokens(TypedDict):
    input: int | float
    output: int | float
    isl_source: NotRequired[dict[str, int]]
    osl_source: NotRequired[dict[str, int]]
    osl_mismatch: NotRequired[dict[str, int]]
    isl_vs_planned: NotRequired[dict[str, int]]
    usage_rejected: NotRequired[UsageRejected]
    chunk_tokens_known: NotRequired[bool]


class UsageRejected(TypedDict):
    """Successful requests whose server token counts could not be true (not used)."""

    requests: int
    example: str | None


class Interactivity(TypedDict):
    tok_s_user: float | None
    tpot_statistic: str


class Goodput(TypedDict):
    slo: dict[str, float]
    requests: int
    requests_per_s: float | None
    output_tokens_per_s: float | None
    fraction: float | None


class Errors(TypedDict):
    count: int
    rate: float | None
    by_kind: dict[str, int]
    by_status: dict[str, int]


class PhaseStart(TypedDict):
    name: str
    start_ns: int
    late_ms: float


class ReceiveStats(TypedDict, total=False):
    """How a worker's chunk times were stamped (client/http1.py ``receive_stats``)."""

    reads: int
    kernel_stamped: int
    read_delay_ms_p50: float | None
    read_delay_ms_p99: float | None
    read_delay_ms_max: float | None
    realtime_drift_ppm: float | None
    realtime_step_ms_max: float | None


class WorkerStats(TypedDict, total=False):
    """One load worker's account of itself (runner/loadgen.py ``LoadWorker.run``)."""

    worker: int
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    sent: int
    loop_lag_ms_p99: float
    loop_lag_ms_max: float
    receive: ReceiveStats | None
    phases: list[PhaseStart]
    driver_lost: str  # Ray: the actor stopped because its driver was gone
    nice: int  # the worker process's niceness (above 0 it yields the CPU to the server)


class ArrivalStamps(TypedDict, total=False):
    """Where a client's chunk times came from, over its workers (``arrival_stamps``)."""

    arrival_stamps: str  # kernel | loop
    read_delay_ms_p99: float | None
    realtime_drift_ppm: float | None
    realtime_step_ms_max: float | None


class ClientSection(ArrivalStamps, total=False):
    """summary.json ``client`` (and run.json's copy): the load generator's own figures,
    and the judgement whether it, not the server, was the limit."""

    workers: list[WorkerStats]
    n_workers: int
    cpu_s: float
    cpu_s_workers: float
    cpu_s_parent: float
    cpu_util: float | None
    cpu_us_per_chunk: float
    loop_lag_ms_p99: float | None
    start_late_ms_max: float | None
    warnings: list[str]
    # added by the run's end (runner/finalize.py)
    schedule_lag_ms_p99: float | None
    mode: str | None
    requested_rate: float | None
    target_concurrency: int | None
    achieved_rate: float | None
    streams_per_worker: float | None
    bottleneck: bool
    server_cache: ServerCache  # the server's prefix cache, where the run learnt it


def arrival_stamps(worker_stats: list[WorkerStats]) -> ArrivalStamps:
    """Where the workers' chunk times came from: ``kernel`` when (nearly) every read
    carried the kernel's receive time (client/http1.py ``ReceiveHub``), else ``loop``; and
    the p99 of how long reads waited in the socket before a worker read them (the most
    late a loop-side time would have been), the largest over the workers; and how the
    wall clock, which the stamps are on, moved against the monotonic one."""
    recv = [r for s in worker_stats if (r := s.get("receive"))]
    reads = sum(r.get("reads", 0) for r in recv)
    stamped = sum(r.get("kernel_stamped", 0) for r in recv)
    delays = [x for r in recv if (x := r.get("read_delay_ms_p99")) is not None]
    drift = [x for r in recv if (x := r.get("realtime_drift_ppm")) is not None]
    steps = [x for r in recv if (x := r.get("realtime_step_ms_max")) is not None]
    return ArrivalStamps(
        arrival_stamps="kernel" if reads and stamped >= 0.99 * reads else "loop",
        read_delay_ms_p99=max(delays) if delays else None,
        # the stamps' clock (realtime) against the monotonic one: worst worker
        realtime_drift_ppm=max(drift, key=abs) if drift else None,
        realtime_step_ms_max=max(steps) if steps else None,
    )


def reads_waited(delay_ms: float | None, gap_ms: float | None) -> str | None:
    """The warning when reads waited in the socket longer than the median chunk gap:
    then a read can take two chunks of one stream, and the earlier gets the later one's
    time (kernel stamps), or both the read's (loop-side times). None where they did not."""
    if delay_ms is None or not gap_ms or delay_ms <= gap_ms:
        return None
    return (
        f"reads waited in the socket up to {delay_ms:.1f} ms (p99), longer than the "
        f"median chunk gap ({gap_ms:.1f} ms): some chunks were read together and share "
        "the later one's arrival time"
    )


class DeviceEnergy(TypedDict):
    joules: float
    method: str


class EnergySection(TypedDict):
    """Energy over the summary's window (telemetry/energy.py ``window_energy``); J per
    token over the summary's token counts (one definition: docs/METRICS.md)."""

    joules: float
    method: str  # counter | integrated_power
    window_s: float
    average_w: float | None
    j_per_output_token: float | None
    j_per_total_token: float | None
    devices: dict[str, DeviceEnergy]
    # a GPU whose samples stop (or start) well inside the window: what it was not seen for
    warnings: NotRequired[list[str]]


class HealthSection(TypedDict):
    """The health rules' verdict of the run (health/rules.py)."""

    verdict: str  # pass | warn | fail | unknown
    findings: list[dict[str, object]]
    unknown: NotRequired[list[str]]


class SourceErrors(TypedDict):
    count: int
    last: str | None


class TelemetrySection(TypedDict, total=False):
    """What the sampler beside the run found (telemetry/sampler.py ``stop``)."""

    sources: dict[str, str]  # name -> "ok" | "not available: why"
    energy: EnergySection | None
    health: HealthSection
    samples: int
    interval_s: float
    errors: dict[str, SourceErrors]
    file: str
    error: str  # telemetry failed: why (the run is not affected)


class JournalSection(TypedDict):
    """What of the journal could not be used (only where something could not)."""

    missing: bool
    unreadable_lines: int
    line_numbers: list[int]
    bad_records: int
    rows_read: int
    kept_parquet_rows: NotRequired[int | None]
    unusable: NotRequired[str]  # why a journal that is there cannot be read (a directory)
    repeated_records: NotRequired[int]  # records repeating an earlier record's idx
    repeated_idx: NotRequired[list[int]]  # the first few of those idx
    kept_parquet_repeated: NotRequired[int]  # repeats left out of the kept requests.parquet


class ImportSection(TypedDict):
    tool: str
    file: str


class MlperfSection(TypedDict, total=False):
    """An MLPerf run's verdict in short (the whole record is mlperf.json)."""

    benchmark: str
    scenario: str
    result: str | None
    loadgen_result: str | None
    reasons: list[str]
    compliant: bool
    noncompliance: list[str]
    requests: dict[str, int]
    peak_qps: float | None
    figures: dict[str, object]


class Summary(TypedDict):
    """summary.json. The sections a run always writes are required; the others are added
    by telemetry, energy, health, imports and rebuilds."""

    schema: str
    status: str
    gpus: int
    counts: Counts
    window: Window
    steady_state: SteadyState | None
    throughput: Throughput
    tokens: Tokens
    latency: dict[str, Stats]
    interactivity: Interactivity
    goodput: Goodput | None
    errors: Errors
    client: ClientSection
    definitions: dict[str, str]
    telemetry: NotRequired[TelemetrySection]
    energy: NotRequired[EnergySection | None]
    health: NotRequired[HealthSection]
    journal: NotRequired[JournalSection]
    mlperf: NotRequired[MlperfSection]
    cache: NotRequired[CacheSection]
    source: NotRequired[ImportSection]
    absent: NotRequired[list[str]]


# Sections that must be JSON objects where present (None allowed where the value may be null).
_SECTIONS: dict[str, bool] = {
    "counts": False,
    "window": False,
    "steady_state": True,
    "throughput": False,
    "tokens": False,
    "latency": False,
    "interactivity": False,
    "goodput": True,
    "errors": False,
    "client": False,
    "definitions": False,
    "telemetry": True,
    "energy": True,
    "health": True,
    "journal": True,
    "mlperf": True,
    "cache": True,
    "source": True,
}
KNOWN_SCHEMAS = (SCHEMA_ID,)  # a file without ``schema`` (an early import) reads as /1
# The figures every run writes (null where not observed) and every view of a run reads:
# a summary without them has lost its sections (the frontier's axes and throughput).
REQUIRED_FIGURES = ("output_tps_per_gpu", "total_tps_per_gpu", "interactivity")


def summary_from_json(
    doc: object, where: str = "summary.json", *, figures: bool = True
) -> tuple[Summary, list[str]]:
    """A summary.json document read back into the model: ``(summary, problems)``.

    A document that cannot be used is one :class:`DocumentError` line naming ``where``
    and the field: not an object, a schema this version does not know, or a ``gpus``
    that is not a positive whole number (every per-GPU figure divides by it). A section
    of the wrong type is dropped (and named in ``problems``) so that readers of the other
    sections still work; the registry's figures read a missing section as unknown.
    With ``figures`` (the default) the figures are checked too (:func:`figures_damage`):
    a summary without them, or with one that cannot be a measurement, is damaged (the
    runs store then recomputes it from requests.parquet)."""
    Fields(doc, where).schema(SCHEMA_ID, KNOWN_SCHEMAS, absent=SCHEMA_ID)
    if not isinstance(doc, dict):  # a Mapping that is not JSON's own
        raise DocumentError(f"{where}: expected an object, got {type(doc).__name__}")
    problems: list[str] = []
    gpus = doc.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 65536:
        raise DocumentError(f"{where}: gpus must be a whole number in 1..65536 (got {gpus!r})")
    out = dict(doc)
    for key, nullable in _SECTIONS.items():
        if key not in out:
            continue
        v = out[key]
        if isinstance(v, dict) or (v is None and nullable):
            continue
        problems.append(f"{where}: {key} is not an object; ignored")
        del out[key]
    lat = out.get("latency")
    if isinstance(lat, dict):
        for k in [k for k, v in lat.items() if not isinstance(v, dict)]:
            problems.append(f"{where}: latency.{k} is not an object; ignored")
            del lat[k]
    tel = out.get("telemetry")
    for key in ("energy", "health"):  # the sections telemetry also holds
        if isinstance(tel, dict) and not isinstance(tel.get(key), dict | None):
            problems.append(f"{where}: telemetry.{key} is not an object; ignored")
            del tel[key]
    health = out.get("health")
    if isinstance(health, dict) and not isinstance(health.get("verdict"), str):
        problems.append(f"{where}: health.verdict is not a string; ignored")
        del out["health"]
    client = out.get("client")
    if isinstance(client, dict):
        for key in ("workers", "warnings"):
            if key in client and not isinstance(client[key], list):
                problems.append(f"{where}: client.{key} is not a list; ignored")
                del client[key]
    if "client" not in out:
        out["client"] = {}
    if figures and (why := figures_damage(out)):
        raise DocumentError(f"{where}: {why}")
    return cast(Summary, out), problems  # checked above, section by section


# A count of requests (summary.json ``counts``) as a float holds it exactly: far above any
# run (10M sessions of 10,000 turns), below what an edit such as 2**63 gives.
MAX_COUNT = 2**53


def figures_damage(summary: Mapping[str, object]) -> str | None:
    """Why a summary's figures cannot be used, in one phrase, None where they can: the
    figures of :data:`REQUIRED_FIGURES` missing (a section lost), a figure of the
    registry or a throughput outside its physical range (negative, NaN, infinite, not a
    number: the registry's ``lo`` / ``hi``; every throughput is >= 0), or a request count
    (``counts``) that is not a whole number from 0 to :data:`MAX_COUNT`."""
    missing = [".".join(f.path) for f in map(figure, REQUIRED_FIGURES) if not f.present(summary)]
    if missing:
        return f"{', '.join(missing)} missing (the summary lost its figure sections)"
    bad = [w for f in FIGURES.values() if (w := f.damage(summary))]
    thr = summary.get("throughput")
    if isinstance(thr, Mapping):
        done = {f.path[1] for f in FIGURES.values() if f.path[0] == "throughput"}
        bad += [
            w
            for k, v in thr.items()
            if k not in done
            and v is not None
            and (w := out_of_range(f"throughput.{k}", v, hi=MAX_TOKENS_PER_S))
        ]
    counts = summary.get("counts")
    if isinstance(counts, Mapping):  # requests counted: whole numbers, never below 0
        for k, v in counts.items():
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                bad.append(f"counts.{k} = {v!r:.40} is not a whole number")
            elif (w := out_of_range(f"counts.{k}", v, hi=MAX_COUNT)) is not None:
                bad.append(w)
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more impossible figure(s))" if len(bad) > 1 else ""
    return bad[0] + more


def stat_value(stats: Stats | None, key: str) -> float | None:
    """One figure of a stats object as a number: None where nothing was observed (null)
    or where it is not a finite number (an adjusted rank's "inf")."""
    v = stats.get(key) if stats is not None else None
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def health_section(doc: Mapping[str, object]) -> HealthSection:
    """The health rules' verdict as the summary holds it (the rules return a plain
    mapping: health/ is above this package)."""
    findings = doc.get("findings")
    out = HealthSection(
        verdict=str(doc.get("verdict") or "unknown"),
        findings=[dict(f) for f in findings if isinstance(f, dict)]
        if isinstance(findings, list)
        else [],
    )
    unknown = doc.get("unknown")
    if isinstance(unknown, list):
        out["unknown"] = [str(x) for x in unknown]
    return out


DEFINITIONS = {
    "window": "first send to last content chunk of the measured (non-warm-up) requests",
    "token_source": "ISL/OSL from the server's usage where sent; else client tokenizer; "
    "else content-chunk count (see tokens.*_source)",
    "percentiles": "linear interpolation between order statistics (numpy default)",
    "tpot": "(E2E - TTFT) / (OSL - 1) per request with OSL >= 2; token-weighted variant "
    "weights each request by OSL - 1",
    "chunk_gap": "arrival gaps between consecutive content chunks, pooled over requests "
    "(what vLLM/SGLang call ITL); token-weighted by tokens per chunk where known",
    "interactivity": "1000 / TPOT_ms of the chosen statistic",
    "adjusted": "percentiles counting each failed request as +infinity",
}


def _col(t: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64 with NaN for nulls."""
    return column_np(t, name)


def _nan_extreme(fn: Callable[[np.ndarray], Any], a: np.ndarray) -> float:
    """nanmin / nanmax, NaN (without a warning) when nothing was observed."""
    return float(fn(a)) if a.size and not np.isnan(a).all() else math.nan


# a server prompt count this far from the planned one is named in a warning (not
# rejected: a server that truncates the prompt counts what it read; a chat template adds
# tokens): below planned / 2 or above 2 x planned + 256
ISL_FAR_FACTOR = 2
ISL_FAR_SLACK = 256


def _where(t: pa.Table, name: str, value: str | None = None) -> np.ndarray:
    """Where a string column equals ``value`` (None: where it is set), as a bool array;
    all False where the table lacks the column (older runs)."""
    if name not in t.column_names:
        return np.zeros(t.num_rows, dtype=bool)
    col = t.column(name)
    hit = pc.is_valid(col) if value is None else pc.equal(col, value).fill_null(False)
    return np.asarray(hit, dtype=bool)


def _bool(t: pa.Table, name: str) -> np.ndarray:
    return column_np(t, name, bool)


def _chunk_gaps(ok: pa.Table) -> tuple[np.ndarray, np.ndarray, bool]:
    """Pooled chunk gaps (ms) and their token weights (1 where the server did not say)."""
    got = _piece_gaps(ok, None)
    if got is not None:
        return got[:3]
    times = ok.column("chunk_times").combine_chunks()
    if len(times) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64), False
    flat = np.asarray(pc.list_flatten(times).to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = times.offsets.to_numpy()
    if flat.size < 2:
        return np.empty(0), np.empty(0, dtype=np.int64), False
    gaps = np.diff(flat) / 1e6
    valid = np.ones(flat.size, dtype=bool)
    valid[offsets[:-1][offsets[:-1] < flat.size]] = False  # first chunk of each request
    valid = valid[1:]
    weights = None
    toks = ok.column("chunk_tokens").combine_chunks()
    known = toks.null_count == 0 and len(toks) == len(times)
    if known:
        tflat = pc.list_flatten(toks).to_numpy(zero_copy_only=False).astype(np.int64)
        if tflat.size == flat.size and bool(
            (pc.list_value_length(toks).fill_null(0).to_numpy(zero_copy_only=False)
             == pc.list_value_length(times).fill_null(0).to_numpy(zero_copy_only=False)).all()
        ):  # fmt: skip
            weights = tflat
        else:
            known = False
    if weights is None:
        weights = np.ones(flat.size, dtype=np.int64)
    return gaps[valid], weights[1:][valid], known


def _list_parts(col: pa.ChunkedArray, value_type: pa.DataType) -> tuple[Any, Any, Any] | None:
    """(values, int32 offsets, validity) of a list column as numpy arrays without copies,
    or None where it is not a plain list of ``value_type`` without null elements."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_list(arr.type) or arr.type.value_type != value_type:
        return None
    values = arr.values
    if values.null_count:
        return None
    valid = (
        np.ones(len(arr), dtype=bool)
        if arr.null_count == 0
        else arr.is_valid().to_numpy(zero_copy_only=False)
    )
    return (values.to_numpy(zero_copy_only=True), arr.offsets.to_numpy(zero_copy_only=True),
            valid)  # fmt: skip


def _piece_gaps(
    table: pa.Table, mask: np.ndarray | None, span: tuple[np.ndarray, int, int] | None = None
) -> tuple[np.ndarray, np.ndarray, bool, float] | None:
    """``_chunk_gaps`` of the rows of ``table`` where ``mask`` (every row: None), and the
    output tokens of those rows that arrived within a span (``span``: their OSL, one per
    masked row, then a and b), in one compiled pass over the unfiltered table
    (metrics/_chunkstats.c); None where that extension or the columns' plain layout is
    missing (then numpy does it). A row's tokens are known where its chunk_tokens list
    is there and as long as its chunk_times list; where any masked row's are not, every
    gap weighs 1 (``known`` False)."""
    if _chunkstats is None or "chunk_times" not in table.column_names:
        return None
    times = _list_parts(table.column("chunk_times"), pa.int64())
    if times is None:
        return None
    tv, toff, tvalid = times
    n = table.num_rows
    rows = tvalid if mask is None else tvalid & mask
    flags = rows.astype(np.uint8)
    kv = np.empty(0, np.int32)
    koff = np.empty(0, np.int32)
    if "chunk_tokens" in table.column_names:
        toks = _list_parts(table.column("chunk_tokens"), pa.int32())
        if toks is None:
            return None
        kv, koff, kvalid = toks
        every = kvalid if mask is None else kvalid | ~mask
        if every.all():  # a null token list on any row summarised: none are known
            flags[rows] = 2
    osl = np.empty(0)
    a = b = 0
    if span is not None:
        osl = np.zeros(n)
        osl[mask if mask is not None else slice(None)] = span[0]
        a, b = int(span[1]), int(span[2])
    g, w, known, in_span = _chunkstats.gaps(
        np.ascontiguousarray(tv, np.int64), np.ascontiguousarray(toff, np.int32),
        np.ascontiguousarray(kv, np.int32), np.ascontiguousarray(koff, np.int32),
        flags, np.ascontiguousarray(osl, np.float64), a, b,
    )  # fmt: skip
    gaps = np.frombuffer(g, dtype=np.float64)
    weights = np.frombuffer(w, dtype=np.int64)
    total = int(np.count_nonzero(rows))
    if total and int((np.diff(toff)[rows]).sum()) < 2:  # as numpy's path: < 2 chunk times
        return np.empty(0), np.empty(0, dtype=np.int64), False, float(in_span)
    if not total:
        return gaps, weights, False, float(in_span)
    return gaps, weights, bool(known), float(in_span)


# The chunk columns of a table too large to hold: consecutive row slices of the table
# summarised (in its row order), each with ``chunk_times`` and ``chunk_tokens``, read anew
# on every call (the store reads them per row group from requests.parquet).
ChunkSource = Callable[[], Iterable[pa.Table]]
# Chunk gaps summarised in memory at once, exactly as always; a table with more (or a
# ChunkSource) is summarised streamed, in one pass or two (stats.StreamedDescribe).
DENSE_CHUNKS = 1 << 24
SLICE_ROWS = 1 << 16


def _table_slices(table: pa.Table) -> ChunkSource:
    cols = [c for c in ("chunk_times", "chunk_tokens") if c in table.column_names]

    def gen() -> Iterable[pa.Table]:
        for i in range(0, table.num_rows, SLICE_ROWS):
            yield table.select(cols).slice(i, SLICE_ROWS)

    return gen


def _streamed_gaps(
    source: ChunkSource, ok_mask: np.ndarray, span: tuple[np.ndarray, int, int] | None = None
) -> tuple[Stats, Stats, bool, float]:
    """describe(gaps), describe_weighted(gaps, tokens), whether the tokens per chunk were
    known, from the ok rows of ``source``: read once where the gaps' distribution is
    stable enough for stats.StreamedDescribe's guess, else twice; and, in the first read,
    the output tokens that arrived within ``span`` (the ok rows' OSL, a, b)."""
    sd = StreamedDescribe()
    plain: StreamedDescribe | None = None  # weights 1, where the tokens were not known
    known = True
    in_span = 0.0
    again = (True, True)
    for second in (False, True):

        def pieces() -> Iterator[tuple[pa.Table, np.ndarray, int]]:
            at = at_ok = 0
            for piece in source():  # decoded here: in the worker that draws the piece
                mask = ok_mask[at : at + piece.num_rows]
                at += piece.num_rows
                k_ok = int(np.count_nonzero(mask))
                if k_ok:
                    yield piece, mask, at_ok
                at_ok += k_ok

        def work(
            item: tuple[pa.Table, np.ndarray, int],
            second: bool = second,
            again: tuple[bool, bool] = again,
            plain: StreamedDescribe | None = plain,
        ) -> tuple[float, bool, PreparedBatch | None, PreparedBatch | None]:
            piece, mask, at_ok = item
            tokens = 0.0
            n_ok = int(np.count_nonzero(mask))
            counted = None
            if not second and span is not None:
                counted = (span[0][at_ok : at_ok + n_ok], span[1], span[2])
            got = _piece_gaps(piece, mask, counted)
            if got is not None:  # compiled, on the unfiltered piece
                gaps, w, k, tokens = got
            else:
                part = piece if mask.all() else piece.filter(pa.array(mask))
                if counted is not None:
                    tokens = _span_tokens(part, *counted)
                gaps, w, k = _chunk_gaps(part)
            mine = sd.prepare(gaps, w) if not second or again[0] else None
            unit = None
            if second and again[1] and plain is not None:
                unit = plain.prepare(gaps, np.ones(gaps.size, dtype=np.int64))
            return tokens, k or gaps.size == 0, mine, unit

        # pieces in threads (decoding, filtering and bucketing release the GIL), committed
        # here in their order: the figures are those of one thread
        for tokens, k, mine, unit in ordered_map(work, pieces(), ahead=0):
            in_span += tokens
            if not second:
                known = known and k
            sd.commit(mine)
            if plain is not None:
                plain.commit(unit)
        if second:
            break
        if not known:  # its first pass is sd's unweighted one: not computed twice
            plain = sd.with_unit_weights()
        again = (not sd.complete(), plain is not None and not plain.complete())
        if not any(again):
            break
        for d, more in ((sd, again[0]), (plain, again[1])):
            if more and d is not None:
                d.second_pass()
    stats, weighted = sd.result()
    if plain is not None:
        weighted = plain.result()[1]
    return cast(Stats, stats), cast(Stats, weighted), known, in_span


def _longest_span(starts: np.ndarray, ends: np.ndarray, threshold: float) -> tuple[int, int]:
    """Longest interval during which at least ``threshold`` requests are in flight."""
    if starts.size == 0:
        return 0, 0
    ev_t = np.concatenate([starts, ends])
    ev_d = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.lexsort((ev_d, ev_t))  # at equal times, ends (-1) before starts
    ev_t, ev_d = ev_t[order], ev_d[order]
    level = np.cumsum(ev_d)
    above = level >= threshold - 1e-9
    if not above.any():
        return 0, 0
    # runs of consecutive events at or above the threshold: [first, last]
    edges = np.diff(np.concatenate([[0], above.astype(np.int8), [0]]))
    firsts = np.nonzero(edges == 1)[0]
    lasts = np.nonzero(edges == -1)[0] - 1
    n = ev_t.size
    # a run lasts until the next event (the one that drops below the threshold)
    ends = ev_t[np.minimum(lasts + 1, n - 1)]
    spans = ends - ev_t[firsts]
    k = int(np.argmax(spans))
    if spans[k] <= 0:
        return 0, 0
    return int(ev_t[firsts[k]]), int(ends[k])


def _slot_spans(starts: np.ndarray, ends: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """A closed loop's in-flight spans by slot: each of its ``slots`` sends its next request
    as soon as one ends, so between the two it is still busy (the client's moment, not a
    dip in the load); a slot is in flight from its first send to its last request's end.
    Those are the first ``slots`` sends and the last ``slots`` ends (fewer when fewer
    requests ran)."""
    starts = starts[~np.isnan(starts)]
    ends = ends[~np.isnan(ends)]
    k = min(slots, starts.size, ends.size)
    return np.sort(starts)[:k], np.sort(ends)[ends.size - k :]


def _rate_span(sends: np.ndarray, rate: float) -> tuple[int, int]:
    """Longest span (on a bin grid) where the achieved send rate is within 5% of target."""
    if sends.size < 2:
        return 0, 0
    t0, t1 = int(sends.min()), int(sends.max())
    total_s = (t1 - t0) / 1e9
    if total_s <= 0:
        return 0, 0
    # bins that tile the sends' span exactly: a last bin reaching past the last send
    # would count its empty tail as time at the rate (and end the span after the run)
    nb = max(1, round(total_s / max(1.0, 20.0 / rate, total_s / 1500)))
    width = total_s / nb
    counts = np.bincount(
        ((sends - t0) / 1e9 / width).astype(np.int64).clip(0, nb - 1), minlength=nb
    )
    cum = np.concatenate([[0], np.cumsum(counts)])
    best = (0, 0)
    for i in range(nb):
        j = np.arange(i + 1, nb + 1)
        r = (cum[j] - cum[i]) / ((j - i) * width)
        ok = np.nonzero(np.abs(r - rate) <= 0.05 * rate)[0]
        if ok.size:
            jj = int(j[ok[-1]])
            if (jj - i) > (best[1] - best[0]):
                best = (i, jj)
    if best == (0, 0):
        return 0, 0
    return t0 + int(best[0] * width * 1e9), min(t1, t0 + int(best[1] * width * 1e9))


def summarize(
    table: pa.Table,
    *,
    gpus: int = 1,
    slo: dict[str, float] | None = None,
    mode: str = "concurrency",
    target_concurrency: int | None = None,
    requested_rate: float | None = None,
    client: ClientSection | None = None,
    status: str = "completed",
    planned: int | None = None,
    tpot_statistic: str = "p50",
    chunks: ChunkSource | None = None,
) -> Summary:
    """The summary.json document for one run (see docs/RESULTS.md).

    ``chunks``: the chunk columns read apart (a table too large to hold with them: the
    table then need not have them); their gaps are then summarised in two streamed
    passes. Rows are selected by masks, never by copying the table."""
    warm = _bool(table, "warmup")
    interrupted = np.asarray(
        pc.equal(table.column("error_kind"), ErrorKind.INTERRUPTED).fill_null(False), dtype=bool
    )
    okv = _bool(table, "ok")
    measured = ~warm & ~interrupted
    ok_mask = measured & okv
    fail_mask = measured & ~okv
    # rows are selected by masks, column by column: no copy of the table (copies of a
    # million-request table with its chunk times were finalize's memory peak)
    all_measured, all_ok = bool(measured.all()), bool(ok_mask.all())

    def mcol(name: str) -> np.ndarray:
        c = _col(table, name)
        return c if all_measured else c[measured]

    def okcol(name: str) -> np.ndarray:
        c = _col(table, name)
        return c if all_ok else c[ok_mask]

    n_meas = int(measured.sum())
    n_ok, n_fail = int(ok_mask.sum()), int(fail_mask.sum())

    # the steady state's span from the per-request columns (dropped at once), so that the
    # streamed chunk pass can count its tokens too (one read of the chunks less)
    span: tuple[int, int, str] | None = None
    if n_meas:
        t_send = mcol("t_send")
        if mode == "rate" and requested_rate:
            a, b = _rate_span(t_send[~np.isnan(t_send)].astype(np.int64), requested_rate)
            span = (a, b, "achieved send rate within 5% of the target")
        else:
            ends = mcol("t_done")
            ends = np.where(np.isnan(ends), mcol("t_last"), ends)
            ends = np.where(np.isnan(ends), t_send, ends)
            target = target_concurrency or 1
            if mode == "concurrency":
                t_send, ends = _slot_spans(t_send, ends, target)
            a, b = _longest_span(t_send, ends, 0.9 * target)
            span = (a, b, f"in-flight requests >= 90% of {target}")
            del ends
        del t_send
    # the chunk gaps first, while no other column is held (a 72-hour run streams them)
    in_span = 0.0
    if chunks is None and "chunk_times" in table.column_names:
        lens = pc.list_value_length(table.column("chunk_times")).fill_null(0)
        if int(pc.sum(lens.filter(pa.array(ok_mask))).as_py() or 0) > DENSE_CHUNKS:
            chunks = _table_slices(table)
    if chunks is None:
        cols = [c for c in ("chunk_times", "chunk_tokens") if c in table.column_names]
        ok_chunks = table.select(cols)
        ok_chunks = ok_chunks if all_ok else ok_chunks.filter(pa.array(ok_mask))
        gaps, gap_w, gap_known = _chunk_gaps(conform_chunks(ok_chunks))
        gap_stats: Stats = describe(gaps)
        gap_w_stats: Stats = describe_weighted(gaps, gap_w)
        del gaps, gap_w, ok_chunks
    else:
        counted = (okcol("osl"), span[0], span[1]) if span and span[1] > span[0] else None
        gap_stats, gap_w_stats, gap_known, in_span = _streamed_gaps(chunks, ok_mask, counted)
        del counted
    t_send = mcol("t_send")
    t_last_ok = okcol("t_last")
    start = _nan_extreme(np.nanmin, t_send)
    send_span = _send_span(t_send)
    del t_send  # read again for the steady state: one column of 13 million rows less held
    end = _nan_extreme(np.nanmax, t_last_ok)
    del t_last_ok
    if math.isnan(end) and n_meas:
        end = _nan_extreme(np.nanmax, mcol("t_done"))
    duration = (end - start) / 1e9 if not (math.isnan(start) or math.isnan(end)) else 0.0

    isl = okcol("isl")
    osl = okcol("osl")
    in_tok = float(np.nansum(isl))
    out_tok = float(np.nansum(osl))

    def per_s(x: float) -> float | None:
        return x / duration if duration > 0 else None

    def per_gpu(x: float | None) -> float | None:
        return None if x is None else x / gpus

    in_s, out_s, tot_s = per_s(in_tok), per_s(out_tok), per_s(in_tok + out_tok)
    thr: Throughput = {
        "requests_per_s": per_s(n_ok),
        "input_tokens_per_s": in_s,
        "output_tokens_per_s": out_s,
        "total_tokens_per_s": tot_s,
        "input_tokens_per_s_per_gpu": per_gpu(in_s),
        "output_tokens_per_s_per_gpu": per_gpu(out_s),
        "total_tokens_per_s_per_gpu": per_gpu(tot_s),
    }

    # the token-weighted TPOT (its sort the largest copy) while only TPOT and OSL are held
    tpot = okcol("tpot_ms")
    tpot_weighted = describe_weighted(tpot, np.where(np.isnan(tpot), 0, osl - 1).astype(np.int64))
    ttft, e2e = okcol("ttft_ms"), okcol("e2e_ms")
    # the columns held now, described in threads (each a sort-sized copy at a time)
    held: dict[str, Callable[[], Any]] = {
        "ttft_ms": partial(describe, ttft),
        "tpot_ms": partial(describe, tpot),
        "e2e_ms": partial(describe, e2e),
        "ttft_ms_adjusted": partial(describe_adjusted, ttft, n_fail),
        "e2e_ms_adjusted": partial(describe_adjusted, e2e, n_fail),
    }
    done: dict[str, Stats] = dict(zip(held, ordered_map(lambda f: f(), held.values()), strict=True))
    latency: dict[str, Stats] = {
        "ttft_ms": done["ttft_ms"],
        "tpot_ms": done["tpot_ms"],
        "tpot_ms_token_weighted": tpot_weighted,
        "e2e_ms": done["e2e_ms"],
        "ntpot_ms": describe(okcol("ntpot_ms")),
        "chunk_gap_ms": gap_stats,
        "chunk_gap_ms_token_weighted": gap_w_stats,
        "schedule_lag_ms": describe(mcol("schedule_lag_ms")),
        "tail_ms": describe(okcol("tail_ms")),
        "ttft_ms_adjusted": done["ttft_ms_adjusted"],
        "e2e_ms_adjusted": done["e2e_ms_adjusted"],
    }
    stat = stat_value(latency["tpot_ms"], tpot_statistic)
    interactivity: Interactivity = {
        "tok_s_user": (1000.0 / stat) if stat else None,
        "tpot_statistic": tpot_statistic,
    }

    goodput: Goodput | None = None
    if slo:
        good = np.ones(n_ok, dtype=bool)
        for key, arr in (("ttft_ms", ttft), ("tpot_ms", tpot), ("e2e_ms", e2e)):
            if key in slo:
                # a request with no TPOT (OSL < 2) cannot violate a TPOT SLO
                good &= np.where(np.isnan(arr), key == "tpot_ms", arr <= slo[key])
        total = n_ok + n_fail
        goodput = {
            "slo": dict(slo),
            "requests": int(good.sum()),
            "requests_per_s": per_s(float(good.sum())),
            "output_tokens_per_s": per_s(float(np.nansum(osl[good]))),
            "fraction": (float(good.sum()) / total) if total else None,
        }

    fails = table.select(["error_kind", "http_status"]).filter(pa.array(fail_mask))
    by_kind = Counter(fails.column("error_kind").to_pylist())
    by_status = Counter(str(s) for s in fails.column("http_status").to_pylist() if s is not None)
    errors: Errors = {
        "count": n_fail,
        "rate": (n_fail / (n_ok + n_fail)) if (n_ok + n_fail) else None,
        "by_kind": dict(by_kind),
        "by_status": dict(by_status),
    }

    osl_src = _value_counts(table.column("osl_source"), None if all_ok else ok_mask)
    isl_src = _value_counts(table.column("isl_source"), None if all_ok else ok_mask)
    mism = okcol("osl_mismatch")
    compared = ~np.isnan(mism)
    mism = mism[compared]
    client_total = float(np.nansum(okcol("osl_client")[compared]))
    planned_isl = okcol("isl_planned")
    from_server = _where(table, "isl_source", SOURCE_SERVER)
    server_isl = np.where(from_server if all_ok else from_server[ok_mask], isl, np.nan)
    both = ~np.isnan(planned_isl) & ~np.isnan(server_isl)
    far = both & (
        (server_isl < planned_isl / ISL_FAR_FACTOR)
        | (server_isl > planned_isl * ISL_FAR_FACTOR + ISL_FAR_SLACK)
    )
    rejected = np.nonzero(_where(table, "usage_rejected") & ok_mask)[0]
    example = table.column("usage_rejected")[int(rejected[0])].as_py() if rejected.size else None
    tokens: Tokens = {
        "input": int(in_tok),
        "output": int(out_tok),
        "isl_source": {str(k): v for k, v in isl_src.items()},
        "osl_source": {str(k): v for k, v in osl_src.items()},
        "osl_mismatch": {
            "requests": int((mism != 0).sum()),
            "sum_abs": int(np.abs(mism).sum()),
            "compared": int(mism.size),
            "client_total": int(client_total),
        },
        "isl_vs_planned": {"far": int(far.sum()), "compared": int(both.sum())},
        "usage_rejected": {"requests": int(rejected.size), "example": example},
        "chunk_tokens_known": bool(gap_known),
    }

    # what follows reads the chunks again: the per-request arrays are done (13 million
    # rows: ~100 MB each)
    del ttft, tpot, e2e, mism, isl, planned_isl, server_isl
    steady: SteadyState | None = None
    if span is not None and not (math.isnan(start) or math.isnan(end)):
        # within the window: a request's in-flight end (t_done) or a bin's edge may lie
        # past its last content chunk; no chunk arrives outside it, so the tokens stand
        span = (max(span[0], int(start)), min(span[1], int(end)), span[2])
    if span is not None and span[1] > span[0]:
        a, b, criterion = span
        if chunks is None:
            tps = _tokens_in_span(_table_slices(table), ok_mask, osl, a, b)
        else:  # counted in the streamed chunk pass
            tps = in_span / ((b - a) / 1e9) if ok_mask.any() else None
        steady = {
            "start_ns": a,
            "end_ns": b,
            "duration_s": (b - a) / 1e9,
            "criterion": criterion,
            "output_tokens_per_s": tps,
        }

    n_warm = int(warm.sum())
    summary: Summary = {
        "schema": SCHEMA_ID,
        "status": status,
        "gpus": gpus,
        "counts": {
            "planned": planned,
            "completed": n_ok,
            "failed": n_fail,
            "warmup": n_warm,
            "interrupted": int((interrupted & ~warm).sum()),
        },
        "window": {
            "start_ns": None if math.isnan(start) else int(start),
            "end_ns": None if math.isnan(end) else int(end),
            "duration_s": duration,
            # first to last send: the span over which the load was offered
            "send_span_s": send_span,
        },
        "steady_state": steady,
        "throughput": thr,
        "tokens": tokens,
        "latency": latency,
        "interactivity": interactivity,
        "goodput": goodput,
        "errors": errors,
        "client": client.copy() if client is not None else ClientSection(),
        "definitions": DEFINITIONS,
    }
    cache = _cache(table, summary["client"])
    if cache is not None:
        summary["cache"] = cache
    return summary


def _cache(table: pa.Table, client: ClientSection) -> CacheSection | None:
    """The prefix-cache section where the workload has structure (sessions, shared
    prefixes, trace blocks) or the server said what it had cached."""
    cols = [
        c for c in ("session", "prefix_group", "blocks", "cached_tokens") if c in table.column_names
    ]
    if not any(table.column(c).null_count < table.num_rows for c in cols):
        return None
    names = [c for c in CACHE_COLUMNS if c in table.column_names]
    rows = table.select(names).to_pylist()
    for r in rows:
        for c in CACHE_COLUMNS:
            r.setdefault(c, None)
    return cache_section(rows, client.get("server_cache"))


def _send_span(t_send: np.ndarray) -> float | None:
    sends = t_send[~np.isnan(t_send)]
    return float((sends.max() - sends.min()) / 1e9) if sends.size >= 2 else None


def _tokens_in_span(
    source: ChunkSource, ok_mask: np.ndarray, osl: np.ndarray, a: int, b: int
) -> float | None:
    """Output tokens/s within [a, b]: chunk arrivals in the span, each chunk weighted by
    its request's OSL / chunks (exact when one chunk carries one token). ``osl``: the ok
    rows' OSL, in order."""
    if b <= a or not ok_mask.any():
        return None
    total = 0.0
    at = at_ok = 0
    for piece in source():
        n = piece.num_rows
        mask = ok_mask[at : at + n]
        at += n
        k = int(mask.sum())
        if not k:
            continue
        part = piece if k == n else piece.filter(pa.array(mask))
        total += _span_tokens(part, osl[at_ok : at_ok + k], a, b)
        at_ok += k
    return float(total / ((b - a) / 1e9))


def _span_tokens(ok: pa.Table, osl: np.ndarray, a: int, b: int) -> float:
    """Output tokens of the rows of ``ok`` whose chunks arrived within [a, b], each chunk
    weighted by its request's OSL / chunks; ``osl``: those rows' OSL."""
    times = ok.column("chunk_times").combine_chunks()
    flat = pc.list_flatten(times).to_numpy(zero_copy_only=False).astype(np.int64)
    lens = pc.list_value_length(times).fill_null(0).to_numpy(zero_copy_only=False)
    lens = lens.astype(np.int64)
    per_chunk = np.where(lens > 0, np.nan_to_num(osl) / np.maximum(lens, 1), 0.0)
    w = np.repeat(per_chunk, lens)
    inside = (flat >= a) & (flat <= b)
    return float(w[inside].sum())


def _value_counts(col: pa.ChunkedArray | pa.Array, mask: np.ndarray | None) -> dict[Any, int]:
    """Counter(col[mask].to_pylist()) without a Python object per row."""
    if mask is not None:
        col = col.filter(pa.array(mask))
    out: dict[Any, int] = {}
    for row in pc.value_counts(col).to_pylist():
        out[row["values"]] = out.get(row["values"], 0) + int(row["counts"])
    return out


def conform_chunks(t: pa.Table) -> pa.Table:
    """The chunk columns a table lacks, as nulls (an import without chunk lists)."""
    for name, typ in (
        ("chunk_times", pa.list_(pa.int64())),
        ("chunk_tokens", pa.list_(pa.int32())),
    ):
        if name not in t.column_names:
            t = t.append_column(name, pa.nulls(t.num_rows, typ))
    return t
