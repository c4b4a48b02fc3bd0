"""The statistics behind the stress verdicts (docs/STRESS.md).

Every verdict states its statistic, its 95 % interval and the thresholds it was held
to. The rule is the same everywhere, with the interval oriented so that "high" is bad:

* fail: the whole interval lies above the fail threshold (the evidence says it is bad);
* warn: the whole interval lies above the warn threshold;
* pass: otherwise (including "not enough evidence": the interval is reported).

A *claim* (``latency fluctuation under 3 %``) is the dual: pass when the whole interval
lies under the claimed bound, fail when the whole interval lies above it, warn
(inconclusive) when the interval straddles it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from accelbench.errors import UsageError
from accelbench.metrics.stats import (
    MIN_CV_SAMPLES,
    MIN_TREND_POINTS,
    ar1_inflation,
    ar1_rho,
    cv_ci,
    min_samples,
    quantile_ratio_ci,
    z_critical,
)

CONFIDENCE = 0.95
HOUR = 3600.0


@dataclass
class Verdict:
    """One verdict with its evidence (JSON-ready through :meth:`to_dict`)."""

    name: str
    kind: str  # leak | drift | interference | jitter | claim | consistency
    statistic: str  # what was estimated, in words
    unit: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    warn: float | None  # thresholds, in the statistic's unit, oriented "high is bad"
    fail: float | None
    verdict: str  # pass | warn | fail | n/a
    rule: str
    confidence: float = CONFIDENCE
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(
    est: float, lo: float, hi: float, warn: float | None, fail: float | None
) -> tuple[str, str]:
    """(verdict, rule) for a bad-is-high statistic with interval [lo, hi]."""
    rule = "fail / warn if the 95% interval lies wholly above the fail / warn threshold"
    if fail is not None and lo > fail:
        return "fail", rule
    if warn is not None and lo > warn:
        return "warn", rule
    return "pass", rule


def check_thresholds(
    warn_name: str, warn: float, fail_name: str, fail: float, hi: float, unit: str = ""
) -> None:
    """A warn / fail threshold pair a user gave: finite, in [0, hi], warn not above fail
    (one line naming the option otherwise)."""
    from accelbench import validate as v

    v.number(warn_name, warn, 0.0, hi, unit=unit)
    v.number(fail_name, fail, 0.0, hi, unit=unit)
    if warn > fail:
        raise UsageError(f"{warn_name} ({warn:g}) must not be above {fail_name} ({fail:g})")


def judge_claim(lo: float, hi: float, bound: float) -> tuple[str, str]:
    rule = f"claim 'under {bound:g}': pass if the 95% interval lies below it, fail if above, warn if it straddles"
    if hi < bound:
        return "pass", rule
    if lo > bound:
        return "fail", rule
    return "warn", rule


# -- trends ---------------------------------------------------------------------------
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


def _hinge_break(t: np.ndarray, y: np.ndarray, max_k: int) -> float | None:
    """The break of the best continuous two-segment fit, when it is significant
    (F-test, p < 0.01) and the early segment rises faster than the late one."""
    n = t.size
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
    start = warmup_end(t, v) if skip_warmup else float(t[0])
    keep = t >= start
    tf, vf = t[keep], v[keep]
    rho = 0.0
    if tf.size < 4 or np.ptp(vf) == 0:
        slope, icpt, p = 0.0, (float(vf[0]) if vf.size else 0.0), 1.0
        lo = hi = 0.0 if tf.size >= MIN_TREND_POINTS else math.nan
    else:
        slope, icpt, lo, hi, rho = sen_interval(tf, vf)
        p = float(stats.kendalltau(tf, vf).pvalue)
    return RobustTrend(
        slope=slope, ci_low=lo, ci_high=hi, intercept=icpt, start_s=start - float(t[0]),
        n=int(t.size), n_fit=int(tf.size), duration_s=float(np.ptp(t)),
        p_value=p if math.isfinite(p) else 1.0, ar1_rho=rho,
    )  # fmt: skip


# -- leak -----------------------------------------------------------------------------
@dataclass
class LeakThresholds:
    warn_bytes_per_h: float = 4 * 2**20
    fail_bytes_per_h: float = 32 * 2**20
    horizon_h: float = 72.0  # fail when the memory runs out sooner than this
    # A leak must have grown at least this much over the fitted span (at the interval's
    # low end) to be called one: a process's first minutes of allocation are not a leak.
    min_growth_bytes: float = 2**20


def leak_verdict(
    name: str,
    t_s: Sequence[float],
    bytes_: Sequence[float],
    total_bytes: float | None,
    th: LeakThresholds | None = None,
) -> Verdict:
    """Leak verdict of one memory series: slope per hour after the warm-up, its interval,
    and the time to exhaustion against ``total_bytes`` (the device's or host's total)."""
    th = th or LeakThresholds()
    tr = robust_trend(t_s, bytes_)
    if tr is None:
        return Verdict(name, "leak", "Theil-Sen slope after warm-up", "B/h", None, None, None,
                       th.warn_bytes_per_h, th.fail_bytes_per_h, "n/a",
                       "too few samples (need 4)", evidence={"n": len(t_s)})  # fmt: skip
    est, lo, hi = tr.slope * HOUR, tr.ci_low * HOUR, tr.ci_high * HOUR
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # no interval, no estimate shown as if it were evidence (the slope is in evidence)
        return Verdict(name, "leak", "Theil-Sen slope of memory after the warm-up", "B/h", None,
                       None, None, th.warn_bytes_per_h, th.fail_bytes_per_h, "n/a",
                       f"too few samples after the warm-up ({tr.n_fit}; an interval needs "
                       f"{MIN_TREND_POINTS})",
                       evidence={"n": tr.n, "n_fit": tr.n_fit, "warmup_end_s": tr.start_s,
                                 "slope_without_interval": est})  # fmt: skip
    verdict, rule = judge(est, lo, hi, th.warn_bytes_per_h, th.fail_bytes_per_h)
    last = float(np.asarray(bytes_, dtype=float)[-1])
    tte = tte_lo = None
    if total_bytes and est > 0:
        tte = max(0.0, total_bytes - last) / est
    if total_bytes and hi > 0:
        tte_lo = max(0.0, total_bytes - last) / hi  # the pessimistic end
    if total_bytes and lo > 0 and (total_bytes - last) / lo < th.horizon_h:
        verdict = "fail"
    fit_span_h = (tr.duration_s - tr.start_s) / HOUR
    if lo * fit_span_h < th.min_growth_bytes:
        verdict = "pass"
    rule += (
        f"; fail if memory runs out within {th.horizon_h:g} h even at the interval's low end;"
        f" pass while the growth at the low end is under {th.min_growth_bytes / 2**20:g} MiB"
    )
    return Verdict(
        name, "leak", "Theil-Sen slope of memory after the warm-up (Sen's interval, AR(1)-adjusted)",
        "B/h", est, lo, hi,
        th.warn_bytes_per_h, th.fail_bytes_per_h, verdict, rule,
        evidence={
            "n": tr.n, "n_fit": tr.n_fit, "duration_s": tr.duration_s,
            "growth_low_bytes": lo * fit_span_h,
            "warmup_end_s": tr.start_s, "mann_kendall_p": tr.p_value, "ar1_rho": tr.ar1_rho,
            "last_bytes": last,
            "total_bytes": total_bytes, "time_to_exhaustion_h": tte,
            "time_to_exhaustion_h_pessimistic": tte_lo,
        },
    )  # fmt: skip


# -- drift ----------------------------------------------------------------------------
@dataclass
class DriftThresholds:
    warn_pct_per_h: float = 5.0
    fail_pct_per_h: float = 20.0
    warn_pp_per_h: float = 0.5  # error rate, percentage points per hour
    fail_pp_per_h: float = 2.0


def drift_verdict(
    name: str,
    t_s: Sequence[float],
    values: Sequence[float],
    *,
    bad: str = "up",
    relative: bool = True,
    th: DriftThresholds | None = None,
) -> Verdict:
    """Drift of a per-window series (latency: ``bad="up"``; throughput: ``"down"``).

    Relative series: the Theil-Sen slope as % of the series' median per hour. Absolute
    (error rate as a fraction): percentage points per hour. No warm-up is skipped: the
    first windows are part of what a user sees."""
    th = th or DriftThresholds()
    sign = 1.0 if bad == "up" else -1.0
    unit = "%/h" if relative else "pp/h"
    warn, fail = (
        (th.warn_pct_per_h, th.fail_pct_per_h) if relative else (th.warn_pp_per_h, th.fail_pp_per_h)
    )
    stat = (f"Theil-Sen slope ({'% of median' if relative else 'percentage points'} per hour;"
            f" {bad} is bad; Sen's interval, AR(1)-adjusted)")  # fmt: skip
    tr = robust_trend(t_s, values, skip_warmup=False)
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if tr is None or v.size == 0:
        return Verdict(name, "drift", stat, unit, None, None, None, warn, fail, "n/a",
                       "too few windows (need 4)", evidence={"n": int(v.size)})  # fmt: skip
    level = float(np.median(v))
    scale = (100.0 / level if level else math.nan) if relative else 100.0
    a, b = sign * tr.ci_low * HOUR * scale, sign * tr.ci_high * HOUR * scale
    est, lo, hi = sign * tr.slope * HOUR * scale, min(a, b), max(a, b)
    if not (math.isfinite(tr.ci_low) and math.isfinite(tr.ci_high)):
        return Verdict(name, "drift", stat, unit, None, None, None, warn, fail, "n/a",
                       f"too few windows ({tr.n}; an interval needs {MIN_TREND_POINTS})",
                       evidence={"n": tr.n, "slope_without_interval":
                                 est if math.isfinite(est) else None})  # fmt: skip
    if not all(map(math.isfinite, (est, lo, hi))):
        return Verdict(name, "drift", stat, unit, None, None, None, warn, fail, "n/a",
                       "the series' median is 0: no relative drift", evidence={"n": tr.n})  # fmt: skip
    verdict, rule = judge(est, lo, hi, warn, fail)
    return Verdict(
        name, "drift", stat, unit, est, lo, hi, warn, fail, verdict, rule,
        evidence={"n": tr.n, "duration_s": tr.duration_s, "median": level,
                  "mann_kendall_p": tr.p_value, "ar1_rho": tr.ar1_rho},
    )  # fmt: skip


# -- interference and jitter --------------------------------------------------------
def change_pct(before: np.ndarray, after: np.ndarray, q: float) -> dict[str, Any]:
    """% change of percentile q (after against before) with its 95 % interval
    (:func:`accelbench.metrics.stats.quantile_ratio_ci`); no interval below
    :func:`~accelbench.metrics.stats.min_samples` requests a side."""
    need = min_samples(q)
    out: dict[str, Any] = {"estimate": None, "ci_low": None, "ci_high": None}
    b, a = (np.asarray(x, dtype=float) for x in (before, after))
    b, a = b[np.isfinite(b)], a[np.isfinite(a)]
    r = quantile_ratio_ci(b, a, q) if min(b.size, a.size) >= need else None
    if r is None or not np.all(np.isfinite(r)):
        out["note"] = f"too few requests (p{q:g} needs {need} a side)"
        return out
    est, lo, hi = (100.0 * (float(x) - 1.0) for x in r)
    return {"estimate": est, "ci_low": lo, "ci_high": hi}


def jitter_pct(windows: np.ndarray) -> dict[str, Any]:
    """Coefficient of variation (%) of per-window values with its 95 % interval
    (:func:`accelbench.metrics.stats.cv_ci`); no interval below MIN_CV_SAMPLES windows,
    where none covers."""
    w = np.asarray(windows, dtype=float)
    out: dict[str, Any] = {"estimate": None, "ci_low": None, "ci_high": None,
                           "windows": int(w.size)}  # fmt: skip
    if w.size < MIN_CV_SAMPLES:
        out["note"] = f"too few windows ({w.size}; an interval needs {MIN_CV_SAMPLES})"
        return out
    k, lo, hi = (float(x) for x in cv_ci(w))
    if not all(map(math.isfinite, (k, lo, hi))):
        out["note"] = "no interval: the windows' mean is not positive"
        return out
    return {**out, "estimate": 100.0 * k, "ci_low": 100.0 * lo, "ci_high": 100.0 * hi}


# -- curve fit ------------------------------------------------------------------------
def quadratic_fit(x: Any, y: Any) -> dict[str, Any]:
    """y = a + b x + c x^2 by least squares, each coefficient with its 95 % t-interval."""
    from scipy import stats

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
    tcrit = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) if dof > 0 else math.nan
    out: dict[str, Any] = {"n": int(n), "model": "y = a + b*x + c*x^2"}
    for i, k in enumerate("abc"):
        f = scale**-i
        est, se = float(coef[i]) * f, math.sqrt(max(float(cov[i, i]), 0.0)) * f
        out[k] = {"estimate": est, "ci_low": est - tcrit * se, "ci_high": est + tcrit * se}
    ss_tot = float(np.sum((yv - yv.mean()) ** 2))
    out["r2"] = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    return out


# -- consistency ----------------------------------------------------------------------
def compare_tokens(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    """Identical?, the position of the first differing token (None when identical) and
    difflib's similarity ratio (2 x matches / total length)."""
    if list(a) == list(b):
        return {"identical": True, "first_diff": None, "similarity": 1.0}
    first = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    ratio = difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).ratio()
    return {"identical": False, "first_diff": first, "similarity": ratio}
