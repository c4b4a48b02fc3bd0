"""``rocm-smi --json`` (ROCm 5 and ROCm 6 key names)."""

from __future__ import annotations

from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import is_na, to_float, to_int, whole
from accelbench.telemetry.parsers.text import find_json, not_an_object
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, pcie_gen_from_speed


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
            speed = to_float(p)
        elif low.startswith("x"):
            width = to_int(low[1:])
    return pcie_gen_from_speed(speed), width


def parse_rocm_smi_json(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """``rocm-smi [...] --json`` -> one row per ``cardN``.

    ROCm 5 and 6 differ in key names (``Card series``/``Card Series``/``Device Name``,
    ``GPU memory use (%)`` vs ``GPU Memory Read/Write Activity (%)``); both are read.
    Energy comes from ``Accumulated Energy (uJ)`` (the raw ``Energy counter`` needs the
    per-ASIC resolution, which the JSON does not carry). Warning lines printed before the
    JSON are skipped (and named in ``notes``).
    """
    data, skipped = find_json(text, "rocm-smi")
    if notes is not None:
        notes.extend(skipped)
    if not isinstance(data, dict) or not any(k.startswith("card") for k in data):
        raise AccelbenchError("not rocm-smi --json output (no 'cardN' keys)")
    driver = (data.get("system") or {}).get("Driver version")
    rows = []
    cards = sorted(
        (k for k in data if k.startswith("card") and k[4:].isdigit()), key=lambda k: int(k[4:])
    )
    for key in cards:
        card = data[key]
        if not isinstance(card, dict):
            not_an_object(lost, key, card)
            continue
        gen, width = _rocm_pcie_level(_rocm_get(card, "pcie clock level"))
        energy_uj = to_float(_rocm_get(card, "Accumulated Energy (uJ)"))
        rows.append(
            new_row(
                t_ns=t_ns,
                source="rocm-smi",
                kind=KIND_GPU,
                vendor="amd",
                model=_rocm_get(card, "Card Series", "Card series", "Device Name"),
                device_index=int(key[4:]),
                bus_id=normalize_bus_id(_rocm_get(card, "PCI Bus")),
                uuid=_rocm_get(card, "Unique ID"),
                serial=_rocm_get(card, "Serial Number"),
                driver_version=driver,
                util_gpu=to_float(_rocm_get(card, "GPU use (%)"), "%"),
                util_mem=to_float(
                    _rocm_get(card, "GPU Memory Read/Write Activity (%)", "GPU memory use (%)"),
                    "%",
                ),
                mem_used_bytes=whole(to_float(_rocm_get(card, "VRAM Total Used Memory (B)"), "B")),
                mem_total_bytes=whole(to_float(_rocm_get(card, "VRAM Total Memory (B)"), "B")),
                power_w=to_float(
                    _rocm_get(
                        card,
                        "Average Graphics Package Power (W)",
                        "Current Socket Graphics Package Power (W)",
                    ),
                    "W",
                ),
                power_limit_w=to_float(_rocm_get(card, "Max Graphics Package Power (W)"), "W"),
                energy_j=None if energy_uj is None else energy_uj * 1e-6,
                temp_gpu_c=to_float(_rocm_get(card, "Temperature (Sensor edge) (C)"), "C"),
                temp_hotspot_c=to_float(_rocm_get(card, "Temperature (Sensor junction) (C)"), "C"),
                temp_mem_c=to_float(_rocm_get(card, "Temperature (Sensor memory) (C)"), "C"),
                clock_sm_hz=to_float(_rocm_get(card, "sclk clock speed:")),
                clock_mem_hz=to_float(_rocm_get(card, "mclk clock speed:")),
                pcie_gen=gen,
                pcie_width=width,
                pcie_replay=to_int(_rocm_get(card, "PCIe Replay Count")),
            )
        )
    return rows
