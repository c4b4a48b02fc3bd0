"""How wrong the predictions have been: cross-validation on the calibration set.

- **Leave one system out**: a system is one hardware x engine x precision x layout (TP,
  EP, DP-attention). Each is held out in turn; the factors are refitted on every other
  point (at every level: a held-out system whose combination has no other layout falls
  back to the accelerator's, the vendor's or the pooled factors, as an unseen one would)
  and its points predicted.
- **Time split**: fit on the points published before 2026-01-01, predict the later ones.
- **The time split's floor**: where a configuration (system, ISL/OSL, concurrency) was
  measured on both sides of the split, its own last run before the split taken as the
  prediction of its later run. That is as much as any model fitted on the earlier
  software can know about the configuration; what it still misses is the software's
  change between the runs (``floor_rows``).

Error per point: ``|predicted / measured - 1|`` (absolute percentage error), reported as
the median and 90th percentile per accelerator and metric, with the number of points.
The prediction intervals of ``accelbench predict`` are the 10th-90th percentiles of the
leave-one-system-out log residuals per accelerator (nothing is tuned on the test folds:
the factors of a fold never see its points).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.predict.calibration import Point
from accelbench.predict.fit import (
    DEFAULT_KV,
    METRICS,
    Factors,
    Prepared,
    _arch,
    build_factors,
    calibration_sha,
    catalog_accelerator,
    choose,
    clamp,
    factors_path,
    fit_levels,
    level_keys,
    predict_prepared,
    prepare,
)
from accelbench.predict.stepmodel import Efficiency, RooflineStepModel

SPLIT_DATE = "2026-01-01"
TARGETS = {"throughput": 0.15, "tpot": 0.15, "ttft": 0.30}  # median APE targets (issue 23)
MIN_TARGET_POINTS = 10


CLOSED_FORM, SCHEDULER = "closed form", "scheduler"
PREDICTORS = (CLOSED_FORM, SCHEDULER)
# which predictor `accelbench predict` gives for each metric (docs/PREDICT.md says why)
DEFAULT_PREDICTOR = {"throughput": CLOSED_FORM, "ttft": CLOSED_FORM, "tpot": CLOSED_FORM}


def judge(metric: str, n: int, median_ape: float) -> bool | None:
    """Whether a median APE over ``n`` points meets ``metric``'s target (None: fewer
    than MIN_TARGET_POINTS points, too few for a verdict)."""
    if n < MIN_TARGET_POINTS:
        return None
    return median_ape <= TARGETS[metric]


@dataclass(frozen=True)
class Row:
    """One line of the validation table."""

    scheme: str  # "leave-one-system-out" or "time split"
    accelerator: str
    metric: str
    n: int
    median_ape: float
    p90_ape: float
    predictor: str = CLOSED_FORM

    @property
    def target(self) -> float:
        return TARGETS[self.metric]

    @property
    def meets(self) -> bool | None:
        """Whether the median meets the target (``judge``)."""
        return judge(self.metric, self.n, self.median_ape)


class SchedulerCache:
    """The scheduler's predictions by what determines them (the point's configuration
    and the fold's factors, to the last bit): a point at the same factors is simulated
    once, and ``accelbench predict --refit`` keeps them in
    ``predict/data/scheduler_cv.json`` so that ``--validate`` and the test of the docs
    table need not simulate again. A key that is not there is simulated (``misses``
    counts them); a changed fit changes every key."""

    def __init__(self, entries: dict[str, list[float]] | None = None) -> None:
        self.entries = dict(entries or {})
        self.used: set[str] = set()
        self.misses = 0

    @staticmethod
    def key(p: Point, eff: Efficiency) -> str:
        a = p.admission
        return (
            f"{p.system}|{p.model}|{p.isl}/{p.osl}|c{p.concurrency}|b{p.max_batch}|"
            f"r{a.recv_interval},{a.balance_ranks},{a.balance_timeout_steps}|"
            f"l{p.length_ratio!r}|{eff.compute!r},{eff.bandwidth!r},{eff.overhead_s!r},"
            f"{eff.request_s!r}"
        )

    def find(self, key: str) -> str:
        """The stored key for ``key``: itself, or one of the same configuration whose
        factors agree to 6 significant digits within one unit of the last (a fit on
        another machine can round 0.05965295 either way); ``key`` when none does."""
        if key in self.entries:
            return key
        config, factors = key.rsplit("|", 1)
        want = [float(x) for x in factors.split(",")]
        for k in self.entries:
            head, _, have = k.rpartition("|")
            if head != config:
                continue
            got = [float(x) for x in have.split(",")]
            if len(got) == len(want) and all(map(_one_unit_apart, got, want)):
                return k
        return key

    def to_json(self) -> dict[str, object]:
        """The entries this validation used (a refit drops the stale ones)."""
        return {
            "schema": CACHE_SCHEMA,
            "entries": {k: self.entries[k] for k in sorted(self.used)},
        }


def _one_unit_apart(a: float, b: float) -> bool:
    """At most one unit of the 6th significant digit apart (two roundings of one value)."""
    m = max(abs(a), abs(b))
    return m == 0 or abs(a - b) <= 1.01 * 10 ** (math.floor(math.log10(m)) - 5)


CACHE_SCHEMA = "accelbench.predict-scheduler-cv/1"


def cache_path() -> Path:
    return factors_path().with_name("scheduler_cv.json")


def load_cache(path: Path | None = None) -> SchedulerCache:
    """The shipped cache (empty when absent or not a cache file)."""
    p = path or cache_path()
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SchedulerCache()
    if not isinstance(doc, dict) or doc.get("schema") != CACHE_SCHEMA:
        return SchedulerCache()
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        return SchedulerCache()
    ok = {
        k: [float(x) for x in v]
        for k, v in entries.items()
        if isinstance(v, list) and len(v) == 3 and all(isinstance(x, int | float) for x in v)
    }
    return SchedulerCache(ok)


def write_cache(cache: SchedulerCache, path: Path | None = None) -> Path:
    p = path or cache_path()
    p.write_text(json.dumps(cache.to_json(), indent=0) + "\n", encoding="utf-8")
    return p


def scheduler_prediction(
    prep: Prepared, i: int, eff: Efficiency, cache: SchedulerCache
) -> np.ndarray:
    """(throughput, TTFT, TPOT) of point ``i`` through the event-driven scheduler at the
    factors ``eff`` (fitted by the closed form on the fold's training points), replaying
    the point's benchmark (``point.scheduled``: its clients, rounds, lengths and the
    engine's admission), inside the physical limit. ``cache``: the same point at the
    same factors is simulated once (a configuration measured before and after the
    split date, in the same fold)."""
    from accelbench.predict.point import scheduled

    p = prep.points[i]
    # the factors to 6 significant digits: a fit on another machine (another BLAS) may
    # differ in the last bits, and must find the same simulation
    eff = Efficiency(*(float(f"{x:.6g}") for x in astuple(eff)))
    key = cache.find(SchedulerCache.key(p, eff))
    if key not in cache.entries:
        arch, acc = _arch(p.model), catalog_accelerator(p.hardware)
        sm = RooflineStepModel(
            arch, acc, p.precision, p.layout, eff, DEFAULT_KV, max_seqs=p.max_batch
        )
        sc = scheduled(sm, p.isl, p.osl, p.concurrency, p.admission, lengths=(p.length_ratio, 1.0))
        if sc.tpot_s is None:  # a calibration point's OSL is hundreds of tokens
            raise AccelbenchError(f"{p.source}: OSL {p.osl}: no TPOT to compare")
        cache.entries[key] = [sc.throughput_per_gpu, sc.ttft_s, sc.tpot_s]
        cache.misses += 1
    cache.used.add(key)
    return clamp(np.array(cache.entries[key]), prep.limit[i])


def _predict_held_out(
    prep: Prepared, train: np.ndarray, test: np.ndarray, cache: SchedulerCache | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The closed form's predictions of ``test`` at factors fitted on ``train`` and, with
    a ``cache``, the scheduler's at the same factors."""
    wanted = set()
    for i in test:
        p = prep.points[i]
        wanted.update(level_keys(p.hardware, p.engine, p.precision, prep.vendor[i], prep.arch[i]))
    engines = {prep.points[i].engine for i in test}
    for i in train:  # a borrowed level takes the engine's per-request time (fit.choose)
        p = prep.points[i]
        if p.engine in engines:
            wanted.add(f"{p.hardware}|{p.engine}")
    fitted = fit_levels(prep, train, lambda k: k in wanted)
    out = np.empty((len(test), 3))
    sch = np.empty((len(test), 3)) if cache is not None else None
    for j, i in enumerate(test):
        p = prep.points[i]
        f = choose(fitted, p.hardware, p.engine, p.precision, prep.vendor[i], prep.arch[i])
        eff = f.at(float(prep.months[i]))  # the software of the point's date
        out[j] = predict_prepared(prep, np.array([i]), eff)[0]
        if sch is not None and cache is not None:
            sch[j] = scheduler_prediction(prep, int(i), eff, cache)
    return out, sch


def loso_predictions(
    prep: Prepared, cache: SchedulerCache | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """(N, 3) leave-one-system-out predictions of every point: the closed form's and
    (with a ``cache``) the scheduler's."""
    systems = sorted({p.system for p in prep.points})
    pred = np.empty((len(prep.points), 3))
    sch = np.empty((len(prep.points), 3)) if cache is not None else None
    for s in systems:
        test = np.array([i for i, p in enumerate(prep.points) if p.system == s])
        train = np.array([i for i, p in enumerate(prep.points) if p.system != s])
        pred[test], st = _predict_held_out(prep, train, test, cache)
        if sch is not None and st is not None:
            sch[test] = st
    return pred, sch


def time_split_predictions(
    prep: Prepared, cache: SchedulerCache | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(test indices, the closed form's and the scheduler's predictions) fitting on
    points dated before SPLIT_DATE."""
    train = np.array([i for i, p in enumerate(prep.points) if p.date < SPLIT_DATE])
    test = np.array([i for i, p in enumerate(prep.points) if p.date >= SPLIT_DATE])
    pred, sch = _predict_held_out(prep, train, test, cache)
    return test, pred, sch


def _rows(
    scheme: str, points: list[Point], pred: np.ndarray, meas: np.ndarray, predictor: str
) -> list[Row]:
    ape = np.abs(pred / meas - 1.0)
    rows = []
    accs = sorted({p.hardware for p in points})
    for acc in [*accs, "all"]:
        idx = np.array([i for i, p in enumerate(points) if acc in ("all", p.hardware)])
        for m, name in enumerate(METRICS):
            e = ape[idx, m]
            rows.append(Row(scheme, acc, name, len(idx), float(np.median(e)),
                            float(np.quantile(e, 0.9)), predictor))  # fmt: skip
    return rows


@dataclass(frozen=True)
class FloorRow:
    """One line of the time split's floor: on the test points whose configuration was
    also measured before the split, the median APE of that earlier measurement taken as
    the prediction (``earlier_ape``) beside the model's on the same points
    (``model_ape``), and the median ratio later / earlier of the measurement itself."""

    accelerator: str
    metric: str
    n: int
    earlier_ape: float
    model_ape: float
    change: float  # median of measured-after / measured-before

    @property
    def meets(self) -> bool | None:
        """Whether the earlier run itself meets the target (``judge``)."""
        return judge(self.metric, self.n, self.earlier_ape)


def _config(p: Point) -> tuple[str, int, int, int]:
    return (p.system, p.isl, p.osl, p.concurrency)


def floor_rows(points: Sequence[Point], meas: np.ndarray, test: np.ndarray,
               pred: np.ndarray) -> list[FloorRow]:  # fmt: skip
    """The time split's floor (module docstring) per accelerator and metric, over the
    test points ``test`` (indices into ``points``; ``pred``: the model's predictions of
    them, in the same order) whose configuration has a point before SPLIT_DATE (the
    calibration set keeps one per side: the latest)."""
    before = {_config(p): i for i, p in enumerate(points) if p.date < SPLIT_DATE}
    pairs = [(j, int(i), before[_config(points[i])]) for j, i in enumerate(test)
             if _config(points[i]) in before]  # fmt: skip
    out: list[FloorRow] = []
    if not pairs:
        return out
    accs = sorted({points[i].hardware for _, i, _ in pairs})
    for acc in [*accs, "all"]:
        sel = [(j, i, b) for j, i, b in pairs if acc in ("all", points[i].hardware)]
        jj, ii, bb = (np.array(x) for x in zip(*sel, strict=True))
        earlier = np.abs(meas[bb] / meas[ii] - 1.0)
        model = np.abs(pred[jj] / meas[ii] - 1.0)
        change = np.exp(np.median(np.log(meas[ii] / meas[bb]), axis=0))
        for m, name in enumerate(METRICS):
            out.append(FloorRow(acc, name, len(sel), float(np.median(earlier[:, m])),
                                float(np.median(model[:, m])), float(change[m])))  # fmt: skip
    return out


@dataclass(frozen=True)
class Validation:
    rows: list[Row]
    intervals: dict[str, dict[str, tuple[float, float, int]]]  # acc/"*" -> metric -> (q10, q90, n)
    n_points: int
    n_systems: int
    floor: tuple[FloorRow, ...] = ()  # the time split's floor (closed form beside it)


def combine(closed: np.ndarray, sched: np.ndarray | None) -> np.ndarray:
    """The default predictor's predictions per metric (``DEFAULT_PREDICTOR``)."""
    if sched is None:
        return closed
    out = closed.copy()
    for m, name in enumerate(METRICS):
        if DEFAULT_PREDICTOR[name] == SCHEDULER:
            out[:, m] = sched[:, m]
    return out


def validate(
    points: Sequence[Point], scheduler: bool = True, cache: SchedulerCache | None = None
) -> Validation:
    """Both schemes over ``points``, for the closed form and (``scheduler``) the
    event-driven scheduler at the same fold factors (``cache``: simulations already
    run; filled as it goes), and the intervals from the leave-one-system-out residuals
    of the default predictor of each metric (``DEFAULT_PREDICTOR``; the closed form's
    without ``scheduler``)."""
    pts = list(points)
    prep = prepare(pts)
    if not scheduler:
        cache = None
    elif cache is None:
        cache = SchedulerCache()
    loso, loso_s = loso_predictions(prep, cache)
    test, ts, ts_s = time_split_predictions(prep, cache)
    rows: list[Row] = []
    for name, cf, sc in ((CLOSED_FORM, loso, ts), (SCHEDULER, loso_s, ts_s)):
        if cf is None or sc is None:
            continue
        rows += _rows("leave-one-system-out", pts, cf, prep.meas, name)
        if len(test):
            rows += _rows("time split", [pts[i] for i in test], sc, prep.meas[test], name)
    floor = floor_rows(pts, prep.meas, test, ts) if len(test) else []
    best = combine(loso, loso_s)
    resid = np.log(prep.meas / best)  # log(measured / predicted)
    intervals: dict[str, dict[str, tuple[float, float, int]]] = {}
    for acc in [*sorted({p.hardware for p in pts}), "*"]:
        idx = np.array([i for i, p in enumerate(pts) if acc in ("*", p.hardware)])
        intervals[acc] = {
            name: (
                float(np.quantile(resid[idx, m], 0.1)),
                float(np.quantile(resid[idx, m], 0.9)),
                len(idx),
            )
            for m, name in enumerate(METRICS)
        }
    return Validation(rows, intervals, len(pts), len({p.system for p in pts}), tuple(floor))


def table_markdown(v: Validation) -> str:
    """The validation table as Markdown (docs/PREDICT.md and ``--validate``)."""
    lines = [
        "| scheme | predictor | accelerator | metric | n | median APE | p90 APE | target (median) |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for r in v.rows:
        verdict = {None: "n < 10", True: "met", False: "NOT met"}[r.meets]
        lines.append(
            f"| {r.scheme} | {r.predictor} | {r.accelerator} | {r.metric} | {r.n} | "
            f"{r.median_ape:.1%} | {r.p90_ape:.1%} | <= {r.target:.0%}: {verdict} |"
        )
    return "\n".join(lines)


def floor_markdown(v: Validation) -> str:
    """The time split's floor as Markdown (docs/PREDICT.md and ``--validate``)."""
    lines = [
        "| accelerator | metric | n (measured both sides) | later / earlier run (median) | "
        "median APE: earlier run as the prediction | median APE: closed form | "
        "target (median) |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in v.floor:
        verdict = {None: "n < 10", True: "met by the earlier run",
                   False: "NOT met by the earlier run"}[r.meets]  # fmt: skip
        lines.append(
            f"| {r.accelerator} | {r.metric} | {r.n} | {r.change:.3f} | {r.earlier_ape:.1%} | "
            f"{r.model_ape:.1%} | <= {TARGETS[r.metric]:.0%}: {verdict} |"
        )
    return "\n".join(lines)


def refit(
    points: Sequence[Point], cache: SchedulerCache | None = None
) -> tuple[Factors, Validation]:
    """Factors fitted on every point, with the intervals of the cross-validation."""
    v = validate(points, cache=cache)
    return build_factors(points, v.intervals, calibration_sha()), v
