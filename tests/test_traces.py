"""Trace formats (workload/traces.py): detection by content, parsing with hand-checked
offsets, the plan with exact synthetic lengths, and hostile input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError, UsageError
from accelbench.workload.plan import arrival_offsets
from accelbench.workload.traces import (
    detect_format,
    load_trace,
    parse_azure_timestamp,
    trace_header,
    trace_plan,
    trace_row,
)

# The first lines of AzurePublicDataset data/AzureLLMInferenceTrace_code.csv (its header
# and timestamp shape: 7 fractional digits).
AZURE = b"""TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
2023-11-16 18:17:04.0781490,110,27
"""
# Mooncake's published shape (timestamps in ms since the first request).
MOONCAKE = b"""{"timestamp": 0, "input_length": 6755, "output_length": 500}
{"timestamp": 3052, "input_length": 2287, "output_length": 316}
{"timestamp": 1500, "input_length": 10, "output_length": 1}
"""


class ByteTokenizer:
    """One token per UTF-8 byte: the reference server's own tokenizer."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", "replace")


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


def test_azure_timestamps_and_lengths(tmp_path: Path) -> None:
    assert parse_azure_timestamp("2023-11-16 18:17:04.0319600") - parse_azure_timestamp(
        "2023-11-16 18:17:03.9799600"
    ) == pytest.approx(0.052, abs=1e-6)
    assert parse_azure_timestamp("12.5") == 12.5
    t = load_trace(_write(tmp_path, "a.csv", AZURE))
    assert t.format == "azure"
    assert [e.offset_s for e in t.entries] == pytest.approx([0.0, 0.052, 0.098189], abs=1e-6)
    assert [(e.isl, e.osl) for e in t.entries] == [(4808, 10), (3180, 8), (110, 27)]


def test_mooncake_sorted_offsets_in_seconds(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path, "m.jsonl", MOONCAKE))
    assert t.format == "mooncake"
    assert [e.offset_s for e in t.entries] == [0.0, 1.5, 3.052]
    assert [(e.isl, e.osl) for e in t.entries] == [(6755, 500), (10, 1), (2287, 316)]
    assert t.duration_s == 3.052
    assert len(load_trace(tmp_path / "m.jsonl", limit=2).entries) == 2


def test_own_format_round_trip_and_directory(tmp_path: Path) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}
    lines = [trace_header(), trace_row(0, 0.5, "chat", body), trace_row(1, 0.25, "completions",
             {"model": "m", "prompt": "x"})]  # fmt: skip
    d = tmp_path / "shadow"
    d.mkdir()
    (d / "trace.jsonl").write_bytes(
        b"".join(orjson.dumps(x) + b"\n" for x in lines) + b'{"idx": 2, "t'
    )
    t = load_trace(d)  # a shadow directory; the torn last line is skipped, and said
    assert t.format == "accelbench"
    assert t.notes == [
        f"{d / 'trace.jsonl'}:4: the last line is cut short (the proxy stopped mid-write): left out"
    ]
    assert [e.offset_s for e in t.entries] == [0.0, 0.25]
    assert t.entries[1].body == body and t.entries[1].endpoint == "chat" and t.entries[1].osl == 7
    plan = trace_plan(t, None)  # recorded bodies need no tokenizer
    from accelbench.runner.config import WorkloadConfig
    from accelbench.workload.plan import build_plan

    notes: list[str] = []  # what `run --trace` prints and keeps in client.warnings
    build_plan(WorkloadConfig(trace=str(d)), 2, None, notes=notes)
    assert notes == t.notes
    assert plan[1].body == body and plan[1].prompt == body["messages"] and plan[1].offset_s == 0.25


def test_sharegpt_needs_an_arrival_process(tmp_path: Path) -> None:
    conv = [{"conversations": [{"from": "human", "value": f"question {i}"},
                               {"from": "gpt", "value": "abcd" * (i + 1)}]} for i in range(5)]  # fmt: skip
    p = _write(tmp_path, "s.json", orjson.dumps(conv))
    with pytest.raises(UsageError, match="--rate"):
        load_trace(p)
    t = load_trace(p, rate=4.0, arrival="constant", seed=3)
    assert t.format == "sharegpt"
    assert [e.offset_s for e in t.entries] == pytest.approx(
        list(arrival_offsets(5, 4.0, "constant", 1, 3))
    )
    assert [e.offset_s for e in t.entries] == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    plan = trace_plan(t, ByteTokenizer(), special_tokens=1)
    assert [p.max_tokens for p in plan] == [4, 8, 12, 16, 20]  # the replies' lengths
    assert plan[0].isl_planned == len("question 0") + 1


def test_synthetic_prompts_have_exact_lengths(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path, "m.jsonl", MOONCAKE))
    plan = trace_plan(t, ByteTokenizer(), special_tokens=2, seed=1)
    tok = ByteTokenizer()
    for pr, e in zip(plan, t.entries, strict=True):
        assert isinstance(pr.prompt, str)
        assert len(tok.encode(pr.prompt)) + 2 == e.isl == pr.isl_planned
        assert pr.max_tokens == e.osl
    assert len({p.prompt for p in plan}) == 3  # distinct: no accidental prefix cache hits
    with pytest.raises(AccelbenchError, match="tokenizer"):
        trace_plan(t, None)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"a,b,c\n1,2,3\n", "cannot tell the trace format"),
        # a JSON first line that is not JSON: named, not "cannot tell the format"
        (b'{"timestamp": NaN, "input_length": 3, "output_length": 3}\n', "line 1 is not JSON"),
        (b'{"timestamp": 1e400, "input_length": 3, "output_length": 3}\n', "line 1 is not JSON"),
        (b'{"timestamp": 0, "input_length": 3\n', "line 1 is not JSON"),
        (b"TIMESTAMP,ContextTokens,GeneratedTokens\nnot a time,1,2\n", "expected TIMESTAMP"),
        (b'{"timestamp": 0, "input_length": 0, "output_length": 3}\n', "input_length must be in"),
        (b'{"timestamp": -5, "input_length": 3, "output_length": 3}\n', "non-negative"),
        (b"   \n", "is empty"),
        (b"TIMESTAMP,ContextTokens,GeneratedTokens\nnan,1,2\n0,1,2\n", "finite time"),
        (b"TIMESTAMP,ContextTokens,GeneratedTokens\ninf,1,2\n0,1,2\n", "finite time"),
        (b"TIMESTAMP,ContextTokens,GeneratedTokens\n1e308,1,2\n0,1,2\n", "spans"),
        (
            b'{"timestamp": 0, "input_length": 3, "output_length": 3}\n'
            b'{"timestamp": 1e308, "input_length": 3, "output_length": 3}\n',
            "spans",
        ),
    ],
)
def test_bad_traces_fail_with_one_line(tmp_path: Path, data: bytes, match: str) -> None:
    with pytest.raises(AccelbenchError, match=match) as exc:
        load_trace(_write(tmp_path, "bad", data))
    assert "\n" not in str(exc.value)


def test_detect_format_by_content() -> None:
    assert detect_format(AZURE) == "azure"
    assert detect_format(MOONCAKE) == "mooncake"
    assert detect_format(orjson.dumps(trace_header()) + b"\n") == "accelbench"
    assert detect_format(b'[{"conversations": []}]') == "sharegpt"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_hostile_input_only_clear_errors(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "h"
    p.write_bytes(data)
    try:
        t = load_trace(p, rate=1.0)
    except AccelbenchError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(e.offset_s >= 0 for e in t.entries)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fmt=st.sampled_from(["azure", "mooncake"]),
    times=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=5),
)
def test_any_timestamps_give_offsets_or_one_line(tmp_path: Path, fmt: str, times: list) -> None:
    """NaN, infinite, negative or huge arrival times: a clear error, or offsets a replay can
    schedule (finite, from 0, within the 30-day span); never an internal error."""
    if fmt == "azure":
        data = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t!r},4,2\n" for t in times)
    else:
        data = "".join(
            orjson.dumps({"timestamp": t, "input_length": 4, "output_length": 2}).decode() + "\n"
            for t in times
        )
    try:
        t = load_trace(_write(tmp_path, f"t.{fmt}", data.encode()), fmt)
    except AccelbenchError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        offs = [e.offset_s for e in t.entries]
        assert all(0 <= o <= 30 * 86400 for o in offs), offs


def test_run_trace_with_workers_replays_open_loop_over_all_of_them(reference_server, tmp_path):
    """The issue's case: `run --trace FILE --workers N` used one worker and its summary
    said "concurrency 1". Now: N workers, the trace's arrivals dealt out among them from
    one start instant, and the run described as what it was (docs/RESULTS.md schedule)."""
    import json
    import subprocess
    import sys

    import numpy as np
    import pyarrow.parquet as pq

    srv = reference_server("--ttft-ms", "2", "--itl-ms", "1")
    times = [0, 30, 35, 90, 200, 210, 260, 400, 405, 410, 600, 700]  # ms, irregular
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": t, "input_length": 10 + i, "output_length": 3}) + "\n"
        for i, t in enumerate(times)
    ))  # fmt: skip
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "--trace", str(trace),
         "--workers", "3", "--warmup", "2", "--out", str(out), "--no-telemetry"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "trace replay mooncake.jsonl: open loop" in r.stdout and "concurrency" not in r.stdout
    meta = json.loads((out / "run.json").read_text())
    s = json.loads((out / "summary.json").read_text())
    assert meta["config"]["concurrency"] is None and meta["config"]["workers"] == 3
    sched = meta["schedule"]
    assert sched["mode"] == "trace" and sched["open_loop"] and sched["workers"] == 3
    assert s["client"]["mode"] == "trace" and s["client"]["n_workers"] == 3
    assert s["counts"]["completed"] == len(times) - 2
    rows = sorted(pq.read_table(out / "requests.parquet").to_pylist(), key=lambda x: x["idx"])
    meas = [x for x in rows if not x["warmup"]]
    assert {x["worker"] for x in meas} == {0, 1, 2}
    assert [x["isl"] for x in meas] == [10 + i for i in range(2, len(times))]  # exact lengths
    start = {p["start_ns"] for w in s["client"]["workers"] for p in w["phases"]
             if p["name"] == "measured"}  # fmt: skip
    assert len(start) == 1  # one instant for the three workers
    t0 = start.pop()
    got_ms = np.array([(x["t_sched"] - t0) / 1e6 for x in meas])  # the trace's own offsets
    want_ms = np.array(times[2:], dtype=float) - times[2]
    np.testing.assert_allclose(got_ms, want_ms, atol=1e-3)


# -- hash_ids: equal ids, identical token blocks ----------------------------------------
BS = 16  # a small block size, so hand-checked cases stay short
BLOCKS = b"""{"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [7, 8, 9]}
{"timestamp": 10, "input_length": 32, "output_length": 5, "hash_ids": [7, 8]}
{"timestamp": 20, "input_length": 20, "output_length": 5, "hash_ids": [7, 3]}
{"timestamp": 30, "input_length": 48, "output_length": 5, "hash_ids": [3, 8, 9]}
{"timestamp": 40, "input_length": 5, "output_length": 5, "hash_ids": [8]}
"""


def _tiny_tokenizer():
    from accelbench.engines.tinymodel import tiny_model
    from accelbench.workload.tokenizer import LocalTokenizer

    return LocalTokenizer(str(tiny_model(log=lambda _m: None).hf_dir / "tokenizer.json"))


def test_hash_ids_give_identical_blocks_in_byte_tokens(tmp_path: Path) -> None:
    """The reference server's tokens are bytes: block j of a prompt is bytes [jB, (j+1)B)
    of it, so equal ids must be equal slices and distinct ids distinct ones; a partial
    last block is the start of its id's full text; lengths are exact."""
    t = load_trace(_write(tmp_path, "m.jsonl", BLOCKS), block_size=BS)
    assert t.block_size == BS
    plan = trace_plan(t, ByteTokenizer(), special_tokens=0, seed=3)
    assert [p.blocks for p in plan] == [(7, 8, 9), (7, 8), (7, 3), (3, 8, 9), (8,)]
    assert [p.isl_planned for p in plan] == [40, 32, 20, 48, 5]
    texts: dict[int, set[bytes]] = {}
    full: dict[int, bytes] = {}
    for p in plan:
        assert isinstance(p.prompt, str) and p.blocks is not None
        raw = p.prompt.encode()
        assert len(raw) == p.isl_planned
        for j, bid in enumerate(p.blocks):
            block = raw[j * BS : (j + 1) * BS]
            if len(block) == BS:
                full.setdefault(bid, block)
                assert full[bid] == block  # equal id, identical block
                assert block[:1] == b" "  # each block starts with a space-prefixed word
            texts.setdefault(bid, set()).add(block)
    assert len(set(full.values())) == len(full)  # distinct ids, distinct blocks
    assert full[9][:8] == plan[0].prompt.encode()[32:40]  # partial block 9: its text cut
    assert full[8][:5] == plan[4].prompt.encode()  # a one-block prompt, partial: 5 bytes
    assert full[3][:4] == plan[2].prompt.encode()[16:20]
    # an empty list says nothing of the prefixes: as if absent (distinct prompts)
    empty = load_trace(_write(tmp_path, "e.jsonl", _line(hash_ids=[])), block_size=BS)
    assert empty.entries[0].blocks is None
    assert trace_plan(empty, ByteTokenizer())[0].blocks is None
    # the same seed, the same plan; another seed, other texts
    assert [p.prompt for p in trace_plan(t, ByteTokenizer(), seed=3)] == [p.prompt for p in plan]
    assert trace_plan(t, ByteTokenizer(), seed=4)[0].prompt != plan[0].prompt


def test_hash_ids_with_special_tokens_cut_the_last_block(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path, "m.jsonl", BLOCKS), block_size=BS)
    plan = trace_plan(t, ByteTokenizer(), special_tokens=3, seed=3)
    base = trace_plan(t, ByteTokenizer(), special_tokens=0, seed=3)
    for p, b in zip(plan, base, strict=True):
        assert isinstance(p.prompt, str) and isinstance(b.prompt, str)
        assert len(p.prompt.encode()) + 3 == p.isl_planned == b.isl_planned
        assert b.prompt.startswith(p.prompt)  # the same blocks, the last one shorter


def test_hash_ids_with_a_real_bpe_tokenizer_share_token_prefixes(tmp_path: Path) -> None:
    """With a BPE tokenizer (the tiny model's byte-level BPE) the server's prefix cache
    sees token blocks: prompts that share their first j ids must share their first j*B
    token ids exactly, and the recorded length is the real count."""
    tok = _tiny_tokenizer()
    bs = 32
    lines = [
        {"timestamp": 0, "input_length": 100, "output_length": 3, "hash_ids": [1, 2, 3, 4]},
        {"timestamp": 1, "input_length": 90, "output_length": 3, "hash_ids": [1, 2, 5]},
        {"timestamp": 2, "input_length": 128, "output_length": 3, "hash_ids": [1, 2, 3, 6]},
        {"timestamp": 3, "input_length": 70, "output_length": 3, "hash_ids": [9, 2, 3]},
    ]
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    plan = trace_plan(load_trace(_write(tmp_path, "m.jsonl", data), block_size=bs), tok, seed=1)
    ids = [tok.encode(p.prompt) for p in plan]  # type: ignore[arg-type]
    assert [len(x) for x in ids] == [p.isl_planned for p in plan] == [100, 90, 128, 70]
    assert ids[0][: 3 * bs] == ids[2][: 3 * bs] and ids[0][3 * bs] != ids[2][3 * bs]
    assert ids[0][: 2 * bs] == ids[1][: 2 * bs] and ids[0][2 * bs :][:bs] != ids[1][2 * bs :][:bs]
    assert ids[3][:bs] != ids[0][:bs]  # another first id: no shared tokens at the start
    assert ids[3][bs : 2 * bs] == ids[0][bs : 2 * bs]  # same text, though not a prefix


def test_block_texts_short_blocks_and_tags() -> None:
    from accelbench.workload.traces import BlockTexts

    bt = BlockTexts(ByteTokenizer(), 0, 4)  # shorter than a tag: the tag is cut
    text, n = bt.text(5)
    assert n == 4 and len(text.encode()) == 4 and text.startswith(" ")
    assert BlockTexts.tag(0) == " the the the"
    assert BlockTexts.tag(149) == " the of the"  # base 149, least significant first
    assert len({BlockTexts.tag(i) for i in range(5000)}) == 5000


# -- sessions ---------------------------------------------------------------------------
SESSIONS = b"""{"session_id": "b", "timestamp": 2000, "input_length": 10, "output_length": 2}
{"session_id": 7, "timestamp": 1000, "input_length": 11, "output_length": 2}
{"timestamp": 1500, "input_length": 12, "output_length": 2}
{"session_id": "b", "delay": 250, "input_length": 13, "output_length": 2}
{"session_id": "7", "delay": 0, "timestamp": 5000, "input_length": 14, "output_length": 2}
{"session_id": "b", "input_length": 15, "output_length": 2}
{"session_id": 7, "delay": 1500.5, "input_length": 16, "output_length": 2}
"""


def test_sessions_keep_turn_order_and_think_times(tmp_path: Path) -> None:
    """Hand-checked: sessions by their first arrival (7 at 1.0 s, the lone request at
    1.5 s, b at 2.0 s), each session's turns together in file order; 7 and "7" are one
    session; think = delay / 1000; a later turn's offset is its own time, else None."""
    t = load_trace(_write(tmp_path, "s.jsonl", SESSIONS))
    assert t.format == "mooncake" and t.sessions == 2
    got = [(e.isl, e.session, e.turn, e.think_s, e.offset_s) for e in t.entries]
    assert got == [
        (11, 0, 0, 0.0, 0.0),
        (14, 0, 1, 0.0, 4.0),
        (16, 0, 2, 1.5005, None),
        (12, None, 0, 0.0, 0.5),
        (10, 1, 0, 0.0, 1.0),
        (13, 1, 1, 0.25, None),
        (15, 1, 2, 0.0, None),
    ]
    assert t.duration_s == 4.0
    plan = trace_plan(t, ByteTokenizer())
    assert [(p.session, p.turn, p.think_s, p.offset_s) for p in plan] == [g[1:] for g in got]
    assert [p.isl_planned for p in plan] == [g[0] for g in got]
    assert len(load_trace(tmp_path / "s.jsonl", limit=4).entries) == 4


def test_explicit_turn_numbers_order_a_session(tmp_path: Path) -> None:
    data = b"""{"session_id": 1, "turn": 1, "delay": 5, "input_length": 2, "output_length": 1}
{"session_id": 1, "turn": 0, "timestamp": 0, "input_length": 1, "output_length": 1}
{"session_id": 1, "turn": 2, "input_length": 3, "output_length": 1}
"""
    t = load_trace(_write(tmp_path, "s.jsonl", data))
    assert [(e.isl, e.turn, e.think_s) for e in t.entries] == [
        (1, 0, 0.0),
        (2, 1, 0.005),
        (3, 2, 0.0),
    ]


def test_own_format_sessions(tmp_path: Path) -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 3}
    rows = [
        trace_header(),
        {**trace_row(0, 0.5, "completions", body), "session_id": "s"},
        {"idx": 1, "endpoint": "completions", "body": body, "session_id": "s", "delay": 100},
        trace_row(2, 0.0, "completions", body),
    ]
    t = load_trace(_write(tmp_path, "trace.jsonl", b"".join(orjson.dumps(r) + b"\n" for r in rows)))
    assert [(e.offset_s, e.session, e.turn, e.think_s) for e in t.entries] == [
        (0.0, None, 0, 0.0),
        (0.5, 0, 0, 0.0),
        (None, 0, 1, 0.1),
    ]


def _line(**kw: object) -> bytes:
    """A Mooncake line (timestamp 0, 20 tokens in, 2 out); ``...`` leaves a field out."""
    base: dict[str, object] = {"timestamp": 0, "input_length": 20, "output_length": 2}
    base.update(kw)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...}) + b"\n"


@pytest.mark.parametrize(
    "data, where, match",
    [
        (_line(hash_ids=[0, -1]), 1, "hash_ids must be a list of non-negative integers"),
        (_line(hash_ids=[0, 1.5]), 1, "hash_ids must be a list of non-negative integers"),
        (_line(hash_ids=[True, 1]), 1, "hash_ids must be a list of non-negative integers"),
        (_line(hash_ids="0,1"), 1, "hash_ids must be a list of non-negative integers"),
        (_line(hash_ids=[1 << 63]), 1, "hash_ids must be a list"),
        (_line(hash_ids=[0, 1, 2]), 1, "hash_ids has 3 ids, but input_length 20 .* needs 2"),
        (_line(hash_ids=[0]), 1, "hash_ids has 1 ids"),
        (_line(session_id="a") + _line(session_id="a", delay=-1, timestamp=...), 2, "delay"),
        (_line(session_id="a") + _line(session_id="a", delay=4e13, timestamp=...), 2, "delay"),
        (_line(session_id="a", delay=5), 1, "delay on the first turn"),
        (_line(delay=5), 1, "delay is given but session_id is not"),
        (_line(turn=0), 1, "turn is given but session_id is not"),
        (_line(session_id="a", timestamp=...), 1, "timestamp is missing: the first turn"),
        (_line(session_id=True), 1, "session_id must be"),
        (_line(session_id=1.5), 1, "session_id must be"),
        (_line(session_id=""), 1, "session_id must be"),
        (_line(session_id="a", turn=0) + _line(session_id="a", turn=0), 2, "turn 0 .* repeated"),
        (_line(session_id="a", turn=0) + _line(session_id="a", turn=2), 1, "turn 1 .* missing"),
        (_line(session_id="a", turn=0) + _line(session_id="a"), 2, "turn is missing"),
        (_line(session_id="a", turn=-1), 1, "turn must be in"),
        (_line(session_id="a", timestamp=50) + _line(session_id="a", timestamp=10), 2, "earlier"),
        (_line(timestamp=None), 1, "timestamp must be a non-negative number"),
        (b'{"timestamp": NaN, "input_length": 3, "output_length": 1}\n', 1, "not valid JSON"),
        (
            _line(session_id="a")
            + b'{"session_id": "a", "delay": NaN, "input_length": 3, "output_length": 1}\n',
            2,
            "not valid JSON",
        ),
    ],
)
def test_bad_session_and_block_lines_name_file_line_and_field(
    tmp_path: Path, data: bytes, where: int, match: str
) -> None:
    p = _write(tmp_path, "bad.jsonl", data + _line(timestamp=9))
    with pytest.raises(UsageError, match=match) as exc:
        t = load_trace(p, "mooncake", block_size=BS)
        trace_plan(t, ByteTokenizer())
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{p}:{where}: "), msg


def test_block_size_must_be_positive(tmp_path: Path) -> None:
    p = _write(tmp_path, "m.jsonl", BLOCKS)
    for bad in (0, -3, 1.5, True, float("nan")):
        with pytest.raises(UsageError, match="--block-size must be"):
            load_trace(p, block_size=bad)  # type: ignore[arg-type]
    t = load_trace(p, block_size=BS)
    with pytest.raises(UsageError, match="--block-size must be"):
        trace_plan(t, ByteTokenizer(), block_size=0)
    with pytest.raises(UsageError, match="hash_ids has 3 ids, but input_length 40 in blocks of 8"):
        trace_plan(t, ByteTokenizer(), block_size=8)
    assert len(trace_plan(t, ByteTokenizer(), block_size=BS)) == 5
    with pytest.raises(UsageError, match="block size another"):
        load_trace(p)  # the default 512: 40 tokens need 1 id, not 3
    from accelbench.workload.traces import trace_stats

    assert trace_stats(p, block_size=BS) == (5, 0.04, frozenset(), 0, 5)  # what `run` reads first
    with pytest.raises(UsageError, match="block size another"):
        trace_stats(p)


_FIELD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 4),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.one_of(st.integers(-2, 5), st.floats(allow_nan=False), st.booleans()), max_size=4),
)


@st.composite
def _session_lines(draw: st.DrawFn) -> list[dict]:
    """A valid sessions trace (block size BS), then, half the time, one field of one line
    replaced by any value or removed."""
    lines: list[dict] = []
    turns: dict[object, int] = {}
    numbered = draw(st.booleans())
    for _ in range(draw(st.integers(1, 6))):
        sid = draw(st.sampled_from([None, "a", "b", 1]))
        isl = draw(st.integers(1, 40))
        d: dict = {"input_length": isl, "output_length": draw(st.integers(1, 4))}
        k = turns.get(sid, 0) if sid is not None else 0
        if sid is not None:
            d["session_id"] = sid
            turns[sid] = k + 1
            if numbered:
                d["turn"] = k
        if k == 0 or draw(st.booleans()):
            d["timestamp"] = draw(st.integers(0, 5000))
        if k > 0 and draw(st.booleans()):
            d["delay"] = draw(st.integers(0, 3000) | st.floats(0, 1e4))
        if draw(st.booleans()):
            n = -(-isl // BS)
            d["hash_ids"] = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        lines.append(d)
    if draw(st.booleans()):
        line = draw(st.sampled_from(lines))
        key = draw(st.sampled_from(["session_id", "turn", "delay", "timestamp", "input_length",
                                    "output_length", "hash_ids"]))  # fmt: skip
        value = draw(_FIELD)
        if value is None:
            line.pop(key, None)
        else:
            line[key] = value
    return lines


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_session_lines())
def test_malformed_session_lines_load_whole_or_fail_in_one_line(
    tmp_path: Path, lines: list[dict]
) -> None:
    """Any mix of session, turn, delay, time and hash_ids values: either one UsageError
    line naming the file, or a trace whose sessions are whole (turns 0..n-1, consecutive),
    whose think times and offsets a load worker can use, and whose blocks cover each
    prompt; and then a plan with exactly those lengths."""
    p = tmp_path / "h.jsonl"
    p.write_bytes(
        b"".join(orjson.dumps(x) + b"\n" for x in lines)
        + b'{"timestamp": 0, "input_length": 3, "output_length": 1}\n'
    )
    try:
        t = load_trace(p, "mooncake", block_size=BS)
    except UsageError as exc:
        assert "\n" not in str(exc) and str(p) in str(exc)
        event("refused")
        return
    event(f"loaded, sessions {min(t.sessions, 2)}, blocks {any(e.blocks for e in t.entries)}")
    seen: list[int] = []
    for e in t.entries:
        assert 0 <= e.think_s <= 30 * 86400 and e.think_s == e.think_s
        if e.session is None:
            assert e.turn == 0 and e.offset_s is not None
            continue
        if e.turn == 0:
            assert e.session == len(seen) and e.offset_s is not None and e.think_s == 0
            seen.append(e.session)
        else:
            assert seen and seen[-1] == e.session  # consecutive turns
        assert e.offset_s is None or 0 <= e.offset_s <= 30 * 86400
        if e.blocks is not None:
            assert e.isl is not None and len(e.blocks) == -(-e.isl // BS)
    plan = trace_plan(t, ByteTokenizer())
    for pr, e in zip(plan, t.entries, strict=True):
        assert isinstance(pr.prompt, str) and len(pr.prompt.encode()) == e.isl == pr.isl_planned
        assert (pr.session, pr.turn, pr.think_s, pr.blocks) == (
            e.session,
            e.turn,
            e.think_s,
            e.blocks,
        )


# -- ShareGPT conversations ---------------------------------------------------------------
def test_load_conversations_keeps_turns() -> None:
    from accelbench.workload.datasets import load_conversations

    path = str(Path(__file__).parent / "fixtures" / "sharegpt" / "conversations.json")
    convs = load_conversations(path)
    assert [c.id for c in convs] == ["multi_0", "aliases_1", "junk_3"]  # no turn: left out
    multi, aliases, junk = convs
    assert multi.system == "You are a terse assistant."
    assert multi.turns == [("What is a KV cache?", None), ("Why does it fill up?", 12)]
    assert multi.replies == [
        "Keys and values of earlier tokens, kept so they are not recomputed.",
        "It grows by one entry per token per layer.",
    ]  # "Thanks." got no reply: left out
    assert aliases.turns == [("First part.\n\nSecond part.", None)] and aliases.system is None
    assert aliases.replies == ["Both parts read."]
    assert junk.turns == [("Is 2 + 2 four?", None)]
    counted = load_conversations(path, ByteTokenizer())
    assert [n for _, n in counted[0].turns] == [len(multi.replies[0]), 12]  # recorded wins
    assert counted[2].turns == [("Is 2 + 2 four?", 4)]


def test_load_conversations_bad_files(tmp_path: Path) -> None:
    from accelbench.workload.datasets import load_conversations

    cases = [
        (b'[{"conversations": "x"}]', "`conversations` must be a list"),
        (b'[{"conversations": [{"from": "gpt", "value": "only a reply"}]}]', "no conversation"),
        (
            b'[{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a", '
            b'"output_tokens": 0}]}]',
            r"`output_tokens` must be in \[1, 1048576\] \(got 0\)",
        ),  # fmt: skip
        (b"[1]", "must be a JSON object"),
        (b"", "is empty"),
    ]
    for data, match in cases:
        with pytest.raises(AccelbenchError, match=match) as exc:
            load_conversations(str(_write(tmp_path, "c.json", data)))
        assert "\n" not in str(exc.value)


def test_shadow_replay_sends_a_sessions_turns_after_each_answer(reference_server, tmp_path):
    """`shadow replay` of a trace with a session: on each side, turn k goes think_s after
    turn k-1's answer ended there (and not before its own time when it has one); a lone
    request keeps its own time."""
    from accelbench.runner.config import BenchmarkConfig
    from accelbench.suites.shadow.replay import ReplayOptions, replay
    from accelbench.workload.config import WorkloadConfig

    ref = reference_server("--ttft-ms", "40", "--itl-ms", "20")
    data = (
        _line(session_id="s", input_length=30, output_length=4, hash_ids=[1, 2])
        + _line(timestamp=50, input_length=8, output_length=1)
        + _line(session_id="s", timestamp=..., delay=100, input_length=40, output_length=2,
                hash_ids=[1, 2, 3])
        + _line(session_id="s", timestamp=150, delay=10, input_length=50, output_length=2,
                hash_ids=[1, 2, 4, 5])
    )  # fmt: skip
    p = _write(tmp_path, "s.jsonl", data)
    cfg = BenchmarkConfig(workload=WorkloadConfig(trace=str(p)), telemetry=False)
    d, status = replay(cfg, ReplayOptions(ref.url, ref.url, str(tmp_path / "r"), block_size=BS))
    assert status == "completed"
    # the prompts as sent, planned with the server's own /tokenize (its tokens are bytes)
    sent = [orjson.loads(x) for x in (d / "trace.jsonl").read_bytes().splitlines()[1:]]
    prompts = [x["body"]["prompt"].encode() for x in sorted(sent, key=lambda x: x["idx"])]
    assert [len(x) for x in prompts] == [30, 40, 50, 8]
    assert prompts[1][:32] == prompts[2][:32]  # ids 1, 2: 2 x 16 bytes
    assert prompts[0] == prompts[1][:30]  # id 2 partial in turn 0: its text cut
    assert prompts[1][32:40] != prompts[2][32:40]  # ids 3 and 4
    for side in ("baseline", "candidate"):
        rows = {
            r["idx"]: r for r in map(orjson.loads, (d / f"{side}.jsonl").read_bytes().splitlines())
        }
        assert sorted(rows) == [0, 1, 2, 3] and all(r["ok"] for r in rows.values())
        assert [rows[i]["isl"] for i in range(4)] == [30, 40, 50, 8]  # plan: session first
        t0 = rows[0]["t_sched"]
        # turn 1: 100 ms after turn 0's answer (which took >= 40 + 3 x 20 ms)
        assert rows[1]["t_sched"] - rows[0]["t_done"] == pytest.approx(100e6, abs=15e6)
        # turn 2: 10 ms after turn 1's answer, which ends after 150 ms anyway
        assert rows[2]["t_sched"] - rows[1]["t_done"] == pytest.approx(10e6, abs=15e6)
        assert rows[2]["t_sched"] - t0 >= 150e6
        assert rows[3]["t_sched"] - t0 == pytest.approx(50e6, abs=1e3)  # the lone request


def test_sharegpt_records_left_out_are_in_the_trace_notes(tmp_path: Path) -> None:
    """The audit's sharegpt.json: a conversation with no reply was dropped uncounted, and a
    `model` reply was not one; now both loaders agree and the trace says what it left out."""
    conv = [{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},
            {"conversations": [{"from": "human", "value": "c"}]},
            {"conversations": [{"from": "human", "value": "c"}, {"from": "model", "value": "d"}]}]  # fmt: skip
    p = _write(tmp_path, "s.json", orjson.dumps(conv))
    t = load_trace(p, rate=1.0)
    assert len(t.entries) == 2
    assert t.notes == [f"{p}: 2 of 3 records used (1 without a human turn and a reply)"]


@pytest.mark.parametrize(
    "last",
    [b'{"timestamp":2000,"input_length":10,"output_length":5', b'{"timestamp":2000,}\n'],
)
def test_a_bad_last_line_of_a_user_trace_is_refused(tmp_path: Path, last: bytes) -> None:
    """The audit's mc.jsonl / mc2.jsonl: a Mooncake file's bad last line was dropped in
    silence (a tolerance meant for the proxy's own trace); now it is refused as any line."""
    p = _write(tmp_path, "m.jsonl", MOONCAKE + last)
    with pytest.raises(UsageError, match=r"m\.jsonl:4: not valid JSON"):
        load_trace(p)


def test_own_trace_tolerates_only_a_cut_last_line(tmp_path: Path) -> None:
    rows = [trace_header(), trace_row(0, 0.0, "completions", {"prompt": "x", "max_tokens": 2})]
    good = b"".join(orjson.dumps(x) + b"\n" for x in rows)
    assert load_trace(_write(tmp_path, "ok.jsonl", good)).notes == []
    # a damaged last line that ends with its newline was written whole: not a cut
    p = _write(tmp_path, "bad.jsonl", good + b'{"idx": 1,}\n')
    with pytest.raises(UsageError, match=r"bad\.jsonl:3: not valid JSON"):
        load_trace(p)
    # a damaged line before the last: refused as before
    p = _write(tmp_path, "mid.jsonl", good + b'{"idx": 1,\n' + orjson.dumps(rows[1]))
    with pytest.raises(UsageError, match=r"mid\.jsonl:3: not valid JSON"):
        load_trace(p)


@pytest.mark.parametrize(
    "rows, where, n",
    [
        (b"0,100,50,999\n1,100,50\n", 2, 4),  # the audit's az.csv: an extra field
        (b"0,100,50\n1,100\n", 3, 2),
        (b"0,100,50\n\n\n1,100,50,\n", 5, 4),  # line numbers count blank lines
    ],
)
def test_azure_row_with_another_field_count_is_refused(
    tmp_path: Path, rows: bytes, where: int, n: int
) -> None:
    p = _write(tmp_path, "a.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    with pytest.raises(UsageError, match=rf"a\.csv:{where}: {n} fields where the header has 3$"):
        load_trace(p)


def test_two_own_traces_joined_end_to_end_are_refused(tmp_path: Path) -> None:
    """`cat a/trace.jsonl b/trace.jsonl`: b's header mid-file was skipped and its times,
    from 0 again, were replayed among a's; now the header's line is named."""
    rows = [trace_header(), trace_row(0, 0.0, "completions", {"prompt": "x", "max_tokens": 2})]
    one = b"".join(orjson.dumps(x) + b"\n" for x in rows)
    with pytest.raises(UsageError, match=r"joined\.jsonl:3: a second trace header"):
        load_trace(_write(tmp_path, "joined.jsonl", one + one))
    # blank lines before the only header are fine
    assert len(load_trace(_write(tmp_path, "blank.jsonl", b"\n\n" + one)).entries) == 1


# -- a trace's warm-up takes whole sessions ------------------------------------------
@st.composite
def _session_plan(draw: st.DrawFn) -> tuple[list, int]:
    """A trace plan: sessions (runs of turns from 0) and lone requests, and a --warmup
    below its length (what the config check lets through)."""
    from accelbench.workload.requests import PlannedRequest

    plan: list[PlannedRequest] = []
    for s in range(draw(st.integers(1, 6))):
        lone = draw(st.booleans()) and s > 0
        for k in range(1 if lone else draw(st.integers(1, 4))):
            plan.append(PlannedRequest("x", 1, 1, float(s), session=None if lone else s, turn=k))
    if len(plan) == 1:  # --warmup must be below the trace's length
        plan.append(PlannedRequest("x", 1, 1, 9.0, session=None))
    return plan, draw(st.integers(1, len(plan) - 1))


@given(_session_plan())
@settings(max_examples=200, deadline=None)
def test_trace_warmup_of_whole_sessions_is_said_or_refused(case: tuple[list, int]) -> None:
    """Any trace plan and --warmup: the warm-up is whole sessions; when that is more than
    --warmup it is said, and when it leaves nothing to measure the run is refused (it
    had run every request as warm-up and exited 0 with nothing measured)."""
    from accelbench.runner.benchmark import _session_warmup
    from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

    plan, warm = case
    cfg = BenchmarkConfig(warmup_requests=warm, workload=WorkloadConfig(trace="t.jsonl"))
    notes: list[str] = []
    try:
        n_warm, n_measured = _session_warmup(plan, cfg, notes)
    except UsageError as exc:
        event("refused")
        assert "leaves nothing to measure" in str(exc) and "\n" not in str(exc)
        return
    assert n_measured > 0 and n_warm + n_measured == len(plan) and n_warm >= min(warm, 1)
    assert bool(notes) == (n_warm > warm)


def test_trace_warmup_that_takes_every_request_is_refused(reference_server, tmp_path):
    """The audit's case: 5 requests, sessions a (2 turns) and b (2 turns) around a lone
    request; --warmup 4 reaches b's start, so the whole trace was warm-up, exit 0."""
    from tests.cli_inprocess import run_cli

    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    lines = [
        {"session_id": "a", "turn": 0, "timestamp": 0, "input_length": 20, "output_length": 2},
        {"session_id": "a", "turn": 1, "delay": 1, "input_length": 40, "output_length": 2},
        {"timestamp": 2, "input_length": 17, "output_length": 2},
        {"session_id": "b", "timestamp": 5, "input_length": 20, "output_length": 2},
        {"session_id": "b", "input_length": 10, "output_length": 2},
    ]
    (tmp_path / "s.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    base = ["run", "--url", srv.url, "--trace", "s.jsonl", "--no-telemetry", "-q"]
    code, _, err, _ = run_cli([*base, "--warmup", "4", "-o", "all"], tmp_path)
    assert code == 2 and "leaves nothing to measure" in err and not (tmp_path / "all").exists()
    code, _, err, _ = run_cli([*base, "--warmup", "1", "-n", "2", "-o", "some"], tmp_path)
    assert code == 0, err
    summary = orjson.loads((tmp_path / "some" / "summary.json").read_bytes())
    assert summary["counts"]["warmup"] == 2 and summary["counts"]["completed"] == 1
    assert any("takes whole sessions" in w for w in summary["client"]["warnings"])


@st.composite
def _mixed_trace(draw: st.DrawFn) -> list[dict]:
    """Trace lines of lone requests and sessions in any order of arrival (a lone
    request may come first)."""
    lines: list[dict] = []
    for s in range(draw(st.integers(1, 5))):
        t = draw(st.integers(0, 1000))
        if draw(st.booleans()):
            lines.append({"timestamp": t, "input_length": 8, "output_length": 1})
            continue
        for k in range(draw(st.integers(1, 3))):
            line = {"session_id": f"s{s}", "input_length": 8 * (k + 1), "output_length": 1}
            line |= {"timestamp": t} if k == 0 else {"delay": draw(st.integers(0, 500))}
            lines.append(line)
    return lines


@given(_mixed_trace())
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_session_of_a_trace_goes_to_the_session_workers(tmp_path: Path, lines: list) -> None:
    """Whichever request arrives first, a trace's sessions are sent as sessions (each turn
    after the previous reply and its delay). A trace whose first arrival was a lone
    request had its later turns sent as independent requests, at once."""
    from accelbench.runner.benchmark import _worker_specs
    from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
    from accelbench.urls import Endpoint

    p = tmp_path / "mixed.jsonl"
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    plan = trace_plan(load_trace(p), ByteTokenizer())
    cfg = BenchmarkConfig(url=Endpoint.parse("http://127.0.0.1:9"),
                          workload=WorkloadConfig(trace=str(p)))  # fmt: skip
    (spec,) = _worker_specs(cfg, plan, 0, 1, None, "t")
    phases = [ph for ph in spec.phases if ph.name == "measured"]
    sessions = {r.session for r in plan if r.session is not None}
    if not sessions:
        return
    (phase,) = phases
    assert phase.sessions is not None
    for group in phase.sessions:
        turns = [(r.session, r.turn) for _, r in group]
        assert [t for _, t in turns] == list(range(len(turns)))
        assert len({s for s, _ in turns}) == 1
    grouped = {r.session for g in phase.sessions for _, r in g if r.session is not None}
    assert grouped == sessions


def test_a_trace_that_starts_with_a_lone_request_waits_for_each_reply(reference_server, tmp_path):
    """The audit's case: a lone request first, then a session of 3 turns 300 ms apart:
    turns 1 and 2 went out with turn 0, not after its reply and the delay."""
    from tests.cli_inprocess import run_cli

    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    lines = [
        {"timestamp": 0, "input_length": 17, "output_length": 2},
        {"session_id": "a", "timestamp": 5, "input_length": 20, "output_length": 2},
        {"session_id": "a", "delay": 300, "input_length": 40, "output_length": 2},
        {"session_id": "a", "delay": 300, "input_length": 60, "output_length": 2},
    ]
    (tmp_path / "s.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    code, _, err, _ = run_cli(["run", "--url", srv.url, "--trace", "s.jsonl", "--no-telemetry",
                               "-q", "-o", "r"], tmp_path)  # fmt: skip
    assert code == 0, err
    rows = [orjson.loads(x) for x in (tmp_path / "r" / "requests.jsonl").read_bytes().splitlines()]
    turns = sorted((r for r in rows if r["session"] is not None), key=lambda r: r["turn"])
    assert [r["turn"] for r in turns] == [0, 1, 2]
    for a, b in zip(turns, turns[1:], strict=False):
        assert b["t_send"] - a["t_done"] >= 300e6  # ns: the delay after the reply


@settings(max_examples=25, deadline=None)
@given(with_osl=st.lists(st.booleans(), min_size=1, max_size=6), mooncake=st.booleans())
def test_osl_with_a_trace_whose_entries_all_have_theirs_is_refused(
    tmp_path_factory, with_osl: list[bool], mooncake: bool
) -> None:
    """--osl is the output length of a trace's entries without one. A Mooncake trace
    (output_length on every line), or one of accelbench's whose every body has
    max_tokens, gave --osl nothing to change: accepted and ignored. Now refused in one
    line (exit 2) exactly when no entry lacks its own length, before any connection."""
    from tests.cli_inprocess import run_cli

    d = tmp_path_factory.mktemp("osl")
    if mooncake:
        with_osl = [True] * len(with_osl)  # every Mooncake line has output_length
        rows = [
            {"timestamp": i, "input_length": 8, "output_length": 3} for i in range(len(with_osl))
        ]
    else:
        rows = [trace_header()] + [
            trace_row(i, i * 0.01, "completions",
                      {"prompt": "hi", **({"max_tokens": 3} if has else {})})
            for i, has in enumerate(with_osl)
        ]  # fmt: skip
    (d / "t.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in rows))
    code, _, err, _ = run_cli(
        ["run", "--url", "http://127.0.0.1:9", "--trace", "t.jsonl", "--osl", "5",
         "--no-telemetry", "-q", "-o", "r"], d,
    )  # fmt: skip
    refused = "--osl is the output length of a trace's entries without one" in err
    assert refused == all(with_osl), err
    if refused:
        assert code == 2 and err.count("\n") == 1 and not (d / "r").exists(), err
