"""One prediction: a model on an accelerator in a layout, at an ISL/OSL and a target
(a concurrency, an interactivity, or a TTFT/TPOT SLO).

``predict_point`` is the one entry point (the CLI and the claims page call it). It
evaluates the closed loop in steady state (``stepmodel.steady_state``), the default
predictor of every metric (``validate.DEFAULT_PREDICTOR``: the event-driven scheduler's
cross-validated errors are close but not no worse, docs/PREDICT.md); ``schedule=True``
adds the scheduler's view (``scheduled``).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import asdict, dataclass, field

from accelbench import validate as check
from accelbench.errors import AccelbenchError, UsageError
from accelbench.hardware.catalog import Accelerator
from accelbench.plan.architecture import DP_ATTENTION_ONE_GPU, ModelArch
from accelbench.plan.models import resolve_model
from accelbench.plan.roofline import MAX_CONTEXT
from accelbench.predict.fit import (
    Factors,
    Fitted,
    Limits,
    catalog_accelerator,
    choose,
    family,
    physical_limits,
    shipped_factors,
)
from accelbench.predict.scheduler import Admission
from accelbench.predict.stepmodel import (
    DEFAULT_MAX_BATCH,
    Efficiency,
    Layout,
    RooflineStepModel,
    steady_state,
)
from accelbench.predict.steps import Bound, Step, StepTime

MAX_CONCURRENCY = 1 << 16
MAX_TP = 64


@dataclass(frozen=True)
class Target:
    """What to predict at: exactly one of a concurrency, an interactivity (tok/s/user,
    at least), a TTFT SLO or a TPOT SLO (seconds, at most). The SLO and interactivity
    targets search the largest concurrency that meets them."""

    concurrency: int | None = None
    interactivity: float | None = None
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None

    def __post_init__(self) -> None:
        given = [
            v
            for v in (self.concurrency, self.interactivity, self.ttft_slo_s, self.tpot_slo_s)
            if v is not None
        ]
        if len(given) != 1:
            raise UsageError(
                "give exactly one target: --concurrency, --interactivity, --ttft-slo or --tpot-slo"
            )
        check.optional_integer("concurrency (--concurrency)", self.concurrency, 1, MAX_CONCURRENCY)
        check.optional_number(
            "interactivity (--interactivity)",
            self.interactivity,
            0,
            1e6,
            lo_open=True,
            unit="tok/s/user",
        )
        check.optional_number(
            "TTFT SLO (--ttft-slo)", self.ttft_slo_s, 0, 3600, lo_open=True, unit="s"
        )
        check.optional_number(
            "TPOT SLO (--tpot-slo)", self.tpot_slo_s, 0, 60, lo_open=True, unit="s"
        )


@dataclass(frozen=True)
class Estimate:
    """A predicted value and its interval: the value times the 10th and 90th percentiles
    of ``measured / predicted`` under leave-one-system-out cross-validation on the
    accelerator's calibration points, held inside the physical limit. Where the model's
    errors on an accelerator lean one way, the interval leans the same way and need not
    contain the value (the value is the model's, uncorrected; the interval is where the
    measurement has fallen)."""

    value: float
    low: float
    high: float


# The benchmark the scheduler replays (InferenceX's client, ``benchmark_serving.py``):
# ``--num-prompts`` 10 x concurrency, all clients starting together.
BENCH_ROUNDS = 10
MIN_ROUNDS = 3
MAX_STEPS = 40_000  # fewer rounds where rounds x OSL would pass this (speed: ~0.3 s a point)
# the token budget of a step: the smallest chunked-prefill size in the calibration's launch
# scripts (SGLang on B200, --chunked-prefill-size 16384; TRT-LLM's max_num_tokens is
# ISL + concurrency or more), so a prompt of up to 16k tokens is prefilled in one step
SCHEDULE_BATCHED_TOKENS = 16384
# lengths of a predicted workload: uniform within +-10 % of the ISL/OSL asked for (mean
# as asked); the spread keeps the clients from moving in lockstep, as real ones do not
PREDICT_LENGTHS = (0.9, 1.1)


@dataclass(frozen=True)
class Scheduled:
    """The point as the event-driven scheduler (``predict.scheduler``) runs it: a closed
    loop of ``concurrency`` clients, all starting together, over ``requests`` requests
    (the benchmark's: every request counts); queueing and TTFT come out of the
    schedule."""

    requests: int
    throughput_per_gpu: float  # input + output tokens/s per GPU, first send to last reply
    ttft_s: float  # median, with the fixed per-request time
    queue_s: float  # median wait for admission
    tpot_s: float | None  # median; None where no request had a second token (OSL 1)
    bound_shares: dict[str, float]  # share of the busy time each bound limited


class _NoKvLimit:
    """A ``StepModel`` whose KV cache never fills: the schedule, like the closed form,
    does not queue on our KV estimate (the calibration points ran configurations that
    estimate calls tight; ``predict_point`` notes where it does)."""

    def __init__(self, inner: RooflineStepModel) -> None:
        self.inner = inner

    def step_time(self, step: Step) -> StepTime:
        return self.inner.step_time(step)

    def kv_capacity_tokens(self) -> int:
        return 1 << 50

    def max_batch(self) -> int:
        return self.inner.max_batch()


def bench_requests(
    isl: int, osl: int, n: int, lengths: tuple[float, float], seed: int = 0
) -> list[tuple[int, int]]:
    """``n`` (prompt, output) lengths, each uniform over the integers in
    ``[int(lo x L), int(hi x L)]`` (InferenceX's client draws ``[int(0.8 L), L]``),
    from a fixed seed."""
    rng = random.Random(seed)
    lo, hi = lengths

    def draw(x: int) -> int:
        return max(1, rng.randint(int(x * lo), max(int(x * lo), int(x * hi))))

    return [(draw(isl), draw(osl)) for _ in range(n)]


def scheduled(
    sm: RooflineStepModel,
    isl: int,
    osl: int,
    concurrency: int,
    admission: Admission | None = None,
    *,
    lengths: tuple[float, float] = PREDICT_LENGTHS,
    request_s: float | None = None,
) -> Scheduled:
    """Run the point through the scheduler as a benchmark client would: ``concurrency``
    clients start together and send ``BENCH_ROUNDS`` x ``concurrency`` requests (fewer
    rounds, at least ``MIN_ROUNDS``, where OSL makes that more than ``MAX_STEPS`` decode
    steps), lengths drawn by ``bench_requests``; each TTFT includes the fixed
    per-request time (``request_s``, default the model's factor)."""
    from accelbench.predict.scheduler import SchedulerConfig, closed_loop

    rounds = max(MIN_ROUNDS, min(BENCH_ROUNDS, MAX_STEPS // max(1, osl)))
    n = rounds * concurrency
    cfg = SchedulerConfig(
        max_num_batched_tokens=max(SCHEDULE_BATCHED_TOKENS, int(isl * max(lengths)) + concurrency),
        admission=admission or Admission(),
    )
    sch = closed_loop(_NoKvLimit(sm), concurrency, bench_requests(isl, osl, n, lengths), cfg)
    rs = sch.requests
    fixed = sm.eff.request_s if request_s is None else request_s
    end = max(r.end_s for r in rs)
    tokens = sum(r.prompt_tokens + r.output_tokens for r in rs)
    tpots = [r.tpot_s for r in rs if r.output_tokens > 1]
    return Scheduled(
        requests=n,
        throughput_per_gpu=tokens / end / sm.layout.gpus if end > 0 else float("nan"),
        ttft_s=statistics.median(r.ttft_s for r in rs) + fixed,
        queue_s=statistics.median(r.queue_s for r in rs),
        tpot_s=statistics.median(tpots) if tpots else None,  # not NaN: --json holds it
        bound_shares=sch.bound_shares(),
    )


@dataclass(frozen=True)
class Prediction:
    model: str
    accelerator: str
    engine: str
    precision: str
    layout: Layout
    isl: int
    osl: int
    concurrency: int
    running: int  # sequences decoding at once (the rest wait for a slot)
    throughput_per_gpu: Estimate  # input + output tokens/s per GPU
    output_per_gpu: Estimate  # output tokens/s per GPU
    ttft_s: Estimate
    tpot_s: Estimate
    bound: Bound  # what limits the point (the phase that takes longer)
    decode_bound: Bound
    prefill_bound: Bound
    limit: Limits  # the physical roofline
    capped: tuple[str, ...]  # metrics held at the physical limit
    factors: Efficiency
    factors_from: str  # the calibration key the factors were fitted on
    factors_points: int
    extrapolation: tuple[str, ...]  # why this point lies outside the calibration data
    notes: tuple[str, ...] = field(default=())
    schedule: Scheduled | None = None  # --schedule: the event-driven scheduler's view

    @property
    def interactivity(self) -> float:
        """Tokens/s per user (1 / TPOT)."""
        return 1.0 / self.tpot_s.value

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["layout"] = {
            "tp": self.layout.tp,
            "ep": self.layout.ep,
            "dp_attention": self.layout.dp_attention,
        }
        d["interactivity_tok_s_user"] = self.interactivity
        return d


def _resolve_model(model: str | ModelArch) -> ModelArch:
    # a catalog id, or a config.json (a file, or a directory holding one), as --model says
    return model if isinstance(model, ModelArch) else resolve_model(model)


def _resolve_acc(acc: str | Accelerator) -> Accelerator:
    return acc if isinstance(acc, Accelerator) else catalog_accelerator(acc)


def model_id(arch: ModelArch) -> str:
    """The catalog id of ``arch`` where it is a catalog model, else its name (the
    calibration data's models are catalog ids)."""
    from accelbench.plan.models import model_catalog

    for mid, entry in model_catalog().items():
        if entry.arch == arch:
            return mid
    return arch.name


def _in_calibration(f: Factors, mid: str, arch: ModelArch) -> bool:
    """Whether the calibration data holds ``arch``: by id, or (a config.json of a catalog
    model, under its own name) by every architecture field but the name and source."""
    from accelbench.plan.models import model_catalog

    if mid in f.models:
        return True
    cat = model_catalog()
    return any(arch.same_architecture(cat[m].arch) for m in f.models if m in cat)


def _interval(value: float, q: tuple[float, float, int]) -> tuple[float, float]:
    lo, hi = value * math.exp(q[0]), value * math.exp(q[1])
    return (lo, hi) if lo <= hi else (hi, lo)


def fitted_step_model(
    model: str | ModelArch,
    accelerator: str | Accelerator,
    layout: Layout,
    engine: str = "sglang",
    precision: str = "fp8",
    kv_precision: str = "bf16",
    max_batch: int = DEFAULT_MAX_BATCH,
    factors: Factors | None = None,
) -> tuple[RooflineStepModel, Fitted]:
    """The ``StepModel`` with the fitted factors of ``accelerator`` x ``engine`` x
    ``precision`` (or the nearest level that has them: ``Fitted.key`` says which), for the
    scheduler and the emulated server."""
    arch, acc = _resolve_model(model), _resolve_acc(accelerator)
    f = factors or shipped_factors()
    fitted = choose(f.fitted, acc.id, engine, precision.lower(), acc.vendor.lower(), family(acc))
    sm = RooflineStepModel(
        arch, acc, precision, layout, fitted.eff, kv_precision, max_seqs=max_batch
    )
    return sm, fitted


def predict_point(
    model: str | ModelArch,
    accelerator: str | Accelerator,
    layout: Layout,
    isl: int,
    osl: int,
    target: Target,
    *,
    engine: str = "sglang",
    precision: str = "fp8",
    kv_precision: str = "bf16",
    max_batch: int = DEFAULT_MAX_BATCH,
    factors: Factors | None = None,
    schedule: bool = False,
) -> Prediction:
    """Predict throughput/GPU, TTFT and TPOT of ``model`` on ``layout.gpus`` x
    ``accelerator`` at ``isl``/``osl`` and ``target``. Raises AccelbenchError (one line)
    for bad input, an unknown model or accelerator, or a layout that does not fit."""
    check.integer("isl (--isl)", isl, 1, MAX_CONTEXT, unit="tokens")
    check.integer("osl (--osl)", osl, 1, MAX_CONTEXT, unit="tokens")
    check.integer("tp (--tp)", layout.tp, 1, MAX_TP)
    check.integer("ep (--ep)", layout.ep, 1, MAX_TP)
    check.integer("max batch (--max-batch)", max_batch, 1, MAX_CONCURRENCY)
    if layout.dp_attention and layout.tp == 1:
        raise UsageError(DP_ATTENTION_ONE_GPU.format(flag="--tp"))
    f = factors or shipped_factors()
    sm, fitted = fitted_step_model(
        model, accelerator, layout, engine, precision, kv_precision, max_batch, f
    )
    arch, acc = sm.arch, sm.acc
    if layout.ep > 1 and not arch.is_moe:
        # the step model has no experts to spread: the numbers were EP1's under an EP8 header
        raise UsageError(
            f"--ep {layout.ep} applies to a model with experts; {arch.name} is dense "
            "(leave --ep at 1)"
        )
    if sm.kv_fit(isl + osl) < 1:
        raise AccelbenchError("the layout does not fit: " + sm.memory_arithmetic(isl + osl))
    if target.concurrency is not None:
        conc = target.concurrency
    else:
        conc = _search(sm, isl, osl, target)
    ss = steady_state(sm, isl, osl, conc)
    lim = physical_limits(sm, isl, osl, ss.shape.running)
    capped: list[str] = []
    tput, ttft, tpot = ss.throughput_per_gpu, ss.ttft_s, ss.tpot_s
    if tput > lim.throughput_per_gpu:
        tput, capped = lim.throughput_per_gpu, [*capped, "throughput_per_gpu"]
    if ttft < lim.ttft_s:
        ttft, capped = lim.ttft_s, [*capped, "ttft_s"]
    if tpot < lim.tpot_s:
        tpot, capped = lim.tpot_s, [*capped, "tpot_s"]
    iv = f.intervals.get(acc.id) or f.intervals["*"]
    t_lo, t_hi = _interval(tput, iv["throughput"])
    # inside the physical limit too (an interval wholly beyond it collapses onto it)
    t_hi = min(t_hi, lim.throughput_per_gpu)
    t_lo = min(t_lo, t_hi)
    f_lo, f_hi = _interval(ttft, iv["ttft"])
    f_lo = max(f_lo, lim.ttft_s)
    f_hi = max(f_hi, f_lo)
    p_lo, p_hi = _interval(tpot, iv["tpot"])
    p_lo = max(p_lo, lim.tpot_s)
    p_hi = max(p_hi, p_lo)
    out_share = osl / (isl + osl)
    mid = model_id(arch)
    extrap = _extrapolation(
        f,
        mid,
        _in_calibration(f, mid, arch),
        acc,
        engine,
        precision.lower(),
        isl,
        osl,
        conc,
        fitted.key,
    )
    notes = [n for n in sm.hw.notes if "computing in" in n]
    too_long = arch.context_warning(isl + osl)  # ISL + OSL: the longest a sequence gets
    if too_long:
        notes.append(too_long)
    if ss.shape.running < conc:
        notes.append(
            f"only {ss.shape.running} of {conc} sequences run at once (--max-batch): the "
            "rest wait, and TTFT counts the wait"
        )
    fit = sm.kv_fit(isl + osl / 2)
    if fit < ss.shape.running:
        notes.append(
            f"the KV cache may hold only {fit} sequences at the mean context "
            f"{isl + osl / 2:,.0f} tokens ({sm.memory_arithmetic(isl + osl)}); beyond that the "
            "engine queues or preempts, which this prediction does not model"
        )
    if acc.id not in f.intervals:
        notes.append("interval: the pooled errors of every accelerator (none measured on this one)")
    return Prediction(
        model=mid,
        accelerator=acc.id,
        engine=engine,
        precision=precision.lower(),
        layout=layout,
        isl=isl,
        osl=osl,
        concurrency=conc,
        running=ss.shape.running,
        throughput_per_gpu=Estimate(tput, t_lo, t_hi),
        output_per_gpu=Estimate(tput * out_share, t_lo * out_share, t_hi * out_share),
        ttft_s=Estimate(ttft, f_lo, f_hi),
        tpot_s=Estimate(tpot, p_lo, p_hi),
        bound=ss.bound,
        decode_bound=ss.decode.bound,
        prefill_bound=ss.prefill.bound,
        limit=lim,
        capped=tuple(capped),
        factors=fitted.eff,
        factors_from=f"{fitted.key} ({fitted.level}{fitted.vintage})",
        factors_points=fitted.n,
        extrapolation=tuple(extrap),
        notes=tuple(notes),
        schedule=scheduled(sm, isl, osl, conc) if schedule else None,
    )


def _meets(sm: RooflineStepModel, isl: int, osl: int, conc: int, target: Target) -> bool:
    ss = steady_state(sm, isl, osl, conc)
    if target.interactivity is not None:
        return 1.0 / ss.tpot_s >= target.interactivity
    if target.tpot_slo_s is not None:
        return ss.tpot_s <= target.tpot_slo_s
    return ss.ttft_s <= float(target.ttft_slo_s or 0)


def _search(sm: RooflineStepModel, isl: int, osl: int, target: Target) -> int:
    """The largest concurrency meeting ``target`` (TPOT and TTFT grow with it)."""
    if not _meets(sm, isl, osl, 1, target):
        ss = steady_state(sm, isl, osl, 1)
        raise AccelbenchError(
            f"no concurrency meets the target: at concurrency 1 the prediction is TPOT "
            f"{ss.tpot_s * 1e3:.1f} ms ({1 / ss.tpot_s:.1f} tok/s/user), TTFT {ss.ttft_s * 1e3:.0f} ms"
        )
    lo, hi = 1, MAX_CONCURRENCY
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _meets(sm, isl, osl, mid, target):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _extrapolation(
    f: Factors,
    model: str,
    model_known: bool,
    acc: Accelerator,
    engine: str,
    precision: str,
    isl: int,
    osl: int,
    conc: int,
    key: str,
) -> list[str]:
    out = []
    if not model_known:
        out.append(f"model {model} is not in the calibration data ({', '.join(f.models)})")
    if acc.id not in f.accelerators:
        out.append(
            f"accelerator {acc.id} is not in the calibration data ({', '.join(f.accelerators)})"
        )
    if engine not in f.engines:
        # an unknown engine is a prediction with another engine's factors (a typo too):
        # said plainly, with the engines that have some (docs/PREDICT.md "Extrapolation")
        out.append(
            f"engine {engine!r} is unknown: not in the calibration data "
            f"({', '.join(f.engines)}), so no factors of its own"
        )
    if precision not in f.precisions:
        out.append(
            f"precision {precision} is not in the calibration data ({', '.join(f.precisions)})"
        )
    if key != f"{acc.id}|{engine}|{precision}":
        out.append(f"factors from {key}: no fit for {acc.id} x {engine} x {precision}")
    for name, v, (lo, hi) in (
        ("ISL", isl, f.isl_range),
        ("OSL", osl, f.osl_range),
        ("concurrency", conc, f.concurrency_range),
    ):
        if not lo <= v <= hi:
            out.append(f"{name} {v:,} outside the calibrated {lo:,}-{hi:,}")
    return out
