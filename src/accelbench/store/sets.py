"""Sets of runs analysed together: a sweep directory (with sweep.json, written by
accelbench.suites.sweep), a single run, or a directory of runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError, DocumentError
from accelbench.store.reader import RunInfo, find_run_dirs, is_run_dir, load_run
from accelbench.store.sweepdoc import SweepDoc, read_sweep


@dataclass
class SweepSet:
    """Runs analysed together (a sweep, or a single run) and what is wrong with them."""

    name: str
    path: Path
    runs: list[RunInfo]
    problems: list[str] = field(default_factory=list)
    sweep: SweepDoc | None = None
    # per-analysis caches (e.g. metrics.compare's bootstrap points), keyed by their owner
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def usable_runs(self) -> list[RunInfo]:
        return [r for r in self.runs if r.usable]

    @property
    def gpus(self) -> int:
        return self.runs[0].gpus if self.runs else 1

    def workload(self) -> dict[str, Any] | None:
        for r in self.usable_runs or self.runs:
            return r.workload()
        return None


def load_sweep(path: str | Path) -> SweepSet:
    """A sweep directory (with sweep.json, or any directory holding run directories)."""
    d = Path(path)
    sj = d / "sweep.json"
    problems: list[str] = []
    runs: list[RunInfo] = []
    sweep: SweepDoc | None = None
    if sj.exists():
        try:
            sweep = read_sweep(d, "sweep.json")
        except DocumentError as exc:
            problems.append(f"{exc}; using the run directories found")
    if sweep is not None:
        loaded: dict[Path, str] = {}  # run directory -> the point that named it first
        for p in sweep.points:
            if p.dir in ("", "."):
                problems.append(f"sweep.json: point {p.value:g} names no run directory")
                continue
            pdir = d / p.dir
            label = f"point {p.value:g}"
            if not pdir.resolve().is_relative_to(d.resolve()):
                # a sweep writes its points under itself: an edited sweep.json pulled any
                # run on the disk ("../other/run", "/abs/run") into this sweep's figures
                problems.append(
                    f"{label}: run directory {p.dir} is outside the sweep directory: left out"
                )
                continue
            if p.status != "completed":
                why = f": {p.reason}" if p.reason else ""
                problems.append(f"{label}: {p.status}{why}")
                if not pdir.is_dir():
                    continue
            if not pdir.is_dir():
                problems.append(f"{label}: run directory {p.dir} missing")
                continue
            if (first := loaded.get(pdir.resolve())) is not None:
                # one run read as two points weighed twice in the frontier and compare
                problems.append(f"{label}: run directory {p.dir} is {first}'s too: left out")
                continue
            loaded[pdir.resolve()] = label
            run = load_run(pdir)
            if (said := point_disagrees(sweep.kind, p.value, p.dir, run)) is not None:
                problems.append(said)
            runs.append(run)
        if unlisted := _unlisted_run_dirs(d, sweep):
            names = ", ".join(unlisted[:10]) + (
                f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else ""
            )
            problems.append(f"sweep.json lists no point for run directories {names}: left out")
    else:
        if not d.is_dir():
            raise AccelbenchError(f"{d}: not a directory")
        for rd in find_run_dirs(d):
            runs.append(load_run(rd))
        if not runs:
            raise AccelbenchError(f"{d}: no run directories found (no run.json / summary.json)")
    for r in runs:
        for prob in r.problems:
            problems.append(f"{r.load_label} ({r.path.name}): {prob}")
        if r.summary is None:
            problems.append(f"{r.load_label} ({r.path.name}): no figures (left out)")
    runs.sort(key=lambda r: (r.load is None, r.load or 0.0))
    return SweepSet(d.name, d, runs, problems, sweep)


def point_disagrees(kind: str, value: float, pdir: str, run: RunInfo) -> str | None:
    """Where a point's run did not run at the point's value (a run replaced, copied in or
    edited): one line naming the point and the load used. The readers (frontier, compare,
    cost, report) place and label a run at the load its own run.json and summary.json
    record (:attr:`RunInfo.load`), never at sweep.json's value; a run that records none
    is placed last, unlabelled by load. ``predict --calibrate`` says the same of the
    points it fits (each at its run's own concurrency)."""
    if run.doc is None:  # no run.json: its problem is said already
        return None
    ran = run.rate if kind == "rate" else (run.concurrency if run.rate is None else None)
    if ran is not None and math.isclose(ran, value, rel_tol=1e-9):
        return None
    noun = "rate" if kind == "rate" else "concurrency"
    if run.load is None:
        return (
            f"point {value:g}: run directory {pdir} records no load (run.json, summary.json): "
            f"placed last, not at sweep.json's {noun} {value:g}"
        )
    return (
        f"point {value:g}: run directory {pdir} ran at {run.load_label} (its run.json, "
        f"summary.json), not sweep.json's {noun} {value:g}: {run.load_label} used"
    )


def _unlisted_run_dirs(d: Path, sweep: SweepDoc) -> list[str]:
    """The run directories in ``d`` that sweep.json names neither as a point's directory
    nor as an earlier attempt set aside (a sweep.json cut short, or a run copied in). The
    sweep's record decides what the sweep is: a resume takes no such directory as a done
    point either (it sets a point's directory aside unless sweep.json says completed)."""
    listed = set()
    for p in sweep.points:
        pdir = d / p.dir
        listed.add(pdir.resolve())
        listed.update((pdir.parent / a).resolve() for a in p.earlier_attempts)
    return [
        c.name
        for c in sorted(d.iterdir())
        if c.is_dir() and c.resolve() not in listed and is_run_dir(c)
    ]


def load_inputs(paths: Sequence[str | Path]) -> list[SweepSet]:
    """Each path: a sweep directory, a single run directory, or a directory of runs."""
    if not paths:
        raise AccelbenchError("give at least one run or sweep directory")
    sets = []
    for p in paths:
        pp = Path(p)
        if not pp.exists():
            raise AccelbenchError(f"{pp}: no such file or directory")
        if not pp.is_dir():
            raise AccelbenchError(f"{pp}: not a run or sweep directory")
        if not (pp / "sweep.json").exists() and is_run_dir(pp):
            r = load_run(pp)
            probs = [f"{r.path.name}: {x}" for x in r.problems]
            if r.summary is None:
                probs.append(f"{r.path.name}: no figures (left out)")
            sets.append(SweepSet(pp.name, pp, [r], probs))
        else:
            sets.append(load_sweep(pp))
    names = [s.name for s in sets]
    for i, s in enumerate(sets):  # disambiguate equal directory names
        if names.count(s.name) > 1:
            s.name = f"{s.name} ({i + 1})"
    return sets
