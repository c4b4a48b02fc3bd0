"""Reading LoadGen's own logs: the result (VALID / INVALID and why) and its figures.

``mlperf_log_detail.txt`` holds one ``:::MLLOG {json}`` event per line (keys such as
``result_validity``, ``result_min_duration_met``, ``early_stopping_ttft_result``,
``result_first_token_99.00_percentile_latency_ns``); ``mlperf_log_summary.txt`` is the
human-readable page. The structured events are the source; the summary is only shown.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.documents import Json, JsonObject, open_file, read_file
from accelbench.metrics.stats import counted_order_stat
from accelbench.metrics.verdict import WORDS

MLPERF_WORDS = tuple(WORDS["mlperf"].values())  # VALID, INVALID: LoadGen's pass and fail

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
TRACE_FILE = "mlperf_log_trace.json"  # written with --trace only
_MLLOG = ":::MLLOG "
_PEAK = re.compile(r"Found peak performance field: ([0-9.eE+-]+)")

# The checks LoadGen makes, as the summary names them.
CHECKS = (
    ("result_perf_constraints_met", "performance constraints (latency limits)"),
    ("result_min_duration_met", "min duration"),
    ("result_min_queries_met", "min queries"),
    ("early_stopping_met", "early stopping"),
)


def read_detail(path: Path) -> tuple[JsonObject, list[JsonObject]]:
    """(last value of every key, every event in order). Lines that are not MLLOG
    events, or whose JSON is torn, are skipped."""
    last: JsonObject = {}
    events: list[JsonObject] = []
    try:
        text = read_file(path).decode("utf-8", errors="replace")  # a FIFO: refused
    except OSError:
        return last, events
    for line in text.splitlines():
        if not line.startswith(_MLLOG):
            continue
        try:
            ev = json.loads(line[len(_MLLOG) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(ev, dict) and isinstance(ev.get("key"), str):
            events.append(ev)
            last[ev["key"]] = ev.get("value")
    return last, events


def _num(x: Json) -> float | None:
    return x if isinstance(x, int | float) and not isinstance(x, bool) else None


def _ms(ns: Json) -> float | None:
    v = _num(ns)
    return None if v is None else v / 1e6


def _bullets(text: Json) -> list[str]:
    """LoadGen's recommendation text (' * a.  * b.') as separate lines."""
    if not isinstance(text, str):
        return []
    parts = [" ".join(p.split()) for p in re.split(r"\s\*\s|^\*\s", text.strip())]
    return [p for p in parts if p]


@dataclass
class LoadGenResult:
    """LoadGen's verdict and figures, from a run directory's detail log."""

    result: str | None = None  # VALID | INVALID | None (no result_validity event)
    scenario: str | None = None
    mode: str | None = None
    checks: dict[str, bool] = field(default_factory=dict)  # CHECKS' names -> met
    reasons: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)
    peak_qps: float | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "result": self.result, "scenario": self.scenario, "mode": self.mode,
            "checks": dict[str, Json](self.checks), "reasons": list[Json](self.reasons),
            "errors": list[Json](self.errors), "warnings": list[Json](self.warnings),
            "figures": dict[str, Json](self.figures),
        }  # fmt: skip
        if self.peak_qps is not None:
            out["peak_qps"] = self.peak_qps
        return out


def read_loadgen(run_dir: Path) -> LoadGenResult:
    """LoadGen's verdict and figures from the run directory's detail log (a missing,
    torn or damaged log gives what it holds: no result when no result_validity event)."""
    kv, events = read_detail(run_dir / DETAIL_FILE)
    validity = kv.get("result_validity")

    def text(key: str) -> str | None:
        x = kv.get(key)
        return x if isinstance(x, str) else None

    out = LoadGenResult(
        validity if isinstance(validity, str) and validity in MLPERF_WORDS else None,
        text("effective_scenario"),
        text("effective_test_mode"),
    )
    checks: dict[str, bool] = {}
    for key, name in CHECKS:
        ok = kv.get(key)
        if isinstance(ok, bool):
            checks[name] = ok
    out.checks = checks
    reasons = [f"{name} not met" for name, ok in checks.items() if not ok]
    invalid = _bullets(kv.get("result_invalid_reason"))
    for key, what in (
        ("early_stopping_ttft_result", "TTFT"),
        ("early_stopping_tpot_result", "TPOT"),
    ):
        if checks.get("early stopping") is False:
            invalid += [f"{what} early stopping: {b}" for b in _bullets(kv.get(key))]
    out.reasons = reasons + invalid

    def flagged(e: JsonObject, flag: str) -> bool:
        md = e.get("metadata")
        return isinstance(md, dict) and bool(md.get(flag))

    out.errors = [str(e.get("value")) for e in events if flagged(e, "is_error")]
    out.warnings = [str(e.get("value")) for e in events if flagged(e, "is_warning")]
    dur = _num(kv.get("effective_min_duration_ms"))
    figures: dict[str, float | None] = {
        "query_count": _num(kv.get("result_query_count")),
        "scheduled_samples_per_s": _num(kv.get("result_scheduled_samples_per_sec")),
        "completed_samples_per_s": _num(kv.get("result_completed_samples_per_sec"))
        or _num(kv.get("result_samples_per_second")),
        "completed_tokens_per_s": _num(kv.get("result_completed_tokens_per_second")),
        "tokens_per_s": _num(kv.get("result_tokens_per_second")),
        "target_qps": _num(kv.get("effective_target_qps")),
        "ttft_limit_ms": _ms(kv.get("requested_server_ttft_latency")),
        "tpot_limit_ms": _ms(kv.get("requested_server_tpot_latency")),
        "min_duration_s": None if dur is None else dur / 1000,
    }
    for p in ("50.00", "90.00", "99.00"):
        q = p.split(".")[0]
        figures[f"latency_p{q}_ms"] = _ms(kv.get(f"result_{p}_percentile_latency_ns"))
        figures[f"ttft_p{q}_ms"] = _ms(kv.get(f"result_first_token_{p}_percentile_latency_ns"))
        figures[f"tpot_p{q}_ms"] = _ms(kv.get(f"result_time_per_output_token_{p}_percentile_ns"))
    out.figures = {k: val for k, val in figures.items() if val is not None}
    peaks = [float(m.group(1)) for e in events if (m := _PEAK.search(str(e.get("value"))))]
    if peaks:
        out.peak_qps = peaks[-1]
    return out


@dataclass
class IssueSide:
    """How late LoadGen's issue thread handed queries over, from its trace: the part of
    LoadGen's latencies (timed from each query's *scheduled* time) that the SUT's
    records, timed from the hand-over, do not hold. ``delay``: scheduled time to
    LoadGen's ``IssueQuery`` call (its issue thread waking late, or held up by the
    previous call); ``call``: how long that call took, the SUT's Python callback and
    the GIL it waited for included (an upper bound on the wait before the callback)."""

    queries: int
    delay_ms_p99: float
    delay_ms_max: float
    call_ms_max: float


def read_issue_side(path: Path) -> IssueSide | None:
    """Read LoadGen's trace (``mlperf_log_trace.json``, Chrome's trace format, one event
    a line) for its issue delays: ``issue_delay`` (ns) of the Server scenario's
    ``Latency`` counters, else ``issue_start_ns`` of the ``Sample`` events (one of each
    per sample; loadgen.cc, ``QuerySamplesComplete``), and the duration (us)
    of each ``IssueQuery`` span. LoadGen writes some lines that are not JSON (its
    ``LogDetail`` keys carry doubled quotes): each line is read alone and what cannot be
    read is skipped. None when the file is missing or holds no issue delay."""
    delays: Counter[float] = Counter()
    starts: Counter[float] = Counter()
    call_max = 0.0
    try:
        with io.TextIOWrapper(open_file(path), encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"issue' not in line and '"IssueQuery"' not in line:
                    continue
                try:
                    ev = json.loads(line.strip().rstrip(","))
                except (ValueError, RecursionError):
                    continue
                if not isinstance(ev, dict):
                    continue
                args = ev.get("args")
                if ev.get("name") == "IssueQuery" and ev.get("ph") == "X":
                    dur = _num(ev.get("dur"))
                    if dur is not None and math.isfinite(dur) and dur >= 0:
                        call_max = max(call_max, dur / 1e3)
                elif isinstance(args, dict):
                    # one event of each kind per sample (the token events repeat them)
                    key, into = {"Latency": ("issue_delay", delays),
                                 "Sample": ("issue_start_ns", starts)}.get(
                        str(ev.get("name")), ("", delays))  # fmt: skip
                    ns = _num(args.get(key)) if key else None
                    if ns is not None and math.isfinite(ns) and ns >= 0:
                        into[round(ns / 1e6, 3)] += 1
    except OSError:
        return None
    got = delays or starts  # the counters exist for Server only; the samples everywhere
    if not got:
        return None
    return IssueSide(
        queries=sum(got.values()),
        delay_ms_p99=counted_order_stat(got, 0.99),
        delay_ms_max=max(got),
        call_ms_max=call_max,
    )


def parse_result(run_dir: Path) -> JsonObject:
    """:func:`read_loadgen` as JSON (what mlperf.json's LoadGen fields are built from)."""
    return read_loadgen(run_dir).to_json()
