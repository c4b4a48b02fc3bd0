"""Health rules over telemetry samples and over deltas from a baseline.

:func:`evaluate` takes schema rows (see :mod:`accelbench.telemetry.schema`) and returns a
:class:`Health`: ``{"verdict": "pass"|"warn"|"fail", "findings": [...]}``. Each
:class:`Finding` has ``rule``, ``severity`` (``info``, ``warn``, ``fail``), ``device``,
``message`` and the numbers behind it. The verdict is the worst severity found (``info``
does not count), a value of the one status vocabulary
(:class:`accelbench.metrics.verdict.Status`).
The rules read each device's rows as numpy columns (:mod:`accelbench.health.series`),
which the monitor keeps between ticks (:mod:`accelbench.health.window`);
:func:`mark_unknown` turns a verdict into ``unknown`` for what could not be judged.

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
- ``memory_growth``: GPU memory or server RSS that keeps growing: a slope whose confidence
  interval is above zero over the window AND over its last half (after warm-up), the last
  half's rate amounting to at least ``growth_min_bytes`` and ``growth_min_fraction`` of the
  level over the window -> warn (info over windows shorter than
  ``growth_warn_min_duration_s``: a short run cannot tell a leak from warm-up). Growth
  over the window that stopped in its last half (caches, KV blocks and allocator pools
  filling, then a plateau; a step, then flat) is info: "levelled off".
- ``power``: power above the enforced limit by more than ``power_tolerance`` in more than
  ``power_over_fraction`` of the samples -> warn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal, Required, TypedDict, Unpack

import numpy as np

from accelbench.health.series import DeviceSeries
from accelbench.metrics.stats import TrendJSON, linear_trend
from accelbench.metrics.verdict import Status, worst
from accelbench.telemetry.schema import KIND_GPU, KIND_HOST, Row, device_key

Severity = Literal["info", "warn", "fail"]
# A finding's severity as a rank (a floor such as recovery's --min-severity compares them).
SEVERITY_ORDER = {"pass": 0, "info": 0, "warn": 1, "fail": 2}


class FindingData(TypedDict, total=False):
    """The numbers behind a finding (each rule sets its own)."""

    peak_c: float
    limit_c: float
    fraction: float
    reasons: list[str]
    delta: float
    width: float
    width_max: float
    gen: float
    gen_max: float
    peak_w: float
    limit_w: float
    metric: str  # memory_growth: the column
    trend: TrendJSON  # memory_growth: the rate judged, and the window's own trend
    window_trend: TrendJSON


class Finding(FindingData, total=False):
    """One finding of one rule on one device."""

    rule: Required[str]
    severity: Required[Severity]
    device: Required[str]
    message: Required[str]


class Health(TypedDict, total=False):
    """The health verdict (summary.json ``health``, the monitor's ticks, ``accelbench
    health``): ``verdict`` is a :class:`~accelbench.metrics.verdict.Status` value (pass,
    warn, fail; unknown with ``unknown`` listing why)."""

    verdict: Required[str]
    findings: Required[list[Finding]]
    unknown: list[str]
    sources: dict[str, str]  # the monitor: each source's state in the latest tick


# Signals without which a GPU cannot be called healthy: (what, any of these columns).
REQUIRED_SIGNALS: list[tuple[str, tuple[str, ...]]] = [
    ("temperature", ("temp_gpu_c", "temp_hotspot_c")),
    (
        "memory errors (ECC / row remapping)",
        (
            "ecc_uncorrected_volatile",
            "ecc_uncorrected_aggregate",
            "remapped_rows_unc",
            "remapped_rows_failure",
        ),
    ),
]


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

    def validate(self) -> None:
        """The options a user sets (``--temp-margin``); the rest are constants."""
        from accelbench import validate as v

        v.number("--temp-margin", self.temp_margin_c, 0, 100, unit="C")

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _finding(
    rule: str, severity: Severity, device: str, message: str, **data: Unpack[FindingData]
) -> Finding:
    return Finding(rule=rule, severity=severity, device=device, message=message, **data)


def device_label(r: Row) -> str:
    """How findings name the device of row ``r``."""
    if r.get("kind") == KIND_GPU:
        ident = r.get("bus_id") or r.get("uuid") or f"#{r.get('device_index')}"
        return f"{r.get('vendor')} GPU {r.get('device_index')} ({r.get('model') or '?'}, {ident})"
    if r.get("kind") == KIND_HOST:
        return "host"
    return f"server ({r.get('engine')})"


def _window_rows(rows: list[Row], window: tuple[int, int] | None) -> list[Row]:
    if window is None:
        return rows
    lo, hi = window
    return [r for r in rows if (t := r.get("t_ns")) is not None and lo <= t <= hi]


def group_by_device(rows: list[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(device_key(r), []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r.get("t_ns") or 0)
    return groups


def _last(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[-1])


def _gpu_rules(dev: str, s: DeviceSeries, base: Row | None, cfg: HealthConfig) -> list[Finding]:
    out: list[Finding] = []
    last = s.rows[-1]

    # Temperature against the slowdown threshold.
    for col, limit_col, what in (
        ("temp_gpu_c", "temp_slowdown_c", "GPU"),
        ("temp_hotspot_c", "temp_slowdown_c", "hotspot"),
        ("temp_mem_c", "temp_mem_max_c", "memory"),
    ):
        if not s.any(col) or not s.any(limit_col):
            continue
        peak = s.value(int(np.nanargmax(s.col(col))), col)
        limit = s.value(int(np.nanargmin(s.col(limit_col))), limit_col)
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
    span = s.span_s()
    d_power = s.delta("throttle_power_s", base)
    d_therm = s.delta("throttle_thermal_s", base)
    fraction = None
    how = None
    if span > 0 and (d_power is not None or d_therm is not None):
        held = max(d_power or 0.0, 0.0) + max(d_therm or 0.0, 0.0)
        fraction = min(held / span, 1.0)
        how = "violation counters"
    else:
        reasons = s.col("throttle_reasons")
        n = int(np.count_nonzero(~np.isnan(reasons)))
        if n:
            fraction = int(np.count_nonzero(reasons == 1.0)) / n
            how = "sampled reasons"
    if fraction is not None and fraction > cfg.throttle_max_fraction:
        active = sorted(s.reasons)
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
        d = s.delta(col, base)
        if d is not None and d > 0:
            out.append(
                _finding("ecc", "fail", dev, f"{int(d)} new {col.replace('_', ' ')}", delta=d)
            )
    for col in ("ecc_corrected_volatile", "ecc_corrected_aggregate"):
        d = s.delta(col, base)
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
    d = s.delta("ecc_deferred", base)
    if d is not None and d > 0:
        out.append(_finding("ecc", "warn", dev, f"{int(d)} new deferred ECC errors", delta=d))
    if last.get("remapped_rows_failure"):
        out.append(_finding("ecc", "fail", dev, "row remapping failed: the GPU needs service"))
    elif last.get("remapped_rows_pending"):
        out.append(_finding("ecc", "warn", dev, "a row remap is pending: reset the GPU"))

    # PCIe link.
    width, width_max = s.col("pcie_width"), s.col("pcie_width_max")
    both = s.has("pcie_width") & s.has("pcie_width_max")
    if both.any() and bool(np.all(width[both] < width_max[both])):
        i = _last(both)
        w, m = s.value(i, "pcie_width"), s.value(i, "pcie_width_max")
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
    gen, gen_max = s.col("pcie_gen"), s.col("pcie_gen_max")
    gens = s.has("pcie_gen") & s.has("pcie_gen_max")
    if gens.any():
        busy = gens & (s.col("util_gpu") >= cfg.pcie_busy_util)  # NaN compares False
        if busy.any():
            if bool(np.all(gen[busy] < gen_max[busy])):
                i = _last(busy)
                g, m = s.value(i, "pcie_gen"), s.value(i, "pcie_gen_max")
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
        elif bool(np.all(gen[gens] < gen_max[gens])):
            i = _last(gens)
            g, m = s.value(i, "pcie_gen"), s.value(i, "pcie_gen_max")
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
    d = s.delta("pcie_replay", base)
    if d is not None and d >= cfg.pcie_replay_burst:
        out.append(_finding("pcie", "warn", dev, f"{int(d)} new PCIe replays", delta=d))

    # Interconnect.
    d = s.delta("nvlink_errors", base)
    if d is not None and d > 0:
        out.append(_finding("interconnect", "warn", dev, f"{int(d)} new NVLink errors", delta=d))
    if last.get("xgmi_errors"):
        out.append(_finding("interconnect", "warn", dev, "XGMI error status is set"))

    # Power above the limit (a limit of 0 means none).
    power, power_limit = s.col("power_w"), s.col("power_limit_w")
    pairs = s.has("power_w") & s.has("power_limit_w") & (power_limit != 0)
    n_pairs = int(np.count_nonzero(pairs))
    if n_pairs:
        over = pairs & (power > power_limit * (1 + cfg.power_tolerance))
        n_over = int(np.count_nonzero(over))
        if n_over / n_pairs > cfg.power_over_fraction:
            peak_w = s.value(int(np.argmax(np.where(over, power, -np.inf))), "power_w")
            limit_w = s.value(int(np.flatnonzero(pairs)[0]), "power_limit_w")
            out.append(
                _finding(
                    "power",
                    "warn",
                    dev,
                    f"power above the limit ({peak_w:.0f} W > {limit_w:.0f} W) in "
                    f"{n_over}/{n_pairs} samples",
                    peak_w=peak_w,
                    limit_w=limit_w,
                )
            )

    out.extend(_growth(dev, s, "mem_used_bytes", "GPU memory", cfg))
    return out


def _late_half(t_s: np.ndarray) -> np.ndarray:
    """The samples of the last half of the window in time: what is left after warm-up."""
    return t_s >= t_s.min() + (t_s.max() - t_s.min()) / 2


def _growth(dev: str, s: DeviceSeries, col: str, what: str, cfg: HealthConfig) -> list[Finding]:
    """Memory that keeps growing (a leak) against memory that grew and levelled off (warm-up:
    caches and pools filling). The window's trend finds growth; the trend over its last half
    says whether it goes on. A leak is a rate: over the last half it is the same as over the
    whole window, and the growth it amounts to over the window is judged against the
    thresholds. A plateau or a step has a last-half slope near 0."""
    ok = s.has(col) & s.t_ok
    if int(np.count_nonzero(ok)) < cfg.growth_min_points:
        return []
    y = s.col(col)[ok]
    t_s = s.t_ns[ok] / 1e9
    trend = linear_trend(t_s, y, cfg.growth_confidence)
    if trend is None:
        return []
    level = float(np.max(np.abs(y))) or 1.0

    def big(growth: float) -> bool:
        return growth >= cfg.growth_min_bytes and growth / level >= cfg.growth_min_fraction

    if not (trend.ci_low > 0 and big(trend.growth)):
        return []
    late_ok = _late_half(t_s)
    late = linear_trend(t_s[late_ok], y[late_ok], cfg.growth_confidence)
    mib = 1024**2
    if late is None:
        going_on = True  # too few samples there to say it stopped
    elif math.isfinite(late.ci_low):
        going_on = late.ci_low > 0 and big(late.slope * trend.duration_s)
    else:
        # too few samples in the last half for an interval (metrics.stats.MIN_TREND_POINTS):
        # the alarm rests on the window's interval; the last half's estimate only tells a
        # leak (the same rate, about) from a plateau (about none)
        going_on = late.slope >= trend.slope / 2 and big(late.slope * trend.duration_s)
    if going_on or late is None:
        # still growing in the last half
        if late is not None and math.isfinite(late.ci_low):
            rate, span = late, f"over the last {late.duration_s:.0f} s of {trend.duration_s:.0f} s"
        else:  # the window's interval, the last half's rate about the same
            rate, span = trend, f"over {trend.duration_s:.0f} s, its last half too"
        short = trend.duration_s < cfg.growth_warn_min_duration_s
        return [
            _finding(
                "memory_growth",
                "info" if short else "warn",
                dev,
                f"{what} grows {rate.slope * 60 / mib:.1f} MiB/min ({rate.confidence:.0%} CI "
                f"{rate.ci_low * 60 / mib:.1f} to {rate.ci_high * 60 / mib:.1f}) {span}, "
                f"not levelling off: +{trend.growth / mib:.0f} MiB"
                + (" (too short a window to tell a leak from warm-up)" if short else ""),
                metric=col,
                trend=rate.to_dict(),
                window_trend=trend.to_dict(),
            )
        ]
    return [
        _finding(
            "memory_growth",
            "info",
            dev,
            f"{what} grew +{trend.growth / mib:.0f} MiB over {trend.duration_s:.0f} s, then "
            f"levelled off (last {late.duration_s:.0f} s: {late.slope * 60 / mib:.1f} MiB/min"
            + (
                f", {late.confidence:.0%} CI {late.ci_low * 60 / mib:.1f} to "
                f"{late.ci_high * 60 / mib:.1f}"
                if math.isfinite(late.ci_low)
                else ""
            )
            + "): warm-up, not a leak",
            metric=col,
            trend=late.to_dict(),
            window_trend=trend.to_dict(),
        )
    ]


def evaluate_series(
    series: Iterable[DeviceSeries],
    base_by_dev: dict[str, Row],
    config: HealthConfig,
) -> Health:
    """Apply every rule to each device's series; ``base_by_dev`` maps a device key to its
    baseline row (the start of counter deltas)."""
    findings: list[Finding] = []
    for s in series:
        first = s.rows[0]
        kind = first.get("kind")
        if kind == KIND_GPU:
            base = base_by_dev.get(device_key(first))
            findings.extend(_gpu_rules(device_label(first), s, base, config))
        elif kind == KIND_HOST:
            findings.extend(_growth(device_label(first), s, "proc_rss_bytes", "server RSS", config))
    found = [Status(f["severity"]) for f in findings if f["severity"] != "info"]
    return {"verdict": str(worst([Status.PASS, *found])), "findings": findings}


def baseline_by_device(baseline: list[Row] | None) -> dict[str, Row]:
    """The last baseline row of each device."""
    return {dev: brows[-1] for dev, brows in group_by_device(baseline or []).items()}


def evaluate(
    rows: list[Row],
    window: tuple[int, int] | None = None,
    baseline: list[Row] | None = None,
    config: HealthConfig | None = None,
) -> Health:
    """Apply every rule. ``window`` (start_ns, end_ns) limits the samples considered;
    ``baseline`` rows (e.g. from before the run) give the starting point of counter
    deltas; without one, the first sample in the window is the baseline."""
    cfg = config or HealthConfig()
    selected = _window_rows(rows, window)
    if window is not None and not selected:
        selected = rows  # a window shorter than one interval: use everything
    series = (DeviceSeries.from_rows(g) for g in group_by_device(selected).values())
    return evaluate_series(series, baseline_by_device(baseline), cfg)


def missing_signals(rows: list[Row]) -> list[str]:
    """One line per GPU and required signal (:data:`REQUIRED_SIGNALS`) that no row of
    that GPU carries."""
    return series_missing_signals(DeviceSeries.from_rows(g) for g in group_by_device(rows).values())


def series_missing_signals(series: Iterable[DeviceSeries]) -> list[str]:
    """:func:`missing_signals` over devices already held as series (the monitor's)."""
    out = []
    for s in series:
        first = s.rows[0]
        if first.get("kind") != KIND_GPU:
            continue
        for what, cols in REQUIRED_SIGNALS:
            if not any(s.any(c) for c in cols):
                out.append(f"{device_label(first)}: no {what} reported")
    return out


def lost_reasons(lost: list[str]) -> list[str]:
    """The unknown reasons for what a capture lost (``Capture.lost``): one
    ``data lost: ...`` line each, as ``health --file`` and ``monitor --replay`` print."""
    return [f"data lost: {x}" for x in lost]


def mark_unknown(health: Health, reasons: list[str]) -> Health:
    """Unknown is never healthy: with any reason the rules could not judge (no samples,
    lost data, a silent source, a GPU without a required signal) the verdict becomes
    ``unknown`` unless a rule failed. ``health["unknown"]`` lists the reasons."""
    health["unknown"] = list(reasons)
    if reasons:
        health["verdict"] = str(worst([Status(health["verdict"]), Status.UNKNOWN]))
    return health
