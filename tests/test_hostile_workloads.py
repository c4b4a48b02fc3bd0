"""Hostile workload inputs, by class (what a user feeds the load: `--dataset`, `--trace`,
`--sessions` and its shapes, sweeps' points): each class ends in one clear line naming
the file:line or the option, exit 2, nothing written; or is honoured. One Hypothesis
property per class, and the concrete example that was found.

The CLI runs in-process (tests/cli_inprocess.py); where a run must start, against the
reference server (conftest's ``reference_server``)."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.runner.config import BenchmarkConfig
from accelbench.workload.config import WorkloadConfig
from cli_inprocess import run_cli
from test_hostile_inputs import CLOSED, assert_clean, invoke

HYP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MAX_REQUESTS = 10_000_000


def run_args(*extra: str) -> list[str]:
    return ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry", *extra]


# -- huge counts: the plan's size bounded before anything is drawn --------------------------
def test_sessions_times_turns_is_bounded_before_the_plan(tmp_path: Path) -> None:
    """`--sessions 10000000 --turns 10000` asked numpy for 745 GiB: MemoryError, exit 70."""
    code, text = invoke(run_args("--sessions", "10000000", "--turns", "10000"), tmp_path)
    assert_clean(code, text, wrong=True, option="--sessions")
    assert code == 2 and "more than 10,000,000" in text, text
    assert not list(tmp_path.iterdir())


@HYP
@given(
    sessions=st.integers(1, MAX_REQUESTS),
    lo=st.integers(1, 10_000),
    hi=st.integers(1, 10_000),
    warmup=st.integers(0, 1000),
)
def test_planned_turns_are_within_the_requests_limit(
    sessions: int, lo: int, hi: int, warmup: int
) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    turns = str(hi) if lo == hi else f"{lo}:{hi}"
    wl = WorkloadConfig(sessions=sessions, turns=turns)
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", workload=wl, warmup_requests=warmup)
    if (sessions + warmup) * hi > MAX_REQUESTS:
        with pytest.raises(UsageError, match=r"^--sessions .* more than 10,000,000"):
            cfg.validate()
    else:
        cfg.validate()


# -- a sweep point whose run ran another load: the run's own value, said ---------------------
def _sweep_with_runs(d: Path, kind: str, pairs: list[tuple[float, float]]) -> None:
    """A sweep directory whose point i says ``pairs[i][0]`` and whose run ran
    ``pairs[i][1]`` (concurrency or rate, as ``kind``)."""
    import json

    from accelbench.store.sweepdoc import SweepDoc, SweepPoint, write_sweep
    from synthetic_runs import make_run

    points = []
    for i, (said, ran) in enumerate(pairs):
        name = f"p{i:03d}"
        load = {"concurrency": int(ran)} if kind == "concurrency" else {"rate": ran}
        make_run(d / name, n=8, seed=i, **load)  # type: ignore[arg-type]
        points.append(SweepPoint(said, name, "completed"))
    d.mkdir(parents=True, exist_ok=True)
    write_sweep(d, SweepDoc(kind, [p.value for p in points], {}, points, "completed"))
    json.loads((d / "sweep.json").read_text())  # a valid document


def test_a_replaced_point_run_is_placed_at_its_own_load(tmp_path: Path) -> None:
    """Point 2's run was replaced by a run at concurrency 8: frontier, compare, cost and
    report placed it at 8 (the run's own) and nothing said sweep.json says 2."""
    import json

    _sweep_with_runs(tmp_path / "sw", "concurrency", [(1, 1), (2, 8), (4, 4)])
    line = (
        "point 2: run directory p001 ran at c=8 (its run.json, summary.json), not "
        "sweep.json's concurrency 2: c=8 used"
    )
    code, out, err, _ = run_cli(["frontier", "sw", "--json"], tmp_path)
    (entry,) = json.loads(out)
    assert code == 0 and entry["warnings"] == [line], entry["warnings"]
    labels = [p["label"] for p in entry["frontiers"]["output_tps_per_gpu"]["points"]]
    assert "c=8" in labels and "c=2" not in labels, labels
    code, out, err, _ = run_cli(["compare", "sw", "sw", "--json"], tmp_path)
    assert code == 0 and line in " ".join(err.split()), err
    code, out, err, _ = run_cli(["cost", "h100:sw", "-i", "50", "--json"], tmp_path)
    assert code == 0 and line in json.loads(out)["results"][0]["warnings"], out
    code, out, err, _ = run_cli(["report", "sw", "-o", "r.html"], tmp_path)
    page = (tmp_path / "r.html").read_text()
    assert code == 0 and html.escape(line) in page, out + err


@settings(HYP, max_examples=12)
@given(
    kind=st.sampled_from(["concurrency", "rate"]),
    pairs=st.lists(
        st.tuples(st.integers(1, 64), st.integers(1, 64)),
        min_size=1,
        max_size=4,
        unique_by=lambda p: p[0],
    ),  # fmt: skip
)
def test_every_point_is_read_at_its_run_s_own_load(
    tmp_path_factory: pytest.TempPathFactory, kind: str, pairs: list[tuple[int, int]]
) -> None:
    """load_sweep (frontier, compare, cost, report): each run at the load it ran, and one
    line for each point whose run ran another, naming the point and the load used."""
    from accelbench.store.sets import load_sweep

    d = tmp_path_factory.mktemp("sw")
    loads = [(float(a) / 4, float(b) / 4) if kind == "rate" else (a, b) for a, b in pairs]
    _sweep_with_runs(d, kind, loads)
    s = load_sweep(d)
    assert sorted(r.load for r in s.runs) == sorted(ran for _, ran in loads)
    noun = "rate" if kind == "rate" else "concurrency"
    said = [p for p in s.problems if "not sweep.json's" in p]
    want = [
        f"point {a:g}: run directory p{i:03d} ran at "
        f"{f'rate {b:g}/s' if kind == 'rate' else f'c={b}'} (its run.json, summary.json), "
        f"not sweep.json's {noun} {a:g}: "
        f"{f'rate {b:g}/s' if kind == 'rate' else f'c={b}'} used"
        for i, (a, b) in enumerate(loads)
        if a != b
    ]
    assert said == want, (said, want)


# -- wrong types in a chat data set's messages ----------------------------------------------
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6,
)
text_part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=6)})
good_content = st.text(max_size=8) | st.lists(text_part, max_size=3)


def _text_content(c: object) -> bool:
    return isinstance(c, str) or (
        isinstance(c, list)
        and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in c
        )
    )


@HYP
@given(
    msgs=st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "system", "assistant"]) | any_json,
                "content": good_content | any_json,
            }  # fmt: skip
        ),
        min_size=1,
        max_size=4,
    )
)
def test_chat_messages_are_text_or_refused(tmp_path: Path, msgs: list[dict]) -> None:
    """A chat record's role must be a non-empty string and its content text (a string or
    OpenAI's text parts): `content: 5` was sent as the text "5", null as "None", a part
    list as its Python repr. Anything else: FILE:LINE naming messages[i], nothing sent."""
    import json

    from accelbench.errors import AccelbenchError
    from accelbench.workload.datasets import load_dataset

    p = tmp_path / "chat.jsonl"
    p.write_text(json.dumps({"messages": msgs, "max_tokens": 4}) + "\n")
    bad = next(
        (
            i
            for i, m in enumerate(msgs)
            if not (isinstance(m["role"], str) and m["role"].strip())
            or not _text_content(m["content"])
        ),
        None,
    )
    if bad is None:
        (item,) = load_dataset(str(p))
        assert item.prompt == msgs
    else:
        with pytest.raises(AccelbenchError, match=rf"chat.jsonl:1: messages\[{bad}\]\.") as e:
            load_dataset(str(p))
        assert "\n" not in str(e.value)


def test_flatten_chat_joins_text_parts() -> None:
    """On completions a chat record is one prompt: its text parts' texts, not their repr."""
    from accelbench.client.openai import flatten_chat

    parts = [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]
    assert flatten_chat([{"role": "user", "content": parts}]) == "hello"


def test_a_number_as_chat_content_is_refused_before_the_run(
    tmp_path: Path, reference_server: Callable[..., Any]
) -> None:
    srv = reference_server("--max-throughput")
    (tmp_path / "chat.jsonl").write_text(
        '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}\n'
        '{"messages": [{"role": "user", "content": 5}], "max_tokens": 3}\n'
    )
    args = ["run", "--url", srv.url, "--results-root", "res", "-q", "--no-telemetry"]
    code, text = invoke([*args, "--dataset", "chat.jsonl", "-n", "2"], tmp_path)
    assert_clean(code, text, wrong=True, option="chat.jsonl:2")
    assert code == 2 and "messages[0].content must be a string" in text, text
    assert not (tmp_path / "res").exists()
    assert srv.truth() == []  # nothing sent


# -- a file past the requests' limit: refused where the reading gets there -----------------
@HYP
@given(
    limit=st.integers(1, 12),
    extra=st.integers(0, 12),
    blank=st.integers(0, 3),
    fmt=st.sampled_from(["mooncake", "azure", "prompts", "sharegpt-trace"]),
)
def test_a_file_past_the_limit_is_refused_before_it_is_read_whole(
    tmp_path: Path, limit: int, extra: int, blank: int, fmt: str
) -> None:
    """The limit checked at the line that passes it, not after every line is parsed and
    held (a 20M-line trace was read whole, then refused; a data set of any size was read
    whole): the lines after it are not even JSON here, and the error is the limit's."""
    from unittest import mock

    from accelbench.errors import AccelbenchError
    from accelbench.workload import datasets, traces

    n = limit + 1 + extra  # past the limit (a trace's own header aside)
    if fmt == "azure":
        head, row = "TIMESTAMP,ContextTokens,GeneratedTokens\n", "{i},9,5\n"
    elif fmt == "mooncake":
        head, row = "", '{{"timestamp":{i},"input_length":9,"output_length":5}}\n'
    else:
        head = ""
        row = (
            '{{"prompt":"p{i}","output_tokens":3}}\n'
            if fmt == "prompts"
            else '{{"conversations":[{{"from":"human","value":"h{i}"}},'
            '{{"from":"gpt","value":"g"}}]}}\n'
        )
    body = "".join(row.format(i=i) + "\n" * blank for i in range(n + 1))
    (tmp_path / "f").write_text(head + body + "this line is no JSON\n")
    with (
        mock.patch.object(traces, "MAX_TRACE_REQUESTS", limit),
        mock.patch.object(datasets, "MAX_RECORDS", limit),
        pytest.raises(AccelbenchError, match=rf"more than {limit:,} (requests|records)") as e,
    ):
        if fmt in ("mooncake", "azure"):
            traces.load_trace(tmp_path / "f")
        elif fmt == "prompts":
            datasets.load_dataset(str(tmp_path / "f"))
        else:
            traces.load_trace(tmp_path / "f", "sharegpt", rate=1.0)
    assert "\n" not in str(e.value)


# -- encodings: a UTF-8 byte-order mark honoured, UTF-16 / UTF-32 named ----------------------
@HYP
@given(
    kind=st.sampled_from(["trace", "dataset"]),
    lengths=st.lists(st.tuples(st.integers(1, 99), st.integers(1, 99)), min_size=1, max_size=5),
    crlf=st.booleans(),
    encoding=st.sampled_from(
        ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"]
    ),
)
def test_a_file_s_encoding_is_honoured_or_named(
    tmp_path: Path, kind: str, lengths: list[tuple[int, int]], crlf: bool, encoding: str
) -> None:
    """A BOM (Notepad's UTF-8) made a trace "cannot tell the trace format" and a data set
    "not valid JSON" on line 1: now read as without it, CRLF line ends too. UTF-16 or
    UTF-32 text (PowerShell's `>` writes UTF-16) is one line naming the file and the
    encoding, not "cannot tell the format" or "not valid UTF-8"."""
    from accelbench.errors import UsageError
    from accelbench.workload.datasets import load_dataset
    from accelbench.workload.traces import load_trace

    if kind == "trace":
        rows = [f'{{"timestamp":{i},"input_length":{a},"output_length":{b}}}'
                for i, (a, b) in enumerate(lengths)]  # fmt: skip
    else:
        rows = [f'{{"prompt":"p{a}","output_tokens":{b}}}' for a, b in lengths]
    text = ("\r\n" if crlf else "\n").join(rows) + "\n"
    (tmp_path / "plain").write_text("\n".join(rows) + "\n")
    (tmp_path / "f").write_bytes(text.encode(encoding))

    def read(name: str) -> object:
        if kind == "trace":
            return [(e.offset_s, e.isl, e.osl) for e in load_trace(tmp_path / name).entries]
        return [(i.prompt, i.output_tokens) for i in load_dataset(str(tmp_path / name))]

    if encoding.startswith("utf-8"):
        assert read("f") == read("plain")
    else:
        with pytest.raises(UsageError, match=r"f is UTF-(16|32) text .*: save it as UTF-8$"):
            read("f")


def test_a_utf16_trace_is_named_and_a_bom_honoured(tmp_path: Path) -> None:
    row = '{"timestamp":0,"input_length":9,"output_length":5}\n'
    (tmp_path / "w.jsonl").write_bytes(row.encode("utf-16"))
    code, text = invoke(run_args("--trace", "w.jsonl"), tmp_path)
    assert_clean(code, text, wrong=True, option="w.jsonl")
    assert code == 2 and "is UTF-16 text" in text and not (tmp_path / "res").exists(), text
    (tmp_path / "b.jsonl").write_bytes(row.encode("utf-8-sig"))
    code, text = invoke(run_args("--trace", "b.jsonl"), tmp_path)
    assert code == 2 and text.startswith("error: cannot reach"), text  # the trace was read


# -- an option the workload ignores: refused, never recorded as used --------------------------
@HYP
@given(
    recorded=st.lists(st.booleans(), min_size=1, max_size=6),
    fmt=st.sampled_from(["prompts", "chat", "sharegpt", "sharegpt sessions"]),
    osl=st.none() | st.integers(1, 4096),
)
def test_osl_with_a_data_set_whose_entries_all_have_lengths(
    tmp_path: Path, recorded: list[bool], fmt: str, osl: int | None
) -> None:
    """`run --dataset FILE --osl N` where every entry records its output length: --osl
    changed no request but was recorded in run.json as the run's output length (a trace
    refused it already). Refused in one line; honoured where some entry has none."""
    import json

    rows = []
    for i, has in enumerate(recorded):
        n = {"output_tokens": 3 + i} if has else {}
        if fmt == "prompts":
            rows.append({"prompt": f"p{i}", **n})
        elif fmt == "chat":
            rows.append({"messages": [{"role": "user", "content": f"m{i}"}], **n})
        else:
            rows.append({"conversations": [{"from": "human", "value": f"h{i}"},
                                           {"from": "gpt", "value": "g", **n}]})  # fmt: skip
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sessions = 1 if fmt == "sharegpt sessions" else None
    wl = WorkloadConfig(dataset=str(tmp_path / "d.jsonl"), sessions=sessions)
    given: frozenset[str] = frozenset()
    if osl is not None:
        wl.osl, given = osl, frozenset({"--osl"})
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", workload=wl, given=given)
    cfg.validate()
    if osl is not None and all(recorded):
        with pytest.raises(UsageError, match=r"^--osl is the output length of a data set's"):
            cfg.check_run_options()
    else:
        cfg.check_run_options()


def test_osl_with_a_data_set_of_lengths_is_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "output_tokens": 3}\n')
    code, text = invoke(run_args("--dataset", "d.jsonl", "--osl", "64", "-n", "2"), tmp_path)
    assert_clean(code, text, wrong=True, option="--osl")
    assert code == 2 and "every entry of d.jsonl has its own" in text, text
    assert not (tmp_path / "res").exists()


# -- hash_ids: a trace's ids bounded where they are read, an agent trace's before it is drawn
@HYP
@given(
    sessions=st.integers(1, 6),
    turns=st.integers(1, 12),
    system=st.integers(0, 300),
    user=st.integers(1, 200),
    tool=st.integers(1, 200),
    osl=st.integers(1, 200),
    spread=st.sampled_from([0.0, 0.3, 0.5, 0.9]),
    block=st.integers(1, 64),
    limit=st.integers(10, 3000),
)
def test_hash_ids_are_bounded_before_they_are_written(
    tmp_path: Path,
    sessions: int,
    turns: int,
    system: int,
    user: int,
    tool: int,
    osl: int,
    spread: float,
    block: int,
    limit: int,
) -> None:
    """Every turn of an agent trace lists its whole context's blocks, so the ids grow with
    the turns squared: `trace agent --turns 1000 --tool-tokens 500 --osl 500 --block-size
    1` would have written 5e8 ids (200 turns wrote 122 MB in 2 s). The generator refuses
    what could pass the ids' limit before drawing; what it accepts, the reader reads."""
    import tempfile
    from unittest import mock

    from accelbench.workload import agenttrace, traces

    out = Path(tempfile.mkdtemp(dir=tmp_path)) / "a.jsonl"  # one per example
    spec = agenttrace.AgentTraceSpec(
        sessions=sessions, turns=turns, system_tokens=system, user_tokens=user,
        tool_tokens=tool, osl=osl, spread=spread, block_size=block, seed=1,
        tool_ms=5.0 if turns > 1 else 0.0,
    )  # fmt: skip
    with (
        mock.patch.object(agenttrace, "MAX_TRACE_BLOCK_IDS", limit),
        mock.patch.object(traces, "MAX_TRACE_BLOCK_IDS", limit),
    ):
        try:
            agenttrace.write_agent_trace(spec, out)
        except UsageError as exc:
            assert str(exc).startswith("the trace's hash_ids can reach"), exc
            assert not out.exists()
            return
        trace = traces.load_trace(out, block_size=block)
    assert sum(len(e.blocks or ()) for e in trace.entries) <= limit


@HYP
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=12), limit=st.integers(1, 200))
def test_a_trace_s_hash_ids_are_refused_at_the_line_past_the_limit(
    tmp_path: Path, counts: list[int], limit: int
) -> None:
    import json
    from unittest import mock

    from accelbench.workload import traces

    rows = [
        {
            "timestamp": i,
            "input_length": max(n, 1),
            "output_length": 1,
            "hash_ids": list(range(n)),
        }  # fmt: skip
        for i, n in enumerate(counts)
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    totals = [sum(counts[: i + 1]) for i in range(len(counts))]
    past = next((i for i, t in enumerate(totals) if t > limit), None)
    with mock.patch.object(traces, "MAX_TRACE_BLOCK_IDS", limit):
        if past is None:
            traces.load_trace(tmp_path / "t.jsonl", block_size=1)
        else:
            with pytest.raises(UsageError, match=rf"t.jsonl:{past + 1}: the trace's hash_ids pass"):
                traces.load_trace(tmp_path / "t.jsonl", block_size=1)


def test_an_agent_trace_of_quadratic_ids_is_refused_at_once(tmp_path: Path) -> None:
    args = ["trace", "agent", "--sessions", "1", "--turns", "1000", "--system-tokens", "1",
            "--user-tokens", "1", "--tool-tokens", "500", "--osl", "500", "--block-size", "1",
            "--spread", "0", "-o", "a.jsonl"]  # fmt: skip
    code, text = invoke(args, tmp_path)
    assert_clean(code, text, wrong=True, option="--block-size")
    assert code == 2 and "more than 100,000,000" in text and not list(tmp_path.iterdir())
