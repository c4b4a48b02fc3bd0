"""Prometheus alerting and recording rules equivalent to accelbench's health rules.

The thresholds are read from :class:`accelbench.health.rules.HealthConfig` (the object the
health rules use), so a changed default changes both. Three metric vocabularies
("flavours") are supported:

- ``accelbench``: accelbench's own exporter (``accelbench monitor``), see
  :mod:`accelbench.telemetry.exporter`;
- ``dcgm``: NVIDIA dcgm-exporter (``DCGM_FI_*``; fields outside its default counters CSV
  are named in :data:`DCGM_EXTRA_COUNTERS`: add them to the exporter's CSV);
- ``amd``: AMD's ROCm device-metrics-exporter (lower-case ``gpu_*`` / ``pcie_*`` names,
  label ``gpu_id``).

Where a vocabulary has no metric for a rule (the AMD exporter has no PCIe link width, no
retired pages and no temperature limit) the rule is left out and listed in the group's
``# not covered`` note returned by :func:`coverage`.

Unknown is never healthy: each flavour has a ``no_data`` alert for series that were there
within ``no_data_lookback_s`` and are gone now (an exporter or GPU that stopped
reporting; ``present_over_time(x[1h]) unless x``, which, unlike ``absent()``, names the
instance and stays quiet for exporters a site does not run), and the accelbench flavour an
``unknown`` alert on ``accelbench_health_verdict{verdict="unknown"}`` (the monitor could not
judge: no samples, a silent source, a GPU without temperature or ECC counters). Both hold
for ``no_data_for_s`` before firing.

Rules over a window use ``window_s`` (the monitor's ``--window``). The health rules'
linear-trend confidence interval has no PromQL counterpart: memory growth uses
``deriv()`` (the same least-squares slope) with the same size thresholds, and ``for``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import yaml

from accelbench.errors import UsageError
from accelbench.health.rules import HealthConfig
from accelbench.telemetry.parsers import SERVER_METRICS

FLAVOURS = ("accelbench", "dcgm", "amd")
DEFAULT_WINDOW_S = 300.0  # also the default of ``accelbench monitor --window``

# Fields the dcgm rules use that dcgm-exporter's default counters CSV leaves out (real DCGM
# field names; add them to the CSV passed with -f / --collectors).
DCGM_EXTRA_COUNTERS = (
    "DCGM_FI_DEV_SLOWDOWN_TEMP",
    "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_RETIRED_PENDING",
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "DCGM_FI_DEV_PCIE_LINK_GEN",
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN",
    "DCGM_FI_DEV_PCIE_LINK_WIDTH",
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
)

SEVERITY = {"warn": "warning", "fail": "critical"}


@dataclass
class AlertSettings:
    """What the generated rules need beyond :class:`HealthConfig`.

    ``queue_waiting_max`` and ``error_rate_max`` have no health-rule counterpart (the
    health rules judge devices, not the serving engine), so they are defined here, once.
    """

    health: HealthConfig = field(default_factory=HealthConfig)
    window_s: float = DEFAULT_WINDOW_S
    for_s: float = 60.0
    queue_waiting_max: float = 32.0
    error_rate_max: float = 0.01
    # The AMD exporter publishes no temperature limit; give one to alert on temperature.
    amd_temp_limit_c: float | None = None
    amd_prefix: str = ""  # device-metrics-exporter can prefix every name (e.g. "amd_")
    no_data_for_s: float = 300.0  # unknown / no data this long before the alert fires
    no_data_lookback_s: float = 3600.0  # series seen this recently and gone now: no data

    def validate(self) -> None:
        from accelbench import validate as v

        self.health.validate()
        day = 86400.0
        # Prometheus durations are whole milliseconds: a range below 1 ms would be "[0s]"
        v.number("--window", self.window_s, 0.001, 30 * day, unit="s")
        v.number("--for", self.for_s, 0, 30 * day, unit="s")
        v.number("--queue-max", self.queue_waiting_max, 0, 1e9)
        v.number("--error-rate-max", self.error_rate_max, 0, 1)
        v.optional_number("--amd-temp-limit", self.amd_temp_limit_c, 0, 200, lo_open=True, unit="C")
        v.number("--no-data-for", self.no_data_for_s, 0, 30 * day, unit="s")
        for name, x in (("--for", self.for_s), ("--no-data-for", self.no_data_for_s)):
            if 0 < x < 0.001:  # "0s": the alert would fire at once, the value lost
                raise UsageError(
                    f"{name} {x!r} s is below 1 ms, the resolution of a Prometheus "
                    "duration: give 0 or at least 0.001"
                )
        # the prefix goes into PromQL as part of metric names (and a name regex): only
        # metric-name characters, so it can never be PromQL or regex syntax
        v.prom_name("--amd-prefix", self.amd_prefix, empty=True)
        if not self.no_data_lookback_s > self.no_data_for_s:
            raise UsageError(
                f"no-data lookback ({self.no_data_lookback_s} s) must be longer than "
                f"--no-data-for ({self.no_data_for_s} s)"
            )


def duration(seconds: float) -> str:
    """Seconds as a Prometheus duration (``90`` -> ``"90s"``, ``0.5`` -> ``"500ms"``)."""
    ms = int(round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


# A Prometheus alerting rule ("for" is a Python keyword: the functional form).
AlertRule = TypedDict(
    "AlertRule",
    {
        "alert": str,
        "expr": str,
        "for": str,
        "labels": dict[str, str],
        "annotations": dict[str, str],
    },
)


class RecordRule(TypedDict):
    """A Prometheus recording rule (``labels``: the exporter it reads)."""

    record: str
    expr: str
    labels: NotRequired[dict[str, str]]


class RuleGroup(TypedDict):
    name: str
    rules: list[AlertRule] | list[RecordRule]


class RuleFile(TypedDict):
    """A Prometheus rule file, as ``accelbench monitor rules`` writes it (YAML)."""

    groups: list[RuleGroup]


Rules = tuple[list[AlertRule], list[RecordRule]]


def _alert(
    name: str,
    expr: str,
    rule: str,
    severity: str,
    summary: str,
    for_s: float,
) -> AlertRule:
    return {
        "alert": name,
        "expr": expr,
        "for": duration(for_s),
        "labels": {"severity": SEVERITY[severity], "accelbench_rule": rule},
        "annotations": {"summary": summary},
    }


def _no_data(name: str, series: str, who: str, s: AlertSettings) -> AlertRule:
    """``series`` was reported within the lookback and is not now (see module docstring)."""
    return _alert(
        name,
        f"present_over_time({series}[{duration(s.no_data_lookback_s)}]) unless {series}",
        "no_data",
        "warn",
        f"{who} stopped reporting: no data, so health is unknown",
        s.no_data_for_s,
    )


def _gpu_label(expr: str, src_label: str) -> str:
    """Copy the flavour's device label into a common ``gpu`` label."""
    if src_label == "gpu":
        return expr
    return f'label_replace({expr}, "gpu", "$1", "{src_label}", "(.*)")'


def _growth(series: str, w: str, cfg: HealthConfig, window_s: float, scale: str = "") -> str:
    """Growth over the window (least-squares slope x window) at least ``growth_min_bytes``
    and ``growth_min_fraction`` of the peak level; ``scale`` converts the series to bytes."""
    k = f" * {scale}" if scale else ""
    grow = f"deriv({series}[{w}]){k} * {_num(window_s)}"
    return (
        f"({grow} >= {_num(cfg.growth_min_bytes)}) and "
        f"({grow} >= {_num(cfg.growth_min_fraction)} * max_over_time({series}[{w}]){k})"
    )


def _accelbench_rules(s: AlertSettings) -> Rules:
    c, w, f = s.health, duration(s.window_s), s.for_s
    gw = duration(max(s.window_s, c.growth_warn_min_duration_s))
    gws = max(s.window_s, c.growth_warn_min_duration_s)
    t = "accelbench_gpu_temperature_celsius"
    slow = "accelbench_gpu_temperature_slowdown_celsius"
    mem_max = "accelbench_gpu_temperature_memory_max_celsius"
    m = _num(c.temp_margin_c)
    hot = (
        f'{t}{{sensor=~"gpu|hotspot"}} >= ignoring(sensor) group_left() {slow}'
        f' or {t}{{sensor="memory"}} >= ignoring(sensor) group_left() {mem_max}'
    )
    near = (
        f'{t}{{sensor=~"gpu|hotspot"}} >= ignoring(sensor) group_left() ({slow} - {m})'
        f' or {t}{{sensor="memory"}} >= ignoring(sensor) group_left() ({mem_max} - {m})'
    )
    width = "accelbench_gpu_pcie_link_width"
    gen = "accelbench_gpu_pcie_link_generation"
    util = "accelbench_gpu_utilization_ratio"
    power, limit = "accelbench_gpu_power_watts", "accelbench_gpu_power_limit_watts"
    alerts = [
        _alert(
            "GPUTemperatureAtLimit",
            hot,
            "temperature",
            "fail",
            "{{ $labels.model }} GPU {{ $labels.device }} {{ $labels.sensor }} "
            "temperature {{ $value }} C reached its limit",
            0,
        ),
        _alert(
            "GPUTemperatureNearLimit",
            near,
            "temperature",
            "warn",
            f"{{{{ $labels.model }}}} GPU {{{{ $labels.device }}}} {{{{ $labels.sensor }}}} "
            f"temperature {{{{ $value }}}} C within {m} C of its limit",
            f,
        ),
        _alert(
            "GPUThrottled",
            f"sum without (cause) (rate(accelbench_gpu_throttle_seconds_total[{w}])) "
            f"> {_num(c.throttle_max_fraction)}",
            "throttle",
            "warn",
            "GPU {{ $labels.device }} clocks held down {{ $value | humanizePercentage }} "
            "of the time",
            f,
        ),
        _alert(
            "GPUUncorrectableECCErrors",
            f'increase(accelbench_gpu_ecc_errors_total{{type="uncorrected"}}[{w}]) > 0',
            "ecc",
            "fail",
            "GPU {{ $labels.device }}: {{ $value }} new uncorrectable "
            "{{ $labels.scope }} ECC errors",
            0,
        ),
        _alert(
            "GPUCorrectableECCBurst",
            f'increase(accelbench_gpu_ecc_errors_total{{type="corrected"}}[{w}]) '
            f">= {c.ecc_correctable_burst}",
            "ecc",
            "warn",
            "GPU {{ $labels.device }}: burst of {{ $value }} corrected ECC errors",
            0,
        ),
        _alert(
            "GPUUncorrectableRowsRemapped",
            f'increase(accelbench_gpu_remapped_rows_total{{type="uncorrectable"}}[{w}]) > 0',
            "ecc",
            "fail",
            "GPU {{ $labels.device }}: new rows remapped for uncorrectable errors",
            0,
        ),
        _alert(
            "GPURowRemapFailed",
            "accelbench_gpu_row_remap_failure > 0",
            "ecc",
            "fail",
            "GPU {{ $labels.device }}: row remapping failed; the GPU needs service",
            0,
        ),
        _alert(
            "GPURowRemapPending",
            "accelbench_gpu_row_remap_pending > 0",
            "ecc",
            "warn",
            "GPU {{ $labels.device }}: a row remap is pending; reset the GPU",
            0,
        ),
        _alert(
            "GPUPCIeLinkWidthDegraded",
            f'max_over_time({width}{{which="current"}}[{w}]) < ignoring(which) '
            f'{width}{{which="max"}}',
            "pcie",
            "warn",
            "GPU {{ $labels.device }} PCIe link x{{ $value }} below its maximum width",
            f,
        ),
        _alert(
            "GPUPCIeLinkGenDegradedUnderLoad",
            f'({gen}{{which="current"}} < ignoring(which) {gen}{{which="max"}}) and '
            f"ignoring(which) ({util} >= {_num(c.pcie_busy_util)})",
            "pcie",
            "warn",
            "GPU {{ $labels.device }} PCIe gen {{ $value }} below its maximum under load",
            f,
        ),
        _alert(
            "GPUPCIeReplays",
            f"increase(accelbench_gpu_pcie_replays_total[{w}]) >= {c.pcie_replay_burst}",
            "pcie",
            "warn",
            "GPU {{ $labels.device }}: {{ $value }} new PCIe replays",
            0,
        ),
        _alert(
            "GPUPowerAboveLimit",
            f"avg_over_time(({power} > bool ({limit} * {_num(1 + c.power_tolerance)}))"
            f"[{w}:]) > {_num(c.power_over_fraction)}",
            "power",
            "warn",
            "GPU {{ $labels.device }} above its power limit in "
            "{{ $value | humanizePercentage }} of the window",
            f,
        ),
        _alert(
            "GPUMemoryGrowth",
            _growth("accelbench_gpu_memory_used_bytes", gw, c, gws),
            "memory_growth",
            "warn",
            "GPU {{ $labels.device }} memory keeps growing",
            f,
        ),
        _alert(
            "ServerRSSGrowth",
            _growth("accelbench_server_process_resident_memory_bytes", gw, c, gws),
            "memory_growth",
            "warn",
            "server RSS keeps growing",
            f,
        ),
        _alert(
            "AccelbenchHealthFail",
            'accelbench_health_findings{severity="fail"} > 0',
            "health",
            "fail",
            "accelbench health rule {{ $labels.rule }} fails",
            0,
        ),
        _alert(
            "AccelbenchHealthUnknown",
            'accelbench_health_verdict{verdict="unknown"} == 1',
            "unknown",
            "warn",
            "accelbench monitor at {{ $labels.instance }} cannot judge health (no samples, "
            "a silent source or a GPU without temperature / ECC counters): see its log",
            s.no_data_for_s,
        ),
        _no_data(
            "AccelbenchNoData",
            "accelbench_health_status",
            "accelbench monitor at {{ $labels.instance }}",
            s,
        ),
    ]
    lbl = "device"
    records: list[RecordRule] = [
        {
            "record": "accelbench:gpu_temperature_celsius",
            "expr": _gpu_label(f'{t}{{sensor=~"gpu|hotspot"}}', lbl),
        },
        {"record": "accelbench:gpu_utilization_ratio", "expr": _gpu_label(util, lbl)},
        {
            "record": "accelbench:gpu_memory_used_bytes",
            "expr": _gpu_label("accelbench_gpu_memory_used_bytes", lbl),
        },
        {"record": "accelbench:gpu_power_watts", "expr": _gpu_label(power, lbl)},
        {
            "record": "accelbench:gpu_ecc_uncorrected:increase",
            "expr": _gpu_label(
                f"sum without (scope, type) (increase("
                f'accelbench_gpu_ecc_errors_total{{type="uncorrected"}}[{w}]))',
                lbl,
            ),
        },
        {
            "record": "accelbench:gpu_throttle:ratio",
            "expr": _gpu_label(
                f"sum without (cause) (rate(accelbench_gpu_throttle_seconds_total[{w}]))", lbl
            ),
        },
    ]
    return alerts, records


def _dcgm_rules(s: AlertSettings) -> Rules:
    c, w, f = s.health, duration(s.window_s), s.for_s
    gw = duration(max(s.window_s, c.growth_warn_min_duration_s))
    gws = max(s.window_s, c.growth_warn_min_duration_s)
    m = _num(c.temp_margin_c)
    temp, slow = "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SLOWDOWN_TEMP"
    mib = "1048576"
    alerts = [
        _alert(
            "DCGMGPUTemperatureAtLimit",
            f"{temp} >= {slow}",
            "temperature",
            "fail",
            "{{ $labels.modelName }} GPU {{ $labels.gpu }} temperature {{ $value }} C "
            "reached its slowdown limit",
            0,
        ),
        _alert(
            "DCGMGPUTemperatureNearLimit",
            f"{temp} >= ({slow} - {m})",
            "temperature",
            "warn",
            f"GPU {{{{ $labels.gpu }}}} temperature {{{{ $value }}}} C within {m} C "
            "of its slowdown limit",
            f,
        ),
        # violation counters are in microseconds (dcgm-exporter's counters CSV)
        _alert(
            "DCGMGPUThrottled",
            f"(rate(DCGM_FI_DEV_POWER_VIOLATION[{w}]) + "
            f"rate(DCGM_FI_DEV_THERMAL_VIOLATION[{w}])) / 1e6 "
            f"> {_num(c.throttle_max_fraction)}",
            "throttle",
            "warn",
            "GPU {{ $labels.gpu }} clocks held down {{ $value | humanizePercentage }} of the time",
            f,
        ),
        _alert(
            "DCGMUncorrectableECCErrors",
            f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{w}]) > 0",
            "ecc",
            "fail",
            "GPU {{ $labels.gpu }}: {{ $value }} new double-bit ECC errors",
            0,
        ),
        _alert(
            "DCGMCorrectableECCBurst",
            f"increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[{w}]) >= {c.ecc_correctable_burst}",
            "ecc",
            "warn",
            "GPU {{ $labels.gpu }}: burst of {{ $value }} single-bit ECC errors",
            0,
        ),
        _alert(
            "DCGMPagesRetiredDBE",
            f"increase(DCGM_FI_DEV_RETIRED_DBE[{w}]) > 0",
            "ecc",
            "fail",
            "GPU {{ $labels.gpu }}: pages retired for double-bit errors",
            0,
        ),
        _alert(
            "DCGMPageRetirementPending",
            "DCGM_FI_DEV_RETIRED_PENDING > 0",
            "ecc",
            "warn",
            "GPU {{ $labels.gpu }}: page retirement pending; reset the GPU",
            0,
        ),
        _alert(
            "DCGMUncorrectableRowsRemapped",
            f"increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[{w}]) > 0",
            "ecc",
            "fail",
            "GPU {{ $labels.gpu }}: new rows remapped for uncorrectable errors",
            0,
        ),
        _alert(
            "DCGMRowRemapFailed",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
            "ecc",
            "fail",
            "GPU {{ $labels.gpu }}: row remapping failed; the GPU needs service",
            0,
        ),
        _alert(
            "DCGMRowRemapPending",
            "DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
            "ecc",
            "warn",
            "GPU {{ $labels.gpu }}: a row remap is pending; reset the GPU",
            0,
        ),
        _alert(
            "DCGMPCIeLinkWidthDegraded",
            f"max_over_time(DCGM_FI_DEV_PCIE_LINK_WIDTH[{w}]) < DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
            "pcie",
            "warn",
            "GPU {{ $labels.gpu }} PCIe link x{{ $value }} below its maximum width",
            f,
        ),
        _alert(
            "DCGMPCIeLinkGenDegradedUnderLoad",
            "(DCGM_FI_DEV_PCIE_LINK_GEN < DCGM_FI_DEV_PCIE_MAX_LINK_GEN) and "
            f"(DCGM_FI_DEV_GPU_UTIL / 100 >= {_num(c.pcie_busy_util)})",
            "pcie",
            "warn",
            "GPU {{ $labels.gpu }} PCIe gen {{ $value }} below its maximum under load",
            f,
        ),
        _alert(
            "DCGMPCIeReplays",
            f"increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[{w}]) >= {c.pcie_replay_burst}",
            "pcie",
            "warn",
            "GPU {{ $labels.gpu }}: {{ $value }} new PCIe replays",
            0,
        ),
        _alert(
            "DCGMGPUPowerAboveLimit",
            "avg_over_time((DCGM_FI_DEV_POWER_USAGE > bool (DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
            f" * {_num(1 + c.power_tolerance)}))[{w}:]) > {_num(c.power_over_fraction)}",
            "power",
            "warn",
            "GPU {{ $labels.gpu }} above its power limit in "
            "{{ $value | humanizePercentage }} of the window",
            f,
        ),
        _alert(
            "DCGMGPUMemoryGrowth",
            _growth("DCGM_FI_DEV_FB_USED", gw, c, gws, mib),
            "memory_growth",
            "warn",
            "GPU {{ $labels.gpu }} memory keeps growing",
            f,
        ),
        _no_data("DCGMNoData", temp, "dcgm-exporter GPU {{ $labels.gpu }}", s),
    ]
    records: list[RecordRule] = [
        {"record": "accelbench:gpu_temperature_celsius", "expr": temp},
        {"record": "accelbench:gpu_utilization_ratio", "expr": "DCGM_FI_DEV_GPU_UTIL / 100"},
        {"record": "accelbench:gpu_memory_used_bytes", "expr": f"DCGM_FI_DEV_FB_USED * {mib}"},
        {"record": "accelbench:gpu_power_watts", "expr": "DCGM_FI_DEV_POWER_USAGE"},
        {
            "record": "accelbench:gpu_ecc_uncorrected:increase",
            "expr": f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{w}])",
        },
        {
            "record": "accelbench:gpu_throttle:ratio",
            "expr": f"(rate(DCGM_FI_DEV_POWER_VIOLATION[{w}]) + "
            f"rate(DCGM_FI_DEV_THERMAL_VIOLATION[{w}])) / 1e6",
        },
    ]
    return alerts, records


def _amd_rules(s: AlertSettings) -> Rules:
    c, w, f, p = s.health, duration(s.window_s), s.for_s, s.amd_prefix
    gw = duration(max(s.window_s, c.growth_warn_min_duration_s))
    gws = max(s.window_s, c.growth_warn_min_duration_s)
    mib = "1048576"
    temp = f'{{__name__=~"{p}gpu_(edge|junction)_temperature"}}'
    violations = (
        f'{{__name__=~"{p}gpu_violation_(ppt|socket_thermal|vr_thermal|hbm_thermal'
        f'|processor_hot)_residency_percentage"}}'
    )
    alerts: list[AlertRule] = []
    if s.amd_temp_limit_c is not None:
        lim, m = _num(s.amd_temp_limit_c), _num(c.temp_margin_c)
        alerts += [
            _alert(
                "AMDGPUTemperatureAtLimit",
                f"{temp} >= {lim}",
                "temperature",
                "fail",
                f"AMD GPU {{{{ $labels.gpu_id }}}} temperature {{{{ $value }}}} C reached {lim} C",
                0,
            ),
            _alert(
                "AMDGPUTemperatureNearLimit",
                f"{temp} >= {lim} - {m}",
                "temperature",
                "warn",
                f"AMD GPU {{{{ $labels.gpu_id }}}} temperature {{{{ $value }}}} C "
                f"within {m} C of {lim} C",
                f,
            ),
        ]
    used = f"{p}gpu_used_vram"
    alerts += [
        _alert(
            "AMDGPUThrottled",
            f"max without (__name__) ({violations}) / 100 > {_num(c.throttle_max_fraction)}",
            "throttle",
            "warn",
            "AMD GPU {{ $labels.gpu_id }} clocks held down "
            "{{ $value | humanizePercentage }} of the time",
            f,
        ),
        _alert(
            "AMDUncorrectableECCErrors",
            f"increase({p}gpu_ecc_uncorrect_total[{w}]) > 0",
            "ecc",
            "fail",
            "AMD GPU {{ $labels.gpu_id }}: {{ $value }} new uncorrectable ECC errors",
            0,
        ),
        _alert(
            "AMDCorrectableECCBurst",
            f"increase({p}gpu_ecc_correct_total[{w}]) >= {c.ecc_correctable_burst}",
            "ecc",
            "warn",
            "AMD GPU {{ $labels.gpu_id }}: burst of {{ $value }} corrected ECC errors",
            0,
        ),
        _alert(
            "AMDPCIeSpeedDegradedUnderLoad",
            f"({p}pcie_speed < {p}pcie_max_speed) and "
            f"({p}gpu_gfx_activity / 100 >= {_num(c.pcie_busy_util)})",
            "pcie",
            "warn",
            "AMD GPU {{ $labels.gpu_id }} PCIe speed {{ $value }} GT/s "
            "below its maximum under load",
            f,
        ),
        _alert(
            "AMDPCIeReplays",
            f"increase({p}pcie_replay_count[{w}]) >= {c.pcie_replay_burst}",
            "pcie",
            "warn",
            "AMD GPU {{ $labels.gpu_id }}: {{ $value }} new PCIe replays",
            0,
        ),
        _alert(
            "AMDGPUMemoryGrowth",
            _growth(used, gw, c, gws, mib),
            "memory_growth",
            "warn",
            "AMD GPU {{ $labels.gpu_id }} memory keeps growing",
            f,
        ),
        _no_data(
            "AMDNoData",
            f"{p}gpu_gfx_activity",
            "AMD device-metrics-exporter GPU {{ $labels.gpu_id }}",
            s,
        ),
    ]
    g = "gpu_id"
    records: list[RecordRule] = [
        {
            "record": "accelbench:gpu_temperature_celsius",
            "expr": _gpu_label(f"max without (__name__) ({temp})", g),
        },
        {
            "record": "accelbench:gpu_utilization_ratio",
            "expr": _gpu_label(f"{p}gpu_gfx_activity / 100", g),
        },
        {"record": "accelbench:gpu_memory_used_bytes", "expr": _gpu_label(f"{used} * {mib}", g)},
        {
            "record": "accelbench:gpu_power_watts",
            "expr": _gpu_label(
                f'max without (__name__) ({{__name__=~"{p}gpu_(package_power|'
                f'power_usage|average_package_power)"}})',
                g,
            ),
        },
        {
            "record": "accelbench:gpu_ecc_uncorrected:increase",
            "expr": _gpu_label(f"increase({p}gpu_ecc_uncorrect_total[{w}])", g),
        },
        {
            "record": "accelbench:gpu_throttle:ratio",
            "expr": _gpu_label(f"max without (__name__) ({violations}) / 100", g),
        },
    ]
    return alerts, records


def _engine_rules(s: AlertSettings) -> Rules:
    """Serving-engine queue and token rules, from the engine metric names the telemetry
    parser reads (one list for vLLM, SGLang, llama.cpp and TGI)."""
    w = duration(s.window_s)

    def union(col: str, rate: bool = False) -> str:
        parts = []
        for engine, cols in SERVER_METRICS.items():
            for name in cols.get(col, [])[:1]:
                sel = f'{{__name__="{name}"}}'
                inner = f"rate({sel}[{w}])" if rate else sel
                parts.append(
                    f'label_replace(sum without (__name__) ({inner}), "engine", "{engine}", "", "")'
                )
        return " or ".join(parts)

    records: list[RecordRule] = [
        {"record": "accelbench:engine_requests_waiting", "expr": union("srv_requests_waiting")},
        {"record": "accelbench:engine_requests_running", "expr": union("srv_requests_running")},
        {"record": "accelbench:engine_kv_cache_usage_ratio", "expr": union("srv_kv_cache_usage")},
        {
            "record": "accelbench:engine_generation_tokens:rate",
            "expr": union("srv_generation_tokens_total", rate=True),
        },
        {
            "record": "accelbench:engine_prompt_tokens:rate",
            "expr": union("srv_prompt_tokens_total", rate=True),
        },
    ]
    # vLLM's HTTP server counts requests in http_requests_total{status="2xx"|"5xx"|...}
    # (prometheus-fastapi-instrumentator, status codes grouped).
    err = (
        f'sum without (handler, method, status) (rate(http_requests_total{{status=~"5.."}}[{w}]))'
        f" / sum without (handler, method, status) (rate(http_requests_total[{w}]))"
    )
    alerts = [
        _alert(
            "EngineQueueDepth",
            f"accelbench:engine_requests_waiting > {_num(s.queue_waiting_max)}",
            "engine_queue",
            "warn",
            "{{ $labels.engine }} at {{ $labels.instance }} has {{ $value }} requests waiting",
            s.for_s,
        ),
        _alert(
            "EngineErrorRate",
            f"{err} > {_num(s.error_rate_max)}",
            "error_rate",
            "warn",
            "{{ $labels.instance }}: {{ $value | humanizePercentage }} of requests fail with 5xx",
            s.for_s,
        ),
    ]
    return alerts, records


_BUILDERS = {"accelbench": _accelbench_rules, "dcgm": _dcgm_rules, "amd": _amd_rules}


def build_rules(
    flavours: list[str] | None = None, settings: AlertSettings | None = None
) -> RuleFile:
    """The rule file (as a dict) for the given exporter flavours plus the engine group."""
    s = settings or AlertSettings()
    s.validate()
    chosen = list(flavours or FLAVOURS)
    unknown = [x for x in chosen if x not in FLAVOURS]
    if unknown:
        raise UsageError(
            f"unknown --flavour {', '.join(unknown)}; choose from {', '.join(FLAVOURS)}"
        )
    groups: list[RuleGroup] = []
    for fl in chosen:
        alerts, records = _BUILDERS[fl](s)
        for r in records:  # the same record names from several exporters must not clash
            r["labels"] = {"exporter": fl}
        groups.append({"name": f"accelbench-{fl}-records", "rules": records})
        groups.append({"name": f"accelbench-{fl}-alerts", "rules": alerts})
    alerts, records = _engine_rules(s)
    groups.append({"name": "accelbench-engine-records", "rules": records})
    groups.append({"name": "accelbench-engine-alerts", "rules": alerts})
    return {"groups": groups}


def coverage(settings: AlertSettings | None = None) -> dict[str, list[str]]:
    """Health rules each flavour cannot express (no metric in that exporter)."""
    s = settings or AlertSettings()
    out: dict[str, list[str]] = {}
    for fl in FLAVOURS:
        have = {r["labels"]["accelbench_rule"] for r in _BUILDERS[fl](s)[0]}
        out[fl] = sorted(
            {"temperature", "throttle", "ecc", "pcie", "memory_growth", "power"} - have
        )
    return out


def rules_yaml(flavours: list[str] | None = None, settings: AlertSettings | None = None) -> str:
    """The rule file as YAML text, with a header naming where the thresholds come from."""
    s = settings or AlertSettings()
    body = yaml.safe_dump(build_rules(flavours, s), sort_keys=False, width=1000)
    missing = {k: v for k, v in coverage(s).items() if v and k in (flavours or FLAVOURS)}
    head = [
        "# Generated by `accelbench monitor rules`; thresholds from accelbench's HealthConfig.",
        f"# window {duration(s.window_s)}, for {duration(s.for_s)}.",
    ]
    for fl, rules in missing.items():
        head.append(f"# {fl}: no metric for: {', '.join(rules)}")
    if "dcgm" in (flavours or FLAVOURS):
        head.append(
            "# dcgm: add to dcgm-exporter's counters CSV: " + ", ".join(DCGM_EXTRA_COUNTERS)
        )
    return "\n".join(head) + "\n" + body
