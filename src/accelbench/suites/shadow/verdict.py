"""Go / no-go / inconclusive for a candidate from a shadow directory (docs/SHADOW.md).

Gates (``METRIC OP VALUE``):

* latency percentiles ``ttft_p99``, ``tpot_p50``, ``e2e_p90``, ``ntpot_p50`` ... with a
  relative bound (``<= +10%``: candidate / baseline <= 1.10), a ratio (``<= 1.2x``) or an
  absolute one in ms (``<= 250``). Statistic: the ratio of the two percentiles, its
  interval from each side's order-statistic standard error on the log scale
  (:func:`accelbench.metrics.stats.quantile_ratio_ci`); for a bound in ms the
  candidate's percentile with its distribution-free order-statistic interval
  (:func:`accelbench.metrics.stats.quantile_ci`); beside it a Mann-Whitney rank test
  of the two distributions.
* ``error_rate`` with ``pp`` (candidate minus baseline, percentage points; Newcombe's
  interval for a difference of proportions, Fisher's exact test) or a plain fraction.
* ``agreement`` (a fraction, or ``%``): the share of greedy requests (``temperature``
  0 or ``top_k`` 1) that both sides completed whose outputs are identical; Wilson
  interval; the first differences are listed.

A gate passes when the whole interval is on the right side of the threshold, fails when
the whole interval is on the wrong side, and is inconclusive otherwise, or when there
are too few samples for the statistic (a percentile q needs at least
``max(10, 5 / (1 - q))`` requests a side: 500 for p99). Verdict: no-go if any gate
fails, else inconclusive if any is inconclusive, else go. Windows are evaluated the
same way and shown beside the overall verdict, which alone decides.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import numpy as np

from accelbench import validate as v
from accelbench.documents import JsonObject
from accelbench.errors import DocumentError, UsageError
from accelbench.metrics.records import ErrorKind, RequestRow
from accelbench.metrics.stats import (
    SignificanceTest,
    fisher_exact,
    mann_whitney,
    min_samples,
    newcombe,
    quantile_ci,
    quantile_ratio_ci,
    wilson,
)
from accelbench.metrics.summary import ArrivalStamps, reads_waited
from accelbench.metrics.verdict import Evidence, Interval, Status, Verdict, word, worst
from accelbench.suites.shadow.document import (
    VERDICT,
    FirstDifference,
    GateEntry,
    GaugeStat,
    Resources,
    ShadowVerdictDoc,
    SideResources,
    SideSummary,
    VerdictWindow,
    read_verdict,
    write_verdict,
)
from accelbench.suites.shadow.store import (
    BASELINE,
    CANDIDATE,
    read_shadow_dir,
    read_trace_bodies,
)

# /2: each gate is a metrics.verdict.Verdict record (verdict.json/1's gates still read)
SCHEMA = "accelbench.suites.shadow-verdict/2"
SCHEMAS = ("accelbench.suites.shadow-verdict/1", SCHEMA)
LatencyColumn = Literal["ttft_ms", "tpot_ms", "e2e_ms", "ntpot_ms"]
LATENCY: dict[str, LatencyColumn] = {
    "ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms", "ntpot": "ntpot_ms"
}  # fmt: skip
EXIT = {"go": 0, "no-go": 1, "inconclusive": 3}
# Without telemetry in the directory (the proxy samples none; replay with
# --no-telemetry): said, not null.
RESOURCES_OFF: Resources = {
    "telemetry": "off",
    "reason": "no telemetry in this shadow directory: `shadow replay` samples each side's "
    "own /metrics unless --no-telemetry, the proxy samples none; compare resource use "
    "with `accelbench run --telemetry` against each side",
}
# The server gauges a side's resources are summarised from (telemetry's srv_* columns).
GaugeColumn = Literal["srv_requests_running", "srv_requests_waiting", "srv_kv_cache_usage"]
RESOURCE_GAUGES: dict[GaugeColumn, str] = {
    "srv_requests_running": "running",
    "srv_requests_waiting": "waiting",
    "srv_kv_cache_usage": "KV-cache use",
}
_SIDES: tuple[Literal["baseline", "candidate"], ...] = ("baseline", "candidate")
MAX_WINDOWS = 1000  # each window is a full evaluation of every gate (bootstrap included)
_GATE = re.compile(
    r"^\s*([a-z0-9_.]+)\s*(<=|>=|<|>)\s*([+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(%|pp|x|ms)?\s*$"
)


@dataclass
class Gate:
    text: str
    metric: str  # ttft_p99 | error_rate | agreement ...
    op: str
    value: float
    unit: str  # "%", "pp", "x", "ms" or "" (absolute)
    column: LatencyColumn | None = None
    q: float | None = None  # latency percentile

    @property
    def kind(self) -> str:
        return "latency" if self.column else self.metric

    @property
    def threshold(self) -> float:
        """The bound in the statistic's own units (ratio, pp, fraction, ms)."""
        if self.unit == "%" and self.column:
            return 1.0 + self.value / 100.0
        if self.unit == "%" and self.metric == "agreement":
            return self.value / 100.0
        return self.value


def parse_gate(text: str) -> Gate:
    m = _GATE.match(text.lower())
    if not m:
        raise UsageError(
            f"--gate {text!r}: expected METRIC OP VALUE, e.g. 'ttft_p99 <= +10%', "
            "'error_rate <= +0.5pp', 'agreement >= 0.99'"
        )
    metric, op, num, unit = m.group(1), m.group(2), float(m.group(3)), m.group(4) or ""
    if not math.isfinite(num) or abs(num) > 1e9:
        raise UsageError(f"--gate {text!r}: the bound must be a finite number within +-1e9")
    g = Gate(text.strip(), metric, op, num, unit)
    lat = re.fullmatch(r"(ttft|tpot|e2e|ntpot)_p(\d+(?:\.\d+)?)", metric)
    if lat:
        g.column, g.q = LATENCY[lat.group(1)], float(lat.group(2))
        if not 0 < g.q < 100:
            raise UsageError(f"--gate {text!r}: the percentile must be between 0 and 100")
        if unit == "pp":
            raise UsageError(f"--gate {text!r}: a latency bound is +N%, Nx or N (ms)")
        if unit in ("x", "", "ms") and num <= 0:
            raise UsageError(f"--gate {text!r}: the bound must be positive")
        if unit == "%" and num <= -100:
            raise UsageError(f"--gate {text!r}: a latency change is above -100%")
        if unit == "":
            g.unit = "ms"
    elif metric == "error_rate":
        if unit not in ("pp", ""):
            raise UsageError(f"--gate {text!r}: the error-rate bound is +Npp or a fraction")
        if unit == "" and not 0 <= num <= 1:
            raise UsageError(f"--gate {text!r}: a plain error-rate bound is a fraction in [0, 1]")
    elif metric == "agreement":
        if unit not in ("", "%"):
            raise UsageError(f"--gate {text!r}: the agreement bound is a fraction or N%")
        if not 0 <= g.threshold <= 1:
            raise UsageError(f"--gate {text!r}: agreement is a fraction in [0, 1]")
    else:
        raise UsageError(
            f"--gate {text!r}: unknown metric {metric!r}; use ttft_pN, tpot_pN, e2e_pN, "
            "ntpot_pN, error_rate or agreement"
        )
    return g


# -- statistics (accelbench.metrics.stats) --------------------------------------------
def _decide(op: str, lo: float, hi: float, thr: float) -> Status:
    if op in ("<=", "<"):
        ok = hi < thr if op == "<" else hi <= thr
        bad = lo >= thr if op == "<" else lo > thr
    else:
        ok = lo > thr if op == ">" else lo >= thr
        bad = hi <= thr if op == ">" else hi < thr
    return Status.PASS if ok else Status.FAIL if bad else Status.INCONCLUSIVE


def _is_error(r: RequestRow) -> bool:
    return not r["ok"] and r.get("error_kind") != ErrorKind.INTERRUPTED


def _is_interrupted(r: RequestRow) -> bool:
    return not r["ok"] and r.get("error_kind") == ErrorKind.INTERRUPTED


_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E", "ntpot_ms": "NTPOT"}


def _statistic(g: Gate) -> tuple[str, str, str]:
    """(statistic in words, unit, interval method) of a gate."""
    if g.column is not None:
        what = f"p{g.q:g} {_NAMES[g.column]}"
        if g.unit == "ms":
            return f"candidate {what}", "ms", "order statistics (distribution-free)"
        return (f"{what}, candidate / baseline", "ratio",
                "order-statistic standard errors, log scale")  # fmt: skip
    if g.metric == "error_rate":
        if g.unit == "pp":
            return "error rate, candidate minus baseline", "pp", "Newcombe (Wilson)"
        return "candidate error rate", "fraction", "Wilson"
    return "share of greedy outputs identical on both sides", "fraction", "Wilson"


def evaluate_gate(
    g: Gate,
    base: list[RequestRow],
    cand: list[RequestRow],
    greedy: set[int],
    *,
    confidence: float = 0.95,
) -> GateEntry:
    """One gate on paired rows (the same requests on both sides)."""
    thr = g.threshold
    statistic, unit, method = _statistic(g)
    est: float | None = None
    lo: float | None = None
    hi: float | None = None
    status = Status.INCONCLUSIVE
    note = ""
    ev: Evidence = {}
    diffs: list[FirstDifference] = []
    test: SignificanceTest | None = None

    def done() -> GateEntry:
        if test is not None:
            ev["test"], ev["p_value"] = test["name"], test["p_value"]
            if "p_candidate_slower" in test:  # a candidate request slower than a baseline one
                ev["p_candidate_slower"] = test["p_candidate_slower"]
        rule = (f"pass if the {confidence:.0%} interval lies wholly {g.op} {thr:g}, fail if "
                "it lies wholly on the other side, inconclusive otherwise")  # fmt: skip
        v = Verdict(
            name=g.text, status=status, statistic=statistic, unit=unit, estimate=est,
            interval=None if lo is None or hi is None else Interval(lo, hi, confidence, method),
            thresholds={"bound": thr}, rule=rule, evidence=ev, suite="shadow", kind=g.kind,
            note=note,
        )  # fmt: skip
        return GateEntry(v, diffs)

    if g.column is not None:
        assert g.q is not None
        b, c = _latencies(base, g.column), _latencies(cand, g.column)
        for side, x in (("baseline", b), ("candidate", c)):  # NaN / inf: left out, counted
            if bad := int(np.sum(~np.isfinite(x))):
                ev[f"{side} {g.column} not finite (left out)"] = bad
        b, c = b[np.isfinite(b)], c[np.isfinite(c)]
        # a latency below 0 (marks out of order by less than check_marks' minute: a step
        # of the wall clock) measured nothing: left out, counted, said; it passed a gate
        # in ms as the fastest request
        neg = {
            side: int(np.count_nonzero(x < 0)) for side, x in (("baseline", b), ("candidate", c))
        }
        b, c = b[b >= 0], c[c >= 0]
        ev.update(n_baseline=int(b.size), n_candidate=int(c.size), baseline=None, candidate=None)
        if any(neg.values()):
            ev.update({f"{side} left out (below 0 ms)": k for side, k in neg.items() if k})
            note = "; ".join(f"{k} {side} {_NAMES[g.column]}(s) below 0 ms left out"
                             for side, k in neg.items() if k)  # fmt: skip
        need = min_samples(g.q, confidence)
        pb = float(np.percentile(b, g.q)) if b.size else None
        pc = float(np.percentile(c, g.q)) if c.size else None
        ev.update(baseline=pb, candidate=pc)  # each side's own percentile, ms
        if b.size < need or c.size < need:
            note = "; ".join(
                x for x in (note, f"too few requests: p{g.q:g} needs {need} a side") if x
            )
            return done()
        assert pb is not None and pc is not None
        if g.unit == "ms":
            ci = quantile_ci(c, g.q, confidence)
            assert ci is not None  # c.size >= need
            est, lo, hi = pc, float(ci[0]), float(ci[1])
        else:
            r = quantile_ratio_ci(b, c, g.q, confidence)
            if not pb > 0 or r is None or not (np.isfinite(r[1]) and np.isfinite(r[2])):
                # no estimate either: a baseline percentile of 0 gave inf (verdict.json
                # held "inf", --json printed Infinity, which is not JSON)
                note = "; ".join(x for x in (note,
                                 "the baseline percentile's interval reaches 0: no ratio") if x)  # fmt: skip
                return done()
            est = pc / pb
            lo, hi = float(r[1]), float(r[2])
        test = mann_whitney(c, b)
        status = _decide(g.op, lo, hi, thr)
        return done()
    if g.metric == "error_rate":
        # interrupted requests (cut by a stop) are neither errors nor successes: left out
        # of both counts (they were counted as successes, diluting the rate), and said
        cut = {side: sum(_is_interrupted(r) for r in rows)
               for side, rows in (("baseline", base), ("candidate", cand))}  # fmt: skip
        nb, nc = len(base) - cut["baseline"], len(cand) - cut["candidate"]
        kb = sum(_is_error(r) for r in base)
        kc = sum(_is_error(r) for r in cand)
        ev.update(n_baseline=nb, n_candidate=nc, baseline=kb / nb if nb else None,
                  candidate=kc / nc if nc else None)  # fmt: skip
        ev.update({f"{side} interrupted (left out)": k for side, k in cut.items() if k})
        for side, rows in (("baseline", base), ("candidate", cand)):
            ev.update({f"{side} errors {k}": n for k, n in _kinds(rows).items()})
        if nb < 10 or nc < 10:
            note = "too few requests: at least 10 a side"
            return done()
        if g.unit == "pp":
            dlo, dhi = newcombe(kb, nb, kc, nc, confidence)
            est, lo, hi = 100 * (kc / nc - kb / nb), 100 * dlo, 100 * dhi
        else:
            lo, hi = wilson(kc, nc, confidence)
            est = kc / nc
        test = fisher_exact(kb, nb, kc, nc)
        status = _decide(g.op, lo, hi, thr)
        return done()
    # agreement
    by_idx = {r["idx"]: r for r in base if r["ok"]}
    pairs = [
        (by_idx[r["idx"]], r) for r in cand if r["ok"] and r["idx"] in by_idx and r["idx"] in greedy
    ]
    # a pair with no text recorded on either side shows nothing: left out and counted
    # (such pairs were "identical": journals without text passed 'agreement >= 0.99')
    textless = sum(b.get("output_text") is None and c.get("output_text") is None for b, c in pairs)
    pairs = [(b, c) for b, c in pairs
             if b.get("output_text") is not None or c.get("output_text") is not None]  # fmt: skip
    n = len(pairs)
    same = [(b.get("output_text") or "") == (c.get("output_text") or "") for b, c in pairs]
    k = sum(same)
    ev.update(n_baseline=n, n_candidate=n, identical=k)
    if textless:
        ev["left out (no text on either side)"] = textless
    diffs = [_first_difference(b, c) for (b, c), s in zip(pairs, same, strict=True) if not s][:5]
    if n:
        est = k / n
    if n < 10:
        note = (
            "no greedy requests (temperature 0) completed on both sides"
            if n == 0
            else "too few greedy requests: at least 10"
        )
        if textless:
            note += f" with output text ({textless} left out: no text on either side)"
        return done()
    if textless:
        note = f"{textless} greedy pair(s) with no text on either side left out"
    lo, hi = wilson(k, n, confidence)
    status = _decide(g.op, lo, hi, thr)
    return done()


def _latencies(rows: list[RequestRow], col: LatencyColumn) -> np.ndarray:
    """The successful requests' ``col`` values (ms)."""
    return np.array([r[col] for r in rows if r["ok"] and r.get(col) is not None], float)


def _kinds(rows: list[RequestRow]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        if _is_error(r):
            k = r.get("error_kind") or "unknown"
            out[k] = out.get(k, 0) + 1
    return out


def _first_difference(b: RequestRow, c: RequestRow) -> FirstDifference:
    tb, tc = b.get("output_text") or "", c.get("output_text") or ""
    i = next(
        (j for j, (x, y) in enumerate(zip(tb, tc, strict=False)) if x != y), min(len(tb), len(tc))
    )
    return {
        "idx": b["idx"],
        "at_char": i,
        "baseline": tb[max(0, i - 20) : i + 40],
        "candidate": tc[max(0, i - 20) : i + 40],
    }


def is_greedy(body: JsonObject) -> bool:
    return body.get("temperature") == 0 or body.get("top_k") == 1


# -- the verdict ------------------------------------------------------------------------
def _overall(results: list[GateEntry]) -> Status:
    """no-go (fail) if any gate fails, else inconclusive if any is, else go (pass)."""
    return worst(r.status for r in results) if results else Status.PASS


def _paired(rows: dict[str, list[RequestRow]]) -> tuple[list[RequestRow], list[RequestRow]]:
    """The requests both sides saw (the proxy copies a sample; a dropped copy or a request
    still in flight when it stopped has no pair)."""
    b = {r["idx"]: r for r in rows["baseline"]}
    c = {r["idx"]: r for r in rows["candidate"]}
    common = sorted(set(b) & set(c))
    return [b[i] for i in common], [c[i] for i in common]


def _unpaired(rows: dict[str, list[RequestRow]], paired: int) -> tuple[dict[str, int], list[str]]:
    """Each side's records left out of the gates (no record of the same idx on the other
    side, or an idx read again: the last is used), and a warning line for each loss: a
    journal that holds no record at all is named."""
    files = {"baseline": BASELINE, "candidate": CANDIDATE}
    unpaired: dict[str, int] = {}
    warnings: list[str] = []
    for side, other in (("baseline", "candidate"), ("candidate", "baseline")):
        n, m = len(rows[side]), len(rows[other])
        distinct = len({r["idx"] for r in rows[side]})
        unpaired[side] = distinct - paired
        if n - distinct:
            warnings.append(
                f"{n - distinct} {side} record(s) repeat an idx read before in "
                f"{files[side]} and were left out (the last one of each idx is used)"
            )
        if n == 0 and m:
            warnings.append(
                f"{files[side]} holds 0 records: the {m} {other} request(s) have no "
                f"counterpart and are unpaired"
            )
        elif n == 0 and side == "baseline":
            warnings.append(f"{BASELINE} and {CANDIDATE} hold 0 records: nothing to compare")
        elif unpaired[side] and m:  # else the line above, for the other side, says it
            warnings.append(
                f"{unpaired[side]} of the {n} {side} record(s) have no {other} record of the "
                f"same idx (unpaired: left out of the gates)"
            )
    return unpaired, warnings


def _keep_more(d: Path, paired: int) -> str | None:
    """Why the verdict.json already in ``d`` is kept: it was computed from more paired
    requests than ``paired`` (a result is never replaced by less); None to write."""
    if not (d / VERDICT).is_file():
        return None
    try:
        before = read_verdict(d).paired_requests
    except (DocumentError, OSError):
        return None  # damaged or unreadable: nothing to keep
    if before <= paired:
        return None
    return (
        f"kept the existing {VERDICT} ({before} paired requests): this verdict, from "
        f"{paired}, is not written over it (delete it to replace it)"
    )


def _side_summary(rows: list[RequestRow]) -> SideSummary:
    from accelbench.metrics.stats import describe

    ok = [r for r in rows if r["ok"]]
    latency: dict[str, dict[str, float | None]] = {}
    for name, col in LATENCY.items():
        d = describe([x for r in ok if (x := r[col]) is not None])
        latency[name] = {k: d[k] for k in ("count", "p50", "p90", "p99")}
    rate: float | None = None
    if ok:
        t0 = min(r["t_send"] for r in ok)
        t1 = max(r["t_done"] or r["t_send"] for r in ok)
        tokens = sum(r["osl"] or 0 for r in ok)
        rate = tokens / ((t1 - t0) / 1e9) if t1 > t0 else None
    return SideSummary(len(rows), len(ok), _kinds(rows), latency, rate)


def _median_gap_ms(rows: list[RequestRow]) -> float | None:
    """The median gap between consecutive chunks of the side's completed requests."""
    gaps = [np.diff(t) for r in rows if r["ok"] and len(t := r["chunk_times"] or []) >= 2]
    return float(np.median(np.concatenate(gaps))) / 1e6 if gaps else None


def _late_reads(receive: dict[str, ArrivalStamps], rows: dict[str, list[RequestRow]]) -> list[str]:
    """A side whose reads waited in the socket longer than its median chunk gap (its
    process kept from the CPU: the proxy's candidate process runs at a lower priority):
    its chunk times are not each chunk's own, and gates on its timing can be off by that
    much. The same rule as a run's (metrics.summary.reads_waited)."""
    out = []
    for side in ("baseline", "candidate"):
        st = receive.get(side)
        if st is None:
            continue
        waited = reads_waited(st.get("read_delay_ms_p99"), _median_gap_ms(rows[side]))
        if waited:
            out.append(
                f"the {side}'s {waited}: its TTFT and chunk gaps, and the gates on them, "
                "can be off by up to that much (the process reading them was kept from the "
                "CPU: give the host more cores)"
            )
    return out


def shadow_verdict(
    shadow_dir: str | Path,
    gates: list[str],
    *,
    window_s: float | None = None,
    confidence: float = 0.95,
    write: bool = True,
) -> ShadowVerdictDoc:
    """Evaluate the gates overall and per window; writes verdict.json (but over one from
    more paired requests: kept, with a warning) and returns it."""
    if not gates:
        raise UsageError("give at least one --gate, e.g. --gate 'ttft_p99 <= +10%'")
    parsed = [parse_gate(g) for g in gates]
    confidence = v.number("--confidence", confidence, 0.5, 0.999)
    window_s = v.optional_number("--window", window_s, 0, 30 * 86400, lo_open=True, unit="s")
    d = Path(shadow_dir)
    unreadable: dict[str, int] = {}
    meta, rows = read_shadow_dir(d, unreadable)
    base, cand = _paired(rows)
    unpaired, warnings = _unpaired(rows, len(base))
    kept = _keep_more(d, len(base)) if write else None
    if kept:
        warnings.append(kept)
    if meta.mode == "replay" and meta.status != "completed":
        # a replay stopped early (a signal) sent only the start of its trace: the gates
        # judge those requests only, which the verdict must say (a proxy is stopped so)
        warnings.append(
            f"the replay is {meta.status}, not completed: this verdict judges only the "
            f"{len(base)} paired request(s) sent before it stopped, not the whole trace"
        )
    warnings += _late_reads(meta.receive, rows)
    bodies = read_trace_bodies(d)
    greedy = {i for i, body in bodies.items() if is_greedy(body)}

    def run(b: list[RequestRow], c: list[RequestRow]) -> list[GateEntry]:
        return [evaluate_gate(g, b, c, greedy, confidence=confidence) for g in parsed]

    overall = run(base, cand)
    windows: list[VerdictWindow] = []
    if base:
        t0 = min(r["t_sched"] for r in base)
        span = (max(r["t_sched"] for r in base) - t0) / 1e9
        if window_s is None:
            n_win, w = (4, span / 4) if span > 0 else (1, 1.0)
        else:
            w = window_s
            n_win = max(1, math.ceil(span / w - 1e-9))
            if n_win > MAX_WINDOWS:
                raise UsageError(
                    f"--window {w:g} s cuts the {span:g} s of this shadow directory into "
                    f"{n_win:,} windows; at most {MAX_WINDOWS:,}: give at least "
                    f"{span / MAX_WINDOWS:.3g} s"
                )
        if n_win > 1:
            slot = [min(n_win - 1, int((r["t_sched"] - t0) / 1e9 / w)) for r in base]
            for k in range(n_win):
                wb = [r for r, s in zip(base, slot, strict=True) if s == k]
                wc = [r for r, s in zip(cand, slot, strict=True) if s == k]
                res = run(wb, wc)
                windows.append(VerdictWindow(k * w, (k + 1) * w, len(wb), _overall(res), res))
    status = _overall(overall)
    doc = ShadowVerdictDoc(
        status=status,  # rendered in shadow's words (go / no-go / inconclusive)
        confidence=confidence,
        paired_requests=len(base),
        gates=overall,
        windows=windows,
        sides={side: _side_summary(rows[side]) for side in ("baseline", "candidate")},
        counters=dict(meta.counters),
        shadow_dir=str(d),
        exit_code=EXIT[word(status, "shadow")],
        run_status=meta.status,
        mode=meta.mode,
        resources=cast(JsonObject, resources(d, rows)),
        unreadable_lines=unreadable,  # journal -> lines skipped (torn, damaged)
        unpaired=unpaired,
        warnings=warnings,
    )
    if write and not kept:
        write_verdict(d, doc)
    return doc


def resources(d: Path, rows: dict[str, list[RequestRow]]) -> Resources:
    """Each side's server gauges (mean and max of running and waiting requests and of
    KV-cache use, tokens generated) over that side's own span, from first scheduled
    request to last completion (a sequential replay serves one side at a time), from the
    replay's ``telemetry-<side>/``; :data:`RESOURCES_OFF` when neither side has any."""
    import pyarrow.parquet as pq

    from accelbench.documents import load_json
    from accelbench.telemetry.sampler import TELEMETRY_FILE

    out: Resources = {}
    for side in _SIDES:
        tdir = d / f"telemetry-{side}"
        if not (tdir / TELEMETRY_FILE).is_file():
            continue
        try:
            samples: list[dict[str, object]] = [
                r for r in pq.read_table(tdir / TELEMETRY_FILE).to_pylist()
                if r.get("kind") == "server"
            ]  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a damaged file is said, never fatal
            out[side] = {"samples": 0, "note": f"unreadable {TELEMETRY_FILE}: {exc}"}
            continue
        recs = rows.get(side) or []
        if recs:
            t0 = min(r["t_sched"] for r in recs)
            t1 = max(r["t_done"] or r["t_send"] or t0 for r in recs)
            samples = [r for r in samples if t0 <= _int(r["t_ns"]) <= t1]
        doc: SideResources = {"samples": len(samples)}
        if samples:
            engine = samples[0].get("engine")
            doc["engine"] = None if engine is None else str(engine)
            for col in RESOURCE_GAUGES:
                vals = [_float(x) for r in samples if (x := r.get(col)) is not None]
                doc[col] = GaugeStat(mean=sum(vals) / len(vals), max=max(vals)) if vals else None
            gen = [_float(x) for r in samples
                   if (x := r.get("srv_generation_tokens_total")) is not None]  # fmt: skip
            doc["generated_tokens"] = gen[-1] - gen[0] if len(gen) > 1 else None
        else:
            try:
                tel = load_json(tdir / "telemetry.json")
                src = (tel.get("sources") if isinstance(tel, dict) else None) or {}
            except Exception:  # noqa: BLE001 - unreadable: no note from it
                src = {}
            server = src.get("server") if isinstance(src, dict) else None
            doc["note"] = str(server or "no sample of the server's /metrics")
        out[side] = doc
    if not out:
        return dict(RESOURCES_OFF)  # type: ignore[return-value]
    return {"telemetry": "server /metrics", **out}


def _float(x: object) -> float:
    """A telemetry.parquet number (its schema makes the gauges floats or ints)."""
    if isinstance(x, int | float):
        return float(x)
    raise TypeError(f"not a number: {x!r}")


def _int(x: object) -> int:
    if isinstance(x, int):
        return x
    raise TypeError(f"not an integer: {x!r}")


def resources_line(side: object) -> str:
    """One line of a side's resources for the terminal and the report ("malformed" for
    a verdict.json whose resources are not what :func:`resources` writes)."""
    try:
        return _resources_line(side)
    except (TypeError, ValueError, KeyError, AttributeError):
        return "malformed"


def _resources_line(side: object) -> str:
    if not isinstance(side, dict):
        return "no telemetry"
    if not side.get("samples"):
        return f"no samples ({side.get('note') or 'none in its span'})"
    parts = []
    for col, name in RESOURCE_GAUGES.items():
        g = side.get(col)
        if isinstance(g, dict):
            parts.append(f"{name} mean {g['mean']:.3g} max {g['max']:.3g}")
    if side.get("generated_tokens") is not None:
        parts.append(f"{side['generated_tokens']:.0f} tokens generated")
    return "; ".join(parts) + f" ({side['samples']} samples, {side.get('engine')})"
