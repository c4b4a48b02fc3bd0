"""Percentiles as METRICS.md defines them: linear interpolation between order statistics
(numpy's default), token-weighted variants, and "adjusted" variants that count failed
requests as +infinity."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
)


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def describe(values: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """count, mean, std (population), min, max and the standard percentiles."""
    a = np.asarray(values, dtype=np.float64)
    a = a[~np.isnan(a)]
    out: dict[str, float | int | None] = {"count": int(a.size)}
    if a.size == 0:
        out.update({k: None for k in ("mean", "std", "min", "max")})
        out.update({name: None for name, _ in QUANTILES})
        return out
    out["mean"] = float(a.mean())
    out["std"] = float(a.std())
    out["min"] = float(a.min())
    out["max"] = float(a.max())
    qs = np.percentile(a, [q for _, q in QUANTILES])
    for (name, _), v in zip(QUANTILES, qs, strict=True):
        out[name] = float(v)
    return out


def weighted_percentiles(
    values: np.ndarray, weights: np.ndarray, qs: Sequence[float]
) -> list[float]:
    """Percentiles of the sample in which each value appears ``weight`` times (integer
    weights), with numpy's linear interpolation; computed without expanding."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.int64)
    keep = (w > 0) & ~np.isnan(v)
    v, w = v[keep], w[keep]
    if v.size == 0:
        return [math.nan for _ in qs]
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)  # cum[i]-1 is the last expanded position holding v[i]
    n = int(cum[-1])
    out = []
    for q in qs:
        h = (n - 1) * q / 100.0
        lo = math.floor(h)
        hi = min(lo + 1, n - 1)
        i_lo = int(np.searchsorted(cum, lo + 1))
        i_hi = int(np.searchsorted(cum, hi + 1))
        out.append(float(v[i_lo] + (h - lo) * (v[i_hi] - v[i_lo])))
    return out


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    return weighted_percentiles(values, weights, [q])[0]


def describe_weighted(values: np.ndarray, weights: np.ndarray) -> dict[str, float | int | None]:
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.int64)
    keep = (w > 0) & ~np.isnan(v)
    v, w = v[keep], w[keep]
    out: dict[str, float | int | None] = {"count": int(w.sum())}
    if v.size == 0:
        out.update({k: None for k in ("mean", "std", "min", "max")})
        out.update({name: None for name, _ in QUANTILES})
        return out
    mean = float(np.average(v, weights=w))
    out["mean"] = mean
    out["std"] = float(math.sqrt(np.average((v - mean) ** 2, weights=w)))
    out["min"] = float(v.min())
    out["max"] = float(v.max())
    qs = weighted_percentiles(v, w, [q for _, q in QUANTILES])
    for (name, _), val in zip(QUANTILES, qs, strict=True):
        out[name] = val
    return out


def adjusted_percentile(values: np.ndarray, n_failed: int, q: float) -> float:
    """Percentile over successes plus ``n_failed`` values of +infinity: a failed request
    is worse than any slow one. Returns inf when the rank lands among the failures."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size + n_failed
    if n == 0:
        return math.nan
    h = (n - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    a = v[lo] if lo < v.size else math.inf
    b = v[hi] if hi < v.size else math.inf
    if math.isinf(a) or math.isinf(b):
        return math.inf if (h > lo or math.isinf(a)) else float(a)
    return float(a + (h - lo) * (b - a))


def describe_adjusted(values: np.ndarray, n_failed: int) -> dict[str, float | int | str | None]:
    a = np.asarray(values, dtype=np.float64)
    a = a[~np.isnan(a)]
    out: dict[str, float | int | str | None] = {
        "count": int(a.size + n_failed),
        "failed": n_failed,
    }
    for name, q in QUANTILES:
        r = adjusted_percentile(a, n_failed, q)
        # JSON has no infinity: a rank that lands among the failures reads "inf"
        out[name] = None if math.isnan(r) else ("inf" if math.isinf(r) else r)
    return out
