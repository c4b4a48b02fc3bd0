"""Per-request records -> run-level metrics (docs/METRICS.md "Run-level metrics").

Works on an Arrow table with the request schema, vectorised with numpy, so a run of a
million requests summarises in seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from accelbench.metrics.stats import describe, describe_adjusted, describe_weighted

SCHEMA_ID = "accelbench.summary/1"

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
    return t.column(name).to_numpy(zero_copy_only=False).astype(np.float64)


def _nan_extreme(fn, a: np.ndarray) -> float:
    """nanmin / nanmax, NaN (without a warning) when nothing was observed."""
    return float(fn(a)) if a.size and not np.isnan(a).all() else math.nan


def _bool(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(t.column(name).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _chunk_gaps(ok: pa.Table) -> tuple[np.ndarray, np.ndarray, bool]:
    """Pooled chunk gaps (ms) and their token weights (1 where the server did not say)."""
    times = ok.column("chunk_times").combine_chunks()
    if len(times) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64), False
    flat = pc.list_flatten(times).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = times.offsets.to_numpy()
    if flat.size < 2:
        return np.empty(0), np.empty(0, dtype=np.int64), False
    gaps = np.diff(flat).astype(np.float64) / 1e6
    valid = np.ones(flat.size, dtype=bool)
    valid[offsets[:-1][offsets[:-1] < flat.size]] = False  # first chunk of each request
    valid = valid[1:]
    weights = np.ones(flat.size, dtype=np.int64)
    toks = ok.column("chunk_tokens").combine_chunks()
    known = toks.null_count == 0 and len(toks) == len(times)
    if known:
        tflat = pc.list_flatten(toks).to_numpy(zero_copy_only=False).astype(np.int64)
        if tflat.size == flat.size:
            weights = tflat
        else:
            known = False
    return gaps[valid], weights[1:][valid], known


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


def _rate_span(sends: np.ndarray, rate: float) -> tuple[int, int]:
    """Longest span (on a bin grid) where the achieved send rate is within 5% of target."""
    if sends.size < 2:
        return 0, 0
    t0, t1 = int(sends.min()), int(sends.max())
    total_s = (t1 - t0) / 1e9
    width = max(1.0, 20.0 / rate, total_s / 1500)
    nb = max(1, int(math.ceil(total_s / width)))
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
    return t0 + int(best[0] * width * 1e9), t0 + int(best[1] * width * 1e9)


def summarize(
    table: pa.Table,
    *,
    gpus: int = 1,
    slo: dict[str, float] | None = None,
    mode: str = "concurrency",
    target_concurrency: int | None = None,
    requested_rate: float | None = None,
    client: dict[str, Any] | None = None,
    status: str = "completed",
    planned: int | None = None,
    tpot_statistic: str = "p50",
) -> dict[str, Any]:
    """The summary.json document for one run (see docs/RESULTS.md)."""
    warm = _bool(table, "warmup")
    interrupted = np.asarray(
        pc.equal(table.column("error_kind"), "interrupted").fill_null(False), dtype=bool
    )
    okv = _bool(table, "ok")
    measured = ~warm & ~interrupted
    ok_mask = measured & okv
    fail_mask = measured & ~okv
    m = table.filter(pa.array(measured))
    ok = table.filter(pa.array(ok_mask))
    n_ok, n_fail = int(ok_mask.sum()), int(fail_mask.sum())

    t_send = _col(m, "t_send")
    t_last_ok = _col(ok, "t_last")
    start = _nan_extreme(np.nanmin, t_send)
    end = _nan_extreme(np.nanmax, t_last_ok)
    if math.isnan(end) and m.num_rows:
        end = _nan_extreme(np.nanmax, _col(m, "t_done"))
    duration = (end - start) / 1e9 if not (math.isnan(start) or math.isnan(end)) else 0.0

    isl = _col(ok, "isl")
    osl = _col(ok, "osl")
    in_tok = float(np.nansum(isl))
    out_tok = float(np.nansum(osl))

    def per_s(x: float) -> float | None:
        return x / duration if duration > 0 else None

    def per_gpu(x: float | None) -> float | None:
        return None if x is None else x / gpus

    thr = {
        "requests_per_s": per_s(n_ok),
        "input_tokens_per_s": per_s(in_tok),
        "output_tokens_per_s": per_s(out_tok),
        "total_tokens_per_s": per_s(in_tok + out_tok),
    }
    thr["input_tokens_per_s_per_gpu"] = per_gpu(thr["input_tokens_per_s"])
    thr["output_tokens_per_s_per_gpu"] = per_gpu(thr["output_tokens_per_s"])
    thr["total_tokens_per_s_per_gpu"] = per_gpu(thr["total_tokens_per_s"])

    ttft, tpot, e2e = _col(ok, "ttft_ms"), _col(ok, "tpot_ms"), _col(ok, "e2e_ms")
    gaps, gap_w, gap_known = _chunk_gaps(ok)
    tpot_w = np.where(np.isnan(tpot), 0, osl - 1).astype(np.int64)
    latency = {
        "ttft_ms": describe(ttft),
        "tpot_ms": describe(tpot),
        "tpot_ms_token_weighted": describe_weighted(tpot, tpot_w),
        "e2e_ms": describe(e2e),
        "ntpot_ms": describe(_col(ok, "ntpot_ms")),
        "chunk_gap_ms": describe(gaps),
        "chunk_gap_ms_token_weighted": describe_weighted(gaps, gap_w),
        "schedule_lag_ms": describe(_col(m, "schedule_lag_ms")),
        "tail_ms": describe(_col(ok, "tail_ms")),
        "ttft_ms_adjusted": describe_adjusted(ttft, n_fail),
        "e2e_ms_adjusted": describe_adjusted(e2e, n_fail),
    }
    stat = latency["tpot_ms"].get(tpot_statistic)
    interactivity = {
        "tok_s_user": (1000.0 / stat) if stat else None,
        "tpot_statistic": tpot_statistic,
    }

    goodput = None
    if slo:
        good = np.ones(ok.num_rows, dtype=bool)
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

    fails = table.filter(pa.array(fail_mask))
    by_kind = Counter(fails.column("error_kind").to_pylist())
    by_status = Counter(str(s) for s in fails.column("http_status").to_pylist() if s is not None)
    errors = {
        "count": n_fail,
        "rate": (n_fail / (n_ok + n_fail)) if (n_ok + n_fail) else None,
        "by_kind": dict(by_kind),
        "by_status": dict(by_status),
    }

    osl_src = Counter(ok.column("osl_source").to_pylist())
    isl_src = Counter(ok.column("isl_source").to_pylist())
    mism = _col(ok, "osl_mismatch")
    mism = mism[~np.isnan(mism)]
    tokens = {
        "input": int(in_tok),
        "output": int(out_tok),
        "isl_source": {str(k): v for k, v in isl_src.items()},
        "osl_source": {str(k): v for k, v in osl_src.items()},
        "osl_mismatch": {
            "requests": int((mism != 0).sum()),
            "sum_abs": int(np.abs(mism).sum()),
            "compared": int(mism.size),
        },
        "chunk_tokens_known": bool(gap_known),
    }

    steady = None
    if m.num_rows:
        if mode == "rate" and requested_rate:
            a, b = _rate_span(t_send[~np.isnan(t_send)].astype(np.int64), requested_rate)
            criterion = "achieved send rate within 5% of the target"
        else:
            ends = _col(m, "t_done")
            ends = np.where(np.isnan(ends), _col(m, "t_last"), ends)
            ends = np.where(np.isnan(ends), t_send, ends)
            target = target_concurrency or 1
            a, b = _longest_span(t_send, ends, 0.9 * target)
            criterion = f"in-flight requests >= 90% of {target}"
        if b > a:
            steady = {
                "start_ns": a,
                "end_ns": b,
                "duration_s": (b - a) / 1e9,
                "criterion": criterion,
                "output_tokens_per_s": _tokens_in_span(ok, a, b),
            }

    n_warm = int(warm.sum())
    summary: dict[str, Any] = {
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
            "send_span_s": _send_span(t_send),
        },
        "steady_state": steady,
        "throughput": thr,
        "tokens": tokens,
        "latency": latency,
        "interactivity": interactivity,
        "goodput": goodput,
        "errors": errors,
        "client": dict(client or {}),
        "definitions": DEFINITIONS,
    }
    return summary


def _send_span(t_send: np.ndarray) -> float | None:
    sends = t_send[~np.isnan(t_send)]
    return float((sends.max() - sends.min()) / 1e9) if sends.size >= 2 else None


def _tokens_in_span(ok: pa.Table, a: int, b: int) -> float | None:
    """Output tokens/s within [a, b]: chunk arrivals in the span, each chunk weighted by
    its request's OSL / chunks (exact when one chunk carries one token)."""
    if b <= a or ok.num_rows == 0:
        return None
    times = ok.column("chunk_times").combine_chunks()
    flat = pc.list_flatten(times).to_numpy(zero_copy_only=False).astype(np.int64)
    lens = pc.list_value_length(times).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    osl = _col(ok, "osl")
    per_chunk = np.where(lens > 0, np.nan_to_num(osl) / np.maximum(lens, 1), 0.0)
    w = np.repeat(per_chunk, lens)
    inside = (flat >= a) & (flat <= b)
    return float(w[inside].sum() / ((b - a) / 1e9))
