"""The soak suite: steady load for minutes to days, judged per window.

The load is a sequence of ordinary runs (segments, ``--segment`` long, default one
hour) driven by :func:`accelbench.runner.benchmark.run_benchmark` in the main thread.
Beside it a collector thread samples memory (:class:`MemoryProbe`) every
``sample_s`` and tails the run's journal; each window (``window_s``) is written to
``windows.jsonl`` the moment it closes, each memory sample to ``memory.jsonl``, and
``stress.json`` is rewritten with the verdicts after every segment. An interrupted
soak keeps every finished window; ``resume`` continues on the soak clock where the
last finished window ended.

Soak time ``t_s`` runs over finished windows only: the seconds lost between segments
(server discovery, planning: about a second) are not on it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from accelbench import validate as v
from accelbench.documents import Fields, JsonObject, to_json_object
from accelbench.errors import DocumentError, UsageError
from accelbench.metrics.verdict import Status, Verdict
from accelbench.runner.config import BenchmarkConfig
from accelbench.store.rundir import JOURNAL, write_text_atomic
from accelbench.suites.stress.common import (
    JournalTail,
    JsonlAppender,
    Log,
    MemoryProbe,
    RunTokenizer,
    WindowRow,
    _quiet,
    check_load,
    dir_bytes,
    run_reason,
    run_step,
    suite_stops,
    window_device,
    window_stats,
)
from accelbench.suites.stress.document import (
    MEMORY,
    STRESS_JSON,
    WINDOWS,
    MemorySample,
    SoakPart,
    SoakWindow,
    StressDoc,
    memory_sample,
    memory_series,
    read_rows,
    read_stress,
    suite_reason,
    write_stress,
)
from accelbench.suites.stress.verdicts import (
    DriftThresholds,
    LeakThresholds,
    check_thresholds,
    drift_verdict,
    fraction_verdict,
    leak_verdicts,
)

R = TypeVar("R")


@dataclass
class SoakConfig:
    load: BenchmarkConfig  # the load of every segment; duration_s is the soak's
    duration_s: float
    window_s: float = 60.0
    segment_s: float = 3600.0
    sample_s: float = 5.0
    server_pid: int | None = None
    metrics: list[str] = field(default_factory=list)  # Prometheus gauges to watch
    leak: LeakThresholds = field(default_factory=LeakThresholds)
    drift: DriftThresholds = field(default_factory=DriftThresholds)
    # the fraction of requests failed (``soak errors``): flood's thresholds and defaults;
    # a stress.json written before them reads with these defaults
    warn_errors: float = 0.0
    fail_errors: float = 0.05
    gpu: bool = True
    embedded: bool = False  # the load's server is the embedded engine (started per run)

    def validate(self) -> None:

        v.number("--duration", self.duration_s, 1.0, 30 * 86400.0, unit="s")
        v.number("--window", self.window_s, 1.0, 86400.0, unit="s")
        if self.window_s > self.duration_s:  # the verdicts read whole windows: none to read
            raise UsageError(
                f"--window {self.window_s:g} s is longer than --duration "
                f"{self.duration_s:g} s: no window to judge (every verdict reads whole "
                "windows): a shorter --window or a longer --duration"
            )
        v.number("--segment", self.segment_s, self.window_s, 30 * 86400.0, unit="s")
        v.number("--sample-interval", self.sample_s, 0.1, self.window_s, unit="s")
        mib = 2**20
        check_thresholds("--leak-warn", self.leak.warn_bytes_per_h / mib, "--leak-fail",
                         self.leak.fail_bytes_per_h / mib, 2**30, "MiB/h")  # fmt: skip
        v.number("--exhaustion-horizon", self.leak.horizon_h, 0, 1e6, lo_open=True, unit="h")
        check_thresholds("--drift-warn", self.drift.warn_pct_per_h, "--drift-fail",
                         self.drift.fail_pct_per_h, 1e6, "%/h")  # fmt: skip
        check_thresholds("--warn-errors", self.warn_errors, "--fail-errors", self.fail_errors, 1.0)
        v.optional_integer("--server-pid", self.server_pid, 1, 1 << 22)  # Linux's pid_max
        for m in self.metrics:
            v.prom_name("--metric", m)
        if self.load.num_requests is not None:
            raise UsageError("stress soak runs for --duration: drop --num-requests")
        check_load(self.load, step={"duration_s": self.segment_s})  # as each segment runs

    def to_json(self) -> JsonObject:
        d = asdict(self)
        d["load"] = self.load.to_json()
        return to_json_object(d, "soak config")  # tuples as lists ...

    @classmethod
    def from_json(cls, d: Any, where: str = "stress.json") -> SoakConfig:
        """The configuration recorded in a soak's stress.json, checked as if given anew."""
        try:
            d = dict(d)
            cfg = cls(
                load=BenchmarkConfig.from_json(d.pop("load")),
                leak=LeakThresholds(**d.pop("leak")),
                drift=DriftThresholds(**d.pop("drift")),
                **{k: x for k, x in d.items() if k in cls.__dataclass_fields__},
            )
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise UsageError(
                f"{where}: its config is damaged ({type(exc).__name__}: {exc})"
            ) from None
        try:
            cfg.validate()
        except UsageError as exc:
            raise UsageError(f"{where}: its recorded config is refused: {exc}") from None
        return cfg

    def identity(self) -> JsonObject:
        """What a resumed soak must share with the recorded one: everything but the
        duration (a soak may be extended), and for the embedded engine, the engine's
        address and process (a fresh one is started per invocation)."""
        d = self.to_json()
        d.pop("duration_s", None)
        load = d.get("load")
        if self.embedded and isinstance(load, dict):
            d["server_pid"] = None
            load["url"] = load["model"] = None
        return d


def recorded_config(path: Path) -> SoakConfig:
    """The configuration of the soak in ``path`` (written before its first segment)."""
    try:
        prev = read_stress(path)
    except DocumentError as exc:
        raise DocumentError(f"--resume: {exc}") from None
    if prev.suite != "soak" or not prev.config:
        raise UsageError(f"--resume {path}: not a soak directory")
    return SoakConfig.from_json(prev.config, f"--resume {path / STRESS_JSON}")


@dataclass
class SoakResult:
    path: Path
    status: str  # completed | interrupted | failed
    windows: list[SoakWindow]
    verdicts: list[Verdict]
    reason: str | None = None  # stress.json ``reason``

    @property
    def failed(self) -> bool:
        return self.status != "completed" or any(v.status == Status.FAIL for v in self.verdicts)


class _Collector(threading.Thread):
    """Samples memory and closes windows while a segment runs."""

    GRACE_S = 2.0  # a record reaches the journal within ~1 s of finishing

    def __init__(self, cfg: SoakConfig, probe: MemoryProbe, journal: Path, t0_soak: float,
                 windows: JsonlAppender, memory: JsonlAppender, n_window: int,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:  # fmt: skip
        """``clock_ns``: the clock of the journal's times (time.monotonic_ns), which
        decides when windows close; a test gives its own."""
        super().__init__(name="accelbench-soak", daemon=True)
        self.clock_ns = clock_ns
        self.cfg, self.probe = cfg, probe
        self.tok = RunTokenizer(journal.parent, cfg.load)
        self.tail = JournalTail(journal, self.tok)
        self.t0_soak = t0_soak  # soak time at the segment's start
        self.windows, self.memory = windows, memory
        self.n_window = n_window
        # the segment's length: memory is sampled, and windows close, up to it. Memory is
        # sampled while the load runs, not while the segment's run is finalized (building
        # its Parquet table and summary is a transient peak of the client's RSS that would
        # read as growth: +640 MiB for a 1-hour segment of 180,000 requests before finalize
        # completed the journal in batches); windows end with the load, not with its drain
        # and finalize (an extra, nearly empty window would read as a throughput drop)
        self.length: float | None = None
        self.halt = threading.Event()
        self.start_ns: int | None = None  # when the load started (the first record's t_sched)
        self.rows: list[WindowRow] = []  # records (journal rows) not yet in a window
        self.samples: list[MemorySample] = []  # memory samples of the open window
        self.done: list[SoakWindow] = []  # windows closed by this collector
        self.w_start = 0.0  # segment seconds
        self.error: str | None = None

    def seg_s(self) -> float:
        if self.start_ns is None:
            return 0.0
        return (self.clock_ns() - self.start_ns) / 1e9

    def _wait_for_load(self) -> bool:
        """Windows start with the load, not with server discovery and planning: wait for
        the first record and take its scheduled time as the start."""
        while self.start_ns is None and not self.halt.is_set():
            rows = self.tail.new_rows()
            if rows:
                self.start_ns = min(int(r.get("t_sched") or r["t_send"]) for r in rows)
                self.rows += rows
                return True
            self.halt.wait(0.1)
        return self.start_ns is not None

    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - reported as the soak's failure
            self.error = f"{type(exc).__name__}: {exc}"

    def _loop(self) -> None:
        if not self._wait_for_load():
            return
        next_sample = 0.0
        while not self.halt.is_set():
            now = self.seg_s()
            if now >= next_sample and (self.length is None or now <= self.length):
                s = self.probe.sample(self.t0_soak + now)
                self.memory.append(s)
                self.samples.append(s)
                next_sample += self.cfg.sample_s
            self.rows += self.tail.new_rows()
            w_end = self.w_start + self.cfg.window_s
            while self.seg_s() >= w_end + self.GRACE_S and (
                self.length is None or w_end <= self.length
            ):
                self._close(w_end)
                w_end = self.w_start + self.cfg.window_s
            sampling = self.length is None or self.seg_s() <= self.length
            self.halt.wait(min(0.5, max(0.0, next_sample - self.seg_s())) if sampling else 0.5)

    def finish(self) -> None:
        """After the segment: close what is left (a partial last window is kept when it
        covers at least half a window)."""
        self.halt.set()
        self.join()
        self.rows += self.tail.new_rows()
        self.tok.close()
        if self.start_ns is None:  # no record at all: nothing to window
            return
        end = self.seg_s() if self.length is None else min(self.seg_s(), self.length)
        while self.w_start + self.cfg.window_s <= end:
            self._close(self.w_start + self.cfg.window_s)
        if end - self.w_start >= self.cfg.window_s / 2 and self.rows:
            self._close(end)

    def _close(self, w_end: float) -> None:
        assert self.start_ns is not None
        hi = self.start_ns + int(w_end * 1e9)
        mine = [r for r in self.rows if (r.get("t_done") or r.get("t_send") or 0) < hi]
        self.rows = [r for r in self.rows if (r.get("t_done") or r.get("t_send") or 0) >= hi]
        cut = self.t0_soak + w_end
        samples = [s for s in self.samples if _t(s) < cut]
        self.samples = [s for s in self.samples if _t(s) >= cut]
        row = SoakWindow(self.n_window, round(self.t0_soak + self.w_start, 3),
                         round(self.t0_soak + (self.w_start + w_end) / 2, 3),
                         round(self.t0_soak + w_end, 3), w_end - self.w_start,
                         window_stats(mine, w_end - self.w_start), window_device(samples))  # fmt: skip
        self.windows.append(row.to_json())
        self.done.append(row)
        self.n_window += 1
        self.w_start = w_end


def _t(s: MemorySample) -> float:
    t = s.get("t_s")
    return float(t) if isinstance(t, int | float) else 0.0


def soak_verdicts(
    windows: list[SoakWindow],
    samples: list[MemorySample],
    totals: dict[str, float | None],
    leak: LeakThresholds,
    drift: DriftThresholds,
    metrics: Sequence[str] = (),
    errors: tuple[float, float] = (0.0, 0.05),
) -> list[Verdict]:
    """Leak verdicts for every memory series (and for each of ``metrics`` never sampled:
    ``leak_verdicts``), drift verdicts for latency, throughput and error rate over the
    windows, and ``soak errors``: the fraction of the windows' requests that failed,
    judged against ``errors`` (warn, fail)."""
    out = leak_verdicts(memory_series(samples), metrics, totals.get, leak)
    t = [w.t_s for w in windows]
    nan = float("nan")

    def nums(xs: list[float | None]) -> list[float]:
        return [nan if x is None else float(x) for x in xs]

    for name, vals, bad, rel in (
        ("drift ttft p50", [w.stats.ttft_ms.get("p50") for w in windows], "up", True),
        ("drift ttft p99", [w.stats.ttft_ms.get("p99") for w in windows], "up", True),
        ("drift tpot p50", [w.stats.tpot_ms.get("p50") for w in windows], "up", True),
        ("drift throughput", [w.stats.output_tok_per_s for w in windows], "down", True),
        ("drift error rate", [w.stats.error_rate for w in windows], "up", False),
    ):
        out.append(drift_verdict(name, t, nums(vals), bad=bad, relative=rel, th=drift))
    out.append(errors_verdict(windows, *errors))
    return out


def errors_verdict(windows: list[SoakWindow], warn: float, fail: float) -> Verdict:
    """``soak errors``: the fraction of the soak's requests that failed, every error kind
    counted (context overflow too: a soak's load is the user's own, unlike flood's), over
    the requests its windows hold (``window_stats``: warm-up requests and those cut short
    by a segment's end or a stop signal, ``interrupted``, are in neither count)."""
    n = sum(w.stats.requests for w in windows)
    k = sum(w.stats.requests - w.stats.ok for w in windows)
    kinds: dict[str, int] = {}
    for w in windows:
        for kind, c in w.stats.errors.items():
            kinds[kind] = kinds.get(kind, 0) + c
    top = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return fraction_verdict(
        "soak errors", "errors", "fraction of requests failed (every error kind)", k, n, warn,
        fail, {"requests": n, "failed": k, "windows": len(windows),
               **{f"errors_{kind}": c for kind, c in top}},
    )  # fmt: skip


def run_soak(cfg: SoakConfig, path: Path, *, resume: bool = False, log: Log = _quiet) -> SoakResult:
    """Run (or resume) a soak into the stress directory ``path``."""
    cfg.validate()
    path.mkdir(parents=True, exist_ok=True)
    windows_f, memory_f = JsonlAppender(path / WINDOWS), JsonlAppender(path / MEMORY)
    done_s, seg = 0.0, 0
    if resume:
        prev = read_stress(path)
        rec = recorded_config(path)
        if rec.identity() != cfg.identity():
            mine, theirs = cfg.identity(), rec.identity()
            diff = sorted(_diff(theirs, mine))
            raise UsageError(
                f"--resume {path}: the soak was recorded with another configuration "
                f"({', '.join(diff[:5])} differ{'s' if len(diff) == 1 else ''}); a soak "
                "resumes with its recorded configuration"
            )
        wins = _resume_rows(windows_f, SoakWindow.from_json)
        done_s = max((w.t_end_s for w in wins), default=0.0)
        seg = v.integer("segments of stress.json", prev.soak.segments if prev.soak else 0, 0,
                        1_000_000)  # fmt: skip
        # a segment killed mid-run (SIGKILL) left its run directory: never write into it
        seg = max([seg] + [int(p.name[4:]) + 1 for p in (path / "runs").glob("seg-[0-9]*")
                           if p.name[4:].isdigit()])  # fmt: skip
        # drop memory samples past the last finished window (they will be re-taken)
        # (one atomic rewrite: a stop or a kill here used to leave memory.jsonl emptied,
        # the samples of every finished window lost)
        keep = [m for m in _resume_rows(memory_f, memory_sample) if _t(m) <= done_s]
        write_text_atomic(memory_f.path, "".join(
            orjson.dumps(m, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n" for m in keep
        ))  # fmt: skip
        log(f"resuming at {done_s:.0f} s of {cfg.duration_s:.0f} s (segment {seg})")
    elif (path / WINDOWS).exists() or (path / STRESS_JSON).exists():
        raise UsageError(f"{path} already holds a soak: use --resume or another --out")
    probe = MemoryProbe(cfg.load.url, cfg.server_pid, cfg.metrics, gpu=cfg.gpu)
    if not resume:  # the configuration is on disk before the first request: a soak
        # killed in its first segment (SIGKILL) resumes from it
        _write(path, cfg, probe, "running", seg, windows_f, memory_f)
    status = "completed"
    stopped: str | None = None  # the error that stopped the soak
    with suite_stops() as check_stop:
        try:
            while done_s < cfg.duration_s - 1e-6:
                check_stop()
                length = min(cfg.segment_s, cfg.duration_s - done_s)
                out = path / "runs" / f"seg-{seg:03d}"
                n_win = len(read_rows(windows_f.path, SoakWindow.from_json)[0])
                col = _Collector(cfg, probe, out / JOURNAL, done_s, windows_f, memory_f, n_win)
                col.length = length
                col.start()
                log(f"segment {seg}: {length:.0f} s")
                try:
                    res = run_step(cfg.load, out, log, duration_s=length)
                finally:
                    col.finish()
                seg += 1
                st = res.status if col.error is None else "failed"
                if col.error:
                    log(f"soak collector failed: {col.error}")
                # a completed segment covered its length (a last window shorter than half a
                # window is dropped, not re-run); an interrupted one ends with its last window
                done_s = (
                    done_s + length
                    if st == "completed"
                    else max((w.t_end_s for w in col.done), default=done_s)
                )
                _write(path, cfg, probe, "running", seg, windows_f, memory_f)
                if st != "completed":
                    status = st
                    stopped = (
                        f"soak collector failed: {col.error}" if col.error else run_reason(res)
                    )
                    break
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            probe.close()
        result = _write(path, cfg, probe, status, seg, windows_f, memory_f, stopped)
    return result


def _diff(a: Any, b: Any, at: str = "") -> list[str]:
    """The dotted keys where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
        return out
    return [] if a == b else [at or "(all)"]


def _finite(x: object) -> bool:
    """No infinity or NaN anywhere in a row (a soak writes none: they would bend the fits)."""
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, str):
        return x not in ("inf", "-inf")
    if isinstance(x, dict):
        return all(_finite(y) for y in x.values())
    if isinstance(x, list):
        return all(_finite(y) for y in x)
    return True


def _resume_rows(f: JsonlAppender, parse: Callable[[Fields], R]) -> list[R]:
    """The rows of a soak's windows.jsonl / memory.jsonl to resume from, each read by its
    type's reader. A torn last line (the soak was killed mid-write) is dropped from the
    file, so the next row does not land on it; a damaged line elsewhere, or a row of the
    wrong shape, stops the resume (continuing would drop it from the verdicts for good)."""
    if not f.path.exists():
        return []
    data = f.path.read_bytes()
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    bad: list[int] = []
    rows: list[R] = []
    kept: list[bytes] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
            if not _finite(raw):
                raise DocumentError("not finite")
            rows.append(parse(Fields(raw, f"{f.path.name}: line {no}")))
            kept.append(line)
        except (orjson.JSONDecodeError, DocumentError):
            bad.append(no)
    if bad and bad != [len(lines)]:
        raise UsageError(
            f"--resume: {f.path} line(s) {', '.join(map(str, bad[:5]))}"
            f"{' ...' if len(bad) > 5 else ''} are damaged; resuming would drop them from "
            "the verdicts: repair or remove those lines, or start a new soak"
        )
    if bad or (data and not data.endswith(b"\n")):
        write_text_atomic(f.path, "".join(x.decode() + "\n" for x in kept))
    return rows


def _write(path: Path, cfg: SoakConfig, probe: MemoryProbe, status: str, seg: int,
           windows_f: JsonlAppender, memory_f: JsonlAppender,
           stopped: str | None = None) -> SoakResult:  # fmt: skip
    windows, _ = read_rows(windows_f.path, SoakWindow.from_json)
    samples, _ = read_rows(memory_f.path, memory_sample)
    names = memory_series(samples)
    totals = {n: probe.total_for(n) for n in names}
    verdicts = soak_verdicts(windows, samples, totals, cfg.leak, cfg.drift, cfg.metrics,
                             (cfg.warn_errors, cfg.fail_errors))  # fmt: skip
    n_req = sum(w.stats.requests for w in windows)
    size = dir_bytes(path)
    part = SoakPart(segments=seg, windows=len(windows),
                    soak_s=max((w.t_end_s for w in windows), default=0.0), requests=n_req,
                    disk_bytes=size, disk_bytes_per_request=size / n_req if n_req else None)  # fmt: skip
    reason = suite_reason(status, stopped, verdicts)
    write_stress(path, StressDoc(
        suite="soak", status=status, config=cfg.to_json(),
        runs=[str(p.relative_to(path)) for p in sorted((path / "runs").glob("seg-*"))],
        verdicts=verdicts, part=part, memory_totals=totals, reason=reason,
    ))  # fmt: skip
    return SoakResult(path=path, status=status, windows=windows, verdicts=verdicts,
                      reason=reason)  # fmt: skip
