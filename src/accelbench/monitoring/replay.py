"""A telemetry source that replays captured tool outputs, one file per sample.

``accelbench monitor --replay a.xml --replay b.xml ...`` feeds the monitor (and so the
exporter, the health rules and recovery) from captures instead of live devices: the first
sample is the first file, and so on; after the last file the last one repeats. This is how
the monitoring-stack tests replay a fault (e.g. ECC errors rising) through real
Prometheus and Alertmanager, and how the cost benchmark serves eight GPUs on a machine
without any.

Each file is read as ``health --file`` reads it (:func:`read_capture`): what a capture
lost (a row cut short, a stray entry) is :meth:`ReplaySource.lost` while its sample is
the latest, so the monitor's verdict is unknown (unless a rule fails) with a
``data lost: FILE: ...`` reason, and its notes are in :attr:`ReplaySource.notes`.
"""

from __future__ import annotations

import time
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers import Capture, read_capture
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
        self.captures: list[Capture] = []
        self.frames: list[list[Row]] = []
        self.notes: list[str] = []  # each file's notes, "FILE: note"
        self.position = 0
        self._lost: list[str] = []

    def probe(self) -> str | None:
        captures = []
        for p in self.paths:
            try:
                cap = read_capture(p, self.fmt)
            except AccelbenchError as exc:
                return f"{p}: {exc}"
            if not cap.rows:
                return f"{p}: no device in the capture" + (
                    f" ({'; '.join(cap.lost)})" if cap.lost else ""
                )
            captures.append(cap)
        self.captures = captures
        self.frames = [c.rows for c in captures]
        self.notes = [
            f"{p}: {n}" for p, c in zip(self.paths, captures, strict=True) for n in c.notes
        ]
        return None

    def sample(self, t_ns: int) -> list[Row]:
        if not self.frames and self.probe() is not None:
            return []
        at = min(self.position, len(self.frames) - 1)
        self.position += 1
        self._lost = [f"{self.paths[at]}: {x}" for x in self.captures[at].lost]
        rows = [r.copy() for r in self.frames[at]]  # flat rows: a shallow copy is a full copy
        wall = time.time_ns()
        for r in rows:
            r["t_ns"] = t_ns
            r["wall_ns"] = wall
        return rows

    def lost(self) -> list[str]:
        """What the capture of the latest sample lost, each line ``FILE: ...``."""
        return list(self._lost)
