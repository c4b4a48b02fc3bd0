"""The reference server under requests a real server meets: a huge max_tokens is refused
(not built in memory), a long response is made token by token, and SIGTERM always works."""

from __future__ import annotations

import json
import signal
import socket
import time
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.reference.server import MAX_TOKENS_CAP


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_huge_or_bad_max_tokens_is_refused(reference_server):
    srv = reference_server("--max-throughput")
    for bad in (2_000_000_000, MAX_TOKENS_CAP + 1, -3, "12", 1.5):
        status, doc = post(srv.url, {"prompt": "x", "max_tokens": bad})
        assert status == 400 and "max_tokens must be an integer in [1, 1000000]" in str(doc)
    assert post(srv.url, {"prompt": "x", "max_tokens": 3})[0] == 200
    assert post(srv.url, ["not", "an", "object"])[0] == 400
    assert srv.proc.poll() is None  # still serving


def test_long_response_is_made_lazily_and_sigterm_stops_it(reference_server):
    """A million-token stream (~150 MB) to a client that reads slowly: the server holds a
    few batches, not the response, and exits on SIGTERM in the middle of it."""
    srv = reference_server("--max-throughput")
    base = rss_mib(srv.proc.pid)
    body = json.dumps({"prompt": "x", "max_tokens": MAX_TOKENS_CAP, "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b"
              % (len(body), body))  # fmt: skip
    got = 0
    while got < 5_000_000:  # read 5 MB of it, slowly enough that the server must wait
        got += len(s.recv(1 << 16))
    time.sleep(0.5)
    grown = rss_mib(srv.proc.pid) - base
    assert grown < 40, f"server grew by {grown:.0f} MiB"
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(5)
    assert time.monotonic() - t0 < 2.0
    s.close()


def test_paced_stream_of_many_tokens_keeps_exact_count(reference_server):
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "0")
    req = urllib.request.Request(
        srv.url + "/v1/completions",
        data=json.dumps({"prompt": "x", "max_tokens": 5000, "stream": True,
                         "stream_options": {"include_usage": True}}).encode(),
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    events = [ln[6:] for ln in text.split("\n") if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    assert usage["completion_tokens"] == 5000 == len(events) - 2
    assert json.loads(events[-3])["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--device-memory-total", "-1"), ("--device-memory-total", "0"),
     ("--device-memory-warmup", "nan"), ("--device-memory-warmup", "1e300")],
)  # fmt: skip
def test_bad_device_memory_knobs_are_refused(option: str, value: str) -> None:
    """Were accepted: a negative device total or a NaN ramp served as /metrics gauges."""
    from accelbench.errors import UsageError
    from accelbench.reference.server import StressKnobs

    kw = {"total": "device_memory_total_bytes", "warmup": "device_memory_warmup_bytes"}
    with pytest.raises(UsageError, match=option):
        StressKnobs(**{kw[option.rsplit("-", 1)[1]]: float(value)}).validate()


def _exchange(port: int, raw: bytes) -> bytes:
    """Send raw request bytes, half-close, read until the server closes (bounded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    "content_length",
    [b"-63", b"+5", b"5, 5", b" 0x10", b"99999999999999999999", b"1 2"],
)
def test_ambiguous_content_length_is_refused_and_the_server_keeps_serving(
    reference_server, content_length
):
    """The reference server frames requests as the shadow proxy does (httpframing, RFC
    9112): a Content-Length that is not one field of digits is refused and the connection
    closed. ``-63`` had re-read the server's own buffer (a negative slice) and hung it."""
    srv = reference_server("--max-throughput")
    raw = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + content_length
           + b"\r\n\r\n" + b'{"prompt": "x", "max_tokens": 3}')  # fmt: skip
    answer = _exchange(srv.port, raw)
    assert answer.split(b"\r\n", 1)[0] in (b"HTTP/1.1 400 Bad Request",
                                           b"HTTP/1.1 413 Content Too Large")  # fmt: skip
    assert answer.count(b"HTTP/1.1 ") == 1  # answered once, never as a request
    assert post(srv.url, {"prompt": "x", "max_tokens": 3})[0] == 200


def _request(body: dict, rid: bytes | None = None) -> bytes:
    data = json.dumps(body).encode()
    extra = b"X-Request-Id: " + rid + b"\r\n" if rid is not None else b""
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(data) + data)  # fmt: skip


def _responses(s: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """Read ``count`` responses (head, body: a chunked body decoded) off ``s``."""
    buf, out = b"", []

    def need(n: int) -> None:
        nonlocal buf
        while len(buf) < n:
            data = s.recv(65536)
            assert data, "the server closed the connection"
            buf += data

    def line() -> bytes:
        nonlocal buf
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        ln, _, buf = buf.partition(b"\r\n")
        return ln

    for _ in range(count):
        while b"\r\n\r\n" not in buf:
            need(len(buf) + 1)
        head, _, buf = buf.partition(b"\r\n\r\n")
        fields = dict(ln.lower().split(b": ", 1) for ln in head.split(b"\r\n")[1:])
        body = b""
        if b"content-length" in fields:
            n = int(fields[b"content-length"])
            need(n)
            body, buf = buf[:n], buf[n:]
        else:
            while size := int(line(), 16):
                need(size + 2)
                body, buf = body + buf[:size], buf[size + 2 :]
            assert line() == b""
        out.append((head, body))
    assert buf == b"", f"more than {count} responses: {buf[:80]!r}"
    return out


def _ids(body: bytes) -> list[str]:
    """The ``id`` of a JSON body, or of every event of an SSE body (each must parse)."""
    if not body.startswith(b"data: "):
        return [json.loads(body)["id"]]
    events = [e[6:] for e in body.split(b"\n\n") if e]
    assert events[-1] == b"[DONE]"
    return [json.loads(e)["id"] for e in events[:-1]]


_REQUEST_IDS = (
    st.text(
        st.sampled_from([chr(c) for c in [9, *range(0x20, 0x7F), *range(0x80, 0x100)]]),
        min_size=1,
        max_size=40,
    )
    .map(lambda t: t.strip(" \t"))
    .filter(bool)
)  # fmt: skip  (what a header value may hold, RFC 9110 5.5)


def test_any_request_id_gives_well_formed_events(reference_server) -> None:
    """The X-Request-Id a client sends becomes the events' ``id``: JSON-quoted. It was
    pasted in raw, so ``a"b`` made every event of the stream malformed JSON."""
    srv = reference_server("--ttft-ms", "0", "--itl-ms", "0")

    @settings(max_examples=40, deadline=None)
    @given(rid=_REQUEST_IDS, chat=st.booleans())
    def prop(rid: str, chat: bool) -> None:
        path = b"/v1/chat/completions" if chat else b"/v1/completions"
        body = {"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"}
        raw = _request({**body, "max_tokens": 3, "stream": True,
                        "stream_options": {"include_usage": True}}, rid.encode("latin-1"))  # fmt: skip
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(raw.replace(b"/v1/completions", path, 1))
            [(head, events)] = _responses(s, 1)
        assert head.startswith(b"HTTP/1.1 200")
        prefix = "chatcmpl-" if chat else "cmpl-"
        # the token events carry the prefixed id (chat: the role first), usage the id
        assert _ids(events) == [prefix + rid] * (4 if chat else 3) + [rid]

    prop()


def test_pipelined_requests_are_answered_in_order(reference_server) -> None:
    """Requests pipelined on one connection are answered in the order they came (RFC 9112
    9.3.2), streamed or not. A non-streamed answer was written when its delay was over:
    ``max_tokens`` 100 then 1 were answered 1 first, and one still due when a streamed
    request began was written into the middle of that stream."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")

    @settings(max_examples=15, deadline=None)
    @given(st.lists(st.tuples(st.integers(1, 30), st.booleans()), min_size=2, max_size=5))
    def prop(reqs: list[tuple[int, bool]]) -> None:
        raw = b"".join(_request({"prompt": "x", "max_tokens": n, "stream": stream}, b"r%d" % i)
                       for i, (n, stream) in enumerate(reqs))  # fmt: skip
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(raw)
            got = _responses(s, len(reqs))
        for i, ((n, stream), (head, body)) in enumerate(zip(reqs, got, strict=True)):
            assert head.startswith(b"HTTP/1.1 200"), head
            assert _ids(body) == ([f"cmpl-r{i}"] * n if stream else [f"r{i}"])

    prop()


def test_bytes_sent_beside_a_long_stream_wait_in_the_kernel(reference_server):
    """While a request is answered, what its client sends next is not read into the
    server's memory without bound: 1 GB sent beside a million-token stream had grown the
    server by 1.4 GB (one client could exhaust the memory every client is served from).
    Other clients are answered meanwhile."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    base = rss_mib(srv.proc.pid)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(_request({"prompt": "x", "max_tokens": MAX_TOKENS_CAP, "stream": True}))
        s.settimeout(2)
        junk, sent = b"x" * (1 << 20), 0
        try:
            while sent < 256:  # MiB: stops when the kernel's buffers are full
                s.sendall(junk)
                sent += 1
        except TimeoutError:
            pass
        time.sleep(1)  # what the server would read, it has read
        grown = rss_mib(srv.proc.pid) - base
        assert grown < 64, f"the server grew by {grown:.0f} MiB ({sent} MiB sent)"
        status, _ = post(srv.url, {"prompt": "x", "max_tokens": 2})
        assert status == 200


def _closed(s: socket.socket) -> bool:
    """Nothing more comes on ``s``: the server closed it."""
    return s.recv(65536) == b""


def test_a_request_cut_short_or_connection_close_is_answered_then_closed(
    reference_server,
) -> None:
    """After its answered requests, a client that ends its input inside a request (cut
    anywhere) gets a 400 saying so, then the server closes; one that asks ``Connection:
    close`` gets that request's answer, then the server closes. The cut request got no
    answer; ``Connection: close`` was ignored (the connection stayed open and the next
    request on it was answered). The end of input while an answer is due is the client
    gone, as before (a client that timed out closes so; the ground truth says it)."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")

    @settings(max_examples=30, deadline=None)
    @given(
        reqs=st.lists(st.tuples(st.integers(1, 20), st.booleans()), min_size=1, max_size=3),
        ending=st.sampled_from(["eof", "close"]),
        cut=st.floats(0, 1, exclude_max=True),
    )
    def prop(reqs: list[tuple[int, bool]], ending: str, cut: float) -> None:
        raws = [_request({"prompt": "x", "max_tokens": n, "stream": stream}, b"r%d" % i)
                for i, (n, stream) in enumerate(reqs)]  # fmt: skip
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            if ending == "close":
                raws[-1] = raws[-1].replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
                s.sendall(b"".join(raws) + _request({"prompt": "never answered"}))
                got = _responses(s, len(reqs))
            else:  # the answers first, then the last request cut anywhere and the end
                s.sendall(b"".join(raws[:-1]))
                got = _responses(s, len(reqs) - 1)
                keep = int(len(raws[-1]) * cut)
                s.sendall(raws[-1][:keep])
                s.shutdown(socket.SHUT_WR)
                if keep:
                    [(head, body)] = _responses(s, 1)
                    assert head.startswith(b"HTTP/1.1 400") and b"cut short" in body
            assert _closed(s)
        for i, (head, body) in enumerate(got):
            n, stream = reqs[i]
            assert head.startswith(b"HTTP/1.1 200"), head
            assert _ids(body) == ([f"cmpl-r{i}"] * n if stream else [f"r{i}"])

    prop()


def test_expect_100_continue_is_answered(reference_server) -> None:
    """A head with ``Expect: 100-continue`` is told to go on (RFC 9110 10.1.1); it was
    not, so a client waiting for it (curl waits 1 s) had that added to every request."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    raw = _request({"prompt": "x", "max_tokens": 2}, b"e")
    head, _, body = raw.partition(b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(head + b"\r\nExpect: 100-continue\r\n\r\n")
        s.settimeout(5)
        assert s.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        [(head, answer)] = _responses(s, 1)
    assert head.startswith(b"HTTP/1.1 200") and _ids(answer) == ["e"]


def test_a_prompt_of_token_ids_is_counted_as_its_tokens(reference_server) -> None:
    """The server's own /tokenize ids sent back as the prompt are that many prompt tokens
    (they were read as the text of their digits: [104, 105] was 6 tokens)."""
    srv = reference_server("--max-throughput")
    req = urllib.request.Request(srv.url + "/tokenize", data=b'{"content": "h\\u00e9 there"}')
    with urllib.request.urlopen(req, timeout=10) as r:
        ids = json.loads(r.read())["tokens"]
    status, doc = post(srv.url, {"prompt": ids, "max_tokens": 1})
    assert status == 200 and doc["usage"]["prompt_tokens"] == len(ids) == 9
    status, doc = post(srv.url, {"prompt": "x", "max_tokens": 1, "stream": "false"})
    assert status == 400 and "stream must be true or false" in doc["error"]["message"]


_JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-300, 300), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.lists(st.integers(-2, 300), max_size=5),
    st.lists(st.one_of(st.integers(0, 255), st.text(max_size=2), st.booleans()), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip


def _call(url: str, path: str, body: object) -> tuple[int, dict]:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_tokenize_and_detokenize_read_their_fields_as_given_or_refuse(reference_server) -> None:
    """Any JSON value of /tokenize's `content` / `prompt` and /detokenize's `tokens`: the
    tokens of the text given (its UTF-8 bytes) or the text of the bytes given, else a 400
    naming the field. `content: null` was tokenized as the text "None", token 256 read as
    0, "7" and 7.9 as 7, a list of strings as its str()."""
    srv = reference_server("--max-throughput")

    @settings(max_examples=150, deadline=None)
    @given(field=st.sampled_from(["content", "prompt", "tokens"]), value=_JSON_VALUES)
    def prop(field: str, value: object) -> None:
        path = "/detokenize" if field == "tokens" else "/tokenize"
        status, doc = _call(srv.url, path, {field: value})
        if field == "tokens":
            ok = value is None or (isinstance(value, list) and all(
                type(i) is int and 0 <= i <= 255 for i in value))  # fmt: skip
            if ok:
                assert status == 200
                assert doc["content"] == bytes(value or []).decode("utf-8", "replace")
            else:
                assert status == 400 and "tokens must be" in doc["error"]["message"]
            return
        if value is None or isinstance(value, str):
            assert status == 200 and doc["tokens"] == list((value or "").encode())
        else:
            assert status == 400 and "must be a string" in doc["error"]["message"], doc

    prop()


@pytest.mark.parametrize("chat", [False, True])
def test_a_prompt_beyond_the_context_is_refused_before_it_is_hashed(reference_server, chat):
    """A prompt is at most MAX_PROMPT_TOKENS tokens (stress flood's longest); one above is
    a 400 worded as servers word a context overflow (the client's context_exceeded). A
    60 MB prompt was hashed into the prefix cache on the event loop, every other client
    unanswered for 6.3 s."""
    from accelbench.client.openai import says_context_exceeded
    from accelbench.reference.server import MAX_PROMPT_TOKENS

    srv = reference_server("--max-throughput", "--prefix-cache-blocks", "1000000")
    path = "/v1/chat/completions" if chat else "/v1/completions"

    def ask(n: int) -> tuple[int, dict]:
        text = "x" * n
        body = {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
        return _call(srv.url, path, {**body, "max_tokens": 1})

    status, doc = ask(MAX_PROMPT_TOKENS + 1)
    assert status == 400 and says_context_exceeded(doc["error"]["message"]), doc
    status, doc = ask(MAX_PROMPT_TOKENS)
    assert status == 200 and doc["usage"]["prompt_tokens"] == MAX_PROMPT_TOKENS


@pytest.mark.parametrize("keep_alive", [False, True])
def test_an_http10_stream_is_refused_not_sent_chunked(reference_server, keep_alive) -> None:
    """A stream is sent chunked, which a server may not send an HTTP/1.0 request (RFC 9112
    6.1): an HTTP/1.0 client got the chunk-size lines inside its events. Now stream over
    HTTP/1.0 is a 400 saying so; a non-streamed answer is as before."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    extra = b"Connection: keep-alive\r\n" if keep_alive else b""
    for stream, want in ((True, b"HTTP/1.1 400"), (False, b"HTTP/1.1 200")):
        raw = _request({"prompt": "x", "max_tokens": 2, "stream": stream}, b"h")
        raw = raw.replace(b" HTTP/1.1\r\nHost: x\r\n", b" HTTP/1.0\r\n" + extra, 1)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(raw)
            [(head, body)] = _responses(s, 1)
        assert head.startswith(want), head
        assert b"chunked" not in head.lower()
        if stream:
            assert b"stream needs HTTP/1.1" in body


@pytest.mark.parametrize(
    "command",
    [["reference"], ["emulated", "--accelerator", "h100", "--model", "llama-3.1-8b"]],
)
@pytest.mark.parametrize("kind", ["fifo", "directory", "proc"])
def test_a_ground_truth_that_is_no_file_is_refused_at_once(tmp_path, command, kind) -> None:
    """`--ground-truth` is an output file, checked as every output file is
    (validate.output_file): a FIFO blocked the server's start for ever (opened for
    appending, with no reader); /proc/version (writable to root by its mode, refusing
    every write) said 'error:: Invalid argument', naming nothing; now one line naming the
    option, exit 2."""
    import os
    import subprocess
    import sys

    gt = tmp_path / "gt"
    if kind == "fifo":
        os.mkfifo(gt)
    elif kind == "directory":
        gt.mkdir()
    else:
        gt = type(tmp_path)("/proc/version")
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "serve", *command, "--port", "0",
         "--ground-truth", str(gt)],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --ground-truth ") and r.stderr.count("\n") == 1
