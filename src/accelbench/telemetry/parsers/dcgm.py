"""dcgm-exporter ``/metrics`` scrapes."""

from __future__ import annotations

from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.nvml import nv_throttle_names
from accelbench.telemetry.parsers.prometheus import finite, prometheus_samples, store
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, plausible

# dcgm-exporter field -> (column, multiplier to base unit). Units from the DCGM field
# help strings shipped in the exporter's default counters CSV ("in MHz", "in W", "in mJ",
# "in MiB", "in us").
_DCGM_MAP: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("clock_sm_hz", 1e6),
    "DCGM_FI_DEV_MEM_CLOCK": ("clock_mem_hz", 1e6),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_gpu_c", 1.0),
    "DCGM_FI_DEV_MEMORY_TEMP": ("temp_mem_c", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("util_gpu", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem", 0.01),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", 1024.0**2),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remapped_rows_unc", 1.0),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("remapped_rows_corr", 1.0),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remapped_rows_failure", 1.0),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remapped_rows_pending", 1.0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected_volatile", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected_volatile", 1.0),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("ecc_corrected_aggregate", 1.0),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("ecc_uncorrected_aggregate", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_mask", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_mask", 1.0),
    "DCGM_FI_DEV_POWER_VIOLATION": ("throttle_power_s", 1e-6),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("throttle_thermal_s", 1e-6),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_gen", 1.0),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_width", 1.0),
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": ("pcie_gen_max", 1.0),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": ("pcie_width_max", 1.0),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink_errors", 1.0),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink_errors", 1.0),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink_errors", 1.0),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink_errors", 1.0),
}


def parse_dcgm_prometheus(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """A dcgm-exporter ``/metrics`` scrape -> one row per GPU (label ``gpu``/``UUID``).

    Memory total is ``FB_USED + FB_FREE + FB_RESERVED`` (dcgm-exporter's default counters
    carry no total). Fields dcgm-exporter leaves out (e.g. power, energy and PCIe inside a
    vGPU guest) stay null.
    """
    rows: dict[str, Row] = {}
    fb: dict[str, dict[str, float]] = {}
    for name, labels, value in prometheus_samples(text, lost, notes):
        if not name.startswith("DCGM_FI_"):
            continue
        if labels.get("GPU_I_ID"):  # a MIG instance: keep the whole-GPU view only
            continue
        key = labels.get("UUID") or labels.get("gpu") or "0"
        row = rows.get(key)
        if row is None:
            gpu = labels.get("gpu")
            row = new_row(
                t_ns=t_ns,
                source="dcgm-exporter",
                kind=KIND_GPU,
                vendor="nvidia",
                model=labels.get("modelName"),
                device_index=int(gpu) if gpu and gpu.isdigit() else len(rows),
                bus_id=normalize_bus_id(labels.get("pci_bus_id")),
                uuid=labels.get("UUID"),
                driver_version=labels.get("DCGM_FI_DRIVER_VERSION"),
            )
            rows[key] = row
        m = _DCGM_MAP.get(name)
        part = name in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED")
        if not (m or part) or not finite(f"{name} (GPU {key})", value, lost):
            continue  # a field not read; or NaN ("no reading"), +-Inf (lost)
        if part:
            fb.setdefault(key, {})[name] = value
        if m:
            store(row, m[0], value * m[1])
    for key, parts in fb.items():
        if len(parts) == 3:
            rows[key]["mem_total_bytes"] = int(sum(parts.values()) * 1024**2)
    if not rows and lost is not None:
        lost.append("no DCGM_FI_ samples in the scrape (cut short, or not dcgm-exporter?)")
    for row in rows.values():
        if row["throttle_mask"] is not None:
            row["throttle_reasons"] = nv_throttle_names(row["throttle_mask"])
    return plausible(list(rows.values()), lost)
