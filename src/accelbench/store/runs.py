"""Reading run directories for analysis, the cross-run store (DuckDB over the Parquet and
JSON files, no server), and import of ``vllm bench serve`` result files.

Run directory format: docs/RESULTS.md. Loading never raises on a damaged directory: what is
missing is recorded in ``RunInfo.problems`` so that reports can say so. Where
``summary.json`` is absent but ``requests.parquet`` exists, the key figures are recomputed
from the requests (:func:`summarize_table`, a vectorised subset of the full summary).
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from accelbench.errors import AccelbenchError
from accelbench.metrics.records import REQUEST_SCHEMA

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


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename (never a half-written file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_json_safe(data), f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def _json_safe(obj: Any) -> Any:
    """Non-finite floats to None (JSON has no inf/nan); numpy scalars to Python."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


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


def stats(values: np.ndarray) -> dict[str, Any]:
    """The METRICS.md stats object over finite values (inf kept for adjusted stats)."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None}
    with np.errstate(invalid="ignore"):
        out: dict[str, Any] = {
            "count": int(v.size),
            "mean": float(np.mean(v)),
            "std": float(np.std(v)),
            "min": float(np.min(v)),
            "max": float(np.max(v)),
        }
        qs = np.percentile(v, PERCENTILES)
    for p, q in zip(PERCENTILES, qs, strict=True):
        if np.isnan(q):  # inf - inf in the interpolation: both neighbours are failures
            q = math.inf
        out[f"p{p:g}"] = float(q)
    return out


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
    """Run-level figures from a requests table (docs/RESULTS.md summary.json schema; the
    steady-state window and client CPU figures need the live run and are left absent)."""
    gpus = max(1, int(gpus or 1))
    warm = column_np(t, "warmup", bool)
    ok = column_np(t, "ok", bool)
    m = ~warm
    okm = ok & m
    t_send = column_np(t, "t_send")[m]
    t_last = column_np(t, "t_last")[okm]
    isl = column_np(t, "isl")[okm]
    osl = column_np(t, "osl")[okm]
    n_meas = int(m.sum())
    n_ok = int(okm.sum())
    n_fail = n_meas - n_ok

    if n_ok and np.isfinite(t_last).any() and np.isfinite(t_send).any():
        start = float(np.nanmin(t_send))
        end = float(np.nanmax(t_last))
        dur = max((end - start) / 1e9, 0.0)
    else:
        start = end = None
        dur = 0.0
    in_tok = float(np.nansum(isl))
    out_tok = float(np.nansum(osl))

    def rate(x: float) -> float | None:
        return x / dur if dur > 0 else None

    def per_gpu(x: float | None) -> float | None:
        return None if x is None else x / gpus

    thr = {
        "requests_per_s": rate(n_ok),
        "input_tokens_per_s": rate(in_tok),
        "output_tokens_per_s": rate(out_tok),
        "total_tokens_per_s": rate(in_tok + out_tok),
    }
    thr["input_tokens_per_s_per_gpu"] = per_gpu(thr["input_tokens_per_s"])
    thr["output_tokens_per_s_per_gpu"] = per_gpu(thr["output_tokens_per_s"])
    thr["total_tokens_per_s_per_gpu"] = per_gpu(thr["total_tokens_per_s"])

    lat: dict[str, Any] = {}
    cols = {}
    for name in ("ttft_ms", "tpot_ms", "e2e_ms", "ntpot_ms", "tail_ms"):
        cols[name] = column_np(t, name)[okm]
        lat[name] = stats(cols[name])
    lat["schedule_lag_ms"] = stats(column_np(t, "schedule_lag_ms")[m])
    tp = cols["tpot_ms"]
    w = osl - 1
    sel = np.isfinite(tp) & (w >= 1)
    lat["tpot_ms_token_weighted"] = _weighted_stats(tp[sel], w[sel])
    for name in ("ttft_ms", "e2e_ms"):
        adj = np.concatenate([cols[name], np.full(n_fail, np.inf)])
        lat[f"{name}_adjusted"] = stats(adj)

    p50 = lat["tpot_ms"].get("p50")
    inter = 1000.0 / p50 if p50 else None

    goodput = None
    if slo:
        good = np.ones(n_ok, dtype=bool)
        for k, lim in slo.items():
            v = cols.get(k)
            if v is None:
                raise AccelbenchError(f"unknown SLO {k!r}: use ttft_ms, tpot_ms or e2e_ms")
            good &= np.nan_to_num(v, nan=0.0 if k == "tpot_ms" else np.inf) <= lim
        goodput = {
            "slo": dict(slo),
            "requests_per_s": rate(float(good.sum())),
            "output_tokens_per_s": rate(float(np.nansum(osl[good]))),
            "fraction": float(good.sum()) / n_meas if n_meas else None,
        }

    fail_idx = np.flatnonzero(m & ~ok)
    failed = t.take(pa.array(fail_idx, pa.int64())) if fail_idx.size else None

    def _col(name: str) -> list[Any]:
        if failed is None or name not in failed.column_names:
            return []
        return failed.column(name).to_pylist()

    kinds = _col("error_kind")
    by_kind = Counter(k or "unknown" for k in kinds)
    by_status = Counter(str(s) for s in _col("http_status") if s is not None)

    warnings: list[str] = []
    lag = lat["schedule_lag_ms"].get("p99")
    if lag is not None and lag > 50:
        warnings.append(f"schedule lag p99 {lag:.0f} ms: the client may be the bottleneck")
    return {
        "schema": SUMMARY_SCHEMA,
        "status": "completed",
        "gpus": gpus,
        "counts": {
            "planned": int(t.num_rows),
            "completed": n_ok,
            "failed": n_fail,
            "warmup": int(warm.sum()),
            "interrupted": int(by_kind.get("interrupted", 0)),
        },
        "window": {"start_ns": start, "end_ns": end, "duration_s": dur},
        "steady_state": None,
        "throughput": thr,
        "tokens": {"input": in_tok, "output": out_tok},
        "latency": lat,
        "interactivity": {"tok_s_user": inter, "tpot_statistic": "p50"},
        "goodput": goodput,
        "errors": {
            "count": n_fail,
            "rate": n_fail / n_meas if n_meas else None,
            "by_kind": dict(by_kind),
            "by_status": dict(by_status),
        },
        "client": {
            "mode": mode,
            "requested_rate": requested_rate,
            "target_concurrency": target_concurrency,
            "warnings": warnings,
        },
        "definitions": {
            "token_source": "as recorded per request (osl_source)",
            "window": "first send to last t_last of measured (non-warm-up) requests",
            "percentiles": "linear interpolation between order statistics",
            "tpot": "(E2E - TTFT) / (OSL - 1), OSL >= 2; interactivity = 1000 / p50 TPOT",
            "computed_by": "accelbench.store.runs.summarize_table",
        },
    }


def _weighted_stats(v: np.ndarray, w: np.ndarray) -> dict[str, Any]:
    if v.size == 0:
        return {"count": 0, "mean": None}
    order = np.argsort(v)
    v, w = v[order], w[order]
    cw = np.cumsum(w)
    tot = cw[-1]
    out: dict[str, Any] = {"count": int(v.size), "mean": float(np.sum(v * w) / tot)}
    for p in PERCENTILES:
        out[f"p{p:g}"] = float(v[min(np.searchsorted(cw, p / 100 * tot), v.size - 1)])
    return out


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
        if b and b not in ("server", "none"):
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
        try:
            schema = pq.read_schema(p)
            have = [c for c in columns if c in schema.names]
            t = pq.read_table(p, columns=have)
        except (OSError, pa.ArrowException) as exc:
            raise AccelbenchError(f"{p}: unreadable ({exc})") from None
        for c in columns:
            if c not in t.column_names:
                typ = REQUEST_SCHEMA.field(c).type if c in REQUEST_SCHEMA.names else pa.null()
                t = t.append_column(c, pa.nulls(t.num_rows, typ))
        return t


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
