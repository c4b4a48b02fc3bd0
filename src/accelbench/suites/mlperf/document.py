"""The documents of an MLPerf run directory (docs/RESULTS.md, "MLPerf runs"):

* ``mlperf.json`` (``accelbench.mlperf/1``): accelbench's result (LoadGen's, made
  INVALID when a sample failed), LoadGen's own, the reasons, the compliance record, the
  settings it ran under and the request counts; written by :func:`write_mlperf`, read by
  :func:`read_mlperf`. A file without ``schema`` (written before it had one) has the
  same shape and is read as version 1. The same object is run.json's ``mlperf`` block.
* LoadGen's ``mlperf_log_detail.txt``, read by :func:`~accelbench.suites.mlperf.logs.read_loadgen`
  into a :class:`~accelbench.suites.mlperf.logs.LoadGenResult`.

A damaged mlperf.json is one DocumentError line naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.documents import Fields, Json, JsonObject, as_json, load_json, to_json_object
from accelbench.errors import DocumentError

MLPERF_JSON = "mlperf.json"
SCHEMA = "accelbench.mlperf/1"
RESULTS = ("VALID", "INVALID")
# the fields typed here; every other one (settings, qsl, user.conf lines, open files,
# the SUT's timings, a stop record ...) is kept as it was recorded, in ``recorded``
TYPED = ("schema", "benchmark", "scenario", "loadgen_scenario", "result", "loadgen_result",
         "reasons", "compliant", "noncompliance", "checks", "figures", "peak_qps", "find_peak",
         "requests")  # fmt: skip


@dataclass
class MlperfDoc:
    benchmark: str | None
    scenario: str | None
    result: str | None  # VALID | INVALID | None (LoadGen gave none)
    compliant: bool
    noncompliance: list[str] = field(default_factory=list)
    loadgen_result: str | None = None
    loadgen_scenario: str | None = None
    reasons: list[str] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)
    figures: dict[str, float | None] = field(default_factory=dict)
    peak_qps: float | None = None
    recorded: JsonObject = field(default_factory=dict)
    find_peak: bool = False  # a Server peak search
    # issued, completed, ok, failed, interrupted, not_ok ... (absent: none recorded)
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``VALID`` / ``INVALID`` and, when so, ``non-compliant``."""
        return label(self.result, self.compliant)

    def to_json(self) -> JsonObject:
        out: JsonObject = {"schema": SCHEMA, "benchmark": self.benchmark,
                           "scenario": self.scenario, "loadgen_scenario": self.loadgen_scenario}  # fmt: skip
        out.update({k: v for k, v in self.recorded.items() if k not in TYPED})
        out.update({
            "result": self.result, "loadgen_result": self.loadgen_result,
            "reasons": list[Json](self.reasons), "checks": dict[str, Json](self.checks),
            "figures": dict[str, Json](self.figures), "peak_qps": self.peak_qps,
            "compliant": self.compliant, "noncompliance": list[Json](self.noncompliance),
            "find_peak": self.find_peak,
        })  # fmt: skip
        if self.requests:
            out["requests"] = dict[str, Json](self.requests)
        return out

    @classmethod
    def from_json(cls, d: object, where: str = MLPERF_JSON) -> MlperfDoc:
        f = Fields(d, where)
        if "schema" in f.doc:
            f.schema(SCHEMA)
        checks = f.opt_obj("checks")
        return cls(
            benchmark=f.opt_str("benchmark"),
            scenario=f.opt_str("scenario"),
            result=_result(f, "result"),
            compliant=f.bool("compliant", False),
            noncompliance=f.strs("noncompliance", []),
            loadgen_result=_result(f, "loadgen_result"),
            loadgen_scenario=f.opt_str("loadgen_scenario"),
            reasons=f.strs("reasons", []),
            checks={} if checks is None else {k: checks.bool(k) for k in checks.doc},
            figures=f.numbers("figures"),
            peak_qps=f.num("peak_qps"),
            recorded={k: as_json(x, f.at(k)) for k, x in f.doc.items() if k not in TYPED},
            find_peak=f.bool("find_peak", False),
            requests=f.counts("requests"),
        )

    @classmethod
    def of(cls, d: Mapping[str, object]) -> MlperfDoc:
        """From what the run built (a mapping: numpy numbers, paths), checked as the
        reader checks it."""
        return cls.from_json(to_json_object(d, "mlperf.json"), "mlperf.json (as built)")


def _result(f: Fields, key: str) -> str | None:
    r = f.opt_str(key)
    if r is not None and r not in RESULTS:
        raise DocumentError(f"{f.at(key)}: expected VALID, INVALID or null, got {r!r}")
    return r


def label(result: str | None, compliant: bool) -> str:
    parts = [result or "no LoadGen result"]
    if not compliant:
        parts.append("non-compliant")
    return ", ".join(parts)


def run_label(block: object) -> str | None:
    """The label of run.json's ``mlperf`` block (None for another run; a damaged block
    says so)."""
    if block is None:
        return None
    try:
        return MlperfDoc.from_json(block, "run.json: mlperf").label
    except DocumentError as exc:
        return f"damaged ({str(exc)[:80]})"


def write_mlperf(run_dir: Path, doc: MlperfDoc | Mapping[str, object]) -> MlperfDoc:
    """The one writer of ``run_dir/mlperf.json`` (atomic); returns what it wrote."""
    from accelbench.store.rundir import write_json_atomic

    typed = doc if isinstance(doc, MlperfDoc) else MlperfDoc.of(doc)
    write_json_atomic(run_dir / MLPERF_JSON, typed.to_json())
    return typed


def read_mlperf(run_dir: Path, where: str | None = None) -> MlperfDoc:
    """The one reader of ``run_dir/mlperf.json``."""
    p = run_dir / MLPERF_JSON
    name = where or str(p)
    return MlperfDoc.from_json(load_json(p, name), name)
