"""``rocm-smi --json`` (ROCm 5 and ROCm 6 key names)."""

from __future__ import annotations

from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import is_na, to_float, to_int, whole
from accelbench.telemetry.parsers.text import find_json, not_an_object, reading, reading_int
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, pcie_gen_from_speed, plausible


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

        def num(
            *keys: str, unit: str | None = None, _card: dict = card, _key: str = key
        ) -> float | None:
            """The first of ``keys`` the card gives, as a number (one that is not is
            named in ``lost``)."""
            for k in keys:
                if k in _card and not is_na(_card[k]):
                    return reading(_card[k], unit, lost, f"{_key}: {k}")
            return None

        gen, width = _rocm_pcie_level(_rocm_get(card, "pcie clock level"))
        energy = num("Accumulated Energy (uJ)", unit="uJ")
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
                util_gpu=num("GPU use (%)", unit="%"),
                util_mem=num("GPU Memory Read/Write Activity (%)", "GPU memory use (%)", unit="%"),
                mem_used_bytes=whole(num("VRAM Total Used Memory (B)", unit="B")),
                mem_total_bytes=whole(num("VRAM Total Memory (B)", unit="B")),
                power_w=num(
                    "Average Graphics Package Power (W)",
                    "Current Socket Graphics Package Power (W)",
                    unit="W",
                ),
                power_limit_w=num("Max Graphics Package Power (W)", unit="W"),
                energy_j=energy,
                temp_gpu_c=num("Temperature (Sensor edge) (C)", unit="C"),
                temp_hotspot_c=num("Temperature (Sensor junction) (C)", unit="C"),
                temp_mem_c=num("Temperature (Sensor memory) (C)", unit="C"),
                clock_sm_hz=num("sclk clock speed:", unit="MHz"),
                clock_mem_hz=num("mclk clock speed:", unit="MHz"),
                pcie_gen=gen,
                pcie_width=width,
                pcie_replay=reading_int(
                    _rocm_get(card, "PCIe Replay Count"), lost, f"{key}: PCIe Replay Count"
                ),
            )
        )
    return plausible(rows, lost)
