"""The predicted KV-capacity knee: how many concurrent multi-turn sessions fit in the KV
cache before the prefix cache must evict a live session's history (docs/COST_AND_PLAN.md,
"The KV-capacity knee").

The arithmetic, all of it checkable by hand:

* **Capacity** (tokens): the KV budget over the bytes one token's KV cache takes on all
  GPUs. The budget is ``plan``'s memory fit (``roofline.memory_fit``): GPUs x HBM x
  (1 - reserve) - weights, with the catalog's HBM figure in GiB (2^30 bytes; the catalog
  reads the vendors' "GB" of HBM as binary); or a given KV budget in GiB per GPU (vLLM's
  KV cache size, ``VLLM_CPU_KVCACHE_SPACE``); or a given context size in tokens
  (llama-server's ``n_ctx``). Bytes per token: ``ModelArch.kv_bytes_per_token`` x the
  copies tensor parallelism keeps (``ModelArch.kv_replication``). Capacity in blocks =
  capacity tokens // block size - the blocks the engine reserves (vLLM: its null block).
* **Working set** of one session at its longest: what must stay cached for its last turn
  to hit, that turn's prompt, ``P + T x (U + O + template) - O`` tokens (the last reply is
  never read again by the session). The system prompt is shared by every session, so its
  full blocks (``P // B``) are held once; the rest is the session's own. An engine (vLLM,
  llama-server) allocates a running request's partial last block too, so its prompt is
  rounded up to whole blocks; the ideal prefix cache (the reference server's,
  ``ideal_cache``) keeps only full blocks, rounded down. Own blocks = those less the
  shared ones; ``W(c) = shared + c x own``. Checked on vLLM 0.32.0's CPU build (the tiny
  model, 99 usable blocks of 32, P = 64, T = 4, U = 48, O = 96): knee (99 - 2) / 15 =
  6.47; the hit rate held its ideal up to 6 sessions and fell at 7 (tests/test_knee.py).
* **Preemption** (engines): while the last turns decode together each also holds its
  reply, ``ceil((P + T x (U + O + template)) / B)`` blocks; past ``preemption_sessions``
  they do not all fit and the engine preempts some (recomputes them later), which costs
  TTFT and throughput but not the cached tokens counted at admission. Not checked
  against an engine.
* **Knee** = ``(capacity blocks - shared) / own``: the number of sessions (a real number)
  at which the working set fills the cache; ``floor(knee)`` sessions fit, one more does not.
  This is the knee of sessions that run in step (a sweep point that starts its ``c``
  sessions together reaches every session's longest context at once); sessions that start
  at staggered times hold less on average, so their knee comes later.
* **Interval** (analytic, 80 %): with spread in turns, user tokens or output tokens, the
  working set of ``c`` independent sessions is a sum whose mean is ``c x own`` and whose
  standard deviation is ``sqrt(c) x sd`` (``sd`` of one session's own blocks, from its
  last prompt's: ``E[T] sd_U^2 + (E[T] - 1) sd_O^2 + sd_T^2 (U + O + template)^2``). The
  interval's low end is the ``c`` at which that sum exceeds the capacity with probability
  90 %, its high end the ``c`` at which it does with probability 10 % (normal
  approximation): ``c = x^2`` with ``own x^2 + z sd x = capacity - shared``, ``z = +-1.2816``.
  Taking the 10th and 90th percentile session for every session at once would assume
  all sessions are long (or short) together, overstating the spread by ``sqrt(c)``.
  Without spread the interval is the point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.hardware.catalog import GIB, Accelerator, find_accelerator, load_catalog
from accelbench.metrics.knee import (
    INTERVAL_COVERAGE,
    CapacityKnee,
    SessionMix,
    capacity_knee,
    knee_at,
)
from accelbench.metrics.verdict import Interval
from accelbench.plan.architecture import DP_ATTENTION_ONE_GPU, ModelArch, kv_bytes_per_element
from accelbench.plan.models import resolve_model
from accelbench.plan.roofline import DEFAULT_RESERVE, MAX_GPUS, hardware_for, memory_fit

__all__ = ["CapacityKnee", "KneePrediction", "SessionMix", "capacity_knee", "predict_knee",
           "predict_knees"]  # fmt: skip

CapacitySource = Literal["hbm", "kv-cache-gib", "context-tokens"]

MAX_KV_GIB = 1 << 20  # a KV budget per GPU, GiB
MIN_KV_GIB = 1 / 1024  # 1 MiB
MAX_BLOCK = 1 << 20


@dataclass(frozen=True)
class MemoryArithmetic:
    """``plan``'s memory fit, as the knee uses it: usable = GPUs x memory x (1 - reserve),
    KV budget = usable - weights (bytes, all GPUs)."""

    memory_gib_per_gpu: float  # the catalog's figure (GiB; the lower end of a range)
    memory_bytes_per_gpu: float  # x 2^30
    gpus: int
    reserve_fraction: float
    usable_bytes: float
    weights_bytes: float
    kv_budget_bytes: float  # max(0, usable - weights)


@dataclass(frozen=True)
class KneePrediction:
    """The predicted knee and every figure it comes from (units in the names)."""

    model: str
    accelerator: str | None  # catalog id; None when the capacity was given
    accelerator_name: str | None
    tp: int
    precision: str
    kv_precision: str
    capacity_source: CapacitySource
    memory: MemoryArithmetic | None  # the HBM arithmetic (capacity_source "hbm" only)
    kv_budget_bytes: float | None  # all GPUs; None when the capacity was given in tokens
    kv_bytes_per_token: float  # one copy, every layer
    kv_replication: int
    capacity_tokens: int
    block_size: int
    reserved_blocks: int
    capacity_blocks: int  # capacity_tokens // block_size - reserved_blocks
    # the sessions
    mix: SessionMix
    ideal_cache: bool  # True: the ideal rule's cache (full blocks only)
    session_tokens: float  # mean, at its longest (the last output included)
    last_prompt_tokens: float  # mean: what must stay cached for the last turn to hit
    last_prompt_tokens_sd: float
    session_tokens_sd: float
    shared_blocks: int
    session_blocks: int  # a session's own blocks: its last prompt's, less the shared
    session_blocks_sd: float
    decode_blocks: int  # own blocks of the last turn with its reply (engines: preemption)
    # the knee
    knee_sessions: float  # sessions at which the working set fills the cache
    max_sessions: int  # floor(knee): the most sessions whose working sets all fit
    interval: Interval  # knee_sessions' analytic interval (INTERVAL_COVERAGE)
    preemption_sessions: float  # (capacity - shared) / decode_blocks
    slots: int | None = None
    limited_by: str = "kv capacity"  # or "slots"
    warnings: list[str] = field(default_factory=list)

    @property
    def kv_bytes_per_token_all_gpus(self) -> float:
        """Bytes one token's KV cache takes on all GPUs together (every copy)."""
        return self.kv_bytes_per_token * self.kv_replication

    def working_set_blocks(self, sessions: int) -> int:
        """Blocks ``sessions`` mean sessions hold at their longest: shared + c x own."""
        return self.shared_blocks + sessions * self.session_blocks

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        d = asdict(self)
        d["interval"] = self.interval.to_json()
        d["kv_bytes_per_token_all_gpus"] = self.kv_bytes_per_token_all_gpus
        return d


def _capacity_from_hbm(
    arch: ModelArch,
    acc: Accelerator,
    tp: int,
    precision: str,
    kv_precision: str,
    reserve: float,
    dp_attention: bool,
) -> MemoryArithmetic:
    """``plan``'s memory fit for one token: the same arithmetic and catalog figures."""
    hw = hardware_for(acc, tp, precision)
    fit = memory_fit(arch, hw, precision, kv_precision, 1.0, 1, reserve, dp_attention)
    return MemoryArithmetic(
        memory_gib_per_gpu=acc.require("memory_gib", "lower"),
        memory_bytes_per_gpu=hw.memory_bytes,
        gpus=tp,
        reserve_fraction=reserve,
        usable_bytes=fit.usable_bytes,
        weights_bytes=fit.weights_bytes,
        kv_budget_bytes=max(0.0, fit.free_for_kv),
    )


def predict_knee(
    model: str | ModelArch,
    accelerator: str | None,
    tp: int,
    mix: SessionMix,
    *,
    kv_cache_gib: float | None = None,
    context_tokens: int | None = None,
    block_size: int = 16,
    reserved_blocks: int = 0,
    slots: int | None = None,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    reserve: float = DEFAULT_RESERVE,
    dp_attention: bool = False,
    ideal_cache: bool = False,
    catalog_files: Sequence[str | Path] | None = None,
) -> KneePrediction:
    """The KV-capacity knee of ``mix`` sessions of ``model`` on ``tp`` GPUs.

    Capacity: ``context_tokens`` (llama-server's n_ctx) if given, else ``kv_cache_gib``
    (a KV budget in GiB per GPU, as vLLM's) if given, else ``plan``'s memory fit of
    ``accelerator``. ``slots``: llama-server's parallel slots; each holds one session's
    prompt, so no more than ``slots`` sessions stay cached. ``block_size``: the prefix
    cache's block in tokens (vLLM 16 on GPUs, 128 on its CPU build; llama-server reuses any
    prefix: 1). ``reserved_blocks``: blocks the engine keeps out of the cache (vLLM: 1, the
    block pool's null block). ``ideal_cache``:
    the working set of the ideal prefix-cache rule (the reference server) instead of an
    engine's, which also holds the running last turn's output. Bad input: one
    UsageError line; an unknown model or accelerator: one line listing the known ones."""
    v.integer("--tp", tp, 1, MAX_GPUS)
    v.integer("--block-size", block_size, 1, MAX_BLOCK, unit="tokens")
    v.integer("--reserved-blocks", reserved_blocks, 0, MAX_BLOCK)
    # 1 MiB: below it no block of any model fits (1e-300 was accepted)
    v.optional_number("--kv-cache-gib", kv_cache_gib, MIN_KV_GIB, MAX_KV_GIB, unit="GiB")
    v.optional_integer("--context-tokens", context_tokens, 1, 1 << 40, unit="tokens")
    v.optional_integer("--slots", slots, 1, 1 << 20)
    v.number("--reserve", reserve, 0, 1)
    if reserve >= 1:
        raise UsageError(f"--reserve must be in [0, 1) (got {reserve!r})")
    if kv_cache_gib is not None and context_tokens is not None:
        raise UsageError("give --kv-cache-gib or --context-tokens, not both")
    mix.check()
    for name, mean in (("--user-tokens", mix.user_tokens), ("--osl", mix.output_tokens)):
        if 0 < mean < 1:  # a mean of 1e-300 tokens is no turn's text
            raise UsageError(f"{name} must be 0 or a mean of at least 1 token (got {mean!r})")
    arch = model if isinstance(model, ModelArch) else resolve_model(model)
    arch.check_tensor_parallel(tp)
    kv_bytes_per_element(kv_precision)  # validates the name
    per_token = arch.kv_bytes_per_token(kv_precision)
    repl = arch.kv_replication(tp, dp_attention)
    warnings: list[str] = []
    if dp_attention:
        if tp == 1:
            raise UsageError(DP_ATTENTION_ONE_GPU.format(flag="--tp"))
        unused = arch.dp_attention_unused(tp)
        warnings += [unused] if unused else []
    acc = (
        find_accelerator(accelerator, load_catalog(catalog_files))
        if accelerator is not None
        else None
    )
    memory: MemoryArithmetic | None = None
    budget: float | None = None
    source: CapacitySource
    if context_tokens is not None:
        source, capacity_tokens = "context-tokens", context_tokens
    else:
        if kv_cache_gib is not None:
            source, budget = "kv-cache-gib", kv_cache_gib * GIB * tp
        elif acc is None:
            raise UsageError("give --accelerator, --kv-cache-gib or --context-tokens")
        else:
            source = "hbm"
            memory = _capacity_from_hbm(
                arch, acc, tp, precision, kv_precision, reserve, dp_attention
            )
            budget = memory.kv_budget_bytes
            if budget <= 0:
                warnings.append(
                    f"the weights ({memory.weights_bytes / GIB:,.1f} GiB) do not fit in "
                    f"{tp} x {acc.id} less the reserve: no room for a KV cache"
                )
        capacity_tokens = int(budget // (per_token * repl))
    if arch.sliding_layers and arch.sliding_window:
        warnings.append(
            f"{arch.name} has {len(arch.sliding_layers)} sliding-window layers: the capacity "
            f"counts every layer as full attention, so the knee is conservative"
        )
    ck = capacity_knee(capacity_tokens, mix, block_size=block_size,
                       reserved_blocks=reserved_blocks, ideal_cache=ideal_cache)  # fmt: skip
    if capacity_tokens > 0 and capacity_tokens // block_size <= reserved_blocks:
        # a knee of 0 was printed without a word, its table's "tokens // B - R" as 0
        warnings.append(
            f"the cache holds no block for a session: {capacity_tokens:,} tokens // "
            f"{block_size:,} = {capacity_tokens // block_size:,} blocks, "
            f"{reserved_blocks:,} reserved"
        )
    capacity_blocks, shared, session_blocks = (
        ck.capacity_blocks,
        ck.shared_blocks,
        ck.session_blocks,
    )
    decode_blocks = max(1, math.ceil(mix.session_tokens / block_size) - shared)
    sd_blocks = ck.session_blocks_sd
    knee = ck.knee_sessions
    lo, hi = ck.interval.low or 0.0, ck.interval.high or 0.0
    method = ck.interval.method
    limited_by = "kv capacity"
    if slots is not None and slots < knee:
        limited_by = "slots"
        knee, lo, hi = float(slots), min(lo, slots), min(hi, slots)
    if slots is not None and context_tokens is not None:
        per_slot = context_tokens // slots
        if mix.session_tokens > per_slot:
            warnings.append(
                f"a session at its longest ({mix.session_tokens:,.0f} tokens) exceeds a "
                f"slot's context ({context_tokens:,} / {slots} = {per_slot:,} tokens)"
            )
    if arch.max_context is not None and mix.session_tokens > arch.max_context:
        warnings.append(
            f"a session at its longest ({mix.session_tokens:,.0f} tokens) exceeds "
            f"{arch.name}'s maximum context of {arch.max_context:,} tokens"
        )
    return KneePrediction(
        model=arch.name,
        accelerator=acc.id if acc else None,
        accelerator_name=acc.name if acc else None,
        tp=tp,
        precision=precision,
        kv_precision=kv_precision,
        capacity_source=source,
        memory=memory,
        kv_budget_bytes=budget,
        kv_bytes_per_token=per_token,
        kv_replication=repl,
        capacity_tokens=capacity_tokens,
        block_size=block_size,
        reserved_blocks=reserved_blocks,
        capacity_blocks=capacity_blocks,
        mix=mix,
        ideal_cache=ideal_cache,
        session_tokens=mix.session_tokens,
        last_prompt_tokens=mix.last_prompt_tokens,
        last_prompt_tokens_sd=mix.last_prompt_tokens_sd,
        session_tokens_sd=mix.session_tokens_sd,
        shared_blocks=shared,
        session_blocks=session_blocks,
        session_blocks_sd=sd_blocks,
        decode_blocks=decode_blocks,
        knee_sessions=knee,
        max_sessions=math.floor(knee),
        interval=Interval(lo, hi, INTERVAL_COVERAGE, method),
        preemption_sessions=knee_at(capacity_blocks, shared, decode_blocks, 0.0, 0.0),
        slots=slots,
        limited_by=limited_by,
        warnings=warnings,
    )


def predict_knees(
    model: str | ModelArch,
    accelerators: Sequence[str],
    tp: int,
    mix: SessionMix,
    **kw: object,
) -> list[KneePrediction]:
    """:func:`predict_knee` for each accelerator, same model, layout and mix (side by side)."""
    arch = model if isinstance(model, ModelArch) else resolve_model(model)
    return [predict_knee(arch, a, tp, mix, **kw) for a in accelerators]  # type: ignore[arg-type]
