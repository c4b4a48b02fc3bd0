"""Trace formats (workload/traces.py): detection by content, parsing with hand-checked
offsets, the plan with exact synthetic lengths, and hostile input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
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
MOONCAKE = b"""{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1]}
{"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 42]}
{"timestamp": 1500, "input_length": 10, "output_length": 1, "hash_ids": []}
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
    t = load_trace(d)  # a shadow directory; the torn last line is skipped
    assert t.format == "accelbench"
    assert [e.offset_s for e in t.entries] == [0.0, 0.25]
    assert t.entries[1].body == body and t.entries[1].endpoint == "chat" and t.entries[1].osl == 7
    plan = trace_plan(t, None)  # recorded bodies need no tokenizer
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
