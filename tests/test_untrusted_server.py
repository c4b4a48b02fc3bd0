"""A hostile server (real sockets on 127.0.0.1) against both transports and a whole run:
wrong-shaped JSON, impossible token counts, huge and endless events. Every case is one
error record of the right kind, never a crash, a false "disconnect" or a stalled loop."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from accelbench.client.session import OpenAIClient
from accelbench.client.sse import MAX_EVENT_BYTES
from accelbench.metrics.records import ERROR_KINDS, RequestRecord
from accelbench.runner.benchmark import RunResult, run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.runner.finalize import finalize_run
from hostile_server import HostileServer, sse_events

TRANSPORTS = ["http1", "aiohttp"]


def send_one(url: str, transport: str, chat: bool = False, stream: bool = True) -> RequestRecord:
    async def go() -> RequestRecord:
        client = OpenAIClient(url, endpoint="chat" if chat else "completions", stream=stream,
                              transport=transport, timeout_s=20)  # fmt: skip
        rec = RequestRecord(idx=0, request_id="r0")
        try:
            await client.send(rec, {"model": "hostile", "prompt": "x", "stream": stream})
        finally:
            await client.close()
        return rec

    return asyncio.run(go())


WRONG_SHAPES = [
    ({"choices": [5]}, False, "choices[0] is not an object"),
    ({"choices": {}}, False, "choices is not a list"),
    ({"choices": {"a": 1}}, False, "choices is not a list"),
    ({"choices": "abc"}, False, "choices is not a list"),
    ({"choices": [{"text": 7}]}, False, "text is not a string"),
    ({"choices": [{"text": ["a"]}]}, False, "text is not a string"),
    ({"choices": [{"text": "a", "finish_reason": 3}]}, False, "finish_reason is not a string"),
    ({"choices": [{"delta": ["a"]}]}, True, "delta is not an object"),
    ({"choices": [{"delta": {"content": {"x": 1}}}]}, True, "content is not a string"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("doc, chat, reason", WRONG_SHAPES)
def test_wrong_shape_is_malformed_stream(transport, doc, chat, reason, caplog):
    caplog.set_level(logging.DEBUG, logger="asyncio")
    with HostileServer(lambda rid: sse_events(doc)) as srv:
        rec = send_one(srv.url, transport, chat=chat)
    assert rec.error_kind == "malformed_stream", rec.error
    assert reason in rec.error
    assert orjson.dumps(doc)[:10].decode() in rec.error  # the event's first bytes are kept
    assert "Fatal error" not in caplog.text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_wrong_shape_non_stream(transport):
    body = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
    body += b'{"choices": [42]}'
    with HostileServer(lambda rid: body) as srv:
        rec = send_one(srv.url, transport, stream=False)
    assert rec.error_kind == "malformed_stream" and "choices[0]" in rec.error


BAD_USAGE = [
    (b'"12"', '"12"'),
    (b"1000000000000000000000000000000", "1e+30"),
    (b"-5", "-5"),
    (b"2.5", "2.5"),
    (b"true", "true"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("raw, shown", BAD_USAGE)
def test_impossible_usage_is_malformed_usage(transport, raw, shown):
    body = (b'data: {"choices":[{"text":" a","finish_reason":"length"}]}\n\n'
            b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":' + raw
            + b"}}\n\ndata: [DONE]\n\n")  # fmt: skip
    with HostileServer(lambda rid: body) as srv:
        rec = send_one(srv.url, transport)
    assert rec.error_kind == "malformed_usage" and not rec.ok
    assert "usage.completion_tokens" in rec.error and shown in rec.error  # the raw value
    assert rec.chunk_times  # what was measured before is kept


def test_usage_not_an_object_and_counts_going_down():
    with HostileServer(lambda rid: sse_events({"choices": [], "usage": "lots"})) as srv:
        rec = send_one(srv.url, "http1")
    assert rec.error_kind == "malformed_usage" and '"lots"' in rec.error
    marks = sse_events({"choices": [{"text": "a"}], "usage": {"completion_tokens": 5}},
                       {"choices": [{"text": "b"}], "usage": {"completion_tokens": 2}})  # fmt: skip
    with HostileServer(lambda rid: marks) as srv:
        rec = send_one(srv.url, "http1")
    assert rec.error_kind == "malformed_usage" and "went down from 5 to 2" in rec.error


def test_run_with_hostile_usage_completes_and_summarizes(tmp_path: Path):
    """The reported crash: a string / 10^30 / negative count used to leave run.json at
    `running` and make `summarize` fail forever."""
    bad = [b'"12"', b"1000000000000000000000000000000", b"-7"]

    def respond(rid: str) -> bytes:
        i = int(rid.rsplit("-", 1)[1])
        if i % 2:
            return sse_events({"choices": [{"text": " x", "finish_reason": "length"}]},
                              {"choices": [], "usage": {"prompt_tokens": 4,
                                                        "completion_tokens": 1}})  # fmt: skip
        raw = bad[(i // 2) % 3]
        return (
            b'data: {"choices":[{"text":" x","finish_reason":"length"}]}\n\n'
            b'data: {"choices":[],"usage":{"completion_tokens":' + raw + b"}}\n\n"
        )

    with HostileServer(respond) as srv:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "run"), concurrency=2,
                              num_requests=12, telemetry=False,
                              workload=WorkloadConfig(isl=4, osl=1, tokenizer=None))  # fmt: skip
        run_dir = run_benchmark(cfg, progress=False).directory
    s = json.loads((run_dir / "summary.json").read_text())
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert s["errors"]["by_kind"] == {"malformed_usage": 6}
    assert s["counts"]["completed"] == 6
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    errors = " ".join(r["error"] for r in rows if r["error"])
    assert '"12"' in errors and "1e+30" in errors and "-7" in errors
    again = finalize_run(run_dir)  # summarize works on it
    assert again["errors"]["by_kind"] == {"malformed_usage": 6}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("shape", ["endless_line", "huge_event"])
def test_oversized_event_is_bounded_and_fast(transport, shape):
    size = MAX_EVENT_BYTES + (1 << 20)
    if shape == "endless_line":
        body = b"data: " + b"x" * size  # no line end ever
    else:
        body = b"data: x\n" * (size // 8)  # many lines, never a blank one
    gaps: list[float] = []

    async def go(url: str) -> RequestRecord:
        client = OpenAIClient(url, transport=transport, timeout_s=30)
        rec = RequestRecord(idx=0, request_id="r0")
        stop = False

        async def ticker() -> None:
            while not stop:
                t0 = time.monotonic()
                await asyncio.sleep(0.005)
                gaps.append(time.monotonic() - t0)

        tick = asyncio.ensure_future(ticker())
        try:
            await client.send(rec, {"model": "hostile", "prompt": "x", "stream": True})
        finally:
            stop = True
            await tick
            await client.close()
        return rec

    with HostileServer(lambda rid: body) as srv:
        t0 = time.monotonic()
        rec = asyncio.run(go(srv.url))
        elapsed = time.monotonic() - t0
    assert rec.error_kind == "malformed_stream" and "larger than" in rec.error
    assert elapsed < 5.0
    # the event loop kept running: no read stalled it for long (quadratic buffering did)
    assert max(gaps) < 0.5, max(gaps)


def test_error_kinds_are_declared():
    assert "malformed_usage" in ERROR_KINDS and "malformed_stream" in ERROR_KINDS


# -- the start-up probe is retried -------------------------------------------------------
def _result(url: str, tmp: Path, name: str = "run", **kw) -> RunResult:
    cfg = BenchmarkConfig(url=url, out_dir=str(tmp / name), concurrency=1, num_requests=2,
                          telemetry=False, workload=WorkloadConfig(isl=4, osl=2), **kw)  # fmt: skip
    return run_benchmark(cfg, progress=False, log=lambda m: None)


def _run(url: str, tmp: Path, name: str = "run", **kw) -> Path:
    return _result(url, tmp, name, **kw).directory


def test_probe_faults_are_retried(tmp_path):
    good = lambda rid: sse_events({"choices": [{"text": "a", "finish_reason": "length"}]})  # noqa: E731
    with HostileServer(good, probe_failures=2) as srv:
        t0 = time.monotonic()
        run_dir = _run(srv.url, tmp_path)
        waited = time.monotonic() - t0
    assert json.loads((run_dir / "summary.json").read_text())["counts"]["completed"] == 2
    assert waited >= 1.5  # backoff 0.5 s, then 1 s


def test_probe_that_keeps_failing_says_why_in_one_line(tmp_path):
    from accelbench.errors import AccelbenchError

    with HostileServer(lambda rid: b"", probe_failures=99) as srv:
        t0 = time.monotonic()
        with pytest.raises(AccelbenchError) as err:
            _run(srv.url, tmp_path)
        waited = time.monotonic() - t0
        probes = srv.requests
    msg = str(err.value)
    assert "test request" in msg and "http_5xx" in msg and "tried 5 times over 7.5 s" in msg
    assert "\n" not in msg and probes == 5 and 7.4 <= waited < 20


def test_probe_is_not_retried_when_the_request_is_wrong():
    from accelbench.errors import AccelbenchError
    from accelbench.runner.probe import probe_with_retry

    calls = []

    def send() -> RequestRecord:
        calls.append(1)
        return RequestRecord(idx=-1, error_kind="http_4xx", error="model not found")

    with pytest.raises(AccelbenchError, match="model not found.*tried once"):
        probe_with_retry(send, "http://u:pw@h:1", sleep=lambda s: None)
    assert len(calls) == 1


# -- credentials in the URL ---------------------------------------------------------------
def test_url_credentials_authenticate_and_are_never_written(tmp_path, monkeypatch, capfd):
    import base64

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    good = lambda rid: sse_events({"choices": [{"text": "a", "finish_reason": "length"}]})  # noqa: E731
    secret = "s3cr3t-PASS"
    with HostileServer(good, probe_failures=1) as srv:
        url = srv.url.replace("http://", f"http://bench-user:{secret}@")
        result = _result(url, tmp_path, transport="http1")
        run_dir = result.directory
        _run(url, tmp_path, name="aio", transport="aiohttp")
        auth = set(srv.auth)
    # every request (models, tokenizer, probe, load; both transports) used Basic auth
    assert auth == {"Basic " + base64.b64encode(f"bench-user:{secret}".encode()).decode()}
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["server"]["url"] == meta["config"]["url"] == srv.url.replace("//", "//***@")
    from accelbench.report.terminal import print_run_dir, print_summary

    capfd.readouterr()
    for show in (lambda: print_summary(result), lambda: print_run_dir(run_dir)):
        show()  # the run's result as it ended, and the directory read back
        out = capfd.readouterr()
        assert secret not in out.out + out.err and "***@127.0.0.1" in out.out + out.err


def test_redact_url():
    from accelbench.urls import redact_url, split_credentials

    assert redact_url("http://u:k@h:8/v1") == "http://***@h:8/v1"
    assert redact_url("https://key@h") == "https://***@h"
    assert redact_url("http://h:8/v1?x=1") == "http://h:8/v1?x=1"
    assert split_credentials("http://a%40b:p%3Aw@h:8/v1") == (
        "http://h:8/v1", "Basic " + __import__("base64").b64encode(b"a@b:p:w").decode())  # fmt: skip


def test_config_stores_the_url_display_and_reads_it_back_without_credentials():
    """BenchmarkConfig parses a URL string into an Endpoint (the boundary); its JSON is
    the display form, and read back it sends no made-up credentials but knows they
    must be given again."""
    from accelbench.urls import Endpoint

    cfg = BenchmarkConfig(url="http://u:SECRETMARK@127.0.0.1:8/v1/")
    assert isinstance(cfg.url, Endpoint) and cfg.url.url == "http://127.0.0.1:8/v1"
    assert cfg.url.auth and not cfg.url.needs_credentials
    d = cfg.to_json()
    assert d["url"] == "http://***@127.0.0.1:8/v1" and "SECRETMARK" not in json.dumps(d)
    back = BenchmarkConfig.from_json(d)
    assert back.url is not None and back.url.url == "http://127.0.0.1:8/v1"
    assert back.url.auth is None and back.url.needs_credentials and back.url.headers() == {}
    assert back.to_json()["url"] == d["url"]
    plain = BenchmarkConfig.from_json(BenchmarkConfig(url="http://h:1").to_json())
    assert plain.url == Endpoint.parse("http://h:1") and not plain.url.needs_credentials
    assert BenchmarkConfig.from_json(BenchmarkConfig().to_json()).url is None


# -- token counts the server cannot have (METRICS.md) ---------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from accelbench.client.openai import PROMPT_TOKENS_RATIO, PROMPT_TOKENS_SLACK, ResponseHandler  # noqa: E402
from accelbench.metrics.completion import complete_row  # noqa: E402


def _handle(body: bytes, *, stream: bool = True, max_tokens: int | None = 16,
            isl_planned: int | None = 8) -> RequestRecord:  # fmt: skip
    """One response through the handler alone, as the transport would feed it."""
    rec = RequestRecord(idx=0, request_id="r0", max_tokens=max_tokens, isl_planned=isl_planned)
    h = ResponseHandler(rec, chat=False, stream=stream, keep_text=True)
    h.on_headers(200, 1)
    h.on_data(body, 2)
    h.on_end(3)
    return rec


COUNT = st.one_of(st.none(), st.integers(0, 2**31 - 1), st.integers(0, 40))


@settings(max_examples=300, deadline=None)
@given(chunks=st.integers(0, 20), max_tokens=st.one_of(st.none(), st.integers(1, 64)),
       out=COUNT, inp=COUNT, planned=st.one_of(st.none(), st.integers(1, 5000)),
       stream=st.booleans())  # fmt: skip
def test_a_server_count_is_used_only_where_it_can_be_true(chunks, max_tokens, out, inp,
                                                          planned, stream):  # fmt: skip
    """Over any usage: a successful record's output count is the server's only where it is
    at least 1 and at most the max_tokens sent, else the client's own (the chunks); its
    prompt count the server's only where it is at least 1 and within 8x the plan + 4096,
    else the plan; a rejected count is named in usage_rejected; no content is never ok."""
    usage = {k: v for k, v in (("prompt_tokens", inp), ("completion_tokens", out)) if v is not None}
    if stream:
        body = sse_events(*[{"choices": [{"text": " t"}]}] * chunks,
                          {"choices": [], "usage": usage})  # fmt: skip
    else:
        body = orjson.dumps({"choices": [{"text": " t" * chunks, "finish_reason": "length"}],
                             "usage": usage})  # fmt: skip
    rec = _handle(body, stream=stream, max_tokens=max_tokens, isl_planned=planned)
    if not chunks:
        assert not rec.ok and rec.error_kind == "empty_response"
        return
    assert rec.ok, rec.error
    out_bad = out is not None and (out == 0 or (max_tokens is not None and out > max_tokens))
    in_bad = (inp is not None and planned is not None
              and (inp == 0 or inp > PROMPT_TOKENS_RATIO * planned + PROMPT_TOKENS_SLACK))  # fmt: skip
    assert rec.osl_server == (None if out_bad else out)
    assert (rec.usage_rejected is not None) == (out_bad or in_bad)
    if out_bad:
        assert f"completion_tokens {out}" in (rec.usage_rejected or "")
    if in_bad:
        assert f"prompt_tokens {inp}" in (rec.usage_rejected or "")
    row = complete_row(rec.to_row(), None, save_text=False)
    n = chunks if stream else 1
    assert row["osl"] == (n if out_bad or out is None else out)
    assert row["osl_source"] == ("chunk_count" if out_bad or out is None else "server_usage")
    if inp is not None and not in_bad:
        assert row["isl"] == inp and row["isl_source"] == "server_usage"
    elif planned is not None:
        assert row["isl"] == planned and row["isl_source"] == "planned"


AUDIT_USAGE = [  # the audit's hostile servers (4 chunks of " t", max_tokens 16, 8 planned)
    ("huge_usage", {"prompt_tokens": 2**31 - 1, "completion_tokens": 2**31 - 1},
     "completion_tokens 2147483647 is more than the max_tokens 16 sent"),
    ("usage_gt_max", {"prompt_tokens": 8, "completion_tokens": 16000}, "16000"),
    ("zero_prompt", {"prompt_tokens": 0, "completion_tokens": 4}, "prompt_tokens 0"),
]  # fmt: skip


@pytest.mark.parametrize("name, usage, words", AUDIT_USAGE, ids=[c[0] for c in AUDIT_USAGE])
def test_audit_usage_is_not_taken_as_fact(transport_name, name, usage, words):
    body = sse_events(*[{"choices": [{"text": " t"}]}] * 4, {"choices": [], "usage": usage})

    async def go(url: str) -> RequestRecord:
        client = OpenAIClient(url, transport=transport_name, timeout_s=20)
        rec = RequestRecord(idx=0, request_id="r0", max_tokens=16, isl_planned=8)
        try:
            await client.send(rec, {"model": "m", "prompt": "x", "stream": True, "max_tokens": 16})
        finally:
            await client.close()
        return rec

    with HostileServer(lambda rid: body) as srv:
        rec = asyncio.run(go(srv.url))
    assert rec.ok and words in (rec.usage_rejected or ""), rec.usage_rejected
    row = complete_row(rec.to_row(), None, save_text=False)
    assert row["osl"] <= 16 and row["isl"] in (8, usage["prompt_tokens"]) and row["isl"] <= 8


@pytest.fixture(params=TRANSPORTS)
def transport_name(request):
    return request.param


def test_the_max_tokens_bound_is_what_the_body_sent():
    """A body (a shadow caller's, a trace's) may carry both names: the bound is the larger."""
    from accelbench.client.openai import sent_max_tokens

    assert sent_max_tokens({"max_tokens": 16}) == 16
    assert sent_max_tokens({"max_tokens": 16, "max_completion_tokens": 64}) == 64
    assert sent_max_tokens({"max_tokens": "16"}) is None and sent_max_tokens({}) is None


@pytest.mark.parametrize("stream", [True, False])
def test_usage_without_content_is_an_empty_response(stream):
    """usage_only_no_text / nonstream_usage_no_text: usage said 16 (or 10^6) tokens of
    nothing, and the request was ok with no TTFT, its tokens counted."""
    if stream:
        body = sse_events({"choices": [{"text": "", "finish_reason": "length"}]},
                          {"choices": [], "usage": {"completion_tokens": 16}})  # fmt: skip
    else:
        body = orjson.dumps({"choices": [{"text": "", "finish_reason": "length"}],
                             "usage": {"completion_tokens": 1000000}})  # fmt: skip
    rec = _handle(body, stream=stream)
    assert not rec.ok and rec.error_kind == "empty_response"
    assert "its usage says" in (rec.error or "")


def test_a_run_with_impossible_usage_warns(tmp_path: Path):
    """The audit's huge_usage run: 6.3e12 tok/s, 0 errors, no warning. Now the client's
    counts, and summary.json's client.warnings say what the server claimed."""
    usage = {"prompt_tokens": 2**31 - 1, "completion_tokens": 2**31 - 1}
    body = sse_events(*[{"choices": [{"text": " t"}]}] * 4, {"choices": [], "usage": usage})
    with HostileServer(lambda rid: body) as srv:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "run"), concurrency=2,
                              num_requests=6, telemetry=False,
                              workload=WorkloadConfig(isl=8, osl=16, tokenizer=None))  # fmt: skip
        run_dir = run_benchmark(cfg, progress=False).directory
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["counts"]["completed"] == 6
    # the client's own count: the server's /tokenize (a token a byte) of " t" x 4
    assert s["tokens"]["output"] == 6 * 8 and "server_usage" not in s["tokens"]["osl_source"]
    assert s["tokens"]["input"] == 6 * 8 and s["tokens"]["isl_source"] == {"planned": 6}
    assert s["tokens"]["usage_rejected"]["requests"] == 6
    assert any("could not be true" in w and "2147483647" in w for w in s["client"]["warnings"])
    again = finalize_run(run_dir)  # summarize keeps one warning, not two
    assert sum("could not be true" in w for w in again["client"]["warnings"]) == 1
