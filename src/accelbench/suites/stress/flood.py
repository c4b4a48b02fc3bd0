"""The flood suite: input lengths stepped up to the model's context, at one or more
concurrencies. Reports TTFT and prefill throughput against input length with a fitted
curve (a + b L + c L^2, each coefficient with its 95 % interval), errors by kind
(context overflow, timeouts, 5xx, other) and the memory leak rate over the flood."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from accelbench.client.openai import says_context_exceeded
from accelbench.documents import Fields, JsonObject, to_json_object
from accelbench.errors import UsageError
from accelbench.metrics.records import ErrorKind, RequestRow
from accelbench.metrics.stats import quadratic_fit
from accelbench.metrics.verdict import Verdict
from accelbench.runner.config import BenchmarkConfig
from accelbench.suites.stress.common import (
    JsonlAppender,
    Log,
    MemoryProbe,
    StepChanges,
    _quiet,
    check_load,
    run_reason,
    run_records,
    run_step,
    suite_stops,
)
from accelbench.suites.stress.document import (
    MEMORY,
    FloodPart,
    FloodStep,
    MemorySample,
    QuadFit,
    StressDoc,
    memory_sample,
    memory_series,
    read_rows,
    suite_reason,
    write_stress,
)
from accelbench.suites.stress.verdicts import (
    LeakThresholds,
    check_thresholds,
    fraction_verdict,
    leak_verdicts,
)


@dataclass
class FloodConfig:
    load: BenchmarkConfig
    lengths: list[int]
    concurrencies: list[int] = field(default_factory=lambda: [1])
    requests: int = 4  # per step and concurrency (at least the concurrency)
    osl: int = 8
    sample_s: float = 2.0
    server_pid: int | None = None
    metrics: list[str] = field(default_factory=list)
    leak: LeakThresholds = field(default_factory=LeakThresholds)
    warn_errors: float = 0.0
    fail_errors: float = 0.05
    gpu: bool = True

    def validate(self) -> None:
        from accelbench import validate as v

        if not self.lengths:
            raise UsageError("stress flood needs input lengths (--lengths or --max-context)")
        if not self.concurrencies:
            raise UsageError("stress flood needs at least one concurrency (--concurrencies)")
        if len(self.lengths) * len(self.concurrencies) > 10_000:
            raise UsageError("--lengths x --concurrencies makes more than 10,000 steps")
        for n in self.lengths:
            v.integer("--lengths", n, 1, 1 << 22)
        for c in self.concurrencies:
            v.integer("--concurrencies", c, 1, 100_000)
        # a repeated step would find its run directory taken after the earlier steps ran
        v.distinct("--lengths", self.lengths)
        v.distinct("--concurrencies", self.concurrencies)
        v.integer("--requests", self.requests, 1, 1_000_000)
        v.optional_integer("--server-pid", self.server_pid, 1, 1 << 22)  # Linux's pid_max
        for m in self.metrics:
            v.prom_name("--metric", m)
        v.integer("--osl", self.osl, 1, 1 << 20)
        check_thresholds("--warn-errors", self.warn_errors, "--fail-errors", self.fail_errors, 1.0)
        for c in self.concurrencies:  # as each step runs: a closed loop (no open-loop option)
            check_load(self.load, step=self.step(c))

    def step(self, concurrency: int) -> StepChanges:
        """What a step at ``concurrency`` changes in the load (:func:`run_step`)."""
        return {"concurrency": concurrency, "rate": None,
                "num_requests": max(self.requests, concurrency), "duration_s": None}  # fmt: skip

    def to_json(self) -> JsonObject:
        d = asdict(self)
        d["load"] = self.load.to_json()
        return to_json_object(d, "flood config")


@dataclass
class FloodResult:
    path: Path
    status: str
    steps: list[FloodStep]
    fit: QuadFit
    verdicts: list[Verdict]
    reason: str | None = None  # stress.json ``reason``


def default_lengths(max_context: int, osl: int, start: int = 1024) -> list[int]:
    """Powers of two from ``start`` up to the largest input that fits with ``osl``
    output tokens (and a few for the server's special tokens), that largest included."""
    top = max_context - osl - 8
    if top < 1:
        raise UsageError(f"--max-context {max_context} leaves no room for {osl} output tokens")
    out, n = [], min(start, top)
    while n < top:
        out.append(n)
        n *= 2
    return out + [top]


def error_class(rec: RequestRow) -> str:
    """context_overflow | timeout | http_5xx | other (an HTTP 400/413 that names the
    context is an overflow: the client's ``context_exceeded``; an older record's plain
    4xx whose message names it, too)."""
    kind = rec["error_kind"] or ""
    if kind == ErrorKind.TIMEOUT:
        return ErrorKind.TIMEOUT
    if kind == ErrorKind.HTTP_5XX:
        return ErrorKind.HTTP_5XX
    if kind == ErrorKind.CONTEXT_EXCEEDED or (
        kind == ErrorKind.HTTP_4XX and says_context_exceeded(rec["error"] or "")
    ):
        return "context_overflow"
    return kind or "other"


class _Sampler(threading.Thread):
    def __init__(self, probe: MemoryProbe, out: JsonlAppender, every_s: float) -> None:
        super().__init__(name="accelbench-flood-memory", daemon=True)
        self.probe, self.out, self.every = probe, out, every_s
        self.halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.halt.is_set():
            with contextlib.suppress(Exception):  # a missed sample is a gap, not a failure
                self.out.append(self.probe.sample(time.monotonic() - self.t0))
            self.halt.wait(self.every)


def run_flood(cfg: FloodConfig, path: Path, *, log: Log = _quiet) -> FloodResult:
    cfg.validate()
    path.mkdir(parents=True, exist_ok=True)
    mem = JsonlAppender(path / MEMORY)
    if mem.path.exists():
        raise UsageError(f"{path} already holds a flood: use another --out")
    probe = MemoryProbe(cfg.load.url, cfg.server_pid, cfg.metrics, gpu=cfg.gpu)
    sampler = _Sampler(probe, mem, cfg.sample_s)
    sampler.start()
    steps: list[FloodStep] = []
    xs: list[float] = []
    ys: list[float] = []
    status = "completed"
    stopped: str | None = None  # the error that stopped the flood
    with suite_stops() as check_stop:
        try:
            for c in cfg.concurrencies:
                for n in cfg.lengths:
                    check_stop()
                    out = path / "runs" / f"isl{n}-c{c}"
                    log(f"flood step: input {n} tokens at concurrency {c}")
                    res = run_step(cfg.load, out, log, workload={"isl": n, "osl": cfg.osl},
                                   **cfg.step(c))  # fmt: skip
                    recs = run_records(out)
                    steps.append(_step(n, c, recs, str(out.relative_to(path))))
                    for r in recs:
                        if r["ok"] and (ttft := r["ttft_ms"]):
                            xs.append(float(r["isl"] or n))
                            ys.append(ttft)
                    # a step whose every request failed (past the context) is the flood's
                    # evidence, not the end of it
                    if res.status != "completed" and not res.all_requests_failed:
                        status, stopped = res.status, run_reason(res)
                        raise _Stop
        except _Stop:
            pass
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            sampler.halt.set()
            sampler.join()
            probe.close()
        fit = QuadFit.from_json(Fields(quadratic_fit(xs, ys), "ttft fit"))
        samples, _ = read_rows(mem.path, memory_sample)
        verdicts = _verdicts(cfg, steps, samples, probe)
        reason = suite_reason(status, stopped, verdicts)
        write_stress(path, StressDoc(
            suite="flood", status=status, config=cfg.to_json(), runs=[s.run for s in steps],
            verdicts=verdicts, part=FloodPart(steps, fit),
            memory_totals={n: probe.total_for(n) for n in memory_series(samples)}, reason=reason,
        ))  # fmt: skip
    return FloodResult(path, status, steps, fit, verdicts, reason)


class _Stop(Exception):
    pass


def _step(n: int, c: int, recs: list[RequestRow], run: str) -> FloodStep:
    ok = [r for r in recs if r["ok"]]
    ttft = np.asarray([r["ttft_ms"] for r in ok if r["ttft_ms"]], dtype=float)
    isl = np.asarray([float(r["isl"] or n) for r in ok if r["ttft_ms"]], dtype=float)
    errors: dict[str, int] = {}
    for r in recs:
        if not r["ok"]:
            k = error_class(r)
            errors[k] = errors.get(k, 0) + 1
    prefill = isl / (ttft / 1000.0) if ttft.size else np.array([])
    return FloodStep(
        input_tokens=n, concurrency=c, requests=len(recs), ok=len(ok), errors=errors,
        ttft_ms={"p50": float(np.percentile(ttft, 50)), "p90": float(np.percentile(ttft, 90)),
                 "max": float(ttft.max())} if ttft.size else None,
        prefill_tok_per_s_p50=float(np.median(prefill)) if prefill.size else None,
        run=run,
    )  # fmt: skip


def _verdicts(cfg: FloodConfig, steps: list[FloodStep], samples: list[MemorySample],
              probe: MemoryProbe) -> list[Verdict]:  # fmt: skip
    out = leak_verdicts(memory_series(samples), cfg.metrics, probe.total_for, cfg.leak)
    n = sum(s.requests for s in steps)
    k = sum(v for s in steps for kind, v in s.errors.items() if kind != "context_overflow")
    overflow = sum(s.errors.get("context_overflow", 0) for s in steps)
    out.append(fraction_verdict(
        "flood errors", "errors", "fraction of requests failed other than by context overflow",
        k, n, cfg.warn_errors, cfg.fail_errors,
        {"requests": n, "failed": k, "context_overflow": overflow},
    ))  # fmt: skip
    return out
