"""The NVML and amdsmi adapters' sampling path and unit conversions.

No GPU here, so the library calls are replaced: for NVML, the functions of the real
``pynvml`` module are patched (its constants, structures and error classes stay real);
for amdsmi, whose real package cannot load without ROCm, a stand-in module returns
dicts shaped like ``amdsmi_interface.py``'s. These tests check our mapping and units
(mW -> W, mJ -> J, ns -> s, uJ -> J, uW -> W, MT/s -> generation), not the libraries.
The libraries-absent behaviour is tested in test_telemetry_sampling.py.
"""

from __future__ import annotations

import sys
import types
from enum import IntEnum

import pytest

from accelbench.telemetry.sources import AmdSmiSource, NvmlSource

GiB = 1024**3


@pytest.fixture
def fake_nvml(monkeypatch):
    p = pytest.importorskip("pynvml")
    NS = p.NVMLError(p.NVML_ERROR_NOT_SUPPORTED)
    thresholds = {
        p.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 87,
        p.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92,
        p.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: 95,
    }

    def raise_(exc):
        raise exc

    def nvlink_state(h, link):
        if link >= 18:
            raise p.NVMLError(p.NVML_ERROR_INVALID_ARGUMENT)
        return p.NVML_FEATURE_ENABLED

    def field_values(h, ids):
        v = p.c_nvmlFieldValue_t()
        v.fieldId = ids[0]
        v.valueType = p.NVML_VALUE_TYPE_UNSIGNED_INT
        v.nvmlReturn = p.NVML_SUCCESS
        v.value.uiVal = 63
        return [v]

    def ecc(h, kind, scope):
        if scope == p.NVML_AGGREGATE_ECC:
            raise NS
        return 7 if kind == p.NVML_MEMORY_ERROR_TYPE_CORRECTED else 0

    def violation(h, policy):
        t = p.c_nvmlViolationTime_t()
        t.referenceTime = 0
        t.violationTime = 2_500_000_000 if policy == p.NVML_PERF_POLICY_POWER else 0
        return t

    util = p.c_nvmlUtilization_t()
    util.gpu, util.memory = 97, 45
    mem = p.c_nvmlMemory_t()
    mem.total, mem.used, mem.free = 141 * GiB, 120 * GiB, 21 * GiB

    class Pci:
        busId = b"00000000:1B:00.0"

    calls = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
        "nvmlDeviceGetPciInfo": lambda h: Pci(),
        "nvmlDeviceGetName": lambda h: "NVIDIA H200",
        "nvmlDeviceGetUUID": lambda h: "GPU-0000-h200",
        "nvmlDeviceGetSerial": lambda h: raise_(NS),
        "nvmlDeviceGetTemperatureThreshold": lambda h, k: thresholds[k],
        "nvmlDeviceGetMaxClockInfo": lambda h, c: {p.NVML_CLOCK_SM: 1980, p.NVML_CLOCK_MEM: 3201}[
            c
        ],
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 5,
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetNvLinkState": nvlink_state,
        "nvmlDeviceGetUtilizationRates": lambda h: util,
        "nvmlDeviceGetMemoryInfo": lambda h: mem,
        "nvmlDeviceGetPowerUsage": lambda h: 612345,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
        "nvmlDeviceGetTotalEnergyConsumption": lambda h: 123456789,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4 | 0x1,
        "nvmlDeviceGetViolationStatus": violation,
        "nvmlDeviceGetRemappedRows": lambda h: (0, 1, 1, 0),
        "nvmlDeviceGetTotalEccErrors": ecc,
        "nvmlDeviceGetTemperature": lambda h, s: 71,
        "nvmlDeviceGetFieldValues": field_values,
        "nvmlDeviceGetClockInfo": lambda h, c: {p.NVML_CLOCK_SM: 1755, p.NVML_CLOCK_MEM: 3201}[c],
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 5,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetPcieReplayCounter": lambda h: 3,
        "nvmlDeviceGetNvLinkErrorCounter": lambda h, link, c: 1 if link == 0 else 0,
    }
    for name, fn in calls.items():
        monkeypatch.setattr(p, name, fn)
    return p


def test_nvml_sample_units_and_fields(fake_nvml):
    src = NvmlSource()
    assert src.probe() is None
    (r,) = src.sample(1234)
    src.close()
    assert r["t_ns"] == 1234 and r["source"] == "nvml" and r["vendor"] == "nvidia"
    assert r["model"] == "NVIDIA H200" and r["uuid"] == "GPU-0000-h200"
    assert r["bus_id"] == "0000:1b:00.0" and r["serial"] is None  # not supported
    assert r["driver_version"] == "550.54.15"
    assert r["util_gpu"] == pytest.approx(0.97) and r["util_mem"] == pytest.approx(0.45)
    assert r["mem_used_bytes"] == 120 * GiB and r["mem_total_bytes"] == 141 * GiB
    assert r["power_w"] == pytest.approx(612.345)  # mW
    assert r["power_limit_w"] == pytest.approx(700.0)
    assert r["energy_j"] == pytest.approx(123456.789)  # mJ
    assert r["temp_gpu_c"] == 71 and r["temp_mem_c"] == 63.0  # NVML_FI_DEV_MEMORY_TEMP
    assert (r["temp_slowdown_c"], r["temp_shutdown_c"], r["temp_mem_max_c"]) == (87, 92, 95)
    assert r["clock_sm_hz"] == 1755e6 and r["clock_mem_max_hz"] == 3201e6
    assert r["throttle_mask"] == 0x5 and r["throttle_reasons"] == "sw_power_cap"
    assert r["throttle_power_s"] == pytest.approx(2.5) and r["throttle_thermal_s"] == 0.0
    assert r["ecc_corrected_volatile"] == 7 and r["ecc_uncorrected_volatile"] == 0
    assert r["ecc_corrected_aggregate"] is None  # raised NotSupported
    assert (r["remapped_rows_unc"], r["remapped_rows_pending"], r["remapped_rows_failure"]) == (
        1,
        True,
        False,
    )
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_width_max"]) == (
        5,
        5,
        16,
        16,
    )
    assert r["pcie_replay"] == 3
    assert r["nvlink_errors"] == 4  # link 0: one per counter (replay, recovery, CRC flit, data)


# ---------------------------------------------------------------------------- amdsmi


class AmdSmiLibraryException(Exception):
    pass


def _fake_amdsmi() -> types.ModuleType:
    m = types.ModuleType("amdsmi")
    m.AmdSmiInitFlags = IntEnum("AmdSmiInitFlags", {"INIT_AMD_GPUS": 2})
    m.AmdSmiTemperatureType = IntEnum(
        "AmdSmiTemperatureType", {"EDGE": 0, "HOTSPOT": 1, "JUNCTION": 2, "VRAM": 3}
    )
    m.AmdSmiTemperatureMetric = IntEnum(
        "AmdSmiTemperatureMetric", {"CURRENT": 0, "CRITICAL": 5, "EMERGENCY": 7}
    )
    m.AmdSmiClkType = IntEnum("AmdSmiClkType", {"GFX": 1, "MEM": 5})
    m.AmdSmiMemoryType = IntEnum("AmdSmiMemoryType", {"VRAM": 0})
    T, M = m.AmdSmiTemperatureType, m.AmdSmiTemperatureMetric
    temps = {
        (T.HOTSPOT, M.CURRENT): 80,
        (T.VRAM, M.CURRENT): 70,
        (T.HOTSPOT, M.CRITICAL): 110,
        (T.HOTSPOT, M.EMERGENCY): 115,
        (T.VRAM, M.CRITICAL): 105,
    }

    def temp(h, kind, metric):
        if (kind, metric) not in temps:
            raise AmdSmiLibraryException("not supported")  # edge on MI300X
        return temps[(kind, metric)]

    m.amdsmi_init = lambda flag: None
    m.amdsmi_shut_down = lambda: None
    m.amdsmi_get_processor_handles = lambda: ["h0"]
    m.amdsmi_get_gpu_asic_info = lambda h: {
        "market_name": "AMD Instinct MI300X",
        "asic_serial": "0xABC",
    }
    m.amdsmi_get_power_cap_info = lambda h: {
        "power_cap": 750_000_000,
        "default_power_cap": 750_000_000,
    }
    m.amdsmi_get_temp_metric = temp
    m.amdsmi_get_gpu_memory_total = lambda h, t: 192 * GiB
    m.amdsmi_get_gpu_memory_usage = lambda h, t: 150 * GiB
    m.amdsmi_get_gpu_device_uuid = lambda h: "1fff74a1-0000-1000-80e9-4c2e5f8b3a21"
    m.amdsmi_get_gpu_device_bdf = lambda h: "0000:0c:00.0"
    m.amdsmi_get_gpu_activity = lambda h: {
        "gfx_activity": 88,
        "umc_activity": 40,
        "mm_activity": "N/A",
    }
    m.amdsmi_get_power_info = lambda h: {
        "socket_power": 650,
        "current_socket_power": 650,
        "average_socket_power": "N/A",
        "power_limit": 750,
    }
    m.amdsmi_get_energy_count = lambda h: {
        "energy_accumulator": 1_000_000,
        "counter_resolution": 15.3,
        "timestamp": 1,
    }
    m.amdsmi_get_clock_info = lambda h, c: {
        "clk": 2100 if c == m.AmdSmiClkType.GFX else 1300,
        "max_clk": 2100 if c == m.AmdSmiClkType.GFX else 1300,
        "min_clk": 500,
    }
    m.amdsmi_get_gpu_total_ecc_count = lambda h: {
        "correctable_count": 2,
        "uncorrectable_count": 0,
        "deferred_count": 1,
    }
    m.amdsmi_get_pcie_info = lambda h: {
        "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000, "slot_type": "OAM"},
        "pcie_metric": {"pcie_width": 16, "pcie_speed": 16000, "pcie_replay_count": 5},
    }
    m.amdsmi_get_violation_status = lambda h: {
        "active_ppt_pwr": True,
        "active_socket_thrm": False,
        "active_prochot_thrm": "N/A",
        "active_vr_thrm": False,
        "active_hbm_thrm": False,
    }
    m.amdsmi_gpu_xgmi_error_status = lambda h: 0
    return m


def test_amdsmi_sample_units_and_fields(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi())
    src = AmdSmiSource()
    assert src.probe() is None
    (r,) = src.sample(99)
    src.close()
    assert r["vendor"] == "amd" and r["model"] == "AMD Instinct MI300X" and r["serial"] == "0xABC"
    assert r["bus_id"] == "0000:0c:00.0"
    assert r["util_gpu"] == pytest.approx(0.88) and r["util_mem"] == pytest.approx(0.40)
    assert r["mem_used_bytes"] == 150 * GiB and r["mem_total_bytes"] == 192 * GiB
    assert r["power_w"] == 650.0 and r["power_limit_w"] == pytest.approx(750.0)  # uW cap
    assert r["energy_j"] == pytest.approx(15.3)  # 1e6 x 15.3 uJ
    assert r["temp_gpu_c"] is None  # edge not supported
    assert r["temp_hotspot_c"] == 80.0 and r["temp_mem_c"] == 70.0
    assert (r["temp_slowdown_c"], r["temp_shutdown_c"], r["temp_mem_max_c"]) == (110, 115, 105)
    assert r["clock_sm_hz"] == 2100e6 and r["clock_mem_hz"] == 1300e6
    assert r["throttle_mask"] == 0x1 and r["throttle_reasons"] == "ppt_power"
    assert r["ecc_corrected_aggregate"] == 2 and r["ecc_deferred"] == 1
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_replay"]) == (4, 5, 16, 5)
    assert r["xgmi_errors"] == 0


def test_amdsmi_init_failure_is_a_reason(monkeypatch):
    fake = _fake_amdsmi()

    def boom(flag):
        raise AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    fake.amdsmi_init = boom
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    assert "amdsmi_init failed" in AmdSmiSource().probe()
