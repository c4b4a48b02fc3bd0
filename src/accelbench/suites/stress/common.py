"""What the four suites share: the stress directory, the memory probe (client, server
and device memory, temperatures, clocks, throttling), window statistics over records,
and running one ordinary run directory per step."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

import numpy as np
import orjson

from accelbench.documents import Json, JsonObject
from accelbench.errors import AccelbenchError, DocumentError, UsageError
from accelbench.metrics.records import ErrorKind, RequestRow
from accelbench.runner.config import BenchmarkConfig
from accelbench.store.rundoc import read_run_doc
from accelbench.suites.stress.document import MemorySample, WindowStats
from accelbench.urls import Endpoint
from accelbench.validate import missing_dirs, remove_empty_dirs

if TYPE_CHECKING:
    from accelbench.metrics.completion import Encoder
    from accelbench.runner.benchmark import RunResult

Log = Callable[[str], None]


def _quiet(msg: str) -> None:
    return None


# -- the stress directory --------------------------------------------------------------
@contextlib.contextmanager
def stress_dir(out: str | None, root: str, kind: str) -> Iterator[Path]:
    """``out`` or ``root/stress-<kind>-<time>``, created. A suite refused before its first
    step wrote a run (an unknown model, no server, a bad key file, --ray: what ``run``
    exits 2 for), or stopped by a signal before then (exit 130), leaves the directory as
    it found it: what this call wrote there is removed, and the folders it made."""
    if out:
        path = Path(out)
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = Path(root) / f"stress-{kind}-{stamp}"
    made = missing_dirs(path)
    before = set(path.iterdir()) if path.is_dir() else set()
    runs_before = _files(path / "runs")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        yield path
    except (AccelbenchError, KeyboardInterrupt):  # refused, or stopped before it began
        if _files(path / "runs") == runs_before:  # no step got to write a run
            for p in set(path.iterdir()) - before:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            remove_empty_dirs(made)
        raise


def _files(d: Path) -> set[Path]:
    return {p for p in d.rglob("*") if p.is_file()} if d.is_dir() else set()


class JsonlAppender:
    """One JSON line per row, flushed and fsynced per row: a killed soak keeps every row
    it wrote (rows are small and come once per window or memory sample). The rows are
    read back by their types' readers (suites/stress/document.py: ``read_rows``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, row: JsonObject | MemorySample) -> None:
        with open(self.path, "ab") as f:
            f.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            f.flush()
            os.fsync(f.fileno())


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- runs ------------------------------------------------------------------------------
class StepChanges(TypedDict, total=False):
    """What a suite's step changes in its load's configuration (:func:`run_step`)."""

    url: Endpoint | None
    concurrency: int | None
    rate: float | None
    num_requests: int | None
    duration_s: float | None
    warmup_requests: int
    save_text: bool
    extra_body: JsonObject


class WorkloadChanges(TypedDict, total=False):
    """What a step changes in its workload (flood: the input and output lengths)."""

    isl: int
    osl: int


def check_load(
    cfg: BenchmarkConfig, where: str | None = None, step: StepChanges | None = None
) -> None:
    """Check a suite's load before anything runs, on a copy (``validate`` fills defaults
    that the suites set per step); ``where`` names the endpoint in the message. With
    ``step``, the changes the suite's steps make (as :func:`run_step` takes them), the
    combination is checked too (``check_run_options``: an option the step would ignore,
    such as ``-c`` beside ``--rate``, is refused now, not when that step starts)."""
    try:
        c = replace(cfg, workload=replace(cfg.workload), **(step or {}))
        c.validate()
        if step is not None:
            c.check_run_options()
    except UsageError as exc:
        if where is None:
            raise
        url = cfg.url.display if cfg.url else "(embedded)"
        raise UsageError(f"{where} ({url}): {exc}") from None


@contextlib.contextmanager
def suite_stops() -> Iterator[Callable[[], None]]:
    """A suite's stop rule (docs/PROCESSES.md), the sweep's: inside, SIGINT, SIGTERM and
    SIGHUP raise nothing (:func:`accelbench.lifetime.noted_stops`) except while a step's
    run prepares (:func:`run_step` raises them there, and the run notes them itself once
    it loads). So no stop, first or second, cuts short what the suite does with its
    steps' results: its verdicts and stress.json are written whatever comes meanwhile (a
    second Ctrl-C there, or one between two steps, used to end the suite with exit 130,
    no stress.json and its finished runs unjudged). The check it yields raises
    KeyboardInterrupt once a stop has been noted: the suite calls it before each step,
    and ends as ``interrupted``."""
    from accelbench.lifetime import noted_stops, stops_noted

    base = stops_noted()

    def check() -> None:
        if stops_noted() > base:
            raise KeyboardInterrupt

    with noted_stops():
        yield check


def run_step(
    base: BenchmarkConfig,
    out: Path,
    log: Log = _quiet,
    workload: WorkloadChanges | None = None,
    **changes: Unpack[StepChanges],
) -> RunResult:
    """One ordinary run directory at ``out`` (``accelbench runs list`` sees it), with
    ``changes`` to the config and ``workload`` changes to its workload; its result
    (status, directory, summary, run.json) as the run ended."""
    from accelbench.lifetime import raised_stops
    from accelbench.runner.benchmark import run_benchmark

    # the suite placed its directory with --out / --results-root / --label: the step's
    # own directory is ``out``, and those options are used, not the step's to refuse
    used = frozenset({"--out", "--results-root", "--label"})
    cfg = replace(base, out_dir=str(out), label=None, results_root=BenchmarkConfig.results_root,
                  given=base.given - used, **changes)  # fmt: skip
    cfg.workload = replace(base.workload, **(workload or {}))
    with raised_stops():  # the run handles its stops, raising until it loads (suite_stops)
        return run_benchmark(cfg, progress=False, log=log)


def run_reason(res: RunResult) -> str:
    """Why a suite's step ended as it did (stress.json ``reason``): the run directory, its
    status and its first warning (the run's own reason: no measured request succeeded, a
    load worker crashed ...)."""
    warnings = res.summary.get("client", {}).get("warnings") or []
    why = f": {warnings[0]}" if warnings else ""
    return f"run {res.directory.name} {res.status}{why}"


def run_records(run_dir: Path) -> list[RequestRow]:
    """The measured records of a run (requests.parquet: RequestRow's columns and types)."""
    import pyarrow.parquet as pq

    rows = cast(list[RequestRow], pq.read_table(run_dir / "requests.parquet").to_pylist())
    return [r for r in rows if not r["warmup"]]


def run_status(run_dir: Path) -> str:
    try:
        return read_run_doc(run_dir).status
    except Exception:  # noqa: BLE001 - a torn run directory reads as unknown
        return "unknown"


# -- windows ---------------------------------------------------------------------------
class WindowRow(TypedDict):
    """The fields of a request record a soak window needs (:func:`slim`)."""

    t_sched: int | None
    t_send: int
    t_done: int | None
    ok: bool
    warmup: bool
    error_kind: str | None
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    osl: int | None
    isl: int | None


def slim(row: RequestRow, tok: Callable[[], Encoder | None] | None = None) -> WindowRow:
    """The fields a window needs of a journal row (a record as ``record_row`` wrote it,
    the values as the JSON line held them), the derived ones filled with the METRICS.md
    formulas (:meth:`RequestRecord.derive`) where the row has none; per-chunk times are
    dropped, so the collector's memory stays flat. The output count is the run summary's
    (:func:`~accelbench.metrics.completion.count_output`): where the server's count is
    missing or was rejected (``usage_rejected``), the run's tokenizer (``tok``, asked
    only then) counts the text, as the run's finalize does."""
    from accelbench.metrics.completion import count_output
    from accelbench.metrics.records import FIELD_NAMES, RequestRecord

    if row.get("ttft_ms") is None and row.get("t_send"):
        # a wrong type or a missing mark raises TypeError: the caller skips the line
        rec = RequestRecord(**{k: v for k, v in row.items() if k in FIELD_NAMES})  # type: ignore[arg-type]
        rec.chunk_times = rec.chunk_times or []
        if rec.osl is None:
            need = rec.ok and rec.osl_server is None and bool(rec.output_text)
            count_output(rec, tok() if need and tok is not None else None)
        rec.derive()
        return WindowRow(
            t_sched=rec.t_sched, t_send=rec.t_send, t_done=rec.t_done, ok=rec.ok,
            warmup=rec.warmup, error_kind=rec.error_kind, ttft_ms=rec.ttft_ms,
            tpot_ms=rec.tpot_ms, e2e_ms=rec.e2e_ms, osl=rec.osl, isl=rec.isl,
        )  # fmt: skip
    return WindowRow(
        t_sched=row.get("t_sched"), t_send=row.get("t_send") or 0, t_done=row.get("t_done"),
        ok=bool(row.get("ok")), warmup=bool(row.get("warmup")),
        error_kind=row.get("error_kind"), ttft_ms=row.get("ttft_ms"),
        tpot_ms=row.get("tpot_ms"), e2e_ms=row.get("e2e_ms"), osl=row.get("osl"),
        isl=row.get("isl"),
    )  # fmt: skip


class RunTokenizer:
    """The tokenizer a run counts its outputs with (run.json ``tokenizer``: ``local:PATH``
    or the server's ``/tokenize``), built the first time a window needs it (a record whose
    server count is missing or rejected), once: the window's output count is then the
    one the run's summary gives. None where the run has none (the chunks count)."""

    def __init__(self, run_dir: Path, cfg: BenchmarkConfig) -> None:
        self.run_dir, self.cfg = run_dir, cfg
        self.tok: Encoder | None = None
        self.known = False

    def __call__(self) -> Encoder | None:
        if self.known:
            return self.tok
        from accelbench.client.session import load_api_key
        from accelbench.workload.tokenizer import LocalTokenizer, ServerTokenizer

        try:
            doc = read_run_doc(self.run_dir)
        except DocumentError:  # not written yet (or damaged): the chunks count this once
            return None
        name, model = doc.tokenizer or "", doc.config.get("model")
        if name.startswith("local:"):
            self.tok = LocalTokenizer(name.removeprefix("local:"))
        elif name.startswith("server:") and self.cfg.url is not None and isinstance(model, str):
            key = load_api_key(self.cfg.api_key_env, self.cfg.api_key_file)
            self.tok = ServerTokenizer(self.cfg.url, model, key)
        self.known = True
        return self.tok

    def close(self) -> None:
        close = getattr(self.tok, "close", None)
        if close is not None:
            close()


def _pcts(vals: list[float | None], qs: Iterable[float]) -> dict[str, float | None]:
    a = np.asarray([v for v in vals if v is not None], dtype=float)
    if a.size == 0:
        return {f"p{q:g}": None for q in qs}
    return {f"p{q:g}": float(v) for q, v in zip(qs, np.percentile(a, list(qs)), strict=True)}


def window_stats(rows: list[WindowRow], span_s: float) -> WindowStats:
    """Throughput, latency percentiles and error rate of the records in one window."""
    rows = [r for r in rows if not r["warmup"] and r["error_kind"] != ErrorKind.INTERRUPTED]
    ok = [r for r in rows if r["ok"]]
    errors: dict[str, int] = {}
    for r in rows:
        if not r["ok"]:
            k = str(r["error_kind"] or "unknown")
            errors[k] = errors.get(k, 0) + 1
    out_tok = sum(int(r["osl"] or 0) for r in ok)
    return WindowStats(
        requests=len(rows),
        ok=len(ok),
        error_rate=(len(rows) - len(ok)) / len(rows) if rows else None,
        errors=errors,
        req_per_s=len(ok) / span_s if span_s > 0 else None,
        output_tok_per_s=out_tok / span_s if span_s > 0 else None,
        ttft_ms=_pcts([r["ttft_ms"] for r in ok], (50, 90, 99)),
        tpot_ms=_pcts([r["tpot_ms"] for r in ok], (50, 90, 99)),
        e2e_ms=_pcts([r["e2e_ms"] for r in ok], (50, 99)),
    )


class JournalTail:
    """Reads the lines appended to a run's journal since the last call (``tok``: the
    run's tokenizer, for :func:`slim`)."""

    def __init__(self, path: Path, tok: Callable[[], Encoder | None] | None = None) -> None:
        self.path = path
        self.tok = tok
        self.pos = 0
        self.rest = b""

    def new_rows(self) -> list[WindowRow]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()  # a torn or unfinished last line
        out: list[WindowRow] = []
        for line in lines:
            # a damaged line (not JSON, not a record) is skipped, never fatal
            with contextlib.suppress(orjson.JSONDecodeError, TypeError, AttributeError):
                if line.strip():
                    out.append(slim(orjson.loads(line), self.tok))
        return out


# -- memory and device probe -------------------------------------------------------------
def scrape_gauges(
    url: str | Endpoint, names: Iterable[str], timeout: float = 2.0
) -> dict[str, float]:
    """Values of the named gauges on ``url``/metrics (summed over label sets)."""
    from accelbench.telemetry.parsers.prometheus import prometheus_samples
    from accelbench.telemetry.sources.server import fetch_metrics

    want = set(names)
    if not want:
        return {}
    server = Endpoint.parse(url)  # its credentials go as a header
    try:  # bounded in time and size: a /metrics without end held the suite for ever
        text = fetch_metrics(server.root + "/metrics", server.auth, timeout)
        samples = prometheus_samples(text)
    except Exception:  # noqa: BLE001 - a missed scrape is a missing sample
        return {}
    out: dict[str, float] = {}
    for name, _labels, value in samples:
        if name in want:
            out[name] = out.get(name, 0.0) + value
    return out


def total_metric_for(name: str) -> str | None:
    """``x_used_bytes`` -> ``x_total_bytes`` (the device total to extrapolate against)."""
    return name.replace("_used_", "_total_") if "_used_" in name else None


class MemoryProbe:
    """One sample of every memory series (bytes) and the device's state.

    Series: ``client_rss_bytes`` (this process and its load workers),
    ``server_rss_bytes`` (``server_pid`` and its children), ``gpuN_mem_used_bytes`` (from
    the telemetry GPU sources) and ``metric:NAME`` (Prometheus gauges on the server's
    /metrics, e.g. the reference server's ``reference_device_memory_used_bytes``).
    """

    def __init__(
        self,
        url: str | Endpoint | None,
        server_pid: int | None = None,
        metrics: Iterable[str] = (),
        gpu: bool = True,
    ) -> None:
        import psutil

        self.url = url
        self.me = psutil.Process()
        self.server = None
        if server_pid is not None:
            from accelbench import validate as v

            v.integer("--server-pid", server_pid, 1, 1 << 22)  # Linux's largest pid_max
            try:
                self.server = psutil.Process(server_pid)
            except psutil.Error:
                raise UsageError(f"--server-pid {server_pid}: no such process") from None
        self.metrics = list(metrics)
        self.totals: dict[str, float] = {"host": float(psutil.virtual_memory().total)}
        self.sources: list[Any] = []
        self.status: dict[str, str] = {}
        if gpu:
            from accelbench.telemetry.sources import open_sources

            with contextlib.suppress(Exception):
                found, self.status = open_sources(None)
                self.sources = [s for s in found if s.name not in ("host", "server")]
                for s in found:
                    if s not in self.sources:
                        with contextlib.suppress(Exception):
                            s.close()

    @staticmethod
    def _tree_rss(p: Any) -> int | None:
        import psutil

        try:
            procs = [p, *p.children(recursive=True)]
        except psutil.Error:
            return None
        total = 0
        for q in procs:
            with contextlib.suppress(psutil.Error):
                total += q.memory_info().rss
        return total

    def sample(self, t_s: float) -> MemorySample:
        row: MemorySample = {"t_s": round(t_s, 3)}
        row["client_rss_bytes"] = self._tree_rss(self.me)
        if self.server is not None:
            row["server_rss_bytes"] = self._tree_rss(self.server)
        want = self.metrics + [m for m in map(total_metric_for, self.metrics) if m]
        if self.url and want:
            got = scrape_gauges(self.url, want)
            for m in self.metrics:
                if m in got:
                    row[f"metric:{m}"] = got[m]
                tot = total_metric_for(m)
                if tot and tot in got:
                    self.totals[f"metric:{m}"] = got[tot]
        t_ns = time.monotonic_ns()
        for src in self.sources:
            try:
                rows = src.sample(t_ns)
            except Exception:  # noqa: BLE001 - telemetry never stops the soak
                continue
            for r in rows:
                if r.get("kind") != "gpu":
                    continue
                i = r.get("device_index") or 0
                for col in ("mem_used_bytes", "temp_gpu_c", "temp_hotspot_c", "temp_mem_c",
                            "clock_sm_hz", "clock_mem_hz", "power_w", "throttle_reasons",
                            "ecc_corrected_volatile", "ecc_uncorrected_volatile"):  # fmt: skip
                    if r.get(col) is not None:
                        row[f"gpu{i}_{col}"] = r[col]
                if r.get("mem_total_bytes"):
                    self.totals[f"gpu{i}_mem_used_bytes"] = float(r["mem_total_bytes"])
        return row

    def total_for(self, series: str) -> float | None:
        if series in ("client_rss_bytes", "server_rss_bytes"):
            return self.totals["host"]
        return self.totals.get(series)

    def close(self) -> None:
        for s in self.sources:
            with contextlib.suppress(Exception):
                s.close()


def window_device(samples: list[MemorySample]) -> dict[str, Json]:
    """Per-window summary of the probe's samples: last memory value, max temperature,
    mean clock, the throttle reasons seen, ECC counters at the end."""
    out: dict[str, Json] = {}
    if not samples:
        return out
    keys = {k for s in samples for k in s if k != "t_s"}
    for k in sorted(keys):
        vals = [v for s in samples if (v := s.get(k)) is not None]
        nums = [v for v in vals if not isinstance(v, str)]
        if not vals:
            continue
        if k.endswith("throttle_reasons"):
            out[k] = list[Json](sorted({x for v in vals for x in str(v).split(",") if x}))
        elif not nums:
            out[k] = vals[-1]
        elif "_temp_" in k:
            out[k + "_max"] = max(nums)
        elif "_clock_" in k or k.endswith("power_w"):
            out[k + "_mean"] = float(np.mean(nums))
        else:
            out[k] = vals[-1]
    return out
