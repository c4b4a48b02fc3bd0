"""Every statistic accelbench computes, in one module (docs/ANALYSIS.md "Intervals").

- Percentiles as METRICS.md defines them: linear interpolation between order statistics
  (numpy's default), token-weighted variants, and "adjusted" variants that count failed
  requests as +infinity.
- Intervals: order-statistic intervals of a percentile and of a ratio of percentiles,
  throughput by the delta method, repeated runs (pooled t), the coefficient of variation
  (Bonett), proportions (Wilson, Clopper-Pearson) and their difference (Newcombe), the
  percentile bootstrap of a ratio.
- Trends: least squares with an AR(1)-adjusted interval (:func:`linear_trend`, the health
  rules), Theil-Sen with Sen's interval after a detected warm-up (:func:`robust_trend`,
  the stress verdicts), a quadratic fit (:func:`quadratic_fit`).
- Tests: Mann-Whitney U, Fisher's exact test, Mann-Kendall (inside :func:`robust_trend`).

Each is tested once with hand-checked numbers (tests/test_stats.py); each interval has a
coverage test in simulation (tests/test_interval_coverage.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, TypedDict

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


def counted_order_stat(counts: Mapping[float, int], q: float) -> float:
    """The value at rank int(q x n) of the sorted samples held as value -> count (a
    histogram of rounded values: bounded memory over a long run); 0 when there are none.
    The rank is LoadGen's percentile convention, not METRICS.md's interpolation."""
    n = sum(counts.values())
    k, acc = min(n - 1, int(q * n)), 0
    for v in sorted(counts):
        acc += counts[v]
        if acc > k:
            return v
    return 0.0


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
    if v.size > WEIGHTED_SORT_MAX:
        return _weighted_percentiles_by_bucket(v, w, qs)
    order = np.argsort(v, kind="stable")
    v = v[order]
    cum = np.cumsum(w[order])  # cum[i]-1 is the last expanded position holding v[i]
    del order, w  # (13 million requests: 100 MB each)
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


# Above this many values, weighted_percentiles finds its order statistics from bucket
# counts (below) instead of a stable argsort of the whole sample (13 million requests'
# TPOT: 1.7 s of argsort): the same values, the same interpolation.
WEIGHTED_SORT_MAX = 1 << 20


def _weighted_percentiles_by_bucket(
    v: np.ndarray, w: np.ndarray, qs: Sequence[float]
) -> list[float]:
    """weighted_percentiles of finite values with positive weights: the weight per
    bucket (``_bucket_keys``: the buckets are in value order), the bucket each needed
    rank falls in, and a sort of only those buckets' values."""
    k = _bucket_keys(v, float(v.min()) >= 0)  # (a latency: one pass, no temporaries)
    base, per = _counts(k, w)
    cum = np.cumsum(per)
    n = int(cum[-1])
    lows = [math.floor((n - 1) * q / 100.0) for q in qs]
    ranks = np.asarray([r for lo in lows for r in (lo, min(lo + 1, n - 1))], dtype=np.int64)
    need = np.unique(np.searchsorted(cum, ranks + 1))
    lut = np.zeros(per.size, dtype=bool)
    lut[need] = True
    sel = lut[k - base]
    ks, vs, ws = k[sel] - base, v[sel], w[sel]
    order = np.lexsort((vs, ks))
    return _bucketed_weighted_quantiles(cum, ks[order], vs[order], ws[order], qs)


def _bucketed_weighted_quantiles(
    cum: np.ndarray, ks: np.ndarray, vs: np.ndarray, ws: np.ndarray, qs: Sequence[float]
) -> list[float]:
    """Weighted percentiles (the interpolation of ``weighted_percentiles``) from the
    cumulative weight per bucket ``cum`` and the values of (at least) the buckets the
    ranks fall in: bucket ``ks``, value ``vs``, weight ``ws``, sorted by bucket then value."""
    n = int(cum[-1])
    before = np.concatenate([[0], cum])

    def stat(r: int) -> float:
        b = int(np.searchsorted(cum, r + 1))
        i0, i1 = np.searchsorted(ks, b), np.searchsorted(ks, b, "right")
        c = np.cumsum(ws[i0:i1]) + int(before[b])
        return float(vs[i0 + int(np.searchsorted(c, r + 1))])

    out = []
    for q in qs:
        h = (n - 1) * q / 100.0
        lo = math.floor(h)
        a, b = stat(lo), stat(min(lo + 1, n - 1))
        out.append(float(a + (h - lo) * (b - a)))
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
    return _adjusted(v, v.size, n_failed, q)


def _adjusted(v: np.ndarray, size: int, n_failed: int, q: float) -> float:
    """adjusted_percentile from ``v``, whose elements at the ranks this q needs are the
    order statistics of the ``size`` successes (sorted, or partitioned at those ranks)."""
    n = size + n_failed
    if n == 0:
        return math.nan
    h = (n - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    a = v[lo] if lo < size else math.inf
    b = v[hi] if hi < size else math.inf
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
    n = a.size + n_failed
    ranks = set()  # the order statistics every percentile needs: one partition for all
    for _, q in QUANTILES:
        lo = math.floor((n - 1) * q / 100.0) if n else 0
        ranks |= {r for r in (lo, min(lo + 1, n - 1)) if 0 <= r < a.size}
    if ranks:
        a = np.partition(a, sorted(ranks))
    for name, q in QUANTILES:
        r = _adjusted(a, a.size, n_failed, q)
        # JSON has no infinity: a rank that lands among the failures reads "inf"
        out[name] = None if math.isnan(r) else ("inf" if math.isinf(r) else r)
    return out


# ----------------------------------------------------------------------------- intervals
# Every interval accelbench prints comes from here (or from a function named in
# docs/ANALYSIS.md "Intervals"); each has a coverage test in simulation
# (tests/test_interval_coverage.py: a nominal 95 % interval covers 93-97 %).

CONFIDENCE = 0.95


def z_critical(confidence: float = CONFIDENCE) -> float:
    """Two-sided standard-normal critical value."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def t_critical(confidence: float, dof: float | np.ndarray) -> Any:
    """Two-sided Student-t critical value (dof may be fractional, or an array)."""
    if isinstance(dof, int | float):
        return _t_critical(confidence, float(dof))
    from scipy import stats  # imported here: scipy.stats costs the CLI ~0.3 s at start

    return stats.t.ppf(0.5 + confidence / 2.0, dof)


@lru_cache(maxsize=256)
def _t_critical(confidence: float, dof: float) -> float:
    """Cached scalar case (the health monitor asks for the same few, every tick)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2.0, dof))


def quantile_ci_ranks(
    n: int, q: float, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Fractional 1-based ranks (lo, hi) of the distribution-free interval for the
    ``q``-th percentile from ``n`` values, or None when ``n`` is too small to have one.

    The count B of values below the true quantile is Binomial(n, q/100), so
    P(X_(k) <= xi) = P(B >= k) and P(X_(k) >= xi) = P(B <= k - 1) exactly (any continuous
    distribution). Each end is the order statistic whose one-sided level first reaches
    1 - alpha/2, interpolated linearly in that level towards its neighbour, so that the
    interval's level is near nominal instead of the exact interval's 98 % at p99 and
    n = 500 (interpolated order statistics: Hettmansperger & Sheather 1986, Nyblom 1992).
    """
    from scipy import stats

    if n < 2 or not 0 < q < 100:
        return None
    p, a = q / 100.0, (1.0 - confidence) / 2.0
    # the ends lie a few standard deviations of B from n p: look there first (a run of
    # 13 million requests needs a few thousand ranks, not 13 million), and at every rank
    # where an end falls on the window's edge
    half = int(12.0 * math.sqrt(n * p * (1.0 - p))) + 16
    first = max(1, int(n * p) - half)
    for k0, k1 in ((first, min(n, int(n * p) + half)), (1, n)):
        k = np.arange(k0, k1 + 1)
        below = stats.binom.sf(k - 1, n, p)  # P(X_(k) <= xi), decreasing in k
        above = stats.binom.cdf(k - 1, n, p)  # P(X_(k) >= xi), increasing in k
        ok_lo = np.nonzero(below >= 1 - a)[0]
        ok_hi = np.nonzero(above >= 1 - a)[0]
        inside = (ok_lo.size and ok_lo[-1] < k.size - 1 and ok_hi.size and ok_hi[0] > 0
                  and below[0] >= 1 - a and above[-1] >= 1 - a)  # fmt: skip
        if inside or (k0, k1) == (1, n):
            break
    if ok_lo.size == 0 or ok_hi.size == 0:
        return None
    i, j = int(ok_lo[-1]), int(ok_hi[0])  # indices in k of X_(k0+i), X_(k0+j)
    lo = float(k0 + i)
    if k0 + i < n and below[i] > below[i + 1]:
        lo += (below[i] - (1 - a)) / (below[i] - below[i + 1])
    hi = float(k0 + j)
    if j > 0 and above[j] > above[j - 1]:
        hi -= (above[j] - (1 - a)) / (above[j] - above[j - 1])
    return lo, hi


def _at_rank(xs: np.ndarray, r: float) -> np.ndarray:
    """Values at fractional 1-based rank ``r`` of sorted rows ``xs`` (last axis)."""
    k = int(np.floor(r))
    f = r - k
    lo = xs[..., k - 1]
    return lo if f == 0 else lo + f * (xs[..., min(k, xs.shape[-1] - 1)] - lo)


def quantile_ci(
    values: np.ndarray, q: float, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) of the ``q``-th percentile (:func:`quantile_ci_ranks`) for each row of
    ``values`` (last axis: the sample; rows must have equal length and no NaN), or None
    when there are too few values for any interval at this level."""
    v = np.asarray(values, dtype=float)
    n = v.shape[-1]
    ranks = quantile_ci_ranks(n, q, confidence)
    if ranks is None:
        return None
    # only the four order statistics the ends need, in place (a sort of 13 million values
    # was the report's largest cost)
    kth = sorted({min(max(int(math.floor(r)) - 1 + d, 0), n - 1) for r in ranks for d in (0, 1)})
    x = np.partition(v, kth, axis=-1)
    return _at_rank(x, ranks[0]), _at_rank(x, ranks[1])


def min_quantile_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values for which :func:`quantile_ci` gives an interval (at least 10)."""
    p, a = q / 100.0, (1.0 - confidence) / 2.0
    # both ends need one order statistic beyond them: 1 - max(p, 1-p)^n >= 1 - a
    n = math.ceil(math.log(a) / math.log(max(p, 1.0 - p)) - 1e-9)
    while quantile_ci_ranks(n, q, confidence) is None:
        n += 1
    return max(10, n)


# The level of the order-statistic interval a percentile's standard error is read from
# (calibrated in simulation: 0.68, one SE either side, under-covers a little; 0.9 over).
_SE_LEVEL = 0.75


def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """Values a side needs before a percentile's interval is given: five beyond the
    percentile (500 for p99), at least 10; also enough for :func:`quantile_ci` at the
    default confidence and at ``confidence``."""
    n = max(10, math.ceil(5 / (1 - q / 100) - 1e-9), min_quantile_samples(q))
    return n if confidence == CONFIDENCE else max(n, min_quantile_samples(q, confidence))


def quantile_log_se(values: np.ndarray, q: float) -> tuple[Any, Any] | None:
    """(centre, se) of log percentile_q per row: the midpoint and the half-width over
    z of the order-statistic interval at level 0.75, both on the log scale (a
    distribution-free standard error; Price & Bonett 2001/2002 for the median)."""
    ci = quantile_ci(values, q, _SE_LEVEL)
    if ci is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = np.log(ci[0]), np.log(ci[1])
        return (lo + hi) / 2.0, (hi - lo) / (2.0 * z_critical(_SE_LEVEL))


def quantile_ratio_ci(
    a: np.ndarray, b: np.ndarray, q: float, confidence: float = CONFIDENCE
) -> tuple[Any, Any, Any] | None:
    """(ratio, low, high) of percentile_q(b) / percentile_q(a) for two independent
    samples (rows of equal length along the last axis; positive values): the difference
    of the log percentiles with the standard errors of :func:`quantile_log_se` combined
    as independent, normal on the log scale. None with too few values on a side; NaN
    bounds where a percentile's interval reaches 0."""
    sa, sb = quantile_log_se(a, q), quantile_log_se(b, q)
    if sa is None or sb is None:
        return None
    z = z_critical(confidence)
    pa = np.percentile(a, q, axis=-1)
    pb = np.percentile(b, q, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = sb[0] - sa[0]
        half = z * np.sqrt(sa[1] ** 2 + sb[1] ** 2)
        return pb / pa, np.exp(d - half), np.exp(d + half)


MIN_CV_SAMPLES = 12


def cv_ci(x: np.ndarray, confidence: float = CONFIDENCE) -> tuple[Any, Any, Any]:
    """(cv, low, high): coefficient of variation (sample std / mean, a fraction) of each
    row of ``x`` (last axis), with Bonett's interval for a standard deviation, which
    corrects the chi-square interval for the sample's kurtosis (Bonett 2006, Comput.
    Stat. Data Anal. 50:775-782), divided by the mean. Per-window p99s are skewed, and
    the chi-square (McKay / Vangel) interval assumes normal data: it covered 83-93 %.
    Covers 93-97 % in simulation from MIN_CV_SAMPLES values on (over-covers below: the
    caller says "too few" there). NaN where the mean is not positive; 0 and (0, 0) where
    every value is the same."""
    v = np.asarray(x, dtype=float)
    n = v.shape[-1]
    z = z_critical(confidence)
    xs = np.sort(v, axis=-1)
    g = int(n / (2.0 * math.sqrt(n - 4))) if n > 4 else 0  # trim 1 / (2 sqrt(n - 4))
    m_trim = xs[..., g : n - g].mean(axis=-1)
    mean = v.mean(axis=-1)
    ss = ((v - mean[..., None]) ** 2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurt = n * ((v - m_trim[..., None]) ** 4).sum(axis=-1) / ss**2
        s2 = ss / (n - 1)
        c = n / (n - z)
        se = c * np.sqrt(np.maximum(kurt - (n - 3.0) / n, 0.0) / (n - 1))
        lv = np.log(c * s2)
        m = np.where(mean > 0, mean, np.nan)
        # all values equal: no spread, 0 (the kurtosis is 0 / 0, and the mean's rounding
        # made a CV of 1e-14 outside its own interval)
        flat = np.ptp(v, axis=-1) == 0
        k, lo, hi = (np.where(flat, 0.0 * m, x / m) for x in
                     (np.sqrt(s2), np.exp((lv - z * se) / 2), np.exp((lv + z * se) / 2)))  # fmt: skip
        return k, lo, hi


# AR(1) correction of a trend's interval: consecutive windows of a latency or memory
# series are correlated, and a slope's variance then grows by (1 + rho) / (1 - rho)
# (rho: the residuals' lag-1 autocorrelation; a linear trend's own is near 1).
AR1_RHO_MAX = 0.9
# Fewer points than this and no slope interval covers 93-97 % of AR(1) phi = 0.5 series
# (tests/test_interval_coverage.py): "too few" instead of an interval.
MIN_TREND_POINTS = 60


def ar1_rho(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of detrended residuals, corrected for its downward bias in
    short series (Marriott & Pope 1954, plus the fitted slope's share), clipped to
    [0, AR1_RHO_MAX]: a negative correlation only narrows an interval, never trusted."""
    e = np.asarray(resid, dtype=float)
    n = e.size
    e = e - e.mean()
    den = float(e @ e)
    if n < 4 or den <= 0:
        return 0.0
    r = float(e[1:] @ e[:-1]) / den
    r += (2.0 + 4.0 * max(r, 0.0)) / n
    return min(max(r, 0.0), AR1_RHO_MAX)


def ar1_inflation(rho: float) -> float:
    """Variance inflation of a slope (or mean) under AR(1) errors: (1 + rho) / (1 - rho)."""
    return (1.0 + rho) / (1.0 - rho)


# Fewer requests a side than this and the throughput interval under-covers in a closed
# loop (76 % at 2 requests, 90 % at 5, 92.5 % at 10; 93-95 % from 20, measured with the
# Little's-law delta method: tests/test_interval_coverage.py): "too few requests"
# instead of an interval.
MIN_THROUGHPUT_REQUESTS = 20


def throughput_log_se(
    tok: np.ndarray, e2e: np.ndarray | None, concurrency: float | None = None
) -> Any:
    """Standard error of the log throughput of a run's requests (rows, last axis), by the
    delta method. Closed loop (``e2e`` given): throughput is proportional to
    sum(tokens) / sum(E2E) (Little's law), a ratio estimator with
    var(log R) = var(tok / mean(tok) - e2e / mean(e2e)) / n; with ``concurrency`` (the
    loop's slots) the variance of the window's end is added (:func:`drain_log_var`: the
    run's figure divides by first send to last chunk, and the last requests end it
    unevenly). Open loop (``e2e`` None): the
    arrivals of a Poisson schedule make the tokens in the window a compound Poisson
    count, var(log sum) = (1 + cv(tok)^2) / n (a fixed schedule varies less: conservative).
    Requests per second is the case tok = 1."""
    t = np.asarray(tok, dtype=float)
    n = t.shape[-1]
    mt = t.mean(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        if e2e is None:
            cv2 = t.var(axis=-1, ddof=1) / mt[..., 0] ** 2 if n > 1 else 0.0
            return np.sqrt((1.0 + cv2) / n)
        e = np.asarray(e2e, dtype=float)
        if concurrency is not None and concurrency >= 2:
            rows = [closed_loop_log_se(x, y, concurrency)
                    for x, y in zip(t.reshape(-1, n), e.reshape(-1, n), strict=True)]  # fmt: skip
            return np.array(rows).reshape(np.shape(t)[:-1]) if t.ndim > 1 else rows[0]
        u = t / mt - e / e.mean(axis=-1, keepdims=True)
        return np.sqrt(u.var(axis=-1, ddof=1) / n)


CLOSED_LOOP_DRAWS = 400  # replicates of a closed loop (seeded: the same run, the same SE)
CLOSED_LOOP_BUDGET = 200_000_000  # draws x requests x slots simulated; beyond: the model
CLOSED_LOOP_MAX_REQUESTS = 2_000  # requests simulated one step each (~0.3 s); beyond: the model
# A closed loop's requests whose E2E tail is estimated this heavy (generalized Pareto shape,
# :func:`e2e_tail_shape`) get no throughput interval: from there the tail's variance is
# barely finite (infinite from 0.5), and no resample of the run shows how long its longest
# request could have been (tests/test_interval_coverage.py).
MAX_TAIL_SHAPE = 0.6
# ... and whose longest request is at least this share of a slot's part of the run
# (max(E2E) x C / sum(E2E)): where it is less the window's end does not hang on the tail,
# and the shape, read from sqrt(n) requests, passes 0.6 by chance in 0.1-1 % of runs of
# light-tailed requests (no interval lost there).
MIN_LONGEST_SHARE = 0.25


def _tail_size(n: int) -> int:
    """The requests a tail is fitted to: the sqrt(n) longest, at least 5 (0: too few)."""
    k = max(5, math.ceil(math.sqrt(n)))
    return k if k < n else 0


def _gpd_pwm(y: np.ndarray) -> tuple[float, float]:
    """(shape, scale) of a generalized Pareto distribution fitted to excesses ``y`` by
    probability-weighted moments (Hosking & Wallis 1987, Technometrics 29:339-349)."""
    ys = np.sort(y)
    k = ys.size
    a0 = float(ys.mean())
    a1 = float(np.mean((1.0 - (np.arange(1, k + 1) - 0.35) / k) * ys))
    den = a0 - 2.0 * a1
    if not den > 0:
        return 0.0, max(a0, 0.0)
    return 2.0 - a0 / den, 2.0 * a0 * a1 / den


def e2e_tail_shape(e2e: np.ndarray) -> float:
    """Shape of a generalized Pareto fitted to the excesses of the sqrt(n) longest E2E
    over the next one (:func:`_gpd_pwm`): about 0 for an exponential tail, 1 / alpha for a
    Pareto tail of index alpha (0.5: infinite variance). NaN with too few requests."""
    e = np.asarray(e2e, dtype=float)
    k = _tail_size(e.size)
    if k == 0 or not np.all(np.isfinite(e)):
        return math.nan
    top = np.partition(e, e.size - k - 1)[e.size - k - 1 :]
    return _gpd_pwm(top[1:] - top[0])[0]


def too_heavy_tail(e2e: np.ndarray, concurrency: float) -> float | None:
    """The E2E tail shape (:func:`e2e_tail_shape`) of a closed loop's run that gets no
    throughput interval: at least :data:`MAX_TAIL_SHAPE`, the longest request at least
    :data:`MIN_LONGEST_SHARE` of a slot's part of the run. None: an interval is given."""
    e = np.asarray(e2e, dtype=float)
    xi = e2e_tail_shape(e)
    if not xi >= MAX_TAIL_SHAPE or not e.sum() > 0:
        return None
    share = float(e.max()) * min(max(concurrency, 1.0), e.size) / float(e.sum())
    return xi if share >= MIN_LONGEST_SHARE else None


def closed_loop_log_se(tok: np.ndarray, e2e: np.ndarray, concurrency: float) -> float:
    """Standard error of the log throughput of a closed loop's run as the run measures it:
    tokens over the window from the first send to the last chunk, its ``concurrency``
    slots each taking the next request when free (runner/loadgen.py). The window's end is
    set by the slowest slot's last request, which Little's law's sum(E2E) / C leaves out:
    without it the interval covered 91 % at 500 requests and concurrency 8, 45 % at 64,
    24 % at 1,000 requests and 256 (tests/test_interval_coverage.py). By simulation:
    :data:`CLOSED_LOOP_DRAWS` resamples of the run's (tokens, E2E) pairs scheduled on the
    slots (seed 0), the SD of log(tokens / window). A bootstrap never draws a request
    longer than the sample's longest, and the window's end is set by the longest: each
    resampled E2E is smoothed by a lognormal factor of mean 1 (Silverman's bandwidth of
    log E2E), a resample of one of the sqrt(n) longest is redrawn from a generalized
    Pareto fitted to them (:func:`e2e_tail_shape`), and its tokens follow the E2E by the
    slope of log tokens on log E2E (long requests are long because they generate more).
    The plain bootstrap, its factor from log(E2E / token), covered 77-92 % with skewed
    durations (lognormal sigma 0.5-1.5 tied to the output length, Pareto 2). Where that
    exceeds :data:`CLOSED_LOOP_BUDGET` or the run holds more than
    :data:`CLOSED_LOOP_MAX_REQUESTS`, Little's law's variance plus the end's: when the queue
    runs dry each slot holds a request with a residual time drawn from the length-biased
    E2E, the window exceeds sum(E2E) / C by max - mean of the C residuals (conservative
    where a slot runs few requests)."""
    t = np.asarray(tok, dtype=float)
    e = np.asarray(e2e, dtype=float)
    n = t.size
    c = min(int(round(concurrency)), n)
    if n < 2 or not (e.sum() > 0 and t.sum() > 0):
        return math.nan
    rng = np.random.default_rng(0)
    draws = CLOSED_LOOP_DRAWS
    if n <= CLOSED_LOOP_MAX_REQUESTS and draws * n * c <= CLOSED_LOOP_BUDGET:
        pick = rng.integers(0, n, (draws, n))
        pos = (e > 0) & (t > 0)
        le, lt = np.log(e[pos]), np.log(np.maximum(t[pos], 1.0))
        ve = float(le.var()) if le.size > 1 else 0.0
        beta = (
            float(np.clip(np.mean((le - le.mean()) * (lt - lt.mean())) / ve, 0.0, 1.0))
            if ve > 0
            else 0.0
        )
        h = 1.06 * math.sqrt(ve) * n**-0.2
        shift = h * rng.standard_normal((draws, n)) - h * h / 2
        k = _tail_size(n)
        order = np.argsort(e, kind="stable")
        u = float(e[order[n - k - 1]]) if k else 0.0
        if k and u > 0:
            xi, scale = _gpd_pwm(e[order[n - k :]] - u)
            xi = min(xi, 0.9)  # a draw's mean stays finite
            rank = np.empty(n, dtype=int)
            rank[order] = np.arange(n)
            v = rng.random((draws, n))
            y = scale / xi * (v**-xi - 1.0) if abs(xi) > 1e-9 else -scale * np.log(v)
            with np.errstate(divide="ignore", invalid="ignore"):
                tail = np.log(u + np.maximum(y, 0.0)) - np.log(e[pick])
            shift = np.where((rank[pick] >= n - k) & np.isfinite(tail), tail, shift)
        ee = e[pick] * np.exp(shift)
        tt = t[pick] * np.exp(beta * shift)
        ends = ee[:, :c].copy()
        rows = np.arange(draws)
        for i in range(c, n):
            j = ends.argmin(axis=1)
            ends[rows, j] += ee[:, i]
        return float(np.log(tt.sum(axis=1) / ends.max(axis=1)).std(ddof=1))
    u = t / t.mean() - e / e.mean()
    var = u.var(ddof=1) / n
    w = rng.choice(n, size=(draws, c), p=e / e.sum())
    resid = e[w] * rng.random((draws, c))
    d = resid.max(axis=1) - resid.mean(axis=1)
    return float(math.sqrt(var + d.var(ddof=1) / (e.sum() / c) ** 2))


def open_loop_log_dof(tok: np.ndarray) -> Any:
    """Degrees of freedom of an open loop's log-throughput variance
    (:func:`throughput_log_se`, ``e2e`` None) per row (last axis): the variance is read
    from sum(tok^2) / sum(tok)^2, and a sum of squares has relative variance
    (kappa - 1) / n with kappa = E tok^4 / (E tok^2)^2, so it counts as a chi-square of
    2 n / (kappa - 1) degrees of freedom (kappa from the sample; inf where every value is
    the same). Skewed tokens (a lognormal sigma 1.5) leave a few to a few tens: a t
    critical value there, where z covered 89-92 % at 30-100 requests."""
    t = np.asarray(tok, dtype=float)
    n = t.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = t / np.max(np.abs(t), axis=-1, keepdims=True)  # x^4 stays in range
        s2 = (x * x).sum(axis=-1)
        kappa = n * (x**4).sum(axis=-1) / (s2 * s2)
        return np.where(kappa > 1.0 + 1e-12, 2.0 * n / (kappa - 1.0), np.inf)


def welch_dof(se_a: Any, dof_a: Any, se_b: Any, dof_b: Any) -> Any:
    """Welch-Satterthwaite degrees of freedom of se_a^2 + se_b^2 (inf where both are)."""
    va, vb = np.asarray(se_a, dtype=float) ** 2, np.asarray(se_b, dtype=float) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = va * va / np.asarray(dof_a, dtype=float) + vb * vb / np.asarray(dof_b, dtype=float)
        return np.where(den > 0, (va + vb) ** 2 / den, np.inf)


def _critical(confidence: float, dof: Any) -> Any:
    """z, or Student's t where ``dof`` (scalar or array) is finite."""
    if dof is None:
        return z_critical(confidence)
    d = np.asarray(dof, dtype=float)
    z = z_critical(confidence)
    if d.ndim == 0:
        return float(t_critical(confidence, float(d))) if math.isfinite(float(d)) else z
    return np.where(np.isfinite(d), t_critical(confidence, np.where(np.isfinite(d), d, 1.0)), z)


def log_ratio_ci(
    d: Any, se_a: Any, se_b: Any, confidence: float = CONFIDENCE, dof: Any = None
) -> tuple[Any, Any]:
    """(low, high) of exp(d) for a log ratio ``d`` of two independent estimates with these
    standard errors (normal on the log scale; Student's t where ``dof`` is given and
    finite: :func:`welch_dof`)."""
    half = _critical(confidence, dof) * np.sqrt(np.asarray(se_a) ** 2 + np.asarray(se_b) ** 2)
    return np.exp(d - half), np.exp(d + half)


# Runs a side before repeated runs give an interval. With one run on a side its figure's
# own spread is unseen, and an outlier run (one in 10 runs 30 % slow) took the pooled
# t-interval to 87-92 % at 1 + 2, 1 + 3 and 1 + 5 runs; from 2 + 2 it covers 93-97.5 %
# (tests/test_interval_coverage.py): "too few runs" instead of an interval.
MIN_RUNS_A_SIDE = 2


def runs_ratio_ci(
    a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[Any, Any, Any] | None:
    """(ratio, low, high) of B over A from repeated runs' figures (rows; last axis: the
    runs of a side): a pooled two-sample t-interval on the log figures with
    ``ra + rb - 2`` degrees of freedom. The run is the unit: the run-to-run spread (a
    server's state, its placement, the machine's other load) is in the interval, which
    pooling requests ignored (78-88 % coverage at a 5 % spread). None below
    :data:`MIN_RUNS_A_SIDE` runs a side; the ratio is of the geometric means."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    ra, rb = la.shape[-1], lb.shape[-1]
    dof = ra + rb - 2
    if min(ra, rb) < MIN_RUNS_A_SIDE:
        return None
    d = lb.mean(axis=-1) - la.mean(axis=-1)
    ss = ((la - la.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1) + (
        (lb - lb.mean(axis=-1, keepdims=True)) ** 2
    ).sum(axis=-1)
    half = t_critical(confidence, dof) * np.sqrt(ss / dof * (1.0 / ra + 1.0 / rb))
    return np.exp(d), np.exp(d - half), np.exp(d + half)


# ----------------------------------------------------------------------------- proportions


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for ``k`` successes in ``n`` ((0, 1) when ``n`` is 0)."""
    if n == 0:
        return 0.0, 1.0
    z = z_critical(confidence)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def newcombe(
    k1: int, n1: int, k2: int, n2: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Interval for p2 - p1 (Newcombe 1998, method 10: from the two Wilson intervals)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, confidence)
    l2, u2 = wilson(k2, n2, confidence)
    d = p2 - p1
    lo = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    hi = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return max(lo, -1.0), min(hi, 1.0)  # rounding reached 1.0000000000000002 at 0 vs n


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Clopper-Pearson) binomial interval for ``k`` successes in ``n``: never
    under-covers ((0, 1) when ``n`` is 0)."""
    from scipy import stats

    if n == 0:
        return 0.0, 1.0
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


# ----------------------------------------------------------------------------- bootstrap

# Resample indices drawn at once, at most (replicates x sample size): memory stays bounded.
_BOOT_CHUNK = 4_000_000


def bootstrap_replicates(
    n: int,
    n_boot: int,
    stat: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    rng: np.random.Generator,
    max_n: int,
) -> tuple[np.ndarray, ...]:
    """Bootstrap replicates of the statistics ``stat(idx)`` computes from rows of
    resample indices ``idx`` (shape (replicates, size), into 0..n-1), all from the SAME
    resamples (their correlation is kept). Above ``max_n`` values a random subsample of
    ``m = max_n`` is resampled and the replicates' spread rescaled by ``sqrt(m / n)``
    around the full-sample value (the m-out-of-n bootstrap, valid for root-n statistics):
    million-value samples resample fast."""
    m = min(n, max_n)
    sub = rng.choice(n, m, replace=False) if m < n else None
    out: list[np.ndarray] | None = None
    step = max(1, min(n_boot, _BOOT_CHUNK // m))
    for b0 in range(0, n_boot, step):
        b1 = min(n_boot, b0 + step)
        idx = rng.integers(0, m, size=(b1 - b0, m))
        got = stat(idx if sub is None else sub[idx])
        if out is None:
            out = [np.full(n_boot, np.nan) for _ in got]
        for o, g in zip(out, got, strict=True):
            o[b0:b1] = g
    assert out is not None  # n_boot >= 1
    if sub is None:
        return tuple(out)
    full, part = stat(np.arange(n)[None, :]), stat(sub[None, :])
    k = math.sqrt(m / n)
    return tuple(f[0] + k * (o - p[0]) for o, f, p in zip(out, full, part, strict=True))


def bootstrap_ratio_ci(
    ra: np.ndarray, rb: np.ndarray, confidence: float = CONFIDENCE, min_replicates: int = 10
) -> tuple[float | None, float | None, int]:
    """(low, high, n): the percentile-bootstrap interval of B / A from paired replicates
    ``ra``, ``rb`` (replicates where the ratio is not finite are dropped; ``n`` counts
    those kept). (None, None, n) below ``min_replicates``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.asarray(rb, dtype=float) / np.asarray(ra, dtype=float)
    r = r[np.isfinite(r)]
    if r.size < min_replicates:
        return None, None, int(r.size)
    a = 100.0 * (1.0 - confidence) / 2.0
    lo, hi = np.percentile(r, [a, 100.0 - a])
    return float(lo), float(hi), int(r.size)


def cluster_ratio_replicates(
    num: np.ndarray, den: np.ndarray, n_boot: int, rng: np.random.Generator, max_n: int
) -> np.ndarray:
    """Bootstrap replicates of ``sum(num) / sum(den)`` (a ratio of sums: a hit rate)
    resampling whole clusters: ``num`` and ``den`` hold one sum per cluster (a session's
    requests are correlated, so the session, not the request, is the unit). Through
    :func:`bootstrap_replicates` (m-out-of-n above ``max_n`` clusters). A replicate
    whose denominator is 0 is NaN."""
    x, y = np.asarray(num, dtype=float), np.asarray(den, dtype=float)

    def stat(idx: np.ndarray) -> tuple[np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (x[idx].sum(axis=1) / y[idx].sum(axis=1),)

    return bootstrap_replicates(x.size, n_boot, stat, rng, max_n)[0]


def bootstrap_difference_ci(
    ra: np.ndarray, rb: np.ndarray, confidence: float = CONFIDENCE, min_replicates: int = 10
) -> tuple[float | None, float | None, int]:
    """(low, high, n): the percentile-bootstrap interval of B - A from independent
    replicates ``ra``, ``rb`` (non-finite differences dropped; ``n`` counts those kept).
    (None, None, n) below ``min_replicates``."""
    d = np.asarray(rb, dtype=float) - np.asarray(ra, dtype=float)
    d = d[np.isfinite(d)]
    if d.size < min_replicates:
        return None, None, int(d.size)
    a = 100.0 * (1.0 - confidence) / 2.0
    lo, hi = np.percentile(d, [a, 100.0 - a])
    return float(lo), float(hi), int(d.size)


def log_normal_ci(
    value: float, log_se: float, confidence: float = CONFIDENCE, dof: float | None = None
) -> tuple[float, float]:
    """(low, high) of a positive estimate whose log has standard error ``log_se`` (z, or
    Student's t where ``dof`` is given and finite)."""
    z = float(_critical(confidence, dof))
    return value * math.exp(-z * log_se), value * math.exp(z * log_se)


# ----------------------------------------------------------------------------- tests


class SignificanceTest(TypedDict, total=False):
    """A hypothesis test as documents store it (``name``, ``p_value``; Mann-Whitney adds
    ``p_candidate_slower``: the chance a candidate value exceeds a baseline one)."""

    name: str
    p_value: float
    p_candidate_slower: float


def mann_whitney(x: np.ndarray, y: np.ndarray) -> SignificanceTest:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``, with the probability that
    an ``x`` exceeds a ``y`` (U / (nx ny))."""
    from scipy.stats import mannwhitneyu

    mw = mannwhitneyu(x, y, alternative="two-sided")
    return {
        "name": "mann-whitney-u",
        "p_value": float(mw.pvalue),
        "p_candidate_slower": float(mw.statistic) / (len(x) * len(y)),
    }


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> SignificanceTest:
    """Two-sided Fisher's exact test of k1 / n1 against k2 / n2."""
    from scipy.stats import fisher_exact as fisher

    _, p = fisher([[k1, n1 - k1], [k2, n2 - k2]])
    return {"name": "fisher-exact", "p_value": float(p)}


# ----------------------------------------------------------------------------- trends


TrendJSON = dict[str, float | int | None]


@dataclass(frozen=True)
class Trend:
    """Least-squares trend y = intercept + slope * t, with t in seconds."""

    slope: float  # units of y per second
    ci_low: float
    ci_high: float
    intercept: float
    n: int
    duration_s: float
    r2: float
    confidence: float
    ar1_rho: float = 0.0  # the residuals' lag-1 autocorrelation the interval allowed for
    n_eff: float = 0.0  # the effective sample size behind the interval's t (its dof + 2)

    @property
    def growth(self) -> float:
        """Growth over the observed span (slope x duration)."""
        return self.slope * self.duration_s

    def to_dict(self) -> TrendJSON:
        """As JSON has it: an interval too few points have (NaN) is null."""
        d: dict[str, float | int] = {**asdict(self), "growth": self.growth}
        return {k: None if isinstance(x, float) and not math.isfinite(x) else x
                for k, x in d.items()}  # fmt: skip


def _pow2_scale(v: np.ndarray) -> float:
    """A power of two to divide a series by before a fit whose sums of squares would
    overflow (values beyond 1e100): exact, so a fit's slope, intercept and interval
    times it are the unscaled ones; 1.0 for every series of ordinary size."""
    top = float(np.max(np.abs(v))) if v.size else 0.0
    return 1.0 if top <= 1e100 else math.ldexp(1.0, math.frexp(top)[1] - 1)


def linear_trend(t_s: Any, y: Any, confidence: float = CONFIDENCE) -> Trend | None:
    """Ordinary least squares of ``y`` on ``t_s`` with a two-sided t-interval on the slope.

    Returns None with fewer than 3 finite points or no spread in time. The residuals'
    lag-1 autocorrelation rho (bias-corrected, :func:`ar1_rho`) widens the standard error
    by sqrt((1 + rho) / (1 - rho)) and the t has ``n (1 - rho) / (1 + rho) - 2`` degrees
    of freedom (an AR(1)-adjusted effective sample size): independent-residual intervals
    covered 75 % of AR(1) phi = 0.5 series. Below :data:`MIN_TREND_POINTS` points no
    method covers: the interval is NaN (never above zero: no alarm).
    """
    t = np.asarray(t_s, dtype=float)
    v = np.asarray(y, dtype=float)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    n = int(t.size)
    if n < 3 or np.ptp(t) == 0:
        return None
    k = _pow2_scale(v)
    v = v / k
    xmean, ymean = np.mean(t), np.mean(v)
    # scipy.stats.linregress's arithmetic, without its p-value and argument handling
    # (which cost most of its time): same slope, intercept, r and standard error.
    ssxm, ssxym, _, ssym = np.cov(t, v, bias=True).flat
    if ssxm == 0.0 or ssym == 0.0:
        r = float("nan") if ssxym == 0 else 0.0
    else:
        r = min(max(float(ssxym / np.sqrt(ssxm * ssym)), -1.0), 1.0)
    slope = float(ssxym / ssxm)
    intercept = float(ymean - slope * xmean)
    se = float(np.sqrt((1 - r**2) * ssym / ssxm / (n - 2)))
    se = se if np.isfinite(se) else 0.0
    rho = ar1_rho(v - intercept - slope * t)
    f = ar1_inflation(rho)
    n_eff = n / f
    if n < MIN_TREND_POINTS:
        tcrit = math.nan
    else:
        tcrit = _t_critical(confidence, round(max(n_eff - 2.0, 1.0), 1))
    se *= math.sqrt(f)
    r2 = r**2 if np.isfinite(r) else 1.0
    return Trend(
        slope=slope * k,
        ci_low=(slope - tcrit * se) * k,
        ci_high=(slope + tcrit * se) * k,
        intercept=intercept * k,
        n=n,
        duration_s=float(np.ptp(t)),
        r2=r2,
        confidence=confidence,
        ar1_rho=rho,
        n_eff=n_eff,
    )


@dataclass(frozen=True)
class RobustTrend:
    """Theil-Sen slope (units per second) with its 95 % interval, fitted from
    ``start_s`` on (after a detected warm-up), plus Mann-Kendall's p-value."""

    slope: float
    ci_low: float
    ci_high: float
    intercept: float
    start_s: float  # where the fit starts (0: no warm-up detected)
    n: int
    n_fit: int
    duration_s: float
    p_value: float
    ar1_rho: float = 0.0  # lag-1 autocorrelation of the residuals the interval allowed for


def _hinge_sse(t: np.ndarray, y: np.ndarray, max_k: int) -> np.ndarray:
    """The residual sum of squares of the continuous two-segment fit with its break
    at t[k], for k = 3 .. max_k - 1, from the normal equations (suffix sums): O(n)
    instead of one least-squares fit of n points per k."""
    n = t.size
    span = float(t[-1] - t[0]) or 1.0
    u = (t - t[0]) / span
    yc = y - y.mean()  # the intercept absorbs the mean: the sums stay small

    def suffix(a: np.ndarray) -> np.ndarray:
        return np.cumsum(a[::-1])[::-1]

    su, su2, sy, suy = suffix(u), suffix(u * u), suffix(yc), suffix(u * yc)
    ks = np.arange(3, max_k)
    uk, m = u[ks], (n - ks).astype(np.float64)
    h1 = su[ks] - m * uk  # sum of h, h = max(0, u - u_k) over i >= k (h = 0 before)
    h2 = su2[ks] - 2 * uk * su[ks] + m * uk * uk
    hu = su2[ks] - uk * su[ks]
    hy = suy[ks] - uk * sy[ks]
    a = np.empty((ks.size, 3, 3))
    a[:, 0, 0], a[:, 0, 1], a[:, 1, 1] = n, u.sum(), (u * u).sum()
    a[:, 0, 2], a[:, 1, 2], a[:, 2, 2] = h1, hu, h2
    a[:, 1, 0], a[:, 2, 0], a[:, 2, 1] = a[:, 0, 1], a[:, 0, 2], a[:, 1, 2]
    b = np.empty((ks.size, 3))
    b[:, 0], b[:, 1], b[:, 2] = 0.0, (u * yc).sum(), hy
    coef = np.linalg.solve(a, b[..., None])[..., 0]
    return float((yc * yc).sum()) - (coef * b).sum(axis=1)


def _hinge_break(t: np.ndarray, y: np.ndarray, max_k: int) -> float | None:
    """The break of the best continuous two-segment fit, when it is significant
    (F-test, p < 0.01) and the early segment rises faster than the late one. Above
    HINGE_DENSE_MAX points the break is chosen from the normal equations' residuals
    (_hinge_sse, equal to the fits' to rounding) and only that fit is solved."""
    n = t.size
    if n > HINGE_DENSE_MAX:
        return _hinge_break_large(t, y, max_k)
    x0 = t - t[0]
    one = np.column_stack([np.ones(n), x0])
    sse1 = float(np.sum((y - one @ np.linalg.lstsq(one, y, rcond=None)[0]) ** 2))
    if sse1 <= 1e-12 * float(np.sum((y - y.mean()) ** 2)):
        return None  # a straight line (to rounding): no break to find
    best: tuple[float, int, float, float] | None = None
    for k in range(3, max_k):
        x = np.column_stack([np.ones(n), x0, np.maximum(0.0, t - t[k])])
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        sse = float(np.sum((y - x @ coef) ** 2))
        if best is None or sse < best[0]:
            best = (sse, k, float(coef[1]), float(coef[1] + coef[2]))
    if best is None:
        return None
    sse2, k, early, late = best
    if early <= late or sse2 >= sse1:
        return None
    if sse2 <= 0:
        return float(t[k])
    from scipy import stats

    # correlated residuals make any break look significant (a false cut leaves a
    # segment whose slope is biased low): the F statistic is deflated by their AR(1)
    # variance inflation, read off the residuals of the two-segment fit
    x = np.column_stack([np.ones(n), x0, np.maximum(0.0, t - t[k])])
    f_infl = ar1_inflation(ar1_rho(y - x @ np.linalg.lstsq(x, y, rcond=None)[0]))
    f = ((sse1 - sse2) / 2) / (sse2 / (n - 4)) / f_infl
    return float(t[k]) if float(stats.f.sf(f, 2, n - 4)) < 0.01 else None


def _hinge_break_large(t: np.ndarray, y: np.ndarray, max_k: int) -> float | None:
    n = t.size
    x0 = t - t[0]
    one = np.column_stack([np.ones(n), x0])
    sse1 = float(np.sum((y - one @ np.linalg.lstsq(one, y, rcond=None)[0]) ** 2))
    if sse1 <= 1e-12 * float(np.sum((y - y.mean()) ** 2)):
        return None
    if max_k <= 3:
        return None
    k = 3 + int(np.argmin(_hinge_sse(t, y, max_k)))
    x = np.column_stack([np.ones(n), x0, np.maximum(0.0, t - t[k])])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    sse2 = float(np.sum((y - x @ coef) ** 2))
    early, late = float(coef[1]), float(coef[1] + coef[2])
    if early <= late or sse2 >= sse1:
        return None
    if sse2 <= 0:
        return float(t[k])
    from scipy import stats

    f_infl = ar1_inflation(ar1_rho(y - x @ coef))
    f = ((sse1 - sse2) / 2) / (sse2 / (n - 4)) / f_infl
    return float(t[k]) if float(stats.f.sf(f, 2, n - 4)) < 0.01 else None


# Above these sizes the trend's pieces take the large-sample paths (a 72-hour soak sampled
# every 5 s has 51,840 memory samples: 1.3 billion pairwise slopes, 26,000 two-segment
# fits); below, the exact computations as before, unchanged.
SEN_DENSE_MAX = 3000
HINGE_DENSE_MAX = 2000
_SEN_TILE = 1 << 16  # pairwise slopes computed at once (512 KB a buffer: in L2)
_SEN_ROWS = 64

try:  # the compiled pair loop (optional: the numpy tiles are the fallback)
    from accelbench.metrics import _pairslopes
except ImportError:  # pragma: no cover - where the extension did not build
    _pairslopes = None  # type: ignore[assignment]


def _sen_interval_large(
    t: np.ndarray, y: np.ndarray, confidence: float
) -> tuple[float, float, float, float, float]:
    """sen_interval without the n^2 / 2 slopes in memory: the same order statistics of
    the pairwise slopes, found exactly in one pass over blocks of pairs that counts the
    slopes below a bracket and keeps those inside it. The bracket is read off a random
    sample of pairs: around the median, and around the interval's ranks for the AR(1)
    inflation the sample's median slope gives (widened, and the pass repeated, in the
    rare case that an exact rank falls outside)."""
    n = t.size
    _, cnt = np.unique(t, return_counts=True)
    m = n * (n - 1) // 2 - int((cnt * (cnt - 1) // 2).sum())
    if m == 0:
        return math.nan, math.nan, math.nan, math.nan, 0.0
    crit = z_critical(confidence)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, n, 1 << 20), rng.integers(0, n, 1 << 20)
    keep = t[i] != t[j]
    sample = np.sort((y[j][keep] - y[i][keep]) / (t[j][keep] - t[i][keep]))

    def ranks(slope: float) -> tuple[float, int, int]:
        icpt = float(np.median(y) - slope * np.median(t))
        rho = ar1_rho(y - icpt - slope * t)
        c = crit * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0 * ar1_inflation(rho))
        return rho, max(int(round((m - c) / 2.0)) - 1, 0), min(int(round((m + c) / 2.0)), m - 1)

    _, lo_e, hi_e = ranks(float(np.median(sample)))
    width = (hi_e - lo_e) / 2
    lo_r, hi_r = max(0, int(lo_e - width)), min(m - 1, int(hi_e + width))
    got, below = np.empty(0), 0
    for widen in (8.0, 64.0, math.inf):
        lo_v, hi_v = _sample_bound(sample, lo_r, m, -widen), _sample_bound(sample, hi_r, m, widen)
        got, below = _slopes_between(t, y, lo_v, hi_v)
        mid = [(m - 1) // 2, m // 2]
        if not (below <= mid[0] and mid[1] < below + got.size):
            lo_r, hi_r = min(lo_r, mid[0]), max(hi_r, mid[1])
            continue
        # four order statistics of tens of millions of slopes: partitions, not a sort
        got.partition([mid[0] - below, mid[1] - below])
        slope = float((got[mid[0] - below] + got[mid[1] - below]) / 2)  # np.median's mean
        icpt = float(np.median(y) - slope * np.median(t))
        rho, lo_i, hi_i = ranks(slope)
        if n < MIN_TREND_POINTS:
            return slope, icpt, math.nan, math.nan, rho
        if below <= lo_i and hi_i < below + got.size:
            got.partition([lo_i - below, hi_i - below])
            return slope, icpt, float(got[lo_i - below]), float(got[hi_i - below]), rho
        lo_r, hi_r = min(lo_r, lo_i), max(hi_r, hi_i)
    raise AssertionError("unreachable: the last bracket holds every slope")


def _sample_bound(sample: np.ndarray, r: int, m: int, widen: float) -> float:
    """The slope below (widen < 0) or above rank ``r`` of ``m``, read off the sorted
    sample with a margin of |widen| binomial standard deviations."""
    p = r / m
    k = p * sample.size + math.copysign(
        abs(widen) * math.sqrt(sample.size * p * (1 - p)) + 10, widen
    )
    if not math.isfinite(k) or k < 0 or k >= sample.size:
        return -math.inf if widen < 0 else math.inf
    return float(sample[int(k)])


def _slopes_between(t: np.ndarray, y: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, int]:
    """The pairwise slopes (pairs with distinct t) in [lo, hi], in no particular order,
    and how many are below lo. The points are put in time order (a pair's slope is the same either way
    round: IEEE subtraction and division are exact under a sign change, but for a zero
    slope's sign, which no order statistic sees), then the pairs
    are computed in blocks of _SEN_ROWS rows on every core (metrics.parallel): by the
    compiled loop (metrics/_pairslopes.c, which releases the GIL) where it was built, else
    by numpy in tiles of about _SEN_TILE pairs, small enough to stay in the core's cache.
    Either way the slopes are those the dense path computes, bit for bit."""
    from accelbench.metrics.parallel import cores, ordered_map

    order = np.argsort(t, kind="stable")
    t, y = np.ascontiguousarray(t[order]), np.ascontiguousarray(y[order])
    n = t.size
    ties = bool((np.diff(t) == 0).any())
    rows = _SEN_ROWS
    cols = max(rows, _SEN_TILE // rows)
    starts = list(range(0, n - 1, rows))
    threads = cores()

    def share(k: int) -> tuple[int, list[np.ndarray]]:
        below = 0
        inside: list[np.ndarray] = []
        if _pairslopes is not None:
            for a in starts[k::threads]:  # interleaved: the first rows have the most pairs
                b_k, got = _pairslopes.block(t, y, a, min(n - 1, a + rows), lo, hi)
                below += b_k
                if got:
                    inside.append(np.frombuffer(got))
            return below, inside
        buf_dt = np.empty(rows * cols)
        buf_sl = np.empty(rows * cols)
        low = np.empty(rows * cols, dtype=bool)
        ok = np.empty(rows * cols, dtype=bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            for a in starts[k::threads]:
                b = min(n - 1, a + rows)
                ti, yi = t[a:b, None], y[a:b, None]
                for c in range(a + 1, n, cols):
                    d = min(n, c + cols)
                    size = (b - a) * (d - c)
                    dt = buf_dt[:size].reshape(b - a, d - c)
                    sl = buf_sl[:size].reshape(b - a, d - c)
                    np.subtract(t[None, c:d], ti, out=dt)
                    np.subtract(y[None, c:d], yi, out=sl)
                    np.divide(sl, dt, out=sl)
                    if c < b:  # the tile reaches the diagonal: only pairs i < j
                        jj = np.arange(c, d)[None, :]
                        sl[jj <= np.arange(a, b)[:, None]] = np.nan
                    if ties:
                        sl[dt == 0] = np.nan  # no slope for equal times
                    lw = low[:size].reshape(sl.shape)
                    kp = ok[:size].reshape(sl.shape)
                    np.less(sl, lo, out=lw)
                    below += int(np.count_nonzero(lw))
                    np.less_equal(sl, hi, out=kp)
                    np.logical_xor(kp, lw, out=kp)  # lo <= slope <= hi (NaN in neither)
                    if kp.any():
                        inside.append(sl[kp])
        return below, inside

    below = 0
    inside: list[np.ndarray] = []
    for b_k, in_k in ordered_map(share, range(threads), threads):
        below += b_k
        inside += in_k
    got = np.concatenate(inside) if inside else np.empty(0)
    return got, below


def warmup_end(t: np.ndarray, y: np.ndarray, max_frac: float = 0.5) -> float:
    """The end of a warm-up phase (a KV-cache or memory pool filling up): breaks of a
    continuous two-segment fit where the early part rises faster, found again and again
    on what follows (a curved, e.g. exponential, approach needs several cuts), never
    past ``max_frac`` of the span. Returns t[0] when there is no warm-up."""
    limit = t[0] + max_frac * float(np.ptp(t))
    start = float(t[0])
    while True:
        keep = t >= start
        tt, yy = t[keep], y[keep]
        max_k = int(np.searchsorted(tt, limit))
        if tt.size < 10 or max_k <= 4:
            return start
        cut = _hinge_break(tt, yy, max_k)
        if cut is None or cut <= start:
            return start
        start = cut


def sen_interval(
    t: np.ndarray, y: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float, float, float, float]:
    """(slope, intercept, low, high, rho): the Theil-Sen slope with Sen's rank interval
    (Sen 1968), whose Kendall-S variance n (n - 1) (2n + 5) / 18 is multiplied by the
    AR(1) inflation (1 + rho) / (1 - rho) of the residuals (the variance correction of
    Hamed & Rao 1998 / Yue & Wang 2004 with a bias-corrected lag-1 rho) and read with
    the normal critical value; NaN bounds below MIN_TREND_POINTS points.
    Sen's interval alone assumes independent residuals and covered 75 % of AR(1)
    phi = 0.5 windows."""
    n = t.size
    if n > SEN_DENSE_MAX:
        return _sen_interval_large(t, y, confidence)
    i, j = np.triu_indices(n, 1)
    dt = t[j] - t[i]
    keep = dt != 0
    slopes = np.sort((y[j] - y[i])[keep] / dt[keep])
    slope = float(np.median(slopes))
    icpt = float(np.median(y) - slope * np.median(t))
    rho = ar1_rho(y - icpt - slope * t)
    f = ar1_inflation(rho)
    if n < MIN_TREND_POINTS or slopes.size == 0:
        return slope, icpt, math.nan, math.nan, rho
    crit = z_critical(confidence)
    c = crit * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0 * f)
    m = slopes.size
    lo_i = max(int(round((m - c) / 2.0)) - 1, 0)
    hi_i = min(int(round((m + c) / 2.0)), m - 1)
    return slope, icpt, float(slopes[lo_i]), float(slopes[hi_i]), rho


def robust_trend(t_s: Any, y: Any, *, skip_warmup: bool = True) -> RobustTrend | None:
    """Theil-Sen trend of ``y`` on ``t_s`` after the warm-up (see :func:`warmup_end`).

    Theil-Sen (the median of pairwise slopes) ignores outliers and steps better than
    least squares; its interval (:func:`sen_interval`) allows for AR(1) residuals, and is
    NaN (too few points) below MIN_TREND_POINTS points after the warm-up.
    """
    from scipy import stats

    t = np.asarray(t_s, dtype=float)
    v = np.asarray(y, dtype=float)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    if t.size < 4 or np.ptp(t) == 0:
        return None
    k = _pow2_scale(v)
    v = v / k
    start = warmup_end(t, v) if skip_warmup else float(t[0])
    keep = t >= start
    tf, vf = t[keep], v[keep]
    rho = 0.0
    if tf.size < 4 or np.ptp(vf) == 0:
        slope, icpt, p = 0.0, (float(vf[0]) if vf.size else 0.0), 1.0
        lo = hi = 0.0 if tf.size >= MIN_TREND_POINTS else math.nan
    else:
        slope, icpt, lo, hi, rho = sen_interval(tf, vf)
        p = float(stats.kendalltau(tf, vf).pvalue)  # Mann-Kendall's test
    return RobustTrend(
        slope=slope * k, ci_low=lo * k, ci_high=hi * k, intercept=icpt * k,
        start_s=start - float(t[0]),
        n=int(t.size), n_fit=int(tf.size), duration_s=float(np.ptp(t)),
        p_value=p if math.isfinite(p) else 1.0, ar1_rho=rho,
    )  # fmt: skip


class Coefficient(TypedDict):
    """One fitted coefficient with its interval (as documents store it)."""

    estimate: float
    ci_low: float
    ci_high: float


class QuadraticFit(TypedDict, total=False):
    """:func:`quadratic_fit`'s result: ``error`` (and ``n``) alone when there is no fit."""

    n: int
    model: str
    a: Coefficient
    b: Coefficient
    c: Coefficient
    r2: float
    error: str


def quadratic_fit(x: Any, y: Any, confidence: float = CONFIDENCE) -> QuadraticFit:
    """y = a + b x + c x^2 by least squares, each coefficient with its t-interval."""
    xv = np.asarray(x, dtype=float)
    yv = np.asarray(y, dtype=float)
    ok = np.isfinite(xv) & np.isfinite(yv)
    xv, yv = xv[ok], yv[ok]
    n = xv.size
    if n < 4 or np.unique(xv).size < 3:
        return {"n": int(n), "error": "need at least 3 distinct x values and 4 points"}
    scale = float(np.max(np.abs(xv))) or 1.0  # fit on x / scale: x^2 of 1e10 is ill-conditioned
    u = xv / scale
    m = np.column_stack([np.ones(n), u, u**2])
    coef, *_ = np.linalg.lstsq(m, yv, rcond=None)
    resid = yv - m @ coef
    dof = n - 3
    s2 = float(resid @ resid) / dof if dof > 0 else math.nan
    cov = s2 * np.linalg.inv(m.T @ m)
    tcrit = _t_critical(confidence, float(dof)) if dof > 0 else math.nan
    coefs: list[Coefficient] = []
    for i in range(3):
        f = scale**-i
        est, se = float(coef[i]) * f, math.sqrt(max(float(cov[i, i]), 0.0)) * f
        coefs.append({"estimate": est, "ci_low": est - tcrit * se, "ci_high": est + tcrit * se})
    ss_tot = float(np.sum((yv - yv.mean()) ** 2))
    return {
        "n": int(n),
        "model": "y = a + b*x + c*x^2",
        "a": coefs[0],
        "b": coefs[1],
        "c": coefs[2],
        "r2": 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0,
    }


# ----------------------------------------------------------------------------- out of core
# describe() / describe_weighted() of a sample too large to hold (a 72-hour soak's 415
# million chunk gaps: 3.3 GB as float64), from batches read twice. The percentiles are
# exact (the same order statistics and the same interpolation as numpy's "linear"
# percentile and weighted_percentiles): the first pass counts the values per bucket
# (the float's sign, exponent and first 10 mantissa bits: 1,024 buckets per octave, in
# value order), the second keeps only the values of the buckets the ranks fall in.
# count, min and max are exact; mean and std are summed per batch, so they can differ
# from the in-memory figures in the last digits (summation order).
_KEY_SHIFT = 42  # 52 mantissa bits - 10 kept
_KEY_ZERO = 1 << 21  # keys of values >= 0 start here; negative values' keys lie below
_KEYS = 1 << 22


def _bucket_keys(v: np.ndarray, nonnegative: bool = False) -> np.ndarray:
    """Bucket of each value, non-decreasing in the value (finite float64 values);
    ``nonnegative``: the caller knows no value is below 0 (one pass instead of three)."""
    a = np.abs(v).view(np.int64) >> _KEY_SHIFT
    if nonnegative:
        a += _KEY_ZERO
        return a
    return np.where(v >= 0, _KEY_ZERO + a, _KEY_ZERO - 1 - a)


def _np_linear(n: int, qs: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's "linear" percentile: the lower and upper rank and the weight, per q."""
    q = np.true_divide(np.asarray(qs, dtype=np.float64), 100)
    vi = (n - 1) * q
    lo = np.floor(vi)
    hi = np.minimum(lo + 1, n - 1)
    return lo.astype(np.int64), hi.astype(np.int64), vi - lo


def _np_lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's _lerp (numpy.lib._function_base_impl), term for term."""
    d = b - a
    out = np.add(a, d * t)
    np.subtract(b, d * (1 - t), out=out, where=t >= 0.5)
    return out


def _batch_m2(v: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float, float]:
    """A batch's (weighted) size, sum and sum of squared deviations from its own mean."""
    nb = float(v.size if w is None else w.sum())
    if nb == 0:
        return 0.0, 0.0, 0.0
    sb = float(v.sum() if w is None else (v * w).sum())
    d = v - sb / nb
    return nb, sb, float((d * d).sum() if w is None else (d * d * w).sum())


def _merge_m2(m2: float, n: float, total: float, nb: float, sb: float, m2b: float) -> float:
    """The sum of squared deviations of a sample of ``n`` (total weight) with sum ``total``
    and ``m2``, after adding a batch of ``_batch_m2``'s (nb, sb, m2b) (Chan et al.'s
    pairwise update: each batch's own deviations from its own mean, then the two means'
    gap)."""
    if nb == 0:
        return m2
    if n == 0:
        return m2b
    delta = sb / nb - total / n
    return m2 + m2b + delta * delta * n * nb / (n + nb)


@dataclass
class PreparedBatch:
    """What StreamedDescribe.commit needs of a batch, computed by ``prepare`` without
    touching the accumulator (so, in a worker thread: metrics.parallel)."""

    v: np.ndarray  # the values (NaN dropped)
    w: np.ndarray  # their weights
    k: np.ndarray  # their buckets
    first: tuple[float, float, float, float, float, int, np.ndarray] | None = None
    # (n, sum, m2, min, max, lowest bucket, counts per bucket from it): first pass only
    weighted: tuple[float, float, float, float, float, int, np.ndarray] | None = None
    every: bool = True  # every weight > 0 (else ``weighted`` is of those that are)


try:  # the compiled per-batch loops (optional: numpy is the fallback)
    from accelbench.metrics import _chunkstats
except ImportError:  # pragma: no cover - where the extension did not build
    _chunkstats = None  # type: ignore[assignment]


def _compiled_batch(v: np.ndarray, w: np.ndarray, pass2: bool) -> PreparedBatch | None:
    """``StreamedDescribe.prepare`` of a batch without NaN in two compiled passes
    (metrics/_chunkstats.c ``batch``); None where ``v`` holds a NaN."""
    got = _chunkstats.batch(v, w)
    if got is None:
        return None
    (n, s, m2, vmin, vmax, lo, wn, ws, wm2, wmin, wmax, wlo, every), kb, cb, wcb = got
    k = np.frombuffer(kb, dtype=np.int64)
    if pass2:
        return PreparedBatch(v, w, k)
    out = PreparedBatch(v, w, k, (float(n), s, m2, vmin, vmax, lo, np.frombuffer(cb, np.int64)))
    if len(wcb):
        out.every = bool(every)
        out.weighted = (float(wn), ws, wm2, wmin, wmax, wlo, np.frombuffer(wcb, np.int64))
    return out


def _kept(v: np.ndarray, w: np.ndarray, k: np.ndarray, wanted: np.ndarray) -> tuple[Any, Any]:
    """The values (and weights) whose bucket is marked in ``wanted``."""
    if _chunkstats is not None:
        vb, wb = _chunkstats.keep(v, w, k, wanted.view(np.uint8))
        return np.frombuffer(vb, dtype=np.float64), np.frombuffer(wb, dtype=np.int64)
    sel = wanted[k]
    return v[sel], w[sel]


def _counts(keys: np.ndarray, weights: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """``bincount(keys, weights)`` over only the keys' range, as (lowest key, counts): a
    batch of chunk gaps spans a few thousand of the 4 million buckets (a full-length
    bincount per batch cost more than the rest of the count)."""
    lo = int(keys.min())
    c = np.bincount(keys - lo, weights=weights)
    return lo, c if weights is None else c.astype(np.int64)


class StreamedDescribe:
    """describe() and describe_weighted() of (value, weight) batches too many to hold:
    ``add`` every batch; unless ``complete()``, ``second_pass()`` and ``add`` them all
    again; then ``result``. ``quantiles``: the percentiles reported (describe()'s by
    default); batches added without weights leave the weighted figures empty.

    One pass is enough where the sample is stable: once ``guess_after`` values are in,
    their percentiles (widened by six binomial standard errors and 0.1 point of rank)
    choose the buckets to keep from the later batches, and ``complete()`` says whether
    every bucket the final ranks fall in was kept (the values before the guess are all
    kept). Where not (the later values moved), the second pass keeps exactly the buckets
    needed. Either way the percentiles are exact."""

    def __init__(
        self, quantiles: Sequence[tuple[str, float]] = QUANTILES, guess_after: int = 1 << 20
    ) -> None:
        self.quantiles = tuple(quantiles)
        self.guess_after = guess_after
        self.n = 0
        self.wsum = 0
        self.s = 0.0
        self.sw = 0.0
        self.m2 = self.m2w = 0.0
        self.lo = self.wlo = math.inf
        self.hi = self.whi = -math.inf
        self.count = np.zeros(_KEYS, dtype=np.int64)
        self.wcount = np.zeros(0, dtype=np.int64)  # allocated by the first weighted batch
        self.pass2 = False
        self.guessed = False  # _wanted holds the guessed buckets
        self._wanted = np.zeros(0, dtype=bool)
        self.kept: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        self.commit(self.prepare(values, weights))

    def prepare(
        self, values: np.ndarray, weights: np.ndarray | None = None
    ) -> PreparedBatch | None:
        """The batch's part of ``add`` that reads nothing ``commit`` changes: safe in
        other threads while the batches before it are committed (within one pass)."""
        v = np.ascontiguousarray(values, dtype=np.float64)
        w = np.zeros(v.size, np.int64) if weights is None else np.asarray(weights, np.int64)
        if _chunkstats is not None and v.size:
            w = np.ascontiguousarray(w)
            if w.size != v.size:
                raise ValueError("values and weights differ in length")
            done = _compiled_batch(v, w, self.pass2)
            if done is not None:
                return done
        keep = ~np.isnan(v)
        if not keep.all():
            v, w = v[keep], w[keep]
        if not v.size:
            return None
        if _chunkstats is not None:  # the NaN gone
            return _compiled_batch(np.ascontiguousarray(v), np.ascontiguousarray(w), self.pass2)
        vmin = float(v.min())
        k = _bucket_keys(v, vmin >= 0 if not self.pass2 else self.lo >= 0)
        if self.pass2:
            return PreparedBatch(v, w, k)
        nb, sb, m2b = _batch_m2(v)
        out = PreparedBatch(v, w, k, (nb, sb, m2b, vmin, float(v.max()), *_counts(k)))
        wk = w > 0
        if wk.any():
            out.every = bool(wk.all())
            vw, ww = (v, w) if out.every else (v[wk], w[wk])
            nw, sw, m2w = _batch_m2(vw, ww)
            wmin, wmax = float(vw.min()), float(vw.max())
            out.weighted = (nw, sw, m2w, wmin, wmax, *_counts(k if out.every else k[wk], ww))
        return out

    def commit(self, b: PreparedBatch | None) -> None:
        """Add a prepared batch (batches in their order: the figures are then those of
        adding them one by one, to the last digit)."""
        if b is None:
            return
        v, w, k = b.v, b.w, b.k
        if self.pass2:
            self._keep(v, w, k)
            return
        assert b.first is not None
        nb, sb, m2b, vmin, vmax, lo, c = b.first
        self.m2 = _merge_m2(self.m2, self.n, self.s, nb, sb, m2b)
        self.n += int(v.size)
        self.s += sb
        self.lo, self.hi = min(self.lo, vmin), max(self.hi, vmax)
        self.count[lo : lo + c.size] += c
        if b.weighted is not None:
            if not self.wcount.size:
                self.wcount = np.zeros(_KEYS, dtype=np.int64)
            nw, sw, m2w, wmin, wmax, lo, c = b.weighted
            self.m2w = _merge_m2(self.m2w, self.wsum, self.sw, nw, sw, m2w)
            self.wsum += int(nw)
            self.sw += sw
            self.wlo, self.whi = min(self.wlo, wmin), max(self.whi, wmax)
            self.wcount[lo : lo + c.size] += c
        if not self.guessed:
            self.kept.append((v.copy(), w.copy()))  # the caller may reuse its arrays
            if self.n >= self.guess_after:
                self._guess()
        else:
            self._keep(v, w, k)

    def _keep(self, v: np.ndarray, w: np.ndarray, k: np.ndarray) -> None:
        kv, kw = _kept(v, w, k, self._wanted)
        if kv.size:
            self.kept.append((kv, kw))

    def _guess(self) -> None:
        """The buckets to keep from now on, from the percentiles of the values so far."""
        v = np.concatenate([x[0] for x in self.kept])
        w = np.concatenate([x[1] for x in self.kept])
        m = v.size
        wanted = np.zeros(_KEYS, dtype=bool)
        ranks = []
        for _, q in self.quantiles:
            p = q / 100.0
            d = 6.0 * math.sqrt(max(p * (1 - p), 1.0 / m) / m) + 1e-3
            ranks += [100 * max(p - d, 0.0), 100 * min(p + d, 1.0)]
        ends = [np.percentile(v, ranks)]  # one sort for every rank
        if (w > 0).any():
            ends.append(np.asarray(weighted_percentiles(v, w, ranks)))
        for e in ends:  # (beyond the values so far: a miss, found by complete())
            keys = _bucket_keys(np.asarray(e, dtype=np.float64))
            for ka, kb in zip(keys[0::2], keys[1::2], strict=True):
                wanted[int(ka) : int(kb) + 1] = True
        self._wanted = wanted
        self.guessed = True

    def _needed(self) -> np.ndarray:
        """The buckets holding the ranks the percentiles need."""
        want: set[int] = set()
        qs = [q for _, q in self.quantiles]
        if self.n:
            lo, hi, _ = _np_linear(self.n, qs)
            cum = np.cumsum(self.count)
            want |= set(np.searchsorted(cum, np.concatenate([lo, hi]) + 1).tolist())
        if self.wsum:
            cum = np.cumsum(self.wcount)
            for r in self._wranks():
                want.add(int(np.searchsorted(cum, r + 1)))
        return np.asarray(sorted(want), dtype=np.int64)

    def complete(self) -> bool:
        """After the first pass: whether the values kept hold every rank the percentiles
        need (then no second pass is needed)."""
        if self.pass2 or not self.guessed:
            return True
        need = self._needed()
        return bool(self._wanted[need[(need >= 0) & (need < _KEYS)]].all())

    def with_unit_weights(self) -> StreamedDescribe:
        """A copy whose weighted figures are those of every weight 1, as if each batch
        had been added with weights of ones (first pass only): the unweighted ones."""
        assert not self.pass2
        c = StreamedDescribe(self.quantiles, self.guess_after)
        c.n = c.wsum = self.n
        c.s = c.sw = self.s
        c.m2 = c.m2w = self.m2
        c.lo = c.wlo = self.lo
        c.hi = c.whi = self.hi
        c.count = self.count.copy()
        c.wcount = self.count.copy()
        c.guessed, c._wanted = self.guessed, self._wanted
        c.kept = [(v, np.ones(v.size, np.int64)) for v, _ in self.kept]
        return c

    def second_pass(self) -> None:
        """Keep, from the batches added again, exactly the buckets the ranks fall in."""
        need = self._needed()
        # a lookup table of the kept buckets: one gather per value (np.isin compared
        # every value with every wanted bucket)
        self._wanted = np.zeros(_KEYS, dtype=bool)
        self._wanted[need[(need >= 0) & (need < _KEYS)]] = True
        self.kept = []
        self.pass2 = True

    def _wranks(self) -> list[int]:
        n = self.wsum
        out = []
        for _, q in self.quantiles:
            h = (n - 1) * q / 100.0
            lo = math.floor(h)
            out += [lo, min(lo + 1, n - 1)]
        return out

    def result(self) -> tuple[dict[str, float | int | None], dict[str, float | int | None]]:
        """(describe(values), describe_weighted(values, weights))."""
        v = np.concatenate([x[0] for x in self.kept]) if self.kept else np.empty(0)
        w = np.concatenate([x[1] for x in self.kept]) if self.kept else np.empty(0, np.int64)
        self.kept = []
        k = _bucket_keys(v)
        need = self._needed()
        if need.size and k.size > 4 * need.size:  # sort only the buckets the ranks are in
            lut = np.zeros(_KEYS, dtype=bool)
            lut[need[(need >= 0) & (need < _KEYS)]] = True
            sel = lut[k]
            k, v, w = k[sel], v[sel], w[sel]
        order = np.lexsort((v, k))
        k, v, w = k[order], v[order], w[order]
        none = {key: None for key in ("mean", "std", "min", "max")} | {
            q: None for q, _ in self.quantiles
        }
        plain: dict[str, float | int | None] = {"count": self.n}
        if not self.n:
            plain.update(none)
        else:
            plain.update(mean=self.s / self.n, std=math.sqrt(max(self.m2, 0.0) / self.n),
                         min=self.lo, max=self.hi)  # fmt: skip
            cum = np.cumsum(self.count)
            before = np.concatenate([[0], cum])

            def order_stat(r: int) -> float:
                b = int(np.searchsorted(cum, r + 1))
                first = int(np.searchsorted(k, b))
                return float(v[first + r - int(before[b])])

            lo, hi, t = _np_linear(self.n, [q for _, q in self.quantiles])
            a = np.array([order_stat(int(r)) for r in lo])
            b = np.array([order_stat(int(r)) for r in hi])
            for (name, _), x in zip(self.quantiles, _np_lerp(a, b, t), strict=True):
                plain[name] = float(x)
        weighted: dict[str, float | int | None] = {"count": self.wsum}
        if not self.wsum:
            weighted.update(none)
            return plain, weighted
        m = self.sw / self.wsum
        std_w = math.sqrt(max(self.m2w, 0.0) / self.wsum)
        weighted.update(mean=m, std=std_w, min=self.wlo, max=self.whi)
        pos = w > 0
        qw = _bucketed_weighted_quantiles(
            np.cumsum(self.wcount), k[pos], v[pos], w[pos], [q for _, q in self.quantiles]
        )
        for (name, _), x in zip(self.quantiles, qw, strict=True):
            weighted[name] = x
        return plain, weighted
