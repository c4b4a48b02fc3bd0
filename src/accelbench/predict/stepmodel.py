"""The step-time model: how long one continuous-batching step takes on a given accelerator,
model, precision and layout (the ``StepModel`` of ``predict.steps``), and a closed-loop
steady state built on it.

One step on N GPUs (the layout's tensor-parallel group)::

    t = max(FLOPs / (N * eff_c * peak_flops), bytes / (N * eff_b * bandwidth))
        + comm_bytes_per_gpu / scale_up_bandwidth + overhead

- FLOPs: ``2 * P_active`` per token, plus attention: decode tokens over their context
  (``ModelArch.attention_flops_per_token``), prefill tokens causally over the prompt
  (``ModelArch.prefill_flops``).
- bytes: the weights the step touches (``ModelArch.decode_weight_bytes``: all dense
  weights, the experts the batch routes to) plus the KV cache it reads.
- communication: two all-reduces per layer of ``tokens x hidden`` BF16 activations
  (ring: ``2 (N-1)/N`` of the message per GPU) over the per-GPU scale-up bandwidth, one
  direction (``scale_up_gbs_unidir``); not overlapped with compute.
- eff_c, eff_b and the fixed per-step overhead (kernel launches, the scheduler, the
  collectives' latency) are the fitted efficiency factors (``predict.fit``).

The bound of a step is whichever of compute, memory, interconnect and overhead
("scheduling") is largest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import Accelerator
from accelbench.plan.architecture import ModelArch, human_bytes, weight_bytes_per_param
from accelbench.plan.roofline import DEFAULT_RESERVE, Hardware, hardware_for
from accelbench.predict.scheduler import Admission
from accelbench.predict.steps import Bound, Step, StepTime

ACT_BYTES = 2.0  # BF16 activations in the all-reduces
# engines' default cap on running sequences (vLLM's max_num_seqs is 256-1024)
DEFAULT_MAX_BATCH = 1024


@dataclass(frozen=True)
class Efficiency:
    """The fitted factors of one accelerator x engine x precision."""

    compute: float  # share of peak dense FLOPS reached
    bandwidth: float  # share of peak HBM bandwidth reached
    overhead_s: float  # fixed time per step
    request_s: float = (
        0.0  # fixed time per request before its first token (HTTP, tokenizer, scheduling)
    )


@dataclass(frozen=True)
class Layout:
    """Where the model runs: ``tp`` GPUs in one tensor-parallel group, experts spread
    over ``ep`` of them, attention data-parallel or not."""

    tp: int
    ep: int = 1
    dp_attention: bool = False

    @property
    def gpus(self) -> int:
        return self.tp

    def text(self) -> str:
        s = f"TP{self.tp}"
        if self.ep > 1:
            s += f" EP{self.ep}"
        if self.dp_attention:
            s += " DP-attention"
        return s


def weight_format(precision: str, vendor: str) -> str:
    """The weight format behind a source's precision name: InferenceX's "fp4" is NVFP4 on
    NVIDIA and MXFP4 on AMD (their checkpoints of DeepSeek-R1)."""
    p = precision.lower()
    if p == "fp4":
        return "nvfp4" if vendor.lower() == "nvidia" else "mxfp4"
    return p


class RooflineStepModel:
    """A ``StepModel`` for ``arch`` at ``precision`` on ``layout.gpus`` x ``acc``."""

    def __init__(
        self,
        arch: ModelArch,
        acc: Accelerator,
        precision: str,
        layout: Layout,
        eff: Efficiency,
        kv_precision: str = "bf16",
        reserve: float = DEFAULT_RESERVE,
        max_seqs: int = DEFAULT_MAX_BATCH,
    ) -> None:
        self.arch, self.acc, self.layout, self.eff = arch, acc, layout, eff
        self.precision = weight_format(precision, acc.vendor)
        self.kv_precision = kv_precision
        self.reserve = reserve
        self._max_seqs = max_seqs
        arch.check_tensor_parallel(layout.tp)
        if layout.ep < 1 or layout.ep > layout.tp or layout.tp % layout.ep:
            raise AccelbenchError(f"expert parallel size {layout.ep} must divide TP {layout.tp}")
        self.hw: Hardware = hardware_for(acc, layout.gpus, self.precision, 1.0, 1.0)
        link = acc.figure("scale_up_gbs_unidir").lower
        self.link_bytes_s = float(link) * 1e9 if link else 0.0
        self.kv_copies = arch.kv_replication(layout.tp, layout.dp_attention)
        self.kv_per_token = arch.kv_bytes_per_token(kv_precision) * self.kv_copies
        self.weights = arch.weight_bytes(self.precision)
        self.attn_params = arch.breakdown().attention
        self.attn_bytes = self.attn_params * weight_bytes_per_param(self.precision)
        self.usable = layout.gpus * self.hw.memory_bytes * (1 - reserve)
        # a decode-only step's parts are affine in its context (no sliding window): the
        # scheduler asks for thousands of them, so keep (parts at 0, slope) per batch
        self._affine = not arch.sliding_window
        self._decode_coef: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}

    # ---- what fits ----------------------------------------------------------------
    def memory_arithmetic(self, context: int) -> str:
        """The memory budget in words (for a layout that does not fit)."""
        n = self.layout.gpus
        return (
            f"{self.arch.name} at {self.precision}: weights {human_bytes(self.weights)} + KV "
            f"{human_bytes(self.arch.kv_bytes_for_context(context, self.kv_precision) * self.kv_copies)}"
            f" per sequence of {context:,} tokens (x{self.kv_copies} copies) against {n} x "
            f"{human_bytes(self.hw.memory_bytes)} x {1 - self.reserve:g} usable = "
            f"{human_bytes(self.usable)}"
        )

    def kv_capacity_tokens(self) -> int:
        free = self.usable - self.weights
        return max(0, int(free // self.kv_per_token)) if self.kv_per_token > 0 else 1 << 40

    def max_batch(self) -> int:
        return self._max_seqs

    def kv_fit(self, context: float) -> int:
        """Sequences of ``context`` tokens whose KV cache fits beside the weights (less
        the reserve; paged KV: a sequence holds only the tokens it has so far)."""
        per = self.arch.kv_bytes_for_context(context, self.kv_precision) * self.kv_copies
        free = self.usable - self.weights
        if free <= 0:
            return 0
        return int(free // per) if per > 0 else 1 << 40

    # ---- time ---------------------------------------------------------------------
    def _parts(self, flops: float, nbytes: float, tokens: float) -> tuple[float, float, float]:
        """(compute, memory, interconnect) seconds at peak FLOPS and bandwidth (the
        efficiency factors divide the first two)."""
        hw, n = self.hw, self.layout.gpus
        t_n = 0.0
        if n > 1 and self.link_bytes_s > 0:
            msg = tokens * self.arch.hidden_size * ACT_BYTES
            t_n = self.arch.num_layers * 2 * msg * 2 * (n - 1) / n / self.link_bytes_s
        return flops / (n * hw.peak_flops), nbytes / (n * hw.bandwidth), t_n

    def _time(self, parts: tuple[float, float, float]) -> StepTime:
        return step_from_parts(parts, self.eff)

    def _work(
        self,
        decode_seqs: int,
        decode_score: float,
        prefill_tokens: int,
        prefill_score: float,
        prompts: int,
        kv_read: float,
    ) -> tuple[float, float, float]:
        """(compute, memory, interconnect) seconds at peak of a step: one token for each of
        ``decode_seqs`` sequences (``decode_score`` FLOPs of attention scores) and
        ``prefill_tokens`` prompt tokens of ``prompts`` prompts (``prefill_score``), with
        ``kv_read`` bytes of KV cache read.

        With DP attention every GPU holds all the attention weights (each reads its own
        copy: ``N - 1`` more copies read than under TP) and runs the attention of its own
        sequences: the busiest GPU has ``ceil(seqs / N)`` of them, so the attention FLOPs
        count ``N * ceil(seqs / N) / seqs`` times, for the decoding sequences and for the
        prompts each (a prompt prefilled alone runs its attention on one GPU)."""
        a = self.arch
        tokens = decode_seqs + prefill_tokens
        flops = 2.0 * a.active_params * tokens + decode_score + prefill_score
        nbytes = a.decode_weight_bytes(max(1, tokens), self.precision) + kv_read
        n = self.layout.gpus
        if self.layout.dp_attention and n > 1:
            for seqs, toks, score in (
                (decode_seqs, decode_seqs, decode_score),
                (prompts, prefill_tokens, prefill_score),
            ):
                if seqs > 0:
                    attn = 2.0 * self.attn_params * toks + score
                    flops += attn * (n * math.ceil(seqs / n) / seqs - 1)
            nbytes += self.attn_bytes * (n - 1)
        return self._parts(flops, nbytes, tokens)

    def step_parts(self, step: Step) -> tuple[float, float, float]:
        """``step``'s (compute, memory, interconnect) seconds at peak. The prefill tokens
        are ``step.prefill_seqs`` prompts' (one where the Step does not say), taken as
        equal shares of the tokens and of their cached context."""
        if step.prefill_tokens == 0 and self._affine:
            coef = self._decode_coef.get(step.decode_seqs)
            if coef is None:
                at0 = self._step_parts(Step(decode_seqs=step.decode_seqs))
                big = self._step_parts(Step(decode_seqs=step.decode_seqs, decode_context=1 << 30))
                coef = (at0, tuple((b - a) / (1 << 30) for a, b in zip(at0, big, strict=True)))
                self._decode_coef[step.decode_seqs] = coef
            ctx = step.decode_context
            (c0, m0, n0), (c1, m1, n1) = coef
            return (c0 + c1 * ctx, m0 + m1 * ctx, n0 + n1 * ctx)
        return self._step_parts(step)

    def _step_parts(self, step: Step) -> tuple[float, float, float]:
        a = self.arch
        pre_score = 0.0
        prompts = max(1, step.prefill_seqs) if step.prefill_tokens else 0
        if step.prefill_tokens:
            # causal attention of each prompt's new tokens after its cached ones
            ctx, new = step.prefill_context / prompts, step.prefill_tokens / prompts
            one = a.prefill_flops(round(ctx + new)) - a.prefill_flops(round(ctx))
            pre_score = prompts * (one - 2.0 * a.active_params * new)
        ctx_all = step.decode_context + step.prefill_context
        kv_read = a.kv_bytes_for_context(ctx_all, self.kv_precision) * self.kv_copies
        return self._work(
            step.decode_seqs,
            a.attention_flops_per_token(step.decode_context),
            step.prefill_tokens,
            pre_score,
            prompts,
            kv_read,
        )

    def step_time(self, step: Step) -> StepTime:
        if step.prefill_tokens + step.decode_seqs <= 0:
            return StepTime(0.0, "scheduling")
        return self._time(self.step_parts(step))

    def prefill_parts(self, prompts: int, isl: int) -> tuple[float, float, float]:
        """Prefill of ``prompts`` prompts of ``isl`` tokens each, in one batch, at peak."""
        a = self.arch
        score = prompts * (a.prefill_flops(isl) - 2.0 * a.active_params * isl)
        return self._work(0, 0.0, prompts * isl, score, prompts, 0.0)


def step_from_parts(parts: tuple[float, float, float], eff: Efficiency) -> StepTime:
    """A step's time and bound from its peak-rate parts and the efficiency factors."""
    t_c, t_m = parts[0] / eff.compute, parts[1] / eff.bandwidth
    named: dict[Bound, float] = {
        "compute": t_c,
        "memory": t_m,
        "interconnect": parts[2],
        "scheduling": eff.overhead_s,
    }
    bound = max(named, key=lambda k: named[k])
    return StepTime(max(t_c, t_m) + parts[2] + eff.overhead_s, bound)


@dataclass(frozen=True)
class LoopShape:
    """What a closed-loop point is, apart from the efficiency factors: the running batch,
    the prompts prefilled together, the peak-rate parts of its two kinds of step, and
    when the engine takes new requests in."""

    concurrency: int
    running: int  # sequences decoding at once (the rest wait for a slot: max_batch)
    prefill_batch: int  # prompts prefilled together (the arrivals per admission, >= 1)
    isl: int
    osl: int
    gpus: int
    decode: tuple[float, float, float]  # (compute, memory, interconnect) s at peak
    prefill: tuple[float, float, float]
    admission: Admission = Admission()

    def row(self) -> tuple[float, ...]:
        """The shape as ``loop_metrics`` takes it."""
        a = self.admission
        return (self.running, self.prefill_batch, self.isl, self.osl, self.concurrency,
                self.gpus, a.recv_interval, a.balance_ranks, a.balance_timeout_steps)  # fmt: skip


def loop_shape(
    model: RooflineStepModel,
    isl: int,
    osl: int,
    concurrency: int,
    admission: Admission | None = None,
) -> LoopShape:
    """The closed loop of ``concurrency`` users on ``model`` at ISL/OSL. The prompts
    prefilled together are the arrivals per decode step (``b / OSL``), or per look for
    new requests (``recv_interval`` steps), or the ranks a balanced admission waits for,
    whichever is most."""
    adm = admission or Admission()
    b = min(concurrency, model.max_batch())
    if model.kv_fit(isl + osl) < 1:
        raise AccelbenchError(
            "the layout does not hold one sequence: " + model.memory_arithmetic(isl + osl)
        )
    dec = model.step_parts(Step(decode_seqs=b, decode_context=int(b * (isl + osl / 2))))
    per_look = adm.recv_interval if b > 1 else 1
    k = min(b, max(1, round(b * per_look / osl), adm.balance_ranks))
    return LoopShape(
        concurrency, b, k, isl, osl, model.layout.gpus, dec, model.prefill_parts(k, isl), adm
    )


def loop_metrics(
    dec: Any, pre: Any, eff_c: Any, eff_b: Any, overhead: Any, request: Any, shape: Any
) -> tuple[Any, Any, Any, Any, Any]:
    """(throughput/GPU, TTFT, TPOT, decode step s, prefill s) of closed loops; every
    argument a float or a numpy array over points (``dec``/``pre``: (..., 3) parts;
    ``shape``: (b, k, isl, osl, concurrency, gpus[, recv_interval, balance_ranks,
    balance_timeout_steps]), ``LoopShape.row``).

    One cycle of the running batch ``b`` lasts ``osl * t_decode + (b / k) * t_prefill(k)``:
    every request is prefilled once (``k`` prompts together) and decoded in ``osl``
    steps. TPOT is the cycle less the request's own prefill, over ``osl``; TTFT is the
    wait for the engine to look at new requests (half a decode step, or half of
    ``recv_interval`` steps while others decode), the wait of a balanced admission for
    its ``balance_ranks - 1`` other arrivals (half of them on average, at ``b / cycle``
    arrivals per second, at most ``balance_timeout_steps`` decode steps), the prompts
    ahead of it (M/D/1 at the prefill's share of time ``rho``, ``rho / (2 (1 - rho))``
    prefills, capped at the ``b / k - 1`` prefills the other running users can send
    ahead of it: the M/D/1 wait diverges as ``rho`` nears 1, a closed loop's does not;
    one user waits for no one), its prefill, a fixed
    per-request time and, with more users than ``b``, the wait for a slot (Little:
    ``(c - b) / b`` cycles)."""
    b, k, isl, osl, c, n = shape[:6]
    r, g, timeout = shape[6:9] if len(shape) > 6 else (1, 1, 0)
    t_dec = np.maximum(dec[..., 0] / eff_c, dec[..., 1] / eff_b) + dec[..., 2] + overhead
    t_pre = np.maximum(pre[..., 0] / eff_c, pre[..., 1] / eff_b) + pre[..., 2] + overhead
    cycle = osl * t_dec + (b / k) * t_pre
    tpot = (cycle - t_pre) / osl
    rho = (b / k) * t_pre / cycle  # the share of time spent prefilling
    # the prompts ahead of this one: M/D/1 at the prefill's share of time, but a closed
    # loop of b users prefilled k at a time has at most b/k - 1 prefills ahead of it
    wait = np.minimum(rho / (2 * (1 - rho)), np.maximum(b / k - 1, 0)) * t_pre
    look = np.where(np.asarray(b) > 1, r, 1) * t_dec / 2
    balance = np.minimum((np.asarray(g) - 1) / 2 * cycle / b, timeout * t_dec)
    ttft = look + balance + wait + t_pre + request + np.maximum(c - b, 0) / b * cycle
    tput = b * (isl + osl) / (cycle * n)
    return tput, ttft, tpot, t_dec, t_pre


@dataclass(frozen=True)
class SteadyState:
    """A closed loop of ``concurrency`` users in steady state (medians; no spread)."""

    shape: LoopShape
    throughput_per_gpu: float  # input + output tokens/s per GPU
    output_per_gpu: float  # output tokens/s per GPU
    ttft_s: float
    tpot_s: float
    decode: StepTime
    prefill: StepTime
    bound: Bound  # what limits the point as a whole: the bound of the phase that takes longer


def steady_state(
    model: RooflineStepModel,
    isl: int,
    osl: int,
    concurrency: int,
    admission: Admission | None = None,
) -> SteadyState:
    """A closed loop at ``concurrency`` (``loop_metrics``): the event-driven scheduler's
    (``predict.scheduler``) closed-form stand-in over the same step model, with queueing
    only as an average. The fit evaluates it."""
    sh = loop_shape(model, isl, osl, concurrency, admission)
    e = model.eff
    shape = sh.row()
    tput, ttft, tpot, _, _ = loop_metrics(
        np.array(sh.decode),
        np.array(sh.prefill),
        e.compute,
        e.bandwidth,
        e.overhead_s,
        e.request_s,
        shape,
    )
    dec, pre = step_from_parts(sh.decode, e), step_from_parts(sh.prefill, e)
    decoding = osl * dec.seconds >= (sh.running / sh.prefill_batch) * pre.seconds
    return SteadyState(
        sh,
        float(tput),
        float(tput) * osl / (isl + osl),
        float(ttft),
        float(tpot),
        dec,
        pre,
        dec.bound if decoding else pre.bound,
    )
