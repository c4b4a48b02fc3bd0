"""PCI bus ids ("BDF": domain:bus:device.function) in one canonical form.

Tools spell the same GPU differently: NVML and nvidia-smi ``00000000:CD:00.0``, lspci
``cd:00.0`` (without -D), sysfs and amdsmi ``0000:cd:00.0``. Every id accelbench stores
or compares goes through :func:`normalize_bus_id`, which gives the lspci -D / sysfs
form: lower-case, 4-hex-digit domain.
"""

from __future__ import annotations

import re

from accelbench.gpu.values import is_na

_BDF = re.compile(r"(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])")


def normalize_bus_id(bus_id: str | None) -> str | None:
    """'00000000:CD:00.0' / 'cd:00.0' / '0000:cd:00.0' -> '0000:cd:00.0'; "N/A" or None
    -> None. Text that is not a bus id comes back stripped and lower-cased."""
    if bus_id is None or is_na(bus_id):
        return None
    s = bus_id.strip().lower()
    m = _BDF.fullmatch(s)
    if not m:
        return s
    domain = int(m.group(1) or "0", 16) & 0xFFFF
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def bus_id_from_bdfid(bdfid: int) -> str:
    """rocminfo's ``BDFID`` (bus << 8 | device << 3 | function) -> '0000:bb:dd.f'."""
    return f"0000:{(bdfid >> 8) & 0xFF:02x}:{(bdfid >> 3) & 0x1F:02x}.{bdfid & 7}"
