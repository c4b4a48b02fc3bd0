"""Running the doctor: `run_doctor()` gathers and evaluates; `quick_summary()` is the fast
subset the benchmark runner stores in run.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Required, TypedDict

from accelbench.doctor.checks import evaluate
from accelbench.doctor.gather import gather
from accelbench.doctor.inputs import DoctorInputs
from accelbench.doctor.model import Check, Report, Status


def run_doctor(inputs: DoctorInputs | None = None, quick: bool = False) -> Report:
    inputs = inputs or DoctorInputs()
    t0 = time.perf_counter()
    facts = gather(inputs, quick=quick)
    report = Report(evaluate(facts), inputs.captures() or {"mode": "quick" if quick else "live"})
    report.duration_s = time.perf_counter() - t0
    return report


class CheckBrief(TypedDict):
    id: str
    summary: str
    evidence: list[str]  # the first 10 lines
    remedy: str


class DoctorSummary(TypedDict, total=False):
    """run.json ``doctor`` (docs/RESULTS.md): version 1; ``ok`` None with ``error`` when
    the doctor itself failed."""

    version: Required[int]
    quick: Required[bool]
    ok: Required[bool | None]
    error: str
    counts: dict[str, int]  # pass / warn / fail / n/a / unknown
    duration_s: float
    accelerators: dict[str, dict[str, int]]  # vendor -> where seen -> how many
    failing: list[CheckBrief]
    warning: list[CheckBrief]
    unknown: list[CheckBrief]
    generated_at: str


def quick_summary(sysfs_root: Path | str | None = None) -> DoctorSummary:
    """Fast (sysfs / procfs / version files only, no subprocess) doctor summary for run.json:
    counts of pass / warn / fail and the failing and warning checks with their evidence."""
    inputs = DoctorInputs(
        sysfs_root=Path(sysfs_root) if sysfs_root else None, live=True, scan_kernel_log=False
    )
    try:
        report = run_doctor(inputs, quick=True)
    except Exception as exc:  # noqa: BLE001 - a run must never fail because its doctor did
        return {"version": 1, "quick": True, "ok": None, "error": f"{type(exc).__name__}: {exc}"}
    counts = report.counts()

    def brief(c: Check) -> CheckBrief:
        return {"id": c.id, "summary": c.summary, "evidence": c.evidence[:10], "remedy": c.remedy}

    return {
        "version": 1,
        "quick": True,
        "ok": not report.failed,
        "counts": counts,
        "duration_s": round(report.duration_s, 3),
        "accelerators": (report.get("inventory.accelerators").data.get("counts") or {}),
        "failing": [brief(c) for c in report.checks if c.status == Status.FAIL],
        "warning": [brief(c) for c in report.checks if c.status == Status.WARN],
        "unknown": [brief(c) for c in report.checks if c.status == Status.UNKNOWN],
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
