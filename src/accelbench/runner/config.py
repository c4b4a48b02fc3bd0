"""What a benchmark run is asked to do. Plain dataclasses, JSON-serialisable, so that
run.json records exactly this and a sweep can derive point configurations from it.

The server is an :class:`urls.Endpoint` from the moment a config exists (a URL string
given to the constructor is parsed there, the boundary); ``to_json`` stores its
credential-free ``display`` and ``from_json`` reads that back (``Endpoint.stored``)."""

from __future__ import annotations

import contextlib
import math
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from accelbench import validate as v
from accelbench.errors import AccelbenchError
from accelbench.urls import Endpoint
from accelbench.validate import check_url
from accelbench.workload.config import WorkloadConfig

__all__ = [
    "BenchmarkConfig",
    "WorkloadConfig",
    "default_run_dir",
    "discard_run_dir",
    "new_run_dir",
]

Api = Literal["completions", "chat"]
Arrival = Literal["poisson", "constant", "gamma"]


# Body fields the run writes from its own options (client/openai.py build_body), which an
# --extra-body field replaced without a word: the prompts the workload planned (ISL and
# prefix figures then wrong), the output lengths, the model, streaming (the response
# parsed as the other kind)
_RUN_SETS = {
    "prompt": "the workload (--isl, --dataset, --trace, --sessions)",
    "messages": "the workload (--isl, --dataset, --trace, --sessions)",
    "model": "--model",
    "stream": "--stream / --no-stream",
    "ignore_eos": "--ignore-eos / --no-ignore-eos",
    # each request's output length (--osl, or the dataset's / trace's own): one value
    # here replaced every planned length while run.json kept the plan's
    "max_tokens": "the workload (--osl, --dataset, --trace, --sessions)",
    "max_completion_tokens": "the workload (--osl, --dataset, --trace, --sessions)",
}


@dataclass
class BenchmarkConfig:
    """One benchmark run. ``url=None`` means: start the embedded llama.cpp engine. A
    ``url`` given as a string is parsed into an Endpoint here (``__post_init__``)."""

    url: Endpoint | None = None
    model: str | None = None  # None: the first model the server lists
    endpoint: Api = "completions"
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
    # the options the command line set ("--turns"), whatever their value: an option typed
    # at its default value is given too. Not recorded (run.json holds the values).
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # ``url`` is the embedded engine this process started for the run or suite, with the
    # --embedded-* options (which were used, not replaced by a --url). Not recorded.
    engine_started: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        raw: object = self.url
        if isinstance(raw, str):  # the boundary: a URL from outside, parsed once
            self.url = Endpoint.parse(raw)

    def validate(self) -> None:
        """Check every field against docs/LIMITS.md and fill the defaults that depend on
        others; raises UsageError (exit 2) with one line naming the option."""
        self.workload.validate()
        if self.url is not None:
            check_url(self.url.url)  # no credentials in it; the same scheme and host
        v.choice("--endpoint", self.endpoint, ("completions", "chat"))
        v.choice("--arrival", self.arrival, ("poisson", "constant", "gamma"))
        v.choice("--transport", self.transport, ("auto", "http1", "aiohttp"))
        if self.rate is None and self.concurrency is None and not self.workload.trace:
            self.concurrency = 1  # a closed loop of one; a trace replay is an open loop
        self.rate = v.optional_number("--rate", self.rate, MIN_RATE, MAX_RATE, unit="requests/s")
        self.concurrency = v.optional_integer("--concurrency", self.concurrency, 1, MAX_STREAMS)
        self.max_concurrency = v.optional_integer(
            "--max-concurrency", self.max_concurrency, 1, MAX_STREAMS
        )
        self.burstiness = v.number("--burstiness", self.burstiness, 1e-3, 1e3)
        self.duration_s = v.optional_number(
            "--duration", self.duration_s, 0, MAX_DURATION_S, lo_open=True, unit="s"
        )
        if self.workload.sessions is not None and self.num_requests is not None:
            raise v.UsageError(
                "--sessions N sets how many sessions the run sends (each of --turns "
                "requests): not with --num-requests"
            )
        if (
            self.num_requests is None
            and self.duration_s is None
            and not self.workload.trace
            and self.workload.sessions is None
        ):
            self.num_requests = max(10, 10 * (self.concurrency or 1))
        self.num_requests = v.optional_integer("--num-requests", self.num_requests, 1, MAX_REQUESTS)
        self.warmup_requests = v.integer("--warmup", self.warmup_requests, 0, MAX_REQUESTS)
        self.drain_timeout_s = v.optional_number(
            "--drain-timeout", self.drain_timeout_s, 0, MAX_DURATION_S, unit="s"
        )
        self.timeout_s = v.number(
            "--timeout", self.timeout_s, MIN_TIMEOUT_S, MAX_DURATION_S, unit="s"
        )
        self.gpus = v.integer("--gpus", self.gpus, 1, MAX_GPUS)
        self.workers = v.optional_integer("--workers", self.workers, 1, MAX_WORKERS)
        if self.api_key_file is None and self.api_key_env is not None:
            if self.is_set(self, "api_key_env"):  # the default may be unset: no key
                v.env_var("--api-key-env", self.api_key_env)
        if self.ray is not None and not self.ray.strip():
            raise v.UsageError("--ray needs an address: auto, local, host:port or ray://host:port")
        if self.ray is not None:
            from accelbench.runner.cluster import require_ray

            require_ray()
        self.telemetry_interval_s = v.number(
            "--telemetry-interval", self.telemetry_interval_s, 0.05, 3600, unit="s"
        )
        self.embedded_parallel = v.integer("--embedded-parallel", self.embedded_parallel, 1, 1024)
        self.embedded_engine = v.choice(
            "--embedded-engine", self.embedded_engine, ("llama", "vllm")
        )
        if not isinstance(self.extra_body, dict):
            raise v.UsageError("--extra-body must be a JSON object")
        for key, own in _RUN_SETS.items():
            if key in self.extra_body:  # it replaced the run's own, which then measured it
                raise v.UsageError(
                    f"--extra-body sets {key!r}, which the run sets itself from {own}: "
                    "give that instead"
                )
        self.slo = v.slo(self.slo)
        if self.label is not None:
            v.label("--label", self.label)
        if self.out_dir is not None:
            v.output_dir("--out", self.out_dir)
        else:
            v.output_dir("--results-root", self.results_root)
        self._check_planned_turns()
        if self.rate is not None and self.duration_s is not None:
            planned = self.rate * self.duration_s
            if planned > MAX_REQUESTS:
                raise v.UsageError(
                    f"--rate x --duration plans {planned:.3g} requests, more than "
                    f"{MAX_REQUESTS:,}: shorten the run or lower the rate"
                )

    def _check_planned_turns(self) -> None:
        """Synthetic ``--sessions``: the plan draws every turn's lengths and holds every
        turn's message before anything runs, so the sessions (with the warm-up's) times the
        most turns one can have is held to the requests' limit (10M sessions of 10,000
        turns asked numpy for 745 GiB: MemoryError, exit 70); and the least a session waits
        between its turns to the longest run (`--turns 100 --think-time 86400`: 99 days,
        each think time within its own bound)."""
        wl = self.workload
        if wl.sessions is None or wl.dataset:  # a data set's turns are its conversations'
            return
        from accelbench.workload.sessions import MAX_THINK_S, MAX_TURNS, parse_span

        turns = parse_span("--turns", wl.turns, 1, MAX_TURNS, integer=True)
        think = parse_span("--think-time", wl.think_time_s, 0, MAX_THINK_S, integer=False)
        least = (turns.lo - 1) * think.lo  # every session waits at least this long
        if least > MAX_DURATION_S:
            raise v.UsageError(
                f"--think-time {wl.think_time_s} between --turns {wl.turns}: each session "
                f"waits at least {least:,.0f} s, more than {MAX_DURATION_S:,.0f} s (30 days, "
                "the longest run)"
            )
        most = int(turns.hi)
        sessions = wl.sessions + self.warmup_requests
        if sessions * most > MAX_REQUESTS:
            warm = f" (with --warmup {self.warmup_requests:,})" if self.warmup_requests else ""
            raise v.UsageError(
                f"--sessions {wl.sessions:,}{warm} of up to {most:,} turns (--turns "
                f"{wl.turns}) plans up to {sessions * most:,} requests, more than "
                f"{MAX_REQUESTS:,}: fewer sessions or turns"
            )

    @property
    def mode(self) -> str:
        return run_mode(self.to_json())

    def is_set(self, obj: Any, *names: str) -> bool:
        """Whether any of ``names`` (fields of ``obj``: this config or its workload) was
        given: on the command line (``given``) or at a value other than the default."""
        default = BenchmarkConfig() if obj is self else WorkloadConfig()
        return any(_opt(n) in self.given or getattr(obj, n) != getattr(default, n) for n in names)

    def check_common_options(self) -> None:
        """The combinations every command with the load options refuses, whatever sends its
        load (`mlperf`'s LoadGen and `shadow replay` too): the embedded engine's options
        with ``--url``, ``--results-root`` and ``--label`` with ``--out``,
        ``--telemetry-interval`` with ``--no-telemetry``, ``--api-key-env`` with
        ``--api-key-file``, and the synthetic prompts' shape where a dataset gives the
        prompts or the shape's distribution has no such parameter."""
        wl, set_ = self.workload, self.is_set

        def refuse(msg: str) -> None:
            raise v.UsageError(msg)

        if self.url is not None and not self.engine_started:
            for f in ("embedded_engine", "embedded_model", "embedded_parallel"):
                if set_(self, f):
                    refuse(f"{_opt(f)} applies to the embedded engine, which --url replaces")
        if self.out_dir is not None:
            if set_(self, "results_root"):
                refuse("--results-root does not apply with --out, which names the directory")
            if self.label is not None:
                refuse("--label names a directory under --results-root; --out names it already")
        if not self.telemetry and set_(self, "telemetry_interval_s"):
            refuse("--telemetry-interval does not apply with --no-telemetry")
        if self.api_key_file is not None and set_(self, "api_key_env"):
            refuse("--api-key-env does not apply with --api-key-file, which is read instead")
        if wl.trace:
            return
        if wl.dataset is not None:
            for f in (*_ISL_SIDE, *_OSL_SHAPE):
                if set_(wl, f):
                    refuse(
                        f"--dataset gives the prompts: {_opt(f)} does not apply to it "
                        "(--osl is the output length of entries without one)"
                    )
            return
        if set_(wl, "dataset_format"):
            refuse("--dataset-format applies to --dataset only")
        dists = (wl.isl_dist, wl.osl_dist)
        if set_(wl, "range_ratio", "range_convention") and "uniform" not in dists:
            refuse(
                "--range-ratio and --range-convention apply to a uniform "
                "--isl-dist or --osl-dist only"
            )
        for side, dist, std in (("isl", wl.isl_dist, wl.isl_std), ("osl", wl.osl_dist, wl.osl_std)):
            if std is not None and dist not in ("normal", "lognormal"):
                refuse(f"--{side}-std applies to a normal or lognormal --{side}-dist only")

    def check_run_options(self) -> None:
        """Refuse every option that the load a run sends would ignore (after ``validate``):
        one line naming it, before anything runs. A value counts as given when it differs
        from the default or the command line set it (``given``: ``--turns 4`` without
        ``--sessions`` is refused although 4 is the default). ``run``, ``sweep`` and the
        stress suites send load through ``runner.benchmark.run_benchmark``, which calls
        this; docs/LIMITS.md "Combinations" is the table."""
        wl, set_ = self.workload, self.is_set
        self.check_common_options()

        def refuse(msg: str) -> None:
            raise v.UsageError(msg)

        if wl.dataset is not None and not wl.trace and set_(wl, "osl"):
            from accelbench.workload.datasets import lengths_recorded

            # as a trace's: recorded in run.json as the run's --osl, used by no request
            if lengths_recorded(wl.dataset, wl.dataset_format, sessions=wl.sessions is not None):
                refuse(
                    f"--osl is the output length of a data set's entries without one: "
                    f"every entry of {wl.dataset} has its own (it would change nothing)"
                )

        if wl.trace:
            hints = {
                "rate": " (to send a dataset at a rate: --dataset FILE --rate R)",
                "concurrency": " (a replay is an open loop: cap it with --max-concurrency)",
            }
            for f in ("rate", "concurrency", "arrival", "burstiness"):
                if set_(self, f):
                    refuse(
                        f"--trace replays the trace's own arrival times: {_opt(f)} does "
                        f"not apply to it{hints.get(f, '')}"
                    )
            for f in (*_ISL_SIDE, *_OSL_SHAPE, "dataset", "dataset_format"):
                if set_(wl, f):
                    refuse(
                        f"--trace gives the prompts and their lengths: {_opt(f)} does not "
                        "apply to it (--osl is the output length of entries without one)"
                    )
            from accelbench.workload.traces import trace_stats

            stats = trace_stats(wl.trace, block_size=wl.trace_block_size)
            n, endpoints = stats.requests, stats.endpoints
            if set_(wl, "seed") and not stats.synthesised:
                refuse(
                    f"--seed draws the prompts a trace's entries do not record: every entry "
                    f"of {wl.trace} is a recorded request or has its own prompt, sent as it "
                    "was (it would change nothing)"
                )
            if set_(wl, "osl") and not stats.without_osl:
                refuse(
                    f"--osl is the output length of a trace's entries without one: every "
                    f"entry of {wl.trace} has its own (it would change nothing)"
                )
            if endpoints - {self.endpoint}:
                # a recorded request is re-issued as its prompt on --endpoint: chat messages
                # are no completions prompt
                if len(endpoints) > 1:
                    refuse(
                        f"--trace {wl.trace} records both chat and completions requests; run "
                        "sends one --endpoint: split the trace, or use shadow replay"
                    )
                refuse(f"--trace {wl.trace} records {min(endpoints)} requests: add "
                       f"--endpoint {min(endpoints)}")  # fmt: skip
            if self.warmup_requests >= n:
                refuse(
                    f"--warmup {self.warmup_requests} leaves nothing to measure: the trace "
                    f"has {n:,} requests"
                )
            if self.num_requests is not None and self.warmup_requests + self.num_requests > n:
                refuse(
                    f"--num-requests {self.num_requests:,} with --warmup "
                    f"{self.warmup_requests:,}: the trace has only {n:,} requests"
                )
        elif self.rate is not None:
            if set_(self, "concurrency"):
                refuse(
                    "--concurrency is a closed loop's; with --rate (an open loop) cap the "
                    "requests in flight with --max-concurrency"
                )
            if set_(self, "burstiness") and self.arrival != "gamma":
                refuse("--burstiness is the shape of --arrival gamma only")
        else:
            if self.max_concurrency is not None:
                refuse(
                    "--max-concurrency caps an open loop (--rate or --trace); a closed "
                    "loop keeps --concurrency requests in flight"
                )
            for f in ("arrival", "burstiness"):
                if set_(self, f):
                    refuse(
                        f"{_opt(f)} shapes an open loop's arrivals (--rate); this run is "
                        "a closed loop (--concurrency)"
                    )
        if wl.sessions is None:
            for f in ("turns", "think_time_s"):
                if set_(wl, f):
                    refuse(f"{_opt(f)} shapes the sessions of --sessions N, which is not given")
        elif wl.dataset and set_(wl, "turns"):
            refuse("--turns shapes synthetic sessions: a dataset's sessions have the turns "
                   "of its conversations")  # fmt: skip
        elif set_(wl, "think_time_s") and _one_turn(wl.turns):
            refuse("--think-time is the wait between a session's turns: with --turns 1 "
                   "there is none")  # fmt: skip
        if self.workers is not None:
            closed = self.rate is None and not wl.trace
            streams = self.concurrency if closed else self.max_concurrency
            what = "--concurrency" if closed else "--max-concurrency"
            if streams is not None and self.workers > streams:
                refuse(
                    f"--workers {self.workers} is more than {what} {streams}: every worker "
                    "needs a request in flight of its own"
                )
            known = self.planned_measured()
            if self.workers > known:
                refuse(
                    f"--workers {self.workers} is more than the {known:,} measured requests the run plans: "
                    "every worker needs a request of its own"
                )

    def planned_measured(self) -> int:
        """How many measured requests to plan (after ``validate``): ``-n``; a trace's own
        length after the warm-up; for a duration, enough to last it (an open loop's
        expected arrivals with room to spare; a closed loop's plan cycles). With both
        ``-n`` and ``--duration`` the run stops at whichever comes first."""
        n = self.known_measured()
        if n is not None:
            return n
        if self.workload.sessions is not None:  # sessions (the plan counts their turns)
            return self.workload.sessions
        if self.rate is not None:
            return math.ceil(self.rate * (self.duration_s or 0) * 1.3) + 16
        return max(64, 4 * (self.concurrency or 1))

    def known_measured(self) -> int | None:
        """The measured requests the run will send at most, where the options fix it
        (``-n``, or the trace's length after the warm-up); None while a duration decides."""
        if self.num_requests is not None:
            return self.num_requests
        wl = self.workload
        if wl.trace:
            from accelbench.workload.traces import trace_length

            return trace_length(wl.trace, block_size=wl.trace_block_size) - self.warmup_requests
        return None

    def to_json(self) -> dict[str, Any]:
        d = asdict(replace(self, url=None))  # an Endpoint is no JSON value
        del d["given"]  # how the options were typed, not what the run did
        del d["engine_started"]
        d["url"] = self.url.display if self.url else None  # never the credentials
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BenchmarkConfig:
        d = dict(d)
        wl = WorkloadConfig(**d.pop("workload", {}))
        url = d.pop("url", None)
        d["url"] = Endpoint.stored(url) if isinstance(url, str) and url else None
        known = {f for f in cls.__dataclass_fields__}
        return cls(workload=wl, **{k: v for k, v in d.items() if k in known})

    def with_(self, **changes: Any) -> BenchmarkConfig:
        return replace(self, **changes)


# Limits (docs/LIMITS.md). Each is far above what one client host can drive, and low
# enough that a typo fails at once instead of allocating memory for hours.
MIN_RATE = 1e-3  # one request every ~17 minutes
MIN_TIMEOUT_S = 1e-3  # below 1 ms no request can finish (1e-300 failed every request)
MAX_RATE = 1e6  # requests/s
MAX_STREAMS = 100_000  # requests in flight (each holds a socket)
MAX_REQUESTS = v.MAX_REQUESTS
MAX_DURATION_S = v.MAX_DURATION_S  # a 30-day soak
MAX_GPUS = 1_000_000
MAX_WORKERS = 1024


_ISL_SIDE = ("isl", "isl_dist", "range_ratio", "range_convention", "isl_std")
_OSL_SHAPE = ("osl_dist", "osl_std")
_OPTION_NAMES = {
    "duration_s": "--duration",
    "warmup_requests": "--warmup",
    "timeout_s": "--timeout",
    "telemetry_interval_s": "--telemetry-interval",
    "out_dir": "--out",
    "think_time_s": "--think-time",
}


def _one_turn(turns: str) -> bool:
    """Whether ``--turns`` (checked already) makes every session a single turn."""
    from accelbench.workload.sessions import MAX_TURNS, parse_span

    return parse_span("--turns", turns, 1, MAX_TURNS, integer=True).hi == 1


def _opt(field_name: str) -> str:
    """The command-line option of a config field."""
    return _OPTION_NAMES.get(field_name, "--" + field_name.replace("_", "-"))


def run_mode(cfg: Mapping[str, object]) -> str:
    """How a run sends its load, from run.json's ``config``: ``trace`` (an open-loop
    replay of a trace's own arrivals), ``rate`` (open loop) or ``concurrency`` (closed)."""
    wl = cfg.get("workload")
    if isinstance(wl, dict) and wl.get("trace"):
        return "trace"
    return "rate" if cfg.get("rate") else "concurrency"


def default_run_dir(cfg: BenchmarkConfig, stamp: str, short_id: str) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    name = f"{stamp}-{short_id}" if not cfg.label else f"{stamp}-{cfg.label}"
    return Path(cfg.results_root) / name


def new_run_dir(cfg: BenchmarkConfig) -> tuple[Path, str]:
    """A run's directory, made empty: ``--out`` or a new one under the results root (UTC
    time stamp, then a short id or the label; one that holds files is one line), and the
    run's short id (it tags the run's requests)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    short = uuid.uuid4().hex[:6]
    run_dir = default_run_dir(cfg, stamp, short)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise AccelbenchError(f"{run_dir} exists and is not empty: choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir, short


def discard_run_dir(run_dir: Path) -> None:
    """Undo :func:`new_run_dir` for a run stopped before its first request (nothing to
    keep, exit 130): remove what the run wrote there (it was empty) and the directory."""
    for entry in run_dir.iterdir() if run_dir.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
    with contextlib.suppress(OSError):
        run_dir.rmdir()
