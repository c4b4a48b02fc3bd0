"""``sweep.json``: the document of a sweep directory (docs/RESULTS.md, "sweep.json"),
its one writer and its one validating reader.

The sweep suite (accelbench.suites.sweep) writes it; the runs store reads it to know a
sweep's points (accelbench.store.sets), which is why it lives in the store: the store
imports no suite. A damaged file is one DocumentError line naming the file and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.documents import Fields, Json, JsonObject, load_json
from accelbench.errors import DocumentError

SWEEP_JSON = "sweep.json"
SWEEP_SCHEMA = "accelbench.sweep/1"


@dataclass
class SweepPoint:
    """One point: its load value, run directory, status (pending | running | completed |
    failed | interrupted | skipped) and what the sweep learnt from it."""

    value: float  # concurrency (a whole number) or request rate
    dir: str
    status: str = "pending"
    reason: str | None = None
    run_id: str | None = None
    earlier_attempts: list[str] = field(default_factory=list)
    output_tps_per_gpu: float | None = None
    interactivity: float | None = None
    saturation: str | None = None  # why the sweep stopped after this point

    def to_json(self) -> JsonObject:
        out: JsonObject = {"value": self.value, "dir": self.dir, "status": self.status}
        for k in ("reason", "run_id"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.earlier_attempts:
            out["earlier_attempts"] = list[Json](self.earlier_attempts)
        figs = (self.output_tps_per_gpu, self.interactivity)
        if self.run_id is not None or figs != (None, None):  # it ran: what it measured
            out["output_tps_per_gpu"] = self.output_tps_per_gpu
            out["interactivity"] = self.interactivity
        if self.saturation is not None:
            out["saturation"] = self.saturation
        return out

    @classmethod
    def from_json(cls, f: Fields) -> SweepPoint:
        v = f.raw("value")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise DocumentError(f"{f.at('value')}: must be a number (got {v!r:.40})")
        if not isinstance(f.raw("dir"), str):
            raise DocumentError(f"{f.where}: a point without a directory")
        return cls(
            value=v,
            dir=f.str("dir"),
            status=f.str("status", "pending"),
            reason=f.opt_str("reason"),
            run_id=f.opt_str("run_id"),
            earlier_attempts=f.strs("earlier_attempts", []),
            output_tps_per_gpu=f.num("output_tps_per_gpu"),
            interactivity=f.num("interactivity"),
            saturation=f.opt_str("saturation"),
        )


@dataclass
class SweepDoc:
    """sweep.json: the plan (kind, values, preset, per-point sizes, saturation rule, the
    base configuration as recorded) and every point's status."""

    kind: str  # concurrency | rate
    values: list[float]
    base_config: JsonObject
    points: list[SweepPoint]
    status: str = "running"  # running | completed | partial | interrupted
    preset: str | None = None
    requests_per_point: float | None = None
    warmup_per_point: float | None = None
    saturation: JsonObject = field(default_factory=dict)
    stop_reason: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "schema": SWEEP_SCHEMA, "kind": self.kind,
            "values": [int(v) if self.kind == "concurrency" else v for v in self.values],
            "preset": self.preset, "requests_per_point": self.requests_per_point,
            "warmup_per_point": self.warmup_per_point, "saturation": self.saturation,
            "base_config": self.base_config, "points": [p.to_json() for p in self.points],
            "status": self.status, "stop_reason": self.stop_reason,
        }  # fmt: skip

    @classmethod
    def from_json(cls, d: object, where: str = SWEEP_JSON) -> SweepDoc:
        if not isinstance(d, dict):
            raise DocumentError(f"{where}: not a JSON object: {type(d).__name__}")
        f = Fields(d, where)
        if "schema" in d:  # sweep.json before 0.x had none: the same shape
            f.schema(SWEEP_SCHEMA)
        pts = d.get("points", [])
        if not isinstance(pts, list) or not all(isinstance(p, dict) for p in pts):
            raise DocumentError(f"{where}: points is not a list of objects")
        kind = f.str("kind", "concurrency")
        values = []
        for i, x in enumerate(f.list("values", [])):
            if isinstance(x, bool) or not isinstance(x, int | float):
                raise DocumentError(f"{f.at('values')}[{i}]: expected a number, got {x!r:.40}")
            _check_load(kind, x, f"{f.at('values')}[{i}]")
            values.append(x)
        points = [SweepPoint.from_json(p) for p in f.objects("points", [])]
        for i, p in enumerate(points):
            _check_load(kind, p.value, f"{f.at('points')}[{i}].value")
        return cls(
            kind=kind,
            values=values,
            base_config=f.json_obj("base_config"),
            points=points,
            status=f.str("status", "unknown"),
            preset=f.opt_str("preset"),
            requests_per_point=f.num("requests_per_point"),
            warmup_per_point=f.num("warmup_per_point"),
            saturation=f.json_obj("saturation"),
            stop_reason=f.opt_str("stop_reason"),
        )


def _check_load(kind: str, v: float, where: str) -> None:
    """A point's load is a load: a concurrency a whole number >= 1, a request rate a finite
    number > 0 (the sweep's own upper limits are the runner's: checked on a resume)."""
    try:
        ok = math.isfinite(v) and v > 0
    except OverflowError:  # an integer beyond float range: no load
        ok = False
    if kind == "concurrency":
        ok = ok and v >= 1 and v == int(v)
        want = "a whole number >= 1 (a concurrency)"
    else:
        want = "a finite number > 0 (a request rate)"
    if not ok:
        raise DocumentError(f"{where}: must be {want} (got {v!r:.40})")


def read_sweep(sweep_dir: Path, where: str | None = None) -> SweepDoc:
    """The one reader of ``sweep_dir/sweep.json``."""
    p = sweep_dir / SWEEP_JSON
    name = where or str(p)
    return SweepDoc.from_json(load_json(p, name), name)


def write_sweep(sweep_dir: Path, doc: SweepDoc) -> None:
    """The one writer of ``sweep_dir/sweep.json`` (atomic)."""
    from accelbench.store.rundir import write_json_atomic

    write_json_atomic(sweep_dir / SWEEP_JSON, doc.to_json())
