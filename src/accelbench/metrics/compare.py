"""B against A: ratios of the main metrics at matched conditions with 95% bootstrap
confidence intervals, and verdicts on claims such as ``B >= 1.3 x A at 32 tok/s/user``.

Matched conditions: the same concurrency (or request rate), or the same target
interactivity read off each side's frontier. Workloads must match (model, ISL/OSL and their
distributions, dataset, endpoint) unless the caller allows a mismatch.

Intervals (95 %, docs/ANALYSIS.md "Intervals"; each has a coverage test in simulation,
tests/test_interval_coverage.py):

- at one load with repeated runs on a side (``MIN_RUNS_A_SIDE``, 2, or more a side; fewer:
  "too few runs"): a pooled t-interval
  on the log of the runs' figures, ``ra + rb - 2`` degrees of freedom
  (:func:`accelbench.metrics.stats.runs_ratio_ci`): the run, not the request, is the
  unit, so the run-to-run spread is in the interval;
- at one load, one run a side: the interval over requests. Throughput on the log scale
  (:func:`accelbench.metrics.stats.throughput_log_se`: closed loop, the window's figure
  over resamples scheduled on the run's slots, its end included,
  :func:`accelbench.metrics.stats.closed_loop_log_se`; open loop, the compound Poisson
  count of a Poisson schedule, Student's t), none below ``MIN_THROUGHPUT_REQUESTS`` (20)
  requests a side, where it under-covers, nor for a closed loop whose E2E tail is too
  heavy (:data:`accelbench.metrics.stats.MAX_TAIL_SHAPE`); percentiles and interactivity (``1000 / p50 TPOT``) from
  each side's order-statistic standard error on the log scale
  (:func:`accelbench.metrics.stats.quantile_ratio_ci`), none below
  :func:`accelbench.metrics.stats.min_samples` requests a side (500 for a p99);
- frontier values (at a target interactivity): a percentile bootstrap, ``n_boot``
  replicates, seeded: each replicate resamples the completed requests of every run
  (and the runs of a point first), rebuilds the frontier and interpolates at the target;
  replicates where the target falls outside the resampled frontier are counted.

Hit rates (figures compared by difference, ``registry.Figure.difference``) are compared
as B - A in percentage points, never as a ratio: ``B hit_rate >= A hit_rate + 10pp``. Their
interval is a percentile bootstrap of the difference of each side's ratio of sums (sum of
cached tokens / sum of prompt tokens over the measured requests that said what was
cached), resampling whole sessions (a session's turns share their history, so its
requests are correlated; a request of no session is its own cluster; repeated runs at a
load pool their sessions): :func:`accelbench.metrics.stats.cluster_ratio_replicates`,
none below :data:`MIN_CLUSTERS` clusters a side. Verdict as below with the claimed
offset ``d`` in place of ``k`` and a tolerance in points: refuted when the interval lies
wholly below ``d - 100 t`` (``>=``) or above ``d + 100 t`` (``<=``) points (a hit rate is
itself a share, so t = 5 % of the prompt tokens is 5 points).

Verdict for ``B >= k x A``: supported when the interval's low end is at least ``k``
(the claim's own factor: a tolerance never helps a claim), refuted when its high end is
below ``k (1 - t)`` (tolerance t, default 5 %: a claimed factor is rounded, and a
ratio within the rounding does not refute it), otherwise inconclusive. ``<=`` mirrors
this: supported when the high end is at most ``k``, refuted when the low end is above
``k (1 + t)``. On identical servers (A/A) a claim with ``k >= 1`` is supported at most
2.5 % of the time whatever n (the interval's one-sided error).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from accelbench import validate
from accelbench.errors import AccelbenchError
from accelbench.metrics.frontier import (
    OUT_OF_RANGE,
    build_frontier,
    left_off,
    left_off_frontier,
    pareto_indices,
    pchip_at,
)
from accelbench.metrics.protocols import RunLike, RunSetLike
from accelbench.metrics.registry import (
    ALIASES,
    COMPARABLE,
    DIFFERENCE,
    FIGURES,
    FRONTIER,
    Figure,
)
from accelbench.metrics.stats import (
    MAX_TAIL_SHAPE,
    MIN_RUNS_A_SIDE,
    MIN_THROUGHPUT_REQUESTS,
    bootstrap_difference_ci,
    bootstrap_ratio_ci,
    bootstrap_replicates,
    cluster_ratio_replicates,
    log_normal_ci,
    log_ratio_ci,
    min_samples,
    open_loop_log_dof,
    quantile_ci,
    quantile_ratio_ci,
    runs_ratio_ci,
    throughput_log_se,
    too_heavy_tail,
    welch_dof,
)
from accelbench.metrics.values import column_np
from accelbench.metrics.verdict import Evidence, Interval, Status, Verdict

# The figures a comparison estimates (declared in accelbench.metrics.registry): as B / A
# (COMPARABLE) or as B - A in points (DIFFERENCE: the prefix-cache hit rate).
METRICS: dict[str, Figure] = {k: FIGURES[k] for k in (*COMPARABLE, *DIFFERENCE)}
# Fewer sessions (clusters) a side than this: no interval for a hit-rate difference.
MIN_CLUSTERS = 20
FRONTIER_COMPARABLE = FRONTIER
DEFAULT_METRIC = "output_tps_per_gpu"
WORKLOAD_KEYS = ("model", "isl", "osl", "isl_dist", "osl_dist", "range_ratio", "dataset")


# ----------------------------------------------------------------------------- claims


@dataclass
class Claim:
    text: str
    op: str  # ">=", ">", "<=", "<"
    factor: float  # B op factor x A (1.0 for a difference claim, where it is not used)
    metric: str = DEFAULT_METRIC
    at_interactivity: float | None = None
    at_load: float | None = None  # concurrency (or rate) to match
    offset_pp: float | None = None  # B op A + offset_pp points; None: a ratio claim

    @property
    def is_difference(self) -> bool:
        return self.offset_pp is not None


_NUM = r"[0-9]*\.?[0-9]+"
_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_CLAIM_RE = re.compile(
    rf"^\s*B(?:\s+(?P<m1>{_NAME}))?\s*(?P<op>>=|>|<=|<|≥|≤)\s*"
    rf"(?:(?P<k>{_NUM})\s*(?:x|×|\*)?\s*)?A(?:\s+(?!(?:on|in|for|at)\b)(?P<m2>{_NAME}))?"
    rf"(?:\s*(?P<sign>[-+−])\s*(?P<pp>{_NUM})\s*(?:pp|points?)\b)?"
    r"(?:\s+(?:on|in|for)\s+(?P<metric>[A-Za-z0-9_]+))?"
    r"(?:\s+at\s+(?:(?P<inter>[0-9]*\.?[0-9]+)\s*tok/s(?:/user)?"
    r"|(?:c|concurrency|rate)\s*[= ]?\s*(?P<load>[0-9]*\.?[0-9]+)))?\s*$",
    re.IGNORECASE,
)


def _claim_metric(m: re.Match[str], points: bool) -> str:
    """The one figure a claim names (``B hit_rate ... A hit_rate``, ``on hit_rate``), its
    aliases resolved; the ratio default, or the one hit rate when offset in points."""
    named = {ALIASES.get(x.lower(), x.lower()) for x in (m["m1"], m["m2"], m["metric"]) if x}
    if len(named) > 1:
        raise AccelbenchError(f"the claim names more than one figure: {', '.join(sorted(named))}")
    metric = named.pop() if named else DIFFERENCE[0] if points else DEFAULT_METRIC
    if metric not in METRICS:
        if metric in FIGURES:
            raise AccelbenchError(
                f"{metric} cannot be claimed on: no per-request interval exists for it; "
                f"claims compare {', '.join(METRICS)}"
            )
        raise AccelbenchError(f"unknown metric {metric!r} in claim; known: {', '.join(METRICS)}")
    return metric


def parse_claim(text: str) -> Claim:
    """``B >= 1.3 x A [on METRIC] [at 32 tok/s/user | at concurrency 64]``, or for a hit
    rate, in percentage points: ``B hit_rate >= A hit_rate + 10pp [at concurrency 8]``
    (also ``B >= A + 10pp on hit_rate``; no offset: ``+ 0pp``)."""
    m = _CLAIM_RE.match(text)
    if not m:
        raise AccelbenchError(
            f"cannot read claim {text!r}: write e.g. 'B >= 1.3 x A at 32 tok/s/user', "
            "'B <= 0.8 x A on ttft_p50_ms at concurrency 16' or "
            "'B hit_rate >= A hit_rate + 10pp'"
        )
    op = {"≥": ">=", "≤": "<="}.get(m["op"], m["op"])
    metric = _claim_metric(m, m["pp"] is not None)
    # a claim's condition in --at's range and a load above 0 ('at 0 tok/s/user' and 'at
    # concurrency 0' were read, and judged inconclusive: out of range, no such point)
    if m["inter"] and not MIN_AT <= float(m["inter"]) <= MAX_AT:
        raise AccelbenchError(
            f"claim {text.strip()!r}: the target interactivity must be {MIN_AT:g} to "
            f"{MAX_AT:,.0f} tok/s/user, as --at (got {float(m['inter']):g})"
        )
    if m["load"] and not float(m["load"]) > 0:
        raise AccelbenchError(f"claim {text.strip()!r}: the load must be above 0")
    if METRICS[metric].difference:
        if m["k"] is not None:
            raise AccelbenchError(
                f"{metric} is compared in percentage points, not as a ratio: write e.g. "
                f"'B {metric} >= A {metric} + 10pp'"
            )
        if m["inter"]:
            raise AccelbenchError(f"{metric} is compared at a load, not at a target interactivity")
        pp = float(m["pp"]) if m["pp"] is not None else 0.0
        if pp > 100:
            raise AccelbenchError(f"a hit rate differs by at most 100 points (got {pp:g}pp)")
        offset = -pp if m["sign"] in ("-", "−") else pp
        load = float(m["load"]) if m["load"] else None
        return Claim(text.strip(), op, 1.0, metric, None, load, offset_pp=offset)
    if m["pp"] is not None:
        raise AccelbenchError(
            f"percentage points apply to hit rates ({', '.join(DIFFERENCE)}); {metric} is "
            "compared as a ratio: write e.g. 'B >= 1.3 x A'"
        )
    if m["k"] is None:
        raise AccelbenchError(f"cannot read claim {text!r}: give the factor, e.g. 'B >= 1.3 x A'")
    k = float(m["k"])
    if k <= 0:
        raise AccelbenchError("the claimed factor must be positive")
    inter = float(m["inter"]) if m["inter"] else None
    if inter is not None and metric not in FRONTIER_COMPARABLE:
        raise AccelbenchError(
            f"at a target interactivity only {', '.join(FRONTIER_COMPARABLE)} can be compared"
        )
    return Claim(text.strip(), op, k, metric, inter, float(m["load"]) if m["load"] else None)


# ----------------------------------------------------------------------------- samples


@dataclass
class _RunSample:
    osl: np.ndarray
    tok_total: np.ndarray
    e2e: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    observed: dict[str, float | None]
    closed_loop: bool
    concurrency: float | None = None  # a closed loop's slots (its window's end: drain)


def _run_sample(r: RunLike) -> _RunSample:
    if not r.has_requests:
        raise AccelbenchError(f"{r.path}: requests.parquet missing; cannot bootstrap")
    t = r.read_requests(("warmup", "ok", "isl", "osl", "e2e_ms", "ttft_ms", "tpot_ms"))
    m = column_np(t, "ok", bool) & ~column_np(t, "warmup", bool)
    osl = column_np(t, "osl")[m]
    isl = column_np(t, "isl")[m]
    return _RunSample(
        osl=np.nan_to_num(osl),
        tok_total=np.nan_to_num(osl) + np.nan_to_num(isl),
        e2e=np.nan_to_num(column_np(t, "e2e_ms")[m]),
        ttft=column_np(t, "ttft_ms")[m],
        tpot=column_np(t, "tpot_ms")[m],
        observed={k: r.figure(k) for k in METRICS},
        closed_loop=r.rate is None,
        concurrency=r.load if r.rate is None else None,
    )


MAX_BOOT_REQUESTS = 20_000

# requests.parquet columns a hit rate's interval reads
CACHE_SAMPLE_COLUMNS = ("warmup", "isl", "cached_tokens", "session")


def cache_clusters(r: RunLike) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster, (sum of cached tokens, sum of prompt tokens) of one run's measured
    requests whose response said what was cached (the requests summary.json's
    ``cache.hit_rate`` is computed from): a cluster is a session, or a request of no
    session on its own. The ratio of the sums is the run's hit rate."""
    if not r.has_requests:
        raise AccelbenchError(f"{r.path}: requests.parquet missing; cannot bootstrap")
    t = r.read_requests(CACHE_SAMPLE_COLUMNS)
    cached, isl = column_np(t, "cached_tokens"), column_np(t, "isl")
    m = ~column_np(t, "warmup", bool) & np.isfinite(cached) & np.isfinite(isl)
    session = column_np(t, "session")[m]
    alone = ~np.isfinite(session)
    # sessions keep their id; a request of none gets its own label past every id
    label = np.where(alone, 0.0, session)
    top = float(np.max(label)) + 1.0 if label.size else 0.0
    label[alone] = top + np.arange(int(alone.sum()))
    _, inv = np.unique(label, return_inverse=True)
    return np.bincount(inv, weights=cached[m]), np.bincount(inv, weights=isl[m])


THROUGHPUT = ("output_tps_per_gpu", "total_tps_per_gpu", "requests_per_s")


def _column(s: _RunSample, metric: str) -> tuple[np.ndarray, float]:
    """The finite request values a percentile metric is read from, and its percentile
    (interactivity: the TPOT median)."""
    col = {
        "interactivity": s.tpot,
        "ttft_p50_ms": s.ttft,
        "ttft_p99_ms": s.ttft,
        "tpot_p50_ms": s.tpot,
        "e2e_p50_ms": s.e2e,
        "e2e_p99_ms": s.e2e,
    }[metric]
    q = 99.0 if metric.endswith("p99_ms") else 50.0
    return col[np.isfinite(col)], q  # e.g. TPOT is undefined for OSL < 2


def _tokens(s: _RunSample, metric: str) -> np.ndarray:
    return {"output_tps_per_gpu": s.osl, "total_tps_per_gpu": s.tok_total}.get(
        metric, np.ones(s.osl.size)
    )


def _boot_run_pair(
    s: _RunSample, metric: str, n_boot: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Replicates of (interactivity, ``metric``) of one run drawn from the SAME resamples
    of its requests: a slower resample lowers both, and a frontier value depends on that
    correlation (drawn apart, the frontier's interval covered 87 %). Above
    MAX_BOOT_REQUESTS usable requests, a random subsample of that size is resampled and
    the replicates' spread rescaled by ``sqrt(m / n)`` around the full-sample value (the
    m-out-of-n bootstrap of :func:`accelbench.metrics.stats.bootstrap_replicates`; valid
    for these root-n statistics): million-request sweeps compare fast."""
    x, y = np.full(n_boot, np.nan), np.full(n_boot, np.nan)
    obs_x, obs_y = s.observed.get("interactivity"), s.observed.get(metric)
    n = s.osl.size
    if obs_x is None or obs_y is None or n == 0 or metric not in THROUGHPUT:
        return x, y
    tok = _tokens(s, metric)
    base = tok.sum() / s.e2e.sum() if s.closed_loop else tok.mean()
    if not base > 0:
        return x, y

    def stat(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if s.closed_loop:
            r = tok[idx].sum(axis=1) / s.e2e[idx].sum(axis=1)
        else:
            r = tok[idx].mean(axis=1)
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no TPOT
            inter = 1000.0 / np.nanmedian(s.tpot[idx], axis=1)
        return inter, obs_y * r / base

    x, y = bootstrap_replicates(n, n_boot, stat, rng, MAX_BOOT_REQUESTS)
    return x, y


@dataclass
class PointSamples:
    """One load point of one side: one or more repeated runs."""

    label: str
    load: float | None
    runs: list[RunLike]
    _samples: list[_RunSample] | None = None
    _cache: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)

    def observed(self, metric: str) -> float | None:
        vals = [v for r in self.runs if (v := r.figure(metric)) is not None]
        return float(np.mean(vals)) if vals else None

    def boot_pair(
        self, metric: str, n_boot: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Replicates of (interactivity, ``metric``) of the point from the same resamples
        (runs resampled first where repeated), for the frontier."""
        key = ("pair:" + metric, n_boot)
        if key not in self._cache:
            pairs = [_boot_run_pair(s, metric, n_boot, rng) for s in self.samples()]
            xs = np.array([p[0] for p in pairs])
            ys = np.array([p[1] for p in pairs])
            if len(pairs) > 1:
                pick = rng.integers(0, len(pairs), size=(n_boot, len(pairs)))
                cols = np.arange(n_boot)[:, None]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    xs = np.nanmean(xs[pick, cols], axis=1)[None, :]
                    ys = np.nanmean(ys[pick, cols], axis=1)[None, :]
            self._cache[key] = np.stack([xs[0], ys[0]])
        got = self._cache[key]
        return got[0], got[1]

    def samples(self) -> list[_RunSample]:
        if self._samples is None:
            self._samples = [_run_sample(r) for r in self.runs]
        return self._samples

    def run_figures(self, metric: str) -> list[float]:
        return [v for r in self.runs if (v := r.figure(metric)) is not None]

    def cache_clusters(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`cache_clusters` of every run of the point (a session of each run is
        its own cluster), read once."""
        key = ("cache_clusters", 0)
        if key not in self._cache:
            got = [cache_clusters(r) for r in self.runs]
            self._cache[key] = np.stack([np.concatenate([g[0] for g in got]),
                                         np.concatenate([g[1] for g in got])])  # fmt: skip
        c = self._cache[key]
        return c[0], c[1]


def group_points(s: RunSetLike) -> list[PointSamples]:
    """Usable runs grouped by load (repeated runs at one load form one point). Kept on the
    set, so each point's bootstrap replicates are computed once per metric."""
    cached: list[PointSamples] | None = s.cache.get("compare.points")
    if cached is None:
        cached = s.cache["compare.points"] = _group_points(s)
    return cached


def _group_points(s: RunSetLike) -> list[PointSamples]:
    groups: dict[Any, list[RunLike]] = {}
    for r in s.usable_runs:
        groups.setdefault(r.load if r.load is not None else r.run_id, []).append(r)
    pts = []
    for key, runs in groups.items():
        label = runs[0].load_label + (f" x{len(runs)} runs" if len(runs) > 1 else "")
        pts.append(PointSamples(label, key if isinstance(key, int | float) else None, runs))
    pts.sort(key=lambda p: (p.load is None, p.load or 0))
    return pts


# ----------------------------------------------------------------------------- results


class EstimateJSON(TypedDict):
    metric: str
    a: float | None
    b: float | None
    ratio: float | None  # B / A
    lo: float | None  # its 95 % interval
    hi: float | None
    note: str | None
    diff_pp: float | None  # a hit rate's B - A in percentage points (else null)
    diff_lo: float | None  # its 95 % interval
    diff_hi: float | None


@dataclass
class Estimate:
    """B against A on one figure: the ratio B / A with its interval, or for a figure
    compared by difference (a hit rate) B - A in points with its interval (``ratio``
    then is B / A as a plain number, with no interval of its own)."""

    metric: str
    a: float | None
    b: float | None
    ratio: float | None
    lo: float | None
    hi: float | None
    note: str | None = None
    diff_pp: float | None = None
    diff_lo: float | None = None
    diff_hi: float | None = None

    @property
    def unit(self) -> str:
        return METRICS[self.metric].unit

    @property
    def is_difference(self) -> bool:
        return METRICS[self.metric].difference

    def to_json(self) -> EstimateJSON:
        return {"metric": self.metric, "a": self.a, "b": self.b, "ratio": self.ratio,
                "lo": self.lo, "hi": self.hi, "note": self.note, "diff_pp": self.diff_pp,
                "diff_lo": self.diff_lo, "diff_hi": self.diff_hi}  # fmt: skip


def claim_verdict(
    claim: Claim,
    status: Status,
    note: str,
    e: Estimate | None = None,
    k: float | None = None,
    refute: float | None = None,
    condition: str = "",
) -> Verdict:
    """A claim's verdict as the one :class:`~accelbench.metrics.verdict.Verdict` record
    (words: supported / refuted / inconclusive): the ratio B / A with its interval, the
    claimed factor and the level beyond which it is refuted; for a hit rate, the
    difference B - A in percentage points, the claimed offset and the refuting level."""
    method = ""
    if e is not None and claim.at_interactivity is not None:
        method = "percentile bootstrap (frontier)"
    evidence: Evidence = {"metric": claim.metric}
    if e is not None:
        evidence.update({"a": e.a, "b": e.b})
    if condition:
        evidence["condition"] = condition
    supported = "above" if claim.op in (">=", ">") else "below"
    refuted = "below" if supported == "above" else "above"
    if claim.is_difference:
        est, lo, hi = (e.diff_pp, e.diff_lo, e.diff_hi) if e else (None, None, None)
        statistic, unit, what = f"difference B - A of {claim.metric}", "pp", "claimed offset"
        method = "percentile bootstrap over sessions"
    else:
        est, lo, hi = (e.ratio, e.lo, e.hi) if e else (None, None, None)
        statistic, unit, what = f"ratio B / A of {claim.metric}", "x", "claimed factor"
    return Verdict(
        name=claim.text,
        status=status,
        statistic=statistic,
        unit=unit,
        estimate=est,
        interval=Interval(lo, hi, 0.95, method) if lo is not None else None,
        thresholds={"claim": k, "refute_at": refute} if k is not None else {},
        rule=f"supported if the 95% interval lies wholly {supported} the {what}; "
        f"refuted if wholly {refuted} it less the tolerance; inconclusive otherwise",
        evidence=evidence,
        suite="claim",
        kind="claim",
        note=note,
    )


class ComparisonJSON(TypedDict):
    """``accelbench compare --json``: one entry per matched condition."""

    a: str
    b: str
    condition: str
    estimates: list[EstimateJSON]
    verdicts: list[dict[str, object]]  # Verdict.to_json() records (docs/RESULTS.md)
    warnings: list[str]


@dataclass
class Comparison:
    a_name: str
    b_name: str
    condition: str
    estimates: list[Estimate]
    verdicts: list[Verdict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # whether an interval here is a bootstrap (a frontier, a hit rate): what ``n_boot``
    # and ``seed`` change; not in the document (how it was computed, not a result)
    bootstrap: bool = False

    def to_json(self) -> ComparisonJSON:
        return {
            "a": self.a_name,
            "b": self.b_name,
            "condition": self.condition,
            "estimates": [e.to_json() for e in self.estimates],
            "verdicts": [v.to_json() for v in self.verdicts],
            "warnings": self.warnings,
        }


def workload_differences(a: RunSetLike, b: RunSetLike) -> tuple[list[str], list[str]]:
    """(differences, unknowns): keys known on both sides with different values, and keys
    known on one side only (e.g. an imported result that does not record them)."""
    wa, wb = a.workload() or {}, b.workload() or {}
    diff, unknown = [], []
    for k in WORKLOAD_KEYS:
        x, y = wa.get(k), wb.get(k)
        if x == y:
            continue
        if x is None or y is None:
            unknown.append(f"{k}: {x!r} vs {y!r}")
        else:
            diff.append(f"{k}: {x!r} vs {y!r}")
    return diff, unknown


def check_workloads(a: RunSetLike, b: RunSetLike, allow_mismatch: bool = False) -> list[str]:
    """Warnings about the two workloads; raises on a real difference unless
    ``allow_mismatch`` (a key recorded on one side only is a warning)."""
    diffs, unknown = workload_differences(a, b)
    if diffs and not allow_mismatch:
        raise AccelbenchError(
            f"{a.name} and {b.name} ran different workloads ({'; '.join(diffs)}); "
            "pass --allow-mismatch to compare them anyway"
        )
    return [f"workloads differ: {d}" for d in diffs] + [
        f"workload not recorded on one side, cannot check: {u}" for u in unknown
    ]


def load_ci(
    x: PointSamples, y: PointSamples, metric: str
) -> tuple[float | None, float | None, str | None]:
    """(low, high, note) of B / A at one load (see the module's "Intervals")."""
    if len(x.runs) > 1 or len(y.runs) > 1:
        va, vb = x.run_figures(metric), y.run_figures(metric)
        if min(va + vb, default=0.0) <= 0:
            return None, None, "a run's figure is not positive: no interval on the log scale"
        r = runs_ratio_ci(np.array(va), np.array(vb))
        if r is None:
            return None, None, f"too few runs with this figure ({MIN_RUNS_A_SIDE} a side)"
        return float(r[1]), float(r[2]), None
    (sa,), (sb,) = x.samples(), y.samples()
    a, b = x.observed(metric), y.observed(metric)
    assert a is not None and b is not None
    if metric in THROUGHPUT:
        if min(sa.osl.size, sb.osl.size) < MIN_THROUGHPUT_REQUESTS:
            return None, None, f"too few requests ({MIN_THROUGHPUT_REQUESTS} a side)"
        if not (a > 0 and b > 0):  # was said as "too few requests" of 500 a side
            return None, None, "a side's figure is 0: no ratio on the log scale"
        if (why := _too_heavy_tailed(sa, sb)) is not None:
            return None, None, why
        (se_a, dof_a), (se_b, dof_b) = (_throughput_se(s, metric) for s in (sa, sb))
        if not (math.isfinite(se_a) and math.isfinite(se_b)):
            return None, None, "no request time to measure the spread by: no interval"
        dof = welch_dof(se_a, dof_a, se_b, dof_b)
        lo, hi = log_ratio_ci(math.log(b / a), se_a, se_b, dof=dof)
        return float(lo), float(hi), None
    (ca, q), (cb, _) = _column(sa, metric), _column(sb, metric)
    need = min_samples(q)
    if min(ca.size, cb.size) < need:
        return None, None, f"too few requests (p{q:g} needs {need} a side)"
    # interactivity B / A is the TPOT median's A / B
    r = quantile_ratio_ci(cb, ca, q) if metric == "interactivity" else quantile_ratio_ci(ca, cb, q)
    if r is None or not (np.isfinite(r[1]) and np.isfinite(r[2])):
        return None, None, "a percentile's interval reaches 0: no ratio"
    return float(r[1]), float(r[2]), None


def _too_heavy_tailed(*sides: _RunSample) -> str | None:
    """Why a closed loop's throughput gets no interval: a side's E2E tail estimated at
    least :data:`accelbench.metrics.stats.MAX_TAIL_SHAPE` heavy, its longest request a
    good share of the window (:func:`accelbench.metrics.stats.too_heavy_tail`; None: it
    gets one)."""
    for s in sides:
        if s.closed_loop and (xi := too_heavy_tail(s.e2e, s.concurrency or 1.0)) is not None:
            return (f"request durations too heavy-tailed for an interval (E2E tail shape "
                    f"{xi:.2f} >= {MAX_TAIL_SHAPE}: the longest requests set the window)")  # fmt: skip
    return None


def _throughput_se(s: _RunSample, metric: str) -> tuple[float, float]:
    """(SE, degrees of freedom) of the log of one run's throughput figure: a closed
    loop's over its window with its slots' drain
    (:func:`accelbench.metrics.stats.closed_loop_log_se`; inf: z), an open loop's
    compound Poisson count (:func:`accelbench.metrics.stats.open_loop_log_dof`)."""
    tok = _tokens(s, metric)
    if s.closed_loop:
        return float(throughput_log_se(tok, s.e2e, s.concurrency)), math.inf
    return float(throughput_log_se(tok, None)), float(open_loop_log_dof(tok))


def run_figure_ci(s: _RunSample, metric: str, value: float) -> tuple[float | None, float | None]:
    """95 % interval of one run's figure ``value`` (the report's headline): throughput by
    the delta method on the log scale (:func:`throughput_log_se`), a percentile by its
    distribution-free order-statistic interval (:func:`quantile_ci`); (None, None) where
    the run has too few requests for either (the methods comparisons use, one side)."""
    if metric in THROUGHPUT:
        if s.osl.size < MIN_THROUGHPUT_REQUESTS or not value > 0 or _too_heavy_tailed(s):
            return None, None
        se, dof = _throughput_se(s, metric)
        if not math.isfinite(se):
            return None, None
        return log_normal_ci(value, se, dof=dof)
    col, q = _column(s, metric)
    if col.size < min_samples(q):
        return None, None
    ci = quantile_ci(col, q)
    if ci is None:
        return None, None
    return float(ci[0]), float(ci[1])


def hit_rate_difference(
    x: PointSamples, y: PointSamples, metric: str, n_boot: int = 1000, seed: int = 0
) -> Estimate:
    """B - A of a hit rate (a ratio of sums over requests) in percentage points, with the
    percentile interval of a cluster bootstrap over sessions (the module's "Hit rates");
    each side's rate is its pooled requests' (one run: its ``cache.hit_rate``)."""
    (na, da), (nb, db) = x.cache_clusters(), y.cache_clusters()
    if not (da.sum() > 0 and db.sum() > 0):
        return Estimate(metric, None, None, None, None, None,
                        "no response said what was cached on both sides")  # fmt: skip
    a, b = float(na.sum() / da.sum()), float(nb.sum() / db.sum())
    ratio = b / a if a > 0 else None
    diff = 100.0 * (b - a)
    if min(na.size, nb.size) < MIN_CLUSTERS:
        why = f"too few sessions ({MIN_CLUSTERS} a side) for an interval"
        return Estimate(metric, a, b, ratio, None, None, why, diff)
    rng = np.random.default_rng(seed)
    ra = cluster_ratio_replicates(na, da, n_boot, rng, MAX_BOOT_REQUESTS)
    rb = cluster_ratio_replicates(nb, db, n_boot, rng, MAX_BOOT_REQUESTS)
    lo, hi, _ = bootstrap_difference_ci(ra, rb)
    note = (f"B - A {diff:+.2f} points, 95% CI [{100 * lo:+.2f}, {100 * hi:+.2f}] "
            f"({na.size} vs {nb.size} sessions)" if lo is not None and hi is not None
            else "too few bootstrap replicates")  # fmt: skip
    return Estimate(metric, a, b, ratio, None, None, note, diff,
                    None if lo is None else 100.0 * lo, None if hi is None else 100.0 * hi)  # fmt: skip


def compare_at_load(
    pa_: PointSamples,
    pb: PointSamples,
    metrics: Sequence[str] = tuple(METRICS),
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[Estimate]:
    """B / A of each metric at one load with its interval (:func:`load_ci`); a hit rate's
    B - A (:func:`hit_rate_difference`), left out where neither side measured it."""
    out = []
    for m in metrics:
        a, b = pa_.observed(m), pb.observed(m)
        if METRICS[m].difference:
            if a is None and b is None:
                continue  # no prefix-cache figures on either side: nothing to say
            if a is None or b is None:
                out.append(Estimate(m, a, b, None, None, None, "not measured on both sides"))
            else:
                out.append(hit_rate_difference(pa_, pb, m, n_boot, seed))
            continue
        if a is None or b is None or a == 0:
            out.append(Estimate(m, a, b, None, None, None, "not measured on both sides"))
            continue
        lo, hi, note = load_ci(pa_, pb, m)
        out.append(Estimate(m, a, b, b / a, lo, hi, note))
    return out


def _frontier_boot(
    points: list[PointSamples], metric: str, target: float, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    pairs = [p.boot_pair(metric, n_boot, rng) for p in points]
    xs = np.array([x for x, _ in pairs])  # (P, B)
    ys = np.array([y for _, y in pairs])
    out = np.full(n_boot, np.nan)
    for b in range(n_boot):
        idx = pareto_indices(xs[:, b], ys[:, b])
        out[b] = pchip_at(xs[idx, b], ys[idx, b], target)
    return out


def compare_at_interactivity(
    a: RunSetLike,
    b: RunSetLike,
    target: float,
    metrics: Sequence[str] = FRONTIER_COMPARABLE,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[Estimate]:
    rng = np.random.default_rng(seed)
    pa_, pb = group_points(a), group_points(b)
    out = []
    for m in metrics:
        fa = build_frontier([r for p in pa_ for r in p.runs], m)
        fb = build_frontier([r for p in pb for r in p.runs], m)
        va, vb = fa.at(target), fb.at(target)
        if va.value is None or vb.value is None:
            why = "; ".join(
                f"{n}: {v.reason}" for n, v in ((a.name, va), (b.name, vb)) if v.value is None
            )
            out.append(Estimate(m, va.value, vb.value, None, None, None, why))
            continue
        ra = _frontier_boot(pa_, m, target, n_boot, rng)
        rb = _frontier_boot(pb, m, target, n_boot, rng)
        lo, hi, n = bootstrap_ratio_ci(ra, rb)
        note = None
        miss = n_boot - n
        if miss > 0.05 * n_boot:
            note = (
                f"{miss} of {n_boot} resamples put {target:g} tok/s/user {OUT_OF_RANGE}: "
                "the target is at the edge of a frontier"
            )
            lo = hi = None
        out.append(Estimate(m, va.value, vb.value, vb.value / va.value, lo, hi, note))
    return out


def _decide(op: str, lo: float, hi: float, k: float, refute: float, ks: str, rs: str
            ) -> tuple[Status, str]:  # fmt: skip
    """Where the interval [lo, hi] lies against the claimed level ``k`` (written ``ks``)
    and the refuting level ``refute`` (written ``rs``)."""
    strict = op in (">", "<")
    ci = "the 95% interval"
    if op in (">=", ">"):
        if lo > k or (lo == k and not strict):
            return Status.PASS, f"{ci} lies above {ks}"
        if hi < refute:
            return Status.FAIL, f"{ci} lies below {rs}"
        return Status.INCONCLUSIVE, f"{ci} is not wholly above {ks} nor below {rs}"
    if hi < k or (hi == k and not strict):
        return Status.PASS, f"{ci} lies below {ks}"
    if lo > refute:
        return Status.FAIL, f"{ci} lies above {rs}"
    return Status.INCONCLUSIVE, f"{ci} is not wholly below {ks} nor above {rs}"


def judge(claim: Claim, e: Estimate, tolerance: float = 0.05, condition: str = "") -> Verdict:
    """Supported only when the interval lies wholly on the claim's side of its own factor
    ``k``; refuted when it lies wholly beyond ``k`` less the tolerance (rounding) on the
    other side; inconclusive otherwise. The tolerance only ever withholds a refutation.
    A difference claim (a hit rate) holds B - A in points against its offset the same
    way, the tolerance read as ``100 t`` points."""
    up = claim.op in (">=", ">")
    if claim.is_difference:
        assert claim.offset_pp is not None
        est, lo, hi, k = e.diff_pp, e.diff_lo, e.diff_hi, claim.offset_pp
        tol = 100.0 * tolerance
        refute = k - tol if up else k + tol
        what, ks, rs, es = "difference", f"{k:+g}pp", f"{refute:+.2f}pp", f"{est or 0:+.2f}pp"
        tol_text = f" (the claimed {k:+g}pp with {tol:g} points' tolerance)"
    else:
        est, lo, hi, k = e.ratio, e.lo, e.hi, claim.factor
        refute = k * (1 - tolerance) if up else k * (1 + tolerance)
        what, ks, rs, es = "ratio", f"{k:g}", f"{refute:.3f}", f"{est or 0:.3f}"
        tol_text = f" (the claimed {k:g} with {tolerance:.0%} tolerance)"
    if est is None:
        return claim_verdict(claim, Status.INCONCLUSIVE, e.note or f"no {what} could be measured",
                             e, condition=condition)  # fmt: skip
    if lo is None or hi is None:
        why = f"{what} {es} but no confidence interval ({e.note or 'too few samples'})"
        return claim_verdict(claim, Status.INCONCLUSIVE, why, e, condition=condition)
    status, why = _decide(claim.op, lo, hi, k, refute, ks, rs)
    if status == Status.INCONCLUSIVE:
        tail = tol_text if tolerance else ""
        why = f"{why}{tail}: more requests or repeated runs needed"
    return claim_verdict(claim, status, why, e, k, refute, condition)


def _find_point(points: list[PointSamples], load: float) -> PointSamples | None:
    for p in points:
        if p.load is not None and abs(p.load - load) < 1e-9:
            return p
    return None


def evaluate_claim(
    claim: Claim,
    a: RunSetLike,
    b: RunSetLike,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    tolerance: float = 0.05,
) -> tuple[str, Verdict, Estimate | None]:
    """The condition compared, the verdict, and the estimate it rests on (None when the
    claim could not be matched to a condition)."""
    if claim.at_interactivity is not None:
        cond = f"at {claim.at_interactivity:g} tok/s/user (frontier)"
        est = compare_at_interactivity(
            a, b, claim.at_interactivity, [claim.metric], n_boot=n_boot, seed=seed
        )[0]
        return cond, judge(claim, est, tolerance, cond), est
    pa_, pb = group_points(a), group_points(b)
    if claim.at_load is not None:
        x, y = _find_point(pa_, claim.at_load), _find_point(pb, claim.at_load)
        cond = f"at load {claim.at_load:g}"
        if x is None or y is None:
            missing = [n for n, p in ((a.name, x), (b.name, y)) if p is None]
            why = f"no point at load {claim.at_load:g} in " + ", ".join(missing)
            return cond, claim_verdict(claim, Status.INCONCLUSIVE, why, condition=cond), None
    elif len(pa_) == 1 and len(pb) == 1:
        x, y = pa_[0], pb[0]
        cond = f"{x.label} vs {y.label}"
        if x.load != y.load:
            why = (f"the runs ran at different loads ({x.label} vs {y.label}); "
                   "say 'at N tok/s/user' to compare on the frontiers")  # fmt: skip
            return cond, claim_verdict(claim, Status.INCONCLUSIVE, why, condition=cond), None
    else:
        why = "sweeps need a condition: add 'at N tok/s/user' or 'at concurrency N' to the claim"
        return "", claim_verdict(claim, Status.INCONCLUSIVE, why), None
    got = compare_at_load(x, y, [claim.metric], n_boot=n_boot, seed=seed)
    if not got:  # a hit rate neither side measured
        why = f"no {claim.metric} on either side: no response said what was cached"
        return cond, claim_verdict(claim, Status.INCONCLUSIVE, why, condition=cond), None
    return cond, judge(claim, got[0], tolerance, cond), got[0]


N_BOOT_RANGE = (50, 1_000_000)


MIN_AT, MAX_AT = 1e-3, 1e7  # --at: a target interactivity, tok/s/user


def check_comparison_options(
    *, tolerance: float = 0.05, n_boot: int = 1000, target: float | None = None, seed: int = 0
) -> None:
    """One clear error for options outside their range (named as on the command line)."""
    validate.seed("--seed", seed)  # numpy refuses a negative one (ValueError: exit 70)
    if not (isinstance(tolerance, int | float) and 0 <= tolerance < 1):
        raise AccelbenchError(f"--tolerance must be in [0, 1) (got {tolerance!r})")
    lo, hi = N_BOOT_RANGE
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or not lo <= n_boot <= hi:
        raise AccelbenchError(f"--n-boot must be a whole number in {lo}..{hi} (got {n_boot!r})")
    # cost --interactivity's ceiling; the floor is one token per ~17 minutes per user
    # (1e308 and 1e-300 printed only "out of measured range")
    validate.optional_number("--at", target, MIN_AT, MAX_AT, unit="tok/s/user")


def compare_sets(
    a: RunSetLike,
    b: RunSetLike,
    *,
    claims: Sequence[str] = (),
    target_interactivity: float | None = None,
    allow_mismatch: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    tolerance: float = 0.05,
) -> list[Comparison]:
    """Every matched comparison of B against A: each common load, the target
    interactivity if given, and each claim's condition with its verdict."""
    check_comparison_options(
        tolerance=tolerance, n_boot=n_boot, target=target_interactivity, seed=seed
    )
    parsed = [parse_claim(c) for c in claims]
    warnings = check_workloads(a, b, allow_mismatch)
    if not a.usable_runs or not b.usable_runs:  # why, in the line itself (no report)
        empty = [s for s in (a, b) if not s.usable_runs]
        why = [p for s in empty
               for p in (*s.problems, *left_off(s.runs, "output_tps_per_gpu", "the comparisons"))
               ] or ["no run has throughput figures"]  # fmt: skip
        more = f"; and {len(why) - 3} more" if len(why) > 3 else ""
        raise AccelbenchError(
            f"no usable runs in {', '.join(s.name for s in empty)} ({'; '.join(why[:3])}{more})"
        )
    if a.gpus != b.gpus:
        warnings.append(f"GPU counts differ ({a.gpus} vs {b.gpus}); per-GPU figures compared")
    for side, s in (("A", a), ("B", b)):  # a prediction is never shown as a measurement
        if accs := sorted({acc for r in s.usable_runs if (acc := r.emulated)}):
            warnings.append(f"{side} ({s.name}) is EMULATED ({', '.join(accs)}): a prediction "
                            "of `accelbench serve emulated`, not a measurement")  # fmt: skip
    # a run with no throughput is not usable (RunInfo.usable), no point to compare; one
    # with no interactivity is none of a frontier: each named, with why (they were left
    # out without a word)
    for side, s in (("A", a), ("B", b)):
        warnings += [f"{side} ({s.name}): {w}"
                     for w in left_off(s.runs, "output_tps_per_gpu", "the comparisons")]  # fmt: skip
    on_frontier = list(warnings)
    for side, s in (("A", a), ("B", b)):
        on_frontier += [f"{side} ({s.name}): {w}"
                        for w in left_off_frontier(s.usable_runs, FRONTIER_COMPARABLE)]  # fmt: skip
    out: list[Comparison] = []
    pa_, pb = group_points(a), group_points(b)
    for x in pa_:
        y = _find_point(pb, x.load) if x.load is not None else None
        if y is None and len(pa_) == 1 and len(pb) == 1:
            if x.load != pb[0].load:
                warnings.append(f"the runs ran at different loads ({x.label} vs {pb[0].label})")
                continue
            y = pb[0]
        if y is None:
            continue
        est = compare_at_load(x, y, n_boot=n_boot, seed=seed)
        boot = any(e.is_difference for e in est)
        out.append(
            Comparison(a.name, b.name, f"same load: {x.label}", est, [], list(warnings), boot)
        )
    if target_interactivity is not None:
        est = compare_at_interactivity(a, b, target_interactivity, n_boot=n_boot, seed=seed)
        out.append(
            Comparison(
                a.name,
                b.name,
                f"at {target_interactivity:g} tok/s/user (frontier)",
                est,
                [],
                list(on_frontier),
                bootstrap=True,
            )
        )
    for c in parsed:
        cond, v, e = evaluate_claim(c, a, b, n_boot=n_boot, seed=seed, tolerance=tolerance)
        out.append(
            Comparison(
                a.name,
                b.name,
                cond or "claim",
                [e] if e else [],
                [v],
                list(on_frontier if c.at_interactivity is not None else warnings),
                bootstrap=c.at_interactivity is not None or c.is_difference,
            )  # fmt: skip
        )
    if not out:
        raise AccelbenchError(
            f"{a.name} and {b.name} share no load point; give a target interactivity "
            "(--at 32) to compare on the frontiers"
        )
    return out
