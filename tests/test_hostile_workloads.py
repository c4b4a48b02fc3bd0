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
from hypothesis import HealthCheck, example, given, settings
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
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
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


# -- malformed trace files: every damage is one line naming the file, nothing written ------
_GOOD_TRACE = [
    '{"timestamp":0,"input_length":9,"output_length":5,"session_id":"a","turn":0,"hash_ids":[1]}',
    '{"timestamp":4,"input_length":9,"output_length":5}',
    '{"input_length":12,"output_length":5,"session_id":"a","turn":1,"delay":3,"hash_ids":[1]}',
]
_FIELDS = ["timestamp", "input_length", "output_length", "session_id", "turn", "delay", "hash_ids"]
_WRONG = ['"7"', "true", "false", "null", "NaN", "1e400", "-0.0", "-1", "1e308",
          str(2**63), "[]", "{}", '[[[[1]]]]', '"\\u0000"', "0.5", "[-1]", "[true]"]  # fmt: skip


_GOOD_DATASET = [
    '{"prompt":"hello","output_tokens":3}',
    '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}',
    '{"prompt":"again","max_tokens":5}',
]
_DATASET_FIELDS = ["prompt", "output_tokens", "max_tokens", "messages"]


@st.composite
def damaged_files(draw: st.DrawFn, good: list[str], fields: list[str]) -> bytes:
    """``good``'s lines with one damage drawn (a field of a wrong type draws from
    ``fields``)."""
    lines = list(good)
    _FIELDS = fields  # noqa: N806 (the drawn field names)
    how = draw(st.sampled_from(
        ["truncate", "nul", "bad utf-8", "bom inside", "crlf", "twice", "wrong type", "nested",
         "blank", "not an object", "utf-16", "huge line"]))  # fmt: skip
    i = draw(st.integers(0, len(lines) - 1))
    if how == "wrong type":
        field, value = draw(st.sampled_from(_FIELDS)), draw(st.sampled_from(_WRONG))
        lines[i] = (
            lines[i][:-1] + f',"{field}":{value}}}'
            if f'"{field}"' not in lines[i]
            else (lines[i].replace(f'"{field}":', f'"{field}":{value},"x_{field}":', 1))
        )
    elif how == "twice":
        field = draw(st.sampled_from(_FIELDS[:2]))
        lines[i] = lines[i][:-1] + f',"{field}":1}}'
    elif how == "nested":
        lines[i] = "[" * 100_000 + "]" * 100_000
    elif how == "not an object":
        lines[i] = draw(st.sampled_from(["1", '"x"', "null", "[]", "true"]))
    elif how == "blank":
        lines = ["", "  ", "\t"]
    elif how == "huge line":
        lines[i] = lines[i][:-1] + ',"pad":"' + "x" * 5_000_000 + '"}'
    text = ("\r\n" if how == "crlf" else "\n").join(lines) + "\n"
    raw = text.encode("utf-16" if how == "utf-16" else "utf-8")
    at = draw(st.integers(0, len(raw)))
    if how == "truncate":
        raw = raw[:at]
    elif how == "nul":
        raw = raw[:at] + b"\x00" + raw[at:]
    elif how == "bad utf-8":
        raw = raw[:at] + b"\xff\xfe\xc3" + raw[at:]
    elif how == "bom inside":
        raw = raw[:at] + b"\xef\xbb\xbf" + raw[at:]
    return raw


@settings(HYP, max_examples=80)
@given(raw=damaged_files(_GOOD_TRACE, _FIELDS))
def test_a_damaged_trace_is_one_line(tmp_path: Path, raw: bytes) -> None:
    """Whatever the damage (a line cut, a NUL, bytes that are not UTF-8, a BOM, CRLF, a key
    twice, a field of the wrong type or past its range, nesting deeper than the parser
    goes, only blank lines, UTF-16, a 5 MB line), `run --trace` ends in one error line,
    exit 2, with nothing written: a trace it can read gets as far as the server (closed)."""
    import tempfile

    d = Path(tempfile.mkdtemp(dir=tmp_path))
    (d / "t.jsonl").write_bytes(raw)
    code, text = invoke(run_args("--trace", "t.jsonl"), d)
    assert_clean(code, text, wrong=True)
    assert code == 2, text
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and len(text.strip().splitlines()) == 1, text[:2000]
    if not errors[0].startswith("error: cannot reach"):
        assert "t.jsonl" in errors[0], errors[0]
    assert sorted(p.name for p in d.iterdir()) == ["t.jsonl"]


# -- something other than a file given as the file ------------------------------------------
@settings(HYP, max_examples=40)
@given(
    option=st.sampled_from(["--trace", "--dataset"]),
    kind=st.sampled_from(
        [
            "directory",
            "fifo",
            "/dev/zero",
            "loop",
            "dangling",
            "under a file",
            "missing",
            "link to a fifo",
            "link to a good file",
        ]
    ),  # fmt: skip
)
def test_a_path_that_is_no_file(tmp_path: Path, option: str, kind: str) -> None:
    """A directory, FIFO, device or symbolic-link loop as the file is one line naming the
    option and what the path is (a loop, or a link to nothing, said "does not exist" of a
    name that is there); a FIFO never blocks; a link to a good file is read."""
    import os
    import tempfile

    d = Path(tempfile.mkdtemp(dir=tmp_path))
    good = '{"timestamp":0,"input_length":9,"output_length":5}\n' if option == "--trace" else (
        '{"prompt":"hi","output_tokens":3}\n')  # fmt: skip
    (d / "good").write_text(good)
    path, said = "f", None
    if kind == "directory":
        (d / "f").mkdir()
        said = "is not a regular file"
    elif kind in ("fifo", "link to a fifo"):
        os.mkfifo(d / "fifo")
        path = "fifo" if kind == "fifo" else "f"
        if kind == "link to a fifo":
            (d / "f").symlink_to("fifo")
        said = "is not a regular file"
    elif kind == "/dev/zero":
        path, said = "/dev/zero", "is not a regular file"
    elif kind == "loop":
        (d / "f").symlink_to("g")
        (d / "g").symlink_to("f")
        said = "is a loop of symbolic links"
    elif kind == "dangling":
        (d / "f").symlink_to("nowhere")
        said = "is a symbolic link to nowhere, which does not exist"
    elif kind == "under a file":
        path, said = "good/f", "does not exist (a folder on its path is a file)"
    elif kind == "missing":
        said = "does not exist"
    else:
        (d / "f").symlink_to("good")
    before = sorted(p.name for p in d.iterdir())
    extra = ["-n", "1"] if option == "--dataset" else []
    code, text = invoke(run_args(option, path, *extra), d)
    assert_clean(code, text, wrong=True, option=None if said is None else option)
    assert code == 2 and len(text.strip().splitlines()) == 1, text
    if said is None:
        assert text.startswith("error: cannot reach"), text  # read, then the closed server
    else:
        assert text.startswith(f"error: {option} ") and said in text, text
    assert sorted(p.name for p in d.iterdir()) == before


# -- think times that add up past what a replay may last ------------------------------------
@HYP
@given(
    start=st.floats(0, 40 * 86400e3),
    delays=st.lists(st.floats(0, 30 * 86400e3), min_size=1, max_size=5),
    stamps=st.lists(st.none() | st.floats(0, 40 * 86400e3), min_size=5, max_size=5),
)
def test_a_session_s_delays_add_up_within_the_trace_s_span(
    tmp_path: Path, start: float, delays: list[float], stamps: list[float | None]
) -> None:
    """Each `delay` is within 30 days, but a session of several was replayed for as long as
    they add up (three turns of 20 days: 40 days of waiting). Its last turn is sent no
    sooner than its delays (or its own later timestamp) say: past 30 days from the trace's
    first arrival, refused naming that line."""
    import json

    rows = [{"timestamp": 0, "input_length": 9, "output_length": 5}]  # the first arrival
    rows.append({"timestamp": start, "input_length": 9, "output_length": 5, "session_id": "s"})
    sent, last = start, start
    for delay, ts in zip(delays, stamps, strict=False):
        row = {"input_length": 9, "output_length": 5, "session_id": "s", "delay": delay}
        sent += delay
        if ts is not None and ts >= last:  # a later turn's own time, never going back
            row["timestamp"], last, sent = ts, ts, max(sent, ts)
        rows.append(row)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from accelbench.workload.traces import load_trace

    span = max(start, last) / 1000.0
    if span > 30 * 86400:
        with pytest.raises(UsageError, match="more than 2.592e\\+06 s"):
            load_trace(tmp_path / "t.jsonl")
    elif sent / 1000.0 > 30 * 86400:
        with pytest.raises(UsageError, match=rf"t.jsonl:{len(rows)}: session 's' sends"):
            load_trace(tmp_path / "t.jsonl")
    else:
        load_trace(tmp_path / "t.jsonl")


@HYP
@given(
    turns=st.tuples(st.integers(1, 10_000), st.integers(1, 10_000)).map(sorted),
    think=st.tuples(st.floats(0, 86_400), st.floats(0, 86_400)).map(sorted),
)
def test_think_times_add_up_within_the_longest_run(turns: list[int], think: list[float]) -> None:
    """`--turns 100 --think-time 86400`: each think time within its day, 99 days of
    waiting per session; no run lasts past 30 days, so its later turns could never run."""
    wl = WorkloadConfig(sessions=1, turns=f"{turns[0]}:{turns[1]}",
                        think_time_s=f"{think[0]!r}:{think[1]!r}")  # fmt: skip
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", workload=wl)
    if (turns[0] - 1) * think[0] > 30 * 86400:
        with pytest.raises(UsageError, match=r"^--think-time .* more than 2,592,000 s"):
            cfg.validate()
    else:
        cfg.validate()


@settings(HYP, max_examples=80)
@given(raw=damaged_files(_GOOD_DATASET, _DATASET_FIELDS))
def test_a_damaged_data_set_is_one_line(tmp_path: Path, raw: bytes) -> None:
    """The same damage in a data set (read once the server answers, so here through the
    reader both run and sweep use): its records, or one error line naming the file."""
    import tempfile

    from accelbench.errors import AccelbenchError
    from accelbench.workload.datasets import load_dataset

    p = Path(tempfile.mkdtemp(dir=tmp_path)) / "d.jsonl"
    p.write_bytes(raw)
    try:
        items = load_dataset(str(p))
    except AccelbenchError as exc:
        assert "\n" not in str(exc) and "d.jsonl" in str(exc), exc
    else:
        for item in items:  # what is read is what a request can carry
            assert isinstance(item.prompt, str | list) and item.prompt
            assert item.output_tokens is None or 1 <= item.output_tokens <= 1 << 20


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        ('{"prompt": "a", "output_tokens": 3}', "prompts"),
        ('{"messages": [{"role": "user", "content": "a"}]}', "chat"),
    ],  # fmt: skip
)
def test_sessions_from_a_file_of_single_requests(tmp_path: Path, record: str, kind: str) -> None:
    """`run --dataset prompts.jsonl --sessions 2` said "`conversations` must be a list", a
    key the file never had."""
    from accelbench.errors import AccelbenchError
    from accelbench.workload.datasets import load_conversations, load_dataset

    (tmp_path / "d.jsonl").write_text(record + "\n")
    want = rf"d.jsonl:1: a {kind} record, not a ShareGPT conversation"
    with pytest.raises(AccelbenchError, match=want):
        load_conversations(str(tmp_path / "d.jsonl"))
    with pytest.raises(AccelbenchError, match=want):
        load_dataset(str(tmp_path / "d.jsonl"), "sharegpt")


def _own_trace(path: Path, n: int) -> None:
    import json

    from accelbench.workload.traces import trace_header, trace_row

    rows = [trace_header()] + [
        trace_row(i, i * 0.01, "completions", {"prompt": f"p{i}", "max_tokens": 4})
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@HYP
@given(
    recorded=st.booleans(),
    n=st.integers(1, 5),
    seed=st.none() | st.integers(0, 2**32 - 1),
)
def test_seed_with_a_trace_of_recorded_requests(
    tmp_path: Path, recorded: bool, n: int, seed: int | None
) -> None:
    """`run --trace proxy/trace.jsonl --seed 7`: every request is replayed as recorded, so
    the seed drew nothing, yet run.json recorded it as the run's. Refused in one line; a
    trace whose prompts are synthesised (Mooncake, Azure) takes it."""
    import json
    import tempfile

    p = Path(tempfile.mkdtemp(dir=tmp_path)) / "t.jsonl"
    if recorded:
        _own_trace(p, n)
    else:
        rows = [{"timestamp": i, "input_length": 9, "output_length": 4} for i in range(n)]
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wl = WorkloadConfig(trace=str(p))
    given: frozenset[str] = frozenset()
    if seed is not None:
        wl.seed, given = seed, frozenset({"--seed"})
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", workload=wl, given=given)
    cfg.validate()
    if seed is not None and recorded:
        with pytest.raises(UsageError, match=r"^--seed draws the prompts .* recorded request"):
            cfg.check_run_options()
    else:
        cfg.check_run_options()


def test_seed_with_a_recorded_trace_is_refused_before_the_run(tmp_path: Path) -> None:
    _own_trace(tmp_path / "t.jsonl", 3)
    code, text = invoke(run_args("--trace", "t.jsonl", "--seed", "7"), tmp_path)
    assert_clean(code, text, wrong=True, option="--seed")
    assert code == 2 and not (tmp_path / "res").exists(), text


def test_a_record_the_tokenizer_cannot_count_is_named(tmp_path: Path) -> None:
    """A 100 MB prompt: the server's /tokenize reset the connection, and the line said
    "/tokenize on the server failed: [Errno 104] Connection reset by peer", naming no file;
    now the record's FILE:LINE leads it."""
    from accelbench.errors import AccelbenchError
    from accelbench.workload.plan import build_plan

    class Resets:
        name = "resets"

        def encode(self, text: str) -> list[int]:
            if len(text) > 100:
                raise AccelbenchError("/tokenize on the server failed: [Errno 104] reset")
            return list(text.encode())

        def decode(self, ids: list[int]) -> str:
            return bytes(ids).decode()

    (tmp_path / "d.jsonl").write_text(
        '{"prompt": "short", "output_tokens": 3}\n'
        f'{{"prompt": "{"x" * 500}", "output_tokens": 3}}\n'
    )
    wl = WorkloadConfig(dataset=str(tmp_path / "d.jsonl"))
    with pytest.raises(AccelbenchError, match=r"d.jsonl:2: counting its tokens failed: /tok"):
        build_plan(wl, 4, Resets())  # type: ignore[arg-type]


# -- shared prefixes: only the prompts the requests start with are made ---------------------
class _Bytes:
    """One token per UTF-8 byte (the reference server's tokenizer), counting its calls."""

    name = "bytes"

    def __init__(self) -> None:
        self.tokens = 0

    def encode(self, text: str) -> list[int]:
        self.tokens += len(text)
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", "replace")


@settings(HYP, max_examples=30)
@example(k=1 << 20, n=2, sessions=False)  # 2**20 prompts were made for 2 requests
@given(
    k=st.integers(1, 64),
    n=st.integers(1, 6),
    sessions=st.booleans(),
)
def test_shared_prefixes_beyond_the_requests_are_not_made(k: int, n: int, sessions: bool) -> None:
    """`-n 2 --shared-prefixes 1048576 --prefix-tokens 1048576` made all K prompts of P
    tokens before the run (1e12 tokens: it never started). Request (session) i starts with
    prompt i mod K, so only the first min(K, n) are made: the same plan, made at once."""
    from accelbench.workload.plan import build_plan

    def plan(groups: int) -> tuple[list[tuple[object, int | None]], int]:
        tok = _Bytes()
        wl = WorkloadConfig(isl=8, osl=2, shared_prefixes=groups, prefix_tokens=512,
                            sessions=n if sessions else None, turns="2")  # fmt: skip
        made = [(r.prompt, r.prefix_group) for r in build_plan(wl, n, tok)]  # type: ignore[arg-type]
        return made, tok.tokens

    (made, work), (used, least) = plan(k), plan(min(k, n))
    assert made == used
    assert work == least  # the tokenizer's work: the prompts used, never K of them
