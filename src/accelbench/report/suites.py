"""Report sections of the suites' directories: a stress directory (``stress.json``), a
shadow directory (``shadow.json`` / ``verdict.json``) and an MLPerf run (LoadGen's
``mlperf_log_detail.txt``). Each becomes a :class:`SuiteView`: headline lines, tables of
plain-text cells (the verdicts with their statistic, interval and thresholds first) and
a few aggregated charts, which the HTML and Markdown renderers draw as they are.

A damaged file never raises: it becomes one warning line of the section."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError, DocumentError
from accelbench.metrics.format import sig
from accelbench.metrics.verdict import Verdict
from accelbench.report.verdicts import HEAD as VERDICT_HEAD
from accelbench.report.verdicts import cells as verdict_cells
from accelbench.store.reader import RunInfo, dig, is_run_dir, load_run
from accelbench.store.suites import STRESS_JSON, STRESS_SCHEMAS, mlperf_label, worst_verdict
from accelbench.suites.mlperf.logs import DETAIL_FILE as LOADGEN_DETAIL
from accelbench.suites.mlperf.logs import SUMMARY_FILE as LOADGEN_SUMMARY
from accelbench.suites.mlperf.logs import parse_result
from accelbench.suites.shadow.store import SHADOW_JSON
from accelbench.suites.shadow.store import VERDICT as SHADOW_VERDICT
from accelbench.suites.shadow.verdict import SCHEMAS as SHADOW_VERDICT_SCHEMAS

MAX_CHART_POINTS = 300  # per series (memory samples of a day-long soak are thinned)
MAX_TABLE_WINDOWS = 60  # soak windows listed as rows; the charts show all
MAX_PAIRS = 10  # diverging pairs listed
PAIR_CHARS = 120


@dataclass
class Table:
    title: str
    head: list[str]
    rows: list[list[str]]
    left: int = 1  # leading text columns (left-aligned in HTML)


@dataclass
class Chart:
    title: str
    x_title: str
    y_title: str
    series: list[dict[str, Any]]  # {"name", "x", "y", "mode"?: "lines" | "markers" ...}


@dataclass
class SuiteView:
    kind: str  # stress | shadow | mlperf
    name: str
    path: Path
    title: str
    verdict: str | None = None  # overall: pass/warn/fail, go/no-go/inconclusive, VALID...
    headline: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    text: str | None = None  # LoadGen's summary page, shown as it is
    run: RunInfo | None = None


def suite_kind(path: Path) -> str | None:
    """Which suite's directory ``path`` is, by its files, or None."""
    if (path / STRESS_JSON).is_file():
        return "stress"
    if (path / SHADOW_JSON).is_file() or (
        (path / SHADOW_VERDICT).is_file() and not is_run_dir(path)  # a generic name
    ):
        return "shadow"
    if (path / LOADGEN_DETAIL).is_file() or (path / LOADGEN_SUMMARY).is_file():
        return "mlperf"
    return None


def load_suite(path: Path, kind: str) -> SuiteView:
    """The section of one suite directory; what cannot be read is a warning line."""
    view = SuiteView(kind, path.name, path, f"{kind}: {path.name}")
    loader = {"stress": _stress, "shadow": _shadow, "mlperf": _mlperf}[kind]
    try:
        loader(path, view)
    except (AccelbenchError, OSError, ValueError, TypeError, KeyError, AttributeError,
            IndexError, RecursionError) as exc:  # fmt: skip
        msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        view.warnings.append(f"{kind} directory malformed: {type(exc).__name__}: {msg}")
    return view


# ----------------------------------------------------------------------------- helpers


def num(x: Any) -> float | None:
    """A finite number from a file, else None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def f(x: Any, digits: int = 4) -> str:
    """A cell: 4 significant digits, thousands separated from 10,000; '—' when unknown."""
    v = num(x)
    if v is None and not (x is None or isinstance(x, int | float)):
        return str(x)
    return sig(v, digits, inf=None)


def interval(lo: Any, hi: Any) -> str:
    return f"{f(lo)} to {f(hi)}" if num(lo) is not None and num(hi) is not None else "—"


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccelbenchError(f"{path.name} missing") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise AccelbenchError(f"{path.name} unreadable ({type(exc).__name__})") from None


def _jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of a JSON-lines file and how many lines were not JSON objects."""
    if not path.is_file():
        return [], 0
    rows, bad = [], 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except (ValueError, RecursionError):
            r = None
        if isinstance(r, dict):
            rows.append(r)
        else:
            bad += 1
    return rows, bad


def _thin(n: int) -> range:
    return range(0, n, max(1, math.ceil(n / MAX_CHART_POINTS)))


def _stress_verdicts(doc: dict[str, Any], view: SuiteView) -> None:
    vs = doc.get("verdicts")
    if not isinstance(vs, list):
        view.warnings.append("stress.json has no verdicts list")
        return
    rows = []
    for i, v in enumerate(vs):
        try:
            rows.append(verdict_cells(Verdict.from_json(v, f"stress.json: verdicts[{i}]")))
        except DocumentError as exc:
            view.warnings.append(str(exc))
    view.tables.append(Table("Verdicts (95% intervals; thresholds in the statistic's unit)",
                             VERDICT_HEAD, rows, left=3))  # fmt: skip


# ----------------------------------------------------------------------------- stress


def _stress(path: Path, view: SuiteView) -> None:
    doc = _json(path / STRESS_JSON)
    if not isinstance(doc, dict) or doc.get("schema") not in STRESS_SCHEMAS:
        raise AccelbenchError("stress.json is not an accelbench stress file")
    suite = str(doc.get("suite"))
    view.title = f"stress {suite}: {path.name}"
    view.verdict = worst_verdict(doc.get("verdicts")) or "n/a"
    view.headline.append(f"status: {doc.get('status')}")
    if doc.get("status") != "completed":
        view.warnings.append(f"the {suite} suite did not complete (status {doc.get('status')})")
    _stress_verdicts(doc, view)
    part = {"soak": _soak, "flood": _flood, "mixed": _mixed, "consistency": _consistency}
    if suite not in part:
        view.warnings.append(f"stress.json: unknown suite {suite!r}")
        return
    part[suite](path, doc, view)


def _memory_chart(path: Path, view: SuiteView, hours: bool) -> None:
    samples, bad = _jsonl(path / "memory.jsonl")
    if bad:
        view.warnings.append(f"memory.jsonl: {bad} line(s) unreadable")
    series: dict[str, tuple[list[float], list[float]]] = {}
    for s in samples:
        t = num(s.get("t_s"))
        for k, val in s.items():
            y = num(val)
            if t is None or y is None:
                continue
            if k.endswith("rss_bytes") or k.endswith("mem_used_bytes") or k.startswith("metric:"):
                ts, ys = series.setdefault(k, ([], []))
                ts.append(t / 3600 if hours else t)
                ys.append(y / 2**20)
    if series:
        view.charts.append(Chart(
            "Memory series (leak verdicts above)", "hours" if hours else "seconds", "MiB",
            [{"name": k, "x": [ts[i] for i in _thin(len(ts))], "y": [ys[i] for i in _thin(len(ys))]}
             for k, (ts, ys) in sorted(series.items())],
        ))  # fmt: skip


def _soak(path: Path, doc: dict[str, Any], view: SuiteView) -> None:
    view.headline.append(
        f"soak {f(doc.get('soak_s'))} s in {doc.get('windows')} window(s), "
        f"{doc.get('requests')} requests, {doc.get('segments')} segment(s); "
        f"disk {f(doc.get('disk_bytes_per_request'))} B/request"
    )
    wins, bad = _jsonl(path / "windows.jsonl")
    if bad:
        view.warnings.append(f"windows.jsonl: {bad} line(s) unreadable")
    if not wins:
        view.warnings.append("windows.jsonl: no finished window")
    t = [(num(w.get("t_s")) or 0.0) / 60 for w in wins]
    lat = [("TTFT p50", "ttft_ms", "p50"), ("TTFT p99", "ttft_ms", "p99"),
           ("TPOT p50", "tpot_ms", "p50"), ("TPOT p99", "tpot_ms", "p99")]  # fmt: skip
    if wins:
        view.charts.append(Chart("Per-window latency", "minutes", "ms", [
            {"name": n, "x": t, "y": [num(dig(w, k, q)) for w in wins]} for n, k, q in lat
        ]))  # fmt: skip
        view.charts.append(Chart("Per-window throughput and errors", "minutes", "", [
            {"name": "output tok/s", "x": t, "y": [num(w.get("output_tok_per_s")) for w in wins]},
            {"name": "requests/s", "x": t, "y": [num(w.get("req_per_s")) for w in wins]},
            {"name": "error rate (%)", "x": t,
             "y": [None if num(w.get("error_rate")) is None else 100 * float(w["error_rate"])
                   for w in wins]},
        ]))  # fmt: skip
    if 0 < len(wins) <= MAX_TABLE_WINDOWS:
        view.tables.append(Table("Windows", [
            "window", "start s", "end s", "requests", "error rate", "output tok/s",
            "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "errors by kind",
        ], [[str(w.get("window")), f(w.get("t_start_s")), f(w.get("t_end_s")),
             str(w.get("requests")), f(w.get("error_rate")), f(w.get("output_tok_per_s")),
             f(dig(w, "ttft_ms", "p50")), f(dig(w, "ttft_ms", "p99")), f(dig(w, "tpot_ms", "p50")),
             _kinds(w.get("errors"))] for w in wins]))  # fmt: skip
    _memory_chart(path, view, hours=(num(doc.get("soak_s")) or 0) > 7200)


def _kinds(errors: Any) -> str:
    if not isinstance(errors, dict) or not errors:
        return "none"
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))


def _flood(path: Path, doc: dict[str, Any], view: SuiteView) -> None:
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict)]
    view.headline.append(f"{len(steps)} step(s)")
    view.tables.append(Table("Steps", [
        "input tokens", "concurrency", "requests", "ok", "TTFT p50 ms", "TTFT p90 ms",
        "TTFT max ms", "prefill tok/s (p50)", "errors by kind",
    ], [[f(s.get("input_tokens")), str(s.get("concurrency")), str(s.get("requests")),
         str(s.get("ok")), f(dig(s, "ttft_ms", "p50")), f(dig(s, "ttft_ms", "p90")),
         f(dig(s, "ttft_ms", "max")), f(s.get("prefill_tok_per_s_p50")), _kinds(s.get("errors"))]
        for s in steps]))  # fmt: skip
    fit = doc.get("ttft_fit_ms")
    fit = fit if isinstance(fit, dict) else {}
    if fit.get("error"):
        view.headline.append(f"TTFT fit: none ({fit['error']}, n={fit.get('n')})")
    elif fit:
        rows = [[f"{k} ({unit})", f(dig(fit, k, "estimate")),
                 interval(dig(fit, k, "ci_low"), dig(fit, k, "ci_high"))]
                for k, unit in (("a", "ms"), ("b", "ms/token"), ("c", "ms/token^2"))]  # fmt: skip
        rows.append(["R^2", f(fit.get("r2")), ""])
        rows.append(["n", str(fit.get("n")), ""])
        view.tables.append(Table("TTFT = a + b L + c L^2 (least squares, 95% t-intervals)",
                                 ["coefficient", "estimate", "95% interval"], rows))  # fmt: skip
    series = []
    for c in sorted({s.get("concurrency") for s in steps}, key=str):
        pts = [
            (
                num(s.get("input_tokens")),
                num(dig(s, "ttft_ms", "p50")),
                num(s.get("prefill_tok_per_s_p50")),
            )
            for s in steps
            if s.get("concurrency") == c
        ]
        series.append({"name": f"TTFT p50, c={c}", "x": [p[0] for p in pts],
                       "y": [p[1] for p in pts], "mode": "lines+markers"})  # fmt: skip
    coef = [num(dig(fit, k, "estimate")) for k in "abc"]
    xs = [num(s.get("input_tokens")) for s in steps]
    xs_ok = [x for x in xs if x is not None]
    if xs_ok and None not in coef:
        a, b, c2 = (float(x) for x in coef)  # type: ignore[arg-type]
        lo, hi = min(xs_ok), max(xs_ok)
        grid = [lo + (hi - lo) * i / 49 for i in range(50)]
        series.append({"name": "fit a + bL + cL^2", "x": grid,
                       "y": [a + b * x + c2 * x * x for x in grid], "mode": "lines",
                       "dash": "dot"})  # fmt: skip
    if steps:
        view.charts.append(Chart("TTFT against input length", "input tokens", "ms", series))
        view.charts.append(Chart("Prefill throughput against input length", "input tokens",
                                 "input tokens / s (p50 of input / TTFT)", [
            {"name": f"c={c}", "mode": "lines+markers",
             "x": [num(s.get("input_tokens")) for s in steps if s.get("concurrency") == c],
             "y": [num(s.get("prefill_tok_per_s_p50")) for s in steps
                   if s.get("concurrency") == c]}
            for c in sorted({s.get("concurrency") for s in steps}, key=str)]))  # fmt: skip
    _memory_chart(path, view, hours=False)


def _ci(d: Any) -> str:
    if not isinstance(d, dict) or num(d.get("estimate")) is None:
        return "—"
    return f"{f(d['estimate'])} ({interval(d.get('ci_low'), d.get('ci_high'))})"


def _mixed(path: Path, doc: dict[str, Any], view: SuiteView) -> None:
    eps = [e for e in doc.get("endpoints") or [] if isinstance(e, dict)]
    view.headline.append(f"{len(eps)} endpoint(s); {len(doc.get('runs') or [])} run(s)")
    view.tables.append(Table("Mixed against solo: % change with 95% interval", [
        "endpoint", "URL", "solo / mixed requests", "TTFT p50 %", "TTFT p99 %", "TPOT p50 %",
        "TPOT p99 %", "TTFT jitter solo %", "TTFT jitter mixed %", "TPOT jitter mixed %",
    ], [[f"ep{e.get('endpoint')}", str(e.get("url")),
         f"{e.get('solo_requests')} / {e.get('mixed_requests')}",
         _ci(e.get("ttft_p50_change_pct")), _ci(e.get("ttft_p99_change_pct")),
         _ci(e.get("tpot_p50_change_pct")), _ci(e.get("tpot_p99_change_pct")),
         _ci(e.get("ttft_jitter_solo_pct")), _ci(e.get("ttft_jitter_mixed_pct")),
         _ci(e.get("tpot_jitter_mixed_pct"))] for e in eps]))  # fmt: skip
    m = doc.get("interference_matrix")
    if isinstance(m, list) and m:
        view.tables.append(Table(
            "Interference matrix: " + str(doc.get("matrix_note") or ""),
            ["endpoint i \\ j"] + [f"ep{j}" for j in range(len(m))],
            [[f"ep{i}"] + [_ci(c) for c in row] for i, row in enumerate(m) if isinstance(row, list)],
        ))  # fmt: skip
    elif m is not None:
        view.warnings.append("stress.json: interference_matrix is not a list")


def _consistency(path: Path, doc: dict[str, Any], view: SuiteView) -> None:
    comps = [c for c in doc.get("comparisons") or [] if isinstance(c, dict)]
    unit = str(doc.get("unit") or "token")
    view.headline.append(f"baseline {doc.get('baseline')}; positions in {unit}s")
    view.tables.append(Table("Runs against the baseline", [
        "run", "compared", "identical fraction", "divergent", "missing",
        f"first differing {unit} (min)", f"first differing {unit} (median)", "similarity (mean)",
    ], [[str(c.get("run")), str(c.get("compared")), f(c.get("identical_fraction")),
         str(c.get("divergent")), str(c.get("missing")), f(c.get("first_diff_min")),
         f(c.get("first_diff_median")), f(c.get("similarity_mean"))] for c in comps]))  # fmt: skip
    pairs, bad = _jsonl(path / "divergent.jsonl")
    if bad:
        view.warnings.append(f"divergent.jsonl: {bad} line(s) unreadable")

    def cut(s: Any) -> str:
        s = str(s or "")
        return s[:PAIR_CHARS] + ("..." if len(s) > PAIR_CHARS else "")

    view.tables.append(Table(
        f"Diverging pairs ({len(pairs)}; first {min(len(pairs), MAX_PAIRS)} shown, all in "
        "divergent.jsonl)",
        ["run", "prompt", f"first differing {unit}", "similarity", "baseline", "output"],
        [[str(p.get("run")), str(p.get("idx")), f(p.get("first_diff")), f(p.get("similarity")),
          cut(p.get("baseline")), cut(p.get("output"))] for p in pairs[:MAX_PAIRS]],
        left=6,  # texts
    ))  # fmt: skip


# ----------------------------------------------------------------------------- shadow


def _shadow(path: Path, view: SuiteView) -> None:
    view.title = f"shadow: {path.name}"
    meta: Any = None
    if (path / SHADOW_JSON).is_file():
        try:
            meta = _json(path / SHADOW_JSON)
        except AccelbenchError as exc:
            view.warnings.append(str(exc))
        if meta is not None and not isinstance(meta, dict):
            view.warnings.append("shadow.json is not a JSON object")
            meta = None
    if isinstance(meta, dict):
        view.headline.append(
            f"mode {meta.get('mode')}, status {meta.get('status')}; baseline "
            f"{_side(meta.get('baseline'))}, candidate {_side(meta.get('candidate'))}"
        )
    if not (path / SHADOW_VERDICT).is_file():
        view.warnings.append(
            "no verdict.json: run `accelbench shadow verdict DIR --gate ...` first"
        )
        return
    doc = _json(path / SHADOW_VERDICT)
    if not isinstance(doc, dict) or doc.get("schema") not in SHADOW_VERDICT_SCHEMAS:
        raise AccelbenchError("verdict.json is not an accelbench shadow verdict")
    view.verdict = str(doc.get("verdict"))
    view.headline.append(
        f"{doc.get('paired_requests')} paired requests; confidence {f(doc.get('confidence'))}; "
        "a gate passes when its whole interval is on the allowed side of the threshold"
    )
    gates = _gates(doc.get("gates"), "verdict.json: gates", view)
    view.tables.append(Table("Gates", VERDICT_HEAD, [verdict_cells(g) for g in gates], left=3))
    wins = [w for w in doc.get("windows") or [] if isinstance(w, dict)]
    if wins:
        names = [g.name for g in gates]
        rows = []
        for i, w in enumerate(wins):
            wg = _gates(w.get("gates"), f"verdict.json: windows[{i}].gates", view)
            rows.append([f"{f(w.get('start_s'))}-{f(w.get('end_s'))}", str(w.get("requests")),
                         str(w.get("verdict"))]
                        + [f"{g.word} {f(g.estimate)} ({interval(g.low, g.high)})" for g in wg])  # fmt: skip
        view.tables.append(Table("Windows (shown beside the verdict; the overall result decides)",
                                 ["window s", "requests", "verdict", *names], rows))  # fmt: skip
    sides_doc = doc.get("sides")
    sides: dict[str, Any] = sides_doc if isinstance(sides_doc, dict) else {}
    view.tables.append(Table("Sides", [
        "side", "requests", "ok", "errors by kind", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
        "TPOT p99 ms", "E2E p50 ms", "E2E p99 ms", "output tok/s",
    ], [[side, str(dig(s, "requests")), str(dig(s, "ok")), _kinds(dig(s, "errors")),
         f(dig(s, "ttft", "p50")), f(dig(s, "ttft", "p99")), f(dig(s, "tpot", "p50")),
         f(dig(s, "tpot", "p99")), f(dig(s, "e2e", "p50")), f(dig(s, "e2e", "p99")),
         f(dig(s, "output_tokens_per_s"))] for side, s in sides.items()]))  # fmt: skip
    counters = doc.get("counters")
    if isinstance(counters, dict) and counters:
        view.headline.append("counters: " + _kinds(counters))
    view.headline.append("resources: " + _resources(doc.get("resources")))


def _side(d: Any) -> str:
    if isinstance(d, dict):
        return " ".join(str(d[k]) for k in ("url", "model") if d.get(k))
    return str(d)


def _gates(raw: Any, where: str, view: SuiteView) -> list[Verdict]:
    """The gates of a verdict.json (either version) as verdict records; a damaged one is
    a warning line."""
    out = []
    for i, g in enumerate(raw if isinstance(raw, list) else []):
        try:
            out.append(Verdict.from_json(g, f"{where}[{i}]", suite="shadow"))
        except DocumentError as exc:
            view.warnings.append(str(exc))
    return out


def _resources(r: Any) -> str:
    if r is None:
        return "not recorded (a verdict.json older than the resources section)"
    if not isinstance(r, dict):
        return "malformed"
    if r.get("telemetry") == "off":
        return f"telemetry off: {r.get('reason')}"
    from accelbench.suites.shadow.verdict import resources_line

    return " | ".join(
        f"{side}: {resources_line(r.get(side))}" for side in ("baseline", "candidate")
    )


# ----------------------------------------------------------------------------- mlperf


def _mlperf(path: Path, view: SuiteView) -> None:
    view.title = f"MLPerf: {path.name}"
    res = parse_result(path)
    meta: Any = None
    if (path / "mlperf.json").is_file():
        try:
            meta = _json(path / "mlperf.json")
        except AccelbenchError as exc:
            view.warnings.append(str(exc))
    meta = meta if isinstance(meta, dict) else {}
    if res.get("result") is None:
        view.warnings.append(
            f"{LOADGEN_DETAIL}: no result_validity event "
            f"({'missing' if not (path / LOADGEN_DETAIL).is_file() else 'malformed or truncated'})"
            ": no LoadGen result"
        )
    # mlperf.json's result is accelbench's (INVALID when a sample failed, whatever LoadGen
    # said); LoadGen's own is the detail log's, for a run without an mlperf.json
    label = mlperf_label({"result": res.get("result"), **meta}) or ""
    view.verdict = label  # "VALID, non-compliant": the label goes wherever the result does
    view.headline.append(
        f"{meta.get('benchmark')} {meta.get('scenario')} (LoadGen {res.get('scenario')}, "
        f"{res.get('mode')}): {label}"
    )
    if meta.get("compliant") is not True:
        why = meta.get("noncompliance") or ["no mlperf.json compliance record"]
        view.headline.append("NON-COMPLIANT: " + "; ".join(str(x) for x in why))
    reasons = meta.get("reasons") if isinstance(meta.get("reasons"), list) else res.get("reasons")
    if reasons:
        view.headline.append("INVALID because: " + "; ".join(str(x) for x in reasons))
    if num(res.get("peak_qps")) is not None:
        view.headline.append(f"peak QPS (find-peak): {f(res['peak_qps'])}")
    checks = res.get("checks") or {}
    if checks:
        view.tables.append(
            Table(
                "LoadGen's checks",
                ["check", "met"],
                [[k, "yes" if ok else "NO"] for k, ok in checks.items()],
            )
        )
    run = None
    try:
        run = load_run(path)
    except AccelbenchError as exc:
        view.warnings.append(str(exc))
    view.run = run
    s = run.summary if run is not None else None
    fig = res.get("figures") or {}

    def f6(x: Any) -> str:  # LoadGen prints 2 decimals: keep them
        return f(x, 6)

    rows = []
    for what, key, col in (("TTFT", "ttft", "ttft_ms"), ("TPOT", "tpot", "tpot_ms"),
                           ("latency (E2E)", "latency", "e2e_ms")):  # fmt: skip
        for q in ("50", "90", "99"):
            rows.append([f"{what} p{q} ms", f6(fig.get(f"{key}_p{q}_ms")),
                         f6(dig(s, "latency", col, f"p{q}"))])  # fmt: skip
    rows.append(["completed samples/s; requests/s", f6(fig.get("completed_samples_per_s")),
                 f6(dig(s, "throughput", "requests_per_s"))])  # fmt: skip
    rows.append(["tokens/s; output tokens/s",
                 f6(fig.get("completed_tokens_per_s") or fig.get("tokens_per_s")),
                 f6(dig(s, "throughput", "output_tokens_per_s"))])  # fmt: skip
    rows.append(["TTFT / TPOT limit ms", f"{f6(fig.get('ttft_limit_ms'))} / "
                 f"{f6(fig.get('tpot_limit_ms'))}", ""])  # fmt: skip
    view.tables.append(
        Table(
            "LoadGen's figures beside accelbench's (LoadGen times from the scheduled query; "
            "accelbench from the request's send)",
            ["figure", "LoadGen", "accelbench"],
            rows,
        )
    )
    try:
        view.text = (path / LOADGEN_SUMMARY).read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        view.warnings.append(f"{LOADGEN_SUMMARY} missing")
