"""The KV-capacity knee: predicted (plan.knee) by hand-checked arithmetic, measured
(metrics.knee) on sweeps from an LRU simulation of the ideal prefix-cache rule (docs/
BRIEF: block identity chained, hits at most (L - 1) // B blocks, outputs cached), the two
judged against each other, the intervals checked for coverage in simulation, and the
`accelbench plan knee` command with bad input."""

from __future__ import annotations

import math
import re
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.errors import AccelbenchError, UsageError
from accelbench.hardware.catalog import GIB, find_accelerator, load_catalog
from accelbench.metrics.knee import (
    KneePoint,
    MeasuredKnee,
    find_knee,
    hit_rate_interval,
    knee_agrees,
    point_confidence,
)
from accelbench.metrics.verdict import Interval, Status
from accelbench.plan.architecture import arch_from_config
from accelbench.plan.knee import KneePrediction, SessionMix, predict_knee, predict_knees
from accelbench.plan.models import resolve_model
from cli_inprocess import run_cli

# the tiny test model's shape (engines/tinymodel.py): 4 layers, 2 KV heads of 64
TINY = arch_from_config(
    {
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 4096,
        "max_position_embeddings": 8192,
    },
    name="tiny",
)


# --------------------------------------------------------------------------- prediction


def test_tiny_model_with_vllm_kv_cache_gib_by_hand():
    # fp32 KV (vLLM runs the tiny model in float32): 4 layers x 2 (K, V) x 2 heads x 64 x 4 B
    mix = SessionMix(turns=4, user_tokens=48, output_tokens=32, system_tokens=64)
    p = predict_knee(TINY, None, 1, mix, kv_cache_gib=0.1, block_size=16, kv_precision="fp32")
    assert p.kv_bytes_per_token == 4 * 2 * 2 * 64 * 4 == 4096
    assert p.capacity_tokens == math.floor(0.1 * 2**30 / 4096) == 26214
    assert p.capacity_blocks == 26214 // 16 == 1638
    assert p.shared_blocks == 64 // 16 == 4
    assert p.session_tokens == 64 + 4 * (48 + 32) == 384
    assert p.last_prompt_tokens == 384 - 32 == 352  # the last reply is not read again
    assert p.session_blocks == 352 // 16 - 4 == 18
    assert p.knee_sessions == pytest.approx((1638 - 4) / 18)
    assert p.max_sessions == 90
    assert p.working_set_blocks(90) <= 1638 < p.working_set_blocks(91)
    # the last turns decoding together hold their replies too: 384 / 16 - 4 = 20 blocks
    assert p.decode_blocks == 20 and p.preemption_sessions == pytest.approx(1634 / 20)
    assert (p.interval.low, p.interval.high) == (p.knee_sessions, p.knee_sessions)  # no spread
    assert p.capacity_source == "kv-cache-gib" and p.memory is None
    # vLLM keeps one block (its null block) out of the pool
    r = predict_knee(
        TINY, None, 1, mix, kv_cache_gib=0.1, block_size=16, kv_precision="fp32",
        reserved_blocks=1,
    )  # fmt: skip
    assert r.capacity_blocks == 1637 and r.knee_sessions == pytest.approx(1633 / 18)


def test_capacity_matches_what_vllm_reports_for_the_tiny_model():
    """vLLM 0.32.0's CPU build, the tiny model in float32 with VLLM_CPU_KVCACHE_SPACE=1
    (engines/vllm.py's launch), logged "CPU KV cache size: 262,144 tokens, Maximum
    concurrency for 2,048 tokens per request: 128.00x" (run by hand, 2026-12-01), its
    default CPU block of 128 tokens: 2,048 blocks."""
    p = predict_knee(
        TINY, None, 1, SessionMix(2, 10, 10), kv_cache_gib=1, block_size=128, kv_precision="fp32"
    )
    assert p.capacity_tokens == 262_144 and p.capacity_blocks == 2048


def test_llama_server_context_tokens_and_slots_by_hand():
    mix = SessionMix(turns=3, user_tokens=50, output_tokens=50, system_tokens=100)
    p = predict_knee(TINY, None, 1, mix, context_tokens=8192, block_size=1)
    assert p.capacity_tokens == p.capacity_blocks == 8192
    assert (p.shared_blocks, p.session_blocks) == (100, 100 + 3 * 100 - 50 - 100)
    assert p.knee_sessions == pytest.approx((8192 - 100) / 250)
    assert p.max_sessions == 32 and p.limited_by == "kv capacity"
    # 8 slots hold 8 sessions' prompts at most; a slot's context 8192 / 8 = 1024 >= 400
    s = predict_knee(TINY, None, 1, mix, context_tokens=8192, block_size=1, slots=8)
    assert (s.knee_sessions, s.max_sessions, s.limited_by) == (8.0, 8, "slots")
    assert not s.warnings
    # 40 slots: 204 tokens each, less than a 400-token session
    w = predict_knee(TINY, None, 1, mix, context_tokens=8192, block_size=1, slots=40)
    assert w.limited_by == "kv capacity" and "exceeds a slot's context" in w.warnings[0]


def test_partial_system_block_belongs_to_each_session():
    # P = 70 with B = 16: 4 full shared blocks; the 6 tokens left share a block with the
    # session's own tokens, so they are the session's. Last prompt 70 + 2 x 20 - 10 = 100
    mix = SessionMix(turns=2, user_tokens=10, output_tokens=10, system_tokens=70)
    p = predict_knee(TINY, None, 1, mix, context_tokens=16 * 100, block_size=16)
    assert p.shared_blocks == 4
    assert p.session_blocks == math.ceil(100 / 16) - 4 == 3  # 6.25 blocks: 7 allocated
    i = predict_knee(TINY, None, 1, mix, context_tokens=16 * 100, block_size=16, ideal_cache=True)
    assert i.session_blocks == 100 // 16 - 4 == 2  # the ideal cache keeps full blocks only
    assert p.knee_sessions == pytest.approx((100 - 4) / 3)


def test_mi355x_against_b200_llama_70b_memory_arithmetic_by_hand():
    """The issue's comparison: one real model and context mix on both accelerators, from
    the catalog's HBM (GiB: the vendors' "GB" of HBM read as binary)."""
    mix = SessionMix(turns=8, user_tokens=200, output_tokens=300, system_tokens=2000)
    arch = resolve_model("llama-3.1-70b")
    w = arch.weight_bytes("bf16")
    kv = 80 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16
    mi, b = predict_knees("llama-3.1-70b", ["mi355x", "b200"], 8, mix)
    for p, gib in ((mi, 288), (b, 180)):
        assert p.memory is not None
        assert p.memory.memory_gib_per_gpu == gib
        assert p.memory.usable_bytes == pytest.approx(8 * gib * 2**30 * 0.9)
        assert p.memory.weights_bytes == w
        assert p.kv_bytes_per_token == kv == 327_680 and p.kv_replication == 1
        tokens = math.floor((8 * gib * 2**30 * 0.9 - w) / kv)
        assert p.capacity_tokens == tokens
        # last prompt 2000 + 8 x 500 - 300 = 5700 tokens: 356.25 blocks, 357 allocated
        assert p.shared_blocks == 125 and p.session_blocks == 357 - 125 == 232
        assert p.knee_sessions == pytest.approx((tokens // 16 - 125) / 232)
    assert (mi.max_sessions, b.max_sessions) == (1713, 1027)
    # the catalog's B200 figure is a range (180 usable, 192 physical): the fit uses 180
    acc = find_accelerator("b200", load_catalog())
    assert acc.memory_bytes() == 180 * GIB


def test_spread_interval_formula_by_hand():
    mix = SessionMix(4, 100, 100, 0, turns_sd=1.0)  # sd = 1 x 200 tokens = 12.5 blocks
    p = predict_knee(TINY, None, 1, mix, context_tokens=16 * 10_000, block_size=16)
    m, s, k, z = math.ceil(700 / 16), 12.5, 10_000, 1.2815515655446004
    assert p.session_blocks == m and p.session_blocks_sd == s
    for end, zz in ((p.interval.low, z), (p.interval.high, -z)):
        assert end is not None
        x = math.sqrt(end)
        assert m * x * x + zz * s * x == pytest.approx(k)
    assert p.interval.low < p.knee_sessions == 10_000 / 44 < p.interval.high


def test_predicted_interval_covers_the_realised_knee():
    """Coverage in simulation: draw sessions from the mix, one after another; the realised
    knee is the most sessions whose working set still fits. The printed 80 % interval
    must hold it in 80 % of draws (76-84 % at 3,000 draws: 0.73 % standard error)."""
    mix = SessionMix(8, 200, 300, 2000, turns_sd=2.0, user_tokens_sd=50, output_tokens_sd=100)
    b = 16
    p = predict_knee(TINY, None, 1, mix, context_tokens=b * 120_000, block_size=b)
    lo, hi = p.interval.low, p.interval.high
    assert lo is not None and hi is not None and hi - lo > 10
    rng = np.random.default_rng(7)
    trials, n = 3000, int(hi * 1.3)
    hits = 0
    for _ in range(trials):
        turns = np.maximum(1, np.rint(rng.normal(8, 2, n))).astype(int)
        own = np.empty(n)
        for i, t in enumerate(turns):
            u = np.rint(rng.normal(200, 50, t)).clip(0).sum()
            o = np.rint(rng.normal(300, 100, t - 1)).clip(0).sum()  # the last reply: not held
            own[i] = math.ceil((2000 + u + o) / b) - 2000 // b
        fits = np.cumsum(own) + p.shared_blocks <= p.capacity_blocks
        realised = int(fits.sum())  # cumsum is increasing: the fitting ones are a prefix
        hits += lo <= realised <= hi
    cov = hits / trials
    assert 0.76 <= cov <= 0.84, cov


@settings(max_examples=150, deadline=None)
@given(
    turns=st.integers(1, 50),
    user=st.integers(0, 5000),
    out=st.integers(0, 5000),
    system=st.integers(0, 20_000),
    block=st.sampled_from([1, 16, 32, 256]),
    capacity=st.integers(1, 10_000_000),
)
def test_floor_of_the_knee_fits_and_one_more_does_not(turns, user, out, system, block, capacity):
    # a first prompt of no tokens is refused (the test below)
    mix = SessionMix(turns, user or (0 if system else 1), out, system)
    p = predict_knee(TINY, None, 1, mix, context_tokens=capacity, block_size=block)
    assert p.knee_sessions >= 0
    if p.capacity_blocks >= p.shared_blocks:
        assert p.working_set_blocks(p.max_sessions) <= p.capacity_blocks
        assert p.working_set_blocks(p.max_sessions + 1) > p.capacity_blocks
    else:
        assert p.max_sessions == 0


def test_hbm_too_small_for_the_weights_is_a_knee_of_zero_with_a_warning():
    mix = SessionMix(2, 10, 10)
    p = predict_knee("llama-3.1-405b", "h100", 1, mix)
    assert p.capacity_tokens == 0 and p.max_sessions == 0
    assert "do not fit" in p.warnings[0]


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"tp": 0}, "--tp"),
        ({"block_size": 0}, "--block-size"),
        ({"reserved_blocks": -1}, "--reserved-blocks"),
        ({"kv_cache_gib": float("nan")}, "--kv-cache-gib"),
        ({"kv_cache_gib": -1.0}, "--kv-cache-gib"),
        ({"kv_cache_gib": 1e300}, "--kv-cache-gib"),
        ({"context_tokens": 0}, "--context-tokens"),
        ({"kv_cache_gib": 1.0, "context_tokens": 10}, "not both"),
        ({"reserve": 1.0}, "--reserve"),
        ({"mix": SessionMix(float("inf"), 1, 1)}, "--turns"),
        ({"mix": SessionMix(2, -1, 1)}, "--user-tokens"),
        ({"mix": SessionMix(2, 1, float("nan"))}, "--osl"),
        ({"mix": SessionMix(2, 1, 1, turns_sd=-1)}, "--turns-sd"),
        ({"accelerator": None}, "give --accelerator"),
    ],
)
def test_bad_input_is_one_usage_line(kw, says):
    args = {"model": TINY, "accelerator": "h100", "tp": 1, "mix": SessionMix(2, 10, 10)}
    args.update(kw)
    with pytest.raises(UsageError) as e:
        predict_knee(**args)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_unknown_names_list_the_known_ones():
    with pytest.raises(AccelbenchError, match=r"known: .*b200.*mi355x"):
        predict_knee("llama-3.1-8b", "mi999", 1, SessionMix(2, 10, 10))
    with pytest.raises(AccelbenchError, match=r"known: .*llama-3.1-70b"):
        predict_knee("no-such-model", "h100", 1, SessionMix(2, 10, 10))


# --------------------------------------------------------------------------- LRU simulation


class IdealCache:
    """The ideal prefix-cache rule of the brief, written again here from its text."""

    def __init__(self, capacity: int, block: int) -> None:
        self.cap, self.b = capacity, block
        self.lru: OrderedDict[int, None] = OrderedDict()

    def _ids(self, tokens: list) -> list[int]:
        ids, h = [], 0
        for j in range(len(tokens) // self.b):
            h = hash((h, tuple(tokens[j * self.b : (j + 1) * self.b])))
            ids.append(h)
        return ids

    def _touch(self, key: int) -> None:
        if self.cap == 0:
            return
        if key in self.lru:
            self.lru.move_to_end(key)
            return
        self.lru[key] = None
        if len(self.lru) > self.cap:
            self.lru.popitem(last=False)

    def arrive(self, prompt: list) -> int:
        ids = self._ids(prompt)
        hit = 0
        while hit < min(len(ids), (len(prompt) - 1) // self.b) and ids[hit] in self.lru:
            hit += 1
        for key in ids[:hit]:
            self._touch(key)
        for key in ids:
            self._touch(key)
        return hit * self.b

    def complete(self, prompt: list, output: list, lag: int = 0) -> None:
        kv = prompt + output
        for key in self._ids(kv[: len(kv) - lag]):
            self._touch(key)


def simulate(
    c: int,
    capacity: int,
    block: int,
    turns: int,
    user: int,
    out: int,
    system: int,
    lag: int = 0,
):
    """``c`` sessions in step: each turn, all c requests arrive, then all complete.
    Returns (hit rate, ideal hit rate with an unbounded cache). ``lag``: output tokens at
    the end that have no KV (vLLM: 1, the last sampled token is never fed back)."""

    def run(cap: int) -> float:
        cache = IdealCache(cap, block)
        hist = [[("sys", i) for i in range(system)] for _ in range(c)]
        cached = prompt_total = 0
        for t in range(turns):
            prompts = []
            for s in range(c):
                prompt = hist[s] + [(s, t, "u", i) for i in range(user)]
                cached += cache.arrive(prompt)
                prompt_total += len(prompt)
                prompts.append(prompt)
            for s in range(c):
                output = [(s, t, "o", i) for i in range(out)]
                cache.complete(prompts[s], output, lag)
                hist[s] = prompts[s] + output
        return cached / prompt_total

    return run(capacity), run(1 << 30)


SHAPE = {"block": 16, "turns": 4, "user": 48, "out": 32, "system": 64}
MIX = SessionMix(turns=4, user_tokens=48, output_tokens=32, system_tokens=64)


@pytest.mark.parametrize(
    ("capacity", "sweep", "bracket"),
    [
        (134, range(1, 13), (7, 8)),  # knee (134 - 4) / 18 = 7.2
        (300, [1, 2, 4, 8, 16, 32], (16, 32)),  # knee 16.4
        (4 + 18 * 5, range(1, 10), (5, 6)),  # exactly 5 fit: knee 5.0
    ],
)
def test_lru_simulation_puts_the_knee_where_arithmetic_says(capacity, sweep, bracket):
    points = []
    for c in sweep:
        rate, ideal = simulate(c, capacity, **SHAPE)
        points.append(KneePoint(c, rate, ideal=ideal))
    m = find_knee(points, tolerance=0.005)
    assert m.found and (m.interval.low, m.interval.high) == bracket
    assert m.plateau is None and m.verdict().status == Status.PASS
    # the ideal cache holds the last turn's prompt: (64 + 3 x 80 + 48) // 16 = 22 blocks,
    # 4 of them shared
    p = predict_knee(
        TINY, None, 1, MIX, context_tokens=capacity * 16, block_size=16, ideal_cache=True
    )
    assert (p.shared_blocks, p.session_blocks) == (4, 18)
    assert p.knee_sessions == pytest.approx((capacity - 4) / 18)
    v = knee_agrees(p, m)
    assert v.status == Status.PASS, v
    # an engine rounds the last prompt up (352 tokens: 22 blocks either way)
    e = predict_knee(TINY, None, 1, MIX, context_tokens=capacity * 16, block_size=16)
    assert e.session_blocks == 18 and e.decode_blocks == 20


# vLLM 0.32.0's CPU build, the tiny model (float32), --block-size 32
# --num-gpu-blocks-override 100 (99 usable: one is the null block), prefix caching on,
# --enable-prompt-tokens-details; c sessions in step (each turn's c requests sent together,
# the history holding the real replies via return_token_ids; ignore_eos, max_tokens 96):
# P = 64, T = 4, U = 48, O = 96. Measured by hand on 2026-12-01: sessions -> hit rate
# (cached prompt tokens / prompt tokens, from the responses' usage).
VLLM_SWEEP = {
    1: 0.7561,
    2: 0.7805,
    3: 0.7886,
    4: 0.7927,
    5: 0.7951,
    6: 0.7967,
    7: 0.7317,
    8: 0.6006,
}
VLLM_SHAPE = {"block": 32, "turns": 4, "user": 48, "out": 96, "system": 64}


def test_vllm_measured_knee_agrees_with_the_prediction():
    """The ideal rule with vLLM's one difference (the last sampled token has no KV, so
    an output's last block fills one token later: ``lag=1``) gives vLLM's hit rates
    exactly up to the knee; the measured bracket (6, 7) holds the predicted 6.47."""
    points = []
    for c, rate in VLLM_SWEEP.items():
        _, ideal = simulate(c, 99, **VLLM_SHAPE, lag=1)
        if c <= 6:
            assert round(ideal, 4) == rate
        points.append(KneePoint(c, rate, ideal=ideal))
    m = find_knee(points, tolerance=0.01)
    assert (m.interval.low, m.interval.high) == (6.0, 7.0)
    mix = SessionMix(turns=4, user_tokens=48, output_tokens=96, system_tokens=64)
    budget = 100 * 32 * 4096 / 2**30  # 100 blocks of 32 tokens of 4,096 bytes
    p = predict_knee(
        TINY, None, 1, mix, kv_cache_gib=budget, block_size=32, reserved_blocks=1,
        kv_precision="fp32",
    )  # fmt: skip
    assert p.capacity_blocks == 99 and (p.shared_blocks, p.session_blocks) == (2, 15)
    assert p.knee_sessions == pytest.approx(97 / 15)
    assert knee_agrees(p, m).status == Status.PASS


# llama-server (accelbench's build, 0.5.0-dev commit 0c1e570), the tiny GGUF, -np 4
# -c 4096 --cache-ram 0 (as engines/llamacpp.py starts it: a slot keeps only its own last
# prompt and reply); /completion with token-id prompts, the real replies in the history
# (return_tokens), the same sessions in step: P = 64, T = 4, U = 48, O = 96. Measured by
# hand on 2026-12-01, hit rate = timings.cache_n / (prompt_n + cache_n).
LLAMA_SWEEP = {1: 0.8026, 2: 0.8026, 3: 0.8026, 4: 0.8026, 5: 0.4845, 6: 0.3631, 8: 0.1844}


def test_llama_server_measured_knee_agrees_with_the_prediction():
    """Four slots keep four sessions; the fifth thrashes them. The prediction from the
    context size and the slots says the same."""
    m = find_knee([KneePoint(c, r) for c, r in LLAMA_SWEEP.items()], tolerance=0.01)
    assert (m.interval.low, m.interval.high) == (4.0, 5.0)
    mix = SessionMix(turns=4, user_tokens=48, output_tokens=96, system_tokens=64)
    p = predict_knee(TINY, None, 1, mix, context_tokens=4096, block_size=1, slots=4)
    assert (p.knee_sessions, p.limited_by) == (4.0, "slots") and not p.warnings
    assert knee_agrees(p, m).status == Status.PASS


def test_first_point_plateau_and_open_ends():
    pts = [KneePoint(1, 0.8), KneePoint(2, 0.79), KneePoint(4, 0.5), KneePoint(8, 0.78)]
    m = find_knee(pts, tolerance=0.05)
    assert (m.interval.low, m.interval.high, m.plateau) == (2.0, 4.0, 0.8)
    assert m.threshold == pytest.approx(0.75) and "back on the plateau at [8]" in m.note
    beyond = find_knee(pts[:2])
    assert not beyond.found and (beyond.interval.low, beyond.interval.high) == (2.0, None)
    assert beyond.verdict().status == Status.INCONCLUSIVE
    before = find_knee(pts, plateau=0.95)
    assert (before.interval.low, before.interval.high) == (None, 1.0)
    # an interval that reaches the threshold is not below: the point stays on the plateau
    wide = find_knee([KneePoint(1, 0.8), KneePoint(2, 0.7, 0.6, 0.76), KneePoint(3, 0.5)])
    assert (wide.interval.low, wide.interval.high) == (2.0, 3.0)
    ttft = find_knee([KneePoint(1, 0.8, ttft_p50_s=0.1), KneePoint(2, 0.2, ttft_p50_s=0.5)])
    assert ttft.ttft_ratio == pytest.approx(5.0)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [KneePoint(0, 0.5)],
        [KneePoint(1, float("nan"))],
        [KneePoint(1, 1.5)],
        [KneePoint(1, 0.5), KneePoint(1, 0.4)],
        [KneePoint(1, 0.5, ideal=-0.1)],
    ],
)
def test_find_knee_bad_points_one_line(bad):
    with pytest.raises(UsageError):
        find_knee(bad)


# --------------------------------------------------------------------------- agreement


class _Pred:
    def __init__(self, k: float, lo: float | None = None, hi: float | None = None):
        self.knee_sessions = k
        self.interval = Interval(lo if lo is not None else k, hi if hi is not None else k, 0.8)


@pytest.mark.parametrize(
    ("pred", "measured", "status"),
    [
        (_Pred(6.5), Interval(6, 7), Status.PASS),
        (_Pred(6.0), Interval(6, 7), Status.PASS),  # exactly 6 fit, 7 do not
        (_Pred(7.0), Interval(6, 7), Status.FAIL),  # 7 would fit: the sweep says not
        (_Pred(7.0, 6.5, 7.5), Interval(6, 7), Status.INCONCLUSIVE),
        (_Pred(3.0, 2.0, 4.0), Interval(6, 7), Status.FAIL),
        (_Pred(100.0), Interval(32, None), Status.PASS),  # beyond the sweep, as predicted
        (_Pred(10.0), Interval(32, None), Status.FAIL),
        (_Pred(0.5), Interval(None, 1), Status.PASS),
        (_Pred(5.0), Interval(None, None), Status.UNKNOWN),
    ],
)
def test_knee_agrees(pred, measured, status):
    v = knee_agrees(pred, measured)
    assert v.status == status, v.note
    assert v.estimate == pred.knee_sessions and v.kind == "knee"


@pytest.mark.parametrize(
    ("pred", "measured", "replayed", "status"),
    [
        # 3.43 predicted, 4 sessions kept the plateau: the replay in arrival order agrees
        (_Pred(3.43, 3.42, 3.44), Interval(4, 5), Interval(4, 5), Status.INCONCLUSIVE),
        # the replay breaks at 4 where the server did not: the capacity does not explain it
        (_Pred(3.43, 3.42, 3.44), Interval(4, 5), Interval(3, 4), Status.FAIL),
        (_Pred(3.43), Interval(3, 4), Interval(4, 5), Status.PASS),  # inside: pass regardless
        (_Pred(7.14), Interval(3, 4), Interval(5, None), Status.FAIL),  # a wrong capacity
    ],
)
def test_knee_agrees_with_the_replay_in_arrival_order(pred, measured, replayed, status):
    v = knee_agrees(pred, measured, replayed)
    assert v.status == status, v.note
    assert (v.evidence["replayed_low"], v.evidence["replayed_high"]) == (replayed.low,
                                                                         replayed.high)  # fmt: skip


def test_knee_agrees_takes_a_prediction_and_a_measured_knee():
    p = predict_knee(TINY, None, 1, MIX, context_tokens=118 * 16, block_size=16)
    assert isinstance(p, KneePrediction) and p.knee_sessions == pytest.approx(114 / 18)
    m = MeasuredKnee(Interval(6.0, 7.0), None, 0.01, None, "s", True, None)
    assert knee_agrees(p, m).status == Status.PASS


# --------------------------------------------------------------------------- intervals


def _sessions(rng: np.random.Generator, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    prompt = rng.integers(300, 3000, n).astype(float)
    share = rng.beta(rate * 20, (1 - rate) * 20, n)  # mean ``rate``, independent of length
    return np.rint(prompt * share), prompt


@pytest.mark.parametrize(("n", "rate"), [(30, 0.5), (30, 0.8), (100, 0.95), (100, 0.1)])
def test_hit_rate_interval_coverage(n, rate):
    """Coverage of a point's hit-rate interval, sessions as the units (93-97 %)."""
    rng = np.random.default_rng(n)
    trials, covered = 3000, 0
    for _ in range(trials):
        cached, prompt = _sessions(rng, n, rate)
        iv = hit_rate_interval(list(cached), list(prompt))
        assert iv.low is not None and iv.high is not None
        covered += iv.low <= rate <= iv.high
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_hit_rate_interval_too_few_sessions():
    iv = hit_rate_interval([1] * 29, [10] * 29)
    assert iv.low is None and "too few" in iv.method
    with pytest.raises(ValueError):
        hit_rate_interval([1], [1, 2])


def test_knee_bracket_coverage_in_simulation():
    """A noisy sweep whose true hit rate drops from 0.8 to 0.6 past 6 sessions: with the
    per-point confidence of point_confidence, the bracket holds the true knee (6, 7) in
    at least 97.5 % of sweeps less simulation error; judged by the estimates alone, false
    early breaks take it below 95 %."""
    sweep = range(1, 13)
    conf = point_confidence(len(sweep))
    rng = np.random.default_rng(3)
    trials, good, naive_good = 1000, 0, 0
    for _ in range(trials):
        pts, naive = [], []
        for c in sweep:
            cached, prompt = _sessions(rng, 30, 0.8 if c <= 6 else 0.6)
            pts.append(KneePoint.from_sessions(c, list(cached), list(prompt), confidence=conf))
            naive.append(KneePoint(c, pts[-1].hit_rate))
        m = find_knee(pts, plateau=0.8, tolerance=0.04)
        good += (m.interval.low, m.interval.high) == (6.0, 7.0)
        n = find_knee(naive, plateau=0.8, tolerance=0.04)
        naive_good += (n.interval.low, n.interval.high) == (6.0, 7.0)
    assert good / trials >= 0.975 - 3 * math.sqrt(0.025 * 0.975 / trials), good / trials
    assert naive_good / trials < 0.95, naive_good / trials  # ~7 % false early breaks


# --------------------------------------------------------------------------- the command


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_plan_knee_compares_mi355x_and_b200_side_by_side():
    r = _cli(
        "plan", "knee", "--model", "llama-3.1-70b", "--accelerator", "mi355x",
        "--accelerator", "b200", "--tp", "8", "--turns", "8", "--user-tokens", "200",
        "--osl", "300", "--system-tokens", "2000",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = r.output
    assert "mi355x" in out and "b200" in out
    for figure in ("288 GiB", "180 GiB", "KV budget = usable - weights", "327,680 B"):
        assert figure in out
    row = next(x for x in out.splitlines() if "sessions that fit" in x)
    assert re.search(r"1,713\b.*\b1,027\b", row), row


def test_plan_knee_json_and_given_capacity():
    r = _cli(
        "plan", "knee", "-m", "llama-3.1-8b", "--turns", "3", "--user-tokens", "50",
        "--osl", "50", "--system-tokens", "100", "--context-tokens", "8192",
        "--block-size", "1", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    import json

    (k,) = json.loads(r.output)["knees"]
    assert k["capacity_tokens"] == 8192 and k["knee_sessions"] == pytest.approx(8092 / 250)
    assert k["accelerator"] is None and k["interval"]["confidence"] == 0.8


def test_plan_still_runs_the_fit_by_default():
    r = _cli("plan", "llama-2-70b", "-a", "h100", "-n", "8", "-c", "4096")
    assert r.exit_code == 0, r.output
    assert "Usage" not in r.output and "H100" in r.output


@settings(max_examples=40, deadline=None)
@given(
    opt=st.sampled_from(["--turns", "--user-tokens", "--osl", "--kv-cache-gib", "--tp"]),
    value=st.one_of(
        st.sampled_from(["nan", "inf", "-1", "-inf", "1e300", "1e400"]),
        st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr),
    ),
)
def test_plan_knee_bad_numbers_are_one_line(opt, value):
    """Bad numbers: one line naming the option, exit 2, nothing written."""
    args = {"--turns": "2", "--user-tokens": "10", "--osl": "10", "--kv-cache-gib": "1"}
    args[opt] = value
    flat = [x for kv in args.items() for x in kv]
    with tempfile.TemporaryDirectory() as d:
        code, out, err, _ = run_cli(["plan", "knee", "-m", "llama-3.1-8b", *flat], Path(d))
        assert not list(Path(d).iterdir())
    assert code == 2, out + err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and opt in lines[0], err
    assert not out


# --------------------------------------------------------------------------- options refused

_KNEE_MIX = ["--turns", "3", "--user-tokens", "50", "--osl", "50"]
# a value for each optional `plan knee` option (None: a flag)
_KNEE_OPTS: dict[str, str | None] = {
    "--accelerator": "h100", "--tp": "2", "--system-tokens": "100", "--template-tokens": "4",
    "--turns-sd": "1", "--user-tokens-sd": "5", "--osl-sd": "5", "--kv-cache-gib": "2",
    "--context-tokens": "8192", "--block-size": "16", "--reserved-blocks": "1", "--slots": "4",
    "--precision": "fp8", "--kv-precision": "fp8", "--reserve": "0.1", "--dp-attention": None,
    "--ideal-cache": None, "--json": None,
}  # fmt: skip
_HBM_ONLY = {"--accelerator", "--catalog", "--precision", "--reserve"}
_PER_TOKEN = {"--tp", "--kv-precision", "--dp-attention"}


def _knee_unused(opts: set[str]) -> set[str]:
    if "--context-tokens" in opts:
        return opts & (_HBM_ONLY | _PER_TOKEN | {"--kv-cache-gib"})
    if "--kv-cache-gib" in opts:
        return opts & _HBM_ONLY
    return set()


def test_every_plan_knee_option_belongs_to_a_capacity_source():
    import typer

    from accelbench.cli.cost import _KNEE_MODES, plan_knee_command

    a = typer.Typer(add_completion=False)
    a.command()(plan_knee_command)
    opts = {max(p.opts, key=len) for p in typer.main.get_command(a).params if p.opts}
    assert opts == set().union(*map(set, _KNEE_MODES.values()))
    assert opts == {*_KNEE_OPTS, "--catalog", "--model", "--turns", "--user-tokens", "--osl"}


@pytest.mark.parametrize(
    "args, name",
    [
        (["--context-tokens", "100000", "-a", "h100", "-a", "mi355x"], "--accelerator"),
        (["--kv-cache-gib", "4", "-a", "h100"], "--accelerator"),
        (["--kv-cache-gib", "4", "--precision", "fp8"], "--precision"),
        (["--kv-cache-gib", "4", "--reserve", "0.2"], "--reserve"),
        (["--context-tokens", "8192", "--precision", "fp8"], "--precision"),
        (["--context-tokens", "8192", "--reserve", "0.1"], "--reserve"),
        (["--context-tokens", "8192", "--kv-precision", "fp8"], "--kv-precision"),
        (["--context-tokens", "8192", "--dp-attention"], "--dp-attention"),
        (["--context-tokens", "8192", "--tp", "2"], "--tp"),
    ],
)
def test_plan_knee_option_its_capacity_ignores_is_refused(tmp_path, args, name):
    """With a capacity given, the accelerator (identical columns under its names) and its
    HBM arithmetic, and with a capacity in tokens the KV size per token, changed nothing:
    one line, exit 2, naming the option, no output."""
    code, out, err, _ = run_cli(["plan", "knee", "-m", "llama-3.1-8b", *_KNEE_MIX, *args], tmp_path)
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert name in err and "does not apply" in err, err


@settings(max_examples=60, deadline=None)
@given(opts=st.sets(st.sampled_from(sorted(_KNEE_OPTS)), max_size=5))
def test_property_an_option_the_capacity_source_ignores_is_refused(opts):
    """Whatever the capacity source (the accelerator's HBM, --kv-cache-gib,
    --context-tokens), an option it does not use is refused in one line, exit 2, naming
    it, with nothing written; other lines are not refused."""
    if {"--kv-cache-gib", "--context-tokens"} <= opts:
        opts = opts - {"--kv-cache-gib"}
    unused = _knee_unused(opts)
    args = ["plan", "knee", "-m", "llama-3.1-8b", *_KNEE_MIX]
    for opt in sorted(opts):
        v = _KNEE_OPTS[opt]
        args += [opt] if v is None else [opt, v]
    with tempfile.TemporaryDirectory() as d:
        code, out, err, _ = run_cli(args, Path(d))
        assert not list(Path(d).iterdir())
    if not unused:
        assert "not apply" not in err, (args, err)
        return
    assert code == 2 and out == "", (args, code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert min(unused) in err and "not apply to" in err, (args, err)


@settings(max_examples=60, deadline=None)
@given(
    turns=st.floats(min_value=1, max_value=1e5, allow_nan=False),
    osl=st.sampled_from([0.0, 1.0, 600.0, 1e7]),
    prompt=st.tuples(st.integers(0, 10), st.floats(0, 10, allow_nan=False), st.integers(0, 10)),
)
def test_property_a_session_whose_first_prompt_holds_no_token_is_refused(turns, osl, prompt):
    """System, user and template tokens all 0: a first prompt of no tokens, which no
    engine can be sent; refused in one line naming the three options. Any of them above
    0 (a mean of at least 1 token) is a session."""
    system, user, template = prompt
    if 0 < user < 1:
        user = 1.0
    mix = SessionMix(turns=turns, user_tokens=user, output_tokens=osl,
                     system_tokens=system, template_tokens=template)  # fmt: skip
    if system + user + template == 0:
        with pytest.raises(UsageError, match="^--system-tokens, --user-tokens and --templ"):
            mix.check()
    else:
        assert mix.check() is mix


def test_plan_knee_cli_refuses_sessions_of_no_tokens(tmp_path):
    """`plan knee -m llama-3.1-8b -a h100 --turns 3 --user-tokens 0 --osl 0` printed a
    knee of 29,205 sessions of 0 tokens, its table's 'own blocks = ceil(0 / 16) - 0' shown
    as 1; now exit 2, one line."""
    args = ["plan", "knee", "-m", "llama-3.1-8b", "-a", "h100", "--turns", "3",
            "--user-tokens", "0", "--osl", "0"]  # fmt: skip
    code, out, err, _ = run_cli(args, tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert "are all 0: a session's first prompt would hold no token" in line


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 100_000),
    block=st.sampled_from([1, 16, 128, 4096]),
    reserved=st.integers(0, 10_000),
)
def test_property_a_cache_with_no_block_for_a_session_is_said(capacity, block, reserved):
    """A given capacity whose blocks the reserve takes (or smaller than one block) gave a
    knee of 0 without a word; now a warning with the arithmetic, iff it holds no block."""
    mix = SessionMix(3, 50, 50)
    p = predict_knee(TINY, None, 1, mix, context_tokens=capacity, block_size=block,
                     reserved_blocks=reserved)  # fmt: skip
    said = [w for w in p.warnings if w.startswith("the cache holds no block for a session")]
    assert bool(said) == (capacity // block <= reserved)
    if said:
        assert p.max_sessions == 0 and f"{capacity:,} tokens // {block:,}" in said[0]


def test_plan_knee_cli_reserve_above_capacity_regression(tmp_path):
    """`plan knee ... --context-tokens 8192 --reserved-blocks 100000` printed a knee of 0
    sessions, its table's '8192 // 16 - 100000 reserved' as 0, and no warning."""
    args = ["plan", "knee", "-m", "llama-3.1-8b", "--turns", "3", "--user-tokens", "50",
            "--osl", "50", "--context-tokens", "8192", "--reserved-blocks", "100000"]  # fmt: skip
    code, out, err, _ = run_cli(args, tmp_path)
    assert code == 0
    assert "the cache holds no block for a session: 8,192 tokens // 16 = 512 blocks, " in out + err
