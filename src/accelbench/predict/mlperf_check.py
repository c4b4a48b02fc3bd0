"""How wrong ``accelbench predict`` is on models its factors never saw: MLPerf Inference.

The factors (``predict/data/factors.json``) are fitted on DeepSeek-R1 only (InferenceX).
Here each MLPerf Inference result of ``predict/data/mlperf_points.csv`` (closed
division, one node; built by ``benchmarks/build_mlperf_points.py``) is predicted with the
factors ``predict`` picks for that accelerator x engine x precision and compared with
the measurement. Nothing is fitted on these points: it is validation only.

How a result becomes a prediction (``predict_result``):

- **Output length**: the system's own mean output tokens per sample (``TOKENS_PER_SAMPLE``
  of its accuracy run, in the results table).
- **Input length**: the mean input length of the datasets is in none of the sources read
  (the reference implementation's READMEs and the results give only the limits). Each
  point is predicted at both ends of what the sources allow: ISL 1 and the largest input
  the benchmark admits (``ISL_MAX``, each with its source); the error is reported at both.
- **Layout**: the system's GPUs as data-parallel replicas of a TP group of 1, 2, 4 or 8
  GPUs (MoE models also with EP = TP, DeepSeek-R1 also with DP attention); the layout
  with the highest predicted throughput is taken (a submitter tunes it) and named.
- **KV cache**: FP8 (``kv_cache_dtype: fp8`` in the submitters' configs read: NVIDIA's
  B200x8 llama2-70b Offline, AMD's llama2-70b harness; taken for every point).
- **Offline**: every replica runs as many sequences as its KV cache holds at the full
  context (ISL + OSL), at most the engine's cap (``DEFAULT_MAX_BATCH``).
- **Server / Interactive**: the largest concurrency whose predicted TTFT and TPOT meet
  the run's own latency limits (``ttft_latency``, ``tpot_latency`` of its LoadGen log).
  The closed form predicts medians and MLPerf bounds the 99th percentiles: the medians
  are held to the p99 limits, which makes the prediction optimistic by the spread of
  the real distribution (``measured_p50_over_p99`` reports that spread on these runs).
- Throughput is output (generated) tokens/s per system, as MLPerf counts it:
  ``Prediction.output_per_gpu`` times the system's GPUs; never above the physical limit
  (``plan``'s roofline at the running batch, ``limit_tok_s``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.plan.models import find_model
from accelbench.predict.point import Target, fitted_step_model, predict_point
from accelbench.predict.stepmodel import (
    DEFAULT_MAX_BATCH,
    Layout,
    RooflineStepModel,
    steady_state,
)
from accelbench.store.rundir import write_text_atomic

DOC_BEGIN = "<!-- mlperf table: begin (accelbench predict --validate --write-docs) -->"
DOC_END = "<!-- mlperf table: end -->"
KV_PRECISION = "fp8"
ISL_MIN = 1
# the largest input each benchmark admits (an upper bound on its mean input length)
ISL_MAX: dict[str, tuple[int, str]] = {
    "llama-2-70b": (
        1024,
        "mlcommons/inference language/llama2-70b/README.md (b66003e1): processorca.py "
        "--seqlen_limit=1024",
    ),
    "llama-3.1-8b": (
        2540,
        "ntuhpc/inference_results_v5.1 closed/ASUSTeK/code/llama3.1-8b/tensorrt/"
        "preprocess_data.py: G_LLAMA3_1_8B_MAX_INPUT_SEQLEN = 2540",
    ),
    "mixtral-8x7b": (
        2048,
        "ntuhpc/inference_results_v5.1 closed/ASUSTeK/code/mixtral-8x7b/tensorrt/"
        "preprocess_data.py: G_MAX_INPUT_TOK_LEN = 2048",
    ),
    "llama-3.1-405b": (
        20000,
        "ntuhpc/inference_results_v5.1 closed/ASUSTeK/configs/ESC8000_H200_NVLx8/Offline/"
        "llama3_1-405b.py: 'max_input_len': 20000",
    ),
    "deepseek-r1": (
        3136,
        "mlcommons/inference language/deepseek-r1/utils/backend_registry.py (b66003e1): "
        "MAX_ISL = 3136",
    ),
    "gpt-oss-120b": (
        15536,
        "gbeezybez/inference_results_v6.0 closed/NVIDIA/configs/B200-SXM-180GBx1/Offline/"
        "gpt-oss-120b.py: 'max_input_len': 15536",
    ),
}
_REQUIRED = (
    "round",
    "submitter",
    "system",
    "model",
    "scenario",
    "accelerator",
    "accelerator_count",
    "software",
    "precision",
    "output_tok_s",
    "source_repo",
    "source_commit",
    "source_file",
)


@dataclass(frozen=True)
class MlperfPoint:
    """One MLPerf Inference result (a row of mlperf_points.csv)."""

    round: str
    submitter: str
    system: str
    model: str  # catalog id
    scenario: str  # offline, server, interactive
    accelerator: str  # catalog id
    gpus: int
    software: str
    precision: str  # the source's weight_data_types
    output_tok_s: float  # generated tokens/s per system
    tokens_per_sample: float | None  # mean output tokens (accuracy run)
    ttft_limit_s: float | None
    tpot_limit_s: float | None
    p50_tpot_s: float | None
    p99_tpot_s: float | None
    source_repo: str
    source_commit: str
    source_file: str

    @property
    def engine(self) -> str:
        return engine_of(self.software)


def engine_of(software: str) -> str:
    """The engine whose factors apply, from the results table's software field."""
    s = software.lower()
    if "tensorrt" in s:
        return "trt-llm"
    if "sglang" in s:
        return "sglang"
    if "vllm" in s or "llm-d" in s:
        return "vllm"
    if "llmboost" in s:
        return "llmboost"
    return "not in source"


def precision_of(weights: str) -> str:
    """The step model's precision for the source's weight type (NVFP4 and MXFP4 are both
    "fp4": ``stepmodel.weight_format`` picks the format by vendor)."""
    w = weights.lower().strip()
    return "fp4" if w in ("fp4", "mxfp4", "nvfp4") else w


def _float(row: dict[str, str], key: str, where: str, optional: bool) -> float | None:
    v = (row.get(key) or "").strip()
    if not v:
        if optional:
            return None
        raise AccelbenchError(f"{where}: field {key} is empty")
    try:
        x = float(v)
    except ValueError:
        raise AccelbenchError(f"{where}: field {key} is not a number ({v!r})") from None
    if not math.isfinite(x) or x <= 0:
        raise AccelbenchError(f"{where}: field {key} must be a positive number ({v!r})")
    return x


def parse_points(lines: Iterable[str], name: str = "mlperf_points.csv") -> list[MlperfPoint]:
    """The points of a mlperf_points.csv; a damaged row is refused with one line naming
    the file, line and field (never dropped)."""
    reader = csv.DictReader(lines)
    missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise AccelbenchError(f"{name}: missing columns {', '.join(missing)}")
    out = []
    for i, row in enumerate(reader, start=2):
        where = f"{name} line {i}"
        for c in _REQUIRED:
            if not (row.get(c) or "").strip():
                raise AccelbenchError(f"{where}: field {c} is empty")
        if row["scenario"] not in ("offline", "server", "interactive"):
            raise AccelbenchError(f"{where}: field scenario is {row['scenario']!r}")
        latency = row["scenario"] != "offline"
        out.append(
            MlperfPoint(
                round=row["round"],
                submitter=row["submitter"],
                system=row["system"],
                model=row["model"],
                scenario=row["scenario"],
                accelerator=row["accelerator"],
                gpus=int(_float(row, "accelerator_count", where, False) or 0),
                software=row["software"],
                precision=row["precision"],
                output_tok_s=float(_float(row, "output_tok_s", where, False) or 0),
                tokens_per_sample=_float(row, "tokens_per_sample", where, True),
                ttft_limit_s=_float(row, "ttft_limit_s", where, not latency),
                tpot_limit_s=_float(row, "tpot_limit_s", where, not latency),
                p50_tpot_s=_float(row, "p50_tpot_s", where, True),
                p99_tpot_s=_float(row, "p99_tpot_s", where, True),
                source_repo=row["source_repo"],
                source_commit=row["source_commit"],
                source_file=row["source_file"],
            )
        )
    return out


@lru_cache(maxsize=1)
def mlperf_points() -> tuple[MlperfPoint, ...]:
    """The shipped points (predict/data/mlperf_points.csv)."""
    f = resources.files("accelbench.predict").joinpath("data/mlperf_points.csv")
    return tuple(parse_points(f.read_text(encoding="utf-8").splitlines()))


def data_path() -> Path:
    return Path(str(resources.files("accelbench.predict").joinpath("data/mlperf_points.csv")))


@dataclass(frozen=True)
class MlperfPrediction:
    """A result's prediction at one input length."""

    isl: int
    osl: int
    layout: str  # e.g. "8 x TP1"
    concurrency: int  # per replica
    predicted_tok_s: float  # output tokens/s per system
    limit_tok_s: float  # the physical limit at the same batch, output tokens/s per system
    factors_from: str
    extrapolation: tuple[str, ...]


def _layouts(model: str, gpus: int) -> list[Layout]:
    arch = find_model(model).arch
    out = []
    for tp in (1, 2, 4, 8):
        if tp > gpus or gpus % tp:
            continue
        out.append(Layout(tp))
        if arch.num_experts:
            out.append(Layout(tp, ep=tp))
            if arch.is_mla and tp > 1:  # at one GPU attention is not split
                out.append(Layout(tp, ep=tp, dp_attention=True))
    return out


def _concurrency(
    sm: RooflineStepModel, isl: int, osl: int, cap: int, ttft: float | None, tpot: float | None
) -> int:
    """Offline (no limits): ``cap``. Otherwise the largest concurrency up to ``cap``
    whose steady-state median TTFT and TPOT meet the limits (0: not even one)."""
    if ttft is None or tpot is None:
        return cap

    def meets(c: int) -> bool:
        ss = steady_state(sm, isl, osl, c)
        return ss.ttft_s <= ttft and ss.tpot_s <= tpot

    if not meets(1):
        return 0
    lo, hi = 1, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@lru_cache(maxsize=4096)
def _predict(
    model: str,
    acc: str,
    gpus: int,
    engine: str,
    precision: str,
    isl: int,
    osl: int,
    ttft: float | None,
    tpot: float | None,
) -> MlperfPrediction | str:
    best: tuple[float, Layout, int] | None = None
    why = "no layout fits in memory"
    for layout in _layouts(model, gpus):
        sm, _ = fitted_step_model(
            model, acc, layout, engine, precision, KV_PRECISION, DEFAULT_MAX_BATCH
        )
        cap = min(sm.kv_fit(isl + osl), DEFAULT_MAX_BATCH)
        if cap < 1:
            continue
        c = _concurrency(sm, isl, osl, cap, ttft, tpot)
        if c < 1:
            why = "no concurrency meets the latency limits"
            continue
        tput = steady_state(sm, isl, osl, c).throughput_per_gpu
        if best is None or tput > best[0]:
            best = (tput, layout, c)
    if best is None:
        return why
    _, layout, c = best
    p = predict_point(
        model, acc, layout, isl, osl, Target(concurrency=c),
        engine=engine, precision=precision, kv_precision=KV_PRECISION,
    )  # fmt: skip
    share = osl / (isl + osl)
    return MlperfPrediction(
        isl=isl,
        osl=osl,
        layout=f"{gpus // layout.tp} x {layout.text()}",
        concurrency=c,
        predicted_tok_s=p.output_per_gpu.value * gpus,
        limit_tok_s=p.limit.throughput_per_gpu * share * gpus,
        factors_from=p.factors_from,
        extrapolation=p.extrapolation,
    )


def output_length(point: MlperfPoint) -> int:
    """The system's mean output tokens per sample (its accuracy run), else the
    benchmark's in plan/data/mlperf.yaml."""
    if point.tokens_per_sample:
        return max(1, round(point.tokens_per_sample))
    from accelbench.plan.mlperf import mlperf_results

    bench = mlperf_results().benchmarks.get(point.model)
    if bench is None:
        raise AccelbenchError(f"no mean output length for {point.model} in the source")
    return max(1, round(bench.output_tokens))


def predict_result(point: MlperfPoint, isl: int) -> MlperfPrediction | str:
    """The prediction of one MLPerf result at input length ``isl`` (a string: why none)."""
    try:
        return _predict(
            point.model,
            point.accelerator,
            point.gpus,
            point.engine,
            precision_of(point.precision),
            isl,
            output_length(point),
            point.ttft_limit_s,
            point.tpot_limit_s,
        )
    except AccelbenchError as exc:
        return str(exc)


def error(predicted: float, measured: float) -> float:
    """Signed relative error ``predicted / measured - 1``."""
    return predicted / measured - 1.0


def ape_stats(errors: Sequence[float]) -> tuple[int, float, float]:
    """(n, median, 90th percentile) of the absolute errors (numpy's linear quantiles,
    as ``predict.validate``); NaN for none."""
    a = np.abs(np.asarray(errors, dtype=float))
    if not len(a):
        return 0, math.nan, math.nan
    return len(a), float(np.median(a)), float(np.quantile(a, 0.9))


@dataclass(frozen=True)
class Checked:
    """One result with its predictions at both ends of the input-length bound."""

    point: MlperfPoint
    at_min: MlperfPrediction  # ISL 1: the highest the prediction can be
    at_max: MlperfPrediction  # ISL = the benchmark's largest input

    @property
    def err_min(self) -> float:
        return error(self.at_min.predicted_tok_s, self.point.output_tok_s)

    @property
    def err_max(self) -> float:
        return error(self.at_max.predicted_tok_s, self.point.output_tok_s)

    @property
    def within(self) -> bool:
        """The measurement lies between the two predictions."""
        lo, hi = sorted((self.at_min.predicted_tok_s, self.at_max.predicted_tok_s))
        return lo <= self.point.output_tok_s <= hi


@dataclass(frozen=True)
class MlperfValidation:
    checked: list[Checked]
    skipped: list[tuple[MlperfPoint, str]]  # not predicted, and why


def check(points: Sequence[MlperfPoint] | None = None) -> MlperfValidation:
    """Predict every point at ISL 1 and at the benchmark's largest input."""
    pts = mlperf_points() if points is None else points
    checked: list[Checked] = []
    skipped: list[tuple[MlperfPoint, str]] = []
    for p in pts:
        if p.model not in ISL_MAX:
            skipped.append((p, f"no sourced input-length bound for {p.model}"))
            continue
        lo = predict_result(p, ISL_MIN)
        hi = predict_result(p, ISL_MAX[p.model][0])
        if isinstance(lo, str) or isinstance(hi, str):
            skipped.append((p, lo if isinstance(lo, str) else str(hi)))
            continue
        checked.append(Checked(p, lo, hi))
    return MlperfValidation(checked, skipped)


def measured_p50_over_p99(points: Iterable[MlperfPoint]) -> list[float]:
    """Measured median / p99 TPOT of the latency-bound runs (how far a median held to the
    p99 limit overstates the load a run can take)."""
    return [
        p.p50_tpot_s / p.p99_tpot_s
        for p in points
        if p.scenario != "offline" and p.p50_tpot_s and p.p99_tpot_s
    ]


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:+.0%}"


def _ape(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.0%}"


def table_markdown(v: MlperfValidation) -> str:
    """Two Markdown tables: the signed error per accelerator x model x scenario, and the
    absolute error per accelerator and per model (with n), at both input-length ends."""
    lines = [
        "| accelerator | model | scenario | n | median error, ISL max | median error, ISL 1 "
        "| measured inside | layout (ISL max) |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    groups: dict[tuple[str, str, str], list[Checked]] = {}
    for c in v.checked:
        key = (c.point.accelerator, c.point.model, c.point.scenario)
        groups.setdefault(key, []).append(c)
    for (acc, model, sc), cs in sorted(groups.items()):
        layouts = sorted({c.at_max.layout for c in cs})
        lines.append(
            f"| {acc} | {model} | {sc} | {len(cs)} | "
            f"{_pct(float(np.median([c.err_max for c in cs])))} | "
            f"{_pct(float(np.median([c.err_min for c in cs])))} | "
            f"{sum(c.within for c in cs)}/{len(cs)} | {', '.join(layouts)} |"
        )
    lines += [
        "",
        "| by | group | n | median APE, ISL max | p90 APE, ISL max | median APE, ISL 1 "
        "| p90 APE, ISL 1 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for by, group_of in (
        ("accelerator", lambda c: c.point.accelerator),
        ("model", lambda c: c.point.model),
        ("scenario", lambda c: c.point.scenario),
        ("all", lambda c: "all"),
    ):
        names = sorted({group_of(c) for c in v.checked})
        for name in names:
            cs = [c for c in v.checked if group_of(c) == name]
            n, m_hi, p_hi = ape_stats([c.err_max for c in cs])
            _, m_lo, p_lo = ape_stats([c.err_min for c in cs])
            lines.append(
                f"| {by} | {name} | {n} | {_ape(m_hi)} | {_ape(p_hi)} | {_ape(m_lo)} | {_ape(p_lo)} |"
            )
    return "\n".join(lines)


def summary_lines(v: MlperfValidation) -> list[str]:
    """What the tables do not show: coverage, the p99 spread, what was not predicted."""
    pts = [c.point for c in v.checked]
    ratio = measured_p50_over_p99(pts)
    out = [
        f"{len(v.checked)} MLPerf results predicted ({len({(p.source_repo, p.source_file) for p in pts})} "
        f"LoadGen logs), {len(v.skipped)} not; factors never fitted on them.",
    ]
    if ratio:
        out.append(
            f"measured median / p99 TPOT of the latency-bound runs: median {np.median(ratio):.2f} "
            f"(range {min(ratio):.2f}-{max(ratio):.2f}, n {len(ratio)})"
        )
    reasons: dict[str, int] = {}
    for _, why in v.skipped:
        reasons[why] = reasons.get(why, 0) + 1
    out += [f"not predicted: {n} x {why}" for why, n in sorted(reasons.items())]
    return out


def markdown(v: MlperfValidation | None = None) -> str:
    """The block written between DOC_BEGIN and DOC_END (tables and summary)."""
    v = check() if v is None else v
    return table_markdown(v) + "\n\n" + "\n".join(f"- {s}" for s in summary_lines(v))


SECTION = "## Other models: MLPerf Inference"
BEFORE = "## Calibrate on what you own"


def as_json(v: MlperfValidation) -> dict[str, object]:
    """Plain-JSON form: one entry per predicted result, and the skipped ones."""
    return {
        "points": [
            {
                "round": c.point.round,
                "submitter": c.point.submitter,
                "system": c.point.system,
                "model": c.point.model,
                "accelerator": c.point.accelerator,
                "scenario": c.point.scenario,
                "measured_tok_s": c.point.output_tok_s,
                "predicted_tok_s_isl_max": c.at_max.predicted_tok_s,
                "predicted_tok_s_isl_1": c.at_min.predicted_tok_s,
                "error_isl_max": c.err_max,
                "error_isl_1": c.err_min,
                "source": f"{c.point.source_repo}@{c.point.source_commit}:{c.point.source_file}",
            }
            for c in v.checked
        ],
        "not_predicted": [{"system": p.system, "model": p.model, "why": w} for p, w in v.skipped],
    }


def write_docs(path: Path, block: str) -> None:
    """Write ``block`` between DOC_BEGIN and DOC_END in ``path``; where the markers are
    absent, add the section (heading and markers) just before "## Calibrate on what you
    own" (or at the end)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    marked = f"{DOC_BEGIN}\n{block}\n{DOC_END}"
    if DOC_BEGIN in text and DOC_END in text:
        head, rest = text.split(DOC_BEGIN, 1)
        text = head + marked + rest.split(DOC_END, 1)[1]
    elif BEFORE in text:
        head, rest = text.split(BEFORE, 1)
        text = f"{head}{SECTION}\n\n{marked}\n\n{BEFORE}{rest}"
    else:
        text = f"{text}{chr(10) if text else ''}{SECTION}\n\n{marked}\n"
    write_text_atomic(path, text)
