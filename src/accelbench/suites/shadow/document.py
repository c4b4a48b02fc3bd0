"""The documents of a shadow directory (docs/RESULTS.md, "Shadow directories"):

* ``shadow.json`` (``accelbench.shadow/1``): what was compared and the counters, written
  by :class:`~accelbench.suites.shadow.store.ShadowWriter`, read by :func:`read_meta`;
* ``verdict.json`` (``accelbench.suites.shadow-verdict/2``): the go / no-go verdict with
  every gate as a :class:`Verdict` record, written by ``shadow verdict``
  (suites/shadow/verdict.py), read by :func:`read_verdict`. Version 1 (each gate the
  verdict's own dict: ``statistic``, ``lo``, ``hi``, ``threshold`` ...) is still read,
  each gate read into a :class:`Verdict` (``Verdict.from_json``).

A damaged file is one DocumentError line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from accelbench.documents import Fields, Json, JsonObject, load_json
from accelbench.errors import DocumentError
from accelbench.metrics.summary import ArrivalStamps
from accelbench.metrics.verdict import Status, Verdict, from_word, word

SHADOW_JSON = "shadow.json"
VERDICT = "verdict.json"
SCHEMA = "accelbench.shadow/1"
VERDICT_SCHEMA = "accelbench.suites.shadow-verdict/2"
VERDICT_SCHEMA_V1 = "accelbench.suites.shadow-verdict/1"
SIDES = ("baseline", "candidate")


# -- shadow.json ----------------------------------------------------------------------
@dataclass
class Side:
    url: str | None = None  # redacted (no credentials)
    model: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"url": self.url}
        if self.model is not None:
            out["model"] = self.model
        return out

    @classmethod
    def from_json(cls, f: Fields | None) -> Side:
        return cls() if f is None else cls(f.opt_str("url"), f.opt_str("model"))

    def __str__(self) -> str:
        return " ".join(x for x in (self.url, self.model) if x)


KNOWN = ("schema", "tool", "status", "started_at", "ended_at", "mode", "baseline", "candidate",
         "counters", "listen", "receive")  # fmt: skip


def _arrival(f: Fields) -> ArrivalStamps:
    """One side's ``receive``: how its chunk times were stamped (metrics.summary)."""
    out: ArrivalStamps = {}
    mode = f.opt_str("arrival_stamps")
    if mode is not None:
        if mode not in ("kernel", "loop"):
            raise DocumentError(f"{f.at('arrival_stamps')}: expected kernel or loop, got {mode!r}")
        out["arrival_stamps"] = mode
    for key in ("read_delay_ms_p99", "realtime_drift_ppm", "realtime_step_ms_max"):
        x = f.num(key)
        if x is not None and key != "realtime_drift_ppm" and x < 0:
            raise DocumentError(f"{f.at(key)}: expected a number >= 0, got {x!r}")
        out[key] = x
    return out


@dataclass
class ShadowMeta:
    """shadow.json: the mode (proxy | replay), both sides, the status, the counters, and
    the mode's own settings (sampling, speed, the trace ...) as they were given."""

    mode: str
    baseline: Side
    candidate: Side
    status: str = "running"  # running | completed | interrupted | failed
    started_at: str | None = None
    ended_at: str | None = None
    tool_version: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    listen: str | None = None  # the proxy's address
    settings: JsonObject = field(default_factory=dict)
    # each side's arrival stamps (kernel or loop) and how long its reads waited in the
    # socket (p99): above the chunk gap, its chunk times are not each chunk's own
    receive: dict[str, ArrivalStamps] = field(default_factory=dict)
    schema: str = SCHEMA

    def to_json(self) -> JsonObject:
        out: JsonObject = {"schema": SCHEMA,
                           "tool": {"name": "accelbench", "version": self.tool_version},
                           "status": self.status, "started_at": self.started_at}  # fmt: skip
        if self.ended_at is not None:
            out["ended_at"] = self.ended_at
        out.update({"mode": self.mode, "baseline": self.baseline.to_json(),
                    "candidate": self.candidate.to_json()})  # fmt: skip
        out.update(self.settings)
        if self.listen is not None:
            out["listen"] = self.listen
        out["counters"] = cast(Json, dict(self.counters))
        if self.receive:
            out["receive"] = cast(Json, {k: dict(v) for k, v in self.receive.items()})
        return out

    @classmethod
    def from_json(cls, d: object, where: str = SHADOW_JSON) -> ShadowMeta:
        f = Fields(d, where)
        schema = f.schema(SCHEMA)
        tool = f.opt_obj("tool")
        return cls(
            mode=f.str("mode", "?"),
            baseline=Side.from_json(f.opt_obj("baseline")),
            candidate=Side.from_json(f.opt_obj("candidate")),
            status=f.str("status", "unknown"),
            started_at=f.opt_str("started_at"),
            ended_at=f.opt_str("ended_at"),
            tool_version=None if tool is None else tool.opt_str("version"),
            counters=f.counts("counters"),
            listen=f.opt_str("listen"),
            settings={k: f.json(k) for k in f.doc if k not in KNOWN},
            receive={
                side: _arrival(g)
                for side in SIDES
                if (r := f.opt_obj("receive")) is not None and (g := r.opt_obj(side)) is not None
            },
            schema=schema,
        )


def read_meta(path: Path, where: str | None = None) -> ShadowMeta:
    """The one reader of ``path/shadow.json``."""
    p = path / SHADOW_JSON
    name = where or str(p)
    return ShadowMeta.from_json(load_json(p, name), name)


# -- verdict.json ---------------------------------------------------------------------
class FirstDifference(TypedDict):
    """Where a candidate's greedy output first differs from the baseline's."""

    idx: int
    at_char: int
    baseline: str
    candidate: str


def _first_difference(f: Fields) -> FirstDifference:
    return {"idx": f.int("idx"), "at_char": f.int("at_char"), "baseline": f.str("baseline"),
            "candidate": f.str("candidate")}  # fmt: skip


@dataclass
class GateEntry:
    """One gate: its verdict record (suite ``shadow``; ``Verdict.from_json`` also reads a
    version-1 gate) and, for agreement, the first differing requests."""

    verdict: Verdict
    first_differences: list[FirstDifference] = field(default_factory=list)

    @property
    def status(self) -> Status:
        return self.verdict.status

    def to_json(self) -> JsonObject:
        out = cast(JsonObject, self.verdict.to_json())
        out["first_differences"] = [cast(Json, dict(d)) for d in self.first_differences]
        return out

    @classmethod
    def from_json(cls, d: object, where: str) -> GateEntry:
        v = Verdict.from_json(d, where, suite="shadow")
        f = Fields(d, where)
        return cls(v, [_first_difference(x) for x in f.objects("first_differences", [])])


def _gates(f: Fields, key: str) -> list[GateEntry]:
    return [GateEntry.from_json(g, f"{f.at(key)}[{i}]") for i, g in enumerate(f.list(key, []))]


@dataclass
class VerdictWindow:
    start_s: float
    end_s: float
    requests: int
    status: Status
    gates: list[GateEntry]

    def to_json(self) -> JsonObject:
        return {"start_s": self.start_s, "end_s": self.end_s, "requests": self.requests,
                "verdict": word(self.status, "shadow"),
                "gates": [g.to_json() for g in self.gates]}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> VerdictWindow:
        return cls(f.req_num("start_s"), f.req_num("end_s"), f.int("requests"),
                   _status(f, "verdict"), _gates(f, "gates"))  # fmt: skip


@dataclass
class SideSummary:
    """One side's requests, errors by kind, latency percentiles (ms) and output rate."""

    requests: int
    ok: int
    errors: dict[str, int]
    latency: dict[str, dict[str, float | None]]  # ttft / tpot / e2e / ... -> count, p50 ...
    output_tokens_per_s: float | None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"requests": self.requests, "ok": self.ok,
                           "errors": cast(Json, dict(self.errors))}  # fmt: skip
        out.update({k: cast(Json, dict(v)) for k, v in self.latency.items()})
        out["output_tokens_per_s"] = self.output_tokens_per_s
        return out

    @classmethod
    def from_json(cls, f: Fields) -> SideSummary:
        lat = {k: f.numbers(k) for k, x in f.doc.items() if isinstance(x, dict) and k != "errors"}
        return cls(f.int("requests", 0), f.int("ok", 0), f.counts("errors"), lat,
                   f.num("output_tokens_per_s"))  # fmt: skip


class GaugeStat(TypedDict):
    mean: float
    max: float


class SideResources(TypedDict, total=False):
    """One side's server gauges over its own span (``shadow verdict``'s ``resources``)."""

    samples: int
    note: str  # no sample, or an unreadable telemetry file
    engine: str | None
    srv_requests_running: GaugeStat | None
    srv_requests_waiting: GaugeStat | None
    srv_kv_cache_usage: GaugeStat | None
    generated_tokens: float | None


class Resources(TypedDict, total=False):
    """verdict.json's ``resources``: ``telemetry`` "off" with the ``reason``, or
    "server /metrics" with each side that has a telemetry directory."""

    telemetry: str
    reason: str
    baseline: SideResources
    candidate: SideResources


def _status(f: Fields, key: str) -> Status:
    try:
        return from_word(f.str(key), "shadow")
    except DocumentError:
        raise DocumentError(f"{f.at(key)}: unknown verdict {f.raw(key)!r}") from None


@dataclass
class ShadowVerdictDoc:
    """verdict.json: the overall status (rendered go / no-go / inconclusive), the gates
    overall and per window, each side's summary, the counters and the resources."""

    status: Status
    confidence: float
    paired_requests: int
    gates: list[GateEntry]
    windows: list[VerdictWindow] = field(default_factory=list)
    sides: dict[str, SideSummary] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    shadow_dir: str = ""
    exit_code: int | None = None
    run_status: str | None = None  # the shadow directory's status
    mode: str | None = None
    resources: JsonObject | None = None  # None: older than the resources section
    unreadable_lines: dict[str, int] = field(default_factory=dict)
    # side -> its records with no record of the same idx on the other side (left out of
    # the gates); absent in a verdict.json older than it
    unpaired: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # input left out or a file kept
    schema: str = VERDICT_SCHEMA

    @property
    def word(self) -> str:
        return word(self.status, "shadow")

    def to_json(self) -> JsonObject:
        return {
            "schema": VERDICT_SCHEMA, "shadow_dir": self.shadow_dir, "verdict": self.word,
            "exit_code": self.exit_code, "confidence": self.confidence,
            "paired_requests": self.paired_requests,
            "gates": [g.to_json() for g in self.gates],
            "windows": [w.to_json() for w in self.windows],
            "sides": {k: s.to_json() for k, s in self.sides.items()},
            "counters": cast(Json, dict(self.counters)), "status": self.run_status,
            "mode": self.mode, "resources": self.resources,
            "unreadable_lines": cast(Json, dict(self.unreadable_lines)),
            "unpaired": cast(Json, dict(self.unpaired)), "warnings": list(self.warnings),
        }  # fmt: skip

    @classmethod
    def from_json(cls, d: object, where: str = VERDICT) -> ShadowVerdictDoc:
        f = Fields(d, where)
        schema = f.schema(VERDICT_SCHEMA, (VERDICT_SCHEMA_V1,))
        sides = f.opt_obj("sides")
        res = f.raw("resources")
        return cls(
            status=_status(f, "verdict"),
            confidence=f.num("confidence") or 0.95,
            paired_requests=f.int("paired_requests", 0),
            gates=_gates(f, "gates"),
            windows=[VerdictWindow.from_json(w) for w in f.objects("windows", [])],
            sides={}
            if sides is None
            else {k: SideSummary.from_json(sides.obj(k)) for k in sides.doc},  # fmt: skip
            counters=f.counts("counters"),
            shadow_dir=f.str("shadow_dir", ""),
            exit_code=f.opt_int("exit_code"),
            run_status=f.opt_str("status"),
            mode=f.opt_str("mode"),
            resources=None if res is None else f.json_obj("resources"),
            unreadable_lines=f.counts("unreadable_lines"),
            unpaired=f.counts("unpaired"),
            warnings=f.strs("warnings", []),
            schema=schema,
        )


def read_verdict(path: Path, where: str | None = None) -> ShadowVerdictDoc:
    """The one reader of ``path/verdict.json``."""
    p = path / VERDICT
    name = where or str(p)
    return ShadowVerdictDoc.from_json(load_json(p, name), name)


def write_verdict(path: Path, doc: ShadowVerdictDoc) -> None:
    """The one writer of ``path/verdict.json`` for a typed verdict (atomic)."""
    from accelbench.store.rundir import write_json_atomic

    write_json_atomic(path / VERDICT, doc.to_json())
