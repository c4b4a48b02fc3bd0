"""The report section of a stress directory (stress.json and the JSON-lines files
beside it), read through the suite's documents (suites/stress/document.py)."""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.report.sections import (
    Chart,
    Series,
    SuiteView,
    Table,
    counts,
    f,
    interval,
    thin,
    verdict_table,
)
from accelbench.store.reader import RunInfo
from accelbench.suites.stress.document import (
    DIVERGENT,
    MEMORY,
    STRESS_JSON,
    WINDOWS,
    ConsistencyPart,
    Divergence,
    Estimate,
    FloodPart,
    FloodStep,
    MixedPart,
    SoakPart,
    SoakWindow,
    StressDoc,
    memory_sample,
    memory_series,
    read_rows,
    read_stress,
)

MAX_TABLE_WINDOWS = 60  # soak windows listed as rows; the charts show all
MAX_PAIRS = 10  # diverging pairs listed
PAIR_CHARS = 120


class StressSection:
    kind = "stress"
    also_a_run = False

    def detect(self, path: Path) -> bool:
        return os.path.lexists(path / STRESS_JSON)  # a FIFO there too: its reader names it

    def point_tag(self, run: RunInfo) -> str | None:
        return None

    def fill(self, path: Path, view: SuiteView) -> None:
        doc = read_stress(path, STRESS_JSON)
        view.title = f"stress {doc.suite}: {path.name}"
        view.verdict = str(doc.overall)
        view.headline.append(f"status: {doc.status}")
        if doc.reason:
            view.headline.append(f"reason: {doc.reason}")
        if doc.status != "completed":
            why = f": {doc.reason}" if doc.reason else ""
            view.warnings.append(
                f"the {doc.suite} suite did not complete (status {doc.status}){why}"
            )
        view.tables.append(
            verdict_table(
                doc.verdicts, "Verdicts (95% intervals; thresholds in the statistic's unit)"
            )
        )
        p = doc.part
        if isinstance(p, SoakPart):
            _soak(path, p, view)
        elif isinstance(p, FloodPart):
            _flood(path, p, view)
        elif isinstance(p, MixedPart):
            _mixed(doc, p, view)
        elif isinstance(p, ConsistencyPart):
            _consistency(path, p, view)


def _memory_chart(path: Path, view: SuiteView, hours: bool) -> None:
    samples, bad = read_rows(path / MEMORY, memory_sample)
    if bad:
        view.warnings.append(f"{MEMORY}: {len(bad)} line(s) unreadable")
    series: dict[str, tuple[list[float | None], list[float | None]]] = {}
    for k, (ts, ys) in memory_series(samples).items():
        series[k] = ([t / 3600 if hours else t for t in ts], [y / 2**20 for y in ys])
    if series:
        view.charts.append(Chart(
            "Memory series (leak verdicts above)", "hours" if hours else "seconds", "MiB",
            [Series(k, [ts[i] for i in thin(len(ts))], [ys[i] for i in thin(len(ys))])
             for k, (ts, ys) in sorted(series.items())],
        ))  # fmt: skip


def _soak(path: Path, p: SoakPart, view: SuiteView) -> None:
    view.headline.append(
        f"soak {f(p.soak_s)} s in {p.windows} window(s), {p.requests} requests, "
        f"{p.segments} segment(s); disk {f(p.disk_bytes_per_request)} B/request"
    )
    wins, bad = read_rows(path / WINDOWS, SoakWindow.from_json)
    if bad:
        view.warnings.append(f"{WINDOWS}: {len(bad)} line(s) unreadable")
    if not wins:
        view.warnings.append(f"{WINDOWS}: no finished window")
    t: list[float | None] = [w.t_s / 60 for w in wins]
    lat = [("TTFT p50", "ttft", "p50"), ("TTFT p99", "ttft", "p99"),
           ("TPOT p50", "tpot", "p50"), ("TPOT p99", "tpot", "p99")]  # fmt: skip

    def pct(w: SoakWindow, what: str, q: str) -> float | None:
        return (w.stats.ttft_ms if what == "ttft" else w.stats.tpot_ms).get(q)

    if wins:
        view.charts.append(Chart("Per-window latency", "minutes", "ms", [
            Series(n, t, [pct(w, k, q) for w in wins]) for n, k, q in lat
        ]))  # fmt: skip
        view.charts.append(Chart("Per-window throughput and errors", "minutes", "", [
            Series("output tok/s", t, [w.stats.output_tok_per_s for w in wins]),
            Series("requests/s", t, [w.stats.req_per_s for w in wins]),
            Series("error rate (%)", t, [None if w.stats.error_rate is None
                                         else 100 * w.stats.error_rate for w in wins]),
        ]))  # fmt: skip
    if 0 < len(wins) <= MAX_TABLE_WINDOWS:
        view.tables.append(Table("Windows", [
            "window", "start s", "end s", "requests", "error rate", "output tok/s",
            "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "errors by kind",
        ], [[str(w.window), f(w.t_start_s), f(w.t_end_s), str(w.stats.requests),
             f(w.stats.error_rate), f(w.stats.output_tok_per_s), f(pct(w, "ttft", "p50")),
             f(pct(w, "ttft", "p99")), f(pct(w, "tpot", "p50")), counts(w.stats.errors)]
            for w in wins]))  # fmt: skip
    _memory_chart(path, view, hours=p.soak_s > 7200)


def _flood(path: Path, p: FloodPart, view: SuiteView) -> None:
    steps = p.steps

    def ttft(s: FloodStep, q: str) -> float | None:
        return None if s.ttft_ms is None else s.ttft_ms.get(q)

    view.headline.append(f"{len(steps)} step(s)")
    view.tables.append(Table("Steps", [
        "input tokens", "concurrency", "requests", "ok", "TTFT p50 ms", "TTFT p90 ms",
        "TTFT max ms", "prefill tok/s (p50)", "errors by kind",
    ], [[f(s.input_tokens), str(s.concurrency), str(s.requests), str(s.ok),
         f(ttft(s, "p50")), f(ttft(s, "p90")), f(ttft(s, "max")), f(s.prefill_tok_per_s_p50),
         counts(s.errors)] for s in steps]))  # fmt: skip
    fit = p.fit
    if fit is not None and fit.error:
        view.headline.append(f"TTFT fit: none ({fit.error}, n={fit.n})")
    elif fit is not None:
        none = Estimate()
        rows = [[f"{k} ({unit})", f(fit.coef.get(k, none).estimate),
                 interval(fit.coef.get(k, none).ci_low, fit.coef.get(k, none).ci_high)]
                for k, unit in (("a", "ms"), ("b", "ms/token"), ("c", "ms/token^2"))]  # fmt: skip
        rows.append(["R^2", f(fit.r2), ""])
        rows.append(["n", str(fit.n), ""])
        view.tables.append(Table("TTFT = a + b L + c L^2 (least squares, 95% t-intervals)",
                                 ["coefficient", "estimate", "95% interval"], rows))  # fmt: skip
    concs = sorted({s.concurrency for s in steps})
    series = [
        Series(f"TTFT p50, c={c}", [float(s.input_tokens) for s in steps if s.concurrency == c],
               [ttft(s, "p50") for s in steps if s.concurrency == c], "lines+markers")
        for c in concs
    ]  # fmt: skip
    coef = [fit.coef[k].estimate if fit is not None and k in fit.coef else None for k in "abc"]
    xs = [float(s.input_tokens) for s in steps]
    if xs and fit is not None and not fit.error:
        a, b, c2 = coef
        if a is not None and b is not None and c2 is not None:
            lo, hi = min(xs), max(xs)
            grid = [lo + (hi - lo) * i / 49 for i in range(50)]
            series.append(Series("fit a + bL + cL^2", grid,
                                 [a + b * x + c2 * x * x for x in grid], "lines", "dot"))  # fmt: skip
    if steps:
        view.charts.append(Chart("TTFT against input length", "input tokens", "ms", series))
        view.charts.append(Chart("Prefill throughput against input length", "input tokens",
                                 "input tokens / s (p50 of input / TTFT)", [
            Series(f"c={c}", [float(s.input_tokens) for s in steps if s.concurrency == c],
                   [s.prefill_tok_per_s_p50 for s in steps if s.concurrency == c],
                   "lines+markers")
            for c in concs]))  # fmt: skip
    _memory_chart(path, view, hours=False)


def _ci(e: Estimate | None) -> str:
    if e is None or e.estimate is None:
        return "—"
    return f"{f(e.estimate)} ({interval(e.ci_low, e.ci_high)})"


def _mixed(doc: StressDoc, p: MixedPart, view: SuiteView) -> None:
    eps = p.endpoints
    view.headline.append(f"{len(eps)} endpoint(s); {len(doc.runs)} run(s)")
    view.tables.append(Table("Mixed against solo: % change with 95% interval", [
        "endpoint", "URL", "solo / mixed requests", "TTFT p50 %", "TTFT p99 %", "TPOT p50 %",
        "TPOT p99 %", "TTFT jitter solo %", "TTFT jitter mixed %", "TPOT jitter mixed %",
    ], [[f"ep{e.endpoint}", e.url, f"{e.solo_requests} / {e.mixed_requests}",
         *(_ci(e.estimates.get(k)) for k in (
             "ttft_p50_change_pct", "ttft_p99_change_pct", "tpot_p50_change_pct",
             "tpot_p99_change_pct", "ttft_jitter_solo_pct", "ttft_jitter_mixed_pct",
             "tpot_jitter_mixed_pct"))] for e in eps]))  # fmt: skip
    m = p.matrix
    if m:
        view.tables.append(Table(
            "Interference matrix: " + p.matrix_note,
            ["endpoint i \\ j"] + [f"ep{j}" for j in range(len(m))],
            [[f"ep{i}"] + [_ci(c) for c in row] for i, row in enumerate(m)],
        ))  # fmt: skip


def _consistency(path: Path, p: ConsistencyPart, view: SuiteView) -> None:
    unit = p.unit
    view.headline.append(f"baseline {p.baseline}; positions in {unit}s")
    view.tables.append(Table("Runs against the baseline", [
        "run", "compared", "identical fraction", "divergent", "missing",
        f"first differing {unit} (min)", f"first differing {unit} (median)", "similarity (mean)",
    ], [[c.run, str(c.compared), f(c.identical_fraction), str(c.divergent), str(c.missing),
         f(c.first_diff_min), f(c.first_diff_median), f(c.similarity_mean)]
        for c in p.comparisons]))  # fmt: skip
    pairs, bad = read_rows(path / DIVERGENT, Divergence.from_json)
    if bad:
        view.warnings.append(f"{DIVERGENT}: {len(bad)} line(s) unreadable")

    def cut(s: str) -> str:
        return s[:PAIR_CHARS] + ("..." if len(s) > PAIR_CHARS else "")

    view.tables.append(Table(
        f"Diverging pairs ({len(pairs)}; first {min(len(pairs), MAX_PAIRS)} shown, all in "
        f"{DIVERGENT})",
        ["run", "prompt", f"first differing {unit}", "similarity", "baseline", "output"],
        [[d.run, str(d.idx), f(d.first_diff), f(d.similarity), cut(d.baseline), cut(d.output)]
         for d in pairs[:MAX_PAIRS]],
        left=6,  # texts
    ))  # fmt: skip
