"""One schema for every telemetry source.

A sample is a flat row (a :class:`Row`, a TypedDict) with the columns of :data:`TELEMETRY_SCHEMA`. Every
source fills the columns it knows and leaves the rest ``None`` ("not observed"). Values
are always in base units: bytes, watts, joules, degrees Celsius, hertz, seconds, and
ratios in 0-1 (never percent). Timestamps ``t_ns`` are ``time.monotonic_ns()``, the
clock of the benchmark records; ``wall_ns`` is ``time.time_ns()`` for humans.

One row describes one thing at one time: a GPU (``kind="gpu"``), the host
(``kind="host"``) or an inference server (``kind="server"``).
"""

from __future__ import annotations

import math
from typing import TypedDict, Unpack, cast

import pyarrow as pa

KIND_GPU = "gpu"
KIND_HOST = "host"
KIND_SERVER = "server"

# name -> (arrow type, unit, description). Order is the Parquet column order.
COLUMNS: dict[str, tuple[pa.DataType, str, str]] = {
    "t_ns": (pa.int64(), "ns", "time.monotonic_ns() when the sample was taken"),
    "wall_ns": (pa.int64(), "ns", "time.time_ns() when the sample was taken"),
    "phase": (pa.string(), "", "run phase: warmup, measured, drain (or null outside a run)"),
    "source": (pa.string(), "", "source name: nvml, amdsmi, sysfs, host, server, or a parser"),
    "kind": (pa.string(), "", "gpu, host or server"),
    # identity
    "vendor": (pa.string(), "", "nvidia or amd"),
    "model": (pa.string(), "", "product name as the tool reports it"),
    "device_index": (pa.int32(), "", "index of the device in its source"),
    "bus_id": (pa.string(), "", "PCI bus id, lower-case 0000:bus:device.function (lspci -D form)"),
    "uuid": (pa.string(), "", "device UUID (NVIDIA) or unique id (AMD) where given"),
    "serial": (pa.string(), "", "board serial where given"),
    "driver_version": (pa.string(), "", "driver version where given"),
    # load
    "util_gpu": (pa.float64(), "ratio", "GPU (graphics/compute engine) busy ratio 0-1"),
    "util_mem": (pa.float64(), "ratio", "memory controller busy ratio 0-1"),
    "mem_used_bytes": (pa.int64(), "B", "device memory used"),
    "mem_total_bytes": (pa.int64(), "B", "device memory total"),
    # power and energy
    "power_w": (pa.float64(), "W", "board/socket power draw"),
    "power_limit_w": (pa.float64(), "W", "enforced power limit"),
    "energy_j": (pa.float64(), "J", "energy counter (monotonic, since driver load/boot)"),
    # temperatures
    "temp_gpu_c": (pa.float64(), "C", "GPU (edge/die) temperature"),
    "temp_hotspot_c": (pa.float64(), "C", "hotspot / junction temperature"),
    "temp_mem_c": (pa.float64(), "C", "memory / HBM temperature"),
    "temp_slowdown_c": (pa.float64(), "C", "temperature at which the GPU slows down"),
    "temp_shutdown_c": (pa.float64(), "C", "temperature at which the GPU shuts down"),
    "temp_mem_max_c": (pa.float64(), "C", "maximum memory temperature"),
    # clocks
    "clock_sm_hz": (pa.float64(), "Hz", "SM / graphics clock"),
    "clock_mem_hz": (pa.float64(), "Hz", "memory clock"),
    "clock_sm_max_hz": (pa.float64(), "Hz", "maximum SM / graphics clock"),
    "clock_mem_max_hz": (pa.float64(), "Hz", "maximum memory clock"),
    # throttling
    "throttle_mask": (pa.int64(), "", "throttle/clock-event bitmask (NVML bit layout for NVIDIA)"),
    "throttle_reasons": (
        pa.string(),
        "",
        "active throttle reasons, comma-separated (idle excluded)",
    ),
    "throttle_power_s": (pa.float64(), "s", "cumulative time clocks were held down by power"),
    "throttle_thermal_s": (pa.float64(), "s", "cumulative time clocks were held down by heat"),
    # ECC and memory health
    "ecc_corrected_volatile": (pa.int64(), "", "corrected ECC errors since driver load"),
    "ecc_uncorrected_volatile": (pa.int64(), "", "uncorrected ECC errors since driver load"),
    "ecc_corrected_aggregate": (pa.int64(), "", "corrected ECC errors, lifetime"),
    "ecc_uncorrected_aggregate": (pa.int64(), "", "uncorrected ECC errors, lifetime"),
    "ecc_deferred": (pa.int64(), "", "deferred ECC errors (AMD)"),
    "remapped_rows_corr": (pa.int64(), "", "rows remapped for correctable errors"),
    "remapped_rows_unc": (pa.int64(), "", "rows remapped for uncorrectable errors"),
    "remapped_rows_pending": (pa.bool_(), "", "a row remap is pending (reset needed)"),
    "remapped_rows_failure": (pa.bool_(), "", "a row remap failed"),
    # interconnect
    "pcie_gen": (pa.int32(), "", "current PCIe generation"),
    "pcie_gen_max": (pa.int32(), "", "maximum PCIe generation"),
    "pcie_width": (pa.int32(), "", "current PCIe link width (lanes)"),
    "pcie_width_max": (pa.int32(), "", "maximum PCIe link width (lanes)"),
    "pcie_replay": (pa.int64(), "", "PCIe replay counter"),
    "nvlink_errors": (pa.int64(), "", "sum of NVLink error counters over active links"),
    "xgmi_errors": (pa.int64(), "", "XGMI error status (0 = none)"),
    # host
    "cpu_util": (pa.float64(), "ratio", "host CPU busy ratio 0-1"),
    "host_mem_used_bytes": (pa.int64(), "B", "host memory used"),
    "host_mem_total_bytes": (pa.int64(), "B", "host memory total"),
    "proc_pid": (pa.int64(), "", "pid of the watched server process"),
    "proc_rss_bytes": (pa.int64(), "B", "resident set size of the watched server process tree"),
    "proc_cpu_util": (pa.float64(), "ratio", "CPU of the watched process tree, in cores"),
    # inference server
    "engine": (pa.string(), "", "vllm, sglang, llamacpp or tgi"),
    "srv_requests_running": (pa.float64(), "", "requests being processed"),
    "srv_requests_waiting": (pa.float64(), "", "requests queued"),
    "srv_kv_cache_usage": (pa.float64(), "ratio", "KV-cache usage 0-1"),
    "srv_prompt_tokens_total": (pa.float64(), "", "prompt tokens processed (counter)"),
    "srv_generation_tokens_total": (pa.float64(), "", "generated tokens (counter)"),
    "srv_preemptions_total": (pa.float64(), "", "preemptions (counter)"),
    "srv_prefix_cache_hits_total": (pa.float64(), "", "prefix-cache hits (counter)"),
    "srv_prefix_cache_queries_total": (pa.float64(), "", "prefix-cache queries (counter)"),
}


class Row(TypedDict, total=False):
    """One telemetry sample: the columns of :data:`COLUMNS`, each ``None`` when not observed.

    Written out from :data:`COLUMNS` (tests/test_telemetry_sampling.py checks that the names
    and Python types match the Arrow types column for column). :func:`new_row` fills every
    key; ``total=False`` lets a parser collect some columns first and pass them on.
    """

    t_ns: int | None
    wall_ns: int | None
    phase: str | None
    source: str | None
    kind: str | None
    vendor: str | None
    model: str | None
    device_index: int | None
    bus_id: str | None
    uuid: str | None
    serial: str | None
    driver_version: str | None
    util_gpu: float | None
    util_mem: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    power_limit_w: float | None
    energy_j: float | None
    temp_gpu_c: float | None
    temp_hotspot_c: float | None
    temp_mem_c: float | None
    temp_slowdown_c: float | None
    temp_shutdown_c: float | None
    temp_mem_max_c: float | None
    clock_sm_hz: float | None
    clock_mem_hz: float | None
    clock_sm_max_hz: float | None
    clock_mem_max_hz: float | None
    throttle_mask: int | None
    throttle_reasons: str | None
    throttle_power_s: float | None
    throttle_thermal_s: float | None
    ecc_corrected_volatile: int | None
    ecc_uncorrected_volatile: int | None
    ecc_corrected_aggregate: int | None
    ecc_uncorrected_aggregate: int | None
    ecc_deferred: int | None
    remapped_rows_corr: int | None
    remapped_rows_unc: int | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    pcie_gen: int | None
    pcie_gen_max: int | None
    pcie_width: int | None
    pcie_width_max: int | None
    pcie_replay: int | None
    nvlink_errors: int | None
    xgmi_errors: int | None
    cpu_util: float | None
    host_mem_used_bytes: int | None
    host_mem_total_bytes: int | None
    proc_pid: int | None
    proc_rss_bytes: int | None
    proc_cpu_util: float | None
    engine: str | None
    srv_requests_running: float | None
    srv_requests_waiting: float | None
    srv_kv_cache_usage: float | None
    srv_prompt_tokens_total: float | None
    srv_generation_tokens_total: float | None
    srv_preemptions_total: float | None
    srv_prefix_cache_hits_total: float | None
    srv_prefix_cache_queries_total: float | None


# The physically plausible range of each numeric reading, in the column's base unit:
# a value outside it (or not finite) is a damaged reading, never a real one. Generous on
# purpose: 12345 % utilisation, -691 W, -5 MiB of memory or 1e308 W are refused, nothing
# a real device reports is. Checked by :func:`plausible` where a parser hands its rows
# out (docs/TELEMETRY.md "Plausible readings" lists them).
_COUNTER = (0.0, float(2**63 - 1))  # an int64 counter or mask: never negative
BOUNDS: dict[str, tuple[float, float]] = {
    "device_index": (0.0, float(2**31 - 1)),
    "util_gpu": (0.0, 1.0),
    "util_mem": (0.0, 1.0),
    "mem_used_bytes": (0.0, float(2**50)),  # 1 PiB of device memory
    "mem_total_bytes": (0.0, float(2**50)),
    "power_w": (0.0, 10_000.0),  # one board or socket: 10 kW
    "power_limit_w": (0.0, 10_000.0),
    "energy_j": (0.0, 1e15),  # 10 kW for 3,000 years
    "temp_gpu_c": (-60.0, 200.0),
    "temp_hotspot_c": (-60.0, 200.0),
    "temp_mem_c": (-60.0, 200.0),
    "temp_slowdown_c": (-60.0, 200.0),
    "temp_shutdown_c": (-60.0, 200.0),
    "temp_mem_max_c": (-60.0, 200.0),
    "clock_sm_hz": (0.0, 1e11),  # 100 GHz
    "clock_mem_hz": (0.0, 1e11),
    "clock_sm_max_hz": (0.0, 1e11),
    "clock_mem_max_hz": (0.0, 1e11),
    "throttle_mask": _COUNTER,
    "throttle_power_s": (0.0, 1e12),
    "throttle_thermal_s": (0.0, 1e12),
    "ecc_corrected_volatile": _COUNTER,
    "ecc_uncorrected_volatile": _COUNTER,
    "ecc_corrected_aggregate": _COUNTER,
    "ecc_uncorrected_aggregate": _COUNTER,
    "ecc_deferred": _COUNTER,
    "remapped_rows_corr": _COUNTER,
    "remapped_rows_unc": _COUNTER,
    "pcie_gen": (0.0, 10.0),
    "pcie_gen_max": (0.0, 10.0),
    "pcie_width": (0.0, 64.0),  # lanes
    "pcie_width_max": (0.0, 64.0),
    "pcie_replay": _COUNTER,
    "nvlink_errors": _COUNTER,
    "xgmi_errors": _COUNTER,
    "cpu_util": (0.0, 1.0),
    "host_mem_used_bytes": (0.0, float(2**60)),
    "host_mem_total_bytes": (0.0, float(2**60)),
    "proc_pid": (0.0, float(2**31 - 1)),
    "proc_rss_bytes": (0.0, float(2**60)),
    "proc_cpu_util": (0.0, 100_000.0),  # cores
    "srv_requests_running": (0.0, 1e9),
    "srv_requests_waiting": (0.0, 1e9),
    "srv_kv_cache_usage": (0.0, 1.0),
    "srv_prompt_tokens_total": (0.0, 1e18),
    "srv_generation_tokens_total": (0.0, 1e18),
    "srv_preemptions_total": (0.0, 1e18),
    "srv_prefix_cache_hits_total": (0.0, 1e18),
    "srv_prefix_cache_queries_total": (0.0, 1e18),
}


# Readings that cannot exceed another of the same row (which of the two is damaged cannot
# be told: both are left out).
_AT_MOST = (("mem_used_bytes", "mem_total_bytes"), ("host_mem_used_bytes", "host_mem_total_bytes"))


def row_label(row: Row) -> str:
    """How a parser's messages name the thing a row describes."""
    if row.get("kind") == KIND_GPU:
        ident = row.get("bus_id") or row.get("uuid")
        return f"GPU {row.get('device_index')}" + (f" ({ident})" if ident else "")
    if row.get("kind") == KIND_SERVER:
        return f"server ({row.get('engine')})"
    return str(row.get("kind") or row.get("source"))


def _shown(name: str, v: float) -> str:
    unit = COLUMNS[name][1]
    if unit == "ratio":  # said as the tools say it
        return f"{v * 100:.6g} %"
    return f"{v:.6g}" + (f" {unit}" if unit else "")


def plausible(rows: list[Row], lost: list[str] | None) -> list[Row]:
    """``rows`` with every reading outside its :data:`BOUNDS` (or not finite) left out:
    the column becomes null and one ``lost`` line names the device, the column, the value
    and the range. A damaged reading is never judged as a real one."""
    for row in rows:
        label = row_label(row)
        for name, (lo, hi) in BOUNDS.items():
            v = column(row, name)
            if v is None or isinstance(v, bool) or not isinstance(v, int | float):
                continue
            if math.isfinite(v) and lo <= v <= hi:
                continue
            set_column(row, name, None)
            if lost is not None:
                lost.append(
                    f"{label}: {name} {_shown(name, v)} is outside "
                    f"{_shown(name, lo)} to {_shown(name, hi)}; that field is unknown"
                )
        for part, whole in _AT_MOST:
            u, t = column(row, part), column(row, whole)
            if isinstance(u, int | float) and isinstance(t, int | float) and u > t:
                set_column(row, part, None)
                set_column(row, whole, None)
                if lost is not None:
                    lost.append(
                        f"{label}: {part} {_shown(part, u)} is above {whole} "
                        f"{_shown(whole, t)}; both fields are unknown"
                    )
    return rows


TELEMETRY_SCHEMA = pa.schema([pa.field(name, typ) for name, (typ, _, _) in COLUMNS.items()])

_INT_TYPES = {pa.int32(), pa.int64()}


def new_row(**values: Unpack[Row]) -> Row:
    """A row with every column, ``None`` where not given. Unknown names are an error."""
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown telemetry column(s): {sorted(unknown)}")
    row = cast(Row, dict.fromkeys(COLUMNS))
    row.update(values)
    return row


def set_column(row: Row, name: str, value: object) -> None:
    """Set the column ``name`` (a name held in a variable, as parsers' mapping tables do).

    An unknown name is an error; the value is cast to the column's type by
    :func:`coerce_row` on the way to Parquet.
    """
    if name not in COLUMNS:
        raise KeyError(f"unknown telemetry column: {name}")
    cast(dict[str, object], row)[name] = value


def column(row: Row, name: str) -> object:
    """The value of column ``name`` (a name held in a variable), ``None`` if not observed."""
    return cast(dict[str, object], row).get(name)


def observed(row: Row) -> Row:
    """Only the columns of ``row`` that hold a value (to lay over another row)."""
    return cast(Row, {k: v for k, v in row.items() if v is not None})


def numeric(row: Row, name: str) -> int | float | None:
    """The value of the numeric column ``name`` as the source gave it (an int stays int)."""
    v = column(row, name)
    if v is None or isinstance(v, int | float):
        return v
    raise TypeError(f"telemetry column {name!r} holds {v!r}, not a number")


def coerce_row(row: Row) -> Row:
    """Cast values to their column types (ints stay ints, NaN becomes None)."""
    out: dict[str, object] = {}
    for name, (typ, _, _) in COLUMNS.items():
        # a Row holds only these (None aside); a parser may give a numeric string
        v = cast("int | float | str | bool | None", column(row, name))
        if v is None:
            out[name] = None
        elif typ in _INT_TYPES:
            out[name] = int(v)
        elif typ == pa.float64():
            f = float(v)
            out[name] = None if math.isnan(f) else f
        elif typ == pa.bool_():
            out[name] = bool(v)
        else:
            out[name] = str(v)
    return cast(Row, out)


def rows_to_table(rows: list[Row]) -> pa.Table:
    """Rows (dicts) -> an Arrow table with :data:`TELEMETRY_SCHEMA`."""
    coerced = [coerce_row(r) for r in rows]
    return pa.Table.from_pylist(coerced, schema=TELEMETRY_SCHEMA)


def device_key(row: Row) -> str:
    """A stable identity for a row's device, used to group series."""
    if row.get("kind") == KIND_GPU:
        ident = row.get("uuid") or row.get("bus_id") or str(row.get("device_index"))
        return f"gpu:{row.get('vendor')}:{ident}"
    if row.get("kind") == KIND_SERVER:
        return f"server:{row.get('engine')}"
    return str(row.get("kind") or row.get("source"))


def pcie_gen_from_speed(mts: float | None) -> int | None:
    """PCIe transfer rate in MT/s (2500, 5000, 8000, 16000, 32000, 64000) -> generation."""
    if mts is None or mts <= 0:
        return None
    table = [(2500, 1), (5000, 2), (8000, 3), (16000, 4), (32000, 5), (64000, 6), (128000, 7)]
    best = min(table, key=lambda t: abs(t[0] - mts))
    return best[1]
