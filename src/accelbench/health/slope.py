"""Trend (leak) detection: a least-squares slope with a confidence interval that allows
for correlated residuals (consecutive samples of memory or latency are)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from accelbench.metrics.stats import MIN_TREND_POINTS, ar1_inflation, ar1_rho


@dataclass(frozen=True)
class Trend:
    """y = intercept + slope * t, with t in seconds."""

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

    def to_dict(self) -> dict[str, Any]:
        """As JSON has it: an interval too few points have (NaN) is null."""
        d = asdict(self)
        d["growth"] = self.growth
        return {k: None if isinstance(x, float) and not math.isfinite(x) else x
                for k, x in d.items()}  # fmt: skip


def linear_trend(t_s: Any, y: Any, confidence: float = 0.95) -> Trend | None:
    """Ordinary least squares of ``y`` on ``t_s`` with a two-sided t-interval on the slope.

    Returns None with fewer than 3 finite points or no spread in time. The residuals'
    lag-1 autocorrelation rho (bias-corrected, :func:`accelbench.metrics.stats.ar1_rho`)
    widens the standard error by sqrt((1 + rho) / (1 - rho)) and the t has
    ``n (1 - rho) / (1 + rho) - 2`` degrees of freedom (an AR(1)-adjusted effective
    sample size): independent-residual intervals covered 75 % of AR(1) phi = 0.5
    series. Below :data:`~accelbench.metrics.stats.MIN_TREND_POINTS` points no method
    covers: the interval is NaN (never above zero: no alarm).
    """
    t = np.asarray(t_s, dtype=float)
    v = np.asarray(y, dtype=float)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    n = int(t.size)
    if n < 3 or np.ptp(t) == 0:
        return None
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
        slope=slope,
        ci_low=slope - tcrit * se,
        ci_high=slope + tcrit * se,
        intercept=intercept,
        n=n,
        duration_s=float(np.ptp(t)),
        r2=r2,
        confidence=confidence,
        ar1_rho=rho,
        n_eff=n_eff,
    )


@lru_cache(maxsize=256)
def _t_critical(confidence: float, dof: float) -> float:
    """Two-sided Student-t critical value (cached: the monitor asks for the same few)."""
    from scipy import stats  # imported here: scipy.stats costs the CLI ~0.3 s at start

    return float(stats.t.ppf(0.5 + confidence / 2.0, dof))
