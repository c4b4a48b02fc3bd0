"""What metrics' computations need of a run and of a set of runs. The store's RunInfo and
SweepSet satisfy these; metrics depends on no reader (data flows store -> metrics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa


class RunLike(Protocol):
    """One run: its figures (accelbench.metrics.registry) and its request columns."""

    @property
    def run_id(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def summary(self) -> Mapping[str, Any] | None: ...
    @property
    def has_requests(self) -> bool: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def load(self) -> float | None: ...
    @property
    def load_label(self) -> str: ...
    @property
    def emulated(self) -> str | None: ...  # the accelerator serve emulated predicted

    def figure(self, name: str) -> float | None: ...

    def read_requests(self, columns: tuple[str, ...] | list[str] = ...) -> pa.Table: ...


class RunSetLike(Protocol):
    """Runs analysed together (a sweep, or a single run)."""

    @property
    def name(self) -> str: ...
    @property
    def runs(self) -> Sequence[RunLike]: ...  # every run read, usable or not
    @property
    def usable_runs(self) -> Sequence[RunLike]: ...
    @property
    def gpus(self) -> int: ...

    cache: dict[str, Any]  # per-analysis results kept with the set
    problems: list[str]  # what is wrong with its runs (one line each)

    def workload(self) -> dict[str, Any] | None: ...
