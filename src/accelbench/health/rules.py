"""Health rules over telemetry samples and over deltas from a baseline.

:func:`evaluate` takes schema rows (see :mod:`accelbench.telemetry.schema`) and returns
``{"verdict": "pass"|"warn"|"fail", "findings": [...]}``. Each finding is a dict with
``rule``, ``severity`` (``info``, ``warn``, ``fail``), ``device``, ``message`` and the
numbers behind it. The verdict is the worst severity found (``info`` does not count).

Rules:
- ``temperature``: GPU/hotspot temperature within ``temp_margin_c`` of the slowdown
  threshold -> warn, at or above it -> fail; memory temperature likewise against its max.
- ``throttle``: clocks held down by power or heat (not idle) for more than
  ``throttle_max_fraction`` of the window -> warn (from violation-time counters when
  present, else from the fraction of samples with an active reason).
- ``ecc``: any new uncorrectable error (volatile or aggregate), a new uncorrectable
  remapped row, a pending or failed row remap -> fail; ``ecc_correctable_burst`` or more
  new corrected errors -> warn.
- ``pcie``: link width below its maximum -> warn; generation below its maximum while the
  GPU was busy (``pcie_busy_util``) -> warn (GPUs drop the link speed when idle, which is
  reported as info); replays growing by ``pcie_replay_burst`` or more -> warn.
- ``interconnect``: NVLink error counters growing, XGMI error status set -> warn.
- ``memory_growth``: GPU memory or server RSS with a slope whose confidence interval is
  above zero and growth over the window of at least ``growth_min_bytes`` and
  ``growth_min_fraction`` of the level -> warn (info over windows shorter than
  ``growth_warn_min_duration_s``: a short run cannot tell a leak from warm-up).
- ``power``: power above the enforced limit by more than ``power_tolerance`` in more than
  ``power_over_fraction`` of the samples -> warn.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from accelbench.health.slope import linear_trend
from accelbench.telemetry.schema import KIND_GPU, KIND_HOST, device_key

SEVERITY_ORDER = {"pass": 0, "info": 0, "warn": 1, "fail": 2}


@dataclass
class HealthConfig:
    temp_margin_c: float = 5.0
    throttle_max_fraction: float = 0.05
    ecc_correctable_burst: int = 100
    pcie_busy_util: float = 0.5
    pcie_replay_burst: int = 100
    growth_min_points: int = 10
    # Growth seen over a shorter window is only "info": caches, KV blocks and allocator
    # pools fill at the start of a run, so a short run cannot tell a leak from warm-up.
    growth_warn_min_duration_s: float = 55.0
    growth_min_bytes: float = 64 * 1024**2
    growth_min_fraction: float = 0.005
    growth_confidence: float = 0.95
    power_tolerance: float = 0.05
    power_over_fraction: float = 0.10

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finding(rule: str, severity: str, device: str, message: str, **data: Any) -> dict[str, Any]:
    return {"rule": rule, "severity": severity, "device": device, "message": message, **data}


def _vals(rows: list[dict[str, Any]], col: str) -> list[Any]:
    return [r[col] for r in rows if r.get(col) is not None]


def _delta(rows: list[dict[str, Any]], col: str, base: dict[str, Any] | None) -> float | None:
    """Last value minus the baseline (or the first value) of a counter column."""
    vals = _vals(rows, col)
    if not vals:
        return None
    start = base[col] if base and base.get(col) is not None else vals[0]
    return float(vals[-1]) - float(start)


def _pairs(rows: list[dict[str, Any]], a: str, b: str) -> list[tuple[float, float]]:
    """(a, b) of every row that has both."""
    return [(r[a], r[b]) for r in rows if r.get(a) is not None and r.get(b) is not None]


def _label(rows: list[dict[str, Any]]) -> str:
    r = rows[0]
    if r.get("kind") == KIND_GPU:
        ident = r.get("bus_id") or r.get("uuid") or f"#{r.get('device_index')}"
        return f"{r.get('vendor')} GPU {r.get('device_index')} ({r.get('model') or '?'}, {ident})"
    if r.get("kind") == KIND_HOST:
        return "host"
    return f"server ({r.get('engine')})"


def _window_rows(
    rows: list[dict[str, Any]], window: tuple[int, int] | None
) -> list[dict[str, Any]]:
    if window is None:
        return rows
    lo, hi = window
    return [r for r in rows if r.get("t_ns") is not None and lo <= r["t_ns"] <= hi]


def group_by_device(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(device_key(r), []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r.get("t_ns") or 0)
    return groups


def _span_s(rows: list[dict[str, Any]]) -> float:
    ts = [r["t_ns"] for r in rows if r.get("t_ns") is not None]
    return (max(ts) - min(ts)) / 1e9 if len(ts) >= 2 else 0.0


def _gpu_rules(
    dev: str, rows: list[dict[str, Any]], base: dict[str, Any] | None, cfg: HealthConfig
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    last = rows[-1]

    # Temperature against the slowdown threshold.
    for col, limit_col, what in (
        ("temp_gpu_c", "temp_slowdown_c", "GPU"),
        ("temp_hotspot_c", "temp_slowdown_c", "hotspot"),
        ("temp_mem_c", "temp_mem_max_c", "memory"),
    ):
        temps = _vals(rows, col)
        limits = _vals(rows, limit_col)
        if not temps or not limits:
            continue
        peak, limit = max(temps), min(limits)
        if peak >= limit:
            out.append(
                _finding(
                    "temperature",
                    "fail",
                    dev,
                    f"{what} temperature {peak:.0f} C reached its limit {limit:.0f} C",
                    peak_c=peak,
                    limit_c=limit,
                )
            )
        elif peak >= limit - cfg.temp_margin_c:
            out.append(
                _finding(
                    "temperature",
                    "warn",
                    dev,
                    f"{what} temperature {peak:.0f} C is within {cfg.temp_margin_c:.0f} C "
                    f"of its limit {limit:.0f} C",
                    peak_c=peak,
                    limit_c=limit,
                )
            )

    # Throttling.
    span = _span_s(rows)
    d_power = _delta(rows, "throttle_power_s", base)
    d_therm = _delta(rows, "throttle_thermal_s", base)
    fraction = None
    how = None
    if span > 0 and (d_power is not None or d_therm is not None):
        held = max(d_power or 0.0, 0.0) + max(d_therm or 0.0, 0.0)
        fraction = min(held / span, 1.0)
        how = "violation counters"
    else:
        reasons = [r.get("throttle_reasons") for r in rows if r.get("throttle_reasons") is not None]
        if reasons:
            fraction = sum(1 for x in reasons if x) / len(reasons)
            how = "sampled reasons"
    if fraction is not None and fraction > cfg.throttle_max_fraction:
        active = sorted(
            {x for r in rows for x in (r.get("throttle_reasons") or "").split(",") if x}
        )
        out.append(
            _finding(
                "throttle",
                "warn",
                dev,
                f"clocks held down {fraction:.0%} of the window ({how}"
                + (f"; reasons: {', '.join(active)}" if active else "")
                + ")",
                fraction=fraction,
                reasons=active,
            )
        )

    # ECC and row remapping.
    for col in ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "remapped_rows_unc"):
        d = _delta(rows, col, base)
        if d is not None and d > 0:
            out.append(
                _finding("ecc", "fail", dev, f"{int(d)} new {col.replace('_', ' ')}", delta=d)
            )
    for col in ("ecc_corrected_volatile", "ecc_corrected_aggregate"):
        d = _delta(rows, col, base)
        if d is not None and d >= cfg.ecc_correctable_burst:
            out.append(
                _finding(
                    "ecc",
                    "warn",
                    dev,
                    f"burst of {int(d)} corrected ECC errors ({col.replace('_', ' ')})",
                    delta=d,
                )
            )
    d = _delta(rows, "ecc_deferred", base)
    if d is not None and d > 0:
        out.append(_finding("ecc", "warn", dev, f"{int(d)} new deferred ECC errors", delta=d))
    if last.get("remapped_rows_failure"):
        out.append(_finding("ecc", "fail", dev, "row remapping failed: the GPU needs service"))
    elif last.get("remapped_rows_pending"):
        out.append(_finding("ecc", "warn", dev, "a row remap is pending: reset the GPU"))

    # PCIe link.
    widths = _pairs(rows, "pcie_width", "pcie_width_max")
    if widths and all(w < m for w, m in widths):
        w, m = widths[-1]
        out.append(
            _finding(
                "pcie",
                "warn",
                dev,
                f"PCIe link width x{w} below its maximum x{m}",
                width=w,
                width_max=m,
            )
        )
    gens = [
        (r["pcie_gen"], r["pcie_gen_max"], r.get("util_gpu"))
        for r in rows
        if r.get("pcie_gen") is not None and r.get("pcie_gen_max") is not None
    ]
    if gens:
        busy = [(g, m) for g, m, u in gens if u is not None and u >= cfg.pcie_busy_util]
        if busy and all(g < m for g, m in busy):
            g, m = busy[-1]
            out.append(
                _finding(
                    "pcie",
                    "warn",
                    dev,
                    f"PCIe gen {g} below its maximum gen {m} under load",
                    gen=g,
                    gen_max=m,
                )
            )
        elif not busy and all(g < m for g, m, _ in gens):
            g, m, _ = gens[-1]
            out.append(
                _finding(
                    "pcie",
                    "info",
                    dev,
                    f"PCIe gen {g} below its maximum gen {m} while idle (normal power saving; "
                    "check again under load)",
                    gen=g,
                    gen_max=m,
                )
            )
    d = _delta(rows, "pcie_replay", base)
    if d is not None and d >= cfg.pcie_replay_burst:
        out.append(_finding("pcie", "warn", dev, f"{int(d)} new PCIe replays", delta=d))

    # Interconnect.
    d = _delta(rows, "nvlink_errors", base)
    if d is not None and d > 0:
        out.append(_finding("interconnect", "warn", dev, f"{int(d)} new NVLink errors", delta=d))
    if last.get("xgmi_errors"):
        out.append(_finding("interconnect", "warn", dev, "XGMI error status is set"))

    # Power above the limit.
    pairs = [(p, lim) for p, lim in _pairs(rows, "power_w", "power_limit_w") if lim]
    if pairs:
        over = [p for p, lim in pairs if p > lim * (1 + cfg.power_tolerance)]
        if len(over) / len(pairs) > cfg.power_over_fraction:
            out.append(
                _finding(
                    "power",
                    "warn",
                    dev,
                    f"power above the limit ({max(over):.0f} W > {pairs[0][1]:.0f} W) in "
                    f"{len(over)}/{len(pairs)} samples",
                    peak_w=max(over),
                    limit_w=pairs[0][1],
                )
            )

    out.extend(_growth(dev, rows, "mem_used_bytes", "GPU memory", cfg))
    return out


def _growth(
    dev: str, rows: list[dict[str, Any]], col: str, what: str, cfg: HealthConfig
) -> list[dict[str, Any]]:
    pts = [
        (r["t_ns"] / 1e9, float(r[col]))
        for r in rows
        if r.get(col) is not None and r.get("t_ns") is not None
    ]
    if len(pts) < cfg.growth_min_points:
        return []
    trend = linear_trend([p[0] for p in pts], [p[1] for p in pts], cfg.growth_confidence)
    if trend is None:
        return []
    level = max(abs(p[1]) for p in pts) or 1.0
    growth = trend.growth
    if (
        trend.ci_low > 0
        and growth >= cfg.growth_min_bytes
        and growth / level >= cfg.growth_min_fraction
    ):
        mib_min = trend.slope * 60 / 1024**2
        lo, hi = trend.ci_low * 60 / 1024**2, trend.ci_high * 60 / 1024**2
        return [
            _finding(
                "memory_growth",
                "warn" if trend.duration_s >= cfg.growth_warn_min_duration_s else "info",
                dev,
                f"{what} grows {mib_min:.1f} MiB/min ({trend.confidence:.0%} CI {lo:.1f} to "
                f"{hi:.1f}) over {trend.duration_s:.0f} s: +{growth / 1024**2:.0f} MiB"
                + (
                    ""
                    if trend.duration_s >= cfg.growth_warn_min_duration_s
                    else " (too short a window to tell a leak from warm-up)"
                ),
                metric=col,
                trend=trend.to_dict(),
            )
        ]
    return []


def evaluate(
    rows: list[dict[str, Any]],
    window: tuple[int, int] | None = None,
    baseline: list[dict[str, Any]] | None = None,
    config: HealthConfig | None = None,
) -> dict[str, Any]:
    """Apply every rule. ``window`` (start_ns, end_ns) limits the samples considered;
    ``baseline`` rows (e.g. from before the run) give the starting point of counter
    deltas; without one, the first sample in the window is the baseline."""
    cfg = config or HealthConfig()
    selected = _window_rows(rows, window)
    if window is not None and not selected:
        selected = rows  # a window shorter than one interval: use everything
    base_by_dev = {}
    for dev, brows in group_by_device(baseline or []).items():
        base_by_dev[dev] = brows[-1]
    findings: list[dict[str, Any]] = []
    for dev, drows in group_by_device(selected).items():
        kind = drows[0].get("kind")
        label = _label(drows)
        if kind == KIND_GPU:
            findings.extend(_gpu_rules(label, drows, base_by_dev.get(dev), cfg))
        elif kind == KIND_HOST:
            findings.extend(_growth(label, drows, "proc_rss_bytes", "server RSS", cfg))
    worst = max((SEVERITY_ORDER[f["severity"]] for f in findings), default=0)
    verdict = {0: "pass", 1: "warn", 2: "fail"}[worst]
    return {"verdict": verdict, "findings": findings}
