"""Live telemetry sources. Each is optional and detected at run time.

A source has a ``name``, a ``probe()`` that returns ``None`` when it works or a reason
when it does not (it never raises for a missing library, driver or device), a
``sample(t_ns)`` that returns schema rows, and ``close()``. A failing call inside
``sample`` leaves that column null; it does not lose the row.

Units, as the libraries document them:
- NVML (nvidia-ml-py): power and limits in mW, energy counter in mJ, clocks in MHz,
  temperatures in C, memory in bytes, violation times in ns.
- amdsmi: activity in %, memory in bytes, power in W (``amdsmi_get_power_info``),
  power cap in uW, energy = ``energy_accumulator * counter_resolution`` in uJ, clocks
  in MHz, temperatures in C, PCIe speed in MT/s.
- amdgpu sysfs / hwmon: ``gpu_busy_percent`` in %, ``mem_info_vram_*`` in bytes,
  ``power1_average``/``power1_input``/``power1_cap`` in uW, ``temp*_input`` in m°C.
"""

from __future__ import annotations

import abc
import contextlib
import io
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from accelbench.telemetry.parsers import (
    nv_throttle_names,
    parse_amd_smi_json,
    parse_nvidia_smi_xml,
    parse_rocm_smi_json,
    parse_server_metrics,
)
from accelbench.telemetry.schema import (
    KIND_GPU,
    KIND_HOST,
    new_row,
    normalise_bus_id,
    pcie_gen_from_speed,
)


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a library function; any error (not supported, no permission) -> None."""
    try:
        return fn(*args)
    except Exception:
        return None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return str(v)


def _num(v: Any) -> float | None:
    """amdsmi returns "N/A" strings for unsupported values."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    return None


class Source(abc.ABC):
    """Base class: see the module docstring."""

    name = "source"

    @abc.abstractmethod
    def probe(self) -> str | None:
        """None when the source works here, else the reason it does not."""

    @abc.abstractmethod
    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        """One row per device (common schema), stamped ``t_ns``."""

    def close(self) -> None:
        return None


# ----------------------------------------------------------------------------
# NVIDIA through NVML


class NvmlSource(Source):
    name = "nvml"

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._static: list[dict[str, Any]] = []
        self._links: list[list[int]] = []

    def probe(self) -> str | None:
        try:
            import pynvml
        except Exception as exc:
            return f"nvidia-ml-py not importable ({type(exc).__name__}: {exc})"
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"NVML not available ({exc})"
        self._nvml = pynvml
        try:
            count = pynvml.nvmlDeviceGetCount()
        except Exception as exc:
            self.close()
            return f"NVML device count failed ({exc})"
        if count == 0:
            self.close()
            return "NVML found no NVIDIA GPU"
        driver = _str(_try(pynvml.nvmlSystemGetDriverVersion))
        for i in range(count):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            self._handles.append(h)
            pci = _try(pynvml.nvmlDeviceGetPciInfo, h)
            th = pynvml.nvmlDeviceGetTemperatureThreshold
            self._static.append(
                {
                    "model": _str(_try(pynvml.nvmlDeviceGetName, h)),
                    "uuid": _str(_try(pynvml.nvmlDeviceGetUUID, h)),
                    "serial": _str(_try(pynvml.nvmlDeviceGetSerial, h)),
                    "bus_id": normalise_bus_id(_str(getattr(pci, "busId", None))),
                    "driver_version": driver,
                    "temp_slowdown_c": _try(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                    "temp_shutdown_c": _try(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
                    "temp_mem_max_c": _try(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
                    "clock_sm_max_hz": _mhz(
                        _try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM)
                    ),
                    "clock_mem_max_hz": _mhz(
                        _try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM)
                    ),
                    "pcie_gen_max": _try(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width_max": _try(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                }
            )
            links = []
            for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
                state = _try(pynvml.nvmlDeviceGetNvLinkState, h, link)
                if state is None:
                    break
                if state == pynvml.NVML_FEATURE_ENABLED:
                    links.append(link)
            self._links.append(links)
        return None

    def _field(self, h: Any, field_id: int) -> float | None:
        p = self._nvml
        vals = _try(p.nvmlDeviceGetFieldValues, h, [field_id])
        if not vals or vals[0].nvmlReturn != p.NVML_SUCCESS:
            return None
        v = vals[0]
        attr = {
            p.NVML_VALUE_TYPE_DOUBLE: "dVal",
            p.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
            p.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
            p.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
            p.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        }.get(v.valueType)
        return float(getattr(v.value, attr)) if attr else None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        p = self._nvml
        rows = []
        for i, h in enumerate(self._handles):
            util = _try(p.nvmlDeviceGetUtilizationRates, h)
            mem = _try(p.nvmlDeviceGetMemoryInfo, h)
            power_mw = _try(p.nvmlDeviceGetPowerUsage, h)
            limit_mw = _try(p.nvmlDeviceGetEnforcedPowerLimit, h)
            energy_mj = _try(p.nvmlDeviceGetTotalEnergyConsumption, h)
            mask = _try(p.nvmlDeviceGetCurrentClocksEventReasons, h)
            if mask is None:
                mask = _try(p.nvmlDeviceGetCurrentClocksThrottleReasons, h)
            viol_p = _try(p.nvmlDeviceGetViolationStatus, h, p.NVML_PERF_POLICY_POWER)
            viol_t = _try(p.nvmlDeviceGetViolationStatus, h, p.NVML_PERF_POLICY_THERMAL)
            remap = _try(p.nvmlDeviceGetRemappedRows, h)

            def ecc(kind: int, scope: int, _h: Any = h) -> int | None:
                return _try(p.nvmlDeviceGetTotalEccErrors, _h, kind, scope)

            nvlink = None
            if self._links[i]:
                total = 0
                counters = (
                    p.NVML_NVLINK_ERROR_DL_REPLAY,
                    p.NVML_NVLINK_ERROR_DL_RECOVERY,
                    p.NVML_NVLINK_ERROR_DL_CRC_FLIT,
                    p.NVML_NVLINK_ERROR_DL_CRC_DATA,
                )
                for link in self._links[i]:
                    for c in counters:
                        total += _try(p.nvmlDeviceGetNvLinkErrorCounter, h, link, c) or 0
                nvlink = total
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
                temp_gpu_c=_try(p.nvmlDeviceGetTemperature, h, p.NVML_TEMPERATURE_GPU),
                temp_mem_c=self._field(h, p.NVML_FI_DEV_MEMORY_TEMP),
                clock_sm_hz=_mhz(_try(p.nvmlDeviceGetClockInfo, h, p.NVML_CLOCK_SM)),
                clock_mem_hz=_mhz(_try(p.nvmlDeviceGetClockInfo, h, p.NVML_CLOCK_MEM)),
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
                pcie_gen=_try(p.nvmlDeviceGetCurrPcieLinkGeneration, h),
                pcie_width=_try(p.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_replay=_try(p.nvmlDeviceGetPcieReplayCounter, h),
                nvlink_errors=nvlink,
            )
            row.update(self._static[i])
            rows.append(row)
        return rows

    def close(self) -> None:
        if self._nvml is not None:
            _try(self._nvml.nvmlShutdown)
            self._nvml = None
        self._handles = []


def _mhz(v: Any) -> float | None:
    return None if v is None else float(v) * 1e6


def _mts(v: float | None) -> float | None:
    """A PCIe rate in MT/s; amdsmi reports MT/s (32000), a few tools GT/s (32)."""
    if v is None:
        return None
    return v * 1000.0 if v < 1000 else v


# ----------------------------------------------------------------------------
# AMD through amdsmi

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


def import_amdsmi() -> tuple[Any, str | None]:
    """Import amdsmi. Without ROCm it raises KeyError (not ImportError), hence the broad
    except. Returns (module or None, reason or None)."""
    sink = io.StringIO()  # amdsmi prints its library-loading failure to stdout
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            import amdsmi
    except Exception as exc:
        return None, f"amdsmi not importable ({type(exc).__name__}: {exc})"
    return amdsmi, None


class AmdSmiSource(Source):
    name = "amdsmi"

    def __init__(self) -> None:
        self._a: Any = None
        self._handles: list[Any] = []
        self._static: list[dict[str, Any]] = []

    def probe(self) -> str | None:
        a, reason = import_amdsmi()
        if a is None:
            return reason
        try:
            a.amdsmi_init(a.AmdSmiInitFlags.INIT_AMD_GPUS)
        except Exception as exc:
            return f"amdsmi_init failed ({type(exc).__name__}: {exc})"
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
            asic = _try(a.amdsmi_get_gpu_asic_info, h) or {}
            cap = _try(a.amdsmi_get_power_cap_info, h) or {}
            crit = _try(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.HOTSPOT,
                a.AmdSmiTemperatureMetric.CRITICAL,
            )
            emerg = _try(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.HOTSPOT,
                a.AmdSmiTemperatureMetric.EMERGENCY,
            )
            mem_crit = _try(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.VRAM,
                a.AmdSmiTemperatureMetric.CRITICAL,
            )
            total = _try(a.amdsmi_get_gpu_memory_total, h, a.AmdSmiMemoryType.VRAM)
            power_cap = _num(cap.get("power_cap"))
            self._static.append(
                {
                    "model": _str(asic.get("market_name")),
                    "serial": _str(asic.get("asic_serial")),
                    "uuid": _str(_try(a.amdsmi_get_gpu_device_uuid, h)),
                    "bus_id": normalise_bus_id(_str(_try(a.amdsmi_get_gpu_device_bdf, h))),
                    "mem_total_bytes": total,
                    "power_limit_w": None if power_cap is None else power_cap / 1e6,
                    "temp_slowdown_c": _num(crit),
                    "temp_shutdown_c": _num(emerg),
                    "temp_mem_max_c": _num(mem_crit),
                }
            )
        return None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        a = self._a
        rows = []
        for i, h in enumerate(self._handles):
            act = _try(a.amdsmi_get_gpu_activity, h) or {}
            pw = _try(a.amdsmi_get_power_info, h) or {}
            en = _try(a.amdsmi_get_energy_count, h) or {}
            gfx = _try(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.GFX) or {}
            memclk = _try(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.MEM) or {}
            ecc = _try(a.amdsmi_get_gpu_total_ecc_count, h) or {}
            pcie = _try(a.amdsmi_get_pcie_info, h) or {}
            viol = _try(a.amdsmi_get_violation_status, h) or {}
            xgmi = _try(a.amdsmi_gpu_xgmi_error_status, h)
            metric = pcie.get("pcie_metric", {}) if isinstance(pcie, dict) else {}
            static = pcie.get("pcie_static", {}) if isinstance(pcie, dict) else {}

            def temp(kind: Any, _h: Any = h) -> float | None:
                return _num(
                    _try(a.amdsmi_get_temp_metric, _h, kind, a.AmdSmiTemperatureMetric.CURRENT)
                )

            power = None
            for key in ("socket_power", "current_socket_power", "average_socket_power"):
                power = _num(pw.get(key))
                if power:
                    break
            energy = None
            acc, res = _num(en.get("energy_accumulator")), _num(en.get("counter_resolution"))
            if acc is not None and res is not None:
                energy = acc * res * 1e-6
            mask = None
            if viol:
                mask = 0
                for key, name in _AMD_ACTIVE_KEYS.items():
                    if viol.get(key) is True:
                        mask |= AMD_THROTTLE_BITS[name]
            gfx_act, umc_act = _num(act.get("gfx_activity")), _num(act.get("umc_activity"))
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
                mem_used_bytes=_try(a.amdsmi_get_gpu_memory_usage, h, a.AmdSmiMemoryType.VRAM),
                power_w=power,
                energy_j=energy,
                temp_gpu_c=temp(a.AmdSmiTemperatureType.EDGE),
                temp_hotspot_c=hotspot,
                temp_mem_c=temp(a.AmdSmiTemperatureType.VRAM),
                clock_sm_hz=_mhz(_num(gfx.get("clk"))),
                clock_mem_hz=_mhz(_num(memclk.get("clk"))),
                clock_sm_max_hz=_mhz(_num(gfx.get("max_clk"))),
                clock_mem_max_hz=_mhz(_num(memclk.get("max_clk"))),
                throttle_mask=mask,
                throttle_reasons=None
                if mask is None
                else ",".join(n for n, b in AMD_THROTTLE_BITS.items() if mask & b),
                ecc_corrected_aggregate=_num(ecc.get("correctable_count")),
                ecc_uncorrected_aggregate=_num(ecc.get("uncorrectable_count")),
                ecc_deferred=_num(ecc.get("deferred_count")),
                pcie_gen=pcie_gen_from_speed(_mts(_num(metric.get("pcie_speed")))),
                pcie_gen_max=pcie_gen_from_speed(_mts(_num(static.get("max_pcie_speed")))),
                pcie_width=_num(metric.get("pcie_width")),
                pcie_width_max=_num(static.get("max_pcie_width")),
                pcie_replay=_num(metric.get("pcie_replay_count")),
                xgmi_errors=None if xgmi is None else int(xgmi),
            )
            row.update({k: v for k, v in self._static[i].items() if v is not None})
            rows.append(row)
        return rows

    def close(self) -> None:
        if self._a is not None:
            _try(self._a.amdsmi_shut_down)
            self._a = None
        self._handles = []


# ----------------------------------------------------------------------------
# amdgpu sysfs (no library needed)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None


def _read_num(path: Path) -> float | None:
    s = _read(path)
    if s is None:
        return None
    try:
        return float(s.split()[0])
    except (ValueError, IndexError):
        return None


class SysfsAmdgpuSource(Source):
    """Reads ``/sys/class/drm/card*/device`` of amdgpu devices (vendor 0x1002)."""

    name = "sysfs"

    def __init__(self, root: Path | str = "/sys/class/drm") -> None:
        self.root = Path(root)
        self._devices: list[Path] = []

    def probe(self) -> str | None:
        if not self.root.is_dir():
            return f"{self.root} does not exist"
        for card in sorted(self.root.glob("card*")):
            if "-" in card.name:  # connectors like card0-DP-1
                continue
            dev = card / "device"
            if _read(dev / "vendor") == "0x1002" and (dev / "gpu_busy_percent").exists():
                self._devices.append(dev)
        if not self._devices:
            return f"no amdgpu device with gpu_busy_percent under {self.root}"
        return None

    @staticmethod
    def _hwmon(dev: Path) -> Path | None:
        hw = sorted((dev / "hwmon").glob("hwmon*"))
        return hw[0] if hw else None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        rows = []
        for i, dev in enumerate(self._devices):
            hw = self._hwmon(dev)
            temps: dict[str, float | None] = {}
            crit: dict[str, float | None] = {}
            power_uw = cap_uw = None
            if hw is not None:
                for inp in hw.glob("temp*_input"):
                    stem = inp.name[: -len("_input")]
                    label = (_read(hw / f"{stem}_label") or stem).lower()
                    v = _read_num(inp)
                    temps[label] = None if v is None else v / 1000.0
                    c = _read_num(hw / f"{stem}_crit")
                    crit[label] = None if c is None else c / 1000.0
                power_uw = _read_num(hw / "power1_average")
                if power_uw is None:
                    power_uw = _read_num(hw / "power1_input")
                cap_uw = _read_num(hw / "power1_cap")
            busy = _read_num(dev / "gpu_busy_percent")
            mem_busy = _read_num(dev / "mem_busy_percent")
            speed = _read(dev / "current_link_speed")
            max_speed = _read(dev / "max_link_speed")
            row = new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_GPU,
                vendor="amd",
                device_index=i,
                bus_id=normalise_bus_id(dev.resolve().name),
                serial=_read(dev / "serial_number"),
                uuid=_read(dev / "unique_id"),
                util_gpu=None if busy is None else busy / 100.0,
                util_mem=None if mem_busy is None else mem_busy / 100.0,
                mem_used_bytes=_read_num(dev / "mem_info_vram_used"),
                mem_total_bytes=_read_num(dev / "mem_info_vram_total"),
                power_w=None if power_uw is None else power_uw / 1e6,
                power_limit_w=None if cap_uw is None else cap_uw / 1e6,
                temp_gpu_c=temps.get("edge"),
                temp_hotspot_c=temps.get("junction"),
                temp_mem_c=temps.get("mem"),
                temp_slowdown_c=crit.get("junction"),
                temp_mem_max_c=crit.get("mem"),
                pcie_gen=_gen_from_sysfs(speed),
                pcie_gen_max=_gen_from_sysfs(max_speed),
                pcie_width=_read_num(dev / "current_link_width"),
                pcie_width_max=_read_num(dev / "max_link_width"),
            )
            rows.append(row)
        return rows


def _gen_from_sysfs(speed: str | None) -> int | None:
    """ "16.0 GT/s PCIe" -> 4."""
    if not speed:
        return None
    try:
        return pcie_gen_from_speed(float(speed.split()[0]) * 1000.0)
    except (ValueError, IndexError):
        return None


# ----------------------------------------------------------------------------
# Command-line tools, for machines with the tools but not the Python libraries


class SmiCommandSource(Source):
    """Runs ``nvidia-smi -q -x``, ``amd-smi metric --json`` or ``rocm-smi -a --json``."""

    COMMANDS: dict[str, tuple[list[str], Callable[..., list[dict[str, Any]]]]] = {
        "nvidia-smi": (["nvidia-smi", "-q", "-x"], parse_nvidia_smi_xml),
        "amd-smi": (["amd-smi", "metric", "--json"], parse_amd_smi_json),
        "rocm-smi": (["rocm-smi", "-a", "--json"], parse_rocm_smi_json),
    }

    def __init__(self, tool: str, timeout_s: float = 10.0) -> None:
        self.name = tool
        self.argv, self.parser = self.COMMANDS[tool]
        self.timeout_s = timeout_s

    def _run(self) -> str:
        out = subprocess.run(
            self.argv, capture_output=True, text=True, timeout=self.timeout_s, check=True
        )
        return out.stdout

    def probe(self) -> str | None:
        if shutil.which(self.argv[0]) is None:
            return f"{self.argv[0]} not on PATH"
        try:
            rows = self.parser(self._run())
        except Exception as exc:
            return f"{' '.join(self.argv)} failed ({type(exc).__name__}: {exc})"
        if not rows:
            return f"{' '.join(self.argv)} listed no GPU"
        return None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        rows = self.parser(self._run(), t_ns=t_ns)
        for r in rows:
            r["wall_ns"] = time.time_ns()
            r["source"] = self.name
        return rows


# ----------------------------------------------------------------------------
# Host and server process


class HostSource(Source):
    """Host CPU and memory, and the RSS/CPU of a server process and its children."""

    name = "host"

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.note: str | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu: Any = None

    def probe(self) -> str | None:
        self._last_cpu = psutil.cpu_times()
        if self.pid is not None:
            try:
                self._procs[self.pid] = psutil.Process(self.pid)
                self._procs[self.pid].cpu_percent(interval=None)
            except psutil.Error as exc:
                # host figures still work; say why the process ones are missing
                self.note = f"server process {self.pid} not found ({exc})"
        return None

    def _cpu_util(self) -> float | None:
        """Busy ratio since the last call, from our own cpu_times deltas (not
        psutil.cpu_percent(None), whose module-wide state other callers would reset)."""
        now = psutil.cpu_times()
        last, self._last_cpu = self._last_cpu, now

        def busy_total(t: Any) -> tuple[float, float]:
            total = sum(t)
            idle = t.idle + getattr(t, "iowait", 0.0)
            return total - idle, total

        b0, t0 = busy_total(last)
        b1, t1 = busy_total(now)
        if t1 <= t0:
            return None
        return min(max((b1 - b0) / (t1 - t0), 0.0), 1.0)

    def _tree(self) -> list[psutil.Process]:
        if self.pid is None:
            return []
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for p in procs:
            cached = self._procs.get(p.pid)
            if cached is None:
                _try(p.cpu_percent, None)  # first call primes it
                self._procs[p.pid] = p
                cached = p
            out.append(cached)
        return out

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        vm = psutil.virtual_memory()
        rss = cpu = None
        tree = self._tree()
        if tree:
            rss = 0
            cpu = 0.0
            for p in tree:
                try:
                    rss += p.memory_info().rss
                    cpu += p.cpu_percent(interval=None) / 100.0
                except psutil.Error:
                    continue
        return [
            new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_HOST,
                cpu_util=self._cpu_util() if self._last_cpu is not None else None,
                host_mem_used_bytes=vm.total - vm.available,
                host_mem_total_bytes=vm.total,
                proc_pid=self.pid,
                proc_rss_bytes=rss,
                proc_cpu_util=cpu,
            )
        ]


class ServerMetricsSource(Source):
    """The inference server's Prometheus ``/metrics`` (vLLM, SGLang, llama.cpp, TGI)."""

    name = "server"

    def __init__(self, url: str, timeout_s: float = 2.0) -> None:
        base = url.rstrip("/")
        for suffix in ("/v1", "/metrics"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        self.url = base + "/metrics"
        self.timeout_s = timeout_s
        self.errors = 0
        self.last_error: str | None = None

    def _fetch(self) -> str:
        req = urllib.request.Request(self.url, headers={"Accept": "text/plain"})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310
            return resp.read().decode("utf-8", "replace")

    def probe(self) -> str | None:
        try:
            text = self._fetch()
        except urllib.error.HTTPError as exc:
            hint = " (llama-server needs --metrics)" if exc.code in (404, 501) else ""
            return f"{self.url} answered HTTP {exc.code}{hint}"
        except (OSError, ValueError) as exc:
            return f"{self.url} unreachable ({exc})"
        try:
            rows = parse_server_metrics(text)
        except Exception as exc:
            return f"{self.url} is not a Prometheus scrape ({exc})"
        if not rows:
            return f"{self.url} has no vLLM, SGLang, llama.cpp or TGI metrics"
        return None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        try:
            rows = parse_server_metrics(self._fetch(), t_ns=t_ns)
        except Exception as exc:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        for r in rows:
            r["wall_ns"] = time.time_ns()
        return rows


# ----------------------------------------------------------------------------
# Detection

SOURCE_NAMES = ("nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi", "sysfs", "host", "server")


def make_source(
    name: str, server_url: str | None = None, server_pid: int | None = None
) -> Source | str:
    """A source by name, or a reason string when it cannot be built."""
    if name == "nvml":
        return NvmlSource()
    if name == "amdsmi":
        return AmdSmiSource()
    if name in SmiCommandSource.COMMANDS:
        return SmiCommandSource(name)
    if name == "sysfs":
        return SysfsAmdgpuSource(os.environ.get("ACCELBENCH_SYSFS_DRM", "/sys/class/drm"))
    if name == "host":
        return HostSource(server_pid)
    if name == "server":
        if not server_url:
            return "no server URL given"
        return ServerMetricsSource(server_url)
    return f"unknown source {name!r} (known: {', '.join(SOURCE_NAMES)})"


def close_sources(sources: list[Source]) -> None:
    """Close every source; a failing close must not hide the others or the results."""
    for src in sources:
        _try(src.close)


def open_sources(
    names: list[str] | None,
    server_url: str | None = None,
    server_pid: int | None = None,
) -> tuple[list[Source], dict[str, str]]:
    """Probe the named sources (or autodetect when ``names`` is None).

    Returns the working sources and a status map ``{name: "ok" | "not available: why"}``.
    Autodetection tries NVML, then nvidia-smi only if NVML failed; amdsmi, then amd-smi,
    rocm-smi and sysfs only if the ones before failed; always host; server when a URL
    is given.
    """
    status: dict[str, str] = {}
    active: list[Source] = []

    def attempt(name: str) -> bool:
        src = make_source(name, server_url, server_pid)
        if isinstance(src, str):
            status[name] = f"not available: {src}"
            return False
        try:
            reason = src.probe()
        except Exception as exc:  # a source must never break the run
            reason = f"probe failed ({type(exc).__name__}: {exc})"
        if reason is None:
            status[name] = "ok"
            active.append(src)
            return True
        status[name] = f"not available: {reason}"
        _try(src.close)
        return False

    if names is not None:
        for n in names:
            attempt(n)
        return active, status
    if not attempt("nvml"):
        attempt("nvidia-smi")
    if not attempt("amdsmi") and not attempt("amd-smi") and not attempt("rocm-smi"):
        attempt("sysfs")
    attempt("host")
    if server_url:
        attempt("server")
    else:
        status["server"] = "not available: no server URL given"
    return active, status
