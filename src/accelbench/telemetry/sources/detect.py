"""Building sources by name and autodetecting the ones that work here."""

from __future__ import annotations

import os

from accelbench.gpu.values import call
from accelbench.telemetry.sources.amdsmi import AmdSmiSource
from accelbench.telemetry.sources.base import Source
from accelbench.telemetry.sources.host import HostSource
from accelbench.telemetry.sources.nvml import NvmlSource
from accelbench.telemetry.sources.server import ServerMetricsSource
from accelbench.telemetry.sources.smi import SmiCommandSource
from accelbench.telemetry.sources.sysfs import SysfsAmdgpuSource
from accelbench.urls import Endpoint

SOURCE_NAMES = ("nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi", "sysfs", "host", "server")


def make_source(
    name: str, server_url: str | Endpoint | None = None, server_pid: int | None = None
) -> Source | str:
    """A source by name, or a reason string when it cannot be built."""
    if name == "nvml":
        return NvmlSource()
    if name == "amdsmi":
        return AmdSmiSource()
    if name in SmiCommandSource.COMMANDS:
        return SmiCommandSource(name)
    if name == "sysfs":
        return SysfsAmdgpuSource(os.environ.get("ACCELBENCH_SYSFS_DRM", "/sys/class/drm"))
    if name == "host":
        return HostSource(server_pid)
    if name == "server":
        if not server_url:
            return "no server URL given"
        return ServerMetricsSource(server_url)
    return f"unknown source {name!r} (known: {', '.join(SOURCE_NAMES)})"


def open_sources(
    names: list[str] | None,
    server_url: str | Endpoint | None = None,
    server_pid: int | None = None,
) -> tuple[list[Source], dict[str, str]]:
    """Probe the named sources (or autodetect when ``names`` is None).

    Returns the working sources and a status map ``{name: "ok" | "not available: why"}``.
    Autodetection tries NVML, then nvidia-smi only if NVML failed; amdsmi, then amd-smi,
    rocm-smi and sysfs only if the ones before failed; always host; server when a URL
    is given.
    """
    status: dict[str, str] = {}
    active: list[Source] = []

    def attempt(name: str) -> bool:
        src = make_source(name, server_url, server_pid)
        if isinstance(src, str):
            status[name] = f"not available: {src}"
            return False
        try:
            reason = src.probe()
        except Exception as exc:  # a source must never break the run
            reason = f"probe failed ({type(exc).__name__}: {exc})"
        if reason is None:
            status[name] = "ok"
            active.append(src)
            return True
        status[name] = f"not available: {reason}"
        call(src.close)
        return False

    if names is not None:
        for n in names:
            attempt(n)
        return active, status
    if not attempt("nvml"):
        attempt("nvidia-smi")
    if not attempt("amdsmi") and not attempt("amd-smi") and not attempt("rocm-smi"):
        attempt("sysfs")
    attempt("host")
    if server_url:
        attempt("server")
    else:
        status["server"] = "not available: no server URL given"
    return active, status
