"""What a benchmark run is asked to do. Plain dataclasses, JSON-serialisable, so that
run.json records exactly this and a sweep can derive point configurations from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from accelbench import validate as v
from accelbench.client.session import redact_url
from accelbench.workload.config import WorkloadConfig

__all__ = ["BenchmarkConfig", "WorkloadConfig", "default_run_dir"]

Endpoint = Literal["completions", "chat"]
Arrival = Literal["poisson", "constant", "gamma"]


@dataclass
class BenchmarkConfig:
    """One benchmark run. ``url=None`` means: start the embedded llama.cpp engine."""

    url: str | None = None
    model: str | None = None  # None: the first model the server lists
    endpoint: Endpoint = "completions"
    stream: bool = True
    api_key_env: str | None = "OPENAI_API_KEY"
    api_key_file: str | None = None
    concurrency: int | None = None  # closed loop when rate is None
    rate: float | None = None  # requests/s, open loop
    arrival: Arrival = "poisson"
    burstiness: float = 1.0  # gamma shape; 1.0 == Poisson
    max_concurrency: int | None = None  # cap for open loop
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    drain_timeout_s: float | None = None  # after the stop condition; None: wait for all
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    ignore_eos: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 600.0
    transport: str = "auto"  # auto: own HTTP/1.1 client for http, aiohttp for https
    workers: int | None = None  # None: choose from the load and the cores
    ray: str | None = None  # load workers as Ray actors: auto | local | host:port | ray://...
    results_root: str = "results"
    out_dir: str | None = None  # exact run directory; default results_root/<time>-<id>
    gpus: int = 1
    slo: dict[str, float] = field(default_factory=dict)  # ttft_ms / tpot_ms / e2e_ms
    save_text: bool = False
    label: str | None = None
    telemetry: bool = True
    telemetry_interval_s: float = 1.0
    embedded_engine: str = "llama"  # for url=None: llama | vllm
    embedded_model: str = "smollm2"  # smollm2 | tiny | a .gguf (llama) or HF directory (vllm)
    embedded_parallel: int = 8

    def validate(self) -> None:
        """Check every field against docs/LIMITS.md and fill the defaults that depend on
        others; raises UsageError (exit 2) with one line naming the option."""
        self.workload.validate()
        if self.url is not None:
            check_url(self.url)
        v.choice("--endpoint", self.endpoint, ("completions", "chat"))
        v.choice("--arrival", self.arrival, ("poisson", "constant", "gamma"))
        v.choice("--transport", self.transport, ("auto", "http1", "aiohttp"))
        if self.rate is None and self.concurrency is None:
            self.concurrency = 1
        self.rate = v.optional_number("--rate", self.rate, MIN_RATE, MAX_RATE, unit="requests/s")
        self.concurrency = v.optional_integer("--concurrency", self.concurrency, 1, MAX_STREAMS)
        self.max_concurrency = v.optional_integer(
            "--max-concurrency", self.max_concurrency, 1, MAX_STREAMS
        )
        self.burstiness = v.number("--burstiness", self.burstiness, 1e-3, 1e3)
        self.duration_s = v.optional_number(
            "--duration", self.duration_s, 0, MAX_DURATION_S, lo_open=True, unit="s"
        )
        if self.num_requests is None and self.duration_s is None and not self.workload.trace:
            self.num_requests = max(10, 10 * (self.concurrency or 1))
        self.num_requests = v.optional_integer("--num-requests", self.num_requests, 1, MAX_REQUESTS)
        self.warmup_requests = v.integer("--warmup", self.warmup_requests, 0, MAX_REQUESTS)
        self.drain_timeout_s = v.optional_number(
            "--drain-timeout", self.drain_timeout_s, 0, MAX_DURATION_S, unit="s"
        )
        self.timeout_s = v.number("--timeout", self.timeout_s, 0, MAX_DURATION_S, lo_open=True)
        self.gpus = v.integer("--gpus", self.gpus, 1, MAX_GPUS)
        self.workers = v.optional_integer("--workers", self.workers, 1, MAX_WORKERS)
        if self.ray is not None and not self.ray.strip():
            raise v.UsageError("--ray needs an address: auto, local, host:port or ray://host:port")
        self.telemetry_interval_s = v.number(
            "--telemetry-interval", self.telemetry_interval_s, 0.05, 3600, unit="s"
        )
        self.embedded_parallel = v.integer("--embedded-parallel", self.embedded_parallel, 1, 1024)
        self.embedded_engine = v.choice(
            "--embedded-engine", self.embedded_engine, ("llama", "vllm")
        )
        if not isinstance(self.extra_body, dict):
            raise v.UsageError("--extra-body must be a JSON object")
        self.slo = v.slo(self.slo)
        if self.label is not None:
            v.label("--label", self.label)
        if self.out_dir is not None:
            v.output_dir("--out", self.out_dir)
        else:
            v.output_dir("--results-root", self.results_root)
        if self.rate is not None and self.duration_s is not None:
            planned = self.rate * self.duration_s
            if planned > MAX_REQUESTS:
                raise v.UsageError(
                    f"--rate x --duration plans {planned:.3g} requests, more than "
                    f"{MAX_REQUESTS:,}: shorten the run or lower the rate"
                )

    @property
    def mode(self) -> str:
        return "rate" if self.rate is not None else "concurrency"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["url"] = redact_url(self.url) if self.url else self.url  # never the credentials
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BenchmarkConfig:
        d = dict(d)
        wl = WorkloadConfig(**d.pop("workload", {}))
        known = {f for f in cls.__dataclass_fields__}
        return cls(workload=wl, **{k: v for k, v in d.items() if k in known})

    def with_(self, **changes: Any) -> BenchmarkConfig:
        return replace(self, **changes)


# Limits (docs/LIMITS.md). Each is far above what one client host can drive, and low
# enough that a typo fails at once instead of allocating memory for hours.
MIN_RATE = 1e-3  # one request every ~17 minutes
MAX_RATE = 1e6  # requests/s
MAX_STREAMS = 100_000  # requests in flight (each holds a socket)
MAX_REQUESTS = 10_000_000
MAX_DURATION_S = 30 * 86400.0  # a 30-day soak
MAX_GPUS = 1_000_000
MAX_WORKERS = 1024


def check_url(url: str, name: str = "--url") -> str:
    """An http(s) URL with a host; anything else fails before a connection is tried."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise v.UsageError(f"{name} {url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise v.UsageError(f"{name} must be http://host[:port] or https://... (got {url!r})")
    del port
    return url


def default_run_dir(cfg: BenchmarkConfig, stamp: str, short_id: str) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    name = f"{stamp}-{short_id}" if not cfg.label else f"{stamp}-{cfg.label}"
    return Path(cfg.results_root) / name
