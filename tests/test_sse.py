"""The SSE parser and the OpenAI stream handler against adversarial streams."""

from __future__ import annotations

import orjson
import pytest

from accelbench.client.openai import ResponseHandler
from accelbench.client.sse import SSEParser
from accelbench.metrics.records import RequestRecord


def feed_all(p: SSEParser, pieces: list[bytes]) -> list[tuple[str, bytes]]:
    out = []
    for piece in pieces:
        out += p.feed(piece)
    return out + p.flush()


def test_basic_and_done():
    ev = feed_all(SSEParser(), [b'data: {"a":1}\n\ndata: [DONE]\n\n'])
    assert ev == [("message", b'{"a":1}'), ("message", b"[DONE]")]


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_line_endings(sep):
    stream = b"data: x" + sep + sep + b"data: y" + sep + sep
    assert feed_all(SSEParser(), [stream]) == [("message", b"x"), ("message", b"y")]


def test_crlf_split_across_reads():
    p = SSEParser()
    ev = p.feed(b"data: a\r")
    ev += p.feed(b"\n\r")
    ev += p.feed(b"\ndata: b\r\n\r\n")
    assert ev == [("message", b"a"), ("message", b"b")]


def test_byte_by_byte():
    stream = b': ping\n\nevent: error\ndata: {"error": 1}\n\ndata: z\n\n'
    ev = feed_all(SSEParser(), [bytes([b]) for b in stream])
    assert ev == [("error", b'{"error": 1}'), ("message", b"z")]


def test_multiline_data_comments_and_unknown_fields():
    stream = b": keep-alive\nid: 7\nretry: 100\nfoo\ndata: line1\ndata:line2\ndata\n\n"
    assert feed_all(SSEParser(), [stream]) == [("message", b"line1\nline2\n")]


def test_comment_only_event_dispatches_nothing():
    assert feed_all(SSEParser(), [b":ping\n\n:ping\n\n"]) == []


def test_truncated_tail_is_pending():
    p = SSEParser()
    assert p.feed(b'data: {"a":1}\n\ndata: {"b"') == [("message", b'{"a":1}')]
    assert p.pending == b'data: {"b"'


def _handler(chat=False):
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=chat, stream=True, keep_text=True)
    h.on_headers(200, 1)
    return rec, h


def _ev(obj) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def test_usage_only_chunk_and_role_chunk_are_not_content():
    rec, h = _handler(chat=True)
    h.on_data(_ev({"choices": [{"delta": {"role": "assistant", "content": ""}}]}), 10)
    h.on_data(_ev({"choices": [{"delta": {"content": "Hi"}}]}), 20)
    h.on_data(_ev({"choices": [{"delta": {"reasoning_content": "think"}}]}), 25)
    h.on_data(_ev({"choices": [{"delta": {}, "finish_reason": "length"}]}), 30)
    h.on_data(_ev({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}), 40)
    h.on_data(b"data: [DONE]\n\n", 50)
    h.on_end(60)
    assert rec.ok and rec.error_kind is None
    assert rec.t_first == 20 and rec.t_last == 25 and rec.t_done == 50
    assert rec.chunk_times == [20, 25]
    assert rec.osl_server == 2 and rec.isl == 5
    assert rec.finish_reason == "length"
    assert rec.output_text == "Hithink"


def test_error_event_is_recorded():
    rec, h = _handler()
    assert h.on_data(b'event: error\ndata: {"message": "overloaded"}\n\n', 5) is False
    assert rec.error_kind == "server_error_event" and not rec.ok


def test_error_object_in_data():
    rec, h = _handler()
    h.on_data(_ev({"error": {"message": "context too long", "code": 400}}), 5)
    assert rec.error_kind == "server_error_event" and "context too long" in rec.error


def test_malformed_json():
    rec, h = _handler()
    assert h.on_data(b'data: {"choices": [\n\n', 5) is False
    assert rec.error_kind == "malformed_stream"


def test_stream_without_done_but_finish_reason_is_ok():
    rec, h = _handler()
    h.on_data(_ev({"choices": [{"text": "a", "finish_reason": "stop"}]}), 5)
    h.on_end(6)
    assert rec.ok


def test_stream_cut_mid_event_is_malformed():
    rec, h = _handler()
    h.on_data(_ev({"choices": [{"text": "a"}]}) + b'data: {"cho', 5)
    h.on_end(6)
    assert rec.error_kind == "malformed_stream"


def test_http_error_body_message():
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=False, stream=True, keep_text=False)
    h.on_headers(429, 1)
    h.on_data(b'{"error": {"message": "slow down"}}', 2)
    h.on_end(3)
    assert rec.error_kind == "http_429" and rec.error == "slow down" and rec.http_status == 429


def test_continuous_usage_gives_chunk_tokens():
    rec, h = _handler()
    h.on_data(_ev({"choices": [{"text": "ab"}], "usage": {"completion_tokens": 2}}), 5)
    h.on_data(_ev({"choices": [{"text": "c"}], "usage": {"completion_tokens": 3}}), 6)
    h.on_data(b"data: [DONE]\n\n", 7)
    h.on_end(8)
    assert rec.chunk_tokens == [2, 1]


def test_non_stream_response():
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=False, stream=False, keep_text=True)
    h.on_headers(200, 1)
    h.on_data(orjson.dumps({"choices": [{"text": "abc", "finish_reason": "length"}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 4}}), 9)  # fmt: skip
    h.on_end(10)
    assert rec.ok and rec.t_first == rec.t_last == 10 and rec.osl_server == 4


def test_any_split_gives_the_same_events():
    import random

    stream = (
        b'data: {"a":1}\n\n: ping\n\ndata: {"b":2}\n\nevent: error\ndata: e1\ndata: e2\n\n'
        b"id: 3\ndata: x\n\n\n\ndata: y\r\n\r\ndata:z\n\ndata: [DONE]\n\n"
    )
    reference = SSEParser()._feed_lines(stream)
    assert [d for _, d in reference] == [
        b'{"a":1}',
        b'{"b":2}',
        b"e1\ne2",
        b"x",
        b"y",
        b"z",
        b"[DONE]",
    ]
    rng = random.Random(0)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 12)))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        assert feed_all(SSEParser(), pieces) == reference


# -- untrusted input: bounded, linear, never raising -------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from accelbench.client.sse import SSEError  # noqa: E402
from accelbench.metrics.records import ERROR_KINDS  # noqa: E402

_LINES = st.sampled_from(
    [b'data: {"a":1}', b"data:x", b"data", b": ping", b"event: error", b"id: 1", b"", b"foo"]
)
_EOLS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LINES, _EOLS), max_size=30), st.data())
def test_any_split_of_any_stream_gives_the_same_events(lines, data):
    stream = b"".join(line + eol for line, eol in lines)
    whole = feed_all(SSEParser(), [stream])
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(stream) - 1)), max_size=15)))
    cuts = [c for c in cuts if 0 < c < len(stream)]
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert feed_all(SSEParser(), pieces) == whole


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=12), st.booleans())
def test_random_bytes_never_raise(pieces, chat):
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=chat, stream=True, keep_text=True, max_event_bytes=256)
    h.on_headers(200, 1)
    for i, p in enumerate(pieces):
        if not h.on_data(b"data: " + p + b"\n\n" if i % 2 else p, i + 2):
            break
    h.on_end(99)
    assert rec.ok or rec.error_kind in ERROR_KINDS


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["choices", "text", "delta", "content", "usage",
                                         "completion_tokens", "prompt_tokens", "finish_reason"]),
                        c, max_size=4), max_leaves=12), st.booleans())  # fmt: skip
def test_random_json_shapes_never_raise(doc, chat):
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=chat, stream=True, keep_text=True)
    h.on_headers(200, 1)
    h.on_data(b"data: " + orjson.dumps({"choices": [doc]}) + b"\n\n", 2)
    h.on_data(b"data: " + orjson.dumps(doc) + b"\n\n", 3)
    h.on_end(4)
    assert rec.ok or rec.error_kind in ERROR_KINDS


def test_event_size_is_bounded_and_parsing_linear():
    import time

    for first in (b"data: ", b"data: x\n"):  # one endless line; many lines, no blank line
        p = SSEParser()
        p.feed(first)
        piece = b"y" * 4096 if first == b"data: " else b"data: y\n" * 512
        t0 = time.process_time()
        with pytest.raises(SSEError, match="larger than 16777216 bytes"):
            for _ in range(10_000):  # 40 MiB in 4 KiB reads
                p.feed(piece)
        # linear: ~20 ms; the old buffer copied the whole event on every read (minutes)
        assert time.process_time() - t0 < 2.0
    # a 10 MB event within the limit is parsed whole, in linear time
    p = SSEParser()
    big = b"data: " + b"z" * 10_000_000 + b"\n\n"
    t0 = time.process_time()
    out = [e for i in range(0, len(big), 4096) for e in p.feed(big[i : i + 4096])]
    assert time.process_time() - t0 < 2.0
    assert len(out) == 1 and len(out[0][1]) == 10_000_000


def test_oversized_event_fails_the_request():
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=False, stream=True, keep_text=False, max_event_bytes=1000)
    h.on_headers(200, 1)
    assert h.on_data(b"data: " + b"x" * 600, 2) is True
    assert h.on_data(b"x" * 600, 3) is False
    assert rec.error_kind == "malformed_stream" and "larger than 1000 bytes" in rec.error


# -- the one-event-per-read fast paths decide exactly as the general path -----------------
from accelbench.client import http1  # noqa: E402

_CONTENT = [
    {"choices": [{"text": " tok", "finish_reason": None}]},
    {"choices": [{"delta": {"content": " tok"}, "finish_reason": None}]},
    {"choices": [{"delta": {"content": "x", "reasoning_content": "r"}}]},
    {"choices": [{"delta": {"reasoning": "r"}}]},
    {"choices": [{"text": "", "finish_reason": None}]},
    {"choices": [{"text": "end", "finish_reason": "length"}]},
    {"choices": [{"text": "u"}], "usage": {"completion_tokens": 3}},
    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}},
    {"choices": [{"text": 5}]},
    {"choices": [{"delta": "x"}]},
    {"error": {"message": "boom"}},
]
_EVENT = st.one_of(
    st.sampled_from([b"data: " + orjson.dumps(d) + b"\n\n" for d in _CONTENT]),
    st.sampled_from(
        [
            b"data: [DONE]\n\n",
            b"data: {bad\n\n",
            b": ping\n\n",
            b"data: 5\n\n",
            b'data: {"choices":[{"text":"a\rb"}]}\n\n',
            b"data: \n\n",
        ]
    ),  # fmt: skip
    st.builds(
        lambda d: b"data: " + orjson.dumps({"choices": [d]}) + b"\n\n",
        st.dictionaries(
            st.sampled_from(["text", "delta", "finish_reason", "content"]),
            st.none() | st.text(max_size=3) | st.integers(-9, 9),
            max_size=3,
        ),
    ),  # fmt: skip
)
_FIELDS = ("ok", "error_kind", "error", "t_first", "t_last", "t_done", "chunk_times",
           "chunk_tokens", "finish_reason", "osl_server", "isl", "output_text", "http_status")  # fmt: skip


class _NoLoop:
    """The one loop method the arrival queue uses; the test drains by hand."""

    def call_soon(self, fn):
        pass


def _run_transport(events: list[bytes], chat: bool, clock: list[int], mode: str) -> tuple:
    """Feed a chunked response and return the record's marks. ``mode``: ``fast`` one
    chunk per read (the fast paths); ``split`` each read in two pieces at one instant, cut
    inside the event (the general paths of the transport and of the handler); ``whole``
    the whole body in one read; ``split-same`` as ``split`` but every read at one instant;
    ``queued`` as ``fast`` through an arrival queue drained after each read."""
    rec = RequestRecord(idx=0)
    h = ResponseHandler(rec, chat=chat, stream=True, keep_text=True)
    proto = http1.HTTP1Protocol()
    proto._sink, proto._state = h, 1
    queue = None
    if mode == "queued":  # as in a pool: stamped on arrival, parsed after the I/O phase
        queue = proto._queue = http1.ArrivalQueue(_NoLoop())  # type: ignore[arg-type]
    proto.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunks = [b"%x\r\n%b\r\n" % (len(ev), ev) for ev in events] + [b"0\r\n\r\n"]
    if mode == "whole":
        chunks = [b"".join(chunks)]
    for i, chunk in enumerate(chunks):
        clock[0] = 10 * (i + 1) if mode in ("fast", "split", "queued") else 10
        cut = chunk.find(b"\r\n") + 5
        for piece in (chunk[:cut], chunk[cut:]) if mode.startswith("split") else (chunk,):
            if proto._sink is None:
                break
            proto.data_received(piece)
        clock[0] = -1  # parsing later must not change the arrival time
        if queue is not None:
            queue.drain()
    if proto._sink is not None:
        proto.connection_lost(None)
    return tuple(getattr(rec, f) for f in _FIELDS)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENT, max_size=8), st.booleans())
def test_fast_paths_decide_as_the_general_path(events, chat):
    clock = [0]
    real = http1._monotonic_ns
    http1._monotonic_ns = lambda: clock[0]  # the transport's arrival clock, under test
    try:
        fast, split, whole, same = (
            _run_transport(events, chat, clock, mode)
            for mode in ("fast", "split", "whole", "split-same")
        )
        queued = _run_transport(events, chat, clock, "queued")
    finally:
        http1._monotonic_ns = real
    assert fast == split == queued
    assert whole == same  # several events in one read: as if each came alone
    assert fast[0] or fast[1] in ERROR_KINDS
