"""Live telemetry sources, one module per kind; each is optional and detected at run time
(the contract is in :mod:`.base`, detection in :mod:`.detect`)."""

from accelbench.telemetry.sources.amdsmi import AMD_THROTTLE_BITS, AmdSmiSource
from accelbench.telemetry.sources.base import Source, close_sources
from accelbench.telemetry.sources.detect import SOURCE_NAMES, make_source, open_sources
from accelbench.telemetry.sources.host import HostSource
from accelbench.telemetry.sources.nvml import NvmlSource
from accelbench.telemetry.sources.server import ServerMetricsSource
from accelbench.telemetry.sources.smi import SmiCommandSource
from accelbench.telemetry.sources.sysfs import SysfsAmdgpuSource

__all__ = [
    "AMD_THROTTLE_BITS",
    "SOURCE_NAMES",
    "AmdSmiSource",
    "HostSource",
    "NvmlSource",
    "ServerMetricsSource",
    "SmiCommandSource",
    "Source",
    "SysfsAmdgpuSource",
    "close_sources",
    "make_source",
    "open_sources",
]
