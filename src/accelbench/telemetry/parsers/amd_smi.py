"""``amd-smi metric --json`` (ROCm 6.2-6.3: a top-level list; ROCm 7: ``{"gpu_data": [...]}``;
leaves are ``{"value": x, "unit": "..."}`` or ``"N/A"``)."""

from __future__ import annotations

from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import whole
from accelbench.telemetry.parsers.text import find_json, not_an_object, reading, reading_int
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, pcie_gen_from_speed, plausible

# amd-smi reports VRAM in "MB" that are MiB (amdsmi divides bytes by 1024*1024).
_AMD_UNIT_FIX = {"mb": "MiB", "gb": "GiB", "kb": "KiB"}


class _Fields:
    """Reads the fields of one amd-smi GPU object; a field that is there but not a number
    (``"abc"``, an object without ``value``, a unit that is not a string) is named in
    ``lost`` with its path ("GPU entry 0: power/socket_power")."""

    def __init__(self, gpu: Any, lost: list[str] | None, where: str) -> None:
        self.gpu, self.lost, self.where = gpu, lost, where

    def val(
        self, *path: str, mem: bool = False, bare: str | None = None, expect: str | None = None
    ) -> float | None:
        """Follow ``path``; read ``{"value","unit"}`` or a bare value (in ``bare``). A unit
        of another quantity than ``expect`` (the field's: "%" for a temperature) is said in
        ``lost`` and the field is unknown."""
        cur = self.gpu
        for p in path:
            if not isinstance(cur, dict) or p not in cur:
                return None
            cur = cur[p]
        at = f"{self.where}: {'/'.join(path)}"
        unit = bare
        if isinstance(cur, dict) and "value" in cur:
            unit = cur.get("unit") or bare
            if unit is not None and not isinstance(unit, str):
                return reading(cur, None, self.lost, at)  # said as not a number
            if mem and unit and unit.lower() in _AMD_UNIT_FIX:
                unit = _AMD_UNIT_FIX[unit.lower()]
            cur = cur["value"]
        return reading(cur, unit, self.lost, at, expect or bare)

    def first(
        self, *paths: tuple[str, ...], mem: bool = False, expect: str | None = None
    ) -> float | None:
        for p in paths:
            v = self.val(*p, mem=mem, expect=expect)
            if v is not None:
                return v
        return None

    def count(self, *path: str) -> int | None:
        v = self.val(*path)
        return None if v is None else reading_int(v, self.lost, f"{self.where}: {'/'.join(path)}")


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
        f = _Fields(g, lost, f"GPU entry {n}")
        speed = f.val("pcie", "speed", expect="GT/s")
        # amd-smi prints the PCIe speed in GT/s; _q with unit "GT/s" gives MT/s.
        if speed is not None and speed < 1000:  # a bare number: GT/s
            speed *= 1000.0
        throttle = f.count("power", "throttle_status")
        energy = f.first(
            ("energy", "total_energy_consumption"),
            ("energy", "energy_accumulator"),
            expect="J",
        )
        rows.append(
            new_row(
                t_ns=t_ns,
                source="amd-smi",
                kind=KIND_GPU,
                vendor="amd",
                device_index=int(idx)
                if isinstance(idx, int | str) and not isinstance(idx, bool) and str(idx).isdecimal()
                else n,
                bus_id=normalize_bus_id(g.get("bdf")) if isinstance(g.get("bdf"), str) else None,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
                util_gpu=f.val("usage", "gfx_activity", bare="%"),  # a percent
                util_mem=f.val("usage", "umc_activity", bare="%"),
                mem_used_bytes=whole(
                    f.first(("mem_usage", "used_vram"), ("vram", "used"), mem=True, expect="MiB")
                ),
                mem_total_bytes=whole(
                    f.first(("mem_usage", "total_vram"), ("vram", "total"), mem=True, expect="MiB")
                ),
                power_w=f.first(
                    ("power", "socket_power"),
                    ("power", "current_socket_power"),
                    ("power", "average_socket_power"),
                    expect="W",
                ),
                energy_j=energy,
                temp_gpu_c=f.val("temperature", "edge", expect="C"),
                temp_hotspot_c=f.val("temperature", "hotspot", expect="C"),
                temp_mem_c=f.val("temperature", "mem", expect="C"),
                clock_sm_hz=f.first(
                    ("clock", "gfx_0", "clk"), ("clock", "gfx", "clk"), expect="MHz"
                ),
                clock_mem_hz=f.first(
                    ("clock", "mem_0", "clk"), ("clock", "mem", "clk"), expect="MHz"
                ),
                clock_sm_max_hz=f.first(
                    ("clock", "gfx_0", "max_clk"), ("clock", "gfx", "max_clk"), expect="MHz"
                ),
                clock_mem_max_hz=f.first(
                    ("clock", "mem_0", "max_clk"), ("clock", "mem", "max_clk"), expect="MHz"
                ),
                throttle_mask=throttle,
                ecc_corrected_aggregate=f.count("ecc", "total_correctable_count"),
                ecc_uncorrected_aggregate=f.count("ecc", "total_uncorrectable_count"),
                ecc_deferred=f.count("ecc", "total_deferred_count"),
                pcie_gen=pcie_gen_from_speed(speed),
                pcie_width=f.count("pcie", "width"),
                pcie_replay=f.count("pcie", "replay_count"),
            )
        )
    return plausible(rows, lost)
