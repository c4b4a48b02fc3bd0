"""Parsers for captured tool output, all into the common schema (:mod:`.schema`).

- ``nvidia-smi -q -x`` (DTD v11 ``<clocks_throttle_reasons>`` / ``<power_readings>``,
  v12 ``<clocks_event_reasons>`` / ``<gpu_power_readings>``, v13 ``<average_power_draw>``
  / ``<instant_power_draw>`` and ``<clocks_event_reasons_counters>`` in microseconds)
- ``nvidia-smi --query-gpu=... --format=csv`` with or without ``nounits``
- ``rocm-smi --json`` (ROCm 5 and ROCm 6 key names)
- ``amd-smi metric --json`` (ROCm 6.2-6.3: a top-level list; ROCm 7: ``{"gpu_data": [...]}``;
  leaves are ``{"value": x, "unit": "..."}`` or ``"N/A"``)
- Prometheus scrapes of dcgm-exporter and the ROCm Device Metrics Exporter
- Inference-server ``/metrics`` (vLLM, SGLang, llama.cpp, TGI), see :func:`parse_server_metrics`

Every parser returns a list of rows (dicts with every schema column). ``t_ns`` is the
caller's (a captured file has no monotonic time; the CLI leaves it null).
"""

from __future__ import annotations

import csv
import io
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from accelbench.errors import AccelbenchError
from accelbench.telemetry.schema import (
    KIND_GPU,
    KIND_SERVER,
    is_na,
    new_row,
    normalise_bus_id,
    parse_int,
    parse_quantity,
    pcie_gen_from_speed,
)

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


def _q(value: Any, default_unit: str | None = None) -> float | None:
    try:
        return parse_quantity(value, default_unit)
    except ValueError:
        return None


def _i(value: Any) -> int | None:
    try:
        return parse_int(value)
    except ValueError:
        return None


def _ratio(value: Any) -> float | None:
    """ "37 %" or 37 -> 0.37."""
    v = _q(value, "%")
    return None if v is None else v


def _mhz(value: Any) -> float | None:
    return _q(value, "MHz")


# ----------------------------------------------------------------------------
# nvidia-smi -q -x


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    t = found.text.strip()
    return None if is_na(t) else t


def _first(el: ET.Element, *paths: str) -> str | None:
    for p in paths:
        t = _text(el, p)
        if t is not None:
            return t
    return None


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "true", "1", "active")


def _sum_or_none(values: Iterable[int | None]) -> int | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _nv_xml_ecc(block: ET.Element | None) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) from an ``<ecc_errors>/<volatile|aggregate>`` block.

    DTD v11+: ``sram_correctable``, ``sram_uncorrectable`` (v13: ``_parity``/``_secded``),
    ``dram_*``. Older drivers: ``single_bit/total`` and ``double_bit/total``.
    """
    if block is None:
        return None, None
    if block.find("single_bit") is not None:
        return _i(_text(block, "single_bit/total")), _i(_text(block, "double_bit/total"))
    corr: list[int | None] = []
    unc: list[int | None] = []
    for child in block:
        tag = child.tag
        val = _i(child.text.strip()) if child.text and not is_na(child.text) else None
        if "uncorrectable" in tag:
            unc.append(val)
        elif "correctable" in tag:
            corr.append(val)
    return _sum_or_none(corr), _sum_or_none(unc)


def parse_nvidia_smi_xml(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """``nvidia-smi -q -x`` output -> one row per ``<gpu>``."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise AccelbenchError(f"not valid nvidia-smi XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise AccelbenchError(f"not nvidia-smi -q -x output (root <{root.tag}>)")
    driver = _text(root, "driver_version")
    rows = []
    for idx, gpu in enumerate(root.findall("gpu")):
        # Power: v11 <power_readings>, v12+ <gpu_power_readings>; v13 average/instant.
        pw = gpu.find("gpu_power_readings")
        if pw is None:
            pw = gpu.find("power_readings")
        power = _q(_first(pw, "power_draw", "average_power_draw", "instant_power_draw"), "W")
        limit = _q(
            _first(pw, "enforced_power_limit", "current_power_limit", "power_limit"),
            "W",
        )
        # Throttle reasons: v11 clocks_throttle_reasons, v12+ clocks_event_reasons.
        mask = None
        reasons = gpu.find("clocks_event_reasons")
        prefix = "clocks_event_reason_"
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
            prefix = "clocks_throttle_reason_"
        if reasons is not None:
            mask = 0
            seen = False
            for child in reasons:
                name = child.tag.removeprefix(prefix)
                bit = NV_THROTTLE_BITS.get(name)
                state = (child.text or "").strip().lower()
                if bit is None or is_na(state):
                    continue
                seen = True
                if state == "active":
                    mask |= bit
            if not seen:
                mask = None
        counters = gpu.find("clocks_event_reasons_counters")
        power_s = thermal_s = None
        if counters is not None:
            cp = "clocks_event_reasons_counters_"
            vals = {c.tag.removeprefix(cp): _q(c.text, "us") for c in counters}
            power_s = _sum_or_none_f([vals.get("sw_power_cap"), vals.get("hw_power_brake")])
            thermal_s = _sum_or_none_f(
                [vals.get("sw_therm_slowdown"), vals.get("hw_therm_slowdown")]
            )
        ecc_on = _text(gpu, "ecc_mode/current_ecc")
        vc, vu = _nv_xml_ecc(gpu.find("ecc_errors/volatile"))
        ac, au = _nv_xml_ecc(gpu.find("ecc_errors/aggregate"))
        if ecc_on is not None and ecc_on.lower() == "disabled":
            vc = vu = ac = au = None
        link = gpu.find("pci/pci_gpu_link_info")
        row = new_row(
            t_ns=t_ns,
            source="nvidia-smi-xml",
            kind=KIND_GPU,
            vendor="nvidia",
            model=_text(gpu, "product_name"),
            device_index=idx,
            bus_id=normalise_bus_id(gpu.get("id") or _text(gpu, "pci/pci_bus_id")),
            uuid=_text(gpu, "uuid"),
            serial=_text(gpu, "serial"),
            driver_version=driver,
            util_gpu=_ratio(_text(gpu, "utilization/gpu_util")),
            util_mem=_ratio(_text(gpu, "utilization/memory_util")),
            mem_used_bytes=_q(_text(gpu, "fb_memory_usage/used")),
            mem_total_bytes=_q(_text(gpu, "fb_memory_usage/total")),
            power_w=power,
            power_limit_w=limit,
            temp_gpu_c=_q(_text(gpu, "temperature/gpu_temp"), "C"),
            temp_mem_c=_q(_text(gpu, "temperature/memory_temp"), "C"),
            temp_slowdown_c=_q(_text(gpu, "temperature/gpu_temp_slow_threshold"), "C"),
            temp_shutdown_c=_q(_text(gpu, "temperature/gpu_temp_max_threshold"), "C"),
            temp_mem_max_c=_q(_text(gpu, "temperature/gpu_temp_max_mem_threshold"), "C"),
            clock_sm_hz=_mhz(_text(gpu, "clocks/sm_clock")),
            clock_mem_hz=_mhz(_text(gpu, "clocks/mem_clock")),
            clock_sm_max_hz=_mhz(_text(gpu, "max_clocks/sm_clock")),
            clock_mem_max_hz=_mhz(_text(gpu, "max_clocks/mem_clock")),
            throttle_mask=mask,
            throttle_reasons=nv_throttle_names(mask),
            throttle_power_s=power_s,
            throttle_thermal_s=thermal_s,
            ecc_corrected_volatile=vc,
            ecc_uncorrected_volatile=vu,
            ecc_corrected_aggregate=ac,
            ecc_uncorrected_aggregate=au,
            remapped_rows_corr=_i(_text(gpu, "remapped_rows/remapped_row_corr")),
            remapped_rows_unc=_i(_text(gpu, "remapped_rows/remapped_row_unc")),
            remapped_rows_pending=_yes(_text(gpu, "remapped_rows/remapped_row_pending")),
            remapped_rows_failure=_yes(_text(gpu, "remapped_rows/remapped_row_failure")),
            pcie_gen=_i(_text(link, "pcie_gen/current_link_gen")),
            pcie_gen_max=_i(_text(link, "pcie_gen/max_link_gen")),
            pcie_width=_i(_text(link, "link_widths/current_link_width")),
            pcie_width_max=_i(_text(link, "link_widths/max_link_width")),
            pcie_replay=_i(_text(gpu, "pci/replay_counter")),
        )
        rows.append(row)
    return rows


def _sum_or_none_f(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


# ----------------------------------------------------------------------------
# nvidia-smi --query-gpu --format=csv


def _csv_header(name: str) -> tuple[str, str | None]:
    """ "memory.used [MiB]" -> ("memory.used", "MiB")."""
    name = name.strip()
    if name.endswith("]") and " [" in name:
        base, unit = name[:-1].split(" [", 1)
        return base.strip(), unit.strip()
    return name, None


def parse_nvidia_smi_csv(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=... --format=csv[,nounits]`` -> one row per data line.

    Needs the header line (``noheader`` output cannot be mapped to fields). Units come
    from each value ("81559 MiB") or, with ``nounits``, from the header ("[MiB]").
    """
    reader = csv.reader(io.StringIO(text.strip()), skipinitialspace=True)
    lines = [r for r in reader if r]
    if not lines:
        raise AccelbenchError("empty nvidia-smi CSV")
    header = [_csv_header(h) for h in lines[0]]
    names = [h[0] for h in header]
    if "name" not in names and "uuid" not in names and "pci.bus_id" not in names:
        raise AccelbenchError(
            "nvidia-smi CSV without a header (or without name/uuid/pci.bus_id): "
            "capture it without 'noheader'"
        )
    rows = []
    for line_no, values in enumerate(lines[1:]):
        rec: dict[str, tuple[str, str | None]] = {}
        for (name, unit), val in zip(header, values, strict=False):
            rec[name] = (val.strip(), unit)

        def get(*keys: str, _rec: dict = rec) -> tuple[str | None, str | None]:
            for k in keys:
                if k in _rec and not is_na(_rec[k][0]):
                    return _rec[k]
            return None, None

        def q(*keys: str, default: str | None = None) -> float | None:
            val, unit = get(*keys)
            return _q(val, unit or default)

        def i(*keys: str) -> int | None:
            val, _ = get(*keys)
            return _i(val)

        mask_s, _ = get("clocks_event_reasons.active", "clocks_throttle_reasons.active")
        mask = _i(mask_s)
        power_s = _sum_or_none_f(
            [
                q("clocks_event_reasons_counters.sw_power_cap", default="us"),
                q("clocks_event_reasons_counters.hw_power_brake_slowdown", default="us"),
            ]
        )
        thermal_s = _sum_or_none_f(
            [
                q("clocks_event_reasons_counters.sw_thermal_slowdown", default="us"),
                q("clocks_event_reasons_counters.hw_thermal_slowdown", default="us"),
            ]
        )
        pend, _ = get("remapped_rows.pending")
        fail, _ = get("remapped_rows.failure")
        idx = i("index")
        rows.append(
            new_row(
                t_ns=t_ns,
                source="nvidia-smi-csv",
                kind=KIND_GPU,
                vendor="nvidia",
                model=get("name", "gpu_name")[0],
                device_index=idx if idx is not None else line_no,
                bus_id=normalise_bus_id(get("pci.bus_id", "gpu_bus_id")[0]),
                uuid=get("uuid", "gpu_uuid")[0],
                serial=get("serial", "gpu_serial")[0],
                driver_version=get("driver_version")[0],
                util_gpu=q("utilization.gpu", default="%"),
                util_mem=q("utilization.memory", default="%"),
                mem_used_bytes=q("memory.used", default="MiB"),
                mem_total_bytes=q("memory.total", default="MiB"),
                power_w=q("power.draw", "power.draw.average", "power.draw.instant", default="W"),
                power_limit_w=q("enforced.power.limit", "power.limit", default="W"),
                energy_j=q("total_energy_consumption", default="mJ"),
                temp_gpu_c=q("temperature.gpu", default="C"),
                temp_mem_c=q("temperature.memory", default="C"),
                clock_sm_hz=q("clocks.current.sm", "clocks.sm", default="MHz"),
                clock_mem_hz=q("clocks.current.memory", "clocks.mem", default="MHz"),
                clock_sm_max_hz=q("clocks.max.sm", default="MHz"),
                clock_mem_max_hz=q("clocks.max.memory", "clocks.max.mem", default="MHz"),
                throttle_mask=mask,
                throttle_reasons=nv_throttle_names(mask),
                throttle_power_s=power_s,
                throttle_thermal_s=thermal_s,
                ecc_corrected_volatile=i("ecc.errors.corrected.volatile.total"),
                ecc_uncorrected_volatile=i("ecc.errors.uncorrected.volatile.total"),
                ecc_corrected_aggregate=i("ecc.errors.corrected.aggregate.total"),
                ecc_uncorrected_aggregate=i("ecc.errors.uncorrected.aggregate.total"),
                remapped_rows_corr=i("remapped_rows.correctable"),
                remapped_rows_unc=i("remapped_rows.uncorrectable"),
                remapped_rows_pending=_yes(pend),
                remapped_rows_failure=_yes(fail),
                pcie_gen=i("pcie.link.gen.current", "pcie.link.gen.gpucurrent"),
                pcie_gen_max=i("pcie.link.gen.max"),
                pcie_width=i("pcie.link.width.current"),
                pcie_width_max=i("pcie.link.width.max"),
            )
        )
    return rows


# ----------------------------------------------------------------------------
# rocm-smi --json


def _rocm_get(card: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in card and not is_na(card[k]):
            return card[k]
    return None


def _rocm_pcie_level(value: Any) -> tuple[int | None, int | None]:
    """ "3 (2.5GT/s x8)" -> (gen 1, width 8)."""
    if value is None:
        return None, None
    s = str(value)
    if "(" in s:
        s = s[s.index("(") + 1 : s.rindex(")")] if ")" in s else s[s.index("(") + 1 :]
    parts = s.replace("*", "").split()
    speed = width = None
    for p in parts:
        low = p.lower()
        if low.endswith("gt/s"):
            speed = _q(p)
        elif low.startswith("x"):
            width = _i(low[1:])
    return pcie_gen_from_speed(speed), width


def parse_rocm_smi_json(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """``rocm-smi [...] --json`` -> one row per ``cardN``.

    ROCm 5 and 6 differ in key names (``Card series``/``Card Series``/``Device Name``,
    ``GPU memory use (%)`` vs ``GPU Memory Read/Write Activity (%)``); both are read.
    Energy comes from ``Accumulated Energy (uJ)`` (the raw ``Energy counter`` needs the
    per-ASIC resolution, which the JSON does not carry).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AccelbenchError(f"not valid rocm-smi JSON: {exc}") from exc
    if not isinstance(data, dict) or not any(k.startswith("card") for k in data):
        raise AccelbenchError("not rocm-smi --json output (no 'cardN' keys)")
    driver = (data.get("system") or {}).get("Driver version")
    rows = []
    cards = sorted((k for k in data if k.startswith("card")), key=lambda k: int(k[4:] or 0))
    for key in cards:
        card = data[key]
        gen, width = _rocm_pcie_level(_rocm_get(card, "pcie clock level"))
        energy_uj = _q(_rocm_get(card, "Accumulated Energy (uJ)"))
        rows.append(
            new_row(
                t_ns=t_ns,
                source="rocm-smi",
                kind=KIND_GPU,
                vendor="amd",
                model=_rocm_get(card, "Card Series", "Card series", "Device Name"),
                device_index=int(key[4:]),
                bus_id=normalise_bus_id(_rocm_get(card, "PCI Bus")),
                uuid=_rocm_get(card, "Unique ID"),
                serial=_rocm_get(card, "Serial Number"),
                driver_version=driver,
                util_gpu=_q(_rocm_get(card, "GPU use (%)"), "%"),
                util_mem=_q(
                    _rocm_get(card, "GPU Memory Read/Write Activity (%)", "GPU memory use (%)"),
                    "%",
                ),
                mem_used_bytes=_q(_rocm_get(card, "VRAM Total Used Memory (B)"), "B"),
                mem_total_bytes=_q(_rocm_get(card, "VRAM Total Memory (B)"), "B"),
                power_w=_q(
                    _rocm_get(
                        card,
                        "Average Graphics Package Power (W)",
                        "Current Socket Graphics Package Power (W)",
                    ),
                    "W",
                ),
                power_limit_w=_q(_rocm_get(card, "Max Graphics Package Power (W)"), "W"),
                energy_j=None if energy_uj is None else energy_uj * 1e-6,
                temp_gpu_c=_q(_rocm_get(card, "Temperature (Sensor edge) (C)"), "C"),
                temp_hotspot_c=_q(_rocm_get(card, "Temperature (Sensor junction) (C)"), "C"),
                temp_mem_c=_q(_rocm_get(card, "Temperature (Sensor memory) (C)"), "C"),
                clock_sm_hz=_q(_rocm_get(card, "sclk clock speed:")),
                clock_mem_hz=_q(_rocm_get(card, "mclk clock speed:")),
                pcie_gen=gen,
                pcie_width=width,
                pcie_replay=_i(_rocm_get(card, "PCIe Replay Count")),
            )
        )
    return rows


# ----------------------------------------------------------------------------
# amd-smi metric --json

# amd-smi reports VRAM in "MB" that are MiB (amdsmi divides bytes by 1024*1024).
_AMD_UNIT_FIX = {"mb": "MiB", "gb": "GiB", "kb": "KiB"}


def _amd_val(node: Any, *path: str, mem: bool = False) -> float | None:
    """Follow ``path`` in an amd-smi JSON object; read ``{"value","unit"}`` or a bare value."""
    cur = node
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    if isinstance(cur, dict) and "value" in cur:
        unit = cur.get("unit") or None
        if mem and unit and unit.lower() in _AMD_UNIT_FIX:
            unit = _AMD_UNIT_FIX[unit.lower()]
        return _q(cur["value"], unit)
    if isinstance(cur, dict | list):
        return None
    return _q(cur)


def _amd_first(node: Any, *paths: tuple[str, ...], mem: bool = False) -> float | None:
    for p in paths:
        v = _amd_val(node, *p, mem=mem)
        if v is not None:
            return v
    return None


def parse_amd_smi_json(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """``amd-smi metric --json`` -> one row per GPU object.

    ROCm 6.2-6.3 print a top-level list; ROCm 7 wraps it as ``{"gpu_data": [...]}``.
    Units are taken from each leaf's ``unit`` (W, C, MHz, MB, %, J/uJ, GT/s).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AccelbenchError(f"not valid amd-smi JSON: {exc}") from exc
    if isinstance(data, dict) and "gpu_data" in data:
        gpus = data["gpu_data"]
    elif isinstance(data, list):
        gpus = data
    else:
        raise AccelbenchError("not amd-smi --json output (expected a list or 'gpu_data')")
    rows = []
    for n, g in enumerate(gpus):
        if not isinstance(g, dict):
            continue
        idx = g.get("gpu", n)
        speed = _amd_val(g, "pcie", "speed")
        # amd-smi prints the PCIe speed in GT/s; _q with unit "GT/s" gives MT/s.
        if speed is not None and speed < 1000:  # a bare number: GT/s
            speed *= 1000.0
        ecc = g.get("ecc") if isinstance(g.get("ecc"), dict) else {}
        throttle = _amd_val(g, "power", "throttle_status")
        energy = _amd_first(
            g,
            ("energy", "total_energy_consumption"),
            ("energy", "energy_accumulator"),
        )
        rows.append(
            new_row(
                t_ns=t_ns,
                source="amd-smi",
                kind=KIND_GPU,
                vendor="amd",
                device_index=int(idx) if isinstance(idx, int | str) and str(idx).isdigit() else n,
                bus_id=normalise_bus_id(g.get("bdf")) if isinstance(g.get("bdf"), str) else None,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
                util_gpu=_amd_val(g, "usage", "gfx_activity"),
                util_mem=_amd_val(g, "usage", "umc_activity"),
                mem_used_bytes=_amd_first(
                    g, ("mem_usage", "used_vram"), ("vram", "used"), mem=True
                ),
                mem_total_bytes=_amd_first(
                    g, ("mem_usage", "total_vram"), ("vram", "total"), mem=True
                ),
                power_w=_amd_first(
                    g,
                    ("power", "socket_power"),
                    ("power", "current_socket_power"),
                    ("power", "average_socket_power"),
                ),
                energy_j=energy,
                temp_gpu_c=_amd_val(g, "temperature", "edge"),
                temp_hotspot_c=_amd_val(g, "temperature", "hotspot"),
                temp_mem_c=_amd_val(g, "temperature", "mem"),
                clock_sm_hz=_amd_first(g, ("clock", "gfx_0", "clk"), ("clock", "gfx", "clk")),
                clock_mem_hz=_amd_first(g, ("clock", "mem_0", "clk"), ("clock", "mem", "clk")),
                clock_sm_max_hz=_amd_first(
                    g, ("clock", "gfx_0", "max_clk"), ("clock", "gfx", "max_clk")
                ),
                clock_mem_max_hz=_amd_first(
                    g, ("clock", "mem_0", "max_clk"), ("clock", "mem", "max_clk")
                ),
                throttle_mask=None if throttle is None else int(throttle),
                ecc_corrected_aggregate=_i(_amd_val(ecc, "total_correctable_count")),
                ecc_uncorrected_aggregate=_i(_amd_val(ecc, "total_uncorrectable_count")),
                ecc_deferred=_i(_amd_val(ecc, "total_deferred_count")),
                pcie_gen=pcie_gen_from_speed(speed),
                pcie_width=_i(_amd_val(g, "pcie", "width")),
                pcie_replay=_i(_amd_val(g, "pcie", "replay_count")),
            )
        )
    return rows


# ----------------------------------------------------------------------------
# Prometheus scrapes: dcgm-exporter and the ROCm Device Metrics Exporter


def prometheus_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """All samples of a Prometheus text scrape as (name, labels, value), via
    ``prometheus_client``'s parser. Raises AccelbenchError on malformed input."""
    # prometheus_client appends "_total" to counter samples whose exposed name lacks it
    # (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION -> ..._total); keep the name as exposed.
    exposed = set()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            exposed.add(line.split("{", 1)[0].split(" ", 1)[0])
    out = []
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                name = s.name
                if name not in exposed and name.endswith("_total") and name[:-6] in exposed:
                    name = name[:-6]
                out.append((name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError) as exc:
        raise AccelbenchError(f"not a valid Prometheus scrape: {exc}") from exc
    return out


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
_SUMMED = {"nvlink_errors"}
_BOOL_COLS = {"remapped_rows_failure", "remapped_rows_pending"}
_INT_COLS = {
    "pcie_replay",
    "remapped_rows_unc",
    "remapped_rows_corr",
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate",
    "ecc_uncorrected_aggregate",
    "throttle_mask",
    "pcie_gen",
    "pcie_width",
    "pcie_gen_max",
    "pcie_width_max",
    "nvlink_errors",
    "mem_used_bytes",
    "mem_total_bytes",
    "xgmi_errors",
    "ecc_deferred",
}


def _store(row: dict[str, Any], col: str, value: float) -> None:
    if col in _BOOL_COLS:
        row[col] = bool(value)
    elif col in _INT_COLS:
        v = int(round(value))
        row[col] = (row[col] or 0) + v if col in _SUMMED else v
    else:
        row[col] = value


def parse_dcgm_prometheus(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """A dcgm-exporter ``/metrics`` scrape -> one row per GPU (label ``gpu``/``UUID``).

    Memory total is ``FB_USED + FB_FREE + FB_RESERVED`` (dcgm-exporter's default counters
    carry no total). Fields dcgm-exporter leaves out (e.g. power, energy and PCIe inside a
    vGPU guest) stay null.
    """
    rows: dict[str, dict[str, Any]] = {}
    fb: dict[str, dict[str, float]] = {}
    for name, labels, value in prometheus_samples(text):
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
                bus_id=normalise_bus_id(labels.get("pci_bus_id")),
                uuid=labels.get("UUID"),
                driver_version=labels.get("DCGM_FI_DRIVER_VERSION"),
            )
            rows[key] = row
        if name in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"):
            fb.setdefault(key, {})[name] = value
        if math.isnan(value):
            continue
        m = _DCGM_MAP.get(name)
        if m:
            _store(row, m[0], value * m[1])
    for key, parts in fb.items():
        if len(parts) == 3:
            rows[key]["mem_total_bytes"] = int(sum(parts.values()) * 1024**2)
    for row in rows.values():
        if row["throttle_mask"] is not None:
            row["throttle_reasons"] = nv_throttle_names(row["throttle_mask"])
    return list(rows.values())


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


def parse_rocm_exporter_prometheus(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """A ROCm Device Metrics Exporter ``/metrics`` scrape -> one row per ``gpu_id``."""
    rows: dict[str, dict[str, Any]] = {}
    power_seen: dict[str, str] = {}
    for name, labels, value in prometheus_samples(text):
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
        if math.isnan(value):
            continue
        if lname == "gpu_clock":
            ct = labels.get("clock_type", "").lower()
            col = {"system": "clock_sm_hz", "memory": "clock_mem_hz"}.get(ct)
            if col and row[col] is None:
                row[col] = value * 1e6
            continue
        if lname in ("pcie_speed", "pcie_max_speed"):
            col = "pcie_gen" if lname == "pcie_speed" else "pcie_gen_max"
            row[col] = pcie_gen_from_speed(value * 1000.0)
            continue
        m = _ROCM_EXPORTER_MAP.get(lname)
        if not m:
            continue
        if m[0] == "power_w":
            prev = power_seen.get(key)
            if prev and _POWER_PRIORITY.index(prev) < _POWER_PRIORITY.index(lname):
                continue
            power_seen[key] = lname
        _store(row, m[0], value * m[1])
    return list(rows.values())


# ----------------------------------------------------------------------------
# Inference-server /metrics

# engine -> common column -> list of (metric name, how): how is "value", "sum" (the
# _sum of a histogram), or "bucketless" fallback names tried in order.
SERVER_METRICS: dict[str, dict[str, list[str]]] = {
    "vllm": {
        "srv_requests_running": ["vllm:num_requests_running"],
        "srv_requests_waiting": ["vllm:num_requests_waiting"],
        # vLLM V1 exports kv_cache_usage_perc, V0 gpu_cache_usage_perc; both 0-1.
        "srv_kv_cache_usage": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        "srv_prompt_tokens_total": ["vllm:prompt_tokens_total"],
        "srv_generation_tokens_total": ["vllm:generation_tokens_total"],
        "srv_preemptions_total": ["vllm:num_preemptions_total"],
        "srv_prefix_cache_hits_total": [
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ],
        "srv_prefix_cache_queries_total": [
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ],
    },
    "sglang": {
        "srv_requests_running": ["sglang:num_running_reqs"],
        "srv_requests_waiting": ["sglang:num_queue_reqs"],
        "srv_kv_cache_usage": ["sglang:token_usage"],
        "srv_prompt_tokens_total": ["sglang:prompt_tokens_total"],
        "srv_generation_tokens_total": ["sglang:generation_tokens_total"],
        "srv_prefix_cache_hits_total": ["sglang:cached_tokens_total"],
    },
    "llamacpp": {
        "srv_requests_running": ["llamacpp:requests_processing"],
        "srv_requests_waiting": ["llamacpp:requests_deferred"],
        "srv_kv_cache_usage": ["llamacpp:kv_cache_usage_ratio"],
        "srv_prompt_tokens_total": ["llamacpp:prompt_tokens_total"],
        "srv_generation_tokens_total": ["llamacpp:tokens_predicted_total"],
    },
    "tgi": {
        "srv_requests_running": ["tgi_batch_current_size"],
        "srv_requests_waiting": ["tgi_queue_size"],
        "srv_prompt_tokens_total": ["tgi_request_input_length_sum"],
        "srv_generation_tokens_total": ["tgi_request_generated_tokens_sum"],
    },
}
_ENGINE_PREFIX = {"vllm": "vllm:", "sglang": "sglang:", "llamacpp": "llamacpp:", "tgi": "tgi_"}


def detect_engine(names: Iterable[str]) -> str | None:
    """Which engine a set of metric names comes from (by prefix), or None."""
    names = list(names)
    for engine, prefix in _ENGINE_PREFIX.items():
        if any(n.startswith(prefix) for n in names):
            return engine
    return None


def parse_server_metrics(text: str, t_ns: int | None = None) -> list[dict[str, Any]]:
    """An inference server's Prometheus ``/metrics`` -> one ``kind="server"`` row.

    Values with several label sets (e.g. one per model) are summed. Returns ``[]`` when
    no known engine's metrics are present.
    """
    samples = prometheus_samples(text)
    totals: dict[str, float] = {}
    for name, _labels, value in samples:
        if math.isnan(value):
            continue
        totals[name] = totals.get(name, 0.0) + value
    engine = detect_engine(totals)
    if engine is None:
        return []
    row = new_row(t_ns=t_ns, source="server", kind=KIND_SERVER, engine=engine)
    for col, names in SERVER_METRICS[engine].items():
        for n in names:
            if n in totals:
                row[col] = totals[n]
                break
    return [row]


# ----------------------------------------------------------------------------
# Format detection for captured files

FORMATS = {
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "nvidia-smi-csv": parse_nvidia_smi_csv,
    "rocm-smi": parse_rocm_smi_json,
    "amd-smi": parse_amd_smi_json,
    "dcgm": parse_dcgm_prometheus,
    "rocm-exporter": parse_rocm_exporter_prometheus,
    "server": parse_server_metrics,
}


def detect_format(text: str) -> str:
    """Guess the format of a captured tool output."""
    s = text.lstrip()
    if s.startswith("<?xml") or s.startswith("<nvidia_smi_log") or "<nvidia_smi_log" in s[:500]:
        return "nvidia-smi-xml"
    if s.startswith("{") or s.startswith("["):
        try:
            data = json.loads(s)
        except json.JSONDecodeError as exc:
            raise AccelbenchError(f"looks like JSON but does not parse: {exc}") from exc
        if isinstance(data, dict) and any(k.startswith("card") for k in data):
            return "rocm-smi"
        return "amd-smi"
    if "DCGM_FI_" in s:
        return "dcgm"
    first = s.splitlines()[0] if s else ""
    if "," in first and ("pci.bus_id" in first or "name" in first or "uuid" in first):
        return "nvidia-smi-csv"
    if any(p in s for p in ("vllm:", "sglang:", "llamacpp:", "tgi_")):
        return "server"
    if "gpu_" in s or "pcie_" in s:
        return "rocm-exporter"
    raise AccelbenchError(
        "unknown telemetry format: expected nvidia-smi -q -x XML, nvidia-smi --query-gpu CSV, "
        "rocm-smi/amd-smi JSON, or a Prometheus scrape"
    )


def parse_file(path: Path, fmt: str | None = None) -> list[dict[str, Any]]:
    """Parse a captured file (format guessed unless ``fmt`` names one of :data:`FORMATS`)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise AccelbenchError(f"cannot read {path}: {exc.strerror}") from exc
    fmt = fmt or detect_format(text)
    if fmt not in FORMATS:
        raise AccelbenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return FORMATS[fmt](text)
