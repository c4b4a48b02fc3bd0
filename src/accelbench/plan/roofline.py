"""Memory fit and the two limits of decode and prefill: the physical roofline and the
expected ceiling.

Decode step with B sequences at mean context s on N GPUs (docs/FACTS.md)::

    t = max(FLOPs / (N * eff_flops * peak_flops), bytes / (N * eff_bw * bandwidth)) + t_overhead
    FLOPs = 2 * P_active * B + attention(s) * B           (+ amortised prefill, below)
    bytes = weight bytes the step touches + B * kv_bytes(s)

Tokens/s/user = 1 / t; output tokens/s per GPU = B / (t * N). When ISL and OSL are
given, each step also carries the prefill work of ``B / OSL`` new requests (continuous
batching in steady state) and the mean decode context is ``ISL + OSL / 2``; total tokens/s
per GPU is output x (ISL + OSL) / OSL. The memory fit holds every sequence at its peak
context, ``ISL + OSL``. Communication is not modelled (t_comm = 0).

Two limits come out of the same model: the **physical roofline** (eff = 1: peak FLOPS and
peak bandwidth; nothing can beat it) and the **expected ceiling** (eff = the measured or
estimated GEMM and HBM fractions of the catalog; an engineering estimate, not a bound).

Where the catalog keeps a range, the roofline uses the upper end for FLOPS and
bandwidth (the limit is never understated) and the lower end for memory capacity (a fit
is never overstated).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import FIGURE_MIN, Accelerator
from accelbench.plan.architecture import COMPUTE_FORMATS, ModelArch, weight_bytes_per_param

DEFAULT_RESERVE = 0.10  # vLLM's default gpu_memory_utilization is 0.9: 10% held back
BATCH_CAP = 1 << 24  # upper search bound when the KV cache does not limit the batch
MAX_GPUS = 1 << 16  # accepted GPU counts: 1 .. 65,536
MAX_CONTEXT = 10_000_000  # accepted context / ISL / OSL: up to 10M tokens
MAX_POINTS = 1000  # accepted --points: 2 .. 1000


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi], or an AccelbenchError naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise AccelbenchError(f"{name} must be an integer in [{lo:,}, {hi:,}] (got {value!r})")
    return value


def check_number(name: str, value: float, lo: float, hi: float, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] ((lo, hi] with ``lo_open``), or an error."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value > lo if lo_open else value >= lo)
        and value <= hi
    )
    if not ok:
        rng = f"({lo:g}, {hi:g}]" if lo_open else f"[{lo:g}, {hi:g}]"
        raise AccelbenchError(f"{name} must be in {rng} (got {value!r})")
    return float(value)


@dataclass(frozen=True)
class Hardware:
    """N identical accelerators as the roofline sees them."""

    accelerator: str
    n_gpus: int
    compute_format: str
    peak_flops: float  # per GPU, FLOP/s
    bandwidth: float  # per GPU, bytes/s
    memory_bytes: float  # per GPU, bytes (catalog GiB x 2^30)
    eff_flops: float  # share of peak_flops of the expected ceiling
    eff_bw: float  # share of bandwidth of the expected ceiling
    notes: tuple[str, ...] = ()

    def physical(self) -> Hardware:
        """The same hardware at peak FLOPS and bandwidth (the physical roofline)."""
        return replace(self, eff_flops=1.0, eff_bw=1.0)


def hardware_for(
    acc: Accelerator,
    n_gpus: int,
    precision: str,
    eff_flops: float | None = None,
    eff_bw: float | None = None,
) -> Hardware:
    """Roofline view of ``n_gpus`` x ``acc`` running weights in ``precision``.

    The compute format is the first of COMPUTE_FORMATS[precision] the accelerator has
    FLOPS for. Efficiency factors default to the catalog's measured fractions
    (gemm_fraction, hbm_fraction) and to 1.0 (peak) where none was measured."""
    check_int("gpus (--gpus)", n_gpus, 1, MAX_GPUS)
    weight_bytes_per_param(precision)  # validates the name
    notes: list[str] = []
    fmt = None
    for cand in COMPUTE_FORMATS[precision.lower()]:
        if acc.peak_tflops(cand):
            fmt = cand
            break
    if fmt is None:
        raise AccelbenchError(
            f"accelerator {acc.id} has no FLOPS figure for {precision} "
            f"(needs one of {', '.join(COMPUTE_FORMATS[precision.lower()])}_tflops)"
        )
    if fmt != COMPUTE_FORMATS[precision.lower()][0]:
        notes.append(
            f"{acc.id} has no {COMPUTE_FORMATS[precision.lower()][0]} rate: computing in {fmt}"
        )
    tflops = float(acc.peak_tflops(fmt))  # type: ignore[arg-type]
    bw = acc.require("memory_bw_tbs", "upper")
    mem = acc.memory_bytes("lower")
    if bw <= 0:
        raise AccelbenchError(f"accelerator {acc.id}: memory_bw_tbs must be > 0")

    def eff(given: float | None, key: str, what: str) -> float:
        if given is not None:
            floor = FIGURE_MIN[key]  # the catalog's own floor for the same share
            if not (isinstance(given, int | float) and floor <= given <= 1):
                opt = "--eff-flops" if key == "gemm_fraction" else "--eff-bw"
                raise AccelbenchError(
                    f"{what} efficiency ({opt}) must be in [{floor:g}, 1] (got {given})"
                )
            notes.append(f"expected ceiling: {what} efficiency {given:g} (given)")
            return float(given)
        fig = acc.figure(key)
        if fig.upper is not None:
            notes.append(
                f"expected ceiling: {what} efficiency {fig.upper:g} [{fig.status}] "
                f"({fig.note or key})"
            )
            return float(fig.upper)
        notes.append(f"expected ceiling: {what} efficiency 1.0, none measured for {acc.id}")
        return 1.0

    ef = eff(eff_flops, "gemm_fraction", "FLOPS")
    eb = eff(eff_bw, "hbm_fraction", "bandwidth")
    return Hardware(acc.id, n_gpus, fmt, tflops * 1e12, bw * 1e12, mem, ef, eb, tuple(notes))


# ---------------------------------------------------------------------------------
# memory fit


@dataclass(frozen=True)
class Fit:
    """Memory budget of N GPUs for a model at a context and concurrency."""

    weights_bytes: float
    kv_bytes_per_sequence: float  # all copies across GPUs
    usable_bytes: float  # N * memory * (1 - reserve)
    free_for_kv: float
    max_batch: int | None  # None: the KV cache does not limit the batch (context 0)
    concurrency: int
    fits: bool
    weights_fit: bool
    reserve_fraction: float

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return asdict(self)


def memory_fit(
    arch: ModelArch,
    hw: Hardware,
    precision: str,
    kv_precision: str,
    context: float,
    concurrency: int = 1,
    reserve_fraction: float = DEFAULT_RESERVE,
    dp_attention: bool = False,
) -> Fit:
    """Does ``arch`` at ``precision`` plus ``concurrency`` sequences of ``context`` tokens
    fit in ``hw``'s memory less the reserve; and the largest batch at that context. Pass
    the peak context (``Workload.peak_context``): every sequence must fit at its longest."""
    if not (isinstance(reserve_fraction, int | float) and 0 <= reserve_fraction < 1):
        raise AccelbenchError(f"reserve (--reserve) must be in [0, 1) (got {reserve_fraction!r})")
    check_int("concurrency (--concurrency)", concurrency, 1, BATCH_CAP)
    arch.check_tensor_parallel(hw.n_gpus)
    weights = arch.weight_bytes(precision)
    kv = arch.kv_bytes_for_context(context, kv_precision) * arch.kv_replication(
        hw.n_gpus, dp_attention
    )
    usable = hw.n_gpus * hw.memory_bytes * (1 - reserve_fraction)
    free = usable - weights
    if free <= 0:
        max_batch: int | None = 0
    elif kv <= 0:
        max_batch = None
    else:
        max_batch = int(free // kv)
    fits = free > 0 and (max_batch is None or max_batch >= concurrency)
    return Fit(weights, kv, usable, free, max_batch, concurrency, fits, free > 0, reserve_fraction)


# ---------------------------------------------------------------------------------
# roofline


@dataclass(frozen=True)
class Step:
    """One point of the roofline: a batch size and what the physical limit allows."""

    batch: int
    context: float
    step_s: float
    compute_s: float
    memory_s: float
    bound: str
    tok_s_user: float
    output_tok_s_per_gpu: float
    total_tok_s_per_gpu: float

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class Workload:
    """Context of the roofline: mean decode context, peak context (for the memory fit),
    and optionally ISL/OSL for prefill."""

    context: float
    isl: int | None = None
    osl: int | None = None
    kv_precision: str = "bf16"
    peak_context: float = -1.0  # -1: same as context

    def __post_init__(self) -> None:
        if self.peak_context < 0:
            object.__setattr__(self, "peak_context", self.context)

    @classmethod
    def of(
        cls,
        context: float | None,
        isl: int | None,
        osl: int | None,
        kv_precision: str = "bf16",
    ) -> Workload:
        """From --context (mean and peak alike) or --isl/--osl (mean decode context
        ISL + OSL/2, peak ISL + OSL)."""
        if isl is not None:
            check_int("isl (--isl)", isl, 0, MAX_CONTEXT)
        if osl is not None:
            check_int("osl (--osl)", osl, 1, MAX_CONTEXT)
        if context is None:
            if isl is None:
                raise AccelbenchError("give --context, or --isl (and --osl)")
            if isl == 0 and not osl:  # no token to decode: "peak context 0 tokens"
                raise AccelbenchError(
                    "isl (--isl) 0 without --osl is a context of 0 tokens: give --osl, or "
                    "--isl of at least 1"
                )
            return cls(isl + (osl or 0) / 2.0, isl, osl, kv_precision, float(isl + (osl or 0)))
        if isinstance(context, float) and context.is_integer():
            context = int(context)
        # a whole number of tokens, at least the one being decoded (0.4 was "peak context
        # 0 tokens"; 1e-300 reached human_bytes below one byte)
        check_int("context (--context)", context, 1, MAX_CONTEXT)
        return cls(float(context), isl, osl, kv_precision)


@dataclass
class Roofline:
    """The roofline of one model on one set of hardware."""

    arch: ModelArch
    hw: Hardware
    precision: str
    workload: Workload
    overhead_s: float = 0.0
    dp_attention: bool = False
    notes: list[str] = field(default_factory=list)

    def step(self, batch: int) -> Step:
        """The limit for one decode step with ``batch`` sequences."""
        if batch < 1:
            raise AccelbenchError(f"batch must be >= 1 (got {batch})")
        a, hw, w = self.arch, self.hw, self.workload
        s = w.context
        flops = batch * (2.0 * a.active_params + a.attention_flops_per_token(s))
        if w.isl is not None and w.osl is not None:
            flops += batch / w.osl * a.prefill_flops(w.isl)
        kv = a.kv_bytes_for_context(s, w.kv_precision) * a.kv_replication(
            hw.n_gpus, self.dp_attention
        )
        nbytes = a.decode_weight_bytes(batch, self.precision) + batch * kv
        t_c = flops / (hw.n_gpus * hw.eff_flops * hw.peak_flops)
        t_m = nbytes / (hw.n_gpus * hw.eff_bw * hw.bandwidth)
        t = max(t_c, t_m) + self.overhead_s
        out = batch / (t * hw.n_gpus)
        ratio = (w.isl + w.osl) / w.osl if w.isl is not None and w.osl is not None else 1.0
        return Step(
            batch, s, t, t_c, t_m, "compute" if t_c >= t_m else "memory", 1.0 / t, out, out * ratio
        )

    def prefill_s(self, isl: int) -> float:
        """Time to prefill one prompt of ``isl`` tokens alone (compute or weight-read bound)."""
        a, hw = self.arch, self.hw
        t_c = a.prefill_flops(isl) / (hw.n_gpus * hw.eff_flops * hw.peak_flops)
        t_m = a.decode_weight_bytes(max(isl, 1), self.precision) / (
            hw.n_gpus * hw.eff_bw * hw.bandwidth
        )
        return max(t_c, t_m) + self.overhead_s

    def physical(self) -> Roofline:
        """This roofline at peak FLOPS and bandwidth (the physical limit)."""
        return replace(self, hw=self.hw.physical())

    def curve(self, max_batch: int | None, points: int | None = None) -> list[Step]:
        """Steps at batch 1, 2, 4, ... up to ``max_batch`` (inclusive); with ``points``
        (2 .. MAX_POINTS) at most that many, first and last always kept."""
        if points is not None:
            check_int("points (--points)", points, 2, MAX_POINTS)
        top = BATCH_CAP if max_batch is None else max_batch
        if top < 1:
            return []
        batches: list[int] = []
        b = 1
        while b < top:
            batches.append(b)
            b *= 2
        batches.append(top)
        if points is not None and len(batches) > points:
            keep = {round(i * (len(batches) - 1) / (points - 1)) for i in range(points)}
            batches = [x for i, x in enumerate(batches) if i in keep]
        return [self.step(x) for x in batches]

    def best_at_interactivity(self, target: float, max_batch: int | None) -> Step | None:
        """The largest-throughput step whose tokens/s/user is at least ``target``
        (step time grows with the batch, so the largest such batch); None if even
        batch 1 is slower."""
        check_number("interactivity (--interactivity)", target, 0, 1e7, lo_open=True)
        top = BATCH_CAP if max_batch is None else max_batch
        if top < 1 or self.step(1).tok_s_user < target:
            return None
        lo, hi = 1, top
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.step(mid).tok_s_user >= target:
                lo = mid
            else:
                hi = mid - 1
        return self.step(lo)

    def max_throughput(self, max_batch: int | None) -> Step | None:
        """The step at the largest batch that fits (throughput grows with batch)."""
        top = BATCH_CAP if max_batch is None else max_batch
        return self.step(top) if top >= 1 else None


def efficiency(measured: float, limit: float) -> float:
    """measured / limit (NaN where the limit is not positive)."""
    return measured / limit if limit > 0 else math.nan
