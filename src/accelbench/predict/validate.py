"""How wrong the predictions have been: cross-validation on the calibration set.

- **Leave one system out**: a system is one hardware x engine x precision x layout (TP,
  EP, DP-attention). Each is held out in turn; the factors are refitted on every other
  point (at every level: a held-out system whose combination has no other layout falls
  back to the accelerator's, the vendor's or the pooled factors, as an unseen one would)
  and its points predicted.
- **Time split**: fit on the points published before 2026-01-01, predict the later ones.

Error per point: ``|predicted / measured - 1|`` (absolute percentage error), reported as
the median and 90th percentile per accelerator and metric, with the number of points.
The prediction intervals of ``accelbench predict`` are the 10th-90th percentiles of the
leave-one-system-out log residuals per accelerator (nothing is tuned on the test folds:
the factors of a fold never see its points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelbench.predict.calibration import Point
from accelbench.predict.fit import (
    METRICS,
    Factors,
    Prepared,
    build_factors,
    calibration_sha,
    choose,
    fit_levels,
    level_keys,
    predict_prepared,
    prepare,
)

SPLIT_DATE = "2026-01-01"
TARGETS = {"throughput": 0.15, "tpot": 0.15, "ttft": 0.30}  # median APE targets (issue 23)
MIN_TARGET_POINTS = 10


@dataclass(frozen=True)
class Row:
    """One line of the validation table."""

    scheme: str  # "leave-one-system-out" or "time split"
    accelerator: str
    metric: str
    n: int
    median_ape: float
    p90_ape: float

    @property
    def target(self) -> float:
        return TARGETS[self.metric]

    @property
    def meets(self) -> bool | None:
        """Whether the median meets the target (None: fewer than 10 points)."""
        if self.n < MIN_TARGET_POINTS:
            return None
        return self.median_ape <= self.target


def _predict_held_out(prep: Prepared, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    wanted = set()
    for i in test:
        p = prep.points[i]
        wanted.update(level_keys(p.hardware, p.engine, p.precision, prep.vendor[i], prep.arch[i]))
    fitted = fit_levels(prep, train, lambda k: k in wanted)
    out = np.empty((len(test), 3))
    for j, i in enumerate(test):
        p = prep.points[i]
        f = choose(fitted, p.hardware, p.engine, p.precision, prep.vendor[i], prep.arch[i])
        out[j] = predict_prepared(prep, np.array([i]), f.eff)[0]
    return out


def loso_predictions(prep: Prepared) -> np.ndarray:
    """(N, 3) leave-one-system-out predictions of every point."""
    systems = sorted({p.system for p in prep.points})
    pred = np.empty((len(prep.points), 3))
    for s in systems:
        test = np.array([i for i, p in enumerate(prep.points) if p.system == s])
        train = np.array([i for i, p in enumerate(prep.points) if p.system != s])
        pred[test] = _predict_held_out(prep, train, test)
    return pred


def time_split_predictions(prep: Prepared) -> tuple[np.ndarray, np.ndarray]:
    """(test indices, their predictions) fitting on points dated before SPLIT_DATE."""
    train = np.array([i for i, p in enumerate(prep.points) if p.date < SPLIT_DATE])
    test = np.array([i for i, p in enumerate(prep.points) if p.date >= SPLIT_DATE])
    return test, _predict_held_out(prep, train, test)


def _rows(scheme: str, points: list[Point], pred: np.ndarray, meas: np.ndarray) -> list[Row]:
    ape = np.abs(pred / meas - 1.0)
    rows = []
    accs = sorted({p.hardware for p in points})
    for acc in [*accs, "all"]:
        idx = np.array([i for i, p in enumerate(points) if acc in ("all", p.hardware)])
        for m, name in enumerate(METRICS):
            e = ape[idx, m]
            rows.append(
                Row(scheme, acc, name, len(idx), float(np.median(e)), float(np.quantile(e, 0.9)))
            )
    return rows


@dataclass(frozen=True)
class Validation:
    rows: list[Row]
    intervals: dict[str, dict[str, tuple[float, float, int]]]  # acc/"*" -> metric -> (q10, q90, n)
    n_points: int
    n_systems: int


def validate(points: Sequence[Point]) -> Validation:
    """Both schemes over ``points``, and the intervals from the leave-one-system-out
    residuals."""
    pts = list(points)
    prep = prepare(pts)
    loso = loso_predictions(prep)
    rows = _rows("leave-one-system-out", pts, loso, prep.meas)
    test, ts = time_split_predictions(prep)
    if len(test):
        rows += _rows("time split", [pts[i] for i in test], ts, prep.meas[test])
    resid = np.log(prep.meas / loso)  # log(measured / predicted)
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
    return Validation(rows, intervals, len(pts), len({p.system for p in pts}))


def table_markdown(v: Validation) -> str:
    """The validation table as Markdown (docs/PREDICT.md and ``--validate``)."""
    lines = [
        "| scheme | accelerator | metric | n | median APE | p90 APE | target (median) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in v.rows:
        verdict = {None: "n < 10", True: "met", False: "NOT met"}[r.meets]
        lines.append(
            f"| {r.scheme} | {r.accelerator} | {r.metric} | {r.n} | {r.median_ape:.1%} | "
            f"{r.p90_ape:.1%} | <= {r.target:.0%}: {verdict} |"
        )
    return "\n".join(lines)


def refit(points: Sequence[Point]) -> tuple[Factors, Validation]:
    """Factors fitted on every point, with the intervals of the cross-validation."""
    v = validate(points)
    return build_factors(points, v.intervals, calibration_sha()), v
