"""The synthetic agent trace (workload/agenttrace.py, `accelbench trace agent`): the
growing context and its hash_ids prefix property exactly, the shared system prompt, the
arrival and think times, a round trip through load_trace and trace_plan, and the CLI's
atomic write and one-line errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.workload.agenttrace import AgentTraceSpec, agent_trace, write_agent_trace
from accelbench.workload.requests import arrival_offsets
from accelbench.workload.traces import load_trace, trace_plan
from cli_inprocess import run_cli


class ByteTokenizer:
    """One token per UTF-8 byte: the reference server's own tokenizer."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", "replace")


def check_structure(spec: AgentTraceSpec, lines: list[dict]) -> None:
    """Every property the generator promises, checked line by line."""
    b = spec.block_size
    system = list(range(spec.system_tokens // b))
    by_session: dict[str, list[dict]] = {}
    for x in lines:
        by_session.setdefault(x["session_id"], []).append(x)
    assert len(by_session) == spec.sessions
    owned: dict[int, str] = {}  # id -> the session that introduced it
    for sid, turns in by_session.items():
        assert [x["turn"] for x in turns] == list(range(spec.turns))
        for k, x in enumerate(turns):
            ids = x["hash_ids"]
            assert len(ids) == -(-x["input_length"] // b)
            assert ids[: len(system)] == system  # the shared system prompt's full blocks
            if k == 0:
                assert "timestamp" in x and "delay" not in x
                task = x["input_length"] - spec.system_tokens
                lo, hi = (
                    round(spec.user_tokens * (1 - spec.spread)),
                    round(spec.user_tokens * (1 + spec.spread)),
                )
                assert max(1, lo) <= task <= hi
                new = ids[len(system) :]
            else:
                prev = turns[k - 1]
                assert "timestamp" not in x and x["delay"] >= 0
                tool = x["input_length"] - prev["input_length"] - prev["output_length"]
                lo = max(1, round(spec.tool_tokens * (1 - spec.spread)))
                assert lo <= tool <= round(spec.tool_tokens * (1 + spec.spread))
                keep = prev["input_length"] // b
                assert ids[:keep] == prev["hash_ids"][:keep]  # the prefix property, exactly
                new = ids[keep:]
                if keep < len(prev["hash_ids"]):  # the previous partial block is not reused
                    assert prev["hash_ids"][keep] not in new
            for i in new:  # fresh ids: never seen before, in this or any other session
                assert i not in owned and i not in system, (sid, k, i)
                owned[i] = sid
            lo = max(1, round(spec.osl * (1 - spec.spread)))
            assert lo <= x["output_length"] <= round(spec.osl * (1 + spec.spread))


def test_hand_checked_small_trace() -> None:
    """spread 0: every length exact. system 1100 tokens in blocks of 512: blocks 0 and 1
    shared; turn 0 = 1100 + 100 = 1200 tokens (3 blocks); turn 1 = 1200 + 50 + 300 =
    1550 (4 blocks: the first 2 of turn 0 kept, since 1200 // 512 = 2); turn 2 = 1550 +
    50 + 300 = 1900 (4 blocks, the first 3 of turn 1 kept)."""
    spec = AgentTraceSpec(sessions=2, turns=3, system_tokens=1100, user_tokens=100,
                          tool_tokens=300, osl=50, spread=0.0, rate=4.0, tool_ms=0.0)  # fmt: skip
    lines = agent_trace(spec)
    got = [(x["session_id"], x["input_length"], x["output_length"], x["hash_ids"]) for x in lines]
    assert got == [
        ("agent-0", 1200, 50, [0, 1, 2]),
        ("agent-0", 1550, 50, [0, 1, 3, 4]),
        ("agent-0", 1900, 50, [0, 1, 3, 5]),
        ("agent-1", 1200, 50, [0, 1, 6]),
        ("agent-1", 1550, 50, [0, 1, 7, 8]),
        ("agent-1", 1900, 50, [0, 1, 7, 9]),
    ]
    assert [x.get("delay") for x in lines] == [None, 0.0, 0.0] * 2
    starts = arrival_offsets(2, 4.0, "poisson", 1.0, 0) * 1000
    assert [lines[0]["timestamp"], lines[3]["timestamp"]] == pytest.approx(list(starts), abs=1e-3)
    check_structure(spec, lines)


@settings(max_examples=40, deadline=None)
@given(
    sessions=st.integers(1, 6),
    turns=st.integers(1, 6),
    system=st.integers(0, 700),
    user=st.integers(1, 200),
    tool=st.integers(1, 300),
    osl=st.integers(1, 200),
    spread=st.sampled_from([0.0, 0.3, 0.9]),
    block=st.integers(1, 256),
    seed=st.integers(0, 3),
)
def test_prefix_property_for_any_spec(
    sessions: int, turns: int, system: int, user: int, tool: int, osl: int, spread: float,
    block: int, seed: int,
) -> None:  # fmt: skip
    spec = AgentTraceSpec(sessions=sessions, turns=turns, system_tokens=system,
                          user_tokens=user, tool_tokens=tool, osl=osl, spread=spread,
                          block_size=block, seed=seed)  # fmt: skip
    lines = agent_trace(spec)
    assert lines == agent_trace(spec)  # seeded
    check_structure(spec, lines)


def test_times_follow_the_rate_and_tool_time() -> None:
    spec = AgentTraceSpec(sessions=4000, turns=2, rate=8.0, tool_ms=300.0, seed=5)
    lines = agent_trace(spec)
    ts = np.array([x["timestamp"] for x in lines if x["turn"] == 0]) / 1000
    assert ts[0] == 0 and np.all(np.diff(ts) >= 0)
    assert 4000 / ts[-1] == pytest.approx(8.0, rel=0.05)  # 4000 gaps: sd 1.6 %
    delays = np.array([x["delay"] for x in lines if x["turn"] == 1])
    assert delays.mean() == pytest.approx(300.0, rel=0.05)  # exponential: sd 1.6 %


def test_round_trip_through_load_trace_and_the_plan(tmp_path: Path) -> None:
    """The file loads as a mooncake trace with its sessions, turns and think times, and
    the plan's prompts share exactly the bytes the hash_ids say they share."""
    spec = AgentTraceSpec(sessions=5, turns=3, system_tokens=96, user_tokens=20,
                          tool_tokens=40, osl=10, block_size=32, tool_ms=200.0, seed=2)  # fmt: skip
    p = tmp_path / "agent.jsonl"
    assert write_agent_trace(spec, p) == 15
    lines = [orjson.loads(x) for x in p.read_bytes().splitlines()]
    t = load_trace(p, block_size=32)
    assert t.format == "mooncake" and t.sessions == 5 and len(t.entries) == 15
    for e, x in zip(t.entries, lines, strict=True):  # written in arrival order already
        assert e.session == int(x["session_id"].split("-")[1]) and e.turn == x["turn"]
        assert e.blocks == tuple(x["hash_ids"]) and e.isl == x["input_length"]
        assert e.think_s == pytest.approx(x.get("delay", 0.0) / 1000)
        assert (e.offset_s is None) == (e.turn > 0)
    plan = trace_plan(t, ByteTokenizer(), seed=1)
    blocks: dict[int, bytes] = {}
    for pr in plan:
        assert isinstance(pr.prompt, str) and pr.blocks is not None
        raw = pr.prompt.encode()
        assert len(raw) == pr.isl_planned
        for j, bid in enumerate(pr.blocks[: len(raw) // 32]):
            assert blocks.setdefault(bid, raw[j * 32 : (j + 1) * 32]) == raw[j * 32 : (j + 1) * 32]
    assert plan[0].prompt[:96] == plan[3].prompt[:96]  # the shared system prompt
    assert plan[1].prompt.startswith(plan[0].prompt[: (plan[0].isl_planned // 32) * 32])  # type: ignore[union-attr,operator]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelbench", "trace", "agent", *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_cli_writes_the_trace_and_refuses_bad_options(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "a.jsonl"
    r = _cli("--sessions", "3", "--turns", "2", "--system-tokens", "64", "--block-size", "16",
             "--seed", "4", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "6 requests in 3 sessions" in r.stdout
    want = agent_trace(AgentTraceSpec(sessions=3, turns=2, system_tokens=64, block_size=16, seed=4))
    assert [orjson.loads(x) for x in out.read_bytes().splitlines()] == want
    before = out.read_bytes()
    for args, match in [
        (["--sessions", "0"], "--sessions must be in"),
        (["--sessions", "2", "--block-size", "0"], "--block-size must be in"),
        (["--sessions", "2", "--rate", "0"], "--rate must be"),
        (["--sessions", "2", "--rate", "nan"], "--rate must be"),
        (["--sessions", "2", "--tool-ms", "-1"], "--tool-ms must be"),
        (["--sessions", "2", "--spread", "1"], "--spread must be below 1"),
        (["--sessions", "2", "--turns", "5000", "--tool-tokens", "1000"], "more than"),
    ]:
        code, _, err, _ = run_cli(["trace", "agent", *args, "-o", str(out)], tmp_path)
        assert code == 2, (args, err)
        assert match in err and len(err.strip().splitlines()) == 1, err
        assert out.read_bytes() == before  # nothing written, not even half
    code, _, err, _ = run_cli(["trace", "agent", "--sessions", "2", "-o", str(tmp_path)], tmp_path)
    assert code == 2 and "is a directory" in err
    assert sorted(p.name for p in out.parent.iterdir()) == ["a.jsonl"]  # no temp file left


def test_cli_help_explains_each_option() -> None:
    r = _cli("--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for opt in ("--sessions", "--turns", "--system-tokens", "--user-tokens", "--tool-tokens",
                "--osl", "--spread", "--rate", "--tool-ms", "--block-size", "--seed", "--out"):  # fmt: skip
        assert opt in text, opt
    assert "hash_ids" in text and "Sessions a second" in text


def test_spec_checks_in_python_too() -> None:
    with pytest.raises(UsageError, match="--turns must be in"):
        agent_trace(AgentTraceSpec(sessions=1, turns=0))
    with pytest.raises(UsageError, match="--system-tokens must be"):
        agent_trace(AgentTraceSpec(sessions=1, system_tokens=-1))


@pytest.mark.parametrize(
    ("args", "opt"),
    [
        (["--turns", "1", "--tool-ms", "9000", "--tool-tokens", "5000"], "--tool-tokens"),
        (["--turns", "1", "--tool-ms", "9000"], "--tool-ms"),
        (["--turns", "1", "--tool-tokens", "5000"], "--tool-tokens"),
        (["--turns", "1", "--tool-ms", "500"], "--tool-ms"),  # typed at its default
        (["--turns", "1", "--tool-tokens", "256"], "--tool-tokens"),  # typed at its default
        (["--turns", "1", "--tool-ms", "0"], "--tool-ms"),
    ],
)
def test_cli_refuses_tool_options_with_one_turn(tmp_path: Path, args: list[str], opt: str) -> None:
    # one turn has no later turn: no tool result is added, no tool time waited
    out = tmp_path / "a.jsonl"
    code, stdout, err, _ = run_cli(["trace", "agent", "--sessions", "3", *args, "-o", str(out)],
                                   tmp_path)  # fmt: skip
    assert code == 2 and stdout == "", (args, err)
    lines = err.strip().splitlines()
    assert lines == [f"error: {opt} applies only with --turns above 1 (a tool's result and run "
                     "time come before a later turn)"], err  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cli_tool_options_with_two_turns_change_the_trace(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run_cli(["trace", "agent", "--sessions", "3", "--turns", "2", "-o", str(a)],
                   tmp_path)[0] == 0  # fmt: skip
    code, _, err, _ = run_cli(["trace", "agent", "--sessions", "3", "--turns", "2",
                               "--tool-ms", "9000", "--tool-tokens", "5000", "-o", str(b)],
                              tmp_path)  # fmt: skip
    assert code == 0, err
    assert a.read_bytes() != b.read_bytes()
    # one turn without the tool options still writes its trace
    c = tmp_path / "c.jsonl"
    assert run_cli(["trace", "agent", "--sessions", "3", "--turns", "1", "-o", str(c)],
                   tmp_path)[0] == 0  # fmt: skip
    assert len(c.read_bytes().splitlines()) == 3


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(min_value=1e-300, max_value=1e6, allow_nan=False),
    sessions=st.integers(1, 50),
)
def test_the_sessions_never_span_more_than_a_trace_may(rate: float, sessions: int) -> None:
    """Any --rate: the trace's session starts lie within what the trace readers accept
    (MAX_TRACE_SPAN_S), or one line naming --rate (1e-300 wrote starts at 1e303 ms)."""
    from accelbench.workload.traces import MAX_TRACE_SPAN_S

    spec = AgentTraceSpec(sessions=sessions, turns=1, rate=rate, seed=1)
    try:
        lines = agent_trace(spec)
    except UsageError as exc:
        assert str(exc).startswith("--rate ") and sessions > 1
        return
    assert max(ln["timestamp"] for ln in lines if "timestamp" in ln) <= MAX_TRACE_SPAN_S * 1000


@settings(max_examples=60, deadline=None)
@given(sessions=st.integers(1, 2), turns=st.integers(1, 2),
       spread=st.sampled_from([0.0, 0.001, 0.5]), tool_ms=st.sampled_from([0.0, 500.0]),
       user=st.sampled_from([1, 128]), osl=st.sampled_from([1, 128]))  # fmt: skip
def test_seed_is_refused_exactly_where_it_changes_nothing(
    tmp_path_factory, sessions, turns, spread, tool_ms, user, osl
) -> None:
    """`trace agent --seed` draws the starts, the lengths --spread varies and the tool run
    times: where another seed gives the same trace it is refused in one line, nothing
    written (--sessions 1 --spread 0 --seed 5 wrote the seed-0 trace); elsewhere it
    changes the trace."""
    tmp = tmp_path_factory.mktemp("seed")
    args = ["trace", "agent", "--sessions", str(sessions), "--turns", str(turns),
            "--spread", str(spread), "--user-tokens", str(user), "--osl", str(osl),
            *(["--tool-ms", str(tool_ms)] if turns > 1 else [])]  # fmt: skip
    traces = []
    for seed in ("0", "7"):
        code, _, err, _ = run_cli([*args, "--seed", seed, "-o", str(tmp / f"{seed}.jsonl")], tmp)
        traces.append((code, err))
    spec = AgentTraceSpec(sessions=sessions, turns=turns, spread=spread, tool_ms=tool_ms,
                          user_tokens=user, osl=osl)  # fmt: skip
    # the same trace for every seed (two may draw the same few lengths by chance)
    first = agent_trace(spec)
    same = all(agent_trace(dataclasses.replace(spec, seed=s)) == first for s in range(1, 16))
    for code, err in traces:
        if same:
            assert code == 2 and err.startswith("error: --seed applies only where"), err
            assert err.count("\n") == 1
        else:
            assert code == 0, err
    if same:
        assert list(tmp.iterdir()) == []  # nothing written
