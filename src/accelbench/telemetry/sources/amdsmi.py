"""AMD GPUs sampled through amdsmi (units: :mod:`accelbench.gpu.amdsmi`)."""

from __future__ import annotations

import time
from typing import Any

from accelbench.gpu import amdsmi
from accelbench.gpu.values import call, text, to_float, to_int
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, observed, pcie_gen_from_speed
from accelbench.telemetry.sources.base import Source

# Bits of our AMD throttle mask, from amdsmi_get_violation_status "active_*" flags.
AMD_THROTTLE_BITS = {
    "ppt_power": 0x1,
    "socket_thermal": 0x2,
    "prochot_thermal": 0x4,
    "vr_thermal": 0x8,
    "hbm_thermal": 0x10,
}
_AMD_ACTIVE_KEYS = {
    "active_ppt_pwr": "ppt_power",
    "active_socket_thrm": "socket_thermal",
    "active_prochot_thrm": "prochot_thermal",
    "active_vr_thrm": "vr_thermal",
    "active_hbm_thrm": "hbm_thermal",
}


class AmdSmiSource(Source):
    name = "amdsmi"

    def __init__(self) -> None:
        self._a: Any = None
        self._handles: list[Any] = []
        self._static: list[Row] = []

    def probe(self) -> str | None:
        a, reason = amdsmi.open_amdsmi()
        if a is None:
            return reason
        self._a = a
        try:
            self._handles = list(a.amdsmi_get_processor_handles())
        except Exception as exc:
            self.close()
            return f"amdsmi found no processors ({exc})"
        if not self._handles:
            self.close()
            return "amdsmi found no AMD GPU"
        for h in self._handles:
            asic = call(a.amdsmi_get_gpu_asic_info, h) or {}
            cap = call(a.amdsmi_get_power_cap_info, h) or {}
            crit = call(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.HOTSPOT,
                a.AmdSmiTemperatureMetric.CRITICAL,
            )
            emerg = call(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.HOTSPOT,
                a.AmdSmiTemperatureMetric.EMERGENCY,
            )
            mem_crit = call(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.VRAM,
                a.AmdSmiTemperatureMetric.CRITICAL,
            )
            total = call(a.amdsmi_get_gpu_memory_total, h, a.AmdSmiMemoryType.VRAM)
            power_cap = to_float(cap.get("power_cap"))
            self._static.append(  # the observed ones only: laid over each sample
                observed(
                    {
                        "model": text(asic.get("market_name")),
                        "serial": text(asic.get("asic_serial")),
                        "uuid": text(call(a.amdsmi_get_gpu_device_uuid, h)),
                        "bus_id": amdsmi.bus_id(a, h),
                        "mem_total_bytes": total,
                        "power_limit_w": None if power_cap is None else power_cap / 1e6,
                        "temp_slowdown_c": to_float(crit),
                        "temp_shutdown_c": to_float(emerg),
                        "temp_mem_max_c": to_float(mem_crit),
                    }
                )
            )
        return None

    def sample(self, t_ns: int) -> list[Row]:
        a = self._a
        rows = []
        for i, h in enumerate(self._handles):
            act = call(a.amdsmi_get_gpu_activity, h) or {}
            pw = call(a.amdsmi_get_power_info, h) or {}
            en = call(a.amdsmi_get_energy_count, h) or {}
            gfx = call(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.GFX) or {}
            memclk = call(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.MEM) or {}
            ecc = call(a.amdsmi_get_gpu_total_ecc_count, h) or {}
            pcie = call(a.amdsmi_get_pcie_info, h) or {}
            viol = call(a.amdsmi_get_violation_status, h) or {}
            xgmi = call(a.amdsmi_gpu_xgmi_error_status, h)
            metric = pcie.get("pcie_metric", {}) if isinstance(pcie, dict) else {}
            static = pcie.get("pcie_static", {}) if isinstance(pcie, dict) else {}

            def temp(kind: Any, _h: Any = h) -> float | None:
                return to_float(
                    call(a.amdsmi_get_temp_metric, _h, kind, a.AmdSmiTemperatureMetric.CURRENT)
                )

            power = None
            for key in ("socket_power", "current_socket_power", "average_socket_power"):
                power = to_float(pw.get(key))
                if power:
                    break
            energy = None
            acc, res = (
                to_float(en.get("energy_accumulator")),
                to_float(en.get("counter_resolution")),
            )
            if acc is not None and res is not None:
                energy = acc * res * 1e-6
            mask = None
            if viol:
                mask = 0
                for key, name in _AMD_ACTIVE_KEYS.items():
                    if viol.get(key) is True:
                        mask |= AMD_THROTTLE_BITS[name]
            gfx_act, umc_act = to_float(act.get("gfx_activity")), to_float(act.get("umc_activity"))
            hotspot = temp(a.AmdSmiTemperatureType.HOTSPOT)
            if hotspot is None:
                hotspot = temp(a.AmdSmiTemperatureType.JUNCTION)
            row = new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_GPU,
                vendor="amd",
                device_index=i,
                util_gpu=None if gfx_act is None else gfx_act / 100.0,
                util_mem=None if umc_act is None else umc_act / 100.0,
                mem_used_bytes=call(a.amdsmi_get_gpu_memory_usage, h, a.AmdSmiMemoryType.VRAM),
                power_w=power,
                energy_j=energy,
                temp_gpu_c=temp(a.AmdSmiTemperatureType.EDGE),
                temp_hotspot_c=hotspot,
                temp_mem_c=temp(a.AmdSmiTemperatureType.VRAM),
                clock_sm_hz=to_float(gfx.get("clk"), "MHz"),
                clock_mem_hz=to_float(memclk.get("clk"), "MHz"),
                clock_sm_max_hz=to_float(gfx.get("max_clk"), "MHz"),
                clock_mem_max_hz=to_float(memclk.get("max_clk"), "MHz"),
                throttle_mask=mask,
                throttle_reasons=None
                if mask is None
                else ",".join(n for n, b in AMD_THROTTLE_BITS.items() if mask & b),
                ecc_corrected_aggregate=to_int(ecc.get("correctable_count")),
                ecc_uncorrected_aggregate=to_int(ecc.get("uncorrectable_count")),
                ecc_deferred=to_int(ecc.get("deferred_count")),
                pcie_gen=pcie_gen_from_speed(_mts(to_float(metric.get("pcie_speed")))),
                pcie_gen_max=pcie_gen_from_speed(_mts(to_float(static.get("max_pcie_speed")))),
                pcie_width=to_int(metric.get("pcie_width")),
                pcie_width_max=to_int(static.get("max_pcie_width")),
                pcie_replay=to_int(metric.get("pcie_replay_count")),
                xgmi_errors=None if xgmi is None else int(xgmi),
            )
            row.update(self._static[i])
            rows.append(row)
        return rows

    def close(self) -> None:
        amdsmi.close_amdsmi(self._a)
        self._a = None
        self._handles = []


def _mts(v: float | None) -> float | None:
    """A PCIe rate in MT/s; amdsmi reports MT/s (32000), a few tools GT/s (32)."""
    if v is None:
        return None
    return v * 1000.0 if v < 1000 else v
