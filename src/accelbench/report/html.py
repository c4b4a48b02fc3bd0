"""One self-contained HTML report: Plotly inlined once, no network needed to open it.

Safety: every text that comes from a run (labels, model names, prompts, outputs, error
messages) is HTML-escaped where it enters markup, and the figure data is embedded as JSON
with ``<``, ``>`` and ``&`` written as ``\\u003c`` etc., so nothing in a run can close the
script element or inject markup. Plotly renders trace names and hover text as a subset of
HTML, so those strings are escaped too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from accelbench import __version__
from accelbench.metrics.compare import METRICS as COMPARE_METRICS
from accelbench.metrics.format import sig
from accelbench.metrics.frontier import FRONTIER_METRICS
from accelbench.metrics.registry import CACHE
from accelbench.metrics.registry import FIGURES as REGISTRY
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
from accelbench.report.data import (
    BOX_QUANTILES,
    FIGURES,
    HEADLINE,
    HEADLINE_MIN_REQUESTS,
    LATENCY_METRICS,
    WINDOW_DEF,
    ReportData,
    SetView,
)
from accelbench.report.knee import set_knee
from accelbench.report.sections import Chart, SuiteView
from accelbench.report.verdicts import html_line, html_text
from accelbench.store.rundir import write_text_atomic
from accelbench.validate import output_file

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;
max-width:1300px}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:1.8em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:.9em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.plot{width:100%;height:460px}.small{height:360px}
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:6px 10px;margin:4px 0}
.verdict{font-weight:bold;padding:1px 6px;border-radius:3px}
.inconclusive,.unknown,.na{background:#eee}
.pass,.go,.VALID{background:#d7f5dd}.fail,.no-go,.INVALID{background:#fadadd}
.warn-v{background:#fff0c0}
pre.sample{white-space:pre-wrap;background:#f8f8f8;border:1px solid #eee;padding:6px;
max-height:10em;overflow:auto}
.muted{color:#777}
"""

# Installed first: any JavaScript error or console.error lands in #js-errors, so a test (or a
# reader) can see it in the DOM.
_ERROR_HOOK = """
window.__abErrors=[];
function __abErr(m){window.__abErrors.push(String(m));var e=document.getElementById('js-errors');
if(e){e.textContent=window.__abErrors.join('\\n');e.setAttribute('data-count',
window.__abErrors.length);}}
window.addEventListener('error',function(ev){__abErr('error: '+ev.message);});
window.addEventListener('unhandledrejection',function(ev){__abErr('rejection: '+ev.reason);});
(function(){var ce=console.error;console.error=function(){__abErr('console.error: '+
Array.prototype.join.call(arguments,' '));return ce.apply(console,arguments);};})();
"""

_RENDER = """
(function(){
var figs=JSON.parse(document.getElementById('ab-figures').textContent);
var done=0;
figs.forEach(function(f){
  var el=document.getElementById(f.div);
  if(!el){__abErr('missing plot element '+f.div);return;}
  try{Plotly.newPlot(el,f.data,f.layout,{responsive:true,displaylogo:false});done++;}
  catch(e){__abErr('plot '+f.div+': '+e);}
});
var s=document.getElementById('ab-status');
s.setAttribute('data-rendered',done);s.setAttribute('data-expected',figs.length);
s.textContent=done+' of '+figs.length+' plots rendered';
})();
"""


def esc(x: Any) -> str:
    return html_text(x)


def _script_json(obj: Any) -> str:
    """JSON safe to embed inside <script> (no '<', '>', '&' or line separators)."""
    s = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return (
        s.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def fmt(v: Any, digits: int = 3) -> str:
    """A figure: ``digits`` significant digits, whole from 1,000 on (ints as they are)."""
    return sig(v, digits, big=1000) if v is None or isinstance(v, float) else str(v)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    return v


# ----------------------------------------------------------------------------- figures
# Plotly's figure format is open-ended JSON; these name the parts this report sets (and
# only those), so a misspelt key is a type error. Plotly reads them as-is (plotly.js).


class Title(TypedDict):
    text: str


class Axis(TypedDict, total=False):
    title: Title
    type: str  # "log"
    rangemode: str  # "tozero"


class Marker(TypedDict, total=False):
    color: str
    size: int
    opacity: float
    symbol: str


class Line(TypedDict, total=False):
    color: str
    width: int
    dash: str | None
    shape: str  # "hv": steps


class Trace(TypedDict, total=False):
    """One Plotly trace: scatter (markers or lines) or a box from precomputed quantiles."""

    type: str
    mode: str
    name: str
    legendgroup: str
    showlegend: bool
    x: Sequence[float | str | None]
    y: Sequence[float | None]
    text: list[str]
    hovertemplate: str
    hoverinfo: str
    marker: Marker
    line: Line
    xaxis: str
    yaxis: str
    q1: list[float]  # box traces: the quantiles themselves
    median: list[float]
    q3: list[float]
    lowerfence: list[float]
    upperfence: list[float]
    mean: list[float]


class Shape(TypedDict):
    type: str
    x0: float
    x1: float
    yref: str
    y0: float
    y1: float
    line: Line


class Annotation(TypedDict):
    x: float
    yref: str
    y: float
    text: str
    showarrow: bool


class Layout(TypedDict, total=False):
    title: Title
    xaxis: Axis
    yaxis: Axis
    xaxis2: Axis
    yaxis2: Axis
    grid: dict[str, int | str]  # rows, columns, pattern
    legend: dict[str, str | float]  # orientation, y
    margin: dict[str, int]
    height: int
    shapes: list[Shape]
    annotations: list[Annotation]


class Figure(TypedDict):
    data: list[Trace]
    layout: Layout
    div: NotRequired[str]  # the element it is drawn in (render_html)


Plot = Callable[["Figure | None", str], str]


def _frontier_fig(data: ReportData, metric: str) -> Figure:
    traces: list[Trace] = []
    for i, sv in enumerate(data.sets):
        col = PALETTE[i % len(PALETTE)]
        f = sv.frontiers[metric]
        name = esc(sv.name)
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{name}: all points",
                "x": _clean(f.all_x.tolist()),
                "y": _clean(f.all_y.tolist()),
                "text": [esc(x) for x in f.all_labels],
                "hovertemplate": "%{text}<br>%{x:.1f} tok/s/user<br>%{y:.1f} tok/s/GPU"
                "<extra></extra>",
                "marker": {"color": col, "size": 8, "opacity": 0.45},
            }
        )
        cx, cy = f.curve(120)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{name}: frontier (PCHIP)",
                "x": _clean(cx.tolist()),
                "y": _clean(cy.tolist()),
                "line": {"color": col, "width": 2},
                "hoverinfo": "skip",
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{name}: frontier points",
                "x": _clean(f.x.tolist()),
                "y": _clean(f.y.tolist()),
                "text": [esc(x) for x in f.labels],
                "hovertemplate": "%{text}<br>%{x:.1f} tok/s/user<br>%{y:.1f} tok/s/GPU"
                "<extra></extra>",
                "marker": {"color": col, "size": 10, "symbol": "diamond"},
                "showlegend": False,
            }
        )
        v = sv.at_target.get(metric)
        if v is not None and v.value is not None:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{name} at target",
                    "x": [v.target],
                    "y": [v.value],
                    "marker": {"color": col, "size": 14, "symbol": "x"},
                    "hovertemplate": "%{y:.1f} tok/s/GPU at %{x} tok/s/user<extra></extra>",
                }
            )
    layout: Layout = {
        "title": {"text": f"Frontier: {FRONTIER_METRICS[metric]} vs interactivity"},
        "xaxis": {"title": {"text": "interactivity (tok/s/user) = 1000 / p50 TPOT"}},
        "yaxis": {"title": {"text": FRONTIER_METRICS[metric]}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.2},
        "margin": {"t": 50},
    }
    if data.target:
        layout["shapes"] = [
            {
                "type": "line",
                "x0": data.target,
                "x1": data.target,
                "yref": "paper",
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dash", "color": "#444"},
            }
        ]
        layout["annotations"] = [
            {
                "x": data.target,
                "yref": "paper",
                "y": 1.02,
                "text": f"target {data.target:g} tok/s/user",
                "showarrow": False,
            }
        ]
    return {"data": traces, "layout": layout}


def _latency_fig(data: ReportData, metric: str) -> Figure | None:
    traces: list[Trace] = []
    for i, sv in enumerate(data.sets):
        xs, q1, med, q3, lo, hi, mean = [], [], [], [], [], [], []
        for p in sv.points:
            b = p.box.get(metric)
            if not b:
                continue
            xs.append(esc(p.label) if len(data.sets) == 1 else f"{esc(sv.name)} {esc(p.label)}")
            lo.append(b["p1"])
            q1.append(b["p25"])
            med.append(b["p50"])
            q3.append(b["p75"])
            hi.append(b["p99"])
            mean.append(b["mean"])
        if not xs:
            continue
        traces.append(
            {
                "type": "box",
                "name": esc(sv.name),
                "x": xs,
                "q1": q1,
                "median": med,
                "q3": q3,
                "lowerfence": lo,
                "upperfence": hi,
                "mean": mean,
                "marker": {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    if not traces:
        return None
    q = BOX_QUANTILES
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"{LATENCY_METRICS[metric]} per point (ms)"},
            "yaxis": {"title": {"text": "ms"}, "type": "log"},
            "xaxis": {
                "title": {
                    "text": f"box: p{q[1]}-p{q[3]}, line p{q[2]}, whiskers "
                    f"p{q[0]}-p{q[4]}, dashed mean"
                }
            },
            "margin": {"t": 50},
        },
    }


def _timeline_fig(sv: SetView) -> Figure | None:
    traces: list[Trace] = []
    sources = set()
    for i, p in enumerate(sv.points):
        tl = p.timeline
        if not tl:
            continue
        sources.add(tl.source)
        col = PALETTE[i % len(PALETTE)]
        lab = esc(p.label)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{lab} in flight",
                "legendgroup": lab,
                "x": tl.t_s,
                "y": tl.inflight,
                "line": {"color": col, "shape": "hv"},
                "xaxis": "x",
                "yaxis": "y",
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{lab} tok/s",
                "legendgroup": lab,
                "showlegend": False,
                "x": tl.t_s,
                "y": tl.tokens_per_s,
                "line": {"color": col},
                "xaxis": "x2",
                "yaxis": "y2",
            }
        )
    if not traces:
        return None
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"Timeline: {esc(sv.name)}"},
            "grid": {"rows": 2, "columns": 1, "pattern": "independent"},
            "xaxis": {"title": {"text": "seconds since the run's first send"}},
            "yaxis": {"title": {"text": "requests in flight"}},
            "xaxis2": {"title": {"text": "seconds; tokens: " + "; ".join(sorted(sources))}},
            "yaxis2": {"title": {"text": "output tokens/s"}},
            "height": 560,
            "margin": {"t": 50},
        },
    }


def _telemetry_figs(sv: SetView) -> list[Figure]:
    """One small plot per telemetry metric that has data, a line per point and device."""
    labels: list[str] = []
    for p in sv.points:
        for label in p.telemetry or {}:
            if label not in labels:
                labels.append(label)
    figs: list[Figure] = []
    for label in labels:
        traces: list[Trace] = []
        for i, p in enumerate(sv.points):
            for s in (p.telemetry or {}).get(label, []):
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": f"{esc(p.label)} {esc(s.name)}",
                        "x": list(s.x),
                        "y": list(s.y),
                        "line": {"color": PALETTE[i % len(PALETTE)]},
                    }  # fmt: skip
                )
        figs.append(
            {
                "data": traces,
                "layout": {
                    "title": {"text": f"{esc(label)}: {esc(sv.name)}"},
                    "xaxis": {"title": {"text": "seconds since the run's first send"}},
                    "yaxis": {"title": {"text": esc(label)}},
                    "height": 320,
                    "margin": {"t": 50},
                },
            }
        )
    return figs


def _chart_fig(c: Chart) -> Figure:
    """A suite's chart (report/sections.py) as a Plotly figure."""
    traces: list[Trace] = [
        {
            "type": "scatter",
            "mode": sr.mode,
            "name": esc(sr.name),
            "x": list(sr.x),
            "y": list(sr.y),
            "line": {"color": PALETTE[i % len(PALETTE)], "dash": sr.dash},
        }
        for i, sr in enumerate(c.series)
    ]
    return {
        "data": traces,
        "layout": {
            "title": {"text": esc(c.title)},
            "xaxis": {"title": {"text": esc(c.x_title)}},
            "yaxis": {"title": {"text": esc(c.y_title)}},
            "height": 360,
            "margin": {"t": 50},
        },
    }


# ----------------------------------------------------------------------------- markup


def _table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{h}</th>' for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figures_table(sv: SetView) -> str:
    keys = list(FIGURES)
    head = ["point", "run"] + [f"{esc(FIGURES[k].label)}<br>({esc(FIGURES[k].unit)})" for k in keys]
    rows = [
        [esc(p.label), esc(p.run.path.name)] + [fmt(p.figures.get(k)) for k in keys]
        for p in sv.points
    ]
    return _table(head, rows, left=2)


def _definitions(cache: bool = False) -> str:
    """Every figure's definition; the prefix-cache figures too where a run has them."""
    figs = list(FIGURES.values()) + ([REGISTRY[k] for k in CACHE] if cache else [])
    rows = [[esc(f.label), esc(f.unit), esc(f.definition)] for f in figs]
    rows.append(["Window", "s", esc(WINDOW_DEF)])
    rows.append(
        [
            "Frontier",
            "",
            "non-dominated (interactivity, throughput per GPU) points; values between them "
            "from a monotone piecewise-cubic (PCHIP) interpolant, never extrapolated",
        ]
    )
    rows.append(
        [
            "Ratio CI",
            "",
            "95% interval: t over repeated runs, else over requests; frontier: bootstrap (docs/ANALYSIS.md)",
        ]
    )
    return _table(["figure", "unit", "definition"], rows, left=3)


def _set_section(data: ReportData, sv: SetView) -> str:
    out = [
        f"<h3>{esc(sv.name)}</h3>",
        f'<p class="muted">{esc(sv.set.path)}; '
        f"GPUs behind the endpoint: {sv.set.gpus}; workload: {esc(_wl(sv))}</p>",
    ]
    if sv.points:
        out.append(_figures_table(sv))
    else:
        out.append("<p>No point of this input has figures.</p>")
    if data.target:
        rows = []
        for m, v in sv.at_target.items():
            rows.append(
                [
                    esc(FRONTIER_METRICS[m]),
                    fmt(v.value) if v.value is not None else esc(v.reason),
                    esc(" – ".join(v.between)) if v.between else "",
                ]
            )
        out.append(f"<p>At the target {data.target:g} tok/s/user (frontier, PCHIP):</p>")
        out.append(_table(["metric", "value (tok/s/GPU)", "between points"], rows))
    if sv.goodput is not None:
        slo = ", ".join(f"{k} ≤ {v:g}" for k, v in data.slo.items())
        rows = [
            [
                esc(g.label),
                str(g.requests),
                str(g.good),
                fmt(g.fraction),
                fmt(g.requests_per_s),
                fmt(g.output_tokens_per_s),
                "yes" if g.meets else "no",
            ]
            for g in sv.goodput
        ]
        out.append(f"<p>Goodput under SLOs {esc(slo)}:</p>")
        out.append(
            _table(
                ["point", "measured", "met SLOs", "fraction", "req/s", "output tok/s", "meets"],
                rows,
            )
        )
        best = sv.best_goodput
        out.append(
            f"<p>Highest load meeting the SLOs: <b>{esc(best.label)}</b></p>"
            if best
            else "<p>No point meets the SLOs.</p>"
        )
    return "\n".join(out)


def _badge(verdict: str | None) -> str:
    if not verdict:
        return ""
    cls = "warn-v" if verdict == "warn" else verdict.split(",")[0].split()[0]
    return f' <span class="verdict {esc(cls)}">{esc(verdict)}</span>'


def _suite_section(sv: SuiteView, plot: Plot) -> str:
    """One stress / shadow / MLPerf section: headline, tables (verdicts first), charts."""
    out = [f"<h3>{esc(sv.title)}{_badge(sv.verdict)}</h3>",
           f'<p class="muted">{esc(sv.path)}</p>']  # fmt: skip
    out += [f"<p>{esc(line)}</p>" for line in sv.headline]
    for t in sv.tables:
        out.append(f"<p><b>{esc(t.title)}</b></p>")
        if t.rows:
            out.append(
                _table([esc(h) for h in t.head], [[esc(c) for c in r] for r in t.rows], t.left)
            )
        else:
            out.append('<p class="muted">(none)</p>')
    for c in sv.charts:
        out.append(plot(_chart_fig(c), "plot small"))
    if sv.text:
        out.append(
            "<details><summary>LoadGen's mlperf_log_summary.txt, unchanged</summary>"
            f'<pre class="sample">{esc(sv.text)}</pre></details>'
        )
    return "\n".join(out)


def _wl(sv: SetView) -> str:
    w = sv.set.workload() or {}
    return ", ".join(f"{k}={v}" for k, v in w.items() if v is not None) or "unknown"


def _status_badge(status: str) -> str:
    cls = {"completed": "pass", "failed": "fail", "interrupted": "warn-v"}.get(status, "")
    return f'<span class="verdict {cls}">{esc(status)}</span>'


def _overview(data: ReportData) -> str:
    """What a reader wants first: each point's status, health, headline figures with their
    95 % intervals, and the configuration it ran with."""
    if not data.sets:
        return ""
    out = ['<h2 id="overview">Status, health and headline figures</h2>']
    for sv in data.sets:
        if len(data.sets) > 1:
            out.append(f"<h3>{esc(sv.name)}</h3>")
        if not sv.headlines:
            out.append("<p>No point of this input has figures.</p>")
            continue
        head = ["point", "status", "health"] + [
            f"{esc(FIGURES[k].label)}<br>({esc(FIGURES[k].unit)}) [95% CI]" for k in HEADLINE
        ]
        rows = []
        for h in sv.headlines:
            cells = [esc(h.label), _status_badge(h.status)]
            cells.append(_badge(h.health).strip() if h.health else "not judged (no telemetry)")
            for k in HEADLINE:
                v, lo, hi = h.figures[k]
                ci = f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else ""
                cells.append(fmt(v) + ci)
            rows.append(cells)
        out.append(_table(head, rows, left=3))
        few = [h.label for h in sv.headlines if (h.requests or 0) < HEADLINE_MIN_REQUESTS]
        if few:
            out.append(
                f'<p class="muted">No interval for {esc(", ".join(few))}: fewer than '
                f"{HEADLINE_MIN_REQUESTS} measured requests, too few for a 95 % interval "
                "that holds.</p>"
            )
        for h in sv.headlines:
            if h.health_findings:
                out.append(f"<p>Health of {esc(h.label)}:</p><ul>")
                out += [f"<li>{esc(x)}</li>" for x in h.health_findings]
                out.append("</ul>")
        configs = {tuple(h.config) for h in sv.headlines}
        for h in sv.headlines if len(configs) > 1 else sv.headlines[:1]:
            cfg_rows = [[esc(k), esc(v)] for k, v in h.config]
            title = "Configuration" + (f" of {esc(h.label)}" if len(configs) > 1 else "")
            out.append(f"<p><b>{title}</b></p>")
            out.append(_table(["setting", "value"], cfg_rows, left=2))
    return "\n".join(out)


def _verdicts(data: ReportData) -> str:
    if len(data.sets) < 2 and not data.comparison_errors:
        return ""
    out = ['<h2 id="comparisons">Comparisons (B against A)</h2>']
    if data.sets:
        out.append(f"<p>A = {esc(data.sets[0].name)}; details in the tables below.</p>")
    for e in data.comparison_errors:
        out.append(f'<div class="warn">{esc(e)}</div>')
    seen: set[str] = set()
    for c in data.comparisons:
        for w in c.warnings:
            if (c.b_name, w) not in seen:
                seen.add((c.b_name, w))  # type: ignore[arg-type]
                out.append(f'<div class="warn">{esc(c.b_name)}: {esc(w)}</div>')
        for v in c.verdicts:
            out.append(
                f"<p>{esc(c.b_name)} vs {esc(c.a_name)} ({esc(c.condition)}): {html_line(v)}</p>"
            )
    return "\n".join(out)


def _comparison_tables(data: ReportData) -> str:
    if not data.comparisons:
        return ""
    out = ['<h3 id="ratios">Ratios at matched conditions</h3>']
    pairs: dict[tuple[str, str], list[list[str]]] = {}
    for c in data.comparisons:
        rows = pairs.setdefault((c.b_name, c.a_name), [])
        for e in c.estimates:
            if e.is_difference:  # a hit rate: B - A in points
                a, b = pct(e.a), pct(e.b)
                eff = "n/a" if e.diff_pp is None else f"{e.diff_pp:+.2f}pp (B − A)"
                ci = (f"[{e.diff_lo:+.2f}, {e.diff_hi:+.2f}]pp"
                      if e.diff_lo is not None and e.diff_hi is not None else "—")  # fmt: skip
            else:
                a, b, eff = fmt(e.a), fmt(e.b), fmt(e.ratio)
                ci = f"[{fmt(e.lo)}, {fmt(e.hi)}]" if e.lo is not None else "—"
            rows.append(
                [
                    esc(c.condition),
                    esc(COMPARE_METRICS[e.metric].description),
                    a,
                    b,
                    eff,
                    ci,
                    esc(e.note or ""),
                ]
            )
    for (b, a), rows in pairs.items():
        out.append(f"<p>{esc(b)} (B) against {esc(a)} (A):</p>")
        out.append(
            _table(["condition", "metric", "A", "B", "B / A", "95% CI", "note"], rows, left=2)
        )
    return "\n".join(out)


def _cache_section(data: ReportData) -> str:
    """The "Prefix cache" section where a run has one (report/cache.py's words): per set,
    the three hit rates and the gap per point, each point's headline, TTFT by turn and by
    cached share."""
    out: list[str] = []
    for sv in data.sets:
        got = [(p.label, c) for p in sv.points if (c := cache_of(p.run.summary)) is not None]
        if not got:
            continue
        out.append(f"<h3>{esc(sv.name)}</h3>")
        out.append(_table([esc(h) for h in CACHE_HEAD],
                          [[esc(x) for x in cache_row(lab, c)] for lab, c in got]))  # fmt: skip
        for lab, c in got:
            ss = sessions_text(c)
            out.append(
                f"<p>{esc(lab)}: {esc(headline(c))}" + (f"; {esc(ss)}" if ss else "") + "</p>"
            )
        if (knee := set_knee([p.run for p in sv.points])) is not None:
            out += [f"<p>{esc(line)}</p>" for line in knee.lines()]
        rows = [[esc(x) for x in [lab, *r]] for lab, c in got for r in bin_rows(c)]
        if rows:
            out.append(_table([esc(h) for h in ["point", *BIN_HEAD]], rows, left=3))
    if not out:
        return ""
    return "\n".join(['<h2 id="cache">Prefix cache</h2>', *out])


def render_html(data: ReportData) -> str:
    figs: list[Figure] = []
    body: list[str] = []

    def plot(fig: Figure | None, cls: str = "plot") -> str:
        if fig is None:
            return '<p class="muted">No data for this plot.</p>'
        div = f"plot-{len(figs)}"
        figs.append({"div": div, **fig})
        return f'<div id="{div}" class="{cls}"></div>'

    names = ", ".join(
        [esc(s.name) for s in data.sets] + [esc(s.name) for s in data.suites if s.kind != "mlperf"]
    )
    body.append(f"<h1>accelbench report: {names}</h1>")
    body.append(
        f'<p class="muted">accelbench {esc(__version__)}, generated {esc(data.generated_at)}'
        + (f"; target interactivity {data.target:g} tok/s/user" if data.target else "")
        + '. <span id="ab-status" data-rendered="0">plots not rendered (JavaScript off?)'
        "</span></p>"
    )
    body.append('<pre id="js-errors" data-count="0" class="muted"></pre>')
    body.append(_overview(data))

    warn = [(sv.name, w) for sv in data.sets for w in sv.warnings]
    warn += [(su.name, w) for su in data.suites for w in su.warnings]
    body.append('<h2 id="warnings">Warnings and missing data</h2>')
    if warn:
        body += [f'<div class="warn"><b>{esc(n)}</b>: {esc(w)}</div>' for n, w in warn]
    else:
        body.append("<p>None: every point complete, no client-health warnings.</p>")

    body.append(_verdicts(data))

    if data.suites:
        body.append('<h2 id="suites">Stress suites, shadow verdicts and MLPerf runs</h2>')
        body += [_suite_section(su, plot) for su in data.suites]
    if not data.sets:
        return _page(names, body, figs)

    body.append('<h2 id="frontier">Throughput-interactivity frontier</h2>')
    if max(sv.frontier_points for sv in data.sets) < 2:
        # one point is not a frontier: its figures are in the overview above
        body.append(
            '<p class="muted">A frontier needs at least two load points (a sweep); this '
            "report has one per input.</p>"
        )
    else:
        for m in FRONTIER_METRICS:
            has = any(not sv.frontiers[m].empty or sv.frontiers[m].all_x.size for sv in data.sets)
            body.append(plot(_frontier_fig(data, m) if has else None))

    if cache := _cache_section(data):
        body.append(cache)

    body.append('<h2 id="latency">Latency distributions per point</h2>')
    for m in LATENCY_METRICS:
        body.append(plot(_latency_fig(data, m), "plot small"))

    body.append('<h2 id="timeline">Timelines</h2>')
    for sv in data.sets:
        body.append(plot(_timeline_fig(sv)))

    body.append('<h2 id="telemetry">Telemetry</h2>')
    for sv in data.sets:
        tfigs = _telemetry_figs(sv)
        if not tfigs:
            body.append(f'<p class="muted">{esc(sv.name)}: no telemetry.parquet in these runs.</p>')
        for f in tfigs:
            body.append(plot(f, "plot small"))

    body.append('<h2 id="tables">Figures</h2>')
    for sv in data.sets:
        body.append(_set_section(data, sv))
    body.append(_comparison_tables(data))
    body.append("<h3>Definitions</h3>")
    body.append(_definitions(cache=bool(cache)))

    samples = [(sv.name, p.label, s) for sv in data.sets for p in sv.points for s in p.samples]
    if samples:
        body.append('<h2 id="samples">Sample model output</h2>')
        for n, lab, s in samples[:12]:
            body.append(f'<p>{esc(n)} {esc(lab)}:</p><pre class="sample">{esc(s)}</pre>')

    return _page(names, body, figs)


def _page(names: str, body: list[str], figs: list[Figure]) -> str:
    from plotly.offline import get_plotlyjs

    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>accelbench report: {names}</title>"
        f"<style>{_CSS}</style>"
        f"<script>{_ERROR_HOOK}</script>"
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        "</head><body>\n"
        + "\n".join(body)
        + f'\n<script type="application/json" id="ab-figures">{_script_json(_clean(figs))}</script>'
        + f"\n<script>{_RENDER}</script>\n</body></html>\n"
    )


def write_html(data: ReportData, path: str | Path) -> Path:
    p = output_file("--out", path)
    write_text_atomic(p, render_html(data))
    return p
