"""NVIDIA GPUs through NVML (nvidia-ml-py's ``pynvml``).

Units, as NVML documents them: power and limits in mW, energy counter in mJ, clocks in
MHz, temperatures in C, memory in bytes, violation times in ns.
"""

from __future__ import annotations

from typing import Any, Required, TypedDict

from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import call, text

# NVML clock-event (throttle) reason bits, from nvml.h / pynvml
# (nvmlClocksEventReason*: GpuIdle=0x1, ApplicationsClocksSetting=0x2, SwPowerCap=0x4,
# HwSlowdown=0x8, SyncBoost=0x10, SwThermalSlowdown=0x20, HwThermalSlowdown=0x40,
# HwPowerBrakeSlowdown=0x80, DisplayClockSetting=0x100).
NV_THROTTLE_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}
# Reasons that mean "the GPU is being held back" (idle, app clocks, display, sync boost
# are not a health problem).
NV_THROTTLE_HARMFUL = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def nv_throttle_names(mask: int | None) -> str | None:
    """Bitmask -> comma-separated active reasons that matter (idle etc. left out)."""
    if mask is None:
        return None
    names = [n for n, b in NV_THROTTLE_BITS.items() if mask & b and b & NV_THROTTLE_HARMFUL]
    return ",".join(names)


def open_nvml() -> tuple[Any, str | None]:
    """Import pynvml and initialise NVML: (module, None), or (None, why not)."""
    try:
        import pynvml
    except Exception as exc:  # any import failure means "not available"
        return None, f"nvidia-ml-py not importable ({type(exc).__name__}: {exc})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML not available ({exc})"
    return pynvml, None


def close_nvml(nv: Any) -> None:
    if nv is not None:
        call(nv.nvmlShutdown)


def device_handles(nv: Any) -> list[Any]:
    """Handles of all GPUs, in NVML index order (raises if NVML cannot count them)."""
    return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]


def bus_id(nv: Any, h: Any) -> str | None:
    """The GPU's PCI bus id in the canonical form (NVML says 00000000:CD:00.0)."""
    return normalize_bus_id(text(getattr(call(nv.nvmlDeviceGetPciInfo, h), "busId", None)))


def cuda_driver_version(nv: Any) -> str | None:
    """The CUDA version the driver supports, "12.4" (NVML encodes it as 12040)."""
    v = call(nv.nvmlSystemGetCudaDriverVersion_v2)
    return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"


def field_value(nv: Any, h: Any, field_id: int) -> float | None:
    """One nvmlDeviceGetFieldValues field as a number, None when unsupported."""
    vals = call(nv.nvmlDeviceGetFieldValues, h, [field_id])
    if not vals or vals[0].nvmlReturn != nv.NVML_SUCCESS:
        return None
    v = vals[0]
    attr = {
        nv.NVML_VALUE_TYPE_DOUBLE: "dVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nv.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    }.get(v.valueType)
    return float(getattr(v.value, attr)) if attr else None


def active_nvlinks(nv: Any, h: Any) -> list[int]:
    """Indices of the GPU's enabled NVLinks (the first unsupported link ends the list)."""
    links = []
    for link in range(nv.NVML_NVLINK_MAX_LINKS):
        state = call(nv.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            break
        if state == nv.NVML_FEATURE_ENABLED:
            links.append(link)
    return links


def nvlink_errors(nv: Any, h: Any, links: list[int]) -> int | None:
    """Sum of the replay, recovery and CRC error counters over ``links``; None without."""
    if not links:
        return None
    counters = (
        nv.NVML_NVLINK_ERROR_DL_REPLAY,
        nv.NVML_NVLINK_ERROR_DL_RECOVERY,
        nv.NVML_NVLINK_ERROR_DL_CRC_FLIT,
        nv.NVML_NVLINK_ERROR_DL_CRC_DATA,
    )
    return sum(
        call(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, c) or 0
        for link in links
        for c in counters
    )


class NvmlGpu(TypedDict, total=False):
    """One GPU of :func:`inventory`; a key is absent when NVML does not support it."""

    index: Required[int]
    name: Required[str | None]
    bdf: str
    ecc_uncorrected: int  # volatile (since driver load)
    ecc_corrected: int
    retired_pages_dbe: int  # pages retired for double-bit ECC errors
    retired_pages_pending: int  # NVML's pending flag (0/1)
    remapped_rows: list[int]  # NVML's (correctable, uncorrectable, pending, failure)
    pcie_gen: int
    pcie_gen_max: int
    pcie_width: int
    pcie_width_max: int


class NvmlInventory(TypedDict, total=False):
    """:func:`inventory`: ``available`` False with a ``problem`` when NVML cannot be used."""

    available: Required[bool]
    problem: str | None
    driver_version: str | None
    cuda_version: str
    gpus: list[NvmlGpu]


def inventory() -> NvmlInventory:
    """NVIDIA GPUs with their ECC, retired-page, row-remap and PCIe link state, for the
    doctor."""
    nv, reason = open_nvml()
    if nv is None:
        return {"available": False, "problem": reason}
    gpus: list[NvmlGpu] = []
    out: NvmlInventory = {"available": True, "gpus": gpus}
    try:
        out["driver_version"] = text(nv.nvmlSystemGetDriverVersion())
        cuda = cuda_driver_version(nv)
        if cuda:
            out["cuda_version"] = cuda
        for i, h in enumerate(device_handles(nv)):
            g: NvmlGpu = {"index": i, "name": text(nv.nvmlDeviceGetName(h))}
            bdf = bus_id(nv, h)
            if bdf:
                g["bdf"] = bdf
            unc, corr = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
            vol = nv.NVML_VOLATILE_ECC
            # each NotSupported on many boards (call gives None): the key is left out
            if (v := call(nv.nvmlDeviceGetTotalEccErrors, h, unc, vol)) is not None:
                g["ecc_uncorrected"] = v
            if (v := call(nv.nvmlDeviceGetTotalEccErrors, h, corr, vol)) is not None:
                g["ecc_corrected"] = v
            dbe = nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            if (v := call(nv.nvmlDeviceGetRetiredPages, h, dbe)) is not None:
                g["retired_pages_dbe"] = len(v)
            if (v := call(nv.nvmlDeviceGetRetiredPagesPendingStatus, h)) is not None:
                g["retired_pages_pending"] = v
            if (v := call(nv.nvmlDeviceGetRemappedRows, h)) is not None:
                g["remapped_rows"] = list(v)
            if (v := call(nv.nvmlDeviceGetCurrPcieLinkGeneration, h)) is not None:
                g["pcie_gen"] = v
            if (v := call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h)) is not None:
                g["pcie_gen_max"] = v
            if (v := call(nv.nvmlDeviceGetCurrPcieLinkWidth, h)) is not None:
                g["pcie_width"] = v
            if (v := call(nv.nvmlDeviceGetMaxPcieLinkWidth, h)) is not None:
                g["pcie_width_max"] = v
            gpus.append(g)
    except Exception as exc:  # a GPU lost mid-query: report what was read
        out["problem"] = f"NVML query failed: {exc}"
    finally:
        close_nvml(nv)
    return out
