"""Reading LoadGen's own logs: the result (VALID / INVALID and why) and its figures.

``mlperf_log_detail.txt`` holds one ``:::MLLOG {json}`` event per line (keys such as
``result_validity``, ``result_min_duration_met``, ``early_stopping_ttft_result``,
``result_first_token_99.00_percentile_latency_ns``); ``mlperf_log_summary.txt`` is the
human-readable page. The structured events are the source; the summary is only shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from accelbench.metrics.verdict import WORDS

MLPERF_WORDS = tuple(WORDS["mlperf"].values())  # VALID, INVALID: LoadGen's pass and fail

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
_MLLOG = ":::MLLOG "
_PEAK = re.compile(r"Found peak performance field: ([0-9.eE+-]+)")

# The checks LoadGen makes, as the summary names them.
CHECKS = (
    ("result_perf_constraints_met", "performance constraints (latency limits)"),
    ("result_min_duration_met", "min duration"),
    ("result_min_queries_met", "min queries"),
    ("early_stopping_met", "early stopping"),
)


def read_detail(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(last value of every key, every event in order). Lines that are not MLLOG
    events, or whose JSON is torn, are skipped."""
    last: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return last, events
    for line in text.splitlines():
        if not line.startswith(_MLLOG):
            continue
        try:
            ev = json.loads(line[len(_MLLOG) :])
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("key"), str):
            events.append(ev)
            last[ev["key"]] = ev.get("value")
    return last, events


def _ms(ns: Any) -> float | None:
    return float(ns) / 1e6 if isinstance(ns, int | float) else None


def _bullets(text: Any) -> list[str]:
    """LoadGen's recommendation text (' * a.  * b.') as separate lines."""
    if not isinstance(text, str):
        return []
    parts = [" ".join(p.split()) for p in re.split(r"\s\*\s|^\*\s", text.strip())]
    return [p for p in parts if p]


def parse_result(run_dir: Path) -> dict[str, Any]:
    """LoadGen's verdict and figures from the run directory's detail log."""
    kv, events = read_detail(run_dir / DETAIL_FILE)
    validity = kv.get("result_validity")
    out: dict[str, Any] = {
        "result": validity if validity in MLPERF_WORDS else None,
        "scenario": kv.get("effective_scenario"),
        "mode": kv.get("effective_test_mode"),
    }
    checks = {name: kv[key] for key, name in CHECKS if isinstance(kv.get(key), bool)}
    out["checks"] = checks
    reasons = [f"{name} not met" for name, ok in checks.items() if not ok]
    invalid = _bullets(kv.get("result_invalid_reason"))
    for key, what in (
        ("early_stopping_ttft_result", "TTFT"),
        ("early_stopping_tpot_result", "TPOT"),
    ):
        if checks.get("early stopping") is False:
            invalid += [f"{what} early stopping: {b}" for b in _bullets(kv.get(key))]
    out["reasons"] = reasons + invalid
    out["errors"] = [
        str(e.get("value")) for e in events if (e.get("metadata") or {}).get("is_error")
    ]
    out["warnings"] = [
        str(e.get("value")) for e in events if (e.get("metadata") or {}).get("is_warning")
    ]
    figures: dict[str, Any] = {
        "query_count": kv.get("result_query_count"),
        "scheduled_samples_per_s": kv.get("result_scheduled_samples_per_sec"),
        "completed_samples_per_s": kv.get("result_completed_samples_per_sec")
        or kv.get("result_samples_per_second"),
        "completed_tokens_per_s": kv.get("result_completed_tokens_per_second"),
        "tokens_per_s": kv.get("result_tokens_per_second"),
        "target_qps": kv.get("effective_target_qps"),
        "ttft_limit_ms": _ms(kv.get("requested_server_ttft_latency")),
        "tpot_limit_ms": _ms(kv.get("requested_server_tpot_latency")),
        "min_duration_s": (kv["effective_min_duration_ms"] / 1000)
        if isinstance(kv.get("effective_min_duration_ms"), int | float)
        else None,
    }
    for p in ("50.00", "90.00", "99.00"):
        q = p.split(".")[0]
        figures[f"latency_p{q}_ms"] = _ms(kv.get(f"result_{p}_percentile_latency_ns"))
        figures[f"ttft_p{q}_ms"] = _ms(kv.get(f"result_first_token_{p}_percentile_latency_ns"))
        figures[f"tpot_p{q}_ms"] = _ms(kv.get(f"result_time_per_output_token_{p}_percentile_ns"))
    out["figures"] = {k: val for k, val in figures.items() if val is not None}
    peaks = [float(m.group(1)) for e in events if (m := _PEAK.search(str(e.get("value"))))]
    if peaks:
        out["peak_qps"] = peaks[-1]
    return out
