"""Dataset loaders at their boundary (workload/datasets.py): ShareGPT records without a
turn are counted, not dropped in silence; one notion of roles and of a reply's recorded
length for both loaders; a record with a role not known, or a system message after its
first turn, is left out and counted by why; two output lengths are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.runner.config import WorkloadConfig
from accelbench.workload.datasets import (
    KNOWN_ROLES,
    OUTPUT_LENGTH_KEYS,
    REPLY_LENGTH_KEYS,
    REPLY_ROLES,
    USER_ROLES,
    load_conversations,
    load_dataset,
)
from accelbench.workload.plan import build_plan
from accelbench.workload.traces import MAX_TRACE_TOKENS

HYP = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _jsonl(path: Path, records: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _conv(*msgs: tuple[str, str]) -> dict:
    return {"conversations": [{"from": r, "value": v} for r, v in msgs]}


def test_every_reply_role_and_its_recorded_length_in_both_loaders(tmp_path: Path) -> None:
    """The audit's case: `model` and `chatgpt` replies were dropped by load_dataset (it
    took only gpt/assistant) and a reply's `output_tokens` was ignored there."""
    recs = [
        {"conversations": [{"from": "human", "value": "hi there"},
                           {"from": "gpt", "value": "hello", "output_tokens": 300}]},
        _conv(("human", "q2"), ("model", "a2")),
        _conv(("user", "q3"), ("chatgpt", "a3")),
        _conv(("human", "q4"), ("bard", "a4")),
        _conv(("human", "q5"), ("assistant", "a5")),
    ]  # fmt: skip
    p = _jsonl(tmp_path / "sg.jsonl", recs)
    items = load_dataset(p)
    assert [(i.prompt, i.output_tokens, i.reference_output) for i in items] == [
        ("hi there", 300, "hello"), ("q2", None, "a2"), ("q3", None, "a3"),
        ("q4", None, "a4"), ("q5", None, "a5"),
    ]  # fmt: skip
    assert items.left_out == 0 and items.note is None
    convs = load_conversations(p)
    assert [c.turns for c in convs] == [[(i.prompt, i.output_tokens)] for i in items]


def test_records_left_out_are_counted_and_said(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path / "sg.jsonl",
        [_conv(("human", "q"), ("gpt", "a")), _conv(("human", "no reply")),
         _conv(("gpt", "orphan")), {"conversations": []}],
    )  # fmt: skip
    for loaded in (load_dataset(p), load_conversations(p)):
        assert (len(loaded), loaded.records, loaded.left_out) == (1, 4, 3)
        assert loaded.note == f"{p}: 1 of 4 records used (3 without a human turn and a reply)"
    notes: list[str] = []
    build_plan(WorkloadConfig(dataset=p, osl=5), 3, None, notes=notes)
    assert notes == [load_dataset(p).note]
    notes.clear()
    build_plan(WorkloadConfig(dataset=p, osl=5, sessions=1), 1, None, notes=notes)
    assert notes == [load_dataset(p).note]
    none = _jsonl(tmp_path / "none.jsonl", [_conv(("human", "q"))])
    for load in (load_dataset, load_conversations):
        with pytest.raises(AccelbenchError, match="none of its 1 records: 1 without a human"):
            load(none)


# a message: a known role (or a value that is not a usable string)
_values = st.sampled_from(["x", "", "  "]) | st.none() | st.integers(0, 3)
_msgs = st.lists(st.tuples(st.sampled_from(KNOWN_ROLES[:-1]), _values), max_size=6)


def _usable(msgs: list[tuple[str, object]]) -> bool:
    """A human message followed, anywhere later, by a reply (both non-empty strings)."""
    ok = [(r, v) for r, v in msgs if isinstance(v, str) and v.strip()]
    first_user = next((k for k, (r, _) in enumerate(ok) if r in USER_ROLES), None)
    return first_user is not None and any(r in REPLY_ROLES for r, _ in ok[first_user:])


@HYP
@given(records=st.lists(_msgs, min_size=1, max_size=8))
def test_any_record_without_a_turn_is_counted(tmp_path: Path, records: list) -> None:
    """Property: used + left out = the file's records, and the left-out ones are exactly
    those without a human message and a reply after it, in both loaders."""
    recs = [{"conversations": [{"from": r, "value": v} for r, v in m]} for m in records]
    p = _jsonl(tmp_path / "sg.jsonl", recs)
    want = sum(not _usable(m) for m in records)
    for load in (load_dataset, load_conversations):
        if want == len(records):
            with pytest.raises(AccelbenchError, match="no conversation with a human turn"):
                load(p)
            continue
        loaded = load(p)
        assert (loaded.records, loaded.left_out, len(loaded)) == (
            len(records), want, len(records) - want
        )  # fmt: skip
        assert (loaded.note is None) == (want == 0)


@HYP
@given(
    before=_msgs,
    after=_msgs,
    role=st.text(max_size=10).filter(lambda r: r not in KNOWN_ROLES)
    | st.none()
    | st.integers(-(2**53), 2**53),
)
def test_any_role_not_known_leaves_the_record_out_counted(
    tmp_path: Path, before, after, role
) -> None:
    """Property: a record with a message whose role is none of the known ones (`Human`,
    `tool`, `bing`, ...) is left out and counted, the role named in the note, in both
    loaders; it was skipped, and the turns around it merged (a real ShareGPT dump may
    hold such roles: the file is still used)."""
    msgs = [{"from": r, "value": v} for r, v in before]
    msgs.append({"from": role, "value": "text"})
    msgs += [{"from": r, "value": v} for r, v in after]
    p = _jsonl(tmp_path / "sg.jsonl", [_conv(("human", "q"), ("gpt", "a")),
                                        {"conversations": msgs}])  # fmt: skip
    for load in (load_dataset, load_conversations):
        loaded = load(p)
        assert (len(loaded), loaded.records, loaded.left_out) == (1, 2, 1)
        assert loaded.roles == {repr(role)[:40]: 1}
        note = loaded.note or ""
        assert "\n" not in note and "1 of 2 records used (1 with a role not known: " in note
        assert f"{repr(role)[:40]} x1; known: human, user, gpt" in note


def test_the_audit_capitalised_role_no_longer_merges_turns(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "c.jsonl", [_conv(("human", "q1"), ("gpt", "a1"), ("Human", "q2"),
                                            ("gpt", "a2")), _conv(("human", "q"), ("gpt", "a"))])  # fmt: skip
    convs = load_conversations(p)
    assert [c.replies for c in convs] == [["a"]]  # never ["a1\n\na2"]
    assert convs.note == (f"{p}: 1 of 2 records used (1 with a role not known: 'Human' x1; "
                          "known: human, user, gpt, assistant, chatgpt, bard, model, system)")  # fmt: skip
    only = _jsonl(tmp_path / "only.jsonl", [_conv(("Human", "q"), ("gpt", "a"))])
    with pytest.raises(AccelbenchError, match="none of its 1 records: 1 with a role not known"):
        load_conversations(only)


def test_a_system_prompt_leads_and_only_leads(tmp_path: Path) -> None:
    ok = _jsonl(tmp_path / "ok.jsonl", [_conv(("system", "be brief"), ("human", "q"),
                                              ("gpt", "a"))])  # fmt: skip
    c = load_conversations(ok)[0]
    assert (c.system, c.turns) == ("be brief", [("q", None)])
    assert load_dataset(ok)[0].prompt == "q"
    late = _jsonl(tmp_path / "late.jsonl", [_conv(("human", "q"), ("gpt", "a"),
                                                  ("system", "now terse")),
                                            _conv(("human", "q"), ("gpt", "a"))])  # fmt: skip
    for load in (load_dataset, load_conversations):
        loaded = load(late)
        assert loaded.note == (f"{late}: 1 of 2 records used (1 with a system message after "
                               "the first turn)")  # fmt: skip


@HYP
@given(keys=st.lists(st.sampled_from(OUTPUT_LENGTH_KEYS), min_size=2, max_size=3, unique=True))
def test_two_output_lengths_on_a_prompt_are_refused(tmp_path: Path, keys: list[str]) -> None:
    """Property: a prompt record that sets more than one of output_tokens / max_tokens /
    output_len is refused naming file:line and the keys (the first had won in silence)."""
    rec = {"prompt": "x", **{k: 10 + i for i, k in enumerate(keys)}}
    p = _jsonl(tmp_path / "p.jsonl", [{"prompt": "fine", "max_tokens": 3}, rec])
    with pytest.raises(AccelbenchError) as exc:
        load_dataset(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:2: ") and "\n" not in msg
    assert all(f"`{k}`" in msg for k in keys)
    # a null is as if absent: one length given, one used
    rec = {"prompt": "x", keys[0]: 7, **{k: None for k in keys[1:]}}
    assert load_dataset(_jsonl(tmp_path / "q.jsonl", [rec]))[0].output_tokens == 7


def test_two_recorded_reply_lengths_are_refused(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "sg.jsonl", [{"conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "a", "output_tokens": 3, "num_tokens": 4}]}])  # fmt: skip
    for load in (load_dataset, load_conversations):
        with pytest.raises(AccelbenchError, match="`output_tokens` and `num_tokens` are both"):
            load(p)


@pytest.mark.parametrize(
    ("record", "key", "meant"),
    [
        ({"prompt": "x", "max_token": 9}, "max_token", "max_tokens"),
        ({"prompt": "x", "output_token": 9}, "output_token", "output_tokens"),
        ({"prompt": "x", "Output_Tokens": 9}, "Output_Tokens", "output_tokens"),
        ({"prompt": "x", "output_length": 9}, "output_length", "output_len"),
        ({"messages": [{"role": "user", "content": "x"}], "max_token": 9}, "max_token",
         "max_tokens"),
    ],
)  # fmt: skip
def test_a_misspelt_length_key_is_refused_not_replaced_by_osl(tmp_path, record, key, meant):
    """Read as no length at all, the run's --osl took its place without a word."""
    p = _jsonl(tmp_path / "p.jsonl", [{"prompt": "fine"}, record] if "prompt" in record
               else [record])  # fmt: skip
    with pytest.raises(AccelbenchError, match=rf"key '{key}' is not read: did you mean `{meant}`"):
        load_dataset(p)


def test_a_misspelt_reply_length_is_refused_and_other_keys_pass(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "sg.jsonl", [{"conversations": [
        {"from": "human", "value": "q", "markdown": "q"},
        {"from": "gpt", "value": "a", "num_token": 3}]}])  # fmt: skip
    for load in (load_dataset, load_conversations):
        with pytest.raises(AccelbenchError, match="a reply's key 'num_token' is not read"):
            load(p)
    ok = _jsonl(tmp_path / "ok.jsonl", [{"id": "c1", "conversations": [
        {"from": "human", "value": "q", "markdown": "q"},
        {"from": "gpt", "value": "a", "num_tokens": 3, "weight": 1}]}])  # fmt: skip
    assert load_dataset(ok)[0].output_tokens == 3


def test_request_fields_in_records_are_counted_not_sent(tmp_path: Path) -> None:
    """A record's own temperature / tools / model are not sent (each request is the prompt
    and its length): the run's note counts them by field, so nobody believes they were.
    `max_completion_tokens`, OpenAI's chat name for max_tokens, is a length."""
    chat = [{"role": "user", "content": "q"}]
    p = _jsonl(tmp_path / "c.jsonl", [
        {"messages": chat, "temperature": 0.7, "tools": [], "max_completion_tokens": 9},
        {"messages": chat, "temperature": 0.2, "id": "r2"},
    ])  # fmt: skip
    got = load_dataset(p)
    assert [x.output_tokens for x in got] == [9, None]
    assert got.note == (
        f"{p}: request fields in records are not sent (temperature x2, tools x1): each "
        "request carries the prompt and its length only; --extra-body sets a field for "
        "every request"
    )
    plain = _jsonl(tmp_path / "p.jsonl", [{"prompt": "x", "id": 1, "category": "qa"}])
    assert load_dataset(plain).note is None  # the record's own keys are not request fields
    both = _jsonl(
        tmp_path / "b.jsonl", [{"prompt": "x", "max_tokens": 3, "max_completion_tokens": 4}]
    )
    with pytest.raises(AccelbenchError, match="`max_tokens` and `max_completion_tokens` are both"):
        load_dataset(both)


# a length in a record: whole numbers in and out of --osl's range, and what is no length
_LENGTHS = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([0, 1, 1 << 20, (1 << 20) + 1, 2_000_000, 10**18, -1]),
    st.floats(allow_nan=False, allow_infinity=False),  # NaN/inf are not JSON
    st.sampled_from([3.5, 3.0, 1e30, -0.0]),
    st.booleans(),
    st.text(max_size=6),
    st.sampled_from(["7", "", [7], {"n": 7}]),
)


def _length_ok(v: object) -> bool:
    return (
        not isinstance(v, bool)
        and isinstance(v, int | float)
        and v == int(v)
        and 1 <= int(v) <= MAX_TRACE_TOKENS
    )


@HYP
@given(
    v=_LENGTHS,
    key=st.sampled_from(OUTPUT_LENGTH_KEYS + REPLY_LENGTH_KEYS),
    kind=st.sampled_from(["prompts", "chat", "sharegpt"]),
)
def test_a_records_length_is_in_the_osl_range_or_refused(
    tmp_path: Path, v: object, key: str, kind: str
) -> None:
    """Property: a record's output length (a prompt's or chat record's, a ShareGPT
    reply's) is used when it is a whole number in [1, 1048576] (--osl's range, as a
    trace's lengths); anything else (10**18, 2,000,000, 0, 3.5, a bool, a string) is
    refused in one line naming file:line, the key and the range, before any run starts.
    Out of range was accepted and every request then failed with HTTP 400 in a run that
    said "completed", exit 0."""
    if kind == "sharegpt":
        key = REPLY_LENGTH_KEYS[hash(key) % len(REPLY_LENGTH_KEYS)]
        rec = {"conversations": [{"from": "human", "value": "q"},
                                 {"from": "gpt", "value": "a", key: v}]}  # fmt: skip
        loads = [load_dataset, load_conversations]
    else:
        key = key if key in OUTPUT_LENGTH_KEYS else "output_tokens"
        body = {"prompt": "q"} if kind == "prompts" else {"messages": [
            {"role": "user", "content": "q"}]}  # fmt: skip
        rec = {**body, key: v}
        loads = [load_dataset]
    p = _jsonl(tmp_path / "d.jsonl", [rec])
    for load in loads:
        if _length_ok(v):
            got = load(p)[0]
            n = got.output_tokens if load is load_dataset else got.turns[0][1]
            assert n == int(v)  # type: ignore[call-overload]
            continue
        with pytest.raises(AccelbenchError) as exc:
            load(p)
        msg = str(exc.value)
        assert msg.startswith(f"{p}:1: ") and "\n" not in msg and f"`{key}`" in msg, msg
        assert exc.value.exit_code == 2
        assert len(msg) < len(p) + 160, msg  # the value is quoted short


def test_consecutive_replies_whose_lengths_sum_past_the_range_are_refused(tmp_path):
    """Two replies in a row are sent as one: each in range, their sum (2,000,000) not."""
    p = _jsonl(tmp_path / "sg.jsonl", [{"conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "a", "output_tokens": 1_000_000},
        {"from": "gpt", "value": "b", "output_tokens": 1_000_000}]}])  # fmt: skip
    for load in (load_dataset, load_conversations):
        with pytest.raises(AccelbenchError, match=r":1: consecutive replies' lengths "
                           r"\(1000000 \+ 1000000\) must be in \[1, 1048576\]"):  # fmt: skip
            load(p)


def test_a_huge_output_length_stops_the_run_before_it_starts(reference_server, tmp_path):
    """The audit's example: `output_tokens: 10**18` (and a ShareGPT reply's 10**15) ran,
    sent max_tokens 10**18, failed every request with HTTP 400, and exited 0 "completed".
    Now: exit 2, one line with file:line, the key and the range; no run directory."""
    from cli_inprocess import run_cli

    srv = reference_server("--max-throughput")
    (tmp_path / "p_huge.jsonl").write_text(
        json.dumps({"prompt": "hello world", "output_tokens": 10**18}) + "\n"
    )
    (tmp_path / "s_huge.json").write_text(json.dumps([{"conversations": [
        {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "yo", "output_tokens": 10**15}]}]))  # fmt: skip
    for name, got, what in (("p_huge.jsonl", 10**18, ""), ("s_huge.json", 10**15, "a reply's ")):
        code, _, err, _ = run_cli(["run", "--url", srv.url, "-n", "2", "--no-telemetry",
                                   "-o", "out", "--dataset", name], tmp_path)  # fmt: skip
        assert code == 2, err
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert errors == [f"error: {name}:1: {what}`output_tokens` must be in [1, 1048576] "
                          f"(got {got})"], err  # fmt: skip
        assert not (tmp_path / "out").exists()


class _CountTok:
    """A tokenizer whose count of a reply that is a number is that number."""

    name = "count"

    def encode(self, text: str) -> list[int]:
        return [0] * (int(text) if text.isdigit() else len(text.split()))

    def decode(self, ids: list[int]) -> str:
        return ""


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    n=st.one_of(
        st.sampled_from([0, 1, MAX_TRACE_TOKENS, MAX_TRACE_TOKENS + 1]),
        st.integers(0, 3 * MAX_TRACE_TOKENS),
    ),
    sessions=st.booleans(),
)
def test_a_reply_length_counted_with_the_tokenizer_is_in_the_osl_range_or_refused(
    tmp_path: Path, n: int, sessions: bool
) -> None:
    """Property: a ShareGPT reply with no recorded length is sent with max_tokens = its
    count with the tokenizer (at least 1), held to the recorded lengths' range: past
    1,048,576 it is refused naming file:line and the range (it was sent, and every
    request failed with HTTP 400), in both loaders' plans."""
    p = _jsonl(tmp_path / "sg.jsonl", [_conv(("human", "q"), ("gpt", "a")),
                                       _conv(("human", "q"), ("gpt", str(n)))])  # fmt: skip
    wl = WorkloadConfig(dataset=p, osl=5, sessions=2 if sessions else None)
    if n <= MAX_TRACE_TOKENS:
        if sessions:
            got = load_conversations(p, _CountTok())[1].turns[0][1]
        else:
            plan = build_plan(wl, 2, _CountTok(), notes=[])
            got = max(r.max_tokens for r in plan)
        assert got == max(1, n)
        return
    with pytest.raises(AccelbenchError) as exc:
        build_plan(wl, 2, _CountTok(), notes=[])
    msg = str(exc.value)
    assert msg.startswith(f"{p}:2: a reply's length counted with the tokenizer"), msg
    assert f"[1, {MAX_TRACE_TOKENS}]" in msg and "\n" not in msg and exc.value.exit_code == 2
