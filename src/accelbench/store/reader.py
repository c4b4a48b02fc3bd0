"""Reading run directories for analysis (docs/RESULTS.md): the one reader that analysis,
reports, sweeps and cost use.

Loading never raises on a damaged directory: what is missing is recorded in
``RunInfo.problems`` so that reports can say so. run.json and summary.json are read by
their one validating reader each (store/rundoc.py) into their types (``RunInfo.doc``,
``RunInfo.summary``); a file that reader refuses is one line in ``problems``. Where ``summary.json`` is absent (a run
killed before it was written), the figures are recomputed from ``requests.parquet`` or,
failing that, from the ``requests.jsonl`` journal, with the same code a run uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from accelbench.documents import not_a_file
from accelbench.errors import AccelbenchError, DocumentError
from accelbench.metrics.completion import complete_row, first_of_each
from accelbench.metrics.records import REQUEST_SCHEMA, records_to_table
from accelbench.metrics.registry import MAX_LATENCY_MS
from accelbench.metrics.registry import figure as registry_figure
from accelbench.metrics.summary import Summary, summarize
from accelbench.metrics.values import column_np, finite_number
from accelbench.store.rundir import (
    JOURNAL,
    PARQUET,
    RUN_JSON,
    SUMMARY,
    ParquetColumns,
    read_journal,
)
from accelbench.store.rundoc import UNKNOWN_STATUS, RunDoc, read_run_doc, read_summary

__all__ = [
    "SCALAR_COLUMNS",
    "RunInfo",
    "column_np",
    "conform_requests",
    "dig",
    "find_run_dirs",
    "is_run_dir",
    "iter_runs",
    "list_runs",
    "load_run",
    "summarize_table",
]

# Columns analysis needs from requests.parquet (never the chunk lists unless asked).
SCALAR_COLUMNS = (
    "warmup",
    "ok",
    "error_kind",
    "http_status",
    "t_send",
    "t_first",
    "t_last",
    "isl",
    "osl",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "ntpot_ms",
    "schedule_lag_ms",
    "tail_ms",
)
_BIG_COLUMNS = ("chunk_times", "chunk_tokens", "output_text")
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
GPUS_MAX = 65536  # accelerators behind one endpoint


# ----------------------------------------------------------------------------- helpers


def dig(d: Any, *keys: str, default: Any = None) -> Any:
    """``d[k1][k2]...`` or ``default`` where any level is missing."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def _whole(x: Any, hi: int = 2**31) -> int | None:
    """A whole number in 1..hi from a file, else None."""
    v = finite_number(x)
    return int(v) if v is not None and 1 <= v <= hi and v == int(v) else None


def clean_slo(slo: Any) -> tuple[dict[str, float] | None, list[str]]:
    """The SLOs of a run file that can be applied (finite, positive, known keys), and what
    was dropped."""
    if not slo:
        return None, []
    if not isinstance(slo, dict):
        return None, [f"SLO {slo!r} is not an object; ignored"]
    out, dropped = {}, []
    for k, v in slo.items():
        x = finite_number(v)
        if k in SLO_KEYS and x is not None and x > 0:
            out[k] = x
        else:
            dropped.append(f"SLO {k}={v!r} ignored (must be a positive number: {SLO_KEYS})")
    return out or None, dropped


def summarize_table(
    t: pa.Table,
    *,
    gpus: int = 1,
    slo: dict[str, float] | None = None,
    mode: str | None = None,
    target_concurrency: int | None = None,
    requested_rate: float | None = None,
) -> Summary:
    """Run-level figures from a requests table: the same summary a run writes
    (:func:`accelbench.metrics.summary.summarize`); columns a table lacks (an import, or
    synthetic data without chunk lists) are taken as not observed."""
    summary = summarize(
        conform_requests(t),
        gpus=max(1, int(gpus or 1)),
        slo=slo,
        mode=mode or ("rate" if requested_rate else "concurrency"),
        target_concurrency=target_concurrency,
        requested_rate=requested_rate,
        planned=int(t.num_rows),
    )
    summary["client"].update(
        {"mode": mode, "requested_rate": requested_rate, "target_concurrency": target_concurrency}
    )
    return summary


def conform_requests(t: pa.Table) -> pa.Table:
    """Add the request-schema columns a table lacks, as nulls."""
    for f in REQUEST_SCHEMA:
        if f.name not in t.column_names:
            t = t.append_column(f, pa.nulls(t.num_rows, type=f.type))
    return t


def _nulls(name: str, rows: int) -> pa.Array:
    """An absent column: nulls of its schema type."""
    typ = REQUEST_SCHEMA.field(name).type if name in REQUEST_SCHEMA.names else pa.null()
    return pa.nulls(rows, typ)


def journal_table(path: Path) -> tuple[pa.Table, list[str]]:
    """The journal's records completed as a run's end would (without a tokenizer: OSL from
    the server's usage, else the chunk count; each request once: the first of an ``idx``
    the journal repeats), and what could not be read."""
    rows, bad = read_journal(path)
    done, wrong = [], 0
    for r in rows:
        try:
            done.append(complete_row(r, None, False))
        except (TypeError, ValueError, OverflowError):
            wrong += 1
    try:
        table = records_to_table(done)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise AccelbenchError(f"{path.name}: records of the wrong type ({exc})") from None
    keep, repeated, _ = first_of_each(table.column("idx"))
    if keep is not None:
        table = table.filter(keep)
    problems = []
    if bad or wrong:
        problems.append(f"{JOURNAL}: {bad + wrong} line(s) unreadable")
    if repeated:
        problems.append(
            f"{JOURNAL}: {repeated} record(s) repeating an earlier record's idx left out"
        )
    return table, problems


# Per-request latencies as analysis reads them (percentiles, bootstrap intervals, SLOs):
# each null (not observed), NaN (the same) or within what a request can measure.
_LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "e2e_ms", "ntpot_ms")


def check_latencies(t: pa.Table, where: Path) -> None:
    """Refuse (AccelbenchError naming the file, the column and the first row) a requests
    table holding a latency that no request can have: below 0, infinite or above
    ``MAX_LATENCY_MS``. A TTFT of -5 ms in requests.parquet was a median TTFT of -5 ms in
    the recomputed figures, and a percentile's interval reaching 0 in ``compare``."""
    import pyarrow.compute as pc

    for c in _LATENCY_COLUMNS:
        if c not in t.column_names or t.column(c).null_count == t.num_rows:
            continue
        col = pc.cast(t.column(c), pa.float64())
        ok = pc.or_(pc.is_nan(col), pc.and_(pc.greater_equal(col, 0.0),
                                            pc.less_equal(col, MAX_LATENCY_MS)))  # fmt: skip
        row = pc.index(pc.fill_null(ok, True), False).as_py()
        if row >= 0:
            raise AccelbenchError(
                f"{where}: {c} of row {row} is {col[row].as_py():g} ms, which no request "
                f"can measure (0 to {MAX_LATENCY_MS:g} ms): the file is damaged"
            )


# ----------------------------------------------------------------------------- loading


@dataclass
class RunInfo:
    """One run directory as analysis sees it. Figures are None where unknown."""

    path: Path
    run_id: str
    doc: RunDoc | None  # run.json (None: missing or refused, see problems)
    summary: Summary | None
    problems: list[str] = field(default_factory=list)
    has_requests: bool = False
    # columns of requests.parquet read so far (analysis reads each at most once)
    _columns: dict[str, pa.ChunkedArray] = field(default_factory=dict, repr=False)
    _names: list[str] | None = field(default=None, repr=False)
    _rows: int | None = field(default=None, repr=False)
    _table: pa.Table | None = field(default=None, repr=False)  # records from the journal

    @property
    def run(self) -> dict[str, object]:
        """run.json as its JSON object (RunDoc.to_json), for readers that dig into it ({}
        where missing)."""
        return dict(self.doc.to_json()) if self.doc is not None else {}

    @property
    def config(self) -> dict[str, Any]:
        return self.doc.config if self.doc is not None else {}

    @property
    def emulated(self) -> str | None:
        """The accelerator, where the run measured ``accelbench serve emulated``: its
        figures are a prediction, and every view labels them so."""
        return self.doc.server.get("emulated") if self.doc is not None else None

    @property
    def status(self) -> str:
        if self.doc is not None and self.doc.status != UNKNOWN_STATUS:
            return self.doc.status
        return str(dig(self.summary, "status") or UNKNOWN_STATUS)

    @property
    def usable(self) -> bool:
        return self.summary is not None and self.figure("output_tps_per_gpu") is not None

    @property
    def gpus(self) -> int:
        g = dig(self.summary, "gpus")
        return _whole(g, GPUS_MAX) or _whole(self.config.get("gpus"), GPUS_MAX) or 1

    @property
    def concurrency(self) -> int | None:
        return _whole(dig(self.summary, "client", "target_concurrency")) or _whole(
            self.config.get("concurrency")
        )

    @property
    def rate(self) -> float | None:
        for r in (dig(self.summary, "client", "requested_rate"), self.config.get("rate")):
            v = finite_number(r)
            if v is not None and v > 0:
                return v
        return None

    @property
    def load(self) -> float | None:
        """The swept variable: request rate in rate mode, else concurrency."""
        return self.rate if self.rate is not None else self.concurrency

    @property
    def load_label(self) -> str:
        if self.rate is not None:
            return f"rate {self.rate:g}/s"
        return f"c={self.concurrency}" if self.concurrency is not None else self.run_id

    def workload(self) -> dict[str, Any]:
        """What must match for two runs to be comparable."""
        wl = self.config.get("workload")
        wl = wl if isinstance(wl, dict) else {}
        models = (self.doc.server.get("models") if self.doc is not None else None) or []
        model = self.config.get("model") or (
            models[0] if isinstance(models, list) and models else None
        )
        return {
            "model": model,
            "isl": wl.get("isl"),
            "osl": wl.get("osl"),
            "isl_dist": wl.get("isl_dist"),
            "osl_dist": wl.get("osl_dist"),
            "range_ratio": wl.get("range_ratio"),
            "dataset": wl.get("dataset"),
            "endpoint": self.config.get("endpoint"),
        }

    def figure(self, name: str) -> float | None:
        """A run-level figure of the registry (accelbench.metrics.registry)."""
        return registry_figure(name).value(self.summary)

    def warnings(self) -> list[str]:
        w = list(self.problems)
        cw = dig(self.summary, "client", "warnings")
        w += [str(x) for x in (cw if isinstance(cw, list) else [])]
        b = dig(self.summary, "client", "bottleneck")
        if b is True or b == "client":
            w.append("the client, not the server, was the bottleneck: figures understate it")
        elif isinstance(b, str) and b not in ("server", "none", ""):
            w.append(f"bottleneck: {b}")
        er = self.figure("error_rate") if self.summary else None
        if er:
            w.append(f"{er:.1%} of measured requests failed")
        return w

    def _parquet(self) -> Path:
        """requests.parquet, a regular file (a FIFO's read would wait for ever)."""
        p = self.path / PARQUET
        why = not_a_file(p)
        if why == "is missing":
            raise AccelbenchError(f"{self.path}: {PARQUET} missing")
        if why is not None:
            raise AccelbenchError(f"{p} {why}")
        return p

    def read_requests(self, columns: tuple[str, ...] | list[str] = SCALAR_COLUMNS) -> pa.Table:
        """The measured requests' columns (absent columns come back as nulls)."""
        if self._table is not None:
            t = conform_requests(self._table).select(list(columns))
            check_latencies(t, self.path / JOURNAL)
            return t
        p = self._parquet()
        cache = self._columns
        big: dict[str, pa.ChunkedArray] = {}
        try:
            if self._names is None:
                self._names = pq.read_schema(p).names
            want = [c for c in columns if c in self._names and c not in cache]
            if want or self._rows is None:
                t = pq.read_table(p, columns=want)
                self._rows = t.num_rows
                for c in want:  # the big list / text columns are not kept
                    (big if c in _BIG_COLUMNS else cache)[c] = t.column(c)
        except (OSError, pa.ArrowException) as exc:
            raise AccelbenchError(f"{p}: unreadable ({exc})") from None
        out: dict[str, pa.ChunkedArray | pa.Array] = {}
        for c in columns:
            if c in cache:
                out[c] = cache[c]
            elif c in big:
                out[c] = big[c]
            else:
                out[c] = _nulls(c, self._rows or 0)
        if not out:
            return pa.table({"_": pa.nulls(self._rows or 0)}).drop(["_"])
        t = pa.table(out)
        check_latencies(t, p)
        return t

    def request_rows(self) -> int:
        """How many requests the run's table holds (from the file's metadata)."""
        if self._table is not None:
            return int(self._table.num_rows)
        p = self._parquet()
        try:
            return int(pq.ParquetFile(p).metadata.num_rows)
        except (OSError, pa.ArrowException) as exc:
            raise AccelbenchError(f"{p}: unreadable ({exc})") from None

    def iter_requests(self, columns: Sequence[str], rows: int = 1 << 16) -> Iterator[pa.Table]:
        """The measured requests' ``columns`` in slices of at most ``rows`` rows, in row
        order, read from requests.parquet a row group at a time (nothing cached: a
        72-hour soak's 13 million rows are never held at once); absent columns as
        nulls, as ``read_requests`` gives them."""
        if self._table is not None:
            t = conform_requests(self._table).select(list(columns))
            check_latencies(t, self.path / JOURNAL)
            for i in range(0, max(t.num_rows, 1), rows):
                yield t.slice(i, rows)
            return
        p = self._parquet()
        try:
            if self._names is None:
                self._names = pq.read_schema(p).names
            for piece in ParquetColumns(p).batches(columns, rows):
                have = piece.column_names
                check_latencies(piece, p)
                yield pa.table(
                    {
                        c: piece.column(c) if c in have else _nulls(c, piece.num_rows)
                        for c in columns
                    }
                )
        except (OSError, pa.ArrowException) as exc:
            raise AccelbenchError(f"{p}: unreadable ({exc})") from None


def is_run_dir(path: str | Path) -> bool:
    """A directory holding any of a run's files."""
    p = Path(path)
    return any((p / f).is_file() for f in (RUN_JSON, SUMMARY, PARQUET, JOURNAL))


def load_run(path: str | Path, *, recompute: bool = False, gpus: int | None = None) -> RunInfo:
    """Load a run directory. Missing or damaged files become ``problems``, not errors;
    a path that is not a directory at all raises AccelbenchError. ``recompute`` (or a
    ``gpus`` other than the summary's) recomputes the figures from the requests."""
    path = Path(path)
    if not path.is_dir():
        raise AccelbenchError(f"{path}: not a directory")
    problems: list[str] = []
    doc: RunDoc | None = None
    try:
        doc = read_run_doc(path, RUN_JSON)
    except DocumentError as exc:
        problems.append(str(exc))
    summary: Summary | None = None
    serr = None
    if not recompute:
        try:
            summary, sprobs = read_summary(path, SUMMARY)
            problems += sprobs
        except DocumentError as exc:
            serr = str(exc)
    has_req = (path / PARQUET).exists()
    run_id = (doc.run_id if doc is not None else "") or path.name
    info = RunInfo(path, run_id, doc, None, problems, has_req)
    if summary is not None and (gpus is None or gpus == summary.get("gpus")):
        info.summary = summary
        return info
    if serr and not recompute and serr not in problems:
        problems.append(serr)
    source = PARQUET
    if not has_req and (path / JOURNAL).is_file():
        try:
            info._table, jprobs = journal_table(path / JOURNAL)
            info.has_requests = True
            problems += jprobs
            source = JOURNAL
        except AccelbenchError as exc:
            problems.append(str(exc))
    if not info.has_requests:
        problems.append(
            f"{PARQUET} missing" + (": cannot recompute" if recompute else "")
            if not (path / JOURNAL).is_file()
            else "no readable requests: cannot recompute"
        )
        return info
    slo, dropped = clean_slo(dig(summary, "goodput", "slo") or info.config.get("slo"))
    problems += dropped
    try:
        t = info.read_requests()
        info.summary = summarize_table(
            t,
            gpus=gpus or info.gpus,
            slo=slo,
            mode="rate" if info.rate is not None else "concurrency",
            target_concurrency=info.concurrency,
            requested_rate=info.rate,
        )
        if not recompute:
            problems.append(f"figures recomputed from {source}")
    except AccelbenchError as exc:
        problems.append(str(exc))
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
        problems.append(f"figures could not be recomputed ({type(exc).__name__}: {exc})")
    return info


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every run directory under ``root`` (``root`` itself if it is one), sorted."""
    root = Path(root)
    if not root.exists():
        raise AccelbenchError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise AccelbenchError(f"{root} is not a directory: give a results root or a run directory")
    if is_run_dir(root):
        return [root]
    found = set()
    for name in (RUN_JSON, SUMMARY, PARQUET, JOURNAL):
        for p in root.rglob(name):
            found.add(p.parent)
    return sorted(found)


def iter_runs(root: str | Path) -> Iterator[RunInfo]:
    """Every run under ``root``, loaded one at a time: a caller that keeps only a row of
    each holds one run's documents at a time (10,000 runs held whole took 0.6 GB)."""
    for p in find_run_dirs(root):
        yield load_run(p)


def list_runs(root: str | Path) -> list[RunInfo]:
    return list(iter_runs(root))
