"""Version comparisons against the shipped compatibility table (data/compat.yaml)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

from accelbench.yamlfile import load_yaml


@lru_cache(maxsize=1)
def compat_table() -> dict[str, Any]:
    text = resources.files("accelbench.doctor").joinpath("data/compat.yaml").read_text()
    return load_yaml(text)


def vtuple(v: str | None) -> tuple[int, ...]:
    """'550.54.14' -> (550, 54, 14); '6.2.41133-dd7f95766' -> (6, 2, 41133); junk -> ()."""
    if not v:
        return ()
    m = re.match(r"\d+(?:\.\d+)*", v.strip())
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def major_minor(v: str | None) -> str | None:
    t = vtuple(v)
    return f"{t[0]}.{t[1]}" if len(t) >= 2 else (f"{t[0]}.0" if t else None)


def torch_cuda_from_version(torch_version: str | None) -> str | None:
    """'2.5.1+cu124' -> '12.4'; '2.1.0+cu118' -> '11.8'."""
    m = re.search(r"\+cu(\d+)(\d)$", torch_version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def torch_rocm_from_version(torch_version: str | None) -> str | None:
    """'2.5.1+rocm6.2' -> '6.2'."""
    m = re.search(r"\+rocm(\d+\.\d+)", torch_version or "")
    return m.group(1) if m else None


def check_cuda(
    driver: str | None, driver_cuda: str | None, torch_cuda: str | None, toolkit: str | None
) -> list[tuple[str, str, str]]:
    """Findings as (level, message, remedy); level is pass / warn / fail."""
    table = compat_table()
    out: list[tuple[str, str, str]] = []
    for label, need in (("PyTorch", torch_cuda), ("CUDA toolkit", toolkit)):
        if not need:
            continue
        mm = major_minor(need)
        major = mm.split(".")[0] if mm else None
        if driver_cuda:
            if vtuple(driver_cuda)[:1] < vtuple(need)[:1]:
                out.append(
                    (
                        "fail",
                        f"{label} is built for CUDA {need} but the driver supports "
                        f"only CUDA {driver_cuda}",
                        "Install a driver of the CUDA "
                        f"{major}.x branch or a {label} build for CUDA {driver_cuda}.",
                    )
                )
                continue
            if vtuple(driver_cuda)[:2] < vtuple(need)[:2]:
                out.append(
                    (
                        "warn",
                        f"{label} is built for CUDA {need}, newer than the driver's "
                        f"CUDA {driver_cuda}: runs through minor version compatibility, but "
                        "PTX JIT of newer code fails",
                        f"Update the driver or use a build for CUDA {driver_cuda}.",
                    )
                )
                continue
        if driver:
            row = table["cuda_minor_compat_min_driver"].get(major or "")
            if row is None:
                out.append(
                    (
                        "warn",
                        f"CUDA {need}: no driver minimum in the shipped table",
                        "Check NVIDIA's CUDA release notes.",
                    )
                )
            elif vtuple(driver) < vtuple(row["driver"]):
                out.append(
                    (
                        "fail",
                        f"driver {driver} is older than {row['driver']}, the minimum "
                        f"for CUDA {major}.x (minor version compatibility)",
                        f"Install driver >= {row['driver']}.",
                    )
                )
            else:
                exact = table["cuda_toolkit_min_driver"].get(mm or "")
                note = (
                    f"; CUDA {mm} release minimum {exact['driver']}"
                    f"{'' if exact.get('verified') else ' (unverified)'}"
                    if exact
                    else ""
                )
                if exact and vtuple(driver) < vtuple(exact["driver"]):
                    out.append(
                        (
                            "warn",
                            f"driver {driver} is below the CUDA {mm} release minimum "
                            f"{exact['driver']}; works through minor version compatibility "
                            "only",
                            f"Install driver >= {exact['driver']} for full CUDA {mm}.",
                        )
                    )
                else:
                    out.append(("pass", f"{label} CUDA {need} runs on driver {driver}{note}", ""))
        elif driver_cuda:
            out.append(("pass", f"{label} CUDA {need} within the driver's CUDA {driver_cuda}", ""))
    return out


def check_rocm(
    rocm: str | None,
    archs: list[str],
    os_id: str | None,
    os_version: str | None,
    torch_hip: str | None,
) -> list[tuple[str, str, str]]:
    table = compat_table()
    out: list[tuple[str, str, str]] = []
    mm = major_minor(rocm)
    for arch in sorted(set(a.split(":")[0] for a in archs if a)):
        row = table["rocm_arch_min"].get(arch)
        if row is None:
            out.append(
                (
                    "warn",
                    f"{arch}: not in the shipped ROCm support table",
                    "Check AMD's ROCm compatibility matrix for this GPU.",
                )
            )
        elif rocm and vtuple(rocm) < vtuple(row["min_rocm"]):
            out.append(
                (
                    "fail",
                    f"{arch} ({row['products']}) needs ROCm >= {row['min_rocm']}, found {rocm}",
                    f"Install ROCm {row['min_rocm']} or newer.",
                )
            )
        elif rocm:
            v = "" if row.get("verified") else " (table entry unverified)"
            out.append(
                (
                    "pass",
                    f"{arch} ({row['products']}) supported since ROCm "
                    f"{row['min_rocm']}; found {rocm}{v}",
                    "",
                )
            )
    if mm and os_id:
        row = table["rocm_os"].get(mm)
        supported = (row or {}).get(os_id.lower())
        m = re.match(r"\d+(?:\.\d+)?", os_version or "")
        osv = m.group(0) if m else None  # "22.04.4" -> "22.04" (keep the leading zero)
        if row is None or supported is None:
            out.append(
                (
                    "warn",
                    f"ROCm {mm} on {os_id} {os_version}: combination not in the shipped table",
                    "Check AMD's ROCm compatibility matrix.",
                )
            )
        elif osv in supported:
            out.append(("pass", f"ROCm {mm} supports {os_id} {osv}", ""))
        else:
            out.append(
                (
                    "warn",
                    f"ROCm {mm} lists {os_id} {', '.join(supported)}; this is {os_version}",
                    "Use a listed OS release or check AMD's matrix.",
                )
            )
    if torch_hip and rocm:
        if major_minor(torch_hip) == mm:
            out.append(("pass", f"PyTorch HIP {torch_hip} matches ROCm {rocm}", ""))
        else:
            out.append(
                (
                    "warn",
                    f"PyTorch is built for ROCm {major_minor(torch_hip)} but ROCm "
                    f"{rocm} is installed",
                    "Fine for pip wheels that bundle their ROCm "
                    f"libraries if the kernel driver is within {table['rocm_user_kernel_window']}"
                    " releases; otherwise install the matching PyTorch wheel.",
                )
            )
    return out
