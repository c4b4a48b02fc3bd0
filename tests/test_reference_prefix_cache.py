"""The reference server's prefix cache: the ideal rule (BRIEF, "The ideal prefix-cache
rule") as ground truth. Hand-checked cases of the rule; the real server, started as a
process and driven with raw HTTP, whose usage ``cached_tokens``, /metrics counters and
ground-truth lines must agree exactly with each other and with a second, independent
model of the rule written here (a dict of prefix byte strings and its own LRU)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import socket
import time
from collections import OrderedDict
from pathlib import Path

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.reference import prefix_cache
from accelbench.reference.prefix_cache import PrefixCache
from accelbench.reference.server import ReferenceConfig
from accelbench.telemetry.parsers.server import parse_server_metrics
from cli_inprocess import run_cli

# -- the rule, written a second time for the tests -------------------------------------


class IdealModel:
    """The rule on prefixes: block j of a prompt *is* its first (j+1) x B bytes, so
    equal keys are equal content and prefix with no hashing; an OrderedDict is the LRU."""

    def __init__(self, block: int, capacity: int, outputs: bool = True) -> None:
        self.b, self.cap, self.outputs = block, capacity, outputs
        self.lru: OrderedDict[bytes, None] = OrderedDict()

    def _put(self, data: bytes) -> int:
        evicted = 0
        for j in range(1, len(data) // self.b + 1):
            key = data[: j * self.b]
            if key in self.lru:
                self.lru.move_to_end(key)
                continue
            if len(self.lru) == self.cap:
                self.lru.popitem(last=False)
                evicted += 1
            self.lru[key] = None
        return evicted

    def arrive(self, prompt: bytes) -> tuple[int, int]:
        """(cached tokens, blocks evicted)."""
        hit = 0
        while hit < (len(prompt) - 1) // self.b and prompt[: (hit + 1) * self.b] in self.lru:
            hit += 1
        for j in range(1, hit + 1):  # touch the hit blocks first, as the rule says
            self.lru.move_to_end(prompt[: j * self.b])
        return hit * self.b, self._put(prompt)

    def complete(self, prompt: bytes, output: bytes) -> int:
        return self._put(prompt + output) if self.outputs else 0


# -- hand-checked cases of the rule --------------------------------------------------


def test_prompt_of_two_and_a_half_blocks_repeats_with_two_blocks_hit() -> None:
    c = PrefixCache(16, 100)
    prompt = bytes(range(40))  # 2.5 blocks of 16
    first = c.arrive(prompt)
    assert (first.prompt_tokens, first.cached_tokens, len(c)) == (40, 0, 2)
    again = c.arrive(prompt)
    assert again.cached_tokens == 32  # both full blocks; the half block is never cached
    assert (c.queries_tokens, c.hit_tokens, c.evicted_blocks, len(c)) == (80, 32, 0, 2)


@pytest.mark.parametrize(
    ("length", "hit"),
    # (L - 1) // B blocks at most: an exactly block-aligned prompt computes its last block
    [(48, 32), (16, 0), (17, 16), (32, 16), (33, 32), (1, 0), (0, 0)],
)
def test_block_aligned_repeat_hits_one_block_less(length: int, hit: int) -> None:
    c = PrefixCache(16, 100)
    prompt = b"q" * length
    c.arrive(prompt)
    assert len(c) == length // 16  # every full block is inserted ...
    assert c.arrive(prompt).cached_tokens == hit == (max(length - 1, 0) // 16) * 16  # ... not hit


def test_capacity_two_evicts_the_least_recently_used() -> None:
    c = PrefixCache(4, 2)
    seen = [(c.arrive(p).cached_tokens, c.evicted_blocks) for p in
            (b"aaaax", b"bbbbx", b"aaaax", b"ccccx", b"aaaax", b"bbbbx")]  # fmt: skip
    # a, b; a hit (touched: b is now LRU); c evicts b, not a; a hits; b evicts c
    assert seen == [(0, 0), (0, 0), (4, 0), (0, 1), (4, 1), (0, 2)]
    assert (c.queries_tokens, c.hit_tokens) == (30, 8)


def test_a_prompt_longer_than_the_cache_thrashes_it() -> None:
    """LRU on a cyclic pattern: 3 blocks in a cache of 2 never hit, and each repeat
    evicts every block (the first block's miss breaks the run of leading blocks)."""
    c = PrefixCache(4, 2)
    p = b"aaaabbbbccccx"
    first = c.arrive(p)
    assert (first.cached_tokens, first.evicted) == (0, 1)  # its own first block went
    again = c.arrive(p)
    assert (again.cached_tokens, again.evicted) == (0, 3)


def test_identity_is_content_and_prefix() -> None:
    c = PrefixCache(4, 100)
    c.arrive(b"aaaabbbbz")
    assert c.arrive(b"xxxxbbbbz").cached_tokens == 0  # block 1 equal, its prefix not
    assert c.arrive(b"bbbbaaaaz").cached_tokens == 0
    assert c.arrive(b"aaaabbbbcccc").cached_tokens == 8
    assert c.arrive(b"aaaaz").cached_tokens == 4


def test_outputs_inserted_at_completion_make_the_next_turn_hit() -> None:
    turn1, reply = b"hi there", b" beta gamma"  # 8 + 11 = 19 bytes: 4 full blocks of 4
    turn2 = turn1 + reply + b" ok?"  # 23 bytes, 5 full blocks, at most (23-1)//4 = 5 hit
    c = PrefixCache(4, 100)
    adm = c.arrive(turn1)
    assert adm.cached_tokens == 0 and len(c) == 2  # "hi t", "here"
    assert c.complete(adm, reply) == 0 and len(c) == 4  # + " bet", "a ga"
    assert c.arrive(turn2).cached_tokens == 16  # the blocks of prompt + reply
    without = PrefixCache(4, 100)
    without.arrive(turn1)  # never completed (or outputs not cached)
    assert without.arrive(turn2).cached_tokens == 8  # the prompt's own blocks only


def test_each_block_is_hashed_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = hashlib.blake2b

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(prefix_cache.hashlib, "blake2b", counting)
    c = PrefixCache(4, 100)
    adm = c.arrive(b"p" * 42)  # 10 full blocks, 2 bytes over
    assert len(calls) == 10
    c.complete(adm, b"abcdefg")  # 49 bytes: 12 blocks, 2 of them new
    assert len(calls) == 12


def test_chain_hash_is_blake2b_of_the_previous_digest_and_the_block() -> None:
    (h0, h1) = prefix_cache.chain_hashes(b"abcdefgh", 4)
    assert h0 == hashlib.blake2b(b"abcd", digest_size=16).digest()
    assert h1 == hashlib.blake2b(h0 + b"efgh", digest_size=16).digest()


@settings(max_examples=200)
@given(
    block=st.integers(1, 6),
    cap=st.integers(1, 8),
    ops=st.lists(
        st.tuples(st.text("ab", max_size=20), st.text("ab", max_size=6), st.booleans()), max_size=12
    ),  # fmt: skip
)
def test_cache_equals_the_prefix_model(block: int, cap: int, ops: list) -> None:
    """The hashed cache and the model of prefixes agree on every hit and eviction, and the
    cache never holds more than its capacity."""
    c, m = PrefixCache(block, cap), IdealModel(block, cap)
    evicted = hits = 0
    for prompt, output, completes in ops:
        p, o = prompt.encode(), output.encode()
        adm = c.arrive(p)
        assert (adm.cached_tokens, adm.evicted) == m.arrive(p)
        assert adm.cached_tokens <= max(len(p) - 1, 0) // block * block
        evicted, hits = evicted + adm.evicted, hits + adm.cached_tokens
        if completes:
            e = c.complete(adm, o)
            assert e == m.complete(p, o)
            evicted += e
        assert len(c) == len(m.lru) <= cap
    assert (c.evicted_blocks, c.hit_tokens) == (evicted, hits)


# -- the real server -------------------------------------------------------------------


def ground_truth(path: Path, n: int) -> dict[str, dict]:
    """The server's lines (written when each response ends: wait for ``n``)."""
    deadline = time.monotonic() + 10
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert len(lines) == n, f"{len(lines)} ground-truth lines, expected {n}"
    return {d["request_id"]: d for d in map(json.loads, lines)}


def metrics(url: str) -> tuple[str, dict[str, str]]:
    import urllib.request

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return text, dict(ln.rsplit(" ", 1) for ln in text.splitlines() if not ln.startswith("#"))


async def send(
    http: aiohttp.ClientSession, url: str, rid: str, prompt: str, *, chat: bool = False,
    stream: bool = False, max_tokens: int = 3, parts: int = 1,
) -> tuple[dict, str, float]:  # fmt: skip
    """One request; (usage, the reply's text, seconds to the first token or the body).
    A chat prompt is split into ``parts`` messages: the server joins their contents."""
    body: dict = {"max_tokens": max_tokens, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if chat:
        cut = [len(prompt) * k // parts for k in range(parts + 1)]
        body["messages"] = [{"role": ("user", "assistant")[k % 2], "content": prompt[a:b]}
                            for k, (a, b) in enumerate(itertools.pairwise(cut))]  # fmt: skip
    else:
        body["prompt"] = prompt
    path = "/v1/chat/completions" if chat else "/v1/completions"
    t0 = time.monotonic()
    async with http.post(url + path, json=body, headers={"x-request-id": rid}) as r:
        assert r.status == 200, await r.text()
        if not stream:
            doc = await r.json()
            ch = doc["choices"][0]
            return doc["usage"], ch["message"]["content"] if chat else ch["text"], 0.0
        usage, text, ttft = None, "", None
        async for raw in r.content:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            doc = json.loads(line[6:])
            if doc.get("usage"):
                usage = doc["usage"]
            for ch in doc["choices"]:
                piece = ch["delta"].get("content", "") if chat else ch["text"]
                if piece and ttft is None:
                    ttft = time.monotonic() - t0
                text += piece
        assert usage is not None and ttft is not None
        return usage, text, ttft


def run(coro_fn, *args):
    async def main():
        async with aiohttp.ClientSession() as http:
            return await coro_fn(http, *args)

    return asyncio.run(main())


def test_ttft_is_base_plus_cost_per_uncached_token(reference_server) -> None:
    """TTFT = 5 ms + 0.5 ms x uncached tokens, from the request's arrival: the server's
    schedule is exact (1 us: float seconds), and its writes are not earlier than it (by
    at most the event loop's clock granularity, 1 ms)."""
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1", "--prefix-block-size", "16",
                           "--prefix-cache-blocks", "64", "--prefill-ms-per-token", "0.5")  # fmt: skip
    prompt = "p" * 200  # 12 full blocks; a repeat hits (200 - 1) // 16 = 12 of them
    cases = [("cold", 0), ("warm", 192), ("warm2", 192), ("other", 0)]

    async def drive(http):
        out = []
        for rid, _ in cases:
            p = prompt if rid != "other" else "o" * 200
            out.append(await send(http, srv.url, rid, p, stream=True, max_tokens=2))
        return out

    got = run(drive)
    gt = ground_truth(srv.ground_truth, len(cases))
    for (rid, cached), (usage, _, ttft_client) in zip(cases, got, strict=True):
        line = gt[rid]
        assert usage["prompt_tokens_details"]["cached_tokens"] == cached == line["cached_tokens"]
        expect_ms = 5 + 0.5 * (200 - cached)  # 105 cold, 9 warm
        assert abs(line["scheduled"][0] - line["t_recv"] - expect_ms * 1e6) <= 1_000
        lag_ms = (line["token_times"][0] - line["scheduled"][0]) / 1e6
        print(f"{rid}: TTFT {expect_ms} ms scheduled, written {lag_ms:+.3f} ms off, "
              f"client {ttft_client * 1e3:.1f} ms")  # fmt: skip
        assert lag_ms > -1.0
        assert ttft_client * 1e3 > expect_ms - 1.0  # the client cannot see it sooner


def test_server_usage_metrics_and_ground_truth_agree(reference_server) -> None:
    """A multi-turn chat (each turn resends the history with the server's real replies),
    completions sharing a system prompt, streamed and not, in a cache of 6 blocks of 8:
    usage, ground truth, /metrics and the model agree exactly, request by request."""
    srv = reference_server("--ttft-ms", "0", "--itl-ms", "0", "--prefix-block-size", "8",
                           "--prefix-cache-blocks", "6")  # fmt: skip
    model = IdealModel(8, 6)
    system = "You are a helpful bench. "  # 25 bytes
    sent: list[tuple[str, int, int]] = []  # (rid, cached, evicted)

    async def drive(http):
        history = system
        for turn in range(4):  # a conversation: the history grows with each reply
            prompt = history + f"Q{turn}: how fast?"
            rid = f"chat-{turn}"
            usage, reply, _ = await send(http, srv.url, rid, prompt, chat=True,
                                         stream=turn % 2 == 0, parts=2 + turn)  # fmt: skip
            cached, ev = model.arrive(prompt.encode())
            ev += model.complete(prompt.encode(), reply.encode())
            assert usage["prompt_tokens"] == len(prompt.encode())
            assert usage["prompt_tokens_details"] == {"cached_tokens": cached}, rid
            sent.append((rid, cached, ev))
            history = prompt + reply
        for k, tail in enumerate(["short", "a much longer user question, é", "short"]):
            prompt, rid = system + tail, f"cmpl-{k}"
            usage, reply, _ = await send(http, srv.url, rid, prompt, stream=k != 1)
            cached, ev = model.arrive(prompt.encode())
            ev += model.complete(prompt.encode(), reply.encode())
            assert usage["prompt_tokens_details"]["cached_tokens"] == cached, rid
            sent.append((rid, cached, ev))

    run(drive)
    # hand-checked: turn 0 (38 bytes) and its reply " beta gamma delta" (17) leave 6 full
    # blocks of 8: the capacity. Turn 1 (68 bytes) hits all 6 (48 tokens); inserting its 8
    # evicts 2 (its own first two), and its completion (+ " gamma delta token": 86 bytes,
    # 10 blocks, the first two missing) evicts 10, LRU on a cycle longer than the cache:
    # from turn 2 on the history does not fit and nothing hits
    assert sent[:2] == [("chat-0", 0, 0), ("chat-1", 48, 2 + 10)]
    assert [c for _, c, _ in sent[2:4]] == [0, 0]
    # the completions share the system prompt's 3 blocks (24 bytes; cmpl-0 put them back)
    assert [c for _, c, _ in sent[4:6]] == [0, 24]
    gt = ground_truth(srv.ground_truth, len(sent))
    for rid, cached, ev in sent:
        assert (gt[rid]["cached_tokens"], gt[rid]["blocks_evicted"]) == (cached, ev), rid
    text, m = metrics(srv.url)
    queries = sum(d["prompt_tokens"] for d in gt.values())
    hits = sum(d["cached_tokens"] for d in gt.values())
    assert int(m["reference:prefix_cache_queries_total"]) == queries
    assert int(m["reference:prefix_cache_hits_total"]) == hits == sum(c for _, c, _ in sent)
    assert int(m["reference:prefix_cache_evicted_blocks_total"]) == sum(e for _, _, e in sent)
    assert int(m["reference:prefix_cache_blocks"]) == len(model.lru) == 6
    info = 'reference:cache_config_info{block_size="8",num_gpu_blocks="6",cache_outputs="true"}'
    assert m[info] == "1"
    # accelbench's telemetry reads them as it reads vLLM's
    (row,) = parse_server_metrics(text)
    assert row["engine"] == "reference"
    assert row["srv_prefix_cache_hits_total"] == hits
    assert row["srv_prefix_cache_queries_total"] == queries


def test_concurrent_requests_replayed_in_ground_truth_order(reference_server) -> None:
    """Concurrent streams: arrivals and completions interleave. Replaying the ground
    truth's events in the order of their stamps (t_recv: arrival, t_end: completion)
    through the model gives every request's cached tokens and evictions exactly."""
    srv = reference_server("--ttft-ms", "uniform:0:30", "--itl-ms", "uniform:0:3",
                           "--seed", "3", "--prefix-block-size", "4",
                           "--prefix-cache-blocks", "24")  # fmt: skip
    prefixes = ["shared system prompt A. ", "another prefix, B: "]
    jobs = [(f"r{k}", prefixes[k % 2] + "x" * (k % 5) + str(k)) for k in range(24)]
    outputs: dict[str, str] = {}

    async def drive(http):
        async def one(rid, prompt, delay):
            await asyncio.sleep(delay)
            _, outputs[rid], _ = await send(http, srv.url, rid, prompt, stream=True,
                                            max_tokens=1 + int(rid[1:]) % 4)  # fmt: skip

        await asyncio.gather(*(one(rid, p, 0.004 * k) for k, (rid, p) in enumerate(jobs)))

    run(drive)
    prompts = dict(jobs)
    gt = ground_truth(srv.ground_truth, len(jobs))
    events = [(d["t_recv"], 0, rid) for rid, d in gt.items()]
    events += [(d["t_end"], 1, rid) for rid, d in gt.items()]
    assert len({t for t, _, _ in events}) == len(events)  # distinct stamps: a total order
    model, want = IdealModel(4, 24), {rid: [0, 0] for rid in gt}
    overlapped = False
    for _t, kind, rid in sorted(events):
        p = prompts[rid].encode()
        if kind == 0:
            want[rid] = list(model.arrive(p))
        else:
            want[rid][1] += model.complete(p, outputs[rid].encode())
        overlapped |= kind == 0 and any(  # an arrival while another request streamed
            d["t_recv"] < gt[rid]["t_recv"] < d["t_end"] for d in gt.values()
        )
    assert overlapped
    for rid, d in gt.items():
        assert [d["cached_tokens"], d["blocks_evicted"]] == want[rid], rid
    _, m = metrics(srv.url)
    assert int(m["reference:prefix_cache_hits_total"]) == sum(w[0] for w in want.values()) > 0


def test_no_cache_by_default(reference_server) -> None:
    """Capacity 0 (the default): usage and /metrics as before (no cache fields), the
    ground truth says 0 cached tokens."""
    srv = reference_server("--ttft-ms", "0", "--itl-ms", "0")

    async def drive(http):
        return [await send(http, srv.url, f"n{k}", "same prompt " * 4, stream=k == 1)
                for k in range(2)]  # fmt: skip

    for usage, _, _ in run(drive):
        assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    gt = ground_truth(srv.ground_truth, 2)
    assert [gt[r]["cached_tokens"] for r in ("n0", "n1")] == [0, 0]
    text, _ = metrics(srv.url)
    assert "reference:" not in text and parse_server_metrics(text) == []


ALPHABET = st.sampled_from("ab €")  # '€' is 3 bytes: tokens are bytes, not characters


@pytest.mark.parametrize(("block", "cap", "outputs"), [(4, 12, True), (3, 5, False)])
def test_server_equals_the_model_on_random_sessions(reference_server, block, cap, outputs):
    """Random sequences of prompts sharing random prefixes, continuing earlier prompts with
    the server's replies (multi-turn), chat (split into messages) and completions, streamed
    and not: the server's cached tokens equal the model's and never exceed
    (L - 1) // B x B; the ground truth agrees at the end."""
    srv = reference_server("--ttft-ms", "0", "--itl-ms", "0", "--prefix-block-size", str(block),
                           "--prefix-cache-blocks", str(cap),
                           "--prefix-cache-outputs" if outputs else "--no-prefix-cache-outputs")  # fmt: skip
    model = IdealModel(block, cap, outputs)
    expected: dict[str, tuple[int, int, int]] = {}
    counter = iter(range(1_000_000))
    request = st.tuples(
        st.integers(0, 2), st.text(ALPHABET, max_size=10), st.booleans(), st.booleans(),
        st.integers(1, 4), st.integers(1, 3), st.booleans(),
    )  # fmt: skip

    @settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
    @given(prefixes=st.lists(st.text(ALPHABET, max_size=16), min_size=3, max_size=3),
           reqs=st.lists(request, min_size=1, max_size=6))  # fmt: skip
    def check(prefixes: list[str], reqs: list) -> None:
        async def drive(http):
            last = ""
            for which, tail, chat, stream, max_tokens, parts, cont in reqs:
                prompt = (last if cont else prefixes[which]) + tail
                rid = f"h{next(counter)}"
                usage, reply, _ = await send(http, srv.url, rid, prompt, chat=chat,
                                             stream=stream, max_tokens=max_tokens, parts=parts)  # fmt: skip
                p = prompt.encode()
                cached, ev = model.arrive(p)
                ev += model.complete(p, reply.encode())
                got = usage["prompt_tokens_details"]["cached_tokens"]
                assert got == cached, (rid, prompt, got, cached)
                assert got <= max(len(p) - 1, 0) // block * block
                expected[rid] = (len(p), cached, ev)
                last = prompt + reply

        run(drive)

    check()
    gt = ground_truth(srv.ground_truth, len(expected))
    for rid, (n, cached, ev) in expected.items():
        d = gt[rid]
        assert (d["prompt_tokens"], d["cached_tokens"], d["blocks_evicted"]) == (n, cached, ev)
    _, m = metrics(srv.url)
    hits = sum(c for _, c, _ in expected.values())
    assert int(m["reference:prefix_cache_hits_total"]) == hits > 0
    assert (
        int(m["reference:prefix_cache_evicted_blocks_total"])
        == sum(e for _, _, e in expected.values())
        > 0
    )  # the examples reused prefixes and filled the cache
    assert int(m["reference:prefix_cache_blocks"]) == len(model.lru) <= cap


# -- bad option values -----------------------------------------------------------------

BAD = {
    "--prefix-block-size": st.one_of(
        st.integers(max_value=0), st.integers(min_value=(1 << 20) + 1),
        st.sampled_from(["1.5", "nan", "inf", "x", "", "1e3"]),
    ),
    "--prefix-cache-blocks": st.one_of(
        st.integers(max_value=-1), st.integers(min_value=10_000_001),
        st.sampled_from(["2.5", "nan", "-inf", "many"]),
    ),
    "--prefill-ms-per-token": st.one_of(
        st.floats(max_value=-1e-9), st.floats(min_value=1000.001, allow_infinity=False),
        st.sampled_from(["nan", "inf", "-inf", "NaN", "1e400", "fast"]),
    ),
}  # fmt: skip


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_option_values_are_one_line_exit_2(data, tmp_path: Path) -> None:
    """Each bad value: exit 2, one line naming the option, no ground-truth file. The port
    is held, so a value wrongly accepted ends in "cannot listen", not in a server."""
    option = data.draw(st.sampled_from(sorted(BAD)))
    value = str(data.draw(BAD[option]))
    gt = tmp_path / "gt.jsonl"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        code, out, err, _ = run_cli(["serve", "reference", "--port", port, "--ground-truth",
                                     str(gt), "--prefix-cache-blocks", "8", option, value],
                                    tmp_path)  # fmt: skip
    assert code == 2, (option, value, out, err)
    assert err.count("\n") == 1 and err.startswith("error:"), err
    assert option in err and "Traceback" not in err
    assert not gt.exists()


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [("prefix_block_size", 0, "--prefix-block-size"),
     ("prefix_cache_blocks", True, "--prefix-cache-blocks"),
     ("prefill_ms_per_token", float("nan"), "--prefill-ms-per-token"),
     ("prefix_cache_outputs", "yes", "--prefix-cache-outputs")],
)  # fmt: skip
def test_bad_config_fields_are_refused_by_the_api(field: str, value: object, option: str) -> None:
    cfg = ReferenceConfig(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=option):
        cfg.validate()
