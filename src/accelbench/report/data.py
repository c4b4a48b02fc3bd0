"""What the HTML and Markdown reports show, computed once: per-point figures, frontiers and
their values at the target interactivity, goodput, latency distributions (quantiles, not
every request), binned timelines, comparisons, and every warning about missing data.

Everything here is aggregated so that a sweep of a million requests makes a small report.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from accelbench.errors import AccelbenchError
from accelbench.metrics.compare import (
    Comparison,
    check_comparison_options,
    compare_sets,
    parse_claim,
)
from accelbench.metrics.frontier import (
    FRONTIER_METRICS,
    Frontier,
    FrontierValue,
    GoodputPoint,
    build_frontier,
    check_goodput_options,
    goodput_points,
    highest_load_meeting,
    left_off_frontier,
)
from accelbench.metrics.parallel import ordered_map
from accelbench.metrics.registry import FIGURES as REGISTRY
from accelbench.metrics.stats import PreparedBatch, StreamedDescribe
from accelbench.metrics.values import column_np
from accelbench.report.sections import Series, SuiteSection, SuiteView, find_section, load_section
from accelbench.store.reader import RunInfo, dig
from accelbench.store.sets import SweepSet, load_inputs

BOX_QUANTILES = (1, 25, 50, 75, 99)
LATENCY_METRICS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E latency"}
TIMELINE_BINS = 120
EXACT_TIMELINE_MAX_REQUESTS = 5000
SLICE_ROWS = 1 << 16  # requests read at once for the distributions and the timeline
TEXT_SAMPLES = 3
TEXT_CHARS = 400

# Figure columns of the tables, in order (declared in accelbench.metrics.registry).
FIGURES = {
    k: REGISTRY[k]
    for k in (
        "interactivity", "output_tps_per_gpu", "total_tps_per_gpu", "output_tps",
        "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
        "e2e_p50_ms", "e2e_p99_ms", "error_rate",
    )
}  # fmt: skip
WINDOW_DEF = "window: first send to last content chunk of the measured (non-warm-up) requests"


@dataclass
class Timeline:
    """In-flight requests and output tokens/s in bins over a run (seconds since its first
    send); ``source``: how the tokens were placed in time."""

    t_s: list[float]
    inflight: list[int]
    tokens_per_s: list[float]
    source: str


@dataclass
class PointView:
    run: RunInfo
    label: str
    figures: dict[str, float | None]
    box: dict[str, dict[str, float]] = field(default_factory=dict)
    timeline: Timeline | None = None
    telemetry: dict[str, list[Series]] | None = None  # label -> a series per device
    samples: list[str] = field(default_factory=list)


# Headline figures of the report's overview, each with its 95 % bootstrap interval (the
# comparison's bootstrap, accelbench.metrics.compare: one point, one side).
HEADLINE = ("output_tps_per_gpu", "requests_per_s", "ttft_p50_ms", "tpot_p50_ms", "e2e_p50_ms")
# Below this many measured requests the interval under-covers in simulation (nominal 95 %:
# 92-94 % for closed-loop throughput at 16 to 30 requests, 93 % for a median at 16;
# tests/test_report.py): no interval then, and the report says why.
HEADLINE_MIN_REQUESTS = 100


@dataclass
class Headline:
    """What a reader wants first about one point: how it ended, whether the hardware and
    server were healthy, its headline figures with intervals, and how it was run."""

    label: str
    status: str
    health: str | None  # the verdict; None: not judged (no telemetry)
    health_findings: list[str]
    figures: dict[str, tuple[float | None, float | None, float | None]]  # value, lo, hi
    config: list[tuple[str, str]]
    requests: int | None = None  # measured, completed: what the intervals rest on


@dataclass
class SetView:
    set: SweepSet
    points: list[PointView]
    frontiers: dict[str, Frontier]
    at_target: dict[str, FrontierValue]
    goodput: list[GoodputPoint] | None
    best_goodput: GoodputPoint | None
    warnings: list[str]
    headlines: list[Headline] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.set.name

    @property
    def frontier_points(self) -> int:
        """Usable points: a frontier needs two to be a curve."""
        return len(self.set.usable_runs)


@dataclass
class ReportData:
    sets: list[SetView]
    comparisons: list[Comparison]
    comparison_errors: list[str]
    target: float | None
    claims: list[str]
    slo: dict[str, float]
    generated_at: str
    suites: list[SuiteView] = field(default_factory=list)  # stress, shadow, MLPerf sections


_BOX_NAMES = tuple((f"p{q}", float(q)) for q in BOX_QUANTILES)
# the columns the distributions and the timeline read, a slice of rows at a time
_POINT_COLUMNS = ("warmup", "ok", "t_send", "t_first", "t_last", "osl", *LATENCY_METRICS)


def _box(d: StreamedDescribe) -> dict[str, float] | None:
    plain, _ = d.result()
    if not plain["count"]:
        return None
    out = {name: float(plain[name]) for name, _ in _BOX_NAMES}  # type: ignore[arg-type]
    out["mean"] = float(plain["mean"])  # type: ignore[arg-type]
    out["count"] = int(plain["count"])
    return out


def _ends(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each request's send and end (its last chunk, else its send), ns."""
    t_send = column_np(t, "t_send")
    t_last = column_np(t, "t_last")
    return t_send, np.where(np.isfinite(t_last), t_last, t_send)


def _spread_tokens(t: pa.Table, t0: float, q: np.ndarray) -> np.ndarray:
    """Output tokens delivered before each of the times ``q`` (s since t0) by the requests
    of ``t``, each request's tokens spread evenly between its first and last chunk (the
    first token at the first chunk). A sum over requests: slices add up."""
    t_first, t_last = column_np(t, "t_first"), column_np(t, "t_last")
    osl = np.nan_to_num(column_np(t, "osl"))
    ok = np.isfinite(t_first) & np.isfinite(t_last) & (osl >= 1)
    a, b, n = (t_first[ok] - t0) / 1e9, (t_last[ok] - t0) / 1e9, osl[ok]
    span = b - a
    r = np.where(span > 0, (n - 1) / np.where(span > 0, span, 1), 0.0)
    firsts = np.where(span > 0, 1.0, n)  # a zero-length request delivers all at t_first
    out = np.zeros(q.size)
    for starts, sign in ((a, 1.0), (b, -1.0)):
        o = np.argsort(starts)
        st, rr = starts[o], r[o]
        cr = np.concatenate([[0.0], np.cumsum(rr)])
        cra = np.concatenate([[0.0], np.cumsum(rr * st)])
        k = np.searchsorted(st, q, "left")
        out += sign * (q * cr[k] - cra[k])
    oa = np.argsort(a)
    cf = np.concatenate([[0.0], np.cumsum(firsts[oa])])
    out += cf[np.searchsorted(a[oa], q, "right")]
    return out


def _exact_tokens(run: RunInfo, edges: np.ndarray) -> tuple[np.ndarray, str] | None:
    """Output tokens per bin from every chunk's arrival time (a small run that has them),
    and where they came from."""
    try:
        ct = run.read_requests(("chunk_times", "chunk_tokens"))
        times = pc.list_flatten(ct.column("chunk_times")).to_numpy(zero_copy_only=False)
        if not times.size:
            return None
        w = None
        tok = ct.column("chunk_tokens")
        if tok.null_count == 0:
            flat = pc.list_flatten(tok).to_numpy(zero_copy_only=False)
            if flat.size == times.size:
                w = flat.astype(float)
        tokens = np.asarray(np.histogram(times.astype(float), bins=edges, weights=w)[0], float)
        return tokens, "per-chunk arrival times" + ("" if w is not None else " (1 token each)")
    except (AccelbenchError, ValueError, TypeError):
        return None


def _distributions(
    run: RunInfo, want_timeline: bool
) -> tuple[dict[str, dict[str, float]], Timeline | None, float]:
    """The latency boxes (measured, completed requests) and the timeline (every request)
    of a run, in two passes over its requests a slice of rows at a time, so that a
    72-hour soak's 13 million requests are never held at once: the first finds the run's
    span and the boxes (exact percentiles, as numpy's, by stats.StreamedDescribe), the
    second fills the timeline's bins (and a box whose values moved since the first
    slices: StreamedDescribe.complete). Also the run's first send (ns; inf when none).

    Timeline: in-flight requests and token throughput in TIMELINE_BINS bins over the run;
    tokens from the exact per-chunk arrival times where the run is small enough and has
    them, else each request's tokens spread evenly between its first and last chunk.
    """
    boxes = {k: StreamedDescribe(_BOX_NAMES) for k in LATENCY_METRICS}

    def measured(
        piece: pa.Table, which: Sequence[str]
    ) -> list[tuple[StreamedDescribe, PreparedBatch | None]]:
        meas = ~column_np(piece, "warmup", bool) & column_np(piece, "ok", bool)
        return [(boxes[k], boxes[k].prepare(column_np(piece, k)[meas])) for k in which]

    def first(piece: pa.Table) -> tuple[list[Any], float, float]:
        t_send, end = _ends(piece)
        lo = hi = math.nan
        if np.isfinite(t_send).any():
            lo, hi = float(np.nanmin(t_send)), float(np.nanmax(end))
        return measured(piece, list(boxes)), lo, hi

    # slices in threads (metrics.parallel), committed here in their order: the figures
    # are those of one thread
    t0, t1 = math.inf, -math.inf
    for prepared, lo, hi in ordered_map(first, run.iter_requests(_POINT_COLUMNS, SLICE_ROWS)):
        for d, batch in prepared:
            d.commit(batch)
        if math.isfinite(lo):
            t0, t1 = min(t0, lo), max(t1, hi)
    again = [k for k, d in boxes.items() if not d.complete()]
    for k in again:
        boxes[k].second_pass()
    timeline = want_timeline and math.isfinite(t0) and t1 > t0
    edges = np.linspace(t0, t1, TIMELINE_BINS + 1) if timeline else np.empty(0)
    mids = (edges[:-1] + edges[1:]) / 2
    q = (edges - t0) / 1e9

    def second(piece: pa.Table) -> tuple[list[Any], np.ndarray | None, np.ndarray | None]:
        if not timeline:
            return measured(piece, again), None, None
        t_send, end = _ends(piece)
        flight = np.zeros(mids.size, np.int64)
        for x, sign in ((t_send, 1), (end, -1)):
            x = np.sort(x[np.isfinite(x)])
            flight += sign * np.searchsorted(x, mids, "right")
        return measured(piece, again), flight, _spread_tokens(piece, t0, q)

    inflight = np.zeros(mids.size, np.int64)
    spread = np.zeros(q.size)
    if again or timeline:
        for prepared, flight, tokens in ordered_map(
            second, run.iter_requests(_POINT_COLUMNS, SLICE_ROWS)
        ):
            for d, batch in prepared:
                d.commit(batch)
            if flight is not None and tokens is not None:
                inflight += flight
                spread += tokens
    out = {k: b for k, d in boxes.items() if (b := _box(d))}
    if not timeline:
        return out, None, t0
    exact = None
    if run.has_requests and run.request_rows() <= EXACT_TIMELINE_MAX_REQUESTS:
        exact = _exact_tokens(run, edges)
    tokens, source = exact or (
        np.diff(spread),
        "tokens spread evenly between each request's first and last chunk",
    )
    width_s = (edges[1] - edges[0]) / 1e9
    return (
        out,
        Timeline(
            ((mids - t0) / 1e9).round(4).tolist(),
            inflight.astype(int).tolist(),
            (np.asarray(tokens) / width_s).round(2).tolist(),
            source,
        ),
        t0,
    )


# Telemetry series shown in the report: (column, label, scale to the unit shown).
TELEMETRY_SERIES: tuple[tuple[str, str, float], ...] = (
    ("power_w", "accelerator power (W)", 1.0),
    ("util_gpu", "accelerator utilisation (%)", 100.0),
    ("mem_used_bytes", "accelerator memory used (GB)", 1e-9),
    ("temp_gpu_c", "accelerator temperature (C)", 1.0),
    ("cpu_util", "host CPU (%)", 100.0),
    ("proc_rss_bytes", "server process RSS (GB)", 1e-9),
    ("srv_requests_running", "server: requests running", 1.0),
    ("srv_requests_waiting", "server: requests waiting", 1.0),
    ("srv_kv_cache_usage", "server: KV-cache usage (%)", 100.0),
)


def _telemetry(run: RunInfo, t0: float) -> dict[str, list[Series]] | None:
    """Telemetry sampled beside the run (telemetry.parquet), on the run's clock: seconds
    since its first send. One series per metric and device (or host / server)."""
    import pyarrow.parquet as pq

    path = run.path / "telemetry.parquet"
    if not path.is_file() or not math.isfinite(t0):
        return None
    try:
        tel = pq.read_table(path)
    except (OSError, ValueError):
        return None
    t_s = (column_np(tel, "t_ns") - t0) / 1e9
    who = [
        "/".join(str(x) for x in parts if x not in (None, ""))
        for parts in zip(
            tel.column("kind").to_pylist() if "kind" in tel.column_names else [None] * tel.num_rows,
            tel.column("device_index").to_pylist()
            if "device_index" in tel.column_names
            else [None] * tel.num_rows,
            strict=True,
        )
    ]
    series: dict[str, list[Series]] = {}
    for col, label, scale in TELEMETRY_SERIES:
        v = column_np(tel, col) * scale
        for name in sorted(set(who)):
            sel = np.array([w == name for w in who]) & np.isfinite(v)
            if sel.sum() >= 2:
                series.setdefault(label, []).append(
                    Series(name or "-", t_s[sel].round(3).tolist(), v[sel].round(4).tolist())
                )
    return series or None


def _point(
    run: RunInfo, want_timeline: bool, sections: Sequence[SuiteSection] = ()
) -> tuple[PointView, list[str]]:
    figs = {k: run.figure(k) for k in FIGURES}
    tags = [t for s in sections if (t := s.point_tag(run))]  # e.g. "MLPerf VALID"
    if run.emulated:  # a prediction, never shown as a measurement
        tags.insert(0, f"EMULATED {run.emulated}")
    pv = PointView(run, run.load_label + "".join(f" [{t}]" for t in tags), figs)
    warns: list[str] = []
    if not run.has_requests:
        warns.append(f"{run.load_label}: requests.parquet missing: no distributions or timeline")
        return pv, warns
    try:
        pv.box, pv.timeline, t0 = _distributions(run, want_timeline)
        if want_timeline:
            pv.telemetry = _telemetry(run, t0)
        pv.samples = _samples(run)
    except AccelbenchError as exc:
        warns.append(f"{run.load_label}: {exc}")
    return pv, warns


def _config_items(run: RunInfo) -> list[tuple[str, str]]:
    """The run's configuration as the overview shows it (credentials never shown)."""
    from accelbench.urls import redact_url

    cfg = run.config
    wl = run.workload()
    url = dig(run.run, "server", "url") or cfg.get("url")
    items: list[tuple[str, Any]] = [
        ("model", wl.get("model")),
        ("server", redact_url(str(url)) if url else None),
        ("engine", dig(run.run, "server", "embedded", "engine")),
        ("endpoint", wl.get("endpoint")),
        ("load", run.load_label),
        ("requests", cfg.get("num_requests")),
        ("duration (s)", cfg.get("duration_s")),
        ("ISL / OSL", f"{wl.get('isl')} / {wl.get('osl')}" if wl.get("isl") is not None else None),
        ("dataset", wl.get("dataset")),
        ("GPUs", run.gpus),
    ]
    return [(k, str(v)) for k, v in items if v not in (None, "")]


def _headlines(s: SweepSet) -> list[Headline]:
    """One :class:`Headline` per point of the set (repeated runs at one load: one point)."""
    from accelbench.metrics.compare import group_points, run_figure_ci

    out = []
    by_run = {r.run_id: p for p in group_points(s) for r in p.runs}
    for r in s.runs:
        if r.summary is None:
            continue
        pt = by_run.get(r.run_id)
        n = dig(r.summary, "counts", "completed")
        n = n if isinstance(n, int) else None
        enough = n is not None and n >= HEADLINE_MIN_REQUESTS
        sample = None
        # a repeated point's spread is in the comparison tables
        if pt is not None and len(pt.runs) == 1 and enough:
            try:
                (sample,) = pt.samples()
            except AccelbenchError:  # no requests.parquet: the figures without intervals
                sample = None
        figs: dict[str, tuple[float | None, float | None, float | None]] = {}
        for k in HEADLINE:
            v = r.figure(k)
            lo, hi = (
                run_figure_ci(sample, k, v)
                if sample is not None and v is not None
                else (None, None)
            )
            figs[k] = (v, lo, hi)
        h = dig(r.summary, "health")
        verdict = str(h.get("verdict")) if isinstance(h, dict) else None
        findings = [
            f"{f.get('severity')}: {f.get('message', f.get('rule'))}"
            for f in (h.get("findings") or [] if isinstance(h, dict) else [])
            if isinstance(f, dict) and f.get("severity") in ("warn", "fail")
        ]
        findings += [
            f"unknown: {x}" for x in (h.get("unknown") or [] if isinstance(h, dict) else [])
        ]
        out.append(Headline(r.load_label, r.status, verdict, findings, figs, _config_items(r), n))
    return out


def _samples(run: RunInfo) -> list[str]:
    import pyarrow.parquet as pq

    p = run.path / "requests.parquet"
    if not p.is_file():  # absent, or a FIFO whose read would wait for ever
        return []
    try:
        pf = pq.ParquetFile(p)
        if "output_text" not in pf.schema_arrow.names:
            return []
        out: list[str] = []
        for i, batch in enumerate(pf.iter_batches(batch_size=256, columns=["output_text"])):
            for x in batch.column(0).to_pylist():
                if x:
                    out.append(x[:TEXT_CHARS] + ("..." if len(x) > TEXT_CHARS else ""))
                    if len(out) >= TEXT_SAMPLES:
                        return out
            if i >= 3:  # text is saved for every request or for none: do not scan far
                break
        return out
    except (OSError, ValueError):
        return []


def build_report_data(
    inputs: Sequence[str | Path] | Sequence[SweepSet],
    *,
    target: float | None = None,
    claims: Sequence[str] = (),
    slo: dict[str, float] | None = None,
    attainment: float = 0.9,
    allow_mismatch: bool = False,
    n_boot: int = 1000,
    timelines: bool = True,
    sections: Sequence[SuiteSection] = (),
) -> ReportData:
    """Load and aggregate everything a report shows. Bad input becomes warnings; only
    unusable arguments (bad claim syntax, no inputs, missing paths) raise. ``sections``:
    the suites' report sections to look for among the inputs (the CLI gives every
    suite's: accelbench.suites.sections.SECTIONS); without, every input is a run set."""
    check_goodput_options(slo or {}, attainment)
    check_comparison_options(n_boot=n_boot, target=target)
    for c in claims:
        parse_claim(c)  # syntax errors are the user's to fix before anything runs
    given = [x for x in inputs if isinstance(x, SweepSet)]
    paths = [Path(x) for x in inputs if isinstance(x, str | Path)]
    suites: list[SuiteView] = []
    run_paths: list[Path] = []
    for p in paths:
        section = find_section(p, sections)
        if section is not None:
            suites.append(load_section(p, section))
        if section is None or section.also_a_run:  # an MLPerf directory is also a run
            run_paths.append(p)
    if not given and not paths:
        raise AccelbenchError("give at least one run, sweep, stress, shadow or MLPerf directory")
    sets = given if given else (load_inputs(run_paths) if run_paths else [])
    views = []
    for s in sets:
        warnings = list(s.problems)
        points = []
        for r in s.runs:
            if r.summary is None:
                continue
            pv, w = _point(r, timelines, sections)
            points.append(pv)
            warnings += w
            warnings += [f"{r.load_label}: {x}" for x in r.warnings() if x not in r.problems]
        frontiers = {m: build_frontier(s.runs, m, s.name) for m in FRONTIER_METRICS}
        warnings += left_off_frontier(s.runs)  # a point not drawn on them is named, with why
        at_target = {m: f.at(target) for m, f in frontiers.items()} if target else {}
        if not s.usable_runs:
            warnings.append("no usable points: nothing to plot for this input")
        gp = best = None
        if slo:
            gp = goodput_points([r for r in s.runs if r.summary is not None], slo, attainment)
            best = highest_load_meeting(gp)
        views.append(
            SetView(s, points, frontiers, at_target, gp, best, _dedupe(warnings), _headlines(s))
        )
    comps: list[Comparison] = []
    errors: list[str] = []
    if len(sets) >= 2:
        a = sets[0]
        for b in sets[1:]:
            try:
                comps += compare_sets(
                    a,
                    b,
                    claims=claims,
                    target_interactivity=target,
                    allow_mismatch=allow_mismatch,
                    n_boot=n_boot,
                )
            except AccelbenchError as exc:
                errors.append(f"{b.name} vs {a.name}: {exc}")
    elif claims:
        errors.append("claims need two inputs (A first, then B)")
    return ReportData(
        views,
        comps,
        errors,
        target,
        list(claims),
        dict(slo or {}),
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        suites,
    )


def _dedupe(items: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for x in items:
        seen.setdefault(x, None)
    return list(seen)
