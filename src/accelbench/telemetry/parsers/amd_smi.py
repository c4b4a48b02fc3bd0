"""``amd-smi metric --json`` (ROCm 6.2-6.3: a top-level list; ROCm 7: ``{"gpu_data": [...]}``;
leaves are ``{"value": x, "unit": "..."}`` or ``"N/A"``)."""

from __future__ import annotations

from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import to_float, to_int, whole
from accelbench.telemetry.parsers.text import find_json, not_an_object
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, pcie_gen_from_speed

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
        return to_float(cur["value"], unit)
    if isinstance(cur, dict | list):
        return None
    return to_float(cur)


def _amd_first(node: Any, *paths: tuple[str, ...], mem: bool = False) -> float | None:
    for p in paths:
        v = _amd_val(node, *p, mem=mem)
        if v is not None:
            return v
    return None


def amd_smi_gpu_list(data: Any) -> list[Any] | None:
    """The per-GPU list of amd-smi JSON (a top-level list, or ROCm 7's ``gpu_data``)."""
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        return list(data["gpu_data"])
    if isinstance(data, list):
        return data
    return None


def parse_amd_smi_json(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """``amd-smi metric --json`` -> one row per GPU object.

    ROCm 6.2-6.3 print a top-level list; ROCm 7 wraps it as ``{"gpu_data": [...]}``.
    Units are taken from each leaf's ``unit`` (W, C, MHz, MB, %, J/uJ, GT/s). The warning
    amd-smi prints on stdout before the JSON for a user outside the render / video
    groups is skipped (and named in ``notes``). A list entry that is not an object
    (``"N/A"``) is skipped and named in ``lost``.
    """
    data, skipped = find_json(text, "amd-smi")
    if notes is not None:
        notes.extend(skipped)
    gpus = amd_smi_gpu_list(data)
    if gpus is None:
        raise AccelbenchError("not amd-smi --json output (expected a list or 'gpu_data')")
    rows = []
    for n, g in enumerate(gpus):
        if not isinstance(g, dict):  # "N/A" for a GPU amd-smi could not read
            not_an_object(lost, f"GPU entry {n}", g)
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
                bus_id=normalize_bus_id(g.get("bdf")) if isinstance(g.get("bdf"), str) else None,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
                util_gpu=_amd_val(g, "usage", "gfx_activity"),
                util_mem=_amd_val(g, "usage", "umc_activity"),
                mem_used_bytes=whole(
                    _amd_first(g, ("mem_usage", "used_vram"), ("vram", "used"), mem=True)
                ),
                mem_total_bytes=whole(
                    _amd_first(g, ("mem_usage", "total_vram"), ("vram", "total"), mem=True)
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
                ecc_corrected_aggregate=to_int(_amd_val(ecc, "total_correctable_count")),
                ecc_uncorrected_aggregate=to_int(_amd_val(ecc, "total_uncorrectable_count")),
                ecc_deferred=to_int(_amd_val(ecc, "total_deferred_count")),
                pcie_gen=pcie_gen_from_speed(speed),
                pcie_width=to_int(_amd_val(g, "pcie", "width")),
                pcie_replay=to_int(_amd_val(g, "pcie", "replay_count")),
            )
        )
    return rows
