"""The host's CPU and memory, and the server process tree's RSS and CPU (psutil)."""

from __future__ import annotations

import time
from typing import Any

import psutil

from accelbench.gpu.values import call
from accelbench.telemetry.schema import KIND_HOST, Row, new_row
from accelbench.telemetry.sources.base import Source


class HostSource(Source):
    """Host CPU and memory, and the RSS/CPU of a server process and its children."""

    name = "host"

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.note: str | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu: Any = None

    def probe(self) -> str | None:
        self._last_cpu = psutil.cpu_times()
        if self.pid is not None:
            try:
                self._procs[self.pid] = psutil.Process(self.pid)
                self._procs[self.pid].cpu_percent(interval=None)
            except psutil.Error as exc:
                # host figures still work; say why the process ones are missing
                self.note = f"server process {self.pid} not found ({exc})"
        return None

    def _cpu_util(self) -> float | None:
        """Busy ratio since the last call, from our own cpu_times deltas (not
        psutil.cpu_percent(None), whose module-wide state other callers would reset)."""
        now = psutil.cpu_times()
        last, self._last_cpu = self._last_cpu, now

        def busy_total(t: Any) -> tuple[float, float]:
            total = sum(t)
            idle = t.idle + getattr(t, "iowait", 0.0)
            return total - idle, total

        b0, t0 = busy_total(last)
        b1, t1 = busy_total(now)
        if t1 <= t0:
            return None
        return min(max((b1 - b0) / (t1 - t0), 0.0), 1.0)

    def _tree(self) -> list[psutil.Process]:
        if self.pid is None:
            return []
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for p in procs:
            cached = self._procs.get(p.pid)
            if cached is None:
                call(p.cpu_percent, None)  # first call primes it
                self._procs[p.pid] = p
                cached = p
            out.append(cached)
        return out

    def sample(self, t_ns: int) -> list[Row]:
        vm = psutil.virtual_memory()
        rss = cpu = None
        tree = self._tree()
        if tree:
            rss = 0
            cpu = 0.0
            for p in tree:
                try:
                    rss += p.memory_info().rss
                    cpu += p.cpu_percent(interval=None) / 100.0
                except psutil.Error:
                    continue
        return [
            new_row(
                t_ns=t_ns,
                wall_ns=time.time_ns(),
                source=self.name,
                kind=KIND_HOST,
                cpu_util=self._cpu_util() if self._last_cpu is not None else None,
                host_mem_used_bytes=vm.total - vm.available,
                host_mem_total_bytes=vm.total,
                proc_pid=self.pid,
                proc_rss_bytes=rss,
                proc_cpu_util=cpu,
            )
        ]
