"""Parsers for captured tool output, one module per tool, all into the common schema
(:mod:`accelbench.telemetry.schema`).

- ``nvidia-smi -q -x`` (DTD v11 ``<clocks_throttle_reasons>`` / ``<power_readings>``,
  v12 ``<clocks_event_reasons>`` / ``<gpu_power_readings>``, v13 ``<average_power_draw>``
  / ``<instant_power_draw>`` and ``<clocks_event_reasons_counters>`` in microseconds)
- ``nvidia-smi --query-gpu=... --format=csv`` with or without ``nounits``
- ``rocm-smi --json`` (ROCm 5 and ROCm 6 key names)
- ``amd-smi metric --json`` (ROCm 6.2-6.3: a top-level list; ROCm 7: ``{"gpu_data": [...]}``;
  leaves are ``{"value": x, "unit": "..."}`` or ``"N/A"``)
- Prometheus scrapes of dcgm-exporter and the ROCm Device Metrics Exporter
- Inference-server ``/metrics`` (vLLM, SGLang, llama.cpp, TGI), see :func:`parse_server_metrics`

Every parser takes the captured text (BOM, CRLF and tool warnings before the data are
handled) and optional ``lost`` / ``notes`` lists it appends to: what could not be read
(a cut capture, a value that is not a number, a reading outside its plausible range:
:data:`~accelbench.telemetry.schema.BOUNDS`, left out of its row) and harmless remarks.
It returns a list of rows (dicts with every schema column). ``t_ns`` is the
caller's (a captured file has no monotonic time; the CLI leaves it null).
"""

from accelbench.gpu.nvml import NV_THROTTLE_BITS, NV_THROTTLE_HARMFUL, nv_throttle_names
from accelbench.telemetry.parsers.amd_smi import parse_amd_smi_json
from accelbench.telemetry.parsers.dcgm import parse_dcgm_prometheus
from accelbench.telemetry.parsers.detect import (
    DESCRIPTIONS,
    FORMATS,
    Capture,
    detect_format,
    identify,
    looks_like,
    parse_capture,
    parse_file,
    read_capture,
)
from accelbench.telemetry.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_xml
from accelbench.telemetry.parsers.prometheus import prometheus_samples
from accelbench.telemetry.parsers.rocm_exporter import parse_rocm_exporter_prometheus
from accelbench.telemetry.parsers.rocm_smi import parse_rocm_smi_json
from accelbench.telemetry.parsers.server import SERVER_METRICS, detect_engine, parse_server_metrics

__all__ = [
    "DESCRIPTIONS",
    "FORMATS",
    "Capture",
    "NV_THROTTLE_BITS",
    "NV_THROTTLE_HARMFUL",
    "SERVER_METRICS",
    "detect_engine",
    "detect_format",
    "identify",
    "looks_like",
    "parse_capture",
    "read_capture",
    "nv_throttle_names",
    "parse_amd_smi_json",
    "parse_dcgm_prometheus",
    "parse_file",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_xml",
    "parse_rocm_exporter_prometheus",
    "parse_rocm_smi_json",
    "parse_server_metrics",
    "prometheus_samples",
]
