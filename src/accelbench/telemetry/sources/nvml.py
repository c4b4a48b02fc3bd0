"""NVIDIA GPUs sampled through NVML (units: :mod:`accelbench.gpu.nvml`)."""

from __future__ import annotations

import time
from typing import Any

from accelbench.gpu import nvml
from accelbench.gpu.nvml import nv_throttle_names
from accelbench.gpu.values import call, text
from accelbench.telemetry.schema import KIND_GPU, Row, new_row
from accelbench.telemetry.sources.base import Source


class NvmlSource(Source):
    name = "nvml"

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._static: list[Row] = []
        self._links: list[list[int]] = []

    def probe(self) -> str | None:
        nv, reason = nvml.open_nvml()
        if nv is None:
            return reason
        self._nvml = nv
        try:
            self._handles = nvml.device_handles(nv)
        except Exception as exc:
            self.close()
            return f"NVML could not list the GPUs ({exc})"
        if not self._handles:
            self.close()
            return "NVML found no NVIDIA GPU"
        driver = text(call(nv.nvmlSystemGetDriverVersion))
        th = nv.nvmlDeviceGetTemperatureThreshold
        for h in self._handles:
            self._static.append(
                {
                    "model": text(call(nv.nvmlDeviceGetName, h)),
                    "uuid": text(call(nv.nvmlDeviceGetUUID, h)),
                    "serial": text(call(nv.nvmlDeviceGetSerial, h)),
                    "bus_id": nvml.bus_id(nv, h),
                    "driver_version": driver,
                    "temp_slowdown_c": call(th, h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                    "temp_shutdown_c": call(th, h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
                    "temp_mem_max_c": call(th, h, nv.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
                    "clock_sm_max_hz": _mhz(
                        call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)
                    ),
                    "clock_mem_max_hz": _mhz(
                        call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
                    ),
                    "pcie_gen_max": call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width_max": call(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                }
            )
            self._links.append(nvml.active_nvlinks(nv, h))
        return None

    def sample(self, t_ns: int) -> list[Row]:
        p = self._nvml
        rows = []
        for i, h in enumerate(self._handles):
            util = call(p.nvmlDeviceGetUtilizationRates, h)
            mem = call(p.nvmlDeviceGetMemoryInfo, h)
            power_mw = call(p.nvmlDeviceGetPowerUsage, h)
            limit_mw = call(p.nvmlDeviceGetEnforcedPowerLimit, h)
            energy_mj = call(p.nvmlDeviceGetTotalEnergyConsumption, h)
            mask = call(p.nvmlDeviceGetCurrentClocksEventReasons, h)
            if mask is None:
                mask = call(p.nvmlDeviceGetCurrentClocksThrottleReasons, h)
            viol_p = call(p.nvmlDeviceGetViolationStatus, h, p.NVML_PERF_POLICY_POWER)
            viol_t = call(p.nvmlDeviceGetViolationStatus, h, p.NVML_PERF_POLICY_THERMAL)
            remap = call(p.nvmlDeviceGetRemappedRows, h)

            def ecc(kind: int, scope: int, _h: Any = h) -> int | None:
                return call(p.nvmlDeviceGetTotalEccErrors, _h, kind, scope)

            nvlink = nvml.nvlink_errors(p, h, self._links[i])
            row = new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_GPU,
                vendor="nvidia",
                device_index=i,
                util_gpu=None if util is None else util.gpu / 100.0,
                util_mem=None if util is None else util.memory / 100.0,
                mem_used_bytes=None if mem is None else mem.used,
                mem_total_bytes=None if mem is None else mem.total,
                power_w=None if power_mw is None else power_mw / 1000.0,
                power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
                energy_j=None if energy_mj is None else energy_mj / 1000.0,
                temp_gpu_c=call(p.nvmlDeviceGetTemperature, h, p.NVML_TEMPERATURE_GPU),
                temp_mem_c=nvml.field_value(p, h, p.NVML_FI_DEV_MEMORY_TEMP),
                clock_sm_hz=_mhz(call(p.nvmlDeviceGetClockInfo, h, p.NVML_CLOCK_SM)),
                clock_mem_hz=_mhz(call(p.nvmlDeviceGetClockInfo, h, p.NVML_CLOCK_MEM)),
                throttle_mask=mask,
                throttle_reasons=nv_throttle_names(mask),
                throttle_power_s=None if viol_p is None else viol_p.violationTime / 1e9,
                throttle_thermal_s=None if viol_t is None else viol_t.violationTime / 1e9,
                ecc_corrected_volatile=ecc(p.NVML_MEMORY_ERROR_TYPE_CORRECTED, p.NVML_VOLATILE_ECC),
                ecc_uncorrected_volatile=ecc(
                    p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, p.NVML_VOLATILE_ECC
                ),
                ecc_corrected_aggregate=ecc(
                    p.NVML_MEMORY_ERROR_TYPE_CORRECTED, p.NVML_AGGREGATE_ECC
                ),
                ecc_uncorrected_aggregate=ecc(
                    p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, p.NVML_AGGREGATE_ECC
                ),
                remapped_rows_corr=None if remap is None else remap[0],
                remapped_rows_unc=None if remap is None else remap[1],
                remapped_rows_pending=None if remap is None else bool(remap[2]),
                remapped_rows_failure=None if remap is None else bool(remap[3]),
                pcie_gen=call(p.nvmlDeviceGetCurrPcieLinkGeneration, h),
                pcie_width=call(p.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_replay=call(p.nvmlDeviceGetPcieReplayCounter, h),
                nvlink_errors=nvlink,
            )
            row.update(self._static[i])
            rows.append(row)
        return rows

    def close(self) -> None:
        nvml.close_nvml(self._nvml)
        self._nvml = None
        self._handles = []


def _mhz(v: Any) -> float | None:
    return None if v is None else float(v) * 1e6
