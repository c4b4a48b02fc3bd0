"""One verdict vocabulary and one verdict record for every suite (docs/RESULTS.md).

Every pass / fail accelbench prints is a :class:`Verdict`: the statistic, its estimate and
interval, the thresholds it was held to, the rule, and the evidence. The status is one of
:class:`Status`; each suite only *renders* it in its own words (go / no-go for shadow,
supported / refuted for claims, VALID / INVALID for MLPerf), through :func:`word`.

The record is a plain value: :meth:`Verdict.to_json` and :meth:`Verdict.from_json` round
trip it through a document, and a damaged entry is one :class:`DocumentError` line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from accelbench.errors import DocumentError


class Status(StrEnum):
    """The one status vocabulary. ``inconclusive``: the interval straddles the threshold
    or there is too little evidence (never a pass). ``unknown``: the data could not be
    judged at all (missing, cut short, not understood). ``n/a``: does not apply here."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    UNKNOWN = "unknown"
    NA = "n/a"


# Worst first: the overall status of several verdicts is the first of these present.
SEVERITY: tuple[Status, ...] = (
    Status.FAIL,
    Status.UNKNOWN,
    Status.INCONCLUSIVE,
    Status.WARN,
    Status.PASS,
    Status.NA,
)

# Per-suite display words; a status a suite does not name is shown as its own value.
WORDS: dict[str, dict[Status, str]] = {
    "shadow": {Status.PASS: "go", Status.FAIL: "no-go"},
    "claim": {Status.PASS: "supported", Status.FAIL: "refuted"},
    "mlperf": {Status.PASS: "VALID", Status.FAIL: "INVALID"},
}


def word(status: Status, suite: str | None = None) -> str:
    """How ``suite`` says ``status`` (``go``, ``refuted``, ``VALID``, or the value)."""
    return WORDS.get(suite or "", {}).get(status, str(status))


def from_word(text: str, suite: str | None = None) -> Status:
    """The status a display word (or a plain status value) stands for."""
    for status, w in WORDS.get(suite or "", {}).items():
        if text == w:
            return status
    try:
        return Status(text)
    except ValueError:
        raise DocumentError(f"unknown verdict {text!r}") from None


def worst(statuses: Iterable[Status]) -> Status:
    """The overall status of several: the most severe present (``n/a`` when none)."""
    present = set(statuses)
    for s in SEVERITY:
        if s in present:
            return s
    return Status.NA


def _num(x: object, what: str) -> float | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise DocumentError(f"{what}: expected a number or null, got {x!r}")
    v = float(x)
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class Interval:
    """A confidence interval: ``[low, high]`` at ``confidence``, by ``method``."""

    low: float | None
    high: float | None
    confidence: float = 0.95
    method: str = ""

    def to_json(self) -> dict[str, float | str | None]:
        return {
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "method": self.method,
        }

    @classmethod
    def from_json(cls, d: object, where: str = "interval") -> Interval:
        if not isinstance(d, Mapping):
            raise DocumentError(f"{where}: expected an object, got {type(d).__name__}")
        conf = _num(d.get("confidence", 0.95), f"{where}.confidence")
        return cls(
            _num(d.get("low"), f"{where}.low"),
            _num(d.get("high"), f"{where}.high"),
            0.95 if conf is None else conf,
            str(d.get("method", "")),
        )


Evidence = dict[str, float | int | str | bool | None]


@dataclass
class Verdict:
    """One verdict with its evidence. ``thresholds`` names each threshold the statistic
    was held to (``warn``, ``fail``, ``claim``, ``refute_at`` ...), in ``unit``.
    ``kind`` is what was checked (``leak``, ``drift``, ``latency``, ``claim`` ...);
    ``note`` says in words why the verdict is what it is where the rule alone does not
    (too few samples, the interval against the threshold)."""

    name: str
    status: Status
    statistic: str
    unit: str = ""
    estimate: float | None = None
    interval: Interval | None = None
    thresholds: dict[str, float | None] = field(default_factory=dict)
    rule: str = ""
    evidence: Evidence = field(default_factory=dict)
    suite: str | None = None  # whose words render the status
    kind: str = ""
    note: str = ""

    @property
    def word(self) -> str:
        return word(self.status, self.suite)

    @property
    def low(self) -> float | None:
        """The interval's low end (None without one)."""
        return self.interval.low if self.interval else None

    @property
    def high(self) -> float | None:
        """The interval's high end (None without one)."""
        return self.interval.high if self.interval else None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": str(self.status),
            "word": self.word,
            "statistic": self.statistic,
            "unit": self.unit,
            "estimate": self.estimate,
            "interval": self.interval.to_json() if self.interval else None,
            "thresholds": dict(self.thresholds),
            "rule": self.rule,
            "evidence": dict(self.evidence),
            "suite": self.suite,
            "kind": self.kind,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, d: object, where: str = "verdict", suite: str | None = None) -> Verdict:
        """The record :meth:`to_json` wrote; also the verdict entries files held before
        this record (stress.json/1's, compare's claims, verdict.json/1's gates), read into
        it. ``suite``: whose words a legacy entry used."""
        if not isinstance(d, Mapping):
            raise DocumentError(f"{where}: expected an object, got {type(d).__name__}")
        if "word" not in d and ("verdict" in d or "gate" in d):
            return _from_legacy(d, where, suite)
        try:
            status = Status(str(d.get("status")))
        except ValueError:
            raise DocumentError(f"{where}.status: unknown status {d.get('status')!r}") from None
        th = d.get("thresholds") or {}
        ev = d.get("evidence") or {}
        if not isinstance(th, Mapping) or not isinstance(ev, Mapping):
            raise DocumentError(f"{where}: thresholds and evidence must be objects")
        iv = d.get("interval")
        suite = d.get("suite")
        return cls(
            name=str(d.get("name", "")),
            status=status,
            statistic=str(d.get("statistic", "")),
            unit=str(d.get("unit", "")),
            estimate=_num(d.get("estimate"), f"{where}.estimate"),
            interval=None if iv is None else Interval.from_json(iv, f"{where}.interval"),
            thresholds={str(k): _num(v, f"{where}.thresholds.{k}") for k, v in th.items()},
            rule=str(d.get("rule", "")),
            evidence={
                str(k): v
                for k, v in ev.items()
                if v is None or isinstance(v, bool | int | float | str)
            },
            suite=None if suite is None else str(suite),
            kind=str(d.get("kind") or ""),
            note=str(d.get("note") or ""),
        )


def _from_legacy(d: Mapping[str, object], where: str, suite: str | None) -> Verdict:
    """A verdict entry in a shape older than :class:`Verdict`: stress.json/1 (``verdict``,
    ``ci_low``, ``ci_high``, ``warn``, ``fail``), a compare claim (``claim``, ``verdict``
    in words, ``reason``, ``ci95``, ``threshold``, ``refute_at``) or a verdict.json/1 gate
    (``gate``, ``status``, ``statistic`` a number, ``lo``, ``hi``, ``threshold``)."""
    scalars: Evidence = {
        str(k): v for k, v in d.items() if v is None or isinstance(v, bool | int | float | str)
    }
    if "gate" in d:  # verdict.json/1
        status = from_word(str(d.get("status")), None)
        lo, hi = d.get("lo"), d.get("hi")
        th = {"bound": _num(d.get("threshold"), f"{where}.threshold")}
        ev = {k: scalars.get(k) for k in ("n_baseline", "n_candidate", "baseline", "candidate")}
        return Verdict(
            name=str(d.get("gate")), status=status, statistic=str(d.get("gate")),
            unit=str(d.get("unit") or ""), estimate=_num(d.get("statistic"), f"{where}.statistic"),
            interval=Interval(_num(lo, f"{where}.lo"), _num(hi, f"{where}.hi")), thresholds=th,
            evidence=ev, suite="shadow", kind="gate", note=str(d.get("note") or ""),
        )  # fmt: skip
    if "claim" in d:  # a compare claim
        ci = d.get("ci95")
        lo, hi = ci if isinstance(ci, list | tuple) and len(ci) == 2 else (None, None)
        return Verdict(
            name=str(d.get("claim")), status=from_word(str(d.get("verdict")), "claim"),
            statistic="ratio B / A", unit="x", estimate=_num(d.get("ratio"), f"{where}.ratio"),
            interval=Interval(_num(lo, f"{where}.ci95"), _num(hi, f"{where}.ci95")),
            thresholds={"claim": _num(d.get("threshold"), f"{where}.threshold"),
                        "refute_at": _num(d.get("refute_at"), f"{where}.refute_at")},
            suite="claim", kind="claim", note=str(d.get("reason") or ""),
        )  # fmt: skip
    # stress.json/1
    lo, hi = d.get("ci_low"), d.get("ci_high")
    conf = _num(d.get("confidence", 0.95), f"{where}.confidence")
    raw = d.get("evidence") or {}
    if not isinstance(raw, Mapping):
        raise DocumentError(f"{where}.evidence: expected an object")
    return Verdict(
        name=str(d.get("name", "")), status=from_word(str(d.get("verdict")), suite),
        statistic=str(d.get("statistic", "")), unit=str(d.get("unit", "")),
        estimate=_num(d.get("estimate"), f"{where}.estimate"),
        interval=None if lo is None and hi is None else Interval(
            _num(lo, f"{where}.ci_low"), _num(hi, f"{where}.ci_high"),
            0.95 if conf is None else conf),
        thresholds={"warn": _num(d.get("warn"), f"{where}.warn"),
                    "fail": _num(d.get("fail"), f"{where}.fail")},
        rule=str(d.get("rule", "")),
        evidence={str(k): v for k, v in raw.items()
                  if v is None or isinstance(v, bool | int | float | str)},
        suite=suite, kind=str(d.get("kind") or ""),
    )  # fmt: skip
