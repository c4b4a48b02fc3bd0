"""Sweep planning, execution (resumable, with a saturation stop) and loading."""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from accelbench import validate
from accelbench.documents import Json, JsonObject, to_json_object
from accelbench.errors import AccelbenchError, DocumentError
from accelbench.lifetime import noted_stops, raised_stops, stops_noted
from accelbench.runner.config import MAX_RATE, MAX_STREAMS, MIN_RATE, BenchmarkConfig
from accelbench.store.reader import RunInfo, dig, load_run
from accelbench.store.sets import SweepSet, load_inputs, load_sweep
from accelbench.store.sweepdoc import SWEEP_SCHEMA, SweepDoc, SweepPoint, read_sweep, write_sweep
from accelbench.workload.config import WorkloadConfig
from accelbench.workload.sessions import MAX_TURNS, parse_span

if TYPE_CHECKING:
    from accelbench.runner.benchmark import RunResult

__all__ = [
    "SWEEP_SCHEMA",
    "SaturationRule",
    "SweepPlan",
    "SweepSet",
    "inferencex_config",
    "load_inputs",
    "load_sweep",
    "plan_values",
    "run_sweep",
]

Kind = Literal["concurrency", "rate"]
# a run: its result (runner.benchmark.RunResult), or the directory it wrote (to be read)
Runner = Callable[..., "Path | RunResult"]


def plan_values(
    values: Sequence[float] | None = None,
    start: float | None = None,
    end: float | None = None,
    kind: Kind = "concurrency",
) -> list[float]:
    """The sweep's load values: an explicit list, or ``start, 2*start, 4*start ... end``
    (``end`` itself is the last point even where it is not a power-of-two step)."""
    lo, hi = (1, MAX_STREAMS) if kind == "concurrency" else (MIN_RATE, MAX_RATE)
    unit = "streams" if kind == "concurrency" else "requests/s"
    if values and (start is not None or end is not None):
        raise validate.UsageError(
            "--values lists the points; --start and --end make a range instead"
        )
    if values:
        given = [validate.number("--values", v, lo, hi, unit=unit) for v in values]
        validate.distinct("--values", given)  # a repeat was dropped without a word
        vals = sorted(given)
    elif start is not None and end is not None:
        start = validate.number("--start", start, lo, hi, unit=unit)
        end = validate.number("--end", end, lo, hi, unit=unit)
        if end < start:
            raise AccelbenchError(f"sweep range must satisfy start <= end (got {start}..{end})")
        vals, v = [], float(start)
        while v <= end * (1 + 1e-9):
            vals.append(v)
            v *= 2
        if vals[-1] < end:
            vals.append(float(end))
    else:
        raise AccelbenchError("give the sweep's values (--values 1,2,4) or --start and --end")
    if kind == "concurrency":
        if any(v != int(v) for v in vals):
            raise AccelbenchError("concurrency values must be whole numbers")
        vals = [int(v) for v in vals]
    return vals


def inferencex_config(base: BenchmarkConfig, isl: int, osl: int) -> BenchmarkConfig:
    """The InferenceX-style workload: random prompts with lengths uniform in
    [0.8 L, L] (their range-ratio convention), ``ignore_eos``."""
    wl = replace(
        base.workload,
        isl=isl,
        osl=osl,
        isl_dist="uniform",
        osl_dist="uniform",
        range_ratio=0.8,
        range_convention="inferencex",
        dataset=None,
    )
    return base.with_(workload=wl, ignore_eos=True)


MIN_PER_POINT = 0.1  # --requests-per-point, --warmup-per-point (warm-up: or 0)


@dataclass
class SaturationRule:
    """Stop climbing when throughput stops rising while latency explodes, or when the
    error rate passes a threshold."""

    enabled: bool = True
    min_gain: float = 0.05  # throughput must beat the best so far by this fraction
    latency_factor: float = 2.0  # ... or p50 E2E / TTFT must not have grown this much
    max_error_rate: float = 0.05

    def __post_init__(self) -> None:
        self.min_gain = validate.number("--min-gain", self.min_gain, 0, 10)
        self.latency_factor = validate.number("--latency-factor", self.latency_factor, 1, 1e3)
        self.max_error_rate = validate.number("--max-error-rate", self.max_error_rate, 0, 1)

    def check(self, previous: Sequence[RunInfo], cur: RunInfo) -> str | None:
        """Why the sweep should stop after ``cur`` (None: go on)."""
        if not self.enabled:
            return None
        er = cur.figure("error_rate")
        if er is not None and er > self.max_error_rate:
            return f"error rate {er:.1%} above {self.max_error_rate:.1%} at {cur.load_label}"
        usable = [p for p in previous if p.usable]
        thr = cur.figure("output_tps")
        if not usable or thr is None:
            return None
        best = max(p.figure("output_tps") or 0.0 for p in usable)
        last = usable[-1]
        growth = []
        for f in ("e2e_p50_ms", "ttft_p50_ms"):
            a, b = last.figure(f), cur.figure(f)
            if a and b:
                growth.append(b / a)
        lat = max(growth) if growth else 1.0
        if thr < best * (1 + self.min_gain) and lat >= self.latency_factor:
            return (
                f"saturated at {cur.load_label}: output throughput {thr:,.0f} tok/s vs best "
                f"{best:,.0f} (< +{self.min_gain:.0%}) while p50 latency grew {lat:.1f}x"
            )
        return None


@dataclass
class SweepPlan:
    base: BenchmarkConfig
    values: list[float]
    kind: Kind = "concurrency"
    preset: str | None = None
    requests_per_point: float = 10.0  # x concurrency (concurrency sweeps)
    warmup_per_point: float = 2.0  # x concurrency
    saturation: SaturationRule = field(default_factory=SaturationRule)

    def __post_init__(self) -> None:
        # multipliers (x concurrency, x rate), each point's count rounded up: below 0.1
        # (1e-300 was accepted) a point would send one request whatever the value said
        self.requests_per_point = validate.number(
            "--requests-per-point", self.requests_per_point, MIN_PER_POINT, 1e6
        )
        if self.warmup_per_point != 0:  # 0: no warm-up
            self.warmup_per_point = validate.number(
                "--warmup-per-point",
                self.warmup_per_point,
                MIN_PER_POINT,
                1e6,
                unit="(or 0: no warm-up)",
            )
        if not self.values:
            raise validate.UsageError("a sweep needs at least one point")
        if len(self.values) > 1000:
            raise validate.UsageError(
                f"a sweep has at most 1,000 points (got {len(self.values):,})"
            )
        for x in self.values:
            if self.kind == "concurrency":
                validate.integer("concurrency point", x, 1, MAX_STREAMS)
            else:
                validate.number("rate point", x, MIN_RATE, MAX_RATE, unit="requests/s")

    def point_dir(self, value: float) -> str:
        if self.kind == "concurrency":
            return f"c{int(value):04d}"
        return "r" + f"{value:g}".replace(".", "p")

    def point_config(self, value: float, out_dir: Path) -> BenchmarkConfig:
        # every point its own prompts (a seed of the point's value, the same on a resume):
        # a server with a prefix cache would serve a later point's repeated prompts from
        # the earlier point's cache
        wl = replace(self.base.workload,
                     seed=zlib.crc32(f"{self.base.workload.seed}:{value:g}".encode()))  # fmt: skip
        if wl.sessions is not None:
            return self._session_point(value, out_dir, wl)
        if self.kind == "concurrency":
            c = int(value)
            return self.base.with_(
                concurrency=c,
                rate=None,
                num_requests=max(1, math.ceil(self.requests_per_point * c)),
                warmup_requests=math.ceil(self.warmup_per_point * c),
                duration_s=None,
                out_dir=str(out_dir),
                workload=wl,
            )
        n = self.base.num_requests or max(20, math.ceil(30 * value))
        return self.base.with_(rate=float(value), num_requests=n, out_dir=str(out_dir),
                               workload=wl)  # fmt: skip

    def _session_point(self, value: float, out_dir: Path, wl: WorkloadConfig) -> BenchmarkConfig:
        """A point of a session sweep: ``value`` concurrent sessions (or sessions per
        second), each point as many sessions as --requests-per-point x value requests
        take (at least --sessions), warm-up in sessions likewise."""
        turns = parse_span("--turns", wl.turns, 1, MAX_TURNS, integer=True).mean
        n = max(wl.sessions or 1, math.ceil(self.requests_per_point * value / turns))
        warm = math.ceil(self.warmup_per_point * value / turns)
        wl = replace(wl, sessions=n)
        if self.kind == "concurrency":
            return self.base.with_(concurrency=int(value), rate=None, num_requests=None,
                                   warmup_requests=warm, duration_s=None, out_dir=str(out_dir),
                                   workload=wl)  # fmt: skip
        return self.base.with_(rate=float(value), num_requests=None, warmup_requests=warm,
                               out_dir=str(out_dir), workload=wl)  # fmt: skip

    def document(self, points: list[SweepPoint]) -> SweepDoc:
        """sweep.json of this plan with ``points``."""
        return SweepDoc(
            kind=self.kind,
            values=list(self.values),
            base_config=to_json_object(self.base.to_json(), "base_config"),
            points=points,
            preset=self.preset,
            requests_per_point=self.requests_per_point,
            warmup_per_point=self.warmup_per_point,
            saturation=to_json_object(asdict(self.saturation), "saturation"),
        )


def _workload_key(cfg: JsonObject) -> dict[str, Json]:
    wl = cfg.get("workload")
    wl = wl if isinstance(wl, dict) else {}
    keys = ("isl", "osl", "isl_dist", "osl_dist", "range_ratio", "dataset")
    return {  # not the URL: the same server may come back on another port
        "model": cfg.get("model"),
        "gpus": cfg.get("gpus"),
        **{k: wl.get(k) for k in keys},
    }


# what a point's measurement depends on (with the workload): a resume must send its
# points as the sweep's completed points were sent, or one frontier mixes two ways of
# measuring (docs/ANALYSIS.md "Resumable"); the URL, the API key, where results go, the
# timeouts and how the load is spread over workers may change between attempts
_SAME_ON_RESUME = ("model", "gpus", "endpoint", "stream", "extra_body", "ignore_eos", "arrival", "burstiness",
                   "max_concurrency", "num_requests", "slo", "embedded_engine",
                   "embedded_model", "embedded_parallel")  # fmt: skip


def _option(key: str) -> str:
    """The option that sets base_config ``key`` (``workload.think_time_s``: --think-time)."""
    key = key.removeprefix("workload.")
    if key == "num_requests":
        return "-n"
    return "--" + key.removesuffix("_s").replace("_", "-")


def resume_conflict(old: SweepDoc, plan: SweepPlan) -> str | None:
    """The first option with which ``plan`` would measure its points otherwise than the
    earlier run of its sweep (``old``, sweep.json) measured its points, said in a line;
    None when the two agree. A key that ``old`` does not record (an older file) is not
    compared."""
    new = to_json_object(plan.base.to_json(), "base_config")
    pairs: list[tuple[str, object, object]] = [
        (k, old.base_config[k], new.get(k)) for k in _SAME_ON_RESUME if k in old.base_config
    ]
    old_wl, new_wl = old.base_config.get("workload"), new.get("workload")
    if isinstance(old_wl, dict) and isinstance(new_wl, dict):
        pairs += [(f"workload.{k}", v, new_wl.get(k)) for k, v in old_wl.items()]
    pairs += [
        ("requests_per_point", old.requests_per_point, plan.requests_per_point),
        ("warmup_per_point", old.warmup_per_point, plan.warmup_per_point),
    ]
    pairs.append(("preset", old.preset, plan.preset))
    for key, was, now in pairs:
        if was != now and not (key.endswith("_per_point") and was is None):  # (older file)
            return (
                f"{_option(key)} is {now!r} here but {was!r} in its sweep.json: rerun "
                "with that value to resume, or choose another --out directory"
            )
    return None


def _default_runner() -> Runner:
    try:
        from accelbench.runner.benchmark import run_benchmark
    except ImportError as exc:
        raise AccelbenchError(f"the benchmark runner is not available ({exc})") from None

    def run(cfg: BenchmarkConfig, progress: bool = True) -> RunResult:
        # the sweep prints one line per point instead of every run's full summary
        return run_benchmark(cfg, progress=progress)

    return run


def _holds_files(pdir: Path) -> bool:
    return pdir.is_dir() and any(pdir.iterdir())


def _set_aside(pdir: Path) -> Path | None:
    """Move a failed or interrupted attempt's directory out of the way (kept, not deleted)."""
    if not _holds_files(pdir):
        return None
    k = 1
    while (dest := pdir.with_name(f"{pdir.name}.attempt{k}")).exists():
        k += 1
    pdir.rename(dest)
    return dest


def _undo_start(
    d: Path, made: list[Path], old_doc: bytes | None, pdir: Path, moved: Path | None
) -> None:
    """Put the sweep directory back as this call found it: sweep.json as it was (or none),
    a set-aside attempt back in its place, the folders this call made removed."""
    with contextlib.suppress(OSError):
        pdir.rmdir()  # empty: the refused run made nothing in it
    if moved is not None and not pdir.exists():
        moved.rename(pdir)
    if old_doc is None:
        (d / "sweep.json").unlink(missing_ok=True)
    else:
        (d / "sweep.json").write_bytes(old_doc)
    validate.remove_empty_dirs(made)


def run_sweep(
    sweep_dir: str | Path,
    plan: SweepPlan,
    *,
    runner: Runner | None = None,
    progress: bool = True,
    on_point: Callable[[SweepPoint], None] | None = None,
) -> SweepDoc:
    """Run every missing point of the sweep in ascending load order and return sweep.json's
    document. Completed points (status completed and a summary.json on disk) are not run
    again; failed or interrupted ones are. Stops early on saturation (see SaturationRule);
    the points above are marked ``skipped``. A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends
    the sweep once the point it came in is finished: that point ``interrupted``, the ones
    after it not run (status ``interrupted``; a rerun resumes)."""
    d = Path(sweep_dir)
    made = validate.missing_dirs(d)
    d.mkdir(parents=True, exist_ok=True)
    old_points: dict[str, SweepPoint] = {}
    # sweep.json as it was: put back when the first point shows the input is wrong
    old_doc = (d / "sweep.json").read_bytes() if (d / "sweep.json").exists() else None
    if (d / "sweep.json").exists():
        old_points = _old_points(d, plan)
        merged = sorted(set(plan.values) | {p.value for p in old_points.values()})
        plan.values = [int(v) if plan.kind == "concurrency" else v for v in merged]

    points = []
    for v in plan.values:
        name = plan.point_dir(v)
        prev = old_points.get(name)
        points.append(SweepPoint(
            v, name, prev.status if prev else "pending",
            reason=prev.reason if prev else None, run_id=prev.run_id if prev else None,
            earlier_attempts=list(prev.earlier_attempts) if prev else [],
        ))  # fmt: skip
    doc = plan.document(points)
    write_sweep(d, doc)

    run = runner
    done: list[RunInfo] = []
    stop_reason: str | None = None
    first = True  # the first point this call runs: its usage error is the sweep's
    refused = False  # ... and then nothing of this call is left to write
    stops = stops_noted()
    # a stop signal (Ctrl-C, SIGTERM, SIGHUP) ends the sweep once the point it came in is
    # finished: that point is interrupted (its results kept), the next ones not run
    with noted_stops():
        try:
            for p in doc.points:
                pdir = d / p.dir
                if stops_noted() > stops:
                    break
                if stop_reason:
                    p.status = "skipped"
                    p.reason = stop_reason
                    continue
                if p.status == "completed" and (pdir / "summary.json").exists():
                    info = load_run(pdir)
                else:
                    if run is None:
                        run = _default_runner()
                    moved = _set_aside(pdir)
                    if moved is not None:
                        p.earlier_attempts.append(moved.name)
                    p.status = "running"
                    p.reason = None
                    write_sweep(d, doc)
                    cfg = plan.point_config(p.value, pdir)
                    try:
                        with raised_stops():  # the run handles its stops, raising until it loads
                            got = run(cfg, progress=progress)
                        out = Path(got) if isinstance(got, str | Path) else got.directory
                    except KeyboardInterrupt:  # stopped while it started: nothing of it kept
                        p.status = "interrupted" if _holds_files(pdir) else "pending"
                        if on_point:
                            on_point(p)
                        break
                    except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on record
                        # refused before its run began (an unknown model, no server, a
                        # bad key file: what `run` exits 2 for) at the first point this
                        # call runs: the sweep's input is wrong; refused, nothing left
                        if first and isinstance(exc, AccelbenchError) and not _holds_files(pdir):
                            refused = True
                            _undo_start(d, made, old_doc, pdir, moved)
                            raise
                        first = False
                        p.status = "failed"
                        p.reason = f"{type(exc).__name__}: {str(exc)[:200]}"
                        stop_reason = f"point {p.dir} failed"
                        write_sweep(d, doc)
                        if on_point:
                            on_point(p)
                        continue
                    first = False
                    if out.resolve() != pdir.resolve():
                        p.dir = str(out)
                        pdir = out
                    # the result as the run ended; a directory alone is read back
                    info = load_run(pdir) if isinstance(got, str | Path) else got.run_info()
                    # a run none of whose measured requests succeeded has failed
                    # (runner.finalize.no_request_succeeded): so has its point, and the
                    # sweep stops there (its error rate says why too)
                    none_ok = (
                        info.status == "failed" and dig(info.summary, "counts", "completed") == 0
                    )
                    if info.status == "interrupted":  # stopped: its results kept, rerun later
                        p.status = "interrupted"
                    else:
                        p.status = "completed" if info.usable and not none_ok else "failed"
                    if p.status == "failed":
                        p.reason = "; ".join(info.problems) or (
                            "no measured request succeeded"
                            if none_ok
                            else f"run status {info.status}"
                        )
                    if none_ok:
                        stop_reason = f"point {p.dir}: no measured request succeeded"
                p.run_id = info.run_id
                p.output_tps_per_gpu = info.figure("output_tps_per_gpu")
                p.interactivity = info.figure("interactivity")
                if p.status == "interrupted":
                    write_sweep(d, doc)
                    if on_point:
                        on_point(p)
                    break
                reason = plan.saturation.check(done, info)
                if info.usable and p.status == "completed":
                    done.append(info)
                if reason:
                    stop_reason = reason
                    p.saturation = reason
                write_sweep(d, doc)
                if on_point:
                    on_point(p)
        finally:
            if not refused:  # (a refused sweep is put back as it was)
                for p in doc.points:  # an error left it: no run to speak of, or part of one
                    if p.status == "running":
                        p.status = "interrupted" if _holds_files(d / p.dir) else "pending"
                statuses = {p.status for p in doc.points}
                doc.status = (
                    "completed"
                    if statuses <= {"completed", "skipped"}
                    else "interrupted"
                    if "interrupted" in statuses or "pending" in statuses
                    else "partial"
                )
                doc.stop_reason = stop_reason
                write_sweep(d, doc)
    return doc


def check_resume(d: Path, plan: SweepPlan) -> None:
    """Refuse, before any point runs, a sweep directory ``d`` whose sweep.json ``plan``
    cannot resume (another sweep, one measured otherwise, a damaged file): the CLI checks
    every --isl-osl pair's so, before the first pair runs."""
    if (d / "sweep.json").exists():
        _old_points(d, plan)


def _old_points(d: Path, plan: SweepPlan) -> dict[str, SweepPoint]:
    """The points an earlier run of this sweep recorded in ``d/sweep.json``, by directory
    name. A sweep.json of another sweep, or one damaged (not an object, points not a list
    of objects each with a directory and a load value in range), is one clear error: the
    sweep's runs stay untouched until the user moves it away."""
    sj = d / "sweep.json"
    try:
        old = read_sweep(d)
    except DocumentError as exc:
        raise DocumentError(
            f"{exc}; {sj} is damaged: move it away to start the sweep afresh"
        ) from None
    damaged = f"{sj} is damaged ({{}}); move it away to start the sweep afresh"
    if old.kind == plan.kind and (conflict := resume_conflict(old, plan)) is not None:
        raise AccelbenchError(f"{sj.parent} holds a different sweep: {conflict}")
    if old.kind != plan.kind or _workload_key(old.base_config) != _workload_key(
        to_json_object(plan.base.to_json(), "base_config")
    ):
        raise AccelbenchError(
            f"{sj.parent} holds a different sweep (kind, model, GPUs or workload differ); "
            "choose another --out directory"
        )
    out: dict[str, SweepPoint] = {}
    for p in old.points:
        try:
            replace(plan, values=[p.value])  # the range check of the plan's own points
        except AccelbenchError as exc:
            raise AccelbenchError(damaged.format(f"point {p.dir}: {exc}")) from None
        out[p.dir] = p
    return out
