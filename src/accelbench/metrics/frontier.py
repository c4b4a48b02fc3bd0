"""Throughput-interactivity frontiers (docs/METRICS.md "Sweeps, frontiers, comparisons").

The frontier of a sweep is the set of non-dominated (interactivity, throughput per GPU)
points: no other point has both higher interactivity and higher throughput. Along it,
throughput falls as interactivity rises, and values at a target interactivity are read off a
monotone piecewise-cubic (PCHIP) interpolant through the frontier points, never
extrapolated: outside the measured interactivity range the answer is "out of measured range".

:func:`monotone_interp` is the one shared monotone interpolation helper of the project.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.metrics.protocols import RunLike
from accelbench.metrics.registry import FIGURES, FRONTIER
from accelbench.metrics.values import column_np

# The throughput axes of a frontier: name -> description (accelbench.metrics.registry).
FRONTIER_METRICS = {k: FIGURES[k].description for k in FRONTIER}
OUT_OF_RANGE = "out of measured range"


def monotone_interp(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    xq: float | Sequence[float] | np.ndarray,
) -> np.ndarray:
    """PCHIP interpolation of ``y(x)`` at ``xq``; NaN outside ``[min(x), max(x)]``.

    ``x`` must be strictly increasing after sorting (duplicates raise ValueError). PCHIP
    keeps monotone data monotone and never overshoots the data between knots. One knot:
    defined only at that exact x. Two knots: the straight line between them.
    """
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    q = np.atleast_1d(np.asarray(xq, dtype=float))
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError("x and y must be 1-D and of equal length")
    if xa.size == 0:
        return np.full(q.shape, np.nan)
    order = np.argsort(xa, kind="stable")
    xa, ya = xa[order], ya[order]
    if np.any(np.diff(xa) <= 0):
        raise ValueError("x values must be distinct")
    if xa.size == 1:
        return np.where(q == xa[0], ya[0], np.nan)
    from scipy.interpolate import PchipInterpolator  # lazy: keeps CLI start fast

    out = PchipInterpolator(xa, ya, extrapolate=False)(q)
    # Exact knot hits at the ends are in range (guard against rounding at the edges).
    out = np.where(q == xa[0], ya[0], out)
    out = np.where(q == xa[-1], ya[-1], out)
    return out


def _edge_slope(h0: float, h1: float, m0: float, m1: float) -> float:
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > 3 * abs(m0):
        return 3 * m0
    return d


def pchip_at(x: np.ndarray, y: np.ndarray, t: float) -> float:
    """Scalar PCHIP at ``t`` for strictly increasing ``x`` (NaN outside the range): the same
    interpolant as :func:`monotone_interp` (scipy's PchipInterpolator), without building an
    interpolator object; for the bootstrap's thousands of one-point evaluations."""
    n = x.size
    if n == 0 or not (x[0] <= t <= x[-1]):
        return float("nan")
    if n == 1:
        return float(y[0])
    j = min(max(int(np.searchsorted(x, t, "right")) - 1, 0), n - 2)
    h = np.diff(x)
    m = np.diff(y) / h

    def slope(i: int) -> float:
        if n == 2:
            return float(m[0])
        if i == 0:
            return _edge_slope(h[0], h[1], m[0], m[1])
        if i == n - 1:
            return _edge_slope(h[-1], h[-2], m[-1], m[-2])
        a, b = m[i - 1], m[i]
        if a == 0 or b == 0 or np.sign(a) != np.sign(b):
            return 0.0
        w1, w2 = 2 * h[i] + h[i - 1], h[i] + 2 * h[i - 1]
        return (w1 + w2) / (w1 / a + w2 / b)

    d0, d1 = slope(j), slope(j + 1)
    hj = h[j]
    u = (t - x[j]) / hj
    h00 = (1 + 2 * u) * (1 - u) ** 2
    h10 = u * (1 - u) ** 2
    h01 = u * u * (3 - 2 * u)
    h11 = u * u * (u - 1)
    return float(h00 * y[j] + h10 * hj * d0 + h01 * y[j + 1] + h11 * hj * d1)


def pareto_indices(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (both coordinates: higher is better), ordered by
    ascending x. A point is dominated if another is at least as good in both coordinates
    and better in one. Non-finite points are ignored."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    ok = np.flatnonzero(np.isfinite(xa) & np.isfinite(ya))
    # x descending, ties by y descending: a point survives if it beats every y so far.
    order = ok[np.lexsort((-ya[ok], -xa[ok]))]
    keep: list[int] = []
    best = -np.inf
    for i in order:
        if ya[i] > best:
            keep.append(int(i))
            best = ya[i]
    return np.array(keep[::-1], dtype=int)


class FrontierPoint(TypedDict):
    label: str
    interactivity: float
    throughput_per_gpu: float


class FrontierAt(TypedDict):
    target: float
    value: float | None
    reason: str | None


class FrontierJSON(TypedDict):
    """``accelbench frontier --json``: a frontier's points (and its value ``at`` a target)."""

    metric: str
    points: list[FrontierPoint]
    at: NotRequired[FrontierAt]


@dataclass
class FrontierValue:
    target: float
    value: float | None
    reason: str | None = None  # why value is None
    between: tuple[str, str] | None = None  # labels of the bracketing frontier points

    def describe(self, unit: str = "") -> str:
        if self.value is None:
            return f"{self.reason} at {self.target:g} tok/s/user"
        return f"{self.value:,.1f}{unit} at {self.target:g} tok/s/user"


@dataclass
class Frontier:
    """The frontier of one sweep for one throughput metric."""

    metric: str
    x: np.ndarray  # interactivity of frontier points, ascending
    y: np.ndarray  # throughput per GPU of frontier points
    labels: list[str]
    all_x: np.ndarray = field(default_factory=lambda: np.empty(0))
    all_y: np.ndarray = field(default_factory=lambda: np.empty(0))
    all_labels: list[str] = field(default_factory=list)
    name: str = ""

    @property
    def empty(self) -> bool:
        return self.x.size == 0

    @property
    def range(self) -> tuple[float, float] | None:
        return None if self.empty else (float(self.x[0]), float(self.x[-1]))

    def at(self, target: float) -> FrontierValue:
        """Throughput per GPU at ``target`` interactivity (tok/s/user), interpolated."""
        if self.empty:
            return FrontierValue(target, None, "no usable points")
        lo, hi = self.range  # type: ignore[misc]
        if not (lo <= target <= hi):
            span = (
                f"the frontier has one point, at {lo:.3g} tok/s/user"
                if lo == hi
                else f"measured {lo:.3g}-{hi:.3g} tok/s/user"
            )
            return FrontierValue(target, None, f"{OUT_OF_RANGE} ({span})")
        v = float(monotone_interp(self.x, self.y, target)[0])
        j = int(np.searchsorted(self.x, target))
        between = (self.labels[max(j - 1, 0)], self.labels[min(j, self.x.size - 1)])
        return FrontierValue(target, v, None, between)

    def curve(self, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """Points along the interpolant for plotting (the frontier points if fewer than 2)."""
        if self.x.size < 2:
            return self.x.copy(), self.y.copy()
        xs = np.linspace(self.x[0], self.x[-1], n)
        return xs, monotone_interp(self.x, self.y, xs)

    def to_json(self) -> FrontierJSON:
        return {
            "metric": self.metric,
            "points": [
                {"label": lab, "interactivity": float(a), "throughput_per_gpu": float(b)}
                for lab, a, b in zip(self.labels, self.x, self.y, strict=True)
            ],
        }


def frontier_from_points(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    labels: Sequence[str] | None = None,
    metric: str = "output_tps_per_gpu",
    name: str = "",
) -> Frontier:
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    labs = list(labels) if labels is not None else [str(i) for i in range(xa.size)]
    idx = pareto_indices(xa, ya)
    return Frontier(
        metric=metric,
        x=xa[idx],
        y=ya[idx],
        labels=[labs[i] for i in idx],
        all_x=xa,
        all_y=ya,
        all_labels=labs,
        name=name,
    )


def build_frontier(
    runs: Sequence[RunLike], metric: str = "output_tps_per_gpu", name: str = ""
) -> Frontier:
    """The frontier of the usable runs (points without both figures are left out)."""
    if metric not in FRONTIER_METRICS:
        raise ValueError(f"unknown frontier metric {metric!r}")
    xs, ys, labs = [], [], []
    for r in runs:
        a, b = r.figure("interactivity"), r.figure(metric)
        if a is None or b is None:
            continue
        xs.append(a)
        ys.append(b)
        labs.append(r.load_label)
    return frontier_from_points(xs, ys, labs, metric, name)


# why a valid summary has a figure null (summary.json's figures are null where not observed)
_NO_FIGURE = {
    "interactivity": "no interactivity (no request succeeded, or none with two tokens)",
    "output_tps_per_gpu": "no throughput (no request succeeded: no measured window)",
    "total_tps_per_gpu": "no throughput (no request succeeded: no measured window)",
}


def left_off(runs: Sequence[RunLike], figure: str, what: str) -> list[str]:
    """One warning line naming the runs with a summary that have no ``figure`` and why,
    ``left off {what}`` (none where every run has it): what the frontier, the comparisons
    and the cost of a sweep say of a run they leave out for want of a figure (they were
    left out without a word). Runs with no summary are said where read (the set's
    problems)."""
    labels = [r.load_label for r in runs if r.summary and r.figure(figure) is None]
    if not labels:
        return []
    why = _NO_FIGURE.get(figure) or f"no {FIGURES[figure].description}"
    return [f"{', '.join(labels)}: {why}: left off {what}"]


def left_off_frontier(
    runs: Sequence[RunLike], metrics: Sequence[str] = tuple(FRONTIER_METRICS)
) -> list[str]:
    """The warning lines (:func:`left_off`) for the runs with a summary that
    :func:`build_frontier` leaves off the frontiers of ``metrics``, for want of a figure:
    no interactivity (every request failed) leaves a run off every frontier, no
    throughput of a metric off that metric's."""
    lines = left_off(runs, "interactivity", "the frontier")
    rest = [r for r in runs if r.figure("interactivity") is not None]
    for m in metrics:
        lines += left_off(rest, m, f"the {FRONTIER_METRICS[m]} frontier")
    return lines


# ----------------------------------------------------------------------------- goodput


@dataclass
class GoodputPoint:
    label: str
    load: float | None
    requests: int
    good: int
    fraction: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None
    meets: bool


SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def check_goodput_options(slo: dict[str, float], attainment: float) -> None:
    """One clear error for an unknown SLO, an SLO that is not a positive number, or an
    attainment outside (0, 1]."""
    for k, v in slo.items():
        if k not in SLO_KEYS:
            raise AccelbenchError(f"unknown SLO {k!r}: use ttft_ms, tpot_ms or e2e_ms")
        if isinstance(v, bool) or not isinstance(v, int | float) or not (0 < v < math.inf):
            raise AccelbenchError(f"--slo {k} must be a positive number of ms (got {v!r})")
    if isinstance(attainment, bool) or not isinstance(attainment, int | float):
        raise AccelbenchError(f"--attainment must be a number in (0, 1] (got {attainment!r})")
    if not 0 < attainment <= 1:
        raise AccelbenchError(f"--attainment must be in (0, 1] (got {attainment!r})")


def goodput_points(
    runs: Sequence[RunLike], slo: dict[str, float], attainment: float = 0.9
) -> list[GoodputPoint]:
    """Goodput per point: measured requests that completed and met every SLO, per second of
    the run's window. A point "meets" the SLOs when at least ``attainment`` of its measured
    requests (failures count as misses) met them."""
    check_goodput_options(slo, attainment)
    out = []
    for r in runs:
        window = (r.summary or {}).get("window")
        dur = window.get("duration_s") if isinstance(window, dict) else None
        try:
            if not r.has_requests:
                raise AccelbenchError("requests.parquet missing")
            t = r.read_requests(("warmup", "ok", "osl", *slo.keys()))
        except AccelbenchError:  # the report lists the damaged file; no goodput for it
            out.append(GoodputPoint(r.load_label, r.load, 0, 0, None, None, None, False))
            continue
        m = ~column_np(t, "warmup", bool)
        good = column_np(t, "ok", bool) & m
        for k, lim in slo.items():
            v = column_np(t, k)
            good &= np.where(np.isnan(v), k == "tpot_ms", v <= lim)
        n, g = int(m.sum()), int(good.sum())
        frac = g / n if n else None
        osl = column_np(t, "osl")
        out.append(
            GoodputPoint(
                r.load_label,
                r.load,
                n,
                g,
                frac,
                g / dur if dur else None,
                float(np.nansum(osl[good])) / dur if dur else None,
                frac is not None and frac >= attainment,
            )
        )
    return out


def highest_load_meeting(points: Sequence[GoodputPoint]) -> GoodputPoint | None:
    """The point with the highest load that meets the SLOs (None if none does)."""
    ok = [p for p in points if p.meets and p.load is not None]
    return max(ok, key=lambda p: p.load) if ok else None  # type: ignore[arg-type, return-value]
