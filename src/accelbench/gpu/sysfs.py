"""GPUs under ``/sys`` without any vendor library.

amdgpu (``/sys/class/drm/card*/device``): ``gpu_busy_percent`` in %,
``mem_info_vram_*`` in bytes, hwmon ``power1_average`` / ``power1_input`` /
``power1_cap`` in uW, ``temp*_input`` in m°C. PCI devices: ``current_link_speed``
("16.0 GT/s PCIe"), ``current_link_width`` (lanes).
"""

from __future__ import annotations

import re
from pathlib import Path

from accelbench.gpu.values import to_float

AMD_VENDOR_ID = "0x1002"
NVIDIA_VENDOR_ID = "0x10de"


def read_text(path: Path) -> str | None:
    """A sysfs attribute, stripped; None when absent or unreadable."""
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None


def read_number(path: Path) -> float | None:
    """The first number of a sysfs attribute ("250000000", "16 GT/s" -> 16.0)."""
    s = read_text(path)
    return to_float(s.split()[0]) if s else None


def link_speed_gts(value: str | None) -> float | None:
    """A link speed ('32.0 GT/s PCIe', '16 GT/s', 'Unknown') -> GT/s."""
    if not value:
        return None
    m = re.match(r"([\d.]+)\s*GT/s", value)
    return float(m.group(1)) if m else None


def amdgpu_devices(drm_root: Path) -> list[Path]:
    """The ``device`` directories of amdgpu cards that report ``gpu_busy_percent``."""
    out = []
    for card in sorted(drm_root.glob("card*")):
        if "-" in card.name:  # connectors like card0-DP-1
            continue
        dev = card / "device"
        if read_text(dev / "vendor") == AMD_VENDOR_ID and (dev / "gpu_busy_percent").exists():
            out.append(dev)
    return out


def hwmon_dir(dev: Path) -> Path | None:
    """The device's first hwmon directory (power and temperature sensors)."""
    hw = sorted((dev / "hwmon").glob("hwmon*"))
    return hw[0] if hw else None
