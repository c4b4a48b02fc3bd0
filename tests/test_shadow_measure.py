"""The baseline's side of the shadow proxy is measured in the candidate process, from the
frames the proxy queues (suites/shadow/candidate.py): its records must be exactly what
the same ``ResponseHandler`` gives when fed the same events directly (what the proxy
did on its own loop before), however the response is cut into reads."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_compiled_chunks import content, event, payloads

from accelbench.client.openai import ResponseHandler
from accelbench.metrics.records import ErrorKind, RequestRecord, record_row
from accelbench.store.rundir import Journal, read_journal
from accelbench.suites.shadow import candidate
from accelbench.suites.shadow.candidate import CandidateProcess, _Baseline, _Frames

T0 = 1_000_000_000


def _sse(texts: list[str], usage: int) -> bytes:
    out = [b"data: " + orjson.dumps({"choices": [{"text": t, "finish_reason": None}]}) + b"\n\n"
           for t in texts]  # fmt: skip
    out.append(b"data: " + orjson.dumps({"choices": [{"text": "", "finish_reason": "length"}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": usage}})
               + b"\n\n")  # fmt: skip
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _through_frames(
    tmp: Path,
    events: list[tuple],
    max_tokens: int | None = 8,
    *,
    compiled: bool = True,
    chat: bool = False,
    pieces: list[int] | None = None,
) -> dict:
    """The events as the proxy queues them, parsed by the candidate process's side: its
    data frames taken by the compiled ``take_frames`` where it can (``compiled``), or
    every frame in Python; the queue handed over cut at ``pieces`` (offsets), as the
    socket may deliver it."""
    cp = CandidateProcess(lambda kind: None)  # no process: only its queue is used
    cp.base_new(7, T0, max_tokens, chat, True)
    for ev in events:
        kind = ev[0]
        if kind == "try":
            cp.base(b"B", 7, ev[1], ev[2].to_bytes(4, "big"))
        elif kind == "head":
            cp.base(b"H", 7, ev[1], ev[2].to_bytes(2, "big"))
        elif kind == "data":
            cp.base(b"D", 7, ev[1], ev[2])
        elif kind == "end":
            cp.base(b"E", 7, ev[1])
        elif kind == "fail":
            cp.base_fail(7, ev[1], ev[2], ev[3].value, ev[4])
        elif kind == "cut":
            cp.base(b"J", 7, ev[1], ev[2].encode())
    if events[-1][0] != "cut":
        cp.base(b"J", 7, T0 + 10**9)
    tmp.mkdir(parents=True, exist_ok=True)
    j = [Journal(tmp / "candidate.jsonl"), Journal(tmp / "baseline.jsonl")]
    base = _Baseline(j)
    frames = _Frames(lambda f: base.frame(f[:1], f), lambda: None,
                     base.fast if compiled else None)  # fmt: skip
    assert (frames.fast is not None) == compiled
    data = bytes(cp._out)
    cuts = sorted({c % len(data) for c in pieces or []} - {0})
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        frames.data_received(data[a:b])
    # every frame read, the record journalled
    assert not base.recs and not frames.buf and not base.fast
    for x in j:
        x.close()
    rows, bad = read_journal(tmp / "baseline.jsonl")
    assert bad == 0 and len(rows) == 1
    return rows[0]


def _direct(events: list[tuple], max_tokens: int | None = 8, chat: bool = False) -> dict:
    """The same events fed to a ResponseHandler in this process, as the proxy did."""
    rec = RequestRecord(idx=7, request_id="shadow-7", t_sched=T0)
    rec.max_tokens = max_tokens
    h = None
    for ev in events:
        if ev[0] == "try":
            rec.retries = ev[2]
            h = ResponseHandler(rec, chat=chat, stream=True, keep_text=True)
            rec.t_send = ev[1]
        elif ev[0] == "head":
            assert h is not None
            h.on_headers(ev[2], ev[1])
        elif ev[0] == "data":
            assert h is not None
            h.on_data(ev[2], ev[1])
        elif ev[0] == "end":
            assert h is not None
            h.on_end(ev[1])
    return orjson.loads(orjson.dumps(record_row(rec), option=orjson.OPT_SERIALIZE_NUMPY))


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=20),
)
def test_records_match_a_direct_parse_however_the_reads_fall(
    tmp_path_factory: object, texts: list[str], cuts: list[int]
) -> None:
    body = _sse(texts, len(texts))
    points = sorted({c % len(body) for c in cuts} - {0})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    events: list[tuple] = [("try", T0 + 5, 0), ("head", T0 + 900, 200)]
    events += [("data", T0 + 1000 + 7 * i, p) for i, p in enumerate(pieces)]
    events.append(("end", T0 + 5000))
    tmp = tmp_path_factory.mktemp("m")  # type: ignore[attr-defined]
    got = _through_frames(tmp, events)
    assert got == _direct(events)
    assert got == _through_frames(tmp / "py", events, compiled=False)
    assert got["ok"] and got["output_text"] == "".join(texts) and got["retries"] == 0


def test_the_compiled_frame_path_was_built() -> None:
    # a failure here means the frame tests compared the Python path with itself
    assert candidate._c_take_frames is not None, "client/_recvstamp.c was not built"


@st.composite
def _data_frames(draw: st.DrawFn) -> tuple[bool, int | None, list[tuple], list[int]]:
    """A response as the proxy queues it: mostly one event per data frame (what the
    compiled relay queues, one per chunk), some frames with several events or cut at any
    byte (what the Python path queues), odd and mutated events among them (test_compiled
    _chunks.payloads), a retry or a failure now and then; and where the queue is cut."""
    chat = draw(st.booleans())
    max_tokens = draw(st.sampled_from([None, 1, 3, 8, 64]))
    evs = draw(st.lists(payloads(chat), min_size=1, max_size=14))
    body = [event(e) for e in evs] + [event(b"[DONE]")]
    datas: list[bytes] = []
    i = 0
    while i < len(body):
        k = draw(st.sampled_from([1] * 8 + [2, 3]))
        piece = b"".join(body[i : i + k])
        if draw(st.integers(0, 9)) == 0:  # cut inside: the next frame carries the rest
            c = draw(st.integers(1, max(1, len(piece) - 1)))
            datas += [piece[:c], piece[c:]]
        else:
            datas.append(piece)
        i += k
    events: list[tuple] = []
    if draw(st.integers(0, 5)) == 0:  # an attempt that failed, then the retry
        events += [("try", T0 + 1, 0), ("head", T0 + 2, 200),
                   ("data", T0 + 3, event(content("x", chat=chat)))]  # fmt: skip
        retries = 1
    else:
        retries = 0
    status = draw(st.sampled_from([200] * 9 + [500]))
    events += [("try", T0 + 5, retries), ("head", T0 + 900, status)]
    events += [("data", T0 + 1000 + 7 * j, d) for j, d in enumerate(datas) if d]
    end = draw(st.sampled_from(["end"] * 4 + ["fail", "cut"]))
    if end == "end":
        events.append(("end", T0 + 90_000))
    elif end == "fail":
        events.append(("fail", T0 + 90_000, True, ErrorKind.TIMEOUT, "late"))
    else:
        events.append(("cut", T0 + 90_000, "the caller closed the connection"))
    pieces = draw(st.lists(st.integers(1, 1 << 16), max_size=8))
    return chat, max_tokens, events, pieces


@settings(max_examples=200, deadline=None)
@given(_data_frames())
def test_compiled_data_frames_give_the_records_of_python(
    tmp_path_factory: object, case: tuple[bool, int | None, list[tuple], list[int]]
) -> None:
    """The compiled ``take_frames`` takes only what ``on_data`` would take the same way:
    the journalled record is the same as with every frame parsed in Python, and (for a
    response that was not cut) as a direct parse."""
    chat, max_tokens, events, pieces = case
    tmp = tmp_path_factory.mktemp("c")  # type: ignore[attr-defined]
    kw = {"max_tokens": max_tokens, "chat": chat, "pieces": pieces}
    got = _through_frames(tmp / "c", events, compiled=True, **kw)  # type: ignore[arg-type]
    assert got == _through_frames(tmp / "p", events, compiled=False, **kw)  # type: ignore[arg-type]
    if events[-1][0] == "end":
        assert got == _direct(events, max_tokens, chat)


def test_a_paced_stream_is_taken_in_c(tmp_path: Path) -> None:
    """The usual response (one content event per data frame) never reaches Python's
    frame handler past its head: the compiled path takes every content event."""
    seen: list[bytes] = []
    cp = CandidateProcess(lambda kind: None)
    cp.base_new(3, T0, 16, False, True)
    cp.base(b"B", 3, T0 + 1, (0).to_bytes(4, "big"))
    cp.base(b"H", 3, T0 + 2, (200).to_bytes(2, "big"))
    for i in range(16):
        cp.base(b"D", 3, T0 + 10 + i, event(content(f" t{i}")))
    cp.base(b"D", 3, T0 + 40, event(b"[DONE]"))
    cp.base(b"E", 3, T0 + 41)
    cp.base(b"J", 3, T0 + 42)
    j = [Journal(tmp_path / "candidate.jsonl"), Journal(tmp_path / "baseline.jsonl")]
    base = _Baseline(j)

    def on_frame(f: bytes) -> None:
        seen.append(f[:1])
        base.frame(f[:1], f)

    _Frames(on_frame, lambda: None, base.fast).data_received(bytes(cp._out))
    for x in j:
        x.close()
    assert seen == [b"N", b"B", b"H", b"D", b"E", b"J"]  # the D: [DONE], Python's
    (row,), _ = read_journal(tmp_path / "baseline.jsonl")
    assert row["ok"] and row["chunk_times"] == [T0 + 10 + i for i in range(16)]
    assert row["t_first"] == T0 + 10 and row["output_text"] == "".join(f" t{i}" for i in range(16))


def test_hand_checked_record(tmp_path: Path) -> None:
    body = _sse([" a", " b"], 2)
    events = [("try", T0 + 5, 1), ("head", T0 + 10, 200), ("data", T0 + 20_000_000, body[:70]),
              ("data", T0 + 25_000_000, body[70:]), ("end", T0 + 26_000_000)]  # fmt: skip
    got = _through_frames(tmp_path, events)
    assert got["ok"] and got["output_text"] == " a b" and got["retries"] == 1
    assert got["t_send"] == T0 + 5 and got["t_first"] == T0 + 20_000_000
    assert got["t_done"] == T0 + 25_000_000  # the read that carried [DONE]


def test_failures_and_cuts(tmp_path: Path) -> None:
    # no attempt started (the baseline unreachable): the record carries the error
    got = _through_frames(tmp_path / "a", [("fail", T0 + 50, False, ErrorKind.CONNECT_ERROR,
                                           "cannot connect")])  # fmt: skip
    assert not got["ok"] and got["error_kind"] == "connect_error"
    assert got["error"] == "cannot connect" and got["t_send"] == T0 + 50
    # cut while streaming: interrupted, with the caller's reason
    body = _sse([" a"], 1)
    got = _through_frames(tmp_path / "b", [("try", T0 + 5, 0), ("head", T0 + 10, 200),
                                           ("data", T0 + 20, body[:30]),
                                           ("cut", T0 + 40, "the caller closed the connection")])  # fmt: skip
    assert not got["ok"] and got["error_kind"] == "interrupted"
    assert got["error"] == "the caller closed the connection"
    # a response that had completed keeps its outcome when the cut comes after it
    got = _through_frames(tmp_path / "c", [("try", T0 + 5, 0), ("head", T0 + 10, 200),
                                           ("data", T0 + 20, body), ("end", T0 + 30),
                                           ("cut", T0 + 40, "the proxy was stopped")])  # fmt: skip
    assert got["ok"] and got["error_kind"] is None
    # a timeout after some bytes: the handler's failure, its t_done the proxy's time
    got = _through_frames(tmp_path / "d", [("try", T0 + 5, 0), ("head", T0 + 10, 200),
                                           ("data", T0 + 20, body[:30]),
                                           ("fail", T0 + 99, True, ErrorKind.TIMEOUT, "late")])  # fmt: skip
    assert not got["ok"] and got["error_kind"] == "timeout" and got["t_done"] == T0 + 99
