"""An event-driven scheduler of continuous batching, in the style of vLLM V1.

Each engine step takes, within a token budget (``max_num_batched_tokens``):

1. one token for every running sequence that is decoding;
2. the next chunk of every running sequence still in its prefill (chunked prefill), in
   admission order;
3. then waiting requests in arrival order (FCFS, never skipping the head): one is
   admitted while fewer than ``max_batch()`` sequences run and its whole KV cache
   (prompt plus output tokens, rounded up to blocks) fits in what is left of
   ``kv_capacity_tokens()``; it gets the first chunk of its prefill. Only requests the
   engine has seen count (``Admission``: by default every arrived one; with a receive
   interval those arrived by its last look; a balanced admission holds them until
   enough have come or the oldest has waited long enough).

A ``StepModel`` gives the step's duration and its bound. Tokens come out at the end of
the step that computed them: the step that finishes a prompt yields its first token,
and each later step one more. Prefix-cache hits (``cached_tokens``) are not prefilled,
but their KV is counted (a shared block is charged to every request that holds it:
an upper bound on KV use).

Reserving a request's whole KV at admission means no sequence is ever preempted, so
a running sequence emits one token in every step until it ends: its token times are
consecutive step ends. (vLLM allocates blocks as tokens come and preempts under KV
pressure instead; the two schedules are the same while the KV cache is not full.)

The same :class:`Scheduler` runs simulated time (:func:`open_loop`,
:func:`closed_loop`: ``accelbench predict``) and real time (the emulated server calls
:meth:`Scheduler.step` at each step boundary). Pure and deterministic: the same
inputs give the same schedule; each step costs time in the requests that change
(admitted, chunked, finished), not in the batch size.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from accelbench.errors import AccelbenchError
from accelbench.predict.steps import Bound, Step, StepModel

# vLLM V1's default token budget for its OpenAI server on a GPU (vllm/engine/arg_utils.py,
# the defaults per UsageContext: OPENAI_API_SERVER -> max_num_batched_tokens 8192)
DEFAULT_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE = 16  # vLLM's default KV block size on GPUs (tokens)


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request: when it arrives (s), its prompt and output lengths (tokens), and
    how many prompt tokens the prefix cache already holds (at most prompt - 1: at least
    one token is always computed)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Admission:
    """When a busy engine takes new requests in (the defaults: at every step).

    - ``recv_interval``: the engine looks for new requests only every this many steps
      while it runs (SGLang's ``--scheduler-recv-interval``; an idle engine looks at
      once). A request that arrives mid-run waits for the next look.
    - ``balance_ranks`` / ``balance_timeout_steps``: with data-parallel attention,
      TensorRT-LLM's ``attention_dp_config.enable_balance`` holds new requests back until
      every attention rank has one (``balance_ranks`` of them waiting), or until the
      oldest has waited ``balance_timeout_steps`` steps (``timeout_iters``), so that the
      ranks prefill together."""

    recv_interval: int = 1
    balance_ranks: int = 1
    balance_timeout_steps: int = 0

    def __post_init__(self) -> None:
        for name, v, lo in (("recv_interval", self.recv_interval, 1),
                            ("balance_ranks", self.balance_ranks, 1),
                            ("balance_timeout_steps", self.balance_timeout_steps, 0)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 1 << 16:
                raise AccelbenchError(f"{name} must be an integer in [{lo}, 65,536] (got {v!r})")

    @property
    def default(self) -> bool:
        return self.recv_interval == 1 and self.balance_ranks == 1


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    max_num_batched_tokens: int = DEFAULT_BATCHED_TOKENS
    block_size: int = DEFAULT_BLOCK_SIZE
    admission: Admission = Admission()

    def __post_init__(self) -> None:
        for name, v in (("max_num_batched_tokens", self.max_num_batched_tokens),
                        ("block_size", self.block_size)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 24:
                raise AccelbenchError(f"{name} must be an integer in [1, 16,777,216] (got {v!r})")


@dataclass(slots=True)
class _Seq:
    rid: int
    arrival_s: float
    prompt: int
    output: int
    computed: int  # prompt tokens in the KV cache (cached ones count from the start)
    kv: int  # tokens of KV reserved (prompt + output, whole blocks)
    first_step: int = -1  # the step that yields its first token


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step: it runs from ``start_s`` to ``end_s``; at ``end_s`` every sequence that
    was decoding emits one token, ``first`` emit their first, ``finished`` their last
    (a one-token request is in both)."""

    index: int
    start_s: float
    end_s: float
    bound: Bound
    step: Step
    admitted: tuple[int, ...]  # requests that joined the batch in this step
    first: tuple[int, ...]
    finished: tuple[int, ...]
    running: int  # sequences in this step
    waiting: int  # arrived requests left waiting after it was formed
    kv_used_tokens: int


class Scheduler:
    """Continuous batching over a ``StepModel``. :meth:`add` queues requests (in
    arrival order); :meth:`step` forms and times the step starting at ``now``."""

    def __init__(self, model: StepModel, config: SchedulerConfig | None = None) -> None:
        self.model = model
        self.config = config or SchedulerConfig()
        self.kv_capacity = int(model.kv_capacity_tokens())
        # the budget bounds the batch too: a decode is one batched token
        self.max_seqs = min(int(model.max_batch()), self.config.max_num_batched_tokens)
        if self.kv_capacity < 1 or self.max_seqs < 1:
            raise AccelbenchError(
                f"the step model holds no sequence (KV capacity {self.kv_capacity} tokens, "
                f"max batch {self.max_seqs})"
            )
        self.waiting: deque[_Seq] = deque()
        self.prefilling: list[_Seq] = []  # running, prompt not yet done (admission order)
        self.decoding = 0  # running sequences past their first token
        self.decode_context = 0  # their KV tokens in all (each one's context)
        self.kv_used = 0
        self.steps = 0
        self._seqs: dict[int, _Seq] = {}
        self._ends: dict[int, list[_Seq]] = {}  # step index -> sequences ending there
        self._next_id = 0
        self._last_arrival = -math.inf
        self._looked = -math.inf  # when the engine last looked for new requests
        self._held: tuple[int, int] = (-1, 0)  # (request, step) a balanced admission holds since

    # -- input ---------------------------------------------------------------------
    def kv_tokens(self, prompt_tokens: int, output_tokens: int) -> int:
        """KV tokens a request reserves: prompt + output rounded up to whole blocks."""
        b = self.config.block_size
        return -(-(prompt_tokens + output_tokens) // b) * b

    def add(self, req: SimRequest) -> int:
        """Queue a request; returns its id (0, 1, ... in the order added). Requests are
        added in arrival order; one that could never fit is refused (AccelbenchError)."""
        p, o, c = req.prompt_tokens, req.output_tokens, req.cached_tokens
        if not (isinstance(p, int) and isinstance(o, int) and isinstance(c, int)):
            raise AccelbenchError("prompt, output and cached tokens must be integers")
        if p < 1 or o < 1 or c < 0:
            raise AccelbenchError(
                f"a request needs prompt >= 1 and output >= 1 tokens (got {p}, {o})"
            )
        if not math.isfinite(req.arrival_s) or req.arrival_s < self._last_arrival:
            raise AccelbenchError("requests must be added in arrival order, at finite times")
        kv = self.kv_tokens(p, o)
        if kv > self.kv_capacity:
            raise AccelbenchError(
                f"a request of {p} + {o} tokens needs {kv:,} tokens of KV cache; the layout "
                f"holds {self.kv_capacity:,}"
            )
        self._last_arrival = req.arrival_s
        seq = _Seq(self._next_id, req.arrival_s, p, o, min(c, p - 1), kv)
        self._next_id += 1
        self._seqs[seq.rid] = seq
        self.waiting.append(seq)
        return seq.rid

    def abort(self, rid: int) -> None:
        """Drop a request wherever it is (a client that went away): its KV is freed."""
        seq = self._seqs.pop(rid, None)
        if seq is None:
            return
        if seq.first_step >= 0:  # decoding
            ends = self._ends.get(seq.first_step + seq.output - 1, [])
            if seq in ends:
                ends.remove(seq)
                self.decoding -= 1
                # its context for the next step (steps done so far less its first)
                self.decode_context -= seq.prompt + self.steps - seq.first_step
                self.kv_used -= seq.kv
        elif seq in self.prefilling:
            self.prefilling.remove(seq)
            self.kv_used -= seq.kv
        else:
            self.waiting.remove(seq)

    # -- state ---------------------------------------------------------------------
    @property
    def running(self) -> int:
        return self.decoding + len(self.prefilling)

    def idle(self, now: float) -> bool:
        """Nothing to run at ``now`` (no running sequence, no request arrived)."""
        return not self.running and (not self.waiting or self.waiting[0].arrival_s > now)

    def next_arrival(self) -> float | None:
        return self.waiting[0].arrival_s if self.waiting else None

    # -- one step ------------------------------------------------------------------
    def _visible(self, now: float) -> float:
        """Requests that arrived by this time may be admitted in the step starting at
        ``now`` (``Admission``: now, by default)."""
        adm = self.config.admission
        if adm.default:
            return now
        busy = self.running > 0
        if not busy or self.steps % adm.recv_interval == 0:
            self._looked = now
        seen = self._looked
        if adm.balance_ranks > 1 and busy and self.waiting and self.waiting[0].arrival_s <= seen:
            n = 0
            for seq in self.waiting:
                if seq.arrival_s > seen or n >= adm.balance_ranks:
                    break
                n += 1
            if n < adm.balance_ranks:
                head = self.waiting[0].rid
                if self._held[0] != head:
                    self._held = (head, self.steps)
                if self.steps - self._held[1] < adm.balance_timeout_steps:
                    return -math.inf
        return seen

    def step(self, now: float) -> StepResult | None:
        """Form the step that starts at ``now``, time it, and advance the state to its
        end; None when nothing can run (see :meth:`idle`)."""
        seen = self._visible(now)
        budget = self.config.max_num_batched_tokens - self.decoding
        decode_seqs, decode_ctx = self.decoding, self.decode_context
        prefill_tokens = prefill_ctx = 0
        done_prefill: list[_Seq] = []
        admitted: list[int] = []
        prefill_seqs = 0
        for seq in self.prefilling:
            if budget <= 0:
                break
            take = min(seq.prompt - seq.computed, budget)
            prefill_seqs += 1
            prefill_tokens += take
            prefill_ctx += seq.computed
            seq.computed += take
            budget -= take
            if seq.computed == seq.prompt:
                done_prefill.append(seq)
        running = self.running
        waiting = self.waiting
        while (
            budget > 0
            and waiting
            and waiting[0].arrival_s <= seen
            and running < self.max_seqs
            and self.kv_used + waiting[0].kv <= self.kv_capacity
        ):
            seq = waiting.popleft()
            admitted.append(seq.rid)
            self.kv_used += seq.kv
            running += 1
            self.prefilling.append(seq)
            take = min(seq.prompt - seq.computed, budget)
            prefill_seqs += 1
            prefill_tokens += take
            prefill_ctx += seq.computed
            seq.computed += take
            budget -= take
            if seq.computed == seq.prompt:
                done_prefill.append(seq)
        if running == 0:
            return None
        step = Step(prefill_tokens, prefill_ctx, decode_seqs, decode_ctx, prefill_seqs)
        t = self.model.step_time(step)
        if not (math.isfinite(t.seconds) and t.seconds > 0):
            raise AccelbenchError(f"the step model gave {t.seconds!r} s for {step}")
        k = self.steps
        self.steps += 1
        # the end of the step: decoders grew by one token; finished ones leave
        self.decode_context += self.decoding
        finished = self._ends.pop(k, [])
        for seq in finished:
            self.decoding -= 1
            self.decode_context -= seq.prompt + seq.output  # its stored next context
            self.kv_used -= seq.kv
            del self._seqs[seq.rid]
        first = []
        if done_prefill:
            done_ids = {id(s) for s in done_prefill}
            self.prefilling = [s for s in self.prefilling if id(s) not in done_ids]
            for seq in done_prefill:
                seq.first_step = k
                first.append(seq.rid)
                if seq.output == 1:
                    finished.append(seq)
                    self.kv_used -= seq.kv
                    del self._seqs[seq.rid]
                else:
                    self.decoding += 1
                    self.decode_context += seq.prompt + 1  # its next step's context
                    self._ends.setdefault(k + seq.output - 1, []).append(seq)
        n_wait = 0
        for seq in waiting:
            if seq.arrival_s > now:
                break
            n_wait += 1
        return StepResult(k, now, now + t.seconds, t.bound, step, tuple(admitted), tuple(first),
                          tuple(s.rid for s in finished), running, n_wait, self.kv_used)  # fmt: skip


# ---------------------------------------------------------------------------------
# simulated time


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One request's schedule (s): queue wait = admitted - arrival; TTFT = first token
    - arrival; its tokens are ``Schedule.token_times(i)``."""

    arrival_s: float
    admitted_s: float
    first_token_s: float
    end_s: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    first_step: int

    @property
    def queue_s(self) -> float:
        return self.admitted_s - self.arrival_s

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (NaN for one token)."""
        n = self.output_tokens - 1
        return (self.end_s - self.first_token_s) / n if n else math.nan


@dataclass
class Schedule:
    """What a simulation gives: per request its timing, per step its record."""

    requests: list[RequestTiming]
    steps: list[StepResult] = field(repr=False)

    def token_times(self, i: int) -> list[float]:
        """Every token's time of request ``i`` (s): consecutive step ends."""
        r = self.requests[i]
        return [s.end_s for s in self.steps[r.first_step : r.first_step + r.output_tokens]]

    @property
    def duration_s(self) -> float:
        if not self.steps:
            return 0.0
        return self.steps[-1].end_s - min(r.arrival_s for r in self.requests)

    def bound_shares(self) -> dict[str, float]:
        """The share of busy time each bound limited (``--explain``)."""
        tot: dict[str, float] = {}
        for s in self.steps:
            tot[s.bound] = tot.get(s.bound, 0.0) + (s.end_s - s.start_s)
        busy = sum(tot.values())
        return {k: v / busy for k, v in sorted(tot.items())} if busy else {}


class _Recorder:
    """Collects step results into per-request timings."""

    def __init__(self) -> None:
        self.steps: list[StepResult] = []
        self.admitted: dict[int, float] = {}
        self.first: dict[int, int] = {}

    def record(self, res: StepResult) -> None:
        self.steps.append(res)
        for rid in res.admitted:
            self.admitted[rid] = res.start_s
        for rid in res.first:
            self.first[rid] = res.index

    def schedule(self, reqs: Sequence[SimRequest]) -> Schedule:
        out = []
        for rid, req in enumerate(reqs):
            k = self.first[rid]
            out.append(RequestTiming(
                req.arrival_s, self.admitted[rid], self.steps[k].end_s,
                self.steps[k + req.output_tokens - 1].end_s, req.prompt_tokens,
                req.output_tokens, min(req.cached_tokens, req.prompt_tokens - 1), k,
            ))  # fmt: skip
        return Schedule(out, self.steps)


def open_loop(
    model: StepModel, requests: Iterable[SimRequest], config: SchedulerConfig | None = None
) -> Schedule:
    """Run requests that arrive at given times (sorted by arrival here; the result keeps
    the given order)."""
    reqs = list(requests)
    order = sorted(range(len(reqs)), key=lambda i: reqs[i].arrival_s)
    sched = Scheduler(model, config)
    for i in order:
        sched.add(reqs[i])
    rec = _Recorder()
    now = reqs[order[0]].arrival_s if reqs else 0.0
    while True:
        res = sched.step(now)
        if res is None:
            nxt = sched.next_arrival()
            if nxt is None:
                break
            now = max(now, nxt)
            continue
        rec.record(res)
        now = res.end_s
    timings = rec.schedule([reqs[i] for i in order])
    back = list(timings.requests)
    for pos, i in enumerate(order):
        back[i] = timings.requests[pos]
    return Schedule(back, timings.steps)


def closed_loop(
    model: StepModel,
    concurrency: int,
    requests: Iterable[tuple[int, int] | tuple[int, int, int]],
    config: SchedulerConfig | None = None,
    think_s: float = 0.0,
) -> Schedule:
    """``concurrency`` clients, each sending the next of ``requests`` (prompt, output[,
    cached] tokens, in order) ``think_s`` after its previous reply ended; all start at 0."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise AccelbenchError(f"concurrency must be an integer >= 1 (got {concurrency!r})")
    if not (math.isfinite(think_s) and think_s >= 0):
        raise AccelbenchError(f"think time must be >= 0 s (got {think_s!r})")
    todo = deque(requests)
    sched = Scheduler(model, config)
    rec = _Recorder()
    sent: list[SimRequest] = []
    starts: list[float] = []  # clients' next send times (a heap)
    for _ in range(min(concurrency, len(todo))):
        heapq.heappush(starts, 0.0)
    now = 0.0

    def send_due(t: float) -> None:
        while starts and starts[0] <= t and todo:
            at = heapq.heappop(starts)
            p, o, *c = todo.popleft()
            req = SimRequest(at, p, o, c[0] if c else 0)
            sched.add(req)
            sent.append(req)

    while True:
        send_due(now)
        res = sched.step(now)
        if res is None:
            if not (starts and todo):
                break
            now = max(now, starts[0])
            continue
        rec.record(res)
        for _ in res.finished:
            heapq.heappush(starts, res.end_s + think_s)
        now = res.end_s
    return rec.schedule(sent)
