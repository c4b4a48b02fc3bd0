"""amdgpu GPUs sampled from sysfs, no library needed (units: :mod:`accelbench.gpu.sysfs`)."""

from __future__ import annotations

import time
from pathlib import Path

from accelbench.gpu import sysfs
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.values import whole
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, pcie_gen_from_speed
from accelbench.telemetry.sources.base import Source


class SysfsAmdgpuSource(Source):
    """Reads ``/sys/class/drm/card*/device`` of amdgpu devices (vendor 0x1002)."""

    name = "sysfs"

    def __init__(self, root: Path | str = "/sys/class/drm") -> None:
        self.root = Path(root)
        self._devices: list[Path] = []

    def probe(self) -> str | None:
        if not self.root.is_dir():
            return f"{self.root} does not exist"
        self._devices = sysfs.amdgpu_devices(self.root)
        if not self._devices:
            return f"no amdgpu device with gpu_busy_percent under {self.root}"
        return None

    def sample(self, t_ns: int) -> list[Row]:
        rows = []
        for i, dev in enumerate(self._devices):
            hw = sysfs.hwmon_dir(dev)
            temps: dict[str, float | None] = {}
            crit: dict[str, float | None] = {}
            power_uw = cap_uw = None
            if hw is not None:
                for inp in hw.glob("temp*_input"):
                    stem = inp.name[: -len("_input")]
                    label = (sysfs.read_text(hw / f"{stem}_label") or stem).lower()
                    v = sysfs.read_number(inp)
                    temps[label] = None if v is None else v / 1000.0
                    c = sysfs.read_number(hw / f"{stem}_crit")
                    crit[label] = None if c is None else c / 1000.0
                power_uw = sysfs.read_number(hw / "power1_average")
                if power_uw is None:
                    power_uw = sysfs.read_number(hw / "power1_input")
                cap_uw = sysfs.read_number(hw / "power1_cap")
            busy = sysfs.read_number(dev / "gpu_busy_percent")
            mem_busy = sysfs.read_number(dev / "mem_busy_percent")
            speed = sysfs.read_text(dev / "current_link_speed")
            max_speed = sysfs.read_text(dev / "max_link_speed")
            row = new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_GPU,
                vendor="amd",
                device_index=i,
                bus_id=normalize_bus_id(dev.resolve().name),
                serial=sysfs.read_text(dev / "serial_number"),
                uuid=sysfs.read_text(dev / "unique_id"),
                util_gpu=None if busy is None else busy / 100.0,
                util_mem=None if mem_busy is None else mem_busy / 100.0,
                mem_used_bytes=whole(sysfs.read_number(dev / "mem_info_vram_used")),
                mem_total_bytes=whole(sysfs.read_number(dev / "mem_info_vram_total")),
                power_w=None if power_uw is None else power_uw / 1e6,
                power_limit_w=None if cap_uw is None else cap_uw / 1e6,
                temp_gpu_c=temps.get("edge"),
                temp_hotspot_c=temps.get("junction"),
                temp_mem_c=temps.get("mem"),
                temp_slowdown_c=crit.get("junction"),
                temp_mem_max_c=crit.get("mem"),
                pcie_gen=_gen_from_sysfs(speed),
                pcie_gen_max=_gen_from_sysfs(max_speed),
                pcie_width=whole(sysfs.read_number(dev / "current_link_width")),
                pcie_width_max=whole(sysfs.read_number(dev / "max_link_width")),
            )
            rows.append(row)
        return rows


def _gen_from_sysfs(speed: str | None) -> int | None:
    """ "16.0 GT/s PCIe" -> 4."""
    gts = sysfs.link_speed_gts(speed)
    return None if gts is None else pcie_gen_from_speed(gts * 1000.0)
