"""A telemetry source that replays captured tool outputs, one file per sample.

``accelbench monitor --replay a.xml --replay b.xml ...`` feeds the monitor (and so the
exporter, the health rules and recovery) from captures instead of live devices: the first
sample is the first file, and so on; after the last file the last one repeats. This is how
the monitoring-stack tests replay a fault (e.g. ECC errors rising) through real
Prometheus and Alertmanager, and how the cost benchmark serves eight GPUs on a machine
without any.
"""

from __future__ import annotations

import time
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers import parse_file
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources import Source


class ReplaySource(Source):
    """See the module docstring. Files are parsed once, in :meth:`probe`."""

    name = "replay"

    def __init__(self, paths: list[Path], fmt: str | None = None) -> None:
        if not paths:
            raise AccelbenchError("--replay needs at least one captured file")
        self.paths = [Path(p) for p in paths]
        self.fmt = fmt
        self.frames: list[list[Row]] = []
        self.position = 0

    def probe(self) -> str | None:
        frames = []
        for p in self.paths:
            try:
                rows = parse_file(p, self.fmt)
            except AccelbenchError as exc:
                return f"{p}: {exc}"
            if not rows:
                return f"{p}: no device in the capture"
            frames.append(rows)
        self.frames = frames
        return None

    def sample(self, t_ns: int) -> list[Row]:
        if not self.frames and self.probe() is not None:
            return []
        frame = self.frames[min(self.position, len(self.frames) - 1)]
        self.position += 1
        rows = [r.copy() for r in frame]  # flat rows: a shallow copy is a full copy
        wall = time.time_ns()
        for r in rows:
            r["t_ns"] = t_ns
            r["wall_ns"] = wall
        return rows
