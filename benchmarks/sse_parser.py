"""Micro-benchmark: CPU cost of the receive path per event: the HTTP/1.1 transport
(chunked de-framing, then the rest), the SSE parser, the OpenAI stream handler.

    .venv/bin/python benchmarks/sse_parser.py

Feeds the completion events the reference server writes (``data: {...}\\n\\n``, ~180 bytes)
in the two shapes a client meets: one event per read (a paced stream) and 64 KiB reads
holding hundreds of events (max-throughput), and reports the best of several repeats in
nanoseconds of CPU per event. Use it to check the parser's hot path before and after a
change (it measures CPU time, so a busy machine inflates it less than wall time).
"""

from __future__ import annotations

import time

import orjson

from accelbench.client.http1 import HTTP1Protocol
from accelbench.client.openai import ResponseHandler
from accelbench.client.sse import SSEParser
from accelbench.metrics.records import RequestRecord


def _event(i: int) -> bytes:
    doc = {"id": "cmpl-x-1", "object": "text_completion", "created": 1700000000,
           "model": "reference", "choices": [{"index": 0, "text": " token", "logprobs": None,
                                              "finish_reason": None}]}  # fmt: skip
    return b"data: " + orjson.dumps(doc) + b"\n\n"


def _best(fn, repeats: int = 15) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        n = fn()
        best = min(best, (time.process_time() - t0) / n)
    return best * 1e9


def main() -> None:
    n = 20000
    events = [_event(i) for i in range(n)]
    blob = b"".join(events)
    reads = [blob[i : i + 65536] for i in range(0, len(blob), 65536)]

    def parser_single() -> int:
        p = SSEParser()
        for e in events:
            p.feed(e)
        return n

    def parser_bulk() -> int:
        p = SSEParser()
        for r in reads:
            p.feed(r)
        return n

    def handler(chunks: list[bytes]):
        def go() -> int:
            h = ResponseHandler(RequestRecord(idx=0), chat=False, stream=True, keep_text=False)
            h.on_headers(200, 0)
            for i, c in enumerate(chunks):
                h.on_data(c, i)
            return n

        return go

    def transport(chunks: list[bytes]):
        """The whole receive path of the HTTP/1.1 transport: chunked de-framing, SSE,
        the handler; one response of all the events (no socket, no event loop)."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" \
               b"Transfer-Encoding: chunked\r\n\r\n"  # fmt: skip

        def go() -> int:
            h = ResponseHandler(RequestRecord(idx=0), chat=False, stream=True, keep_text=False)
            proto = HTTP1Protocol()
            proto._sink, proto._state = h, 1
            proto.data_received(head)
            for c in chunks:
                proto.data_received(c)
            return n

        return go

    framed = [b"%x\r\n%b\r\n" % (len(e), e) for e in events]
    fblob = b"".join(framed)
    freads = [fblob[i : i + 65536] for i in range(0, len(fblob), 65536)]
    for name, fn in (("transport, one event per read", transport(framed)),
                     ("transport, 64 KiB reads", transport(freads)),
                     ("parser, one event per read", parser_single),
                     ("parser, 64 KiB reads", parser_bulk),
                     ("handler, one event per read", handler(events)),
                     ("handler, 64 KiB reads", handler(reads))):  # fmt: skip
        print(f"{name:32s} {_best(fn):8.0f} ns/event")


if __name__ == "__main__":
    main()
