"""``stress.json``: the document of a stress directory, its one writer and its one
validating reader (docs/RESULTS.md, "stress.json").

Version 2 (``accelbench.stress/2``) stores the verdicts as :class:`Verdict` records
(``metrics/verdict.py``); version 1 stored the stress suite's own verdict dicts
(``verdict``, ``ci_low``, ``ci_high``, ``warn``, ``fail``, ``kind``) and is still read,
each verdict read into a :class:`Verdict` (``Verdict.from_json``). A damaged file is one
DocumentError line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar, cast

from accelbench.documents import Fields, Json, JsonObject, load_json, open_file
from accelbench.errors import DocumentError
from accelbench.metrics.verdict import Status, Verdict, worst

STRESS_JSON = "stress.json"
SCHEMA = "accelbench.stress/2"
SCHEMA_V1 = "accelbench.stress/1"
Suite = Literal["soak", "flood", "mixed", "consistency"]
SUITES: tuple[Suite, ...] = ("soak", "flood", "mixed", "consistency")
WINDOWS = "windows.jsonl"
MEMORY = "memory.jsonl"
DIVERGENT = "divergent.jsonl"
R = TypeVar("R")


# -- verdicts -------------------------------------------------------------------------
# Each verdict is a Verdict record (metrics/verdict.py); Verdict.from_json also reads a
# stress.json/1 entry (``verdict``, ``ci_low``, ``ci_high``, ``warn``, ``fail``, ``kind``).


def overall(verdicts: Iterable[Verdict]) -> Status:
    """The worst status of the verdicts (``n/a`` when none decides)."""
    return worst(v.status for v in verdicts)


# -- the suites' parts ----------------------------------------------------------------
@dataclass
class Estimate:
    """An estimate with its 95 % interval (a % change, a jitter, a fit coefficient);
    ``note`` says why there is none; ``windows``: how many the jitter rests on."""

    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None
    windows: int | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"estimate": self.estimate, "ci_low": self.ci_low,
                           "ci_high": self.ci_high}  # fmt: skip
        if self.windows is not None:
            out["windows"] = self.windows
        if self.note is not None:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, d: object, where: str) -> Estimate:
        f = Fields(d, where)
        return cls(f.num("estimate"), f.num("ci_low"), f.num("ci_high"), f.opt_str("note"),
                   f.opt_int("windows"))  # fmt: skip

    @classmethod
    def of(cls, d: object) -> Estimate:
        """From what the statistics return (change_pct, jitter_pct): a mapping."""
        return cls.from_json(d, "estimate")


@dataclass
class SoakPart:
    segments: int
    windows: int
    soak_s: float
    requests: int
    disk_bytes: int
    disk_bytes_per_request: float | None

    def to_json(self) -> JsonObject:
        return {"segments": self.segments, "windows": self.windows, "soak_s": self.soak_s,
                "requests": self.requests, "disk_bytes": self.disk_bytes,
                "disk_bytes_per_request": self.disk_bytes_per_request}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> SoakPart:
        return cls(f.int("segments", 0), f.int("windows", 0), f.num("soak_s") or 0.0,
                   f.int("requests", 0), f.int("disk_bytes", 0),
                   f.num("disk_bytes_per_request"))  # fmt: skip


@dataclass
class FloodStep:
    input_tokens: int
    concurrency: int
    requests: int
    ok: int
    errors: dict[str, int]
    ttft_ms: dict[str, float | None] | None  # p50, p90, max
    prefill_tok_per_s_p50: float | None
    run: str

    def to_json(self) -> JsonObject:
        return {"input_tokens": self.input_tokens, "concurrency": self.concurrency,
                "requests": self.requests, "ok": self.ok, "errors": dict(self.errors),
                "ttft_ms": None if self.ttft_ms is None else dict(self.ttft_ms),
                "prefill_tok_per_s_p50": self.prefill_tok_per_s_p50, "run": self.run}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> FloodStep:
        return cls(f.int("input_tokens"), f.int("concurrency"), f.int("requests"), f.int("ok"),
                   f.counts("errors"), f.numbers("ttft_ms") if f.has("ttft_ms") else None,
                   f.num("prefill_tok_per_s_p50"), f.str("run", ""))  # fmt: skip


@dataclass
class QuadFit:
    """TTFT = a + b L + c L^2: each coefficient with its interval, or why there is none."""

    n: int
    coef: dict[str, Estimate] = field(default_factory=dict)  # a, b, c
    r2: float | None = None
    error: str | None = None

    def to_json(self) -> JsonObject:
        if self.error is not None:
            return {"n": self.n, "error": self.error}
        out: JsonObject = {"n": self.n, "model": "y = a + b*x + c*x^2"}
        out.update({k: e.to_json() for k, e in self.coef.items()})
        out["r2"] = self.r2
        return out

    @classmethod
    def from_json(cls, f: Fields) -> QuadFit:
        if f.has("error"):
            return cls(f.int("n", 0), error=f.str("error"))
        return cls(f.int("n", 0), {k: Estimate.from_json(f.raw(k), f.at(k))
                                   for k in "abc" if f.has(k)}, f.num("r2"))  # fmt: skip


@dataclass
class FloodPart:
    steps: list[FloodStep]
    fit: QuadFit | None

    @classmethod
    def from_json(cls, f: Fields) -> FloodPart:
        fit = f.opt_obj("ttft_fit_ms")
        return cls([FloodStep.from_json(s) for s in f.objects("steps", [])],
                   None if fit is None else QuadFit.from_json(fit))  # fmt: skip


# The % changes and jitters of an endpoint, by their names in stress.json.
CHANGES = tuple(f"{m}_p{q}_change_pct" for m in ("ttft", "tpot") for q in (50, 99))
JITTERS = tuple(f"{m}_jitter_{p}_pct" for m in ("ttft", "tpot") for p in ("solo", "mixed"))
P50S = tuple(f"{m}_{p}_p50_ms" for m in ("ttft", "tpot") for p in ("solo", "mixed"))


@dataclass
class MixedEndpoint:
    endpoint: int
    url: str  # redacted
    solo_requests: int
    mixed_requests: int
    estimates: dict[str, Estimate]  # CHANGES and JITTERS
    p50_ms: dict[str, float | None]  # P50S

    def to_json(self) -> JsonObject:
        out: JsonObject = {"endpoint": self.endpoint, "url": self.url,
                           "solo_requests": self.solo_requests,
                           "mixed_requests": self.mixed_requests}  # fmt: skip
        out.update({k: e.to_json() for k, e in self.estimates.items()})
        out.update(self.p50_ms)
        return out

    @classmethod
    def from_json(cls, f: Fields) -> MixedEndpoint:
        return cls(f.int("endpoint"), f.str("url", ""), f.int("solo_requests", 0),
                   f.int("mixed_requests", 0),
                   {k: Estimate.from_json(f.raw(k), f.at(k)) for k in CHANGES + JITTERS
                    if f.has(k)},
                   {k: f.num(k) for k in P50S if k in f.doc})  # fmt: skip

    def estimate(self, key: str) -> Estimate:
        return self.estimates.get(key) or Estimate(note="not recorded")


@dataclass
class MixedPart:
    endpoints: list[MixedEndpoint]
    matrix: list[list[Estimate | None]] | None
    matrix_note: str

    @classmethod
    def from_json(cls, f: Fields) -> MixedPart:
        matrix = None
        if f.has("interference_matrix"):
            matrix = []
            for i, row in enumerate(f.list("interference_matrix")):
                where = f"{f.at('interference_matrix')}[{i}]"
                if not isinstance(row, list):
                    raise DocumentError(f"{where}: expected a list")
                matrix.append([None if c is None else Estimate.from_json(c, f"{where}[{j}]")
                               for j, c in enumerate(row)])  # fmt: skip
        return cls([MixedEndpoint.from_json(e) for e in f.objects("endpoints", [])], matrix,
                   f.str("matrix_note", ""))  # fmt: skip


@dataclass
class Comparison:
    """One consistency run against the baseline."""

    run: str
    compared: int
    identical: int
    divergent: int
    identical_fraction: float | None
    missing: int
    first_diff_min: int | None
    first_diff_median: int | None
    similarity_mean: float | None
    ecc: dict[str, int] | None  # ECC counter growth over the run, None without them

    def to_json(self) -> JsonObject:
        return {"run": self.run, "compared": self.compared, "identical": self.identical,
                "divergent": self.divergent, "identical_fraction": self.identical_fraction,
                "missing": self.missing, "first_diff_min": self.first_diff_min,
                "first_diff_median": self.first_diff_median,
                "similarity_mean": self.similarity_mean,
                "ecc": None if self.ecc is None else dict(self.ecc)}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> Comparison:
        return cls(f.str("run"), f.int("compared"), f.int("identical", 0), f.int("divergent"),
                   f.num("identical_fraction"), f.int("missing", 0), f.opt_int("first_diff_min"),
                   f.opt_int("first_diff_median"), f.num("similarity_mean"),
                   f.counts("ecc") if f.has("ecc") else None)  # fmt: skip


@dataclass
class ConsistencyPart:
    baseline: str | None
    unit: str  # token | char
    comparisons: list[Comparison]

    @classmethod
    def from_json(cls, f: Fields) -> ConsistencyPart:
        return cls(f.opt_str("baseline"), f.str("unit", "token"),
                   [Comparison.from_json(c) for c in f.objects("comparisons", [])])  # fmt: skip


Part = SoakPart | FloodPart | MixedPart | ConsistencyPart


# -- the document ---------------------------------------------------------------------
@dataclass
class StressDoc:
    """stress.json: which suite, how it ended, its configuration (the suite config's
    own ``to_json``, checked by its ``from_json``), its runs, verdicts and its part."""

    suite: Suite
    status: str  # running | completed | interrupted | failed
    config: JsonObject
    runs: list[str]
    verdicts: list[Verdict]
    part: Part
    memory_totals: dict[str, float | None] = field(default_factory=dict)
    schema: str = SCHEMA
    # why the suite is bad (what its command exits 1 for): the error that stopped it, or
    # the failed verdicts' names (``suite_reason``); None: neither. Older files: None
    reason: str | None = None

    @property
    def overall(self) -> Status:
        return overall(self.verdicts)

    @property
    def soak(self) -> SoakPart | None:
        return self.part if isinstance(self.part, SoakPart) else None

    @property
    def flood(self) -> FloodPart | None:
        return self.part if isinstance(self.part, FloodPart) else None

    @property
    def mixed(self) -> MixedPart | None:
        return self.part if isinstance(self.part, MixedPart) else None

    @property
    def consistency(self) -> ConsistencyPart | None:
        return self.part if isinstance(self.part, ConsistencyPart) else None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"schema": SCHEMA, "suite": self.suite, "status": self.status,
                           "reason": self.reason, "config": self.config}  # fmt: skip
        p = self.part
        if isinstance(p, SoakPart):
            out.update(p.to_json())
        elif isinstance(p, FloodPart):
            out["steps"] = [s.to_json() for s in p.steps]
            out["ttft_fit_ms"] = None if p.fit is None else p.fit.to_json()
        elif isinstance(p, MixedPart):
            out["endpoints"] = [e.to_json() for e in p.endpoints]
            out["interference_matrix"] = (
                None
                if p.matrix is None
                else [[None if c is None else c.to_json() for c in row] for row in p.matrix]
            )
            out["matrix_note"] = p.matrix_note
        else:
            out["baseline"] = p.baseline
            out["unit"] = p.unit
            out["comparisons"] = [c.to_json() for c in p.comparisons]
        out["runs"] = list(self.runs)
        if self.memory_totals or self.suite in ("soak", "flood"):
            out["memory_totals"] = dict(self.memory_totals)
        out["verdicts"] = [cast(Json, v.to_json()) for v in self.verdicts]
        return out

    @classmethod
    def from_json(cls, d: object, where: str = STRESS_JSON) -> StressDoc:
        f = Fields(d, where)
        schema = f.schema(SCHEMA, (SCHEMA_V1,))
        suite = f.str("suite")
        if suite not in SUITES:
            raise DocumentError(f"{f.at('suite')}: unknown suite {suite!r}")
        parts: dict[str, Callable[[Fields], Part]] = {
            "soak": SoakPart.from_json, "flood": FloodPart.from_json,
            "mixed": MixedPart.from_json, "consistency": ConsistencyPart.from_json,
        }  # fmt: skip
        verdicts = [Verdict.from_json(v, f"{f.at('verdicts')}[{i}]")
                    for i, v in enumerate(f.list("verdicts", []))]  # fmt: skip
        return cls(
            suite=cast(Suite, suite),
            status=f.str("status"),
            config=f.json_obj("config"),
            runs=f.strs("runs", []),
            verdicts=verdicts,
            part=parts[suite](f),
            memory_totals=f.numbers("memory_totals"),
            schema=schema,
            reason=f.opt_str("reason"),
        )


def suite_reason(status: str, stopped: str | None, verdicts: Iterable[Verdict]) -> str | None:
    """stress.json's ``reason``: why a suite is bad. One that did not complete: the error
    that stopped it (``stopped``; a stop signal says so); one that did: the names of its
    failed verdicts; None where neither (``running``: not decided yet)."""
    if status == "running":
        return None
    if status != "completed":
        return stopped or ("stopped by a signal" if status == "interrupted" else status)
    failed = [v.name for v in verdicts if v.status == Status.FAIL]
    return f"failed verdicts: {', '.join(failed)}" if failed else None


def write_stress(path: Path, doc: StressDoc) -> None:
    """The one writer of ``path/stress.json`` (atomic)."""
    from accelbench.store.rundir import write_json_atomic

    write_json_atomic(path / STRESS_JSON, doc.to_json())


def read_stress(path: Path, where: str | None = None) -> StressDoc:
    """The one reader of ``path/stress.json``; a damaged file is one DocumentError line
    naming the file (``where``, default its path) and the field."""
    p = path / STRESS_JSON
    name = where or str(p)
    return StressDoc.from_json(load_json(p, name), name)


def stress_label(path: Path) -> tuple[str, str]:
    """(suite, verdict) of a stress directory for the runs store: ``stress soak`` and
    the worst verdict (with the status when it did not complete); a damaged stress.json
    is ``stress ?`` and why."""
    try:
        doc = read_stress(path, STRESS_JSON)
    except DocumentError as exc:
        return ("stress ?", str(exc)[:160])
    w = str(doc.overall)
    return (f"stress {doc.suite}", w if doc.status == "completed" else f"{w} ({doc.status})")


# -- the JSON-lines files beside stress.json ------------------------------------------
def read_rows(path: Path, parse: Callable[[Fields], R]) -> tuple[list[R], list[int]]:
    """The rows of one of a stress directory's JSON-lines files (windows.jsonl,
    memory.jsonl, divergent.jsonl), each parsed into its type, and the 1-based numbers
    of the lines that were not (torn, damaged, of the wrong shape). A missing file has
    no rows; one that is not a regular file (a FIFO: never waited on) or cannot be read
    is one DocumentError line naming it. Read line by line (a day-long soak's memory.jsonl is never held whole)."""
    import orjson

    out: list[R] = []
    bad: list[int] = []
    try:
        f = open_file(path)  # a FIFO is refused, never waited on
    except FileNotFoundError:
        return out, bad
    except OSError as exc:  # a directory, a FIFO, a link loop: one line naming the file
        why = exc.strerror if exc.errno == 0 else f"cannot be read ({exc.strerror or exc})"
        raise DocumentError(f"{path.name} {why}") from None
    with f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(parse(Fields(orjson.loads(line), f"{path.name}: line {no}")))
            except (orjson.JSONDecodeError, DocumentError):
                bad.append(no)
    return out, bad


@dataclass
class WindowStats:
    """Throughput, latency percentiles and error rate of the records in one window."""

    requests: int
    ok: int
    error_rate: float | None
    errors: dict[str, int]
    req_per_s: float | None
    output_tok_per_s: float | None
    ttft_ms: dict[str, float | None]  # p50, p90, p99
    tpot_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]  # p50, p99

    def to_json(self) -> JsonObject:
        return {"requests": self.requests, "ok": self.ok, "error_rate": self.error_rate,
                "errors": dict(self.errors), "req_per_s": self.req_per_s,
                "output_tok_per_s": self.output_tok_per_s, "ttft_ms": dict(self.ttft_ms),
                "tpot_ms": dict(self.tpot_ms), "e2e_ms": dict(self.e2e_ms)}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> WindowStats:
        return cls(f.int("requests"), f.int("ok"), f.num("error_rate"), f.counts("errors"),
                   f.num("req_per_s"), f.num("output_tok_per_s"), f.numbers("ttft_ms"),
                   f.numbers("tpot_ms"), f.numbers("e2e_ms"))  # fmt: skip


@dataclass
class SoakWindow:
    """One row of windows.jsonl: a closed soak window (soak seconds)."""

    window: int
    t_start_s: float
    t_s: float  # the window's middle: where the drift fits place it
    t_end_s: float
    span_s: float
    stats: WindowStats
    device: dict[str, Json] = field(default_factory=dict)  # the probe's summary

    def to_json(self) -> JsonObject:
        return {"window": self.window, "t_start_s": self.t_start_s, "t_s": self.t_s,
                "t_end_s": self.t_end_s, "span_s": self.span_s, **self.stats.to_json(),
                "device": dict(self.device)}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> SoakWindow:
        return cls(f.int("window"), f.req_num("t_start_s"), f.req_num("t_s"),
                   f.req_num("t_end_s"), f.req_num("span_s"), WindowStats.from_json(f),
                   f.json_obj("device"))  # fmt: skip


# One row of memory.jsonl: ``t_s`` and every series the probe sampled (bytes, C, Hz, W;
# None: not measured this time; a device's throttle reasons as text).
MemorySample = dict[str, float | str | None]


def memory_sample(f: Fields) -> MemorySample:
    """One row of memory.jsonl (``t_s`` a number; every value a number, text or null)."""
    out: MemorySample = {"t_s": f.req_num("t_s")}
    for k, x in f.doc.items():
        out[k] = x if isinstance(x, str) else f.num(k)
    return out


def memory_series(samples: list[MemorySample]) -> dict[str, tuple[list[float], list[float]]]:
    """{series: (t_s, bytes)} of every memory series in the samples (``*rss_bytes``,
    ``*mem_used_bytes``, ``metric:*``)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for s in samples:
        t = s.get("t_s")
        if not isinstance(t, int | float):
            continue
        for k, v in s.items():
            if k == "t_s" or isinstance(v, str) or v is None:
                continue
            if k.endswith("rss_bytes") or k.endswith("mem_used_bytes") or k.startswith("metric:"):
                ts, ys = out.setdefault(k, ([], []))
                ts.append(float(t))
                ys.append(float(v))
    return out


@dataclass
class Divergence:
    """One row of divergent.jsonl: a prompt whose output differs from the baseline's."""

    run: str
    idx: int
    first_diff: int | None
    similarity: float | None
    baseline: str
    output: str

    def to_json(self) -> JsonObject:
        return {"run": self.run, "idx": self.idx, "identical": False,
                "first_diff": self.first_diff, "similarity": self.similarity,
                "baseline": self.baseline, "output": self.output}  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> Divergence:
        return cls(f.str("run"), f.int("idx"), f.opt_int("first_diff"), f.num("similarity"),
                   f.str("baseline", ""), f.str("output", ""))  # fmt: skip
