"""ROCm Device Metrics Exporter ``/metrics`` scrapes."""

from __future__ import annotations

from accelbench.telemetry.parsers.prometheus import finite, prometheus_samples, store
from accelbench.telemetry.schema import (
    KIND_GPU,
    Row,
    column,
    new_row,
    pcie_gen_from_speed,
    plausible,
    set_column,
)

# ROCm Device Metrics Exporter (lower-case names on /metrics; units per its metrics list:
# power W, energy uJ, temperatures C, clocks MHz, VRAM MB (MiB), PCIe speed GT/s).
_ROCM_EXPORTER_MAP: dict[str, tuple[str, float]] = {
    "gpu_gfx_activity": ("util_gpu", 0.01),
    "gpu_umc_activity": ("util_mem", 0.01),
    "gpu_used_vram": ("mem_used_bytes", 1024.0**2),
    "gpu_total_vram": ("mem_total_bytes", 1024.0**2),
    "gpu_package_power": ("power_w", 1.0),
    "gpu_average_package_power": ("power_w", 1.0),
    "gpu_power_usage": ("power_w", 1.0),
    "gpu_energy_consumed": ("energy_j", 1e-6),
    "gpu_edge_temperature": ("temp_gpu_c", 1.0),
    "gpu_junction_temperature": ("temp_hotspot_c", 1.0),
    "gpu_memory_temperature": ("temp_mem_c", 1.0),
    "pcie_replay_count": ("pcie_replay", 1.0),
    "gpu_ecc_correct_total": ("ecc_corrected_aggregate", 1.0),
    "gpu_ecc_uncorrect_total": ("ecc_uncorrected_aggregate", 1.0),
}
_POWER_PRIORITY = ["gpu_package_power", "gpu_power_usage", "gpu_average_package_power"]


def parse_rocm_exporter_prometheus(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """A ROCm Device Metrics Exporter ``/metrics`` scrape -> one row per ``gpu_id``."""
    rows: dict[str, Row] = {}
    power_seen: dict[str, str] = {}
    for name, labels, value in prometheus_samples(text, lost, notes):
        lname = name.lower()
        if not (lname.startswith("gpu_") or lname.startswith("pcie_")):
            continue
        key = labels.get("gpu_id", "0")
        if labels.get("gpu_partition_id") not in (None, "", "0"):
            continue  # partitions repeat the device
        row = rows.get(key)
        if row is None:
            row = new_row(
                t_ns=t_ns,
                source="rocm-exporter",
                kind=KIND_GPU,
                vendor="amd",
                model=labels.get("card_model"),
                device_index=int(key) if key.isdigit() else len(rows),
                serial=labels.get("serial_number"),
                uuid=labels.get("gpu_uuid"),
            )
            rows[key] = row
        read = lname in ("gpu_clock", "pcie_speed", "pcie_max_speed", *_ROCM_EXPORTER_MAP)
        if not read or not finite(f"{name} (GPU {key})", value, lost):
            continue  # a metric not read; or NaN ("no reading"), +-Inf (lost)
        if lname == "gpu_clock":
            ct = labels.get("clock_type", "").lower()
            col = {"system": "clock_sm_hz", "memory": "clock_mem_hz"}.get(ct)
            if col and column(row, col) is None:
                set_column(row, col, value * 1e6)
            continue
        if lname in ("pcie_speed", "pcie_max_speed"):
            gen = pcie_gen_from_speed(value * 1000.0)
            if lname == "pcie_speed":
                row["pcie_gen"] = gen
            else:
                row["pcie_gen_max"] = gen
            continue
        m = _ROCM_EXPORTER_MAP.get(lname)
        if not m:
            continue
        if m[0] == "power_w":
            prev = power_seen.get(key)
            if prev and _POWER_PRIORITY.index(prev) < _POWER_PRIORITY.index(lname):
                continue
            power_seen[key] = lname
        store(row, m[0], value * m[1])
    if not rows and lost is not None:
        lost.append("no gpu_* samples in the scrape (cut short, or not the ROCm exporter?)")
    return plausible(list(rows.values()), lost)
