"""Format detection for captured files, and parsing a file by its format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers.amd_smi import parse_amd_smi_json
from accelbench.telemetry.parsers.dcgm import parse_dcgm_prometheus
from accelbench.telemetry.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_xml
from accelbench.telemetry.parsers.rocm_exporter import parse_rocm_exporter_prometheus
from accelbench.telemetry.parsers.rocm_smi import parse_rocm_smi_json
from accelbench.telemetry.parsers.server import parse_server_metrics

FORMATS = {
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "nvidia-smi-csv": parse_nvidia_smi_csv,
    "rocm-smi": parse_rocm_smi_json,
    "amd-smi": parse_amd_smi_json,
    "dcgm": parse_dcgm_prometheus,
    "rocm-exporter": parse_rocm_exporter_prometheus,
    "server": parse_server_metrics,
}


def detect_format(text: str) -> str:
    """Guess the format of a captured tool output."""
    s = text.lstrip()
    if s.startswith("<?xml") or s.startswith("<nvidia_smi_log") or "<nvidia_smi_log" in s[:500]:
        return "nvidia-smi-xml"
    if s.startswith("{") or s.startswith("["):
        try:
            data = json.loads(s)
        except json.JSONDecodeError as exc:
            raise AccelbenchError(f"looks like JSON but does not parse: {exc}") from exc
        if isinstance(data, dict) and any(k.startswith("card") for k in data):
            return "rocm-smi"
        return "amd-smi"
    if "DCGM_FI_" in s:
        return "dcgm"
    first = s.splitlines()[0] if s else ""
    if "," in first and ("pci.bus_id" in first or "name" in first or "uuid" in first):
        return "nvidia-smi-csv"
    if any(p in s for p in ("vllm:", "sglang:", "llamacpp:", "tgi_")):
        return "server"
    if "gpu_" in s or "pcie_" in s:
        return "rocm-exporter"
    raise AccelbenchError(
        "unknown telemetry format: expected nvidia-smi -q -x XML, nvidia-smi --query-gpu CSV, "
        "rocm-smi/amd-smi JSON, or a Prometheus scrape"
    )


def parse_file(path: Path, fmt: str | None = None) -> list[dict[str, Any]]:
    """Parse a captured file (format guessed unless ``fmt`` names one of :data:`FORMATS`)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise AccelbenchError(f"cannot read {path}: {exc.strerror}") from exc
    fmt = fmt or detect_format(text)
    if fmt not in FORMATS:
        raise AccelbenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return FORMATS[fmt](text)
