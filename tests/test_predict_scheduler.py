"""The continuous-batching scheduler (predict/scheduler.py): hand-checked schedules over
a simple step model, Little's law on a long closed loop, and a property test against a
naive step-by-step simulation written here from the rules in the module's docstring."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.predict.scheduler import (
    Admission,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    closed_loop,
    open_loop,
)
from accelbench.predict.steps import Step, StepTime


class Simple:
    """Prefill 1 ms per token; a step with decodes adds 10 ms + 0.1 ms per sequence."""

    def __init__(self, kv: int = 1_000_000, batch: int = 64) -> None:
        self.kv, self.batch = kv, batch
        self.seen: list[Step] = []

    def step_time(self, step: Step) -> StepTime:
        self.seen.append(step)
        dec = 0.010 + 0.0001 * step.decode_seqs if step.decode_seqs else 0.0
        pre = 0.001 * step.prefill_tokens
        return StepTime(pre + dec, "compute" if pre > dec else "memory")

    def kv_capacity_tokens(self) -> int:
        return self.kv

    def max_batch(self) -> int:
        return self.batch


def approx(xs: list[float]) -> list:
    return [pytest.approx(x, abs=1e-12) for x in xs]


def test_lone_request():
    s = open_loop(Simple(), [SimRequest(2.0, 100, 5)])
    (r,) = s.requests
    # prefill 100 tokens: 100 ms; then 4 decode steps of 10.1 ms
    assert r.ttft_s == pytest.approx(0.100) and r.queue_s == 0
    assert s.token_times(0) == approx([2.1, 2.1101, 2.1202, 2.1303, 2.1404])
    assert r.tpot_s == pytest.approx(0.0101)
    assert [x.bound for x in s.steps] == ["compute"] + ["memory"] * 4


def test_chunked_prefill_shares_the_token_budget():
    m = Simple()
    cfg = SchedulerConfig(max_num_batched_tokens=128)
    s = open_loop(m, [SimRequest(0, 10, 3), SimRequest(0, 300, 2)], cfg)
    a, b = s.requests
    # step 0: A's 10 + B's first 118 tokens = 128 ms; A's first token
    # step 1: A decodes (1 of the budget), B 127 more: 127 + 10.1 ms
    # step 2: A's last token, B's last 55: 55 + 10.1 ms; B's first token
    # step 3: B decodes alone: 10.1 ms
    assert s.token_times(0) == approx([0.128, 0.2651, 0.3302])
    assert s.token_times(1) == approx([0.3302, 0.3403])
    assert b.ttft_s == pytest.approx(0.3302) and a.ttft_s == pytest.approx(0.128)
    assert m.seen == [
        Step(128, 0, 0, 0, 2),  # two prompts share the prefill tokens
        Step(127, 118, 1, 11, 1),  # B has 118 tokens in its KV; A attends to 10 + 1
        Step(55, 245, 1, 12, 1),
        Step(0, 0, 1, 301),
    ]


def test_queueing_when_the_batch_is_full():
    s = open_loop(Simple(batch=2), [SimRequest(0, 10, 3)] * 3)
    a, b, c = s.requests
    # A and B: prefill 20 ms, two decode steps of 10.2 ms; C starts when they end
    assert s.token_times(0) == s.token_times(1) == approx([0.02, 0.0302, 0.0404])
    assert a.queue_s == b.queue_s == 0
    assert c.queue_s == pytest.approx(0.0404)
    assert c.ttft_s == pytest.approx(0.0504)  # waited 40.4 ms, prefilled 10
    assert s.token_times(2) == approx([0.0504, 0.0605, 0.0706])
    assert max(x.running for x in s.steps) == 2


def test_kv_admission_blocks_until_a_request_ends():
    # 20 + 10 tokens reserve 32 (two 16-token blocks); 48 hold one such request
    s = open_loop(Simple(kv=48), [SimRequest(0, 20, 10), SimRequest(0, 20, 10)])
    a, b = s.requests
    assert a.end_s == pytest.approx(0.020 + 9 * 0.0101)
    assert b.queue_s == pytest.approx(a.end_s)
    assert b.ttft_s == pytest.approx(a.end_s + 0.020)
    assert max(x.kv_used_tokens for x in s.steps) == 32
    # the same two fit together with room for both
    s2 = open_loop(Simple(kv=64), [SimRequest(0, 20, 10), SimRequest(0, 20, 10)])
    assert s2.requests[1].queue_s == 0


def test_head_of_line_is_never_skipped():
    # B cannot fit beside A; C could, but FCFS keeps it behind B
    reqs = [SimRequest(0, 20, 10), SimRequest(0.001, 40, 8), SimRequest(0.002, 5, 2)]
    s = open_loop(Simple(kv=64), reqs)  # A 32, B 48, C 16 tokens
    a, b, c = s.requests
    assert b.admitted_s == pytest.approx(a.end_s)
    assert c.admitted_s == pytest.approx(a.end_s)


def test_prefix_cache_hits_are_not_prefilled():
    m = Simple()
    s = open_loop(m, [SimRequest(0, 100, 2, cached_tokens=60)])
    assert s.requests[0].ttft_s == pytest.approx(0.040)
    assert m.seen[0] == Step(40, 60, 0, 0, 1)
    # at least one token is always computed
    s = open_loop(Simple(), [SimRequest(0, 100, 2, cached_tokens=100)])
    assert s.requests[0].ttft_s == pytest.approx(0.001) and s.requests[0].cached_tokens == 99


def test_one_token_output_and_idle_gaps():
    s = open_loop(Simple(), [SimRequest(0, 10, 1), SimRequest(5.0, 10, 1)])
    assert [r.first_token_s for r in s.requests] == approx([0.010, 5.010])
    assert [r.end_s for r in s.requests] == approx([0.010, 5.010])
    assert len(s.steps) == 2


def test_open_loop_keeps_the_given_order():
    s = open_loop(Simple(), [SimRequest(1.0, 10, 1), SimRequest(0.0, 20, 1)])
    assert [r.arrival_s for r in s.requests] == [1.0, 0.0]
    assert s.requests[1].ttft_s == pytest.approx(0.020)
    assert s.duration_s == pytest.approx(1.010)
    empty = open_loop(Simple(), [])
    assert empty.requests == [] and empty.steps == [] and empty.duration_s == 0.0


def test_littles_law_on_a_long_closed_loop():
    rng = random.Random(7)
    reqs = [(rng.randint(50, 400), rng.randint(20, 200)) for _ in range(3000)]
    c = 24
    s = closed_loop(Simple(batch=64), c, reqs)
    assert len(s.requests) == 3000
    t_end = max(r.end_s for r in s.requests)
    # L = lambda x W: requests in the system on average = throughput x mean latency
    lam = len(s.requests) / t_end
    w = sum(r.end_s - r.arrival_s for r in s.requests) / len(s.requests)
    # a closed loop keeps c in the system but for the last requests' tail
    assert lam * w == pytest.approx(c, rel=0.02)
    assert lam * w <= c
    # with a batch larger than c nobody queues, and every client resends at once
    assert all(r.queue_s < 0.5 for r in s.requests)
    ends = sorted(r.end_s for r in s.requests)[:-c]
    arrivals = sorted(r.arrival_s for r in s.requests)[c:]
    assert arrivals == approx(ends)


def test_closed_loop_think_time_and_queueing():
    s = closed_loop(Simple(batch=1), 2, [(10, 2)] * 4, think_s=1.0)
    # batch 1: the second client waits for the first's 2 tokens (10 + 10.1 ms)
    r = s.requests
    assert r[1].queue_s == pytest.approx(0.0201)
    assert r[2].arrival_s == pytest.approx(r[0].end_s + 1.0)


def test_abort_frees_the_request():
    m = Simple()
    sch = Scheduler(m)
    a = sch.add(SimRequest(0, 10, 5))
    b = sch.add(SimRequest(0, 10, 5))
    c = sch.add(SimRequest(0, 10, 5))
    sch.step(0.0)
    sch.step(1.0)
    sch.abort(b)  # decoding
    sch.abort(c)
    sch.abort(c)  # twice: nothing
    res = sch.step(2.0)
    assert res is not None and m.seen[-1] == Step(0, 0, 1, 12)
    while sch.step(3.0) is not None:
        pass
    assert sch.kv_used == 0 and sch.running == 0 and sch.decode_context == 0
    assert a == 0


def test_deterministic():
    rng = random.Random(1)
    reqs = [
        SimRequest(rng.random() * 10, rng.randint(1, 900), rng.randint(1, 90)) for _ in range(300)
    ]
    one = open_loop(Simple(kv=20_000, batch=16), reqs, SchedulerConfig(512))
    two = open_loop(Simple(kv=20_000, batch=16), reqs, SchedulerConfig(512))
    assert one.requests == two.requests and one.steps == two.steps


@pytest.mark.parametrize(
    ("req", "msg"),
    [
        (SimRequest(0, 0, 5), "prompt >= 1"),
        (SimRequest(0, 5, 0), "output >= 1"),
        (SimRequest(0, 5, 5, -1), "output >= 1"),
        (SimRequest(float("nan"), 5, 5), "finite"),
        (SimRequest(0, 10_000, 5), "needs 10,016 tokens of KV cache; the layout holds 1,000"),
    ],
)
def test_bad_requests_are_one_line(req, msg):
    with pytest.raises(AccelbenchError, match=msg):
        Scheduler(Simple(kv=1000)).add(req)


def test_bad_config_and_order():
    with pytest.raises(AccelbenchError, match="max_num_batched_tokens"):
        SchedulerConfig(max_num_batched_tokens=0)
    with pytest.raises(AccelbenchError, match="holds no sequence"):
        Scheduler(Simple(kv=0))
    sch = Scheduler(Simple())
    sch.add(SimRequest(1.0, 5, 5))
    with pytest.raises(AccelbenchError, match="arrival order"):
        sch.add(SimRequest(0.5, 5, 5))
    with pytest.raises(AccelbenchError, match="concurrency"):
        closed_loop(Simple(), 0, [(1, 1)])


# -- against a naive simulation --------------------------------------------------------


def naive(
    reqs: list[SimRequest], kv: int, batch: int, budget: int, block: int
) -> tuple[list[list[float]], list[Step]]:
    """The rules, step by step, every sequence visited every step."""
    m = Simple(kv, batch)
    waiting = list(range(len(reqs)))
    running: list[dict] = []  # admission order
    times: list[list[float]] = [[] for _ in reqs]
    now, used = 0.0, 0
    cap = min(batch, budget)
    while waiting or running:
        if not running and reqs[waiting[0]].arrival_s > now:
            now = reqs[waiting[0]].arrival_s
        left = budget
        pre = pre_ctx = dec = dec_ctx = 0
        plan = []
        for s in running:
            if s["done"] == s["p"]:
                dec += 1
                dec_ctx += s["p"] + len(times[s["i"]])
                left -= 1
                plan.append((s, 0))
        for s in running:
            if s["done"] < s["p"] and left > 0:
                take = min(left, s["p"] - s["done"])
                pre, pre_ctx, left = pre + take, pre_ctx + s["done"], left - take
                plan.append((s, take))
        while waiting and left > 0 and len(running) < cap:
            r = reqs[waiting[0]]
            need = -(-(r.prompt_tokens + r.output_tokens) // block) * block
            if r.arrival_s > now or used + need > kv:
                break
            i = waiting.pop(0)
            s = {"i": i, "p": r.prompt_tokens, "done": min(r.cached_tokens, r.prompt_tokens - 1),
                 "kv": need, "o": r.output_tokens}  # fmt: skip
            used += need
            running.append(s)
            take = min(left, s["p"] - s["done"])
            pre, pre_ctx, left = pre + take, pre_ctx + s["done"], left - take
            plan.append((s, take))
        n_pre = sum(1 for _, take in plan if take > 0)
        now += m.step_time(Step(pre, pre_ctx, dec, dec_ctx, n_pre)).seconds
        for s, take in plan:
            was_decoding = take == 0
            s["done"] += take
            if was_decoding or s["done"] == s["p"]:
                times[s["i"]].append(now)
            if len(times[s["i"]]) == s["o"]:
                running.remove(s)
                used -= s["kv"]
    return times, m.seen


reqs_st = st.lists(
    st.builds(
        SimRequest,
        st.floats(0, 2, allow_nan=False),
        st.integers(1, 300),
        st.integers(1, 40),
        st.integers(0, 300),
    ),
    min_size=1,
    max_size=25,
)


@given(
    reqs_st,
    st.integers(400, 3000),
    st.integers(1, 8),
    st.integers(1, 400),
    st.sampled_from([1, 16]),
)
def test_same_schedule_as_the_naive_simulation(reqs, kv, batch, budget, block):
    reqs = sorted(reqs, key=lambda r: r.arrival_s)
    reqs = [r for r in reqs if -(-(r.prompt_tokens + r.output_tokens) // block) * block <= kv]
    if not reqs:
        return
    s = open_loop(Simple(kv, batch), reqs, SchedulerConfig(budget, block))
    want, steps = naive(reqs, kv, batch, budget, block)
    assert [x.step for x in s.steps] == steps  # the same work in every step
    for i in range(len(reqs)):
        assert s.token_times(i) == approx(want[i])


@given(
    st.one_of(st.floats(), st.integers(-(10**20), 10**20)),
    st.one_of(st.integers(-(10**20), 10**20), st.floats(), st.booleans()),
    st.one_of(st.integers(-(10**20), 10**20), st.floats()),
    st.one_of(st.integers(-(10**20), 10**20), st.none()),
)
def test_any_request_is_accepted_or_one_clear_error(arrival, prompt, output, cached):
    sch = Scheduler(Simple(kv=100_000))
    try:
        sch.add(SimRequest(arrival, prompt, output, cached))  # type: ignore[arg-type]
    except AccelbenchError as exc:
        assert "\n" not in str(exc) and str(exc)
        assert sch.running == 0 and not sch.waiting  # nothing half added
        return
    assert sch.step(max(float(arrival), 0.0)) is not None


# ---- admission: when a busy engine looks for new requests ----------------------------


def _two(adm: Admission, b_arrival: float = 0.015, c: bool = False) -> list:
    reqs = [SimRequest(0.0, 10, 20), SimRequest(b_arrival, 10, 2)]
    if c:
        reqs.append(SimRequest(0.016, 10, 2))
    return open_loop(Simple(), reqs, SchedulerConfig(admission=adm)).requests


def test_recv_interval_makes_a_new_request_wait_for_the_next_look():
    """A (idle engine: looked at once) prefills 10 ms, then decodes 10.1 ms a step; B
    arrives at 15 ms. Looking every step, B joins step 2 (at 20.1 ms); looking every 4
    steps (SGLang's --scheduler-recv-interval 4), it joins step 4 (at 40.3 ms) and its
    first token comes with that step's end: 40.3 + 10 (prefill) + 10.1 (A's decode)."""
    a, b = _two(Admission())
    assert a.queue_s == 0 and b.admitted_s == pytest.approx(0.0201)
    a, b = _two(Admission(recv_interval=4))
    assert a.queue_s == 0
    assert b.admitted_s == pytest.approx(0.0403)
    assert b.ttft_s == pytest.approx(0.0403 + 0.0201 - 0.015)
    # an idle engine looks at once, whatever the interval
    _, late = _two(Admission(recv_interval=4), b_arrival=5.0)
    assert late.queue_s == 0


def test_balance_holds_a_lone_request_until_the_timeout():
    """TRT-LLM's DP-attention balance over 2 ranks, 3 steps at most: B alone is held
    from step 2 (20.1 ms) to step 5 (50.4 ms); with C arrived too, both join step 2."""
    _, b = _two(Admission(balance_ranks=2, balance_timeout_steps=3))
    assert b.admitted_s == pytest.approx(0.0504)
    _, b, c = _two(Admission(balance_ranks=2, balance_timeout_steps=3), c=True)
    assert b.admitted_s == c.admitted_s == pytest.approx(0.0201)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, 1 << 17])
def test_admission_refuses_bad_numbers(bad):
    with pytest.raises(AccelbenchError, match="recv_interval"):
        Admission(recv_interval=bad)
