"""Reading run directories for analysis, the cross-run store (DuckDB over the Parquet and
JSON files, no server), and import of ``vllm bench serve`` result files.

Run directory format: docs/RESULTS.md. Loading never raises on a damaged directory: what is
missing is recorded in ``RunInfo.problems`` so that reports can say so. Where
``summary.json`` is absent but ``requests.parquet`` exists, the key figures are recomputed
from the requests (:func:`summarize_table`, the same summary a run writes).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from accelbench.errors import AccelbenchError
from accelbench.metrics.records import REQUEST_SCHEMA
from accelbench.store.rundir import write_json_atomic

SUMMARY_SCHEMA = "accelbench.summary/1"
PERCENTILES = (50, 90, 95, 99, 99.9)

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


# ----------------------------------------------------------------------------- helpers


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, f"{path.name} missing"
    except (OSError, ValueError) as exc:
        return None, f"{path.name} unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def dig(d: Any, *keys: str, default: Any = None) -> Any:
    """``d[k1][k2]...`` or ``default`` where any level is missing."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def column_np(t: pa.Table, name: str, dtype: Any = np.float64) -> np.ndarray:
    """A column as a numpy array; nulls become NaN (floats) or False (bools)."""
    if name not in t.column_names:
        if dtype is bool:
            return np.zeros(t.num_rows, dtype=bool)
        return np.full(t.num_rows, np.nan)
    col = t.column(name)
    if dtype is bool:
        return col.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    arr = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(arr, dtype=np.float64)


# ----------------------------------------------------------------------------- summaries


def summarize_table(
    t: pa.Table,
    *,
    gpus: int = 1,
    slo: dict[str, float] | None = None,
    mode: str | None = None,
    target_concurrency: int | None = None,
    requested_rate: float | None = None,
) -> dict[str, Any]:
    """Run-level figures from a requests table: the same summary a run writes
    (:func:`accelbench.metrics.summary.summarize`); columns a table lacks (an import, or
    synthetic data without chunk lists) are taken as not observed."""
    from accelbench.metrics.summary import summarize

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


# ----------------------------------------------------------------------------- loading


@dataclass
class RunInfo:
    """One run directory as analysis sees it. Figures are None where unknown."""

    path: Path
    run_id: str
    run: dict[str, Any]
    summary: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    has_requests: bool = False
    # columns of requests.parquet read so far (analysis reads each at most once)
    _columns: dict[str, Any] = field(default_factory=dict, repr=False)
    _names: list[str] | None = field(default=None, repr=False)
    _rows: int | None = field(default=None, repr=False)

    @property
    def config(self) -> dict[str, Any]:
        c = self.run.get("config") or self.run.get("configuration") or {}
        return c if isinstance(c, dict) else {}

    @property
    def status(self) -> str:
        return str(self.run.get("status") or dig(self.summary, "status") or "unknown")

    @property
    def usable(self) -> bool:
        return self.summary is not None and self.figure("output_tps_per_gpu") is not None

    @property
    def gpus(self) -> int:
        return int(dig(self.summary, "gpus") or self.config.get("gpus") or 1)

    @property
    def concurrency(self) -> int | None:
        c = dig(self.summary, "client", "target_concurrency") or self.config.get("concurrency")
        return int(c) if c is not None else None

    @property
    def rate(self) -> float | None:
        r = dig(self.summary, "client", "requested_rate") or self.config.get("rate")
        return float(r) if r is not None else None

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
        wl = self.config.get("workload") or {}
        models = dig(self.run, "server", "models") or []
        model = self.config.get("model") or (models[0] if models else None)
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
        s = self.summary
        key = {
            "output_tps_per_gpu": ("throughput", "output_tokens_per_s_per_gpu"),
            "total_tps_per_gpu": ("throughput", "total_tokens_per_s_per_gpu"),
            "output_tps": ("throughput", "output_tokens_per_s"),
            "total_tps": ("throughput", "total_tokens_per_s"),
            "requests_per_s": ("throughput", "requests_per_s"),
            "interactivity": ("interactivity", "tok_s_user"),
            "ttft_p50_ms": ("latency", "ttft_ms", "p50"),
            "ttft_p99_ms": ("latency", "ttft_ms", "p99"),
            "tpot_p50_ms": ("latency", "tpot_ms", "p50"),
            "tpot_p99_ms": ("latency", "tpot_ms", "p99"),
            "e2e_p50_ms": ("latency", "e2e_ms", "p50"),
            "e2e_p99_ms": ("latency", "e2e_ms", "p99"),
            "error_rate": ("errors", "rate"),
        }.get(name)
        if key is None:
            raise AccelbenchError(f"unknown figure {name!r}")
        v = dig(s, *key)
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else None

    def warnings(self) -> list[str]:
        w = list(self.problems)
        w += [str(x) for x in (dig(self.summary, "client", "warnings") or [])]
        b = dig(self.summary, "client", "bottleneck")
        if b is True or b == "client":
            w.append("the client, not the server, was the bottleneck: figures understate it")
        elif isinstance(b, str) and b not in ("server", "none", ""):
            w.append(f"bottleneck: {b}")
        er = self.figure("error_rate") if self.summary else None
        if er:
            w.append(f"{er:.1%} of measured requests failed")
        return w

    def read_requests(self, columns: tuple[str, ...] | list[str] = SCALAR_COLUMNS) -> pa.Table:
        """The measured requests' columns (absent columns come back as nulls)."""
        p = self.path / "requests.parquet"
        if not p.exists():
            raise AccelbenchError(f"{self.path}: requests.parquet missing")
        cache = self._columns
        try:
            if self._names is None:
                self._names = pq.read_schema(p).names
            want = [c for c in columns if c in self._names and c not in cache]
            if want or not cache:
                t = pq.read_table(p, columns=want)
                self._rows = t.num_rows
                for c in want:
                    if c not in ("chunk_times", "chunk_tokens", "output_text"):  # keep small
                        cache[c] = t.column(c)
                    else:
                        cache.setdefault("_big", {})[c] = t.column(c)  # type: ignore[index]
        except (OSError, pa.ArrowException) as exc:
            raise AccelbenchError(f"{p}: unreadable ({exc})") from None
        big = cache.pop("_big", {})
        out: dict[str, Any] = {}
        for c in columns:
            if c in cache:
                out[c] = cache[c]
            elif c in big:
                out[c] = big[c]
            else:
                typ = REQUEST_SCHEMA.field(c).type if c in REQUEST_SCHEMA.names else pa.null()
                out[c] = pa.nulls(self._rows or 0, typ)
        return pa.table(out) if out else pa.table({"_": pa.nulls(self._rows or 0)}).drop(["_"])


def is_run_dir(path: Path) -> bool:
    return (
        (path / "run.json").exists()
        or (path / "summary.json").exists()
        or (path / "requests.parquet").exists()
    )


def load_run(path: str | Path, *, recompute: bool = False, gpus: int | None = None) -> RunInfo:
    """Load a run directory. Missing or damaged files become ``problems``, not errors;
    a path that is not a directory at all raises AccelbenchError."""
    path = Path(path)
    if not path.is_dir():
        raise AccelbenchError(f"{path}: not a directory")
    run, perr = _read_json(path / "run.json")
    problems = [perr] if perr else []
    run = run or {}
    summary, serr = (None, None) if recompute else _read_json(path / "summary.json")
    has_req = (path / "requests.parquet").exists()
    info = RunInfo(path, str(run.get("run_id") or path.name), run, None, problems, has_req)
    if summary is not None and (gpus is None or gpus == summary.get("gpus")):
        info.summary = summary
        return info
    if serr and not recompute:
        problems.append(serr)
    if has_req:
        try:
            t = info.read_requests()
            info.summary = summarize_table(
                t,
                gpus=gpus or info.gpus,
                slo=dig(summary, "goodput", "slo") or info.config.get("slo") or None,
                mode="rate" if info.rate is not None else "concurrency",
                target_concurrency=info.concurrency,
                requested_rate=info.rate,
            )
            if serr and not recompute:
                problems.append("figures recomputed from requests.parquet")
        except AccelbenchError as exc:
            problems.append(str(exc))
    elif not recompute:
        problems.append("requests.parquet missing")
    else:
        problems.append("requests.parquet missing: cannot recompute")
    return info


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every run directory under ``root`` (``root`` itself if it is one), sorted."""
    root = Path(root)
    if not root.exists():
        raise AccelbenchError(f"{root}: no such file or directory")
    if is_run_dir(root):
        return [root]
    found = set()
    for name in ("run.json", "summary.json", "requests.parquet"):
        for p in root.rglob(name):
            found.add(p.parent)
    return sorted(found)


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


# ----------------------------------------------------------------------------- store

RUN_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("run_id", pa.string()),
    ("path", pa.string()),
    ("sweep", pa.string()),
    ("source", pa.string()),
    ("status", pa.string()),
    ("started_at", pa.string()),
    ("label", pa.string()),
    ("model", pa.string()),
    ("endpoint", pa.string()),
    ("mode", pa.string()),
    ("concurrency", pa.int64()),
    ("rate", pa.float64()),
    ("gpus", pa.int64()),
    ("isl", pa.int64()),
    ("osl", pa.int64()),
    ("dataset", pa.string()),
    ("completed", pa.int64()),
    ("failed", pa.int64()),
    ("duration_s", pa.float64()),
    ("requests_per_s", pa.float64()),
    ("output_tps", pa.float64()),
    ("total_tps", pa.float64()),
    ("output_tps_per_gpu", pa.float64()),
    ("total_tps_per_gpu", pa.float64()),
    ("interactivity", pa.float64()),
    ("ttft_p50_ms", pa.float64()),
    ("ttft_p99_ms", pa.float64()),
    ("tpot_p50_ms", pa.float64()),
    ("tpot_p99_ms", pa.float64()),
    ("e2e_p50_ms", pa.float64()),
    ("e2e_p99_ms", pa.float64()),
    ("error_rate", pa.float64()),
    ("problems", pa.string()),
)
RUNS_SCHEMA = pa.schema(list(RUN_FIELDS))


def run_row(r: RunInfo) -> dict[str, Any]:
    """One flat row of key figures for the ``runs`` view."""
    wl = r.workload()
    sweep_dir = r.path.parent
    row: dict[str, Any] = {
        "run_id": r.run_id,
        "path": str(r.path),
        "sweep": sweep_dir.name if (sweep_dir / "sweep.json").exists() else None,
        "source": str(dig(r.run, "source", "tool") or "accelbench"),
        "status": r.status,
        "started_at": r.run.get("started_at"),
        "label": r.config.get("label"),
        "model": wl.get("model"),
        "endpoint": wl.get("endpoint"),
        "mode": "rate" if r.rate is not None else "concurrency",
        "concurrency": r.concurrency,
        "rate": r.rate,
        "gpus": r.gpus,
        "isl": wl.get("isl"),
        "osl": wl.get("osl"),
        "dataset": wl.get("dataset"),
        "completed": dig(r.summary, "counts", "completed"),
        "failed": dig(r.summary, "counts", "failed"),
        "duration_s": dig(r.summary, "window", "duration_s"),
        "problems": "; ".join(r.problems) or None,
    }
    for k in (
        "requests_per_s", "output_tps", "total_tps", "output_tps_per_gpu", "total_tps_per_gpu",
        "interactivity", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
        "e2e_p50_ms", "e2e_p99_ms", "error_rate",
    ):  # fmt: skip
        row[k] = r.figure(k) if r.summary else None
    for name, typ in RUN_FIELDS:  # coerce to the column types
        v = row.get(name)
        if v is None:
            continue
        try:
            if pa.types.is_integer(typ):
                row[name] = int(v)
            elif pa.types.is_floating(typ):
                row[name] = float(v)
            else:
                row[name] = str(v)
        except (TypeError, ValueError):
            row[name] = None
    return row


def list_runs(root: str | Path) -> list[RunInfo]:
    return [load_run(p) for p in find_run_dirs(root)]


def open_store(root: str | Path) -> Any:
    """An in-memory DuckDB connection with two views over every run under ``root``:
    ``runs`` (one row per run, RUN_FIELDS) and ``requests`` (every requests.parquet row,
    REQUEST_SCHEMA columns, plus ``run_id``)."""
    import duckdb

    runs = list_runs(root)
    con = duckdb.connect(database=":memory:")
    rows = [run_row(r) for r in runs]
    con.register("_runs_tbl", pa.Table.from_pylist(rows, schema=RUNS_SCHEMA))
    con.execute("CREATE VIEW runs AS SELECT * FROM _runs_tbl")
    files = [
        (str((r.path / "requests.parquet").resolve()), r.run_id) for r in runs if r.has_requests
    ]
    if files:
        con.register(
            "_req_files",
            pa.table({"file": [f for f, _ in files], "run_id": [i for _, i in files]}),
        )
        lst = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f, _ in files) + "]"
        con.execute(
            "CREATE VIEW requests AS SELECT m.run_id, r.* EXCLUDE (filename) FROM "
            f"read_parquet({lst}, filename=true, union_by_name=true) r "
            "JOIN _req_files m ON r.filename = m.file"
        )
    else:
        empty = pa.schema([("run_id", pa.string()), *REQUEST_SCHEMA]).empty_table()
        con.register("_req_empty", empty)
        con.execute("CREATE VIEW requests AS SELECT * FROM _req_empty")
    return con


def query_runs(root: str | Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one SQL statement over the ``runs`` and ``requests`` views."""
    import duckdb

    con = open_store(root)
    try:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
        return cols, cur.fetchall()
    except duckdb.Error as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AccelbenchError(f"query failed: {msg}") from None
    finally:
        con.close()


# ----------------------------------------------------------------------------- vLLM import


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def import_vllm(
    result_file: str | Path,
    results_root: str | Path,
    *,
    gpus: int = 1,
    isl: int | None = None,
    osl: int | None = None,
    dataset: str | None = None,
    label: str | None = None,
) -> Path:
    """Turn a ``vllm bench serve --save-result`` JSON file into a run directory in our
    format. Per-request figures come from its per-request lists (``input_lens``,
    ``output_lens``, ``ttfts``, ``itls``, ``errors``, ``start_times`` where present); what
    the file does not hold is listed under ``absent`` in run.json and summary.json."""
    src = Path(result_file)
    try:
        d = json.loads(src.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccelbenchError(f"{src}: no such file") from None
    except (OSError, ValueError) as exc:
        raise AccelbenchError(f"{src}: not a JSON file ({exc})") from None
    if not isinstance(d, dict) or not ({"completed", "request_throughput"} <= d.keys()):
        raise AccelbenchError(
            f"{src}: not a vllm bench serve result (no 'completed' / 'request_throughput')"
        )
    absent: list[str] = []
    in_lens = d.get("input_lens") or []
    out_lens = d.get("output_lens") or []
    ttfts = d.get("ttfts") or []
    itls = d.get("itls") or []
    errors = d.get("errors") or []
    starts = d.get("start_times") or []
    n = len(in_lens) or len(ttfts)
    if isinstance(out_lens, list) and len(out_lens) != n:
        out_lens = []
    if n == 0:
        absent.append("per-request records (the file has no input_lens / ttfts lists)")
    okl = [
        (not errors[i]) if len(errors) == n else bool(out_lens and out_lens[i]) for i in range(n)
    ]
    if len(ttfts) == n:
        ttft_l = ttfts
    elif len(ttfts) == sum(okl):  # some versions list successful requests only
        it = iter(ttfts)
        ttft_l = [next(it) if k else None for k in okl]
    else:
        ttft_l = [None] * n
        absent.append("ttft per request")
    itl_l = itls if len(itls) == n and all(isinstance(x, list) for x in itls) else None
    if itl_l is None and n:
        absent.append("inter-token gaps per request (e2e, tpot unknown per request)")
    has_start = len(starts) == n and n > 0
    if not has_start:
        absent += ["t_send/t_first/t_last (no start_times)", "timeline"]
    rows = []
    for i in range(n):
        rec: dict[str, Any] = {"idx": i, "request_id": f"vllm-{i}", "ok": bool(okl[i])}
        rec["isl"] = int(in_lens[i]) if i < len(in_lens) and in_lens[i] is not None else None
        rec["isl_source"] = "vllm_result"
        o = out_lens[i] if out_lens else None
        rec["osl"] = int(o) if o is not None and okl[i] else None
        rec["osl_source"] = "vllm_result"
        rec["error"] = (errors[i] or None) if len(errors) == n else None
        if not okl[i]:
            rec["error_kind"] = "client_exception"
        tt = _num(ttft_l[i])
        if tt is not None and okl[i]:
            rec["ttft_ms"] = tt * 1000
            if itl_l is not None:
                gaps = [float(g) for g in itl_l[i]]
                e2e = tt + sum(gaps)
                rec["e2e_ms"] = e2e * 1000
                if rec["osl"]:
                    rec["ntpot_ms"] = rec["e2e_ms"] / rec["osl"]
                    if rec["osl"] >= 2:
                        rec["tpot_ms"] = (rec["e2e_ms"] - rec["ttft_ms"]) / (rec["osl"] - 1)
                if has_start:
                    s0 = int(float(starts[i]) * 1e9)
                    ct = [s0 + int(tt * 1e9)]
                    for g in gaps:
                        ct.append(ct[-1] + int(g * 1e9))
                    rec.update(t_sched=s0, t_send=s0, t_first=ct[0], t_last=ct[-1], chunk_times=ct)
                    rec["n_chunks"] = len(ct)
        rows.append(rec)
    cols = {f.name: [r.get(f.name) for r in rows] for f in REQUEST_SCHEMA}
    table = pa.Table.from_pydict(cols, schema=REQUEST_SCHEMA)

    rate = _num(d.get("request_rate"))
    conc = d.get("max_concurrency")
    model = d.get("model_id") or d.get("model")
    if isl is None or osl is None:
        absent.append("workload ISL/OSL (pass --isl/--osl to declare them)")
    cfg = {
        "url": None,
        "model": model,
        "endpoint": d.get("endpoint_type") or d.get("backend"),
        "concurrency": int(conc) if isinstance(conc, int | float) else None,
        "rate": rate if rate is not None and math.isfinite(rate) else None,
        "num_requests": d.get("num_prompts") or n,
        "gpus": gpus,
        "label": label,
        "workload": {"isl": isl, "osl": osl, "dataset": dataset},
    }
    if cfg["concurrency"] is None and cfg["rate"] is None and n:
        cfg["concurrency"] = None  # request rate inf and no cap: all at once
    summary = summarize_table(
        table,
        gpus=gpus,
        mode="rate" if cfg["rate"] is not None else "concurrency",
        target_concurrency=cfg["concurrency"],
        requested_rate=cfg["rate"],
    )
    dur = _num(d.get("duration"))
    if summary["window"]["duration_s"] == 0 and dur:
        summary["window"] = {"start_ns": None, "end_ns": None, "duration_s": dur}
        g = max(1, gpus)
        it_ = _num(d.get("total_input_tokens")) or 0.0
        ot = _num(d.get("total_output_tokens")) or 0.0
        summary["throughput"] = {
            "requests_per_s": _num(d.get("request_throughput")),
            "input_tokens_per_s": it_ / dur,
            "output_tokens_per_s": _num(d.get("output_throughput")) or ot / dur,
            "total_tokens_per_s": _num(d.get("total_token_throughput")) or (it_ + ot) / dur,
        }
        for k in ("input", "output", "total"):
            v = summary["throughput"][f"{k}_tokens_per_s"]
            summary["throughput"][f"{k}_tokens_per_s_per_gpu"] = v / g if v else None
        summary["tokens"] = {"input": it_, "output": ot}
    for ours, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2el")):
        if not summary["latency"][ours].get("count"):
            st = {
                "count": d.get("completed"),
                "mean": _num(d.get(f"mean_{theirs}_ms")),
                "std": _num(d.get(f"std_{theirs}_ms")),
                "p50": _num(d.get(f"median_{theirs}_ms")),
                "p99": _num(d.get(f"p99_{theirs}_ms")),
            }
            for p in (90, 95, 99.9):
                st[f"p{p:g}"] = _num(d.get(f"p{p:g}_{theirs}_ms"))
            summary["latency"][ours] = st
            absent.append(f"{ours} per request (summary from the file's aggregates)")
    if summary["interactivity"]["tok_s_user"] is None:
        med = _num(d.get("median_tpot_ms")) or dig(summary, "latency", "tpot_ms", "p50")
        summary["interactivity"]["tok_s_user"] = 1000.0 / med if med else None
    summary["counts"]["completed"] = int(d.get("completed") or summary["counts"]["completed"])
    if d.get("failed") is not None:
        summary["counts"]["failed"] = int(d["failed"])
    summary["source"] = {"tool": "vllm bench serve", "file": str(src)}
    summary["absent"] = absent + ["steady_state", "client CPU and loop figures", "chunk tokens"]
    summary["definitions"]["token_source"] = "vllm result file (input_lens / output_lens)"

    run_id = label or f"vllm-{src.stem}"
    out = Path(results_root) / run_id
    if out.exists():
        raise AccelbenchError(f"{out} exists already; pass another --label")
    out.mkdir(parents=True)
    pq.write_table(table, out / "requests.parquet")
    write_json_atomic(
        out / "run.json",
        {
            "schema": "accelbench.run/1",
            "run_id": run_id,
            "status": "completed",
            "source": {"tool": "vllm bench serve", "file": str(src), "date": d.get("date")},
            "config": cfg,
            "server": {"models": [model] if model else []},
            "started_at": d.get("date"),
            "absent": absent,
        },
    )
    write_json_atomic(out / "summary.json", summary)
    return out
