"""AMD GPUs through the ``amdsmi`` Python library (ROCm).

Units, as amdsmi documents them: activity in %, memory in bytes, power in W
(``amdsmi_get_power_info``), power cap in uW, energy = ``energy_accumulator *
counter_resolution`` in uJ, clocks in MHz, temperatures in C, PCIe speed in MT/s.
Unsupported values come back as "N/A" strings: read them with
:func:`accelbench.gpu.values.to_float`.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Required, TypedDict

from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import call, text, to_int


def import_amdsmi() -> tuple[Any, str | None]:
    """Import amdsmi: (module, None) or (None, why not). Without ROCm the import raises
    KeyError (not ImportError), hence the broad except; it also prints its
    library-loading failure, which is kept off our output."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            import amdsmi
    except Exception as exc:
        return None, f"amdsmi not importable ({type(exc).__name__}: {exc})"
    return amdsmi, None


def open_amdsmi() -> tuple[Any, str | None]:
    """Import amdsmi and initialise it for GPUs: (module, None), or (None, why not)."""
    a, reason = import_amdsmi()
    if a is None:
        return None, reason
    try:
        a.amdsmi_init(a.AmdSmiInitFlags.INIT_AMD_GPUS)
    except Exception as exc:
        return None, f"amdsmi_init failed ({type(exc).__name__}: {exc})"
    return a, None


def close_amdsmi(a: Any) -> None:
    if a is not None:
        call(a.amdsmi_shut_down)


def bus_id(a: Any, h: Any) -> str | None:
    return normalize_bus_id(text(call(a.amdsmi_get_gpu_device_bdf, h)))


class AmdsmiGpu(TypedDict, total=False):
    """One GPU of :func:`inventory`; a key is absent when amdsmi did not give it."""

    index: Required[int]
    bdf: str
    name: str | None
    arch: str | None
    ecc_uncorrected: int | None
    ecc_corrected: int | None


class AmdsmiInventory(TypedDict, total=False):
    """:func:`inventory`: ``available`` False with a ``problem`` when amdsmi cannot be used."""

    available: Required[bool]
    problem: str | None
    gpus: list[AmdsmiGpu]


def inventory() -> AmdsmiInventory:
    """AMD GPUs with name, architecture and ECC totals, for the doctor."""
    a, reason = open_amdsmi()
    if a is None:
        return {"available": False, "problem": reason}
    gpus: list[AmdsmiGpu] = []
    out: AmdsmiInventory = {"available": True, "gpus": gpus}
    try:
        for i, h in enumerate(a.amdsmi_get_processor_handles()):
            g: AmdsmiGpu = {"index": i}
            bdf = bus_id(a, h)
            if bdf:
                g["bdf"] = bdf
            info = call(a.amdsmi_get_gpu_asic_info, h)
            if isinstance(info, dict):
                g["name"] = info.get("market_name")
                g["arch"] = info.get("target_graphics_version")
            ecc = call(a.amdsmi_get_gpu_total_ecc_count, h)
            if isinstance(ecc, dict):
                g["ecc_uncorrected"] = to_int(ecc.get("uncorrectable_count"))
                g["ecc_corrected"] = to_int(ecc.get("correctable_count"))
            gpus.append(g)
    except Exception as exc:
        out["problem"] = f"amdsmi query failed: {exc}"
    finally:
        close_amdsmi(a)
    return out
