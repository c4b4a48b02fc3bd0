"""The statistics behind the stress verdicts (docs/STRESS.md).

Every verdict states its statistic, its 95 % interval and the thresholds it was held
to. The rule is the same everywhere, with the interval oriented so that "high" is bad:

* fail: the whole interval lies above the fail threshold (the evidence says it is bad);
* warn: the whole interval lies above the warn threshold;
* inconclusive: otherwise, when the estimate itself lies above the fail threshold (the
  evidence leans bad but cannot confirm it: a soak's error rate drifting +94 pp/h [-76,
  +259] against a fail threshold of 2 pp/h is no pass);
* pass: otherwise, "no evidence of a problem beyond the threshold" (the interval is
  reported: it says how much a short run could have missed).

A *claim* (``latency fluctuation under 3 %``) is the dual: pass when the whole interval
lies under the claimed bound, fail when the whole interval lies above it, warn
(inconclusive) when the interval straddles it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from accelbench.errors import UsageError
from accelbench.metrics.stats import (
    MIN_CV_SAMPLES,
    MIN_TREND_POINTS,
    clopper_pearson,
    cv_ci,
    min_samples,
    quantile_ratio_ci,
    robust_trend,
)
from accelbench.metrics.verdict import Evidence, Interval, Status, Verdict

CONFIDENCE = 0.95
HOUR = 3600.0


def stress_verdict(
    name: str,
    kind: str,
    statistic: str,
    unit: str,
    estimate: float | None,
    low: float | None,
    high: float | None,
    warn: float | None,
    fail: float | None,
    status: Status,
    rule: str,
    *,
    evidence: Evidence | None = None,
    method: str = "",
    note: str = "",
) -> Verdict:
    """A stress verdict as the one :class:`~accelbench.metrics.verdict.Verdict` record:
    thresholds ``warn`` and ``fail`` in the statistic's unit, oriented "high is bad" (a
    claim has only ``fail``, its bound); no interval where there are too few samples."""
    return Verdict(
        name=name,
        status=status,
        statistic=statistic,
        unit=unit,
        estimate=estimate,
        interval=None if low is None and high is None else Interval(low, high, CONFIDENCE, method),
        thresholds={"warn": warn, "fail": fail},
        rule=rule,
        evidence=dict(evidence or {}),
        kind=kind,
        note=note,
    )


RULE = (
    "fail / warn if the 95% interval lies wholly above the fail / warn threshold; "
    "inconclusive if only the estimate lies above the fail threshold; pass otherwise"
)


def judge(
    est: float, lo: float, hi: float, warn: float | None, fail: float | None
) -> tuple[Status, str]:
    """(status, rule) for a bad-is-high statistic with interval [lo, hi]."""
    if fail is not None and lo > fail:
        return Status.FAIL, RULE
    if warn is not None and lo > warn:
        return Status.WARN, RULE
    bound = fail if fail is not None else warn
    if bound is not None and est > bound:  # a pass never contradicts its own estimate
        return Status.INCONCLUSIVE, RULE
    return Status.PASS, RULE


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


def claim_rule(bound: float) -> str:
    return f"claim 'under {bound:g}': pass if the 95% interval lies below it, fail if above, warn if it straddles"


def judge_claim(lo: float, hi: float, bound: float) -> tuple[Status, str]:
    rule = claim_rule(bound)
    if hi < bound:
        return Status.PASS, rule
    if lo > bound:
        return Status.FAIL, rule
    return Status.WARN, rule


# -- a fraction failed ----------------------------------------------------------------
def fraction_verdict(
    name: str,
    kind: str,
    statistic: str,
    k: int,
    n: int,
    warn: float,
    fail: float,
    evidence: Evidence,
    counted: str = "requests",
) -> Verdict:
    """The verdict of a fraction ``k / n`` (requests failed, prompts diverging) with its
    exact (Clopper-Pearson) 95 % interval, judged by :func:`judge` against ``warn`` and
    ``fail`` (fractions); ``n/a`` with no trial at all. Flood's errors, soak's errors and
    consistency's divergence are each one of these."""
    lo, hi = clopper_pearson(k, n)
    est = k / n if n else 0.0
    verdict, rule = judge(est, lo, hi, warn, fail)
    return stress_verdict(
        name, kind, f"{statistic} (Clopper-Pearson)", "fraction", est, lo, hi, warn, fail,
        verdict if n else Status.NA, rule, evidence=evidence,
        note="" if n else f"no {counted} to judge",
    )  # fmt: skip


# -- leak -----------------------------------------------------------------------------
@dataclass
class LeakThresholds:
    warn_bytes_per_h: float = 4 * 2**20
    fail_bytes_per_h: float = 32 * 2**20
    horizon_h: float = 72.0  # fail when the memory runs out sooner than this
    # A leak must have grown at least this much over the fitted span (at the interval's
    # low end) to be called one: a process's first minutes of allocation are not a leak.
    # Below it a slope whose estimate lies above the fail threshold is inconclusive, not
    # a pass (a minute's 0.9 MiB is 54 MiB/h).
    min_growth_bytes: float = 2**20


def leak_verdicts(
    series: dict[str, tuple[list[float], list[float]]],
    metrics: Sequence[str],
    total_for: Callable[[str], float | None],
    th: LeakThresholds,
) -> list[Verdict]:
    """A leak verdict for every memory series sampled (``memory_series``), and one for
    each ``--metric`` gauge the server's /metrics never reported: n/a, saying so (a gauge
    asked for is never left out without a word)."""
    out = [leak_verdict(f"leak {name}", ts, ys, total_for(name), th)
           for name, (ts, ys) in sorted(series.items())]  # fmt: skip
    for m in metrics:
        if f"metric:{m}" not in series:
            out.append(stress_verdict(f"leak metric:{m}", "leak", "Theil-Sen slope after warm-up",
                                      "B/h", None, None, None, th.warn_bytes_per_h,
                                      th.fail_bytes_per_h, Status.NA, RULE,
                                      note=f"--metric {m}: not found on the server's /metrics",
                                      evidence={"n": 0}))  # fmt: skip
    return out


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
        return stress_verdict(name, "leak", "Theil-Sen slope after warm-up", "B/h", None, None, None,
                       th.warn_bytes_per_h, th.fail_bytes_per_h, Status.NA,
                       RULE, note="too few samples (need 4)", evidence={"n": len(t_s)})  # fmt: skip
    est, lo, hi = tr.slope * HOUR, tr.ci_low * HOUR, tr.ci_high * HOUR
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # no interval, no estimate shown as if it were evidence (the slope is in evidence)
        return stress_verdict(name, "leak", "Theil-Sen slope of memory after the warm-up", "B/h", None,
                       None, None, th.warn_bytes_per_h, th.fail_bytes_per_h, Status.NA,
                       RULE, note=f"too few samples after the warm-up ({tr.n_fit}; an interval needs "
                       f"{MIN_TREND_POINTS})" if tr.n_fit < MIN_TREND_POINTS else
                       "the slope per hour is out of range (values near the float limit)",
                       evidence={"n": tr.n, "n_fit": tr.n_fit, "warmup_end_s": tr.start_s,
                                 "slope_without_interval": est if math.isfinite(est) else None})  # fmt: skip
    verdict, rule = judge(est, lo, hi, th.warn_bytes_per_h, th.fail_bytes_per_h)
    last = float(np.asarray(bytes_, dtype=float)[-1])
    tte = tte_lo = None
    if total_bytes and est > 0:
        tte = max(0.0, total_bytes - last) / est
    if total_bytes and hi > 0:
        tte_lo = max(0.0, total_bytes - last) / hi  # the pessimistic end
    if total_bytes and lo > 0 and (total_bytes - last) / lo < th.horizon_h:
        verdict = Status.FAIL
    fit_span_h = (tr.duration_s - tr.start_s) / HOUR
    if lo * fit_span_h < th.min_growth_bytes:
        # too little growth to call a leak, but a short span's steep slope is no pass
        # either: 0.9 MiB in a minute is 54 MiB/h (a pass never contradicts its estimate)
        verdict = Status.INCONCLUSIVE if est > th.fail_bytes_per_h else Status.PASS
    rule += (
        f"; fail if memory runs out within {th.horizon_h:g} h even at the interval's low end;"
        f" pass while the growth at the low end is under {th.min_growth_bytes / 2**20:g} MiB,"
        " inconclusive if the estimate then lies above the fail threshold"
    )
    return stress_verdict(
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
        return stress_verdict(name, "drift", stat, unit, None, None, None, warn, fail, Status.NA,
                       RULE, note="too few windows (need 4)", evidence={"n": int(v.size)})  # fmt: skip
    level = float(np.median(v))
    scale = (100.0 / level if level else math.nan) if relative else 100.0
    a, b = sign * tr.ci_low * HOUR * scale, sign * tr.ci_high * HOUR * scale
    est, lo, hi = sign * tr.slope * HOUR * scale, min(a, b), max(a, b)
    if not (math.isfinite(tr.ci_low) and math.isfinite(tr.ci_high)):
        return stress_verdict(name, "drift", stat, unit, None, None, None, warn, fail, Status.NA,
                       RULE, note=f"too few windows ({tr.n}; an interval needs {MIN_TREND_POINTS})",
                       evidence={"n": tr.n, "slope_without_interval":
                                 est if math.isfinite(est) else None})  # fmt: skip
    if not all(map(math.isfinite, (est, lo, hi))):
        return stress_verdict(name, "drift", stat, unit, None, None, None, warn, fail, Status.NA,
                       RULE, note="the series' median is 0: no relative drift" if level == 0 else
                       "the slope per hour is out of range (values near the float limit)",
                       evidence={"n": tr.n})  # fmt: skip
    verdict, rule = judge(est, lo, hi, warn, fail)
    return stress_verdict(
        name, "drift", stat, unit, est, lo, hi, warn, fail, verdict, rule,
        evidence={"n": tr.n, "duration_s": tr.duration_s, "median": level,
                  "mann_kendall_p": tr.p_value, "ar1_rho": tr.ar1_rho},
    )  # fmt: skip


# -- interference and jitter --------------------------------------------------------
class PctEstimate(TypedDict, total=False):
    """A % estimate with its 95 % interval (all None and a ``note`` when there is none);
    ``windows``: how many windows a jitter was read from."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    note: str
    windows: int


def change_pct(before: np.ndarray, after: np.ndarray, q: float) -> PctEstimate:
    """% change of percentile q (after against before) with its 95 % interval
    (:func:`accelbench.metrics.stats.quantile_ratio_ci`); no interval below
    :func:`~accelbench.metrics.stats.min_samples` requests a side."""
    need = min_samples(q)
    out: PctEstimate = {"estimate": None, "ci_low": None, "ci_high": None}
    b, a = (np.asarray(x, dtype=float) for x in (before, after))
    b, a = b[np.isfinite(b)], a[np.isfinite(a)]
    r = quantile_ratio_ci(b, a, q) if min(b.size, a.size) >= need else None
    if r is None or not np.all(np.isfinite(r)):
        out["note"] = f"too few requests (p{q:g} needs {need} a side)"
        return out
    est, lo, hi = (100.0 * (float(x) - 1.0) for x in r)
    return {"estimate": est, "ci_low": lo, "ci_high": hi}


def jitter_pct(windows: np.ndarray) -> PctEstimate:
    """Coefficient of variation (%) of per-window values with its 95 % interval
    (:func:`accelbench.metrics.stats.cv_ci`); no interval below MIN_CV_SAMPLES windows,
    where none covers."""
    w = np.asarray(windows, dtype=float)
    out: PctEstimate = {"estimate": None, "ci_low": None, "ci_high": None,
                        "windows": int(w.size)}  # fmt: skip
    if w.size < MIN_CV_SAMPLES:
        out["note"] = f"too few windows ({w.size}; an interval needs {MIN_CV_SAMPLES})"
        return out
    if not np.all(np.isfinite(w)):
        out["note"] = f"no interval: {int(np.sum(~np.isfinite(w)))} windows' values not finite"
        return out
    k, lo, hi = (float(x) for x in cv_ci(w))
    if not all(map(math.isfinite, (k, lo, hi))):
        out["note"] = "no interval: the windows' mean is not positive"
        return out
    return {**out, "estimate": 100.0 * k, "ci_low": 100.0 * lo, "ci_high": 100.0 * hi}


# -- consistency ----------------------------------------------------------------------
class TokenComparison(TypedDict):
    identical: bool
    first_diff: int | None
    similarity: float


def compare_tokens(a: Sequence[Any], b: Sequence[Any]) -> TokenComparison:
    """Identical?, the position of the first differing token (None when identical) and
    difflib's similarity ratio (2 x matches / total length)."""
    if list(a) == list(b):
        return {"identical": True, "first_diff": None, "similarity": 1.0}
    first = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    ratio = difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).ratio()
    return {"identical": False, "first_diff": first, "similarity": ratio}
