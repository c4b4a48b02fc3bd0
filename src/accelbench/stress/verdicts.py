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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from accelbench.errors import UsageError

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


def _hinge_break(t: np.ndarray, y: np.ndarray, max_k: int) -> float | None:
    """The break of the best continuous two-segment fit, when it is significant
    (F-test, p < 0.01) and the early segment rises faster than the late one."""
    n = t.size
    x0 = t - t[0]
    one = np.column_stack([np.ones(n), x0])
    sse1 = float(np.sum((y - one @ np.linalg.lstsq(one, y, rcond=None)[0]) ** 2))
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

    f = ((sse1 - sse2) / 2) / (sse2 / (n - 4))
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


def robust_trend(t_s: Any, y: Any, *, skip_warmup: bool = True) -> RobustTrend | None:
    """Theil-Sen trend of ``y`` on ``t_s`` after the warm-up (see :func:`warmup_end`).

    Theil-Sen (the median of pairwise slopes) ignores outliers and steps better than
    least squares; its interval (from Kendall's tau) assumes independent residuals.
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
    if tf.size < 4 or np.ptp(vf) == 0:
        slope = lo = hi = 0.0
        icpt = float(vf[0]) if vf.size else 0.0
        p = 1.0
    else:
        slope, icpt, lo, hi = (float(x) for x in stats.theilslopes(vf, tf, CONFIDENCE))
        p = float(stats.kendalltau(tf, vf).pvalue)
    return RobustTrend(
        slope=slope, ci_low=lo, ci_high=hi, intercept=icpt, start_s=start - float(t[0]),
        n=int(t.size), n_fit=int(tf.size), duration_s=float(np.ptp(t)),
        p_value=p if math.isfinite(p) else 1.0,
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
        name, "leak", "Theil-Sen slope of memory after the warm-up", "B/h", est, lo, hi,
        th.warn_bytes_per_h, th.fail_bytes_per_h, verdict, rule,
        evidence={
            "n": tr.n, "n_fit": tr.n_fit, "duration_s": tr.duration_s,
            "growth_low_bytes": lo * fit_span_h,
            "warmup_end_s": tr.start_s, "mann_kendall_p": tr.p_value, "last_bytes": last,
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
    stat = f"Theil-Sen slope ({'% of median' if relative else 'percentage points'} per hour; {bad} is bad)"
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
    if not all(map(math.isfinite, (est, lo, hi))):
        return Verdict(name, "drift", stat, unit, None, None, None, warn, fail, "n/a",
                       "the series' median is 0: no relative drift", evidence={"n": tr.n})  # fmt: skip
    verdict, rule = judge(est, lo, hi, warn, fail)
    return Verdict(
        name, "drift", stat, unit, est, lo, hi, warn, fail, verdict, rule,
        evidence={"n": tr.n, "duration_s": tr.duration_s, "median": level,
                  "mann_kendall_p": tr.p_value},
    )  # fmt: skip


# -- bootstrap ------------------------------------------------------------------------
def bootstrap_ci(
    stat: Callable[..., float],
    *samples: np.ndarray,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(estimate, low, high): percentile bootstrap of ``stat(*samples)``, each sample
    resampled independently with replacement."""
    rng = np.random.default_rng(seed)
    arrs = [np.asarray(s, dtype=float) for s in samples]
    est = float(stat(*arrs))
    reps = np.empty(n_boot)
    for b in range(n_boot):
        reps[b] = stat(*(a[rng.integers(0, a.size, a.size)] for a in arrs))
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return est, math.nan, math.nan
    lo, hi = np.percentile(reps, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return est, float(lo), float(hi)


def pct_change(q: float) -> Callable[[np.ndarray, np.ndarray], float]:
    """The statistic 100 x (percentile_q(after) / percentile_q(before) - 1)."""

    def f(before: np.ndarray, after: np.ndarray) -> float:
        b = float(np.percentile(before, q))
        return 100.0 * (float(np.percentile(after, q)) / b - 1.0) if b > 0 else math.nan

    return f


def cv_pct(x: np.ndarray) -> float:
    """Coefficient of variation in % (sample std / mean)."""
    m = float(np.mean(x))
    return 100.0 * float(np.std(x, ddof=1)) / m if x.size > 1 and m > 0 else math.nan


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
