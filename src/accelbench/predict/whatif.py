"""AIConfigurator's error on the calibration set's NVIDIA points, beside accelbench's
(``accelbench predict --validate --whatif``; the optional extra ``accelbench[whatif]``).

AIConfigurator is NVIDIA's performance model of LLM serving (Apache-2.0): measured kernel
tables per GPU, framework and version (shipped in the ``aiconfigurator-core`` wheel, no
download at run time) composed into an aggregated (continuous-batching) estimate. Its
single-point API, ``aiconfigurator.cli.api.cli_estimate`` (the programmatic form of
``aiconfigurator cli estimate``), lives in the ``aiconfigurator`` distribution, which pins
``aiconfigurator-core`` to the same version; the extra installs that pair.

A calibration point maps to one estimate (:func:`query_for`):

- accelerator: ``h100``/``h200``/``b200``/``b300`` -> AIConfigurator's ``*_sxm`` systems;
  AMD accelerators are not modelled (AIConfigurator covers NVIDIA GPUs only);
- engine: ``sglang`` -> ``sglang``, ``trt-llm`` -> ``trtllm``; the framework version is
  AIConfigurator's current database for that system (it accepts only its current,
  previous and next slots), not the run's: the table says which;
- model: DeepSeek-R1 FP8 -> ``deepseek-ai/DeepSeek-R1`` (FP8 block-scaled, as published);
  FP4 -> ``nvidia/DeepSeek-V3.1-NVFP4``, NVIDIA's NVFP4 checkpoint of the same architecture
  (the R1 config differs from it only in the quantization block), because AIConfigurator
  ships no R1 FP4 config and infers the quantization (NVFP4 experts and dense layers,
  attention projections excluded, FP8 KV cache) from the checkpoint's;
- layout: InferenceX's ``tp`` GPUs with ``ep`` expert-parallel ranks -> ``moe_ep_size=ep``,
  ``moe_tp_size=tp/ep``; DP attention -> ``tp_size=1, attention_dp_size=tp`` (else
  ``tp_size=tp``);
- load: the concurrency is the batch size (AIConfigurator's ``batch_size`` is per
  attention-DP rank, so it is the concurrency divided by the DP size, which must divide it);
  ISL/OSL as measured; ``ctx_tokens`` left at its default (the ISL).

Units: AIConfigurator answers TTFT and TPOT in milliseconds and ``seq/s/gpu``; the
calibration set's convention (seconds; input + output tokens per second per GPU) is
``ttft / 1000``, ``tpot / 1000`` and ``seq/s/gpu * (isl + osl)``.

accelbench's error on the same points is its leave-one-system-out prediction (the factors
never see the held-out system's points), from :mod:`accelbench.predict.validate`;
AIConfigurator was fitted on none of these points either.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.errors import AccelbenchError

if TYPE_CHECKING:
    import numpy as np

    from accelbench.predict.calibration import Point
    from accelbench.predict.validate import Row

AIC_DIST = "aiconfigurator"  # the distribution with cli_estimate; pins aiconfigurator-core
AIC_VERSION = "0.12.0"
MISSING = (
    f"AIConfigurator is not installed ({AIC_DIST}=={AIC_VERSION}): pip install 'accelbench[whatif]'"
)
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm"}
BACKENDS = {"sglang": "sglang", "trt-llm": "trtllm"}
MODELS = {
    ("deepseek-r1", "fp8"): "deepseek-ai/DeepSeek-R1",
    ("deepseek-r1", "fp4"): "nvidia/DeepSeek-V3.1-NVFP4",
}
AMD_PREFIX = "mi"  # the catalog's AMD accelerator ids (mi300x, mi325x, mi355x)


@dataclass(frozen=True)
class Query:
    """One aggregated point for ``cli_estimate`` (its keyword names)."""

    model_path: str
    system_name: str
    backend_name: str
    tp_size: int
    attention_dp_size: int
    moe_tp_size: int
    moe_ep_size: int
    isl: int
    osl: int
    batch_size: int


@dataclass(frozen=True)
class Estimate:
    """AIConfigurator's answer in the calibration set's units."""

    throughput_per_gpu: float  # input + output tokens/s per GPU
    ttft_s: float
    tpot_s: float
    database: str  # "system/backend/version" of the kernel tables it used
    kv_warning: bool = False  # it said the batch exceeds its KV-cache estimate


Answer = Estimate | str  # an estimate, or why there is none
Estimator = Callable[[Sequence[Query]], list[Answer]]


def query_for(p: Point) -> Query | str:
    """The AIConfigurator query for a calibration point, or why there is none."""
    if p.hardware.startswith(AMD_PREFIX):
        return "AMD accelerator (AIConfigurator models NVIDIA GPUs only)"
    system = SYSTEMS.get(p.hardware)
    if system is None:
        return f"accelerator {p.hardware} not mapped to an AIConfigurator system"
    backend = BACKENDS.get(p.engine)
    if backend is None:
        return f"engine {p.engine} not in AIConfigurator"
    model = MODELS.get((p.model, p.precision))
    if model is None:
        return f"{p.model} {p.precision} not mapped to an AIConfigurator model"
    tp, ep = p.layout.tp, p.layout.ep
    if tp % ep:
        return f"EP{ep} does not divide TP{tp}"
    if p.layout.dp_attention:
        if p.concurrency % tp:
            return "concurrency not a multiple of the attention-DP size"
        tp_size, dp, batch = 1, tp, p.concurrency // tp
    else:
        tp_size, dp, batch = tp, 1, p.concurrency
    return Query(model, system, backend, tp_size, dp, tp // ep, ep, p.isl, p.osl, batch)


def estimate_from_raw(q: Query, raw: dict[str, Any], database: str, kv: bool) -> Estimate:
    """``cli_estimate``'s result dict (ms, seq/s/gpu) in the calibration set's units."""
    seq_per_gpu = float(raw["seq/s/gpu"])
    return Estimate(
        throughput_per_gpu=seq_per_gpu * (q.isl + q.osl),
        ttft_s=float(raw["ttft"]) / 1000.0,
        tpot_s=float(raw["tpot"]) / 1000.0,
        database=database,
        kv_warning=kv,
    )


def installed_version() -> str:
    """The installed AIConfigurator's version, or AccelbenchError(MISSING)."""
    from importlib import metadata

    try:
        import aiconfigurator.cli.api  # noqa: F401

        return metadata.version(AIC_DIST)
    except (ImportError, metadata.PackageNotFoundError):
        raise AccelbenchError(MISSING) from None


def aiconfigurator_estimates(queries: Sequence[Query]) -> list[Answer]:
    """Ask the installed AIConfigurator for each query, in this process. A query it
    refuses (an exception) is answered with its one-line reason: that is the finding."""
    installed_version()
    import logging

    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    for name in ("aiconfigurator", "aiconfigurator_core"):  # per-op fallback notes
        logging.getLogger(name).setLevel(logging.ERROR)
    versions: dict[tuple[str, str], str | None] = {}
    out: list[Answer] = []
    for q in queries:
        key = (q.system_name, q.backend_name)
        if key not in versions:  # resolved once: it parses every data YAML of the system
            versions[key] = get_latest_database_version(system=key[0], backend=key[1])
        version = versions[key]
        if version is None:
            out.append(f"AIConfigurator has no database for {key[0]}/{key[1]}")
            continue
        kw = asdict(q)
        try:
            r = cli_estimate(kw.pop("model_path"), backend_version=version, mode="agg", **kw)
        except Exception as exc:  # noqa: BLE001 - its refusal (OOM, no data) is the answer
            first = (str(exc).strip().splitlines() or [""])[0].split(". ")[0][:200]
            out.append(f"AIConfigurator: {type(exc).__name__}: {first}")
            continue
        out.append(
            estimate_from_raw(
                q, r.raw, f"{key[0]}/{key[1]}/{version}", r.kv_cache_warning is not None
            )
        )
    return out


# -- the comparison ------------------------------------------------------------------------
@dataclass(frozen=True)
class PointResult:
    point: Point
    query: Query
    aic: Estimate
    accelbench: tuple[float, float, float]  # throughput/GPU, TTFT s, TPOT s (LOSO)


@dataclass
class WhatIf:
    """AIConfigurator and accelbench on the points AIConfigurator answered."""

    aic_version: str
    results: list[PointResult]
    skipped: list[tuple[Point, str]]
    rows: list[Row] = field(default_factory=list)  # both tools, accelerator x metric
    mape: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (scheme, acc, metric)

    def skipped_counts(self) -> list[tuple[str, int]]:
        """Why points were not compared, most common first."""
        return Counter(why for _, why in self.skipped).most_common()

    def databases(self) -> list[str]:
        return sorted({r.aic.database for r in self.results})


AIC_SCHEME = "AIConfigurator"
AB_SCHEME = "accelbench (leave-one-system-out)"


def compare(
    points: Sequence[Point],
    accelbench_pred: np.ndarray,
    estimator: Estimator = aiconfigurator_estimates,
    aic_version: str = AIC_VERSION,
) -> WhatIf:
    """Both tools' absolute percentage errors on the points AIConfigurator answers.

    ``accelbench_pred``: (N, 3) accelbench predictions of ``points`` in order
    (throughput/GPU, TTFT s, TPOT s), e.g. :func:`accelbench_predictions`."""
    import numpy as np

    from accelbench.predict.fit import METRICS
    from accelbench.predict.validate import _rows

    pts = list(points)
    if accelbench_pred.shape != (len(pts), 3):
        raise ValueError(f"accelbench_pred must be ({len(pts)}, 3), got {accelbench_pred.shape}")
    skipped: list[tuple[Point, str]] = []
    asked: list[tuple[int, Query]] = []
    for i, p in enumerate(pts):
        q = query_for(p)
        if isinstance(q, str):
            skipped.append((p, q))
        else:
            asked.append((i, q))
    answers = estimator([q for _, q in asked]) if asked else []
    if len(answers) != len(asked):
        raise AccelbenchError(f"AIConfigurator answered {len(answers)} of {len(asked)} queries")
    results = []
    for (i, q), a in zip(asked, answers, strict=True):
        if isinstance(a, str):
            skipped.append((pts[i], a))
        elif not all(
            math.isfinite(v) and v > 0 for v in (a.throughput_per_gpu, a.ttft_s, a.tpot_s)
        ):
            skipped.append((pts[i], "AIConfigurator: a non-positive or non-finite estimate"))
        else:
            results.append(PointResult(pts[i], q, a, tuple(float(v) for v in accelbench_pred[i])))  # type: ignore[arg-type]
    w = WhatIf(aic_version, results, skipped)
    if not results:
        return w
    got = [r.point for r in results]
    meas = np.array([(p.throughput_per_gpu, p.ttft_s, p.tpot_s) for p in got])
    aic = np.array([(r.aic.throughput_per_gpu, r.aic.ttft_s, r.aic.tpot_s) for r in results])
    ab = np.array([r.accelbench for r in results])
    for scheme, pred, who in ((AIC_SCHEME, aic, "aiconfigurator"), (AB_SCHEME, ab, "accelbench")):
        w.rows += _rows(scheme, got, pred, meas, who)
        ape = np.abs(pred / meas - 1.0)
        for acc in [*sorted({p.hardware for p in got}), "all"]:
            idx = [k for k, p in enumerate(got) if acc in ("all", p.hardware)]
            for m, name in enumerate(METRICS):
                w.mape[(scheme, acc, name)] = float(np.mean(ape[idx, m]))
    return w


def accelbench_predictions(points: Sequence[Point]) -> np.ndarray:
    """accelbench's leave-one-system-out predictions of ``points`` (N, 3), from its
    default predictor (``validate.DEFAULT_PREDICTOR``: the closed form; the scheduler's
    where that says so, from the cached simulations)."""
    from accelbench.predict.fit import prepare
    from accelbench.predict.validate import (
        DEFAULT_PREDICTOR,
        SCHEDULER,
        combine,
        load_cache,
        loso_predictions,
    )

    cache = load_cache() if SCHEDULER in DEFAULT_PREDICTOR.values() else None
    closed, sched = loso_predictions(prepare(list(points)), cache)
    return combine(closed, sched)


def table_markdown(w: WhatIf) -> str:
    """The side-by-side error table, the versions and the points not compared."""
    ab = {(r.accelerator, r.metric): r for r in w.rows if r.scheme == AB_SCHEME}
    n_pred = len(w.results)
    lines = [
        f"AIConfigurator {w.aic_version} (kernel databases: {', '.join(w.databases()) or 'none'}) "
        f"against accelbench's leave-one-system-out predictions on the same {n_pred} points; "
        "APE = |predicted / measured - 1|.",
        "",
        "| accelerator | metric | n | AIConfigurator median APE | p90 | MAPE "
        "| accelbench median APE | p90 | MAPE |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in w.rows:
        if r.scheme != AIC_SCHEME:
            continue
        b = ab[(r.accelerator, r.metric)]
        lines.append(
            f"| {r.accelerator} | {r.metric} | {r.n} | {r.median_ape:.1%} | {r.p90_ape:.1%} | "
            f"{w.mape[(AIC_SCHEME, r.accelerator, r.metric)]:.1%} | {b.median_ape:.1%} | "
            f"{b.p90_ape:.1%} | {w.mape[(AB_SCHEME, r.accelerator, r.metric)]:.1%} |"
        )
    if not w.rows:
        lines.append("| (no point answered) | | 0 | | | | | | |")
    kv = sum(r.aic.kv_warning for r in w.results)
    if kv:
        lines += [
            "",
            f"AIConfigurator warned on {kv} of them that the batch exceeds its KV-cache estimate.",
        ]
    if w.skipped:
        lines += ["", f"Not compared: {len(w.skipped)} points:"]
        lines += [f"- {n}: {why}" for why, n in w.skipped_counts()]
    return "\n".join(lines)


def whatif_json(w: WhatIf) -> dict[str, Any]:
    return {
        "schema": "accelbench.predict-whatif/1",
        "aiconfigurator": w.aic_version,
        "databases": w.databases(),
        "rows": [
            {**r.__dict__, "mape": w.mape[(r.scheme, r.accelerator, r.metric)]} for r in w.rows
        ],
        "points": [
            {
                "system": r.point.system,
                "isl": r.point.isl,
                "osl": r.point.osl,
                "concurrency": r.point.concurrency,
                "measured": [r.point.throughput_per_gpu, r.point.ttft_s, r.point.tpot_s],
                "aiconfigurator": [r.aic.throughput_per_gpu, r.aic.ttft_s, r.aic.tpot_s],
                "accelbench": list(r.accelbench),
                "query": asdict(r.query),
            }
            for r in w.results
        ],
        "skipped": [{"why": why, "n": n} for why, n in w.skipped_counts()],
    }


def whatif_report(points: Sequence[Point] | None = None) -> str:
    """The Markdown of ``accelbench predict --validate --whatif`` (in-process AIConfigurator)."""
    from accelbench.predict.calibration import load_calibration

    version = installed_version()  # the one-line error before any work
    pts = list(points) if points is not None else load_calibration()
    return table_markdown(
        compare(pts, accelbench_predictions(pts), aiconfigurator_estimates, version)
    )


def main() -> None:
    """``python -m accelbench.predict.whatif``: queries (JSON list of Query dicts) on stdin,
    answers on stdout, so the benchmark can run AIConfigurator from its own virtualenv."""
    try:
        version = installed_version()
        queries = [Query(**q) for q in json.load(sys.stdin)]
    except AccelbenchError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    answers = aiconfigurator_estimates(queries)
    json.dump(
        {"version": version, "answers": [a if isinstance(a, str) else asdict(a) for a in answers]},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
