"""The mixed suite: interference between endpoints sharing a machine.

Each round runs every endpoint alone (its solo baseline), then all together, and with
``matrix`` all but one (for each one): the interference matrix says whose load hurts
whom. Concurrent runs are separate processes, each an ordinary run directory; only the
records sent while all of a phase's runs were under way are compared (one monotonic
clock for every process on the machine).

Per endpoint: the change of TTFT / TPOT percentiles against solo (order-statistic
standard errors on the log scale: :func:`accelbench.metrics.stats.quantile_ratio_ci`)
and the jitter (coefficient of variation of per-window p99, Bonett's interval:
:func:`accelbench.metrics.stats.cv_ci`; "too few windows" below 12). A claim such as
"latency fluctuation under 3 % for each model" is checked with :func:`judge_claim`."""

from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from accelbench.documents import JsonObject, to_json_object
from accelbench.errors import UsageError
from accelbench.lifetime import noted_stops, raised_stops
from accelbench.metrics.records import RequestRow
from accelbench.metrics.verdict import Status, Verdict
from accelbench.runner.config import BenchmarkConfig
from accelbench.suites.stress.common import (
    Log,
    _quiet,
    check_load,
    run_records,
    run_status,
    run_step,
    suite_stops,
)
from accelbench.suites.stress.document import (
    Estimate,
    MixedEndpoint,
    MixedPart,
    StressDoc,
    suite_reason,
    write_stress,
)
from accelbench.suites.stress.verdicts import (
    RULE,
    change_pct,
    check_thresholds,
    claim_rule,
    jitter_pct,
    judge,
    judge_claim,
    stress_verdict,
)
from accelbench.urls import Endpoint

Latency = Literal["ttft_ms", "tpot_ms"]
METRICS: tuple[tuple[str, Latency], ...] = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"))


@dataclass
class MixedConfig:
    loads: list[BenchmarkConfig]  # one per endpoint, each with its own url and workload
    duration_s: float = 60.0  # per phase: 12 windows of 5 s, the fewest for a jitter interval
    rounds: int = 1
    window_s: float = 5.0  # for the jitter of per-window p99
    matrix: bool = False
    claim_pct: float | None = None  # "latency fluctuation under X %"
    claim_stat: str = "jitter"  # jitter | change
    warn_pct: float = 10.0
    fail_pct: float = 50.0
    stagger_s: float = 3.0  # concurrent runs start within this: they run this much longer

    def validate(self) -> None:
        from accelbench import validate as v

        if len(self.loads) < 2:
            raise UsageError("stress mixed needs at least two endpoints (--url ... --url ...)")
        v.number("--duration", self.duration_s, 1.0, 30 * 86400.0, unit="s")
        v.integer("--rounds", self.rounds, 1, 1000)
        v.number("--window", self.window_s, 0.1, 86400.0, unit="s")
        v.choice("--claim-stat", self.claim_stat, ("jitter", "change"))
        v.number("--stagger", self.stagger_s, 0.0, 3600.0, unit="s")
        check_thresholds("--warn", self.warn_pct, "--fail", self.fail_pct, 1e6, "%")
        if self.claim_pct is not None:
            v.number("--claim", self.claim_pct, 0.0, 1e6)
        # every endpoint's load (with its overrides) before the first phase runs: a bad
        # override of ep2 used to surface only when ep2's phase started, after ep0 ran
        for i, load in enumerate(self.loads):
            check_load(
                load, f"--url of ep{i}", {"duration_s": self.duration_s, "num_requests": None}
            )

    def to_json(self) -> JsonObject:
        d = asdict(self)
        d["loads"] = [c.to_json() for c in self.loads]
        return to_json_object(d, "mixed config")


@dataclass
class MixedResult:
    path: Path
    status: str
    endpoints: list[MixedEndpoint]
    matrix: list[list[Estimate | None]] | None
    verdicts: list[Verdict]
    reason: str | None = None  # stress.json ``reason``


def _child(cfg: BenchmarkConfig, out: str, barrier: Any, parent_pid: int) -> None:
    import accelbench.runner.benchmark  # noqa: F401 - the imports before the barrier
    from accelbench.lifetime import die_with_parent

    die_with_parent(parent_pid)

    barrier.wait(timeout=120)
    run_step(cfg, Path(out))


def _phase(loads: list[tuple[int, BenchmarkConfig]], dirs: list[Path], duration: float,
           stagger: float, log: Log) -> dict[int, list[RequestRow]]:  # fmt: skip
    """Run endpoints at once (one process each, released together after their imports);
    their records from the span in which all of them were sending. Each runs ``stagger``
    seconds longer than ``duration`` so that the common span is about ``duration``."""
    from dataclasses import replace

    if len(loads) == 1:
        (i, cfg), d = loads[0], dirs[0]
        run_step(cfg, d, log, duration_s=duration, num_requests=None)
        return {i: _measured(d)}
    # fork: no thread runs in this process between runs, and a child starts in
    # milliseconds instead of re-importing everything
    ctx: Any = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    barrier = ctx.Barrier(len(loads))
    procs = []
    try:
        # the suite notes stops (suite_stops): here one ends the phase; the runs are
        # forked with this handler, so that one stops a run that is still preparing
        with raised_stops():
            for (_, cfg), d in zip(loads, dirs, strict=True):
                c = replace(cfg, duration_s=duration + stagger, num_requests=None)
                p = ctx.Process(target=_child, args=(c, str(d), barrier, os.getpid()))
                p.start()
                procs.append(p)
            for p in procs:
                p.join()
    except BaseException:  # Ctrl-C, SIGTERM: each run stops in order (SIGTERM), then killed
        with noted_stops():  # a second stop does not cut this short (a run left running)
            for p in procs:
                p.terminate()
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join()
        raise
    recs = {i: _measured(d) for (i, _), d in zip(loads, dirs, strict=True)}
    if not all(recs.values()):
        return {i: [] for i in recs}
    lo = max(min(r["t_send"] for r in rs) for rs in recs.values())
    hi = min(max(r["t_send"] for r in rs) for rs in recs.values())
    return {i: [r for r in rs if lo <= r["t_send"] <= hi] for i, rs in recs.items()}


def _measured(d: Path) -> list[RequestRow]:
    status = run_status(d)
    if status == "interrupted":  # a stop came while it ran: the suite is interrupted,
        raise KeyboardInterrupt  # not failed
    if status != "completed":
        raise _Failed(f"{d}: run {status}")
    return [r for r in run_records(d) if r["ok"]]


class _Failed(Exception):
    pass


def run_mixed(cfg: MixedConfig, path: Path, *, log: Log = _quiet) -> MixedResult:
    cfg.validate()
    path.mkdir(parents=True, exist_ok=True)
    n = len(cfg.loads)
    idx = list(range(n))
    solo: dict[int, list[RequestRow]] = {i: [] for i in idx}
    together: dict[int, list[RequestRow]] = {i: [] for i in idx}
    without: dict[int, dict[int, list[RequestRow]]] = {j: {i: [] for i in idx} for j in idx}
    runs: list[str] = []
    status = "completed"
    stopped: str | None = None  # the error that stopped the suite

    def go(name: str, members: list[int], r: int) -> dict[int, list[RequestRow]]:
        check_stop()  # a stop noted since the last phase: no phase more
        dirs = [path / "runs" / f"r{r}-{name}-ep{i}" for i in members]
        runs.extend(str(d.relative_to(path)) for d in dirs)
        log(f"round {r}: {name} ({', '.join(f'ep{i}' for i in members)})")
        return _phase(
            [(i, cfg.loads[i]) for i in members], dirs, cfg.duration_s, cfg.stagger_s, log
        )

    with suite_stops() as check_stop:
        try:
            for r in range(cfg.rounds):
                for i in idx:
                    solo[i] += go("solo", [i], r)[i]
                for i, rs in go("all", idx, r).items():
                    together[i] += rs
                if cfg.matrix and n > 2:
                    for j in idx:
                        for i, rs in go(f"without{j}", [k for k in idx if k != j], r).items():
                            without[j][i] += rs
        except _Failed as exc:
            status, stopped = "failed", str(exc)
            log(stopped)
        except KeyboardInterrupt:
            status = "interrupted"
        endpoints = [_endpoint(i, solo[i], together[i], cfg) for i in idx]
        matrix = None
        if cfg.matrix and n > 2:
            matrix = [[None if i == j else _effect(together[i], without[j][i], cfg)
                       for j in idx] for i in idx]  # fmt: skip
        verdicts = _verdicts(endpoints, cfg)
        note = ("row i, column j: % change of endpoint i's TTFT p50 caused by endpoint j (all "
                "together vs all but j)")  # fmt: skip
        reason = suite_reason(status, stopped, verdicts)
        write_stress(path, StressDoc(suite="mixed", status=status, config=cfg.to_json(), runs=runs,
                                     verdicts=verdicts, part=MixedPart(endpoints, matrix, note),
                                     reason=reason))  # fmt: skip
    return MixedResult(path, status, endpoints, matrix, verdicts, reason)


def _vals(recs: list[RequestRow], key: Latency) -> np.ndarray:
    return np.asarray([r[key] for r in recs if r[key] is not None], dtype=float)


def _window_p99(recs: list[RequestRow], key: Latency, window_s: float) -> np.ndarray:
    pts = [(r["t_send"], x) for r in recs if (x := r[key]) is not None]
    if not pts:
        return np.array([])
    t0 = min(t for t, _ in pts)
    bins: dict[int, list[float]] = {}
    for t, v in pts:
        bins.setdefault(int((t - t0) / (window_s * 1e9)), []).append(v)
    return np.asarray([np.percentile(v, 99) for _, v in sorted(bins.items()) if len(v) >= 3])


def _endpoint(i: int, solo: list[RequestRow], mixed: list[RequestRow],
              cfg: MixedConfig) -> MixedEndpoint:  # fmt: skip
    out = MixedEndpoint(
        i, Endpoint.parse(cfg.loads[i].url or "").display, len(solo), len(mixed), {}, {}
    )
    for name, key in METRICS:
        a, b = _vals(solo, key), _vals(mixed, key)
        for q in (50, 99):
            out.estimates[f"{name}_p{q}_change_pct"] = Estimate.of(change_pct(a, b, q))
        for phase, recs in (("solo", solo), ("mixed", mixed)):
            w = _window_p99(recs, key, cfg.window_s)
            out.estimates[f"{name}_jitter_{phase}_pct"] = Estimate.of(jitter_pct(w))
            v = _vals(recs, key)
            out.p50_ms[f"{name}_{phase}_p50_ms"] = float(np.percentile(v, 50)) if v.size else None
    return out


def _effect(all_: list[RequestRow], without_j: list[RequestRow], cfg: MixedConfig) -> Estimate:
    return Estimate.of(change_pct(_vals(without_j, "ttft_ms"), _vals(all_, "ttft_ms"), 50))


def _verdicts(endpoints: list[MixedEndpoint], cfg: MixedConfig) -> list[Verdict]:
    out = []
    for e in endpoints:
        for name in ("ttft_p50", "ttft_p99", "tpot_p50"):
            c = e.estimate(f"{name}_change_pct")
            note = ""
            if c.estimate is None or c.ci_low is None or c.ci_high is None:
                verdict, rule, note = Status.NA, RULE, c.note or "too few requests"
            else:
                verdict, rule = judge(c.estimate, c.ci_low, c.ci_high, cfg.warn_pct, cfg.fail_pct)
            out.append(stress_verdict(
                f"interference ep{e.endpoint} {name.replace('_', ' ')}", "interference",
                "% change mixed vs solo (order-statistic standard errors, log scale)", "%",
                c.estimate, c.ci_low, c.ci_high, cfg.warn_pct, cfg.fail_pct, verdict, rule,
                evidence={"solo_requests": e.solo_requests, "mixed_requests": e.mixed_requests},
                note=note,
            ))  # fmt: skip
        if cfg.claim_pct is not None:
            c = e.estimate(
                "ttft_jitter_mixed_pct" if cfg.claim_stat == "jitter" else "ttft_p50_change_pct"
            )
            stat = ("jitter: CV of per-window TTFT p99 under mixed load (Bonett's interval)"
                    if cfg.claim_stat == "jitter" else "|% change| of TTFT p50 mixed vs solo")  # fmt: skip
            est, lo, hi = c.estimate, c.ci_low, c.ci_high
            if est is not None and lo is not None and hi is not None and cfg.claim_stat == "change":
                lo, hi = sorted((abs(lo), abs(hi))) if lo * hi > 0 else (0.0, max(abs(lo), abs(hi)))
                est = abs(est)
            note = ""
            if est is None or lo is None or hi is None or not np.isfinite([lo, hi]).all():
                # never a pass without an interval that covers: "too few windows"
                verdict, rule = Status.NA, claim_rule(cfg.claim_pct)
                note = c.note or "too few windows or requests"
            else:
                verdict, rule = judge_claim(lo, hi, cfg.claim_pct)
            out.append(stress_verdict(
                f"claim ep{e.endpoint} fluctuation < {cfg.claim_pct:g}%", "claim", stat, "%",
                est, lo, hi, None, cfg.claim_pct, verdict, rule, note=note,
            ))  # fmt: skip
    return out
