"""Fabricate run directories in the documented format (docs/RESULTS.md) from known
per-request values, for tests and benchmarks that must not need a server.

A closed-loop run at concurrency C is simulated as C slots, each running its requests back
to back: request i takes ``ttft_i + tpot_i * (osl - 1)`` milliseconds. Per-request TTFT and
TPOT are ``ttft_ms`` / ``tpot_ms`` times a lognormal factor with sigma ``jitter``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from accelbench.metrics.records import REQUEST_SCHEMA
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.store.runs import summarize_table, write_json_atomic

T0 = 1_000_000_000_000  # an arbitrary monotonic origin (ns)


def make_requests(
    n: int,
    *,
    concurrency: int = 8,
    isl: int = 128,
    osl: int = 64,
    ttft_ms: float = 50.0,
    tpot_ms: float = 20.0,
    jitter: float = 0.05,
    fail_frac: float = 0.0,
    warmup: int = 0,
    seed: int = 0,
    chunks: bool = True,
    text: str | None = None,
) -> pa.Table:
    """``warmup + n`` request records (the first ``warmup`` by start time are warm-up)."""
    rng = np.random.default_rng(seed)
    total = n + warmup
    c = max(1, min(concurrency, total))
    ttft = ttft_ms * np.exp(rng.normal(0.0, jitter, total)) if jitter else np.full(total, ttft_ms)
    tpot = tpot_ms * np.exp(rng.normal(0.0, jitter, total)) if jitter else np.full(total, tpot_ms)
    ok = rng.random(total) >= fail_frac
    e2e = np.where(ok, ttft + tpot * (osl - 1), ttft)
    # slot k runs requests k, k+c, k+2c, ... back to back (1 ms client gap between them)
    per_slot = -(-total // c)
    dur = np.zeros(c * per_slot)
    dur[:total] = e2e + 1.0
    starts = np.cumsum(dur.reshape(per_slot, c), axis=0) - dur.reshape(per_slot, c)
    t_send_ms = starts.reshape(-1)[:total]
    order = np.argsort(t_send_ms, kind="stable")
    t_send_ms, ttft, tpot, ok, e2e = (a[order] for a in (t_send_ms, ttft, tpot, ok, e2e))
    t_send = (T0 + t_send_ms * 1e6).astype(np.int64)
    t_first = t_send + (ttft * 1e6).astype(np.int64)
    t_last = t_send + (e2e * 1e6).astype(np.int64)
    ttft_d = (t_first - t_send) / 1e6
    e2e_d = (t_last - t_send) / 1e6
    tpot_d = (e2e_d - ttft_d) / (osl - 1) if osl >= 2 else np.full(total, np.nan)
    okm = pa.array(ok)

    def masked(a: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.array(a, type=typ, mask=~ok)

    cols: dict[str, Any] = {
        "idx": pa.array(np.arange(total), pa.int64()),
        "worker": pa.array(np.zeros(total, np.int32)),
        "warmup": pa.array(np.arange(total) < warmup),
        "request_id": pa.array([f"r{i}" for i in range(total)]) if total < 200_000 else None,
        "t_sched": pa.array(t_send),
        "t_send": pa.array(t_send),
        "t_headers": pa.array(t_send + 1_000_000),
        "t_first": masked(t_first, pa.int64()),
        "t_last": masked(t_last, pa.int64()),
        "t_done": masked(t_last + 100_000, pa.int64()),
        "n_chunks": pa.array(np.where(ok, osl, 0).astype(np.int32)),
        "isl": pa.array(np.full(total, isl), pa.int64()),
        "isl_source": pa.array(np.full(total, "server_usage", dtype=object), pa.string()),
        "isl_planned": pa.array(np.full(total, isl), pa.int64()),
        "osl": masked(np.full(total, osl), pa.int64()),
        "osl_source": pa.array(np.full(total, "server_usage", dtype=object), pa.string()),
        "max_tokens": pa.array(np.full(total, osl), pa.int64()),
        "ok": okm,
        "error_kind": pa.array(np.where(ok, None, "http_5xx"), pa.string()),
        "http_status": pa.array(np.where(ok, 200, 500).astype(np.int32)),
        "error": pa.array(np.where(ok, None, "synthetic failure"), pa.string()),
        "finish_reason": pa.array(np.where(ok, "length", None), pa.string()),
        "retries": pa.array(np.zeros(total, np.int32)),
        "schedule_lag_ms": pa.array(np.zeros(total)),
        "ttft_ms": pa.array(ttft_d),
        "e2e_ms": masked(e2e_d, pa.float64()),
        "tail_ms": masked(np.full(total, 0.1), pa.float64()),
        "tpot_ms": masked(tpot_d, pa.float64()),
        "ntpot_ms": masked(e2e_d / osl, pa.float64()),
    }
    if chunks:
        ct = [
            list(np.linspace(a, b, osl).astype(np.int64)) if k else []
            for a, b, k in zip(t_first, t_last, ok, strict=True)
        ]
        cols["chunk_times"] = pa.array(ct, pa.list_(pa.int64()))
        cols["chunk_tokens"] = pa.array([[1] * osl if k else [] for k in ok], pa.list_(pa.int32()))
    if text is not None:
        cols["output_text"] = pa.array([text] * total, pa.string())
    arrays = []
    for f in REQUEST_SCHEMA:
        a = cols.get(f.name)
        arrays.append(pa.nulls(total, f.type) if a is None else a.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=REQUEST_SCHEMA)


def make_run(
    out_dir: str | Path,
    n: int = 200,
    *,
    concurrency: int = 8,
    rate: float | None = None,
    isl: int = 128,
    osl: int = 64,
    ttft_ms: float = 50.0,
    tpot_ms: float = 20.0,
    jitter: float = 0.05,
    fail_frac: float = 0.0,
    warmup: int = 0,
    seed: int = 0,
    gpus: int = 1,
    model: str = "synthetic-model",
    dataset: str | None = None,
    chunks: bool = True,
    text: str | None = None,
    slo: dict[str, float] | None = None,
    status: str = "completed",
    files: tuple[str, ...] = ("run.json", "requests.parquet", "summary.json"),
) -> Path:
    """Write one run directory; ``files`` chooses which of the three files exist."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = BenchmarkConfig(
        url="http://127.0.0.1:1/v1",
        model=model,
        concurrency=concurrency if rate is None else None,
        rate=rate,
        num_requests=n,
        warmup_requests=warmup,
        workload=WorkloadConfig(isl=isl, osl=osl, dataset=dataset),
        gpus=gpus,
        slo=dict(slo or {}),
        out_dir=str(out),
    )
    table = make_requests(
        n,
        concurrency=concurrency,
        isl=isl,
        osl=osl,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        jitter=jitter,
        fail_frac=fail_frac,
        warmup=warmup,
        seed=seed,
        chunks=chunks,
        text=text,
    )
    if "run.json" in files:
        write_json_atomic(
            out / "run.json",
            {
                "schema": "accelbench.run/1",
                "run_id": out.name,
                "status": status,
                "config": cfg.to_json(),
                "tool": {"name": "accelbench", "version": "synthetic"},
                "environment": {"host": "synthetic"},
                "server": {"models": [model]},
                "started_at": "2026-01-01T00:00:00Z",
                "ended_at": "2026-01-01T00:01:00Z",
            },
        )
    if "requests.parquet" in files:
        pq.write_table(table, out / "requests.parquet")
    if "summary.json" in files:
        s = summarize_table(
            table,
            gpus=gpus,
            slo=slo,
            mode="rate" if rate is not None else "concurrency",
            target_concurrency=concurrency if rate is None else None,
            requested_rate=rate,
        )
        s["status"] = status
        write_json_atomic(out / "summary.json", s)
    return out


def make_sweep(
    sweep_dir: str | Path,
    points: list[dict[str, Any]],
    *,
    requests_per_concurrency: int = 10,
    **common: Any,
) -> Path:
    """A sweep directory: one run per point (dicts of make_run arguments, each with
    ``concurrency``) plus sweep.json in the format of accelbench.suites.sweep."""
    from accelbench.suites.sweep import SWEEP_SCHEMA

    d = Path(sweep_dir)
    d.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, p in enumerate(points):
        args = {**common, **p}
        c = args.setdefault("concurrency", 1)
        args.setdefault("n", requests_per_concurrency * c)
        args.setdefault("seed", i)
        name = f"c{c:04d}"
        make_run(d / name, **args)
        entries.append({"value": c, "dir": name, "status": "completed"})
    cfg = BenchmarkConfig(
        url="http://127.0.0.1:1/v1",
        model=common.get("model", "synthetic-model"),
        gpus=common.get("gpus", 1),
        workload=WorkloadConfig(isl=common.get("isl", 128), osl=common.get("osl", 64)),
    )
    (d / "sweep.json").write_text(
        json.dumps(
            {
                "schema": SWEEP_SCHEMA,
                "kind": "concurrency",
                "values": [e["value"] for e in entries],
                "base_config": cfg.to_json(),
                "points": entries,
                "status": "completed",
            },
            indent=2,
        )
    )
    return d
