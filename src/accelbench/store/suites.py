"""Which suite a run directory belongs to, for the runs store: a stress suite's step
(``<stress dir>/runs/<step>/``, beside ``stress.json``) or an MLPerf run (its run.json
carries the ``mlperf`` block). Never raises: a damaged suite file reads as unknown."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

STRESS_JSON = "stress.json"
STRESS_SCHEMA = "accelbench.stress/2"  # /2: verdicts are metrics.verdict.Verdict records
STRESS_SCHEMAS = ("accelbench.stress/1", STRESS_SCHEMA)  # both read


def worst_verdict(verdicts: Any) -> str | None:
    """The worst status of a stress.json's verdicts (fail > warn > pass; damaged entries
    and ``n/a`` decide nothing), else None."""
    from accelbench.errors import DocumentError
    from accelbench.metrics.verdict import Status, Verdict, worst

    seen = []
    for v in verdicts if isinstance(verdicts, list) else []:
        try:
            seen.append(Verdict.from_json(v).status)
        except DocumentError:
            continue
    w = worst(s for s in seen if s in (Status.FAIL, Status.WARN, Status.PASS))
    return None if w == Status.NA else str(w)


@lru_cache(maxsize=256)
def _stress_label(path: str, mtime_ns: int) -> tuple[str, str] | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ("stress ?", "stress.json unreadable")
    if not isinstance(doc, dict) or doc.get("schema") not in STRESS_SCHEMAS:
        return ("stress ?", "stress.json is not a stress file")
    worst = worst_verdict(doc.get("verdicts")) or "n/a"
    status = doc.get("status")
    return (
        f"stress {doc.get('suite')}",
        worst if status == "completed" else f"{worst} ({status})",
    )


def mlperf_label(mlperf: Any) -> str | None:
    """``VALID`` / ``INVALID`` and, when so, ``non-compliant``, from an mlperf block."""
    if not isinstance(mlperf, dict):
        return None
    parts = [str(mlperf.get("result") or "no LoadGen result")]
    if mlperf.get("compliant") is not True:
        parts.append("non-compliant")
    return ", ".join(parts)


def suite_of(run_dir: Path, run: dict[str, Any]) -> tuple[str | None, str | None]:
    """(suite, verdict) of a run directory, (None, None) for a plain run."""
    ml = run.get("mlperf")
    if isinstance(ml, dict):
        return f"mlperf {ml.get('scenario') or '?'}", mlperf_label(ml)
    if run_dir.parent.name == "runs":
        sj = run_dir.parent.parent / STRESS_JSON
        try:
            st = sj.stat()
        except OSError:
            return None, None
        got = _stress_label(str(sj), st.st_mtime_ns)
        if got:
            return got
    return None, None
