"""Sampling beside a benchmark run.

    s = TelemetrySampler(run_dir, interval_s=1.0, server_url=url, server_pid=pid)
    s.start()
    s.set_phase("warmup"); ...; s.set_phase("measured"); ...; s.set_phase("drain")
    result = s.stop(measured_window_ns=(start_ns, end_ns), output_tokens=n, total_tokens=m)

``start`` probes the sources (autodetected unless named) and samples each of them every
``interval_s`` in a background thread; a missing source is reported, never raised.
``stop`` takes a last sample, writes ``run_dir/telemetry.parquet`` atomically (temp
file + rename) and returns a JSON-serialisable dict with the sources' status and the
energy over the measured window. Given a ``judge`` (the health rules:
:class:`accelbench.health.sampler.HealthSampler` passes them), it also holds the
verdict of the run. Telemetry does not import the health package: data flows one way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from accelbench.store.rundir import write_parquet_atomic
from accelbench.telemetry.energy import window_energy
from accelbench.telemetry.schema import rows_to_table
from accelbench.telemetry.sources import Source, close_sources, open_sources

TELEMETRY_FILE = "telemetry.parquet"
PHASES = ("warmup", "measured", "drain")

Rows = list[dict[str, Any]]
# (rows, measured window (start_ns, end_ns) or None, baseline rows or None) -> verdict dict
Judge = Callable[[Rows, tuple[int, int] | None, Rows | None], Mapping[str, Any]]


def collect(
    sources: list[Source], phase: str | None = None, errors: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One sample of every source, stamped with one ``time.monotonic_ns()``."""
    t_ns = time.monotonic_ns()
    rows: list[dict[str, Any]] = []
    for src in sources:
        try:
            got = src.sample(t_ns)
        except Exception as exc:  # one bad source must not stop the others
            if errors is not None:
                e = errors.setdefault(src.name, {"count": 0, "last": None})
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
        server_url: str | None = None,
        server_pid: int | None = None,
        sources: list[str] | None = None,
        judge: Judge | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.run_dir = Path(run_dir)
        self.interval_s = float(interval_s)
        self.server_url = server_url
        self.server_pid = server_pid
        self.source_names = sources
        self.judge = judge
        self.status: dict[str, str] = {}
        self.errors: dict[str, dict[str, Any]] = {}
        self._sources: list[Source] = []
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: dict[str, Any] | None = None

    # -- control -------------------------------------------------------------

    def start(self) -> None:
        """Probe the sources and start sampling in a daemon thread. Never raises for a
        missing source."""
        if self._thread is not None:
            return
        self._sources, self.status = open_sources(
            self.source_names, self.server_url, self.server_pid
        )
        for src in self._sources:
            note = getattr(src, "note", None)
            if note:
                self.errors[src.name] = {"count": 0, "last": note}
        self._thread = threading.Thread(target=self._loop, name="accelbench-telemetry", daemon=True)
        self._thread.start()

    def set_phase(self, phase: str | None) -> None:
        """Mark the following samples with ``phase`` (warmup, measured, drain)."""
        with self._lock:
            self._phase = phase

    @property
    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._rows)

    def _sample(self) -> None:
        with self._lock:
            phase = self._phase
        got = collect(self._sources, phase, self.errors)
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

    def stop(
        self,
        measured_window_ns: tuple[int, int] | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Stop sampling, write ``telemetry.parquet`` and return the summary dict."""
        if self._result is not None:
            return self._result
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(10.0, 3 * self.interval_s))
            if self._thread.is_alive():  # a source hangs: do not sample beside it
                self.errors.setdefault("sampler", {"count": 0, "last": None})
                self.errors["sampler"]["count"] += 1
                self.errors["sampler"]["last"] = "sampling thread did not stop in time"
            else:
                self._sample()  # a last sample so the end of the window is covered
        close_sources(self._sources)
        rows = self.rows
        write_parquet_atomic(self.run_dir / TELEMETRY_FILE, rows_to_table(rows))
        window = (measured_window_ns[0], measured_window_ns[1]) if measured_window_ns else None
        result: dict[str, Any] = {
            "sources": dict(self.status),
            "energy": window_energy(rows, window, output_tokens, total_tokens),
        }
        if self.judge is not None:
            baseline = [r for r in rows if window and r["t_ns"] < window[0]]
            result["health"] = self.judge(rows, window, baseline or None)
        result.update(
            samples=len(rows), interval_s=self.interval_s, errors=self.errors, file=TELEMETRY_FILE
        )
        self._result = result
        return result
