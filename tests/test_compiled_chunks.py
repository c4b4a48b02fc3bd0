"""The compiled per-chunk path (client/_recvstamp.c ``read_ready`` with ``ReceiveHub.fast``)
against the pure-Python one (``http1._c_read_ready = None``, the fallback): the same
response bytes, cut into the same reads, must leave identical records.

Each stream goes through a real socket pair, read by a real ``ReceiveHub`` (epoll,
``recvmsg``), into ``HTTP1Protocol`` and ``ResponseHandler``; one read per write, the hub
run by hand after each. A read's time differs between two runs, so every time a record
holds is replaced by the number of the read (or "end") in which it was set: both paths
give every mark of one read that read's time, so that number is exact."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.client import http1
from accelbench.client.errors import ConnectionClosed
from accelbench.client.http1 import HTTP1Protocol, ReceiveHub, _HubTransport
from accelbench.client.openai import MAX_OUTPUT_CHARS, ResponseHandler
from accelbench.metrics.records import RequestRecord

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="Linux only: the hub reads through epoll (docs/METRICS.md)"
)

COMPILED = http1._c_read_ready
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
TIMES = ("t_headers", "t_first", "t_last", "t_done")


def test_the_compiled_path_was_built():
    # a failure here means every test below compared the Python path with itself
    assert COMPILED is not None, "client/_recvstamp.c was not built"


def _chunk(b: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(b), b)


def run_stream(
    reads: list[bytes], *, compiled: bool, chat: bool = False, max_tokens: int | None = 64
) -> dict[str, Any]:
    """Feed ``reads`` (one write and one hub pass each) to a response handler on the
    compiled or the Python path, then close the connection; returns the record with its
    times replaced by read numbers, the handler's state, the outcome, and how many reads
    reached the protocol (the rest were taken by the compiled path)."""
    saved = http1._c_read_ready
    http1._c_read_ready = COMPILED if compiled else None
    try:
        return asyncio.run(_run(reads, chat, max_tokens))
    finally:
        http1._c_read_ready = saved


async def _run(reads: list[bytes], chat: bool, max_tokens: int | None) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    hub = ReceiveHub(loop)
    proto = HTTP1Protocol()
    proto.connection_made(_HubTransport(ours, proto, hub))  # type: ignore[arg-type]
    to_protocol = 0
    arrived = proto.arrived

    def counting(data: bytes, t: int) -> None:
        nonlocal to_protocol
        to_protocol += 1
        arrived(data, t)

    proto.transport.arrived = counting  # type: ignore[union-attr]
    rec = RequestRecord(idx=0, request_id="r", max_tokens=max_tokens)
    handler = ResponseHandler(rec, chat=chat, stream=True, keep_text=True)
    fut = proto.start(b"POST / HTTP/1.1\r\n\r\n", handler)
    theirs.recv(65536)
    norm: dict[str, Any] = {k: None for k in TIMES}
    raw: dict[str, Any] = {k: None for k in TIMES}
    chunk_marks: list[Any] = []

    def note(label: Any) -> None:
        for k in TIMES:
            v = getattr(rec, k)
            if v != raw[k]:
                raw[k], norm[k] = v, (label if v is not None else None)
        if len(rec.chunk_times) < len(chunk_marks):  # never: marks are only appended
            raise AssertionError("chunk_times shrank")
        chunk_marks.extend([label] * (len(rec.chunk_times) - len(chunk_marks)))

    reads_before = 0
    for i, data in enumerate(reads):
        theirs.sendall(data)
        hub._ready()
        assert hub.reads == reads_before + 1, "one write was not one read"
        reads_before = hub.reads
        note(i)
        if fut.done():
            break
    theirs.close()
    hub._ready()  # the end of the connection
    for _ in range(3):
        await asyncio.sleep(0)
    note("end")
    outcome: Any = "pending"
    if fut.done():
        exc = fut.exception()
        outcome = (
            None if exc is None else (type(exc).__name__, str(exc), getattr(exc, "kind", None))
        )
    hub.close()
    ours.close()
    row = asdict(rec)
    row.update(norm)
    row["chunk_times"] = chunk_marks
    return {
        "record": row,
        "texts": list(handler.texts),
        "text_len": handler.text_len,
        "usage_marks": handler.usage_marks,
        "done": handler.done,
        "failed": handler.failed,
        "outcome": outcome,
        "reads": hub.reads,
        "fast_left": dict(hub.fast),
        "to_protocol": to_protocol,
    }


def both(reads: list[bytes], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    c = run_stream(reads, compiled=True, **kw)
    p = run_stream(reads, compiled=False, **kw)
    for r in (c, p):
        assert not r["fast_left"], "a finished response left its fd in ReceiveHub.fast"
    c["_to_protocol"], p["_to_protocol"] = c.pop("to_protocol"), p.pop("to_protocol")
    assert {k: v for k, v in c.items() if k != "_to_protocol"} == {
        k: v for k, v in p.items() if k != "_to_protocol"
    }
    return c, p


def content(text: str, *, chat: bool = False, ascii_only: bool = True, **extra: Any) -> bytes:
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": None}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    obj = {"id": "cmpl-1", "object": "text_completion", "created": 1796172861,
           "model": "m", "choices": [choice], **extra}  # fmt: skip
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode()


def event(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


FINISH = b'{"choices":[{"index":0,"text":"!","finish_reason":"length"}]}'
USAGE = b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}'
TAIL = _chunk(event(FINISH)) + _chunk(event(USAGE) + event(b"[DONE]")) + b"0\r\n\r\n"


def test_a_paced_stream_is_taken_by_the_compiled_path_with_identical_records():
    texts = [f" tok{i}" for i in range(40)] + [" \u00e9\u4e2d", '\U0001f600 "q"\n\\']
    reads = [HEAD] + [_chunk(event(content(t, ascii_only=i % 2 == 0))) for i, t in
                      enumerate(texts)] + [TAIL]  # fmt: skip
    c, p = both(reads)
    assert c["outcome"] is None and c["record"]["ok"] is True
    assert c["texts"] == [*texts, "!"]
    assert c["record"]["chunk_times"] == list(range(1, len(texts) + 1)) + [len(texts) + 1]
    assert c["record"]["t_first"] == 1 and c["record"]["t_done"] == len(texts) + 1
    # the compiled path took every content chunk's read: only the head and the tail
    # reached the protocol; the Python path got them all
    assert c["_to_protocol"] == 2
    assert p["_to_protocol"] == len(reads)


def test_chat_deltas_and_reasoning_are_identical():
    rc = json.dumps({"choices": [{"delta": {"reasoning_content": "hm"}, "finish_reason": None}]})
    reads = [HEAD] + [_chunk(event(content(f"a{i}", chat=True))) for i in range(5)]
    reads += [_chunk(event(rc.encode())), _chunk(event(content("b", chat=True)))]
    reads += [_chunk(event(b'{"choices":[{"delta":{"content":"!"},"finish_reason":"stop"}]}'))]
    reads += [_chunk(event(b"[DONE]")) + b"0\r\n\r\n"]
    c, _ = both(reads, chat=True)
    assert c["texts"] == ["a0", "a1", "a2", "a3", "a4", "hm", "b", "!"]
    assert c["record"]["finish_reason"] == "stop"
    assert c["_to_protocol"] == 4  # head, the reasoning event, the finish, the end


def test_several_chunks_in_one_read_and_a_partial_one_after_them():
    evs = [_chunk(event(content(f"x{i}"))) for i in range(6)]
    body = b"".join(evs)
    cut = len(b"".join(evs[:3])) + 5  # three whole chunks, then 5 bytes of the fourth
    reads = [HEAD, body[:cut], body[cut:], TAIL]
    c, _ = both(reads)
    assert c["record"]["chunk_times"] == [1, 1, 1, 2, 2, 2, 3]
    assert c["_to_protocol"] == 4  # the compiled path left the partial chunk to Python


@pytest.mark.parametrize(
    "payload",
    [
        # what orjson refuses: Python fails the request, and so must the compiled path
        b'{"choices":[{"text":"a","finish_reason":null}],}',
        b'{"choices":[{"text":"\\ud800","finish_reason":null}]}',
        b'{"choices":[{"text":"\\udc00","finish_reason":null}]}',
        b'{"choices":[{"text":"\\ud800\\u0041","finish_reason":null}]}',
        b'{"model":"\xed\xa0\x80","choices":[{"text":"a","finish_reason":null}]}',
        b'{"model":"\xc0\xaf","choices":[{"text":"a","finish_reason":null}]}',
        b'{"model":"\xf4\x90\x80\x80","choices":[{"text":"a","finish_reason":null}]}',
        b'{"choices":[{"text":"a","finish_reason":null}],"n":1e400}',
        b'{"choices":[{"text":"a\xff","finish_reason":null}]}',
        b'{"choices":[{"text":"a","finish_reason":null}],"n":01}',
        b'{"choices":[{"text":"a\x01","finish_reason":null}]}',
        b'{"choices":[{"text":"a","finish_reason":null}]} x',
        # valid, but not the shape it takes: Python decides
        b'{"choices":[{"text":"a","finish_reason":null}],"choices":5}',
        b'{"choices":[{"t\\u0065xt":"a","finish_reason":null}]}',
        b'{"choices":[{"text":"a","finish_reason":null}],"error":null}',
        b'{"choices":[{"text":"a","finish_reason":null}],"usage":{"completion_tokens":1}}',
        b'{"choices":[{"text":"","finish_reason":null}]}',
        b'{"choices":[{"text":7,"finish_reason":null}]}',
        b'{"choices":[],"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}',
        # valid and taken: the last of a repeated key counts, as in orjson's dict
        b'{"choices":5,"choices":[{"text":"a","text":"b","finish_reason":"x","finish_reason":null}]}',
        b' {"choices":[{"text":"\\u00e9\\ud83d\\ude00\\/\\b\\f\\t","finish_reason":null}]}\t',
        b'{"choices":[{"text":"a","finish_reason":null},{"bad":1}],"n":-0.5e-10,"m":[true,false,null]}',
    ],
)
def test_odd_payloads_give_identical_records(payload):
    reads = [HEAD, _chunk(event(content("first"))), _chunk(event(payload)), TAIL]
    both(reads)


def test_the_chunk_and_text_limits_fail_the_request_alike():
    reads = [HEAD] + [_chunk(event(content(f"t{i}"))) for i in range(4)] + [TAIL]
    c, _ = both(reads, max_tokens=None)  # no limit reached
    assert c["record"]["ok"] is True
    # max_chunks from max_tokens: the compiled path leaves the chunk over it to Python
    h = ResponseHandler(RequestRecord(idx=0, max_tokens=1), chat=False, stream=True,
                        keep_text=True)  # fmt: skip
    n = h.max_chunks + 1
    many = [HEAD] + [_chunk(event(content("z"))) for _ in range(n)] + [TAIL]
    c, _ = both(many, max_tokens=1)
    assert c["record"]["error_kind"] == "malformed_stream"
    assert len(c["record"]["chunk_times"]) == n
    assert MAX_OUTPUT_CHARS > 0


# -- property: any SSE framing, cut at any byte ------------------------------------------
_ODD = [
    FINISH, USAGE, b"[DONE]", b'{"error":{"message":"boom"}}', b"not json",
    b'{"choices":[{"text":"a","finish_reason":null}],}',
    b'{"choices":[{"text":"\\udc00","finish_reason":null}]}',
    b'{"choices":[{"delta":{"content":"c"},"finish_reason":null}]}',
    b'{"choices":[{"text":"a","finish_reason":null}],"usage":null}',
]  # fmt: skip
_MUTATIONS = [
    b'"',
    b"\\",
    b",",
    b"}",
    b"]",
    b"\x80",
    b"\xff",
    b"u",
    b"0",
    b"e",
    b" ",
    b"\n",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"1e999",
    b"\t",
]


@st.composite
def payloads(draw: st.DrawFn, chat: bool) -> bytes:
    kind = draw(st.sampled_from(["content"] * 3 + ["odd"] + ["mutated"] * 3))
    if kind == "odd":
        return draw(st.sampled_from(_ODD))
    text = draw(st.text(min_size=0, max_size=12))
    extra = draw(st.sampled_from([{}, {"usage": None}, {"n": [1.5, -2e-3, {"a": True}]}]))
    p = content(text, chat=chat, ascii_only=draw(st.booleans()), **extra)
    if kind == "mutated":
        i = draw(st.integers(0, len(p)))
        op = draw(st.sampled_from(["insert", "replace", "delete"]))
        b = draw(st.sampled_from(_MUTATIONS))
        p = p[:i] + (b"" if op == "delete" else b) + p[i + (op != "insert") :]
    return p


@st.composite
def streams(draw: st.DrawFn) -> tuple[bool, list[bytes]]:
    chat = draw(st.booleans())
    evs = draw(st.lists(payloads(chat), min_size=1, max_size=12))
    crlf = draw(st.integers(0, 7)) == 0
    chunks: list[bytes] = []
    i = 0
    while i < len(evs):  # mostly one event per chunk; sometimes several, or a comment
        k = draw(st.sampled_from([1] * 6 + [2, 3]))
        body = b"".join(event(e) for e in evs[i : i + k])
        if draw(st.integers(0, 9)) == 0:
            body = b": ping\n\n" + body
        if crlf:
            body = body.replace(b"\n", b"\r\n")
        chunks.append(_chunk(body))
        i += k
    if draw(st.booleans()):
        chunks.append(TAIL)
    elif draw(st.booleans()):
        chunks.append(b"0\r\n\r\n")
    whole = HEAD + b"".join(chunks)
    if draw(st.integers(0, 3)):  # cut at chunk boundaries, some merged: the usual reads
        reads = [HEAD]
        j = 0
        while j < len(chunks):
            k = draw(st.sampled_from([1] * 6 + [2, 3]))
            reads.append(b"".join(chunks[j : j + k]))
            j += k
    else:  # cut at arbitrary bytes
        cuts = sorted(set(draw(st.lists(st.integers(1, len(whole) - 1), max_size=12))))
        edges = [0, *cuts, len(whole)]
        reads = [whole[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    return chat, reads


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_any_framing_gives_identical_records_on_both_paths(stream):
    chat, reads = stream
    both(reads, chat=chat)


def test_an_aborted_request_leaves_nothing_in_the_hub():
    """A response given up mid-stream (the connection dropped: a timeout, a cancel)
    takes its fd out of ``ReceiveHub.fast`` with it."""

    async def go() -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        hub = ReceiveHub(loop)
        proto = HTTP1Protocol()
        proto.connection_made(_HubTransport(ours, proto, hub))  # type: ignore[arg-type]
        rec = RequestRecord(idx=0, max_tokens=8)
        fut = proto.start(b"x", ResponseHandler(rec, chat=False, stream=True, keep_text=True))
        for data in (HEAD, _chunk(event(content("a")))):
            theirs.sendall(data)
            hub._ready()
        assert list(hub.fast) == [ours.fileno()]  # registered after the head
        assert rec.chunk_times and len(rec.chunk_times) == 1
        proto.transport.abort()  # type: ignore[union-attr]
        await asyncio.sleep(0)
        assert not hub.fast
        with pytest.raises(ConnectionClosed):
            fut.result()
        hub.close()
        theirs.close()

    saved = http1._c_read_ready
    try:
        asyncio.run(go())
    finally:
        http1._c_read_ready = saved
