"""A Markdown summary of a report, for pasting into issues and pull requests."""

from __future__ import annotations

from pathlib import Path

from accelbench.metrics.compare import METRICS as COMPARE_METRICS
from accelbench.metrics.frontier import FRONTIER_METRICS
from accelbench.report.cache import (
    BIN_HEAD,
    CACHE_HEAD,
    bin_rows,
    cache_of,
    cache_row,
    headline,
    pct,
    sessions_text,
)
from accelbench.report.data import FIGURES, ReportData, SetView
from accelbench.report.html import fmt
from accelbench.report.knee import set_knee
from accelbench.report.sections import SuiteView
from accelbench.report.verdicts import markdown_line, md_cell
from accelbench.store.rundir import write_text_atomic
from accelbench.validate import output_file

MD_FIGURES = (
    "interactivity",
    "output_tps_per_gpu",
    "total_tps_per_gpu",
    "ttft_p50_ms",
    "tpot_p50_ms",
    "e2e_p99_ms",
    "error_rate",
)


def render_markdown(data: ReportData) -> str:
    names = [s.name for s in data.sets] + [s.name for s in data.suites if s.kind != "mlperf"]
    out = [f"## accelbench: {', '.join(md_cell(n) for n in names)}", ""]
    for su in data.suites:
        out += _suite(su)
    for sv in data.sets:
        out.append(f"### {md_cell(sv.name)} ({sv.set.gpus} GPU(s))")
        out.append("")
        head = ["point"] + [f"{FIGURES[k].label} ({FIGURES[k].unit})" for k in MD_FIGURES]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for p in sv.points:
            cells = [md_cell(p.label)] + [md_cell(fmt(p.figures.get(k))) for k in MD_FIGURES]
            out.append("| " + " | ".join(cells) + " |")
        if not sv.points:
            out.append("| (no usable points) |" + " |" * len(MD_FIGURES))
        out.append("")
        if data.target:
            for m, v in sv.at_target.items():
                val = f"{v.value:,.1f}" if v.value is not None else md_cell(v.reason)
                out.append(f"- {FRONTIER_METRICS[m]} at {data.target:g} tok/s/user: {val}")
            out.append("")
        if sv.goodput is not None:
            best = sv.best_goodput
            slo = ", ".join(f"{k} <= {v:g}" for k, v in data.slo.items())
            out.append(f"- Highest load meeting {slo}: {md_cell(best.label) if best else 'none'}")
            out.append("")
        out += _cache(sv)
        if sv.warnings:
            out.append("<details><summary>Warnings</summary>")
            out.append("")
            out += [f"- {md_cell(w)}" for w in sv.warnings]
            out.append("")
            out.append("</details>")
            out.append("")
    if data.comparisons or data.comparison_errors:
        out.append(f"### Comparisons (A = {md_cell(data.sets[0].name)})")
        out.append("")
        for e in data.comparison_errors:
            out.append(f"- **not compared**: {md_cell(e)}")
        for c in data.comparisons:
            for verdict in c.verdicts:
                out.append(f"{markdown_line(verdict)} ({md_cell(c.condition)})")
        rows = [
            (c, est)
            for c in data.comparisons
            for est in c.estimates
            if est.metric in ("output_tps_per_gpu", "total_tps_per_gpu", "ttft_p50_ms")
        ]
        diffs = [(c, est) for c in data.comparisons for est in c.estimates if est.is_difference]
        if rows:
            out.append("")
            out.append("| B vs A | condition | metric | A | B | B/A | 95% CI |")
            out.append("|---|---|---|---|---|---|---|")
            for c, est in rows:
                ci = (
                    f"[{fmt(est.lo)}, {fmt(est.hi)}]"
                    if est.lo is not None
                    else md_cell(est.note or "—")
                )
                out.append(
                    f"| {md_cell(c.b_name)} | {md_cell(c.condition)} | "
                    f"{COMPARE_METRICS[est.metric].description} | {fmt(est.a)} | {fmt(est.b)} | "
                    f"{fmt(est.ratio)} | {ci} |"
                )
        if diffs:
            out.append("")
            out.append("| B vs A | condition | metric | A | B | B - A (points) | 95% CI |")
            out.append("|---|---|---|---|---|---|---|")
            for c, est in diffs:
                ci = (
                    f"[{est.diff_lo:+.2f}, {est.diff_hi:+.2f}]"
                    if est.diff_lo is not None and est.diff_hi is not None
                    else md_cell(est.note or "—")
                )
                d = "n/a" if est.diff_pp is None else f"{est.diff_pp:+.2f}"
                out.append(
                    f"| {md_cell(c.b_name)} | {md_cell(c.condition)} | "
                    f"{COMPARE_METRICS[est.metric].description} | {pct(est.a)} | {pct(est.b)} | "
                    f"{d} | {ci} |"
                )
        out.append("")
    out.append(
        "_Interactivity = 1000 / p50 TPOT; throughput per GPU over the measured window; "
        "frontier values by PCHIP, never extrapolated; "
        "CIs: 95%, methods in docs/ANALYSIS.md (Intervals)._"
    )
    return "\n".join(out) + "\n"


def _cache(sv: SetView) -> list[str]:
    """The set's "Prefix cache" section where a point's run has one: the hit rates side by
    side per point, then each point's headline and TTFT by turn and by cached share."""
    got = [(p.label, c) for p in sv.points if (c := cache_of(p.run.summary)) is not None]
    if not got:
        return []
    out = [f"#### Prefix cache: {md_cell(sv.name)}", ""]
    out.append("| " + " | ".join(CACHE_HEAD) + " |")
    out.append("|" + "---|" * len(CACHE_HEAD))
    out += ["| " + " | ".join(md_cell(x) for x in cache_row(lab, c)) + " |" for lab, c in got]
    out.append("")
    for lab, c in got:
        out.append(f"- {md_cell(lab)}: {md_cell(headline(c))}")
        if (ss := sessions_text(c)) is not None:
            out.append(f"  - {md_cell(ss)}")
    if (knee := set_knee([p.run for p in sv.points])) is not None:
        out += [f"- {md_cell(line)}" for line in knee.lines()]
    rows = [(lab, r) for lab, c in got for r in bin_rows(c)]
    if rows:
        out.append("")
        out.append("| point | " + " | ".join(BIN_HEAD) + " |")
        out.append("|" + "---|" * (len(BIN_HEAD) + 1))
        out += ["| " + " | ".join(md_cell(x) for x in [lab, *r]) + " |" for lab, r in rows]
    out.append("")
    return out


def _suite(su: SuiteView) -> list[str]:
    """A stress / shadow / MLPerf section: the same tables as the HTML report."""
    out = [f"### {md_cell(su.title)}" + (f": **{md_cell(su.verdict)}**" if su.verdict else ""), ""]
    out += [f"- {md_cell(line)}" for line in su.headline]
    out += [f"- warning: {md_cell(w)}" for w in su.warnings]
    out.append("")
    for t in su.tables:
        out.append(f"**{md_cell(t.title)}**")
        out.append("")
        out.append("| " + " | ".join(md_cell(h) for h in t.head) + " |")
        out.append("|" + "---|" * len(t.head))
        out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in t.rows]
        if not t.rows:
            out.append("| (none) |" + " |" * (len(t.head) - 1))
        out.append("")
    return out


def write_markdown(data: ReportData, path: str | Path) -> Path:
    p = output_file("--markdown", path)
    write_text_atomic(p, render_markdown(data))
    return p
