"""Reads of /sys, /proc, /etc and /opt under a configurable root (so tests and captured
trees can stand in for the machine). Nothing here runs a subprocess, so it is fast
enough for `quick_summary`. Unreadable files give None, never an exception; the
reason is recorded in `Probe.problems`.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from accelbench.doctor.parsers import Link, PciDevice, Ras
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.sysfs import link_speed_gts

VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}
# PCI base classes 0x03 (display) and 0x12 (processing accelerator).
GPU_CLASS_PREFIXES = ("0x03", "0x12")


@dataclass
class Probe:
    root: Path = Path("/")
    problems: list[str] = field(default_factory=list)

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def read(self, p: str | Path) -> str | None:
        path = p if isinstance(p, Path) else self.path(p)
        try:
            return path.read_text(errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:  # permission denied, EIO from sysfs, is a directory
            self.problems.append(f"{path}: {exc.strerror or exc}")
            return None


class Iommu(TypedDict):
    units: list[str]  # /sys/class/iommu entries
    cmdline: list[str]  # the kernel command line's iommu parameters


class Hugepages(TypedDict, total=False):
    HugePages_Total: int
    HugePages_Free: int
    Hugepagesize: int  # kB, as /proc/meminfo says
    MemTotal: int
    thp: str  # transparent huge pages: always | madvise | never


def scan_pci(probe: Probe) -> list[PciDevice]:
    """NVIDIA / AMD display and accelerator functions under /sys/bus/pci/devices."""
    base = probe.path("sys/bus/pci/devices")
    out: list[PciDevice] = []
    try:
        entries = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    except OSError as exc:
        probe.problems.append(f"{base}: {exc.strerror or exc}")
        return out
    for name in entries:
        d = base / name
        vendor = (probe.read(d / "vendor") or "").lower()
        cls = (probe.read(d / "class") or "").lower()
        if vendor not in VENDORS or not cls.startswith(GPU_CLASS_PREFIXES):
            continue
        drv = None
        with contextlib.suppress(OSError):
            drv = os.path.basename(os.readlink(d / "driver"))
        width = probe.read(d / "current_link_width")
        maxw = probe.read(d / "max_link_width")
        numa = probe.read(d / "numa_node")
        iommu_type = probe.read(d / "iommu_group" / "type")
        dev: PciDevice = {
            "bdf": normalize_bus_id(name) or name,
            "vendor": VENDORS[vendor],
            "device_id": (probe.read(d / "device") or "").lower() or None,
            "class": cls,
            "driver": drv,
            "sta_speed": link_speed_gts(probe.read(d / "current_link_speed")),
            "cap_speed": link_speed_gts(probe.read(d / "max_link_speed")),
            "sta_width": int(width) if width and width.isdigit() else None,
            "cap_width": int(maxw) if maxw and maxw.isdigit() else None,
            "numa_node": int(numa) if numa and re.fullmatch(r"-?\d+", numa) else None,
            "iommu_group_type": iommu_type,
        }
        dev["upstream"] = _upstream_links(probe, d)
        ras = _amdgpu_ras(probe, d)
        if ras:
            dev["ras"] = ras
        out.append(dev)
    return out


_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def _upstream_links(probe: Probe, d: Path) -> list[Link]:
    """Link state of the bridges above a device (switch ports, root port): the device's
    sysfs directory sits inside its parents' directories under /sys/devices."""
    out: list[Link] = []
    try:
        real = d.resolve()
    except OSError:
        return out
    for parent in real.parents:
        if not _BDF.fullmatch(parent.name):
            if parent.name.startswith("pci"):
                break
            continue
        w, mw = probe.read(parent / "current_link_width"), probe.read(parent / "max_link_width")
        out.append(
            {
                "bdf": normalize_bus_id(parent.name) or parent.name,
                "description": "bridge",
                "sta_speed": link_speed_gts(probe.read(parent / "current_link_speed")),
                "cap_speed": link_speed_gts(probe.read(parent / "max_link_speed")),
                "sta_width": int(w) if w and w.isdigit() else None,
                "cap_width": int(mw) if mw and mw.isdigit() else None,
            }
        )
    return out


def _amdgpu_ras(probe: Probe, d: Path) -> Ras:
    """amdgpu RAS counters: ras/<block>_err_count ('ue: N' / 'ce: N') and bad pages."""
    ras_dir = d / "ras"
    out: Ras = {}
    if not ras_dir.is_dir():
        return out
    try:
        names = sorted(os.listdir(ras_dir))
    except OSError as exc:
        probe.problems.append(f"{ras_dir}: {exc.strerror or exc}")
        return out
    for n in names:
        if n.endswith("_err_count"):
            txt = probe.read(ras_dir / n) or ""
            ue = re.search(r"ue:\s*(\d+)", txt)
            ce = re.search(r"ce:\s*(\d+)", txt)
            out[n[: -len("_err_count")]] = {
                "ue": int(ue.group(1)) if ue else None,
                "ce": int(ce.group(1)) if ce else None,
            }
    bad = probe.read(ras_dir / "gpu_vram_bad_pages")
    if bad is not None:
        out["bad_pages"] = len([ln for ln in bad.splitlines() if ln.strip()])
    return out


def os_release(probe: Probe) -> dict[str, str]:
    txt = probe.read("etc/os-release") or probe.read("usr/lib/os-release") or ""
    out = {}
    for ln in txt.splitlines():
        k, sep, v = ln.partition("=")
        if sep:
            out[k.strip()] = v.strip().strip('"')
    return out


def kernel_release(probe: Probe) -> str | None:
    return probe.read("proc/sys/kernel/osrelease")


def nvidia_driver_version(probe: Probe) -> tuple[str | None, str | None]:
    """(version, evidence) from /proc/driver/nvidia/version or /sys/module/nvidia/version."""
    txt = probe.read("proc/driver/nvidia/version")
    if txt:
        m = re.search(r"Kernel Module(?: for \S+)?\s+([\d.]+)", txt)
        if m:
            return m.group(1), txt.splitlines()[0]
    v = probe.read("sys/module/nvidia/version")
    if v:
        return v, f"/sys/module/nvidia/version: {v}"
    return None, None


def amdgpu_driver_version(probe: Probe) -> tuple[str | None, str | None]:
    """The amdgpu module version exists only for DKMS (out-of-tree) builds."""
    v = probe.read("sys/module/amdgpu/version")
    if v:
        return v, f"/sys/module/amdgpu/version: {v}"
    if probe.path("sys/module/amdgpu").exists():
        return "in-tree", "/sys/module/amdgpu present without a version file (kernel's own amdgpu)"
    return None, None


def rocm_version(probe: Probe) -> tuple[str | None, str | None]:
    for p in ("opt/rocm/.info/version", "opt/rocm/.info/version-dev"):
        v = probe.read(p)
        if v:
            return v.splitlines()[0], f"/{p}: {v.splitlines()[0]}"
    hdr = probe.read("opt/rocm/include/rocm-core/rocm_version.h")
    if hdr:
        parts = [
            re.search(rf"#define ROCM_VERSION_{k}\s+(\d+)", hdr)
            for k in ("MAJOR", "MINOR", "PATCH")
        ]
        if all(parts):
            v = ".".join(m.group(1) for m in parts if m)
            return v, f"/opt/rocm/include/rocm-core/rocm_version.h: {v}"
    return None, None


def cuda_toolkit_version(probe: Probe) -> tuple[str | None, str | None]:
    txt = probe.read("usr/local/cuda/version.json")
    if txt:
        m = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([\d.]+)"', txt, re.S)
        if m:
            return m.group(1), f"/usr/local/cuda/version.json: {m.group(1)}"
    txt = probe.read("usr/local/cuda/version.txt")
    if txt:
        m = re.search(r"CUDA Version ([\d.]+)", txt)
        if m:
            return m.group(1), f"/usr/local/cuda/version.txt: {txt}"
    return None, None


def iommu(probe: Probe) -> Iommu:
    cmdline = probe.read("proc/cmdline") or ""
    units: list[str] = []
    with contextlib.suppress(OSError):
        units = sorted(os.listdir(probe.path("sys/class/iommu")))
    params = [t for t in cmdline.split() if t.startswith(("iommu", "amd_iommu", "intel_iommu"))]
    return {"units": units, "cmdline": params}


def hugepages(probe: Probe) -> Hugepages:
    mem = probe.read("proc/meminfo") or ""
    out: Hugepages = {}
    for key in ("HugePages_Total", "HugePages_Free", "Hugepagesize", "MemTotal"):
        m = re.search(rf"^{key}:\s*(\d+)", mem, re.M)
        if m:
            out[key] = int(m.group(1))
    thp = probe.read("sys/kernel/mm/transparent_hugepage/enabled")
    if thp:
        m = re.search(r"\[(\w+)\]", thp)
        out["thp"] = m.group(1) if m else thp
    return out


def numa_nodes(probe: Probe) -> list[int]:
    try:
        names = os.listdir(probe.path("sys/devices/system/node"))
    except OSError:
        return []
    return sorted(int(n[4:]) for n in names if re.fullmatch(r"node\d+", n))
