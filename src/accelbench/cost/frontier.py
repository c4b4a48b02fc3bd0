"""Throughput-per-GPU against interactivity: the measured frontier and interpolation on it.

Kept small and free of run-directory knowledge so it can move into a shared frontier
module later. Per docs/METRICS.md: the frontier is the set of non-dominated
(interactivity, throughput-per-GPU) points; values at a target interactivity are
interpolated along it with a monotone piecewise-cubic (PCHIP) interpolant and never
extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.metrics.frontier import monotone_interp, pareto_indices


class OutOfMeasuredRange(AccelbenchError):
    """The target lies outside the interactivity range the frontier covers."""


def pareto_frontier(interactivity: Sequence[float], throughput: Sequence[float]) -> list[int]:
    """Indices of the non-dominated points, ordered by increasing interactivity.

    A point is dominated when another has interactivity and throughput both at least
    as high, one of them strictly higher. Of exact duplicates one is kept. Points with
    a non-finite or non-positive coordinate are ignored."""
    x = np.asarray(interactivity, dtype=float)
    y = np.asarray(throughput, dtype=float)
    if x.shape != y.shape:
        raise AccelbenchError("interactivity and throughput must have the same length")
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0))
    # the shared implementation: accelbench.metrics.frontier.pareto_indices
    return [int(ok[i]) for i in pareto_indices(x[ok], y[ok])]


def interpolate_on_frontier(
    interactivity: Sequence[float],
    throughput: Sequence[float],
    target: float,
    others: dict[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """Throughput (and any ``others`` series, same length) at ``target`` interactivity.

    Uses the non-dominated points only; PCHIP through them; raises OutOfMeasuredRange
    when ``target`` lies outside their interactivity range. Returns a dict with
    ``throughput``, ``interactivity`` and one entry per ``others`` key."""
    if not np.isfinite(target) or target <= 0:
        raise AccelbenchError(f"target interactivity must be > 0 tok/s/user (got {target})")
    keep = pareto_frontier(interactivity, throughput)
    if not keep:
        raise AccelbenchError("no valid (interactivity, throughput) points to interpolate")
    x = np.asarray(interactivity, dtype=float)[keep]
    series = {"throughput": np.asarray(throughput, dtype=float)[keep]}
    for name, values in (others or {}).items():
        arr = np.asarray(values, dtype=float)
        if arr.shape[0] != len(interactivity):
            raise AccelbenchError(f"series {name!r} has the wrong length")
        series[name] = arr[keep]
    lo, hi = float(x[0]), float(x[-1])
    if not lo <= target <= hi:
        raise OutOfMeasuredRange(
            f"interactivity {target:g} tok/s/user is out of measured range "
            f"[{lo:.4g}, {hi:.4g}] on the frontier"
        )
    out: dict[str, float] = {"interactivity": float(target)}
    for name, values in series.items():
        if len(x) == 1:
            out[name] = float(values[0])
        elif not np.all(np.isfinite(values)):
            out[name] = float("nan")
        else:
            out[name] = float(monotone_interp(x, values, target)[0])
    return out
