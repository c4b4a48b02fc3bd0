"""Energy over a time window: from energy counters where present, else by integrating
power (trapezoids), summed over GPUs."""

from __future__ import annotations

import math

from accelbench.metrics.summary import DeviceEnergy, EnergySection
from accelbench.telemetry.schema import KIND_GPU, Row, device_key


def _interp(points: list[tuple[int, float]], t: int) -> float:
    """Linear interpolation of a time series at ``t`` (clamped to its ends)."""
    if t <= points[0][0]:
        return points[0][1]
    if t >= points[-1][0]:
        return points[-1][1]
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        if t0 <= t <= t1:
            if t1 == t0:
                return v1
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def counter_energy(points: list[tuple[int, float]], start_ns: int, end_ns: int) -> float | None:
    """Joules from a monotonic energy counter over [start, end]; None if it went backwards
    (driver reload / wrap) or there are fewer than two samples."""
    if len(points) < 2:
        return None
    if any(b[1] < a[1] for a, b in zip(points, points[1:], strict=False)):
        return None
    return _interp(points, end_ns) - _interp(points, start_ns)


def integrate_power(points: list[tuple[int, float]], start_ns: int, end_ns: int) -> float | None:
    """Joules from power samples (W) over [start, end], trapezoid rule; the series is
    held constant beyond its ends. None with no samples."""
    if not points or end_ns <= start_ns:
        return None if not points else 0.0
    inner = [(t, p) for t, p in points if start_ns < t < end_ns]
    series = [(start_ns, _interp(points, start_ns)), *inner, (end_ns, _interp(points, end_ns))]
    joules = 0.0
    for (t0, p0), (t1, p1) in zip(series, series[1:], strict=False):
        joules += (p0 + p1) / 2.0 * (t1 - t0) / 1e9
    return joules


def _uncovered(
    dev: str, points: list[tuple[int, float]], start: int, end: int, tol_ns: float, method: str
) -> str | None:
    """A warning when ``points`` (the series ``method`` read) leave more than ``tol_ns`` of
    [start, end] without a sample at either end: a GPU that vanished mid-run (or appeared
    late), whose energy there is not measured."""
    if not points or end <= start:
        return None
    before = max(points[0][0] - start, 0)
    after = max(end - points[-1][0], 0)
    if before <= tol_ns and after <= tol_ns:
        return None
    done = (
        "its energy counts only the time it was seen"
        if method == "counter"
        else "its power is held at its nearest reading over it"
    )
    return (
        f"{dev}: no samples over {(before + after) / 1e9:.1f} s of the "
        f"{(end - start) / 1e9:.1f} s window (first at +{(points[0][0] - start) / 1e9:.1f} s, "
        f"last at +{(points[-1][0] - start) / 1e9:.1f} s): {done}, so the total is not of "
        "the whole window"
    )


def _gap_tolerance_ns(series: list[list[int]]) -> float:
    """Twice the median interval between samples of one device (pooled over devices): a
    device's first or last sample further than this inside the window is a gap. Infinite
    when no device has two samples (nothing to judge by)."""
    gaps = sorted(b - a for ts in series for a, b in zip(ts, ts[1:], strict=False) if b > a)
    return 2.0 * gaps[len(gaps) // 2] if gaps else math.inf


def window_energy(
    rows: list[Row],
    window_ns: tuple[int, int] | None,
    output_tokens: int | None = None,
    total_tokens: int | None = None,
) -> EnergySection | None:
    """Energy of all GPUs over the window. Returns None when no GPU reported energy or
    power. ``method`` is ``counter`` when every GPU had a usable counter, else
    ``integrated_power`` (at least one GPU was integrated). A GPU whose samples leave
    part of the window unseen (it vanished mid-run) is named in ``warnings``."""
    gpus: dict[str, list[tuple[int, Row]]] = {}  # device -> (t_ns, row)
    for r in rows:
        t = r.get("t_ns")
        if r.get("kind") == KIND_GPU and t is not None:
            gpus.setdefault(device_key(r), []).append((t, r))
    if not gpus:
        return None
    if window_ns is None:
        ts = [t for g in gpus.values() for t, _ in g]
        window_ns = (min(ts), max(ts))
    start, end = window_ns
    total = 0.0
    methods: set[str] = set()
    per_device: dict[str, DeviceEnergy] = {}
    warnings: list[str] = []
    for grows in gpus.values():
        grows.sort(key=lambda tr: tr[0])
    tol_ns = _gap_tolerance_ns([[t for t, _ in g] for g in gpus.values()])
    for dev, grows in gpus.items():
        energy_pts = [(t, float(e)) for t, r in grows if (e := r.get("energy_j")) is not None]
        power_pts = [(t, float(w)) for t, r in grows if (w := r.get("power_w")) is not None]
        j = counter_energy(energy_pts, start, end)
        method = "counter"
        if j is None:
            j = integrate_power(power_pts, start, end)
            method = "integrated_power"
        if j is None:
            continue
        gap = _uncovered(
            dev, energy_pts if method == "counter" else power_pts, start, end, tol_ns, method
        )
        if gap:
            warnings.append(gap)
        total += j
        methods.add(method)
        per_device[dev] = {"joules": j, "method": method}
    if not methods:
        return None
    method = "counter" if methods == {"counter"} else "integrated_power"
    section: EnergySection = {  # J per token over the caller's tokens (docs/METRICS.md)
        "joules": total,
        "method": method,
        "window_s": (end - start) / 1e9,
        "average_w": total / ((end - start) / 1e9) if end > start else None,
        "j_per_output_token": total / output_tokens if output_tokens else None,
        "j_per_total_token": total / total_tokens if total_tokens else None,
        "devices": per_device,
    }
    if warnings:
        section["warnings"] = warnings
    return section
