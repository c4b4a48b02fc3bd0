"""B against A: ratios of the main metrics at matched conditions with 95% bootstrap
confidence intervals, and verdicts on claims such as ``B >= 1.3 x A at 32 tok/s/user``.

Matched conditions: the same concurrency (or request rate), or the same target
interactivity read off each side's frontier. Workloads must match (model, ISL/OSL and their
distributions, dataset, endpoint) unless the caller allows a mismatch.

Intervals (95 %, docs/ANALYSIS.md "Intervals"; each has a coverage test in simulation,
tests/test_interval_coverage.py):

- at one load with repeated runs on a side (3 runs or more in all): a pooled t-interval
  on the log of the runs' figures, ``ra + rb - 2`` degrees of freedom
  (:func:`accelbench.metrics.stats.runs_ratio_ci`): the run, not the request, is the
  unit, so the run-to-run spread is in the interval;
- at one load, one run a side: the interval over requests. Throughput by the delta
  method on the log scale (:func:`accelbench.metrics.stats.throughput_log_se`: closed
  loop, Little's law's ratio sum(tokens) / sum(E2E); open loop, the compound Poisson
  count of a Poisson schedule); percentiles and interactivity (``1000 / p50 TPOT``) from
  each side's order-statistic standard error on the log scale
  (:func:`accelbench.metrics.stats.quantile_ratio_ci`), none below
  :func:`accelbench.metrics.stats.min_samples` requests a side (500 for a p99);
- frontier values (at a target interactivity): a percentile bootstrap, ``n_boot``
  replicates, seeded: each replicate resamples the completed requests of every run
  (and the runs of a point first), rebuilds the frontier and interpolates at the target;
  replicates where the target falls outside the resampled frontier are counted.

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
from accelbench.metrics.frontier import OUT_OF_RANGE, build_frontier, pareto_indices, pchip_at
from accelbench.metrics.protocols import RunLike, RunSetLike
from accelbench.metrics.registry import ALIASES, COMPARABLE, FIGURES, FRONTIER, Figure
from accelbench.metrics.stats import (
    bootstrap_ratio_ci,
    bootstrap_replicates,
    log_normal_ci,
    log_ratio_ci,
    min_samples,
    quantile_ci,
    quantile_ratio_ci,
    runs_ratio_ci,
    throughput_log_se,
)
from accelbench.metrics.values import column_np
from accelbench.metrics.verdict import Evidence, Interval, Status, Verdict

# The figures a comparison estimates (declared in accelbench.metrics.registry).
METRICS: dict[str, Figure] = {k: FIGURES[k] for k in COMPARABLE}
FRONTIER_COMPARABLE = FRONTIER
DEFAULT_METRIC = "output_tps_per_gpu"
WORKLOAD_KEYS = ("model", "isl", "osl", "isl_dist", "osl_dist", "range_ratio", "dataset")


# ----------------------------------------------------------------------------- claims


@dataclass
class Claim:
    text: str
    op: str  # ">=", ">", "<=", "<"
    factor: float
    metric: str = DEFAULT_METRIC
    at_interactivity: float | None = None
    at_load: float | None = None  # concurrency (or rate) to match


_CLAIM_RE = re.compile(
    r"^\s*B\s*(?P<op>>=|>|<=|<|≥|≤)\s*(?P<k>[0-9]*\.?[0-9]+)\s*(?:x|×|\*)?\s*A"
    r"(?:\s+(?:on|in|for)\s+(?P<metric>[A-Za-z0-9_]+))?"
    r"(?:\s+at\s+(?:(?P<inter>[0-9]*\.?[0-9]+)\s*tok/s(?:/user)?"
    r"|(?:c|concurrency|rate)\s*[= ]?\s*(?P<load>[0-9]*\.?[0-9]+)))?\s*$",
    re.IGNORECASE,
)


def parse_claim(text: str) -> Claim:
    """``B >= 1.3 x A [on METRIC] [at 32 tok/s/user | at concurrency 64]``."""
    m = _CLAIM_RE.match(text)
    if not m:
        raise AccelbenchError(
            f"cannot read claim {text!r}: write e.g. 'B >= 1.3 x A at 32 tok/s/user' or "
            "'B <= 0.8 x A on ttft_p50_ms at concurrency 16'"
        )
    op = {"≥": ">=", "≤": "<="}.get(m["op"], m["op"])
    metric = (m["metric"] or DEFAULT_METRIC).lower()
    metric = ALIASES.get(metric, metric)
    if metric not in METRICS:
        raise AccelbenchError(f"unknown metric {metric!r} in claim; known: {', '.join(METRICS)}")
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
    )


MAX_BOOT_REQUESTS = 20_000


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


@dataclass
class Estimate:
    metric: str
    a: float | None
    b: float | None
    ratio: float | None
    lo: float | None
    hi: float | None
    note: str | None = None

    @property
    def unit(self) -> str:
        return METRICS[self.metric].unit

    def to_json(self) -> EstimateJSON:
        return {"metric": self.metric, "a": self.a, "b": self.b, "ratio": self.ratio,
                "lo": self.lo, "hi": self.hi, "note": self.note}  # fmt: skip


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
    claimed factor and the level beyond which it is refuted."""
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
    return Verdict(
        name=claim.text,
        status=status,
        statistic=f"ratio B / A of {claim.metric}",
        unit="x",
        estimate=e.ratio if e else None,
        interval=Interval(e.lo, e.hi, 0.95, method) if e and e.lo is not None else None,
        thresholds={"claim": k, "refute_at": refute} if k is not None else {},
        rule=f"supported if the 95% interval lies wholly {supported} the claimed factor; "
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
            return None, None, "too few runs with this figure (3 in all)"
        return float(r[1]), float(r[2]), None
    (sa,), (sb,) = x.samples(), y.samples()
    a, b = x.observed(metric), y.observed(metric)
    assert a is not None and b is not None
    if metric in THROUGHPUT:
        if sa.osl.size < 2 or sb.osl.size < 2 or not (a > 0 and b > 0):
            return None, None, "too few requests (2 a side)"
        se = [throughput_log_se(_tokens(s, metric), s.e2e if s.closed_loop else None)
              for s in (sa, sb)]  # fmt: skip
        lo, hi = log_ratio_ci(math.log(b / a), se[0], se[1])
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


def run_figure_ci(s: _RunSample, metric: str, value: float) -> tuple[float | None, float | None]:
    """95 % interval of one run's figure ``value`` (the report's headline): throughput by
    the delta method on the log scale (:func:`throughput_log_se`), a percentile by its
    distribution-free order-statistic interval (:func:`quantile_ci`); (None, None) where
    the run has too few requests for either (the methods comparisons use, one side)."""
    if metric in THROUGHPUT:
        if s.osl.size < 2 or not value > 0:
            return None, None
        se = float(throughput_log_se(_tokens(s, metric), s.e2e if s.closed_loop else None))
        if not math.isfinite(se):
            return None, None
        return log_normal_ci(value, se)
    col, q = _column(s, metric)
    if col.size < min_samples(q):
        return None, None
    ci = quantile_ci(col, q)
    if ci is None:
        return None, None
    return float(ci[0]), float(ci[1])


def compare_at_load(
    pa_: PointSamples,
    pb: PointSamples,
    metrics: Sequence[str] = tuple(METRICS),
) -> list[Estimate]:
    """B / A of each metric at one load with its interval (:func:`load_ci`)."""
    out = []
    for m in metrics:
        a, b = pa_.observed(m), pb.observed(m)
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


def judge(claim: Claim, e: Estimate, tolerance: float = 0.05, condition: str = "") -> Verdict:
    """Supported only when the interval lies wholly on the claim's side of its own factor
    ``k``; refuted when it lies wholly beyond ``k`` less the tolerance (rounding) on the
    other side; inconclusive otherwise. The tolerance only ever withholds a refutation."""
    if e.ratio is None:
        return claim_verdict(claim, Status.INCONCLUSIVE, e.note or "no ratio could be measured",
                             e, condition=condition)  # fmt: skip
    if e.lo is None or e.hi is None:
        why = f"ratio {e.ratio:.3f} but no confidence interval ({e.note or 'too few samples'})"
        return claim_verdict(claim, Status.INCONCLUSIVE, why, e, condition=condition)
    ci = "the 95% interval"
    k = claim.factor
    strict = claim.op in (">", "<")
    if claim.op in (">=", ">"):
        refute = k * (1 - tolerance)
        if e.lo > k or (e.lo == k and not strict):
            status, why = Status.PASS, f"{ci} lies above {k:g}"
        elif e.hi < refute:
            status, why = Status.FAIL, f"{ci} lies below {refute:.3f}"
        else:
            status, why = Status.INCONCLUSIVE, f"not wholly above {k:g} nor below {refute:.3f}"
    else:
        refute = k * (1 + tolerance)
        if e.hi < k or (e.hi == k and not strict):
            status, why = Status.PASS, f"{ci} lies below {k:g}"
        elif e.lo > refute:
            status, why = Status.FAIL, f"{ci} lies above {refute:.3f}"
        else:
            status, why = Status.INCONCLUSIVE, f"not wholly below {k:g} nor above {refute:.3f}"
    if status == Status.INCONCLUSIVE:
        tol = f" (the claimed {k:g} with {tolerance:.0%} tolerance)" if tolerance else ""
        why = f"{ci} is {why}{tol}: more requests or repeated runs needed"
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
    est = compare_at_load(x, y, [claim.metric])[0]
    return cond, judge(claim, est, tolerance, cond), est


N_BOOT_RANGE = (50, 1_000_000)


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
    if target is not None and not (math.isfinite(target) and target > 0):
        raise AccelbenchError(f"--at must be a positive number of tok/s/user (got {target!r})")


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
    if not a.usable_runs or not b.usable_runs:
        empty = [s.name for s in (a, b) if not s.usable_runs]
        raise AccelbenchError(f"no usable runs in {', '.join(empty)} (see the report's warnings)")
    if a.gpus != b.gpus:
        warnings.append(f"GPU counts differ ({a.gpus} vs {b.gpus}); per-GPU figures compared")
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
        est = compare_at_load(x, y)
        out.append(Comparison(a.name, b.name, f"same load: {x.label}", est, [], list(warnings)))
    if target_interactivity is not None:
        est = compare_at_interactivity(a, b, target_interactivity, n_boot=n_boot, seed=seed)
        out.append(
            Comparison(
                a.name,
                b.name,
                f"at {target_interactivity:g} tok/s/user (frontier)",
                est,
                [],
                list(warnings),
            )
        )
    for c in parsed:
        cond, v, e = evaluate_claim(c, a, b, n_boot=n_boot, seed=seed, tolerance=tolerance)
        out.append(
            Comparison(a.name, b.name, cond or "claim", [e] if e else [], [v], list(warnings))
        )
    if not out:
        raise AccelbenchError(
            f"{a.name} and {b.name} share no load point; give a target interactivity "
            "(--at 32) to compare on the frontiers"
        )
    return out
