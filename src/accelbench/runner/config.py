"""What a benchmark run is asked to do. Plain dataclasses, JSON-serialisable, so that
run.json records exactly this and a sweep can derive point configurations from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from accelbench.client.session import redact_url
from accelbench.errors import AccelbenchError

Endpoint = Literal["completions", "chat"]
Arrival = Literal["poisson", "constant", "gamma"]
LengthDist = Literal["fixed", "uniform", "normal", "lognormal"]
# vLLM: [L(1-r), L(1+r)];  InferenceX / SGLang: [rL, L]
RangeConvention = Literal["vllm", "inferencex"]


@dataclass
class WorkloadConfig:
    """Prompts and output lengths: synthetic (exact lengths in the server's tokens) or a dataset."""

    isl: int = 128
    osl: int = 128
    isl_dist: LengthDist = "fixed"
    osl_dist: LengthDist = "fixed"
    range_ratio: float = 0.0
    range_convention: RangeConvention = "vllm"
    isl_std: float | None = None  # for normal / lognormal (tokens); default 10% of the mean
    osl_std: float | None = None
    dataset: str | None = None  # path to ShareGPT JSON/JSONL, prompts JSONL or chat JSONL
    dataset_format: str = "auto"  # auto | sharegpt | prompts | chat
    tokenizer: str | None = None  # tokenizer.json or HF directory; default: the server's /tokenize
    seed: int = 0

    def validate(self) -> None:
        for name in ("isl", "osl"):
            if getattr(self, name) < 1:
                raise AccelbenchError(f"--{name} must be at least 1 (got {getattr(self, name)})")
        if self.range_ratio < 0 or self.range_ratio > 1:
            raise AccelbenchError(f"--range-ratio must be in [0, 1] (got {self.range_ratio})")
        if (
            self.range_convention == "vllm"
            and self.range_ratio >= 1
            and (self.isl_dist == "uniform" or self.osl_dist == "uniform")
        ):
            raise AccelbenchError("--range-ratio must be below 1 with the vllm convention")
        for name in ("isl_std", "osl_std"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise AccelbenchError(f"--{name.replace('_', '-')} must not be negative")


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
    results_root: str = "results"
    out_dir: str | None = None  # exact run directory; default results_root/<time>-<id>
    gpus: int = 1
    slo: dict[str, float] = field(default_factory=dict)  # ttft_ms / tpot_ms / e2e_ms
    save_text: bool = False
    label: str | None = None
    telemetry: bool = True
    telemetry_interval_s: float = 1.0
    embedded_model: str = "smollm2"  # for url=None: smollm2 | tiny
    embedded_parallel: int = 8

    def validate(self) -> None:
        self.workload.validate()
        if self.rate is None and self.concurrency is None:
            self.concurrency = 1
        if self.rate is not None and self.rate <= 0:
            raise AccelbenchError(f"--rate must be positive (got {self.rate})")
        if self.concurrency is not None and self.concurrency < 1:
            raise AccelbenchError(f"--concurrency must be at least 1 (got {self.concurrency})")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise AccelbenchError("--max-concurrency must be at least 1")
        if self.burstiness <= 0:
            raise AccelbenchError("--burstiness must be positive")
        if self.num_requests is None and self.duration_s is None:
            self.num_requests = max(10, 10 * (self.concurrency or 1))
        if self.num_requests is not None and self.num_requests < 1:
            raise AccelbenchError("--num-requests must be at least 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise AccelbenchError("--duration must be positive")
        if self.warmup_requests < 0:
            raise AccelbenchError("--warmup must not be negative")
        if self.timeout_s <= 0:
            raise AccelbenchError("--timeout must be positive")
        if self.transport not in ("auto", "http1", "aiohttp"):
            raise AccelbenchError("--transport must be auto, http1 or aiohttp")
        if self.gpus < 1:
            raise AccelbenchError("--gpus must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise AccelbenchError("--workers must be at least 1")
        for k, v in self.slo.items():
            if k not in ("ttft_ms", "tpot_ms", "e2e_ms"):
                raise AccelbenchError(f"unknown SLO {k!r}: use ttft_ms, tpot_ms or e2e_ms")
            if v <= 0:
                raise AccelbenchError(f"SLO {k} must be positive")

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


def default_run_dir(cfg: BenchmarkConfig, stamp: str, short_id: str) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    name = f"{stamp}-{short_id}" if not cfg.label else f"{stamp}-{cfg.label}"
    return Path(cfg.results_root) / name
