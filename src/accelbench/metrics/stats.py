"""Percentiles as METRICS.md defines them: linear interpolation between order statistics
(numpy's default), token-weighted variants, and "adjusted" variants that count failed
requests as +infinity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
    from scipy import stats  # imported here: scipy.stats costs the CLI ~0.3 s at start

    return stats.t.ppf(0.5 + confidence / 2.0, dof)


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
    k = np.arange(1, n + 1)
    below = stats.binom.sf(k - 1, n, p)  # P(X_(k) <= xi), decreasing in k
    above = stats.binom.cdf(k - 1, n, p)  # P(X_(k) >= xi), increasing in k
    ok_lo = np.nonzero(below >= 1 - a)[0]
    ok_hi = np.nonzero(above >= 1 - a)[0]
    if ok_lo.size == 0 or ok_hi.size == 0:
        return None
    i, j = int(ok_lo[-1]), int(ok_hi[0])  # 0-based indices of X_(i+1), X_(j+1)
    lo = float(i + 1)
    if i + 1 < n and below[i] > below[i + 1]:
        lo += (below[i] - (1 - a)) / (below[i] - below[i + 1])
    hi = float(j + 1)
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
    x = np.sort(np.asarray(values, dtype=float), axis=-1)
    ranks = quantile_ci_ranks(x.shape[-1], q, confidence)
    if ranks is None:
        return None
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


def min_samples(q: float) -> int:
    """Values a side needs before a percentile's interval is given: five beyond the
    percentile (500 for p99), at least 10; also enough for :func:`quantile_ci`."""
    return max(10, math.ceil(5 / (1 - q / 100) - 1e-9), min_quantile_samples(q))


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
    caller says "too few" there). NaN where the mean is not positive."""
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
        return np.sqrt(s2) / m, np.exp((lv - z * se) / 2) / m, np.exp((lv + z * se) / 2) / m


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


def throughput_log_se(tok: np.ndarray, e2e: np.ndarray | None) -> Any:
    """Standard error of the log throughput of a run's requests (rows, last axis), by the
    delta method. Closed loop (``e2e`` given): throughput is proportional to
    sum(tokens) / sum(E2E) (Little's law), a ratio estimator with
    var(log R) = var(tok / mean(tok) - e2e / mean(e2e)) / n. Open loop (``e2e`` None): the
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
        u = t / mt - e / e.mean(axis=-1, keepdims=True)
        return np.sqrt(u.var(axis=-1, ddof=1) / n)


def log_ratio_ci(d: Any, se_a: Any, se_b: Any, confidence: float = CONFIDENCE) -> tuple[Any, Any]:
    """(low, high) of exp(d) for a log ratio ``d`` of two independent estimates with these
    standard errors (normal on the log scale)."""
    half = z_critical(confidence) * np.sqrt(np.asarray(se_a) ** 2 + np.asarray(se_b) ** 2)
    return np.exp(d - half), np.exp(d + half)


def runs_ratio_ci(
    a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[Any, Any, Any] | None:
    """(ratio, low, high) of B over A from repeated runs' figures (rows; last axis: the
    runs of a side): a pooled two-sample t-interval on the log figures with
    ``ra + rb - 2`` degrees of freedom. The run is the unit: the run-to-run spread (a
    server's state, its placement, the machine's other load) is in the interval, which
    pooling requests ignored (78-88 % coverage at a 5 % spread). None below 3 runs in
    all (no spread to estimate); the ratio is of the geometric means."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    ra, rb = la.shape[-1], lb.shape[-1]
    dof = ra + rb - 2
    if dof < 1:
        return None
    d = lb.mean(axis=-1) - la.mean(axis=-1)
    ss = ((la - la.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1) + (
        (lb - lb.mean(axis=-1, keepdims=True)) ** 2
    ).sum(axis=-1)
    half = t_critical(confidence, dof) * np.sqrt(ss / dof * (1.0 / ra + 1.0 / rb))
    return np.exp(d), np.exp(d - half), np.exp(d + half)
