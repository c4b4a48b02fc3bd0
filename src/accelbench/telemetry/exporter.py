"""A Prometheus exporter for the latest telemetry samples and health verdict.

Metric names follow Prometheus conventions: ``accelbench_`` prefix, base units in the
name (``_bytes``, ``_watts``, ``_joules``, ``_celsius``, ``_hertz``, ``_seconds``,
``_ratio``), ``_total`` on counters. GPUs carry the labels ``vendor``, ``model``,
``device``, ``bus_id`` and ``uuid``. The server binds to 127.0.0.1 unless told otherwise.

The health verdict is served as ``accelbench_health_verdict{verdict="pass|warn|fail|unknown"}``
(1 for the current verdict, 0 for the others) and as the code ``accelbench_health_status``
(0 pass, 1 warn, 2 fail, 3 unknown); ``accelbench_health_unknown_reasons`` counts why the
verdict is unknown (the reasons themselves are in the monitor's log and alert events) and
``accelbench_source_up{source}`` is 0 for a source that gave nothing in the last tick.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accelbench.telemetry.schema import KIND_GPU, KIND_HOST, KIND_SERVER, Row, numeric

GPU_LABELS = ["vendor", "model", "device", "bus_id", "uuid"]

# (metric name without prefix, help, column, type, extra label name, extra label value)
GPU_METRICS: list[tuple[str, str, str, str, dict[str, str]]] = [
    ("gpu_utilization_ratio", "GPU engine busy ratio (0-1)", "util_gpu", "gauge", {}),
    (
        "gpu_memory_utilization_ratio",
        "Memory controller busy ratio (0-1)",
        "util_mem",
        "gauge",
        {},
    ),
    ("gpu_memory_used_bytes", "Device memory used", "mem_used_bytes", "gauge", {}),
    ("gpu_memory_total_bytes", "Device memory total", "mem_total_bytes", "gauge", {}),
    ("gpu_power_watts", "Power draw", "power_w", "gauge", {}),
    ("gpu_power_limit_watts", "Enforced power limit", "power_limit_w", "gauge", {}),
    ("gpu_energy_joules", "Energy counter since driver load", "energy_j", "counter", {}),
    ("gpu_temperature_celsius", "Temperature", "temp_gpu_c", "gauge", {"sensor": "gpu"}),
    ("gpu_temperature_celsius", "Temperature", "temp_hotspot_c", "gauge", {"sensor": "hotspot"}),
    ("gpu_temperature_celsius", "Temperature", "temp_mem_c", "gauge", {"sensor": "memory"}),
    (
        "gpu_temperature_slowdown_celsius",
        "Temperature at which clocks slow down",
        "temp_slowdown_c",
        "gauge",
        {},
    ),
    (
        "gpu_temperature_memory_max_celsius",
        "Maximum memory temperature",
        "temp_mem_max_c",
        "gauge",
        {},
    ),
    ("gpu_clock_hertz", "Clock frequency", "clock_sm_hz", "gauge", {"clock": "sm"}),
    ("gpu_clock_hertz", "Clock frequency", "clock_mem_hz", "gauge", {"clock": "memory"}),
    (
        "gpu_throttle_seconds",
        "Cumulative time clocks were held down",
        "throttle_power_s",
        "counter",
        {"cause": "power"},
    ),
    (
        "gpu_throttle_seconds",
        "Cumulative time clocks were held down",
        "throttle_thermal_s",
        "counter",
        {"cause": "thermal"},
    ),
    (
        "gpu_ecc_errors",
        "ECC errors",
        "ecc_corrected_volatile",
        "counter",
        {"type": "corrected", "scope": "volatile"},
    ),
    (
        "gpu_ecc_errors",
        "ECC errors",
        "ecc_uncorrected_volatile",
        "counter",
        {"type": "uncorrected", "scope": "volatile"},
    ),
    (
        "gpu_ecc_errors",
        "ECC errors",
        "ecc_corrected_aggregate",
        "counter",
        {"type": "corrected", "scope": "aggregate"},
    ),
    (
        "gpu_ecc_errors",
        "ECC errors",
        "ecc_uncorrected_aggregate",
        "counter",
        {"type": "uncorrected", "scope": "aggregate"},
    ),
    ("gpu_pcie_link_generation", "PCIe generation", "pcie_gen", "gauge", {"which": "current"}),
    ("gpu_pcie_link_generation", "PCIe generation", "pcie_gen_max", "gauge", {"which": "max"}),
    (
        "gpu_pcie_link_width",
        "PCIe link width in lanes",
        "pcie_width",
        "gauge",
        {"which": "current"},
    ),
    (
        "gpu_pcie_link_width",
        "PCIe link width in lanes",
        "pcie_width_max",
        "gauge",
        {"which": "max"},
    ),
    ("gpu_pcie_replays", "PCIe replay counter", "pcie_replay", "counter", {}),
    (
        "gpu_remapped_rows",
        "Rows remapped",
        "remapped_rows_corr",
        "counter",
        {"type": "correctable"},
    ),
    (
        "gpu_remapped_rows",
        "Rows remapped",
        "remapped_rows_unc",
        "counter",
        {"type": "uncorrectable"},
    ),
    ("gpu_row_remap_pending", "A row remap is pending (1)", "remapped_rows_pending", "gauge", {}),
    ("gpu_row_remap_failure", "A row remap failed (1)", "remapped_rows_failure", "gauge", {}),
]

HOST_METRICS = [
    ("host_cpu_utilization_ratio", "Host CPU busy ratio (0-1)", "cpu_util", "gauge"),
    ("host_memory_used_bytes", "Host memory used", "host_mem_used_bytes", "gauge"),
    ("host_memory_total_bytes", "Host memory total", "host_mem_total_bytes", "gauge"),
    (
        "server_process_resident_memory_bytes",
        "RSS of the server process tree",
        "proc_rss_bytes",
        "gauge",
    ),
    (
        "server_process_cpu_cores",
        "CPU used by the server process tree, in cores",
        "proc_cpu_util",
        "gauge",
    ),
]

SERVER_METRICS = [
    ("server_requests_running", "Requests being processed", "srv_requests_running", "gauge"),
    ("server_requests_waiting", "Requests queued", "srv_requests_waiting", "gauge"),
    ("server_kv_cache_usage_ratio", "KV-cache usage (0-1)", "srv_kv_cache_usage", "gauge"),
    ("server_prompt_tokens", "Prompt tokens processed", "srv_prompt_tokens_total", "counter"),
    (
        "server_generation_tokens",
        "Tokens generated",
        "srv_generation_tokens_total",
        "counter",
    ),
    ("server_preemptions", "Preemptions", "srv_preemptions_total", "counter"),
    (
        "server_prefix_cache_hits",
        "Prefix-cache hits",
        "srv_prefix_cache_hits_total",
        "counter",
    ),
    (
        "server_prefix_cache_queries",
        "Prefix-cache queries",
        "srv_prefix_cache_queries_total",
        "counter",
    ),
]

VERDICTS = ("pass", "warn", "fail", "unknown")
VERDICT_CODE = {v: i for i, v in enumerate(VERDICTS)}


def _gpu_label_values(row: Row) -> list[str]:
    return [
        str(row.get("vendor") or ""),
        str(row.get("model") or ""),
        str(row.get("device_index") if row.get("device_index") is not None else ""),
        str(row.get("bus_id") or ""),
        str(row.get("uuid") or ""),
    ]


class TelemetryCollector(Collector):
    """Serves whatever was last given to :meth:`update` (thread-safe)."""

    def __init__(self, prefix: str = "accelbench_") -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self._rows: list[Row] = []
        self._health: Mapping[str, Any] | None = None

    def update(self, rows: list[Row], health: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._rows = list(rows)
            if health is not None:
                self._health = health

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            rows, health = list(self._rows), self._health
        p = self.prefix
        families: dict[str, Metric] = {}

        def family(name: str, doc: str, kind: str, labels: list[str]) -> Any:
            fam = families.get(name)
            if fam is None:
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                fam = cls(p + name, doc, labels=labels)
                families[name] = fam
            return fam

        for row in rows:
            kind = row.get("kind")
            if kind == KIND_GPU:
                base = _gpu_label_values(row)
                for name, doc, col, mtype, extra in GPU_METRICS:
                    val = numeric(row, col)
                    if val is None:
                        continue
                    fam = family(name, doc, mtype, GPU_LABELS + list(extra))
                    fam.add_metric(base + list(extra.values()), float(val))
            elif kind == KIND_HOST:
                for name, doc, col, mtype in HOST_METRICS:
                    if (val := numeric(row, col)) is not None:
                        family(name, doc, mtype, []).add_metric([], float(val))
            elif kind == KIND_SERVER:
                for name, doc, col, mtype in SERVER_METRICS:
                    if (val := numeric(row, col)) is not None:
                        fam = family(name, doc, mtype, ["engine"])
                        fam.add_metric([str(row.get("engine") or "")], float(val))
        if health is not None:
            verdict = health.get("verdict")
            verdict = verdict if verdict in VERDICT_CODE else "unknown"  # never a silent pass
            fam = GaugeMetricFamily(
                p + "health_status",
                "Health verdict: 0 pass, 1 warn, 2 fail, 3 unknown",
                labels=[],
            )
            fam.add_metric([], float(VERDICT_CODE[verdict]))
            families["health_status"] = fam
            vf = GaugeMetricFamily(
                p + "health_verdict",
                "Current health verdict (1) among pass, warn, fail and unknown",
                labels=["verdict"],
            )
            for v in VERDICTS:
                vf.add_metric([v], 1.0 if v == verdict else 0.0)
            families["health_verdict"] = vf
            uf = GaugeMetricFamily(
                p + "health_unknown_reasons",
                "Reasons the rules could not judge (no samples, silent source, missing signal)",
                labels=[],
            )
            uf.add_metric([], float(len(health.get("unknown") or [])))
            families["health_unknown_reasons"] = uf
            if health.get("sources"):
                sf = GaugeMetricFamily(
                    p + "source_up",
                    "1 if the telemetry source gave samples in the last tick, else 0",
                    labels=["source"],
                )
                for name, state in sorted(health["sources"].items()):
                    sf.add_metric([name], 1.0 if state == "ok" else 0.0)
                families["source_up"] = sf
            counts: dict[tuple[str, str], int] = {}
            for f in health.get("findings", []):
                key = (f.get("rule", ""), f.get("severity", ""))
                counts[key] = counts.get(key, 0) + 1
            ff = GaugeMetricFamily(
                p + "health_findings",
                "Current health findings by rule and severity",
                labels=["rule", "severity"],
            )
            for (rule, sev), n in sorted(counts.items()):
                ff.add_metric([rule, sev], float(n))
            families["health_findings"] = ff
        yield from families.values()


class Exporter:
    """An HTTP ``/metrics`` endpoint for a :class:`TelemetryCollector`."""

    def __init__(self, port: int = 9464, host: str = "127.0.0.1") -> None:
        from accelbench import validate as v

        v.port("--port", port)  # 70000 was an OverflowError from bind (exit 70)
        self.collector = TelemetryCollector()
        self.registry = CollectorRegistry()
        self.registry.register(self.collector)
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Start serving; returns the bound port (useful with port 0)."""
        self._server, self._thread = start_http_server(
            self.port, addr=self.host, registry=self.registry
        )
        self.port = int(self._server.server_address[1])
        return self.port

    def update(self, rows: list[Row], health: Mapping[str, Any] | None = None) -> None:
        self.collector.update(rows, health)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
