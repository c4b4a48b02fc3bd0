"""Sampling beside a benchmark run.

    s = TelemetrySampler(run_dir, interval_s=1.0, server_url=url, server_pid=pid)
    s.start()
    s.set_phase("warmup"); ...; s.set_phase("measured"); ...; s.set_phase("drain")
    s.halt()  # optional: sampling ends (the run's end summarises without it beside)
    result = s.stop(measured_window_ns=(start_ns, end_ns), output_tokens=n, total_tokens=m)

``start`` probes the sources (autodetected unless named) and samples each of them every
``interval_s`` in a background thread; a missing source is reported, never raised.
Samples are stamped by ``clock`` (default ``time.monotonic_ns``); ``open`` and
``sample_now`` take the thread's ticks by hand (tests drive a fake clock that way).
``stop`` takes a last sample, writes ``run_dir/telemetry.parquet`` atomically (temp
file + rename) and returns the summary's ``telemetry`` section
(:class:`~accelbench.metrics.summary.TelemetrySection`): the sources' status and the
energy over the measured window. A run passes its summary's window and token counts
(``runner/benchmark.py`` ``end_run``), so J/token and tok/s share one definition. Given a ``judge`` (the health rules:
:class:`accelbench.health.sampler.HealthSampler` passes them), it also holds the
verdict of the run. Telemetry does not import the health package: data flows one way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from accelbench.metrics.summary import SourceErrors, TelemetrySection, health_section
from accelbench.store.rundir import write_parquet_atomic
from accelbench.telemetry.energy import window_energy
from accelbench.telemetry.schema import Row, rows_to_table
from accelbench.telemetry.sources import Source, close_sources, open_sources
from accelbench.urls import Endpoint

TELEMETRY_FILE = "telemetry.parquet"
PHASES = ("warmup", "measured", "drain")

Rows = list[Row]
# (rows, measured window (start_ns, end_ns) or None, baseline rows or None) -> the health
# rules' verdict (health/rules.py: {verdict, findings, unknown})
Judge = Callable[[Rows, tuple[int, int] | None, Rows | None], Mapping[str, object]]


def collect(
    sources: list[Source],
    phase: str | None = None,
    errors: dict[str, SourceErrors] | None = None,
    t_ns: int | None = None,
) -> Rows:
    """One sample of every source, stamped with one instant: ``t_ns``, by default
    ``time.monotonic_ns()`` (the benchmark records' clock)."""
    if t_ns is None:
        t_ns = time.monotonic_ns()
    rows: Rows = []
    for src in sources:
        try:
            got = src.sample(t_ns)
        except Exception as exc:  # one bad source must not stop the others
            if errors is not None:
                e = errors.setdefault(src.name, SourceErrors(count=0, last=None))
                e["count"] += 1
                e["last"] = f"{type(exc).__name__}: {exc}"
            continue
        for r in got:
            r["t_ns"] = t_ns
            r["phase"] = phase
            if r.get("wall_ns") is None:
                r["wall_ns"] = time.time_ns()
        rows.extend(got)
    return rows


class TelemetrySampler:
    """Samples the available telemetry sources beside a run (see module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        interval_s: float = 1.0,
        server_url: str | Endpoint | None = None,
        server_pid: int | None = None,
        sources: list[str] | None = None,
        judge: Judge | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.run_dir = Path(run_dir)
        self.interval_s = float(interval_s)
        self.server_url = server_url
        self.server_pid = server_pid
        self.source_names = sources
        self.judge = judge
        self.clock = clock  # each sample's t_ns (tests drive a fake one with sample_now)
        self.status: dict[str, str] = {}
        self.errors: dict[str, SourceErrors] = {}
        self._sources: list[Source] = []
        self._rows: Rows = []
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: TelemetrySection | None = None
        self._halted = False
        self._opened = False

    # -- control -------------------------------------------------------------

    def open(self) -> None:
        """Probe the sources (once). Never raises for a missing source."""
        if self._opened:
            return
        self._opened = True
        self._sources, self.status = open_sources(
            self.source_names, self.server_url, self.server_pid
        )
        for src in self._sources:
            note = getattr(src, "note", None)
            if note:
                self.errors[src.name] = SourceErrors(count=0, last=note)

    def start(self) -> None:
        """Probe the sources and start sampling every ``interval_s`` in a daemon thread.
        Never raises for a missing source."""
        if self._thread is not None:
            return
        self.open()
        self._thread = threading.Thread(target=self._loop, name="accelbench-telemetry", daemon=True)
        self._thread.start()

    def set_phase(self, phase: str | None) -> None:
        """Mark the following samples with ``phase`` (warmup, measured, drain)."""
        with self._lock:
            self._phase = phase

    @property
    def rows(self) -> Rows:
        with self._lock:
            return list(self._rows)

    def sample_now(self) -> None:
        """One sample of every source now (``clock()``): what the thread does every
        ``interval_s``; without ``start`` (after ``open``), the caller's ticks."""
        self._sample()

    def _sample(self) -> None:
        with self._lock:
            phase = self._phase
        got = collect(self._sources, phase, self.errors, self.clock())
        with self._lock:
            self._rows.extend(got)

    def _loop(self) -> None:
        start = time.monotonic()
        k = 0
        while not self._stop.is_set():
            self._sample()
            k += 1
            delay = start + k * self.interval_s - time.monotonic()
            if delay < 0:  # a slow sample: skip missed ticks rather than burst
                k = int((time.monotonic() - start) / self.interval_s) + 1
                delay = start + k * self.interval_s - time.monotonic()
            self._stop.wait(max(delay, 0.0))

    def halt(self) -> None:
        """Stop sampling (a last sample covers the end of the window) and release the
        sources; ``stop`` then writes the file and the result. A run halts its sampler
        when the load has ended, before the end of the run summarises it: sampling beside
        that work measured nothing of the load and held memory while it peaked."""
        if self._halted:
            return
        self._halted = True
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(10.0, 3 * self.interval_s))
            if self._thread.is_alive():  # a source hangs: do not sample beside it
                self.errors.setdefault("sampler", SourceErrors(count=0, last=None))
                self.errors["sampler"]["count"] += 1
                self.errors["sampler"]["last"] = "sampling thread did not stop in time"
            else:
                self._sample()  # a last sample so the end of the window is covered
        close_sources(self._sources)

    def stop(
        self,
        measured_window_ns: tuple[int, int] | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
    ) -> TelemetrySection:
        """Stop sampling (``halt``), write ``telemetry.parquet`` and return the summary's
        section: energy over ``measured_window_ns`` (None: every sample's span), J per
        token over ``output_tokens`` / ``total_tokens``."""
        if self._result is not None:
            return self._result
        self.halt()
        rows = self.rows
        write_parquet_atomic(self.run_dir / TELEMETRY_FILE, rows_to_table(rows))
        window = (measured_window_ns[0], measured_window_ns[1]) if measured_window_ns else None
        result = TelemetrySection(
            sources=dict(self.status),
            energy=window_energy(rows, window, output_tokens, total_tokens),
        )
        if self.judge is not None:
            baseline = [r for r in rows if window and (r["t_ns"] or 0) < window[0]]
            result["health"] = health_section(self.judge(rows, window, baseline or None))
        result["samples"] = len(rows)
        result["interval_s"] = self.interval_s
        result["errors"] = self.errors
        result["file"] = TELEMETRY_FILE
        self._result = result
        return result
