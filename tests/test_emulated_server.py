"""`accelbench serve emulated` (predict/emulate.py): the fallback roofline step model,
the server's API (the reference server's, labelled emulated), and the whole path: the
real `accelbench run` against the server started as a process, its measurements
against the server's ground truth, and the server's schedule against the scheduler
run offline on the same arrivals."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from tests.cli_inprocess import run_cli

from accelbench.errors import AccelbenchError
from accelbench.plan.models import find_model
from accelbench.predict.emulate import (
    emulated_label,
    step_model_for,
)
from accelbench.predict.scheduler import SimRequest, open_loop
from accelbench.predict.steps import Step
from conftest import RefServer

EMU = ["--accelerator", "mi355x", "--model", "llama-3.1-70b", "--tp", "8"]


def Emulated(tmp: Path, args: list[str]) -> RefServer:  # noqa: N802 - reads as a class
    """``accelbench serve emulated ARGS`` as a process (conftest's server starter)."""
    return RefServer(args, tmp, kind="emulated")


@pytest.fixture
def emulated(tmp_path):
    started: list[Emulated] = []

    def make(*args: str) -> Emulated:
        s = Emulated(tmp_path, list(args) or EMU)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def call(url: str, body: dict | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


# -- the fallback step model ---------------------------------------------------------


def test_the_emulated_server_runs_predicts_fitted_step_model():
    """One step model for predict and the emulated server: the fitted one."""
    from accelbench.predict.point import fitted_step_model
    from accelbench.predict.stepmodel import Layout

    m = step_model_for("h100", "llama-3.1-8b", 1)
    same, _ = fitted_step_model("llama-3.1-8b", "h100", Layout(tp=1), precision="bf16")
    for st in (Step(0, 0, 1, 0), Step(8192, 0, 0, 0), Step(0, 0, 64, 64_000)):
        assert m.step_time(st) == same.step_time(st)
    # one sequence decoding is memory bound; a long prefill compute bound; a bigger batch
    # takes longer
    assert m.step_time(Step(0, 0, 1, 0)).bound in ("memory", "scheduling")
    assert m.step_time(Step(8192, 0, 0, 0)).bound == "compute"
    slow = [m.step_time(Step(0, 0, b, 1000 * b)).seconds for b in (1, 8, 64, 256)]
    assert slow == sorted(slow) and slow[0] < slow[-1]
    # the KV cache: what 8 x 288 GiB x 0.9 leaves after the weights, 320 KiB per token
    m8 = step_model_for("mi355x", "llama-3.1-70b", 8)
    kv = (8 * 288 * 2**30 * 0.9 - arch_bytes("llama-3.1-70b")) // (80 * 8 * 128 * 2 * 2)
    assert m8.kv_capacity_tokens() == int(kv)


def arch_bytes(model: str) -> float:
    return find_model(model).arch.weight_bytes("bf16")


def test_layout_that_does_not_fit_shows_the_arithmetic():
    with pytest.raises(AccelbenchError, match=r"does not fit on 1 x h100: weights .* usable ="):
        step_model_for("h100", "llama-3.1-405b", 1)
    with pytest.raises(AccelbenchError, match="unknown accelerator 'nope'.*known: .*mi355x"):
        step_model_for("nope", "llama-3.1-70b", 8)
    with pytest.raises(AccelbenchError, match="does not divide"):
        step_model_for("mi355x", "llama-3.1-70b", 3)
    assert emulated_label("MI355X", "meta-llama/Llama-3.1-70B-Instruct") == (
        "emulated:mi355x:llama-3.1-70b"
    )


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--accelerator", "nope", "--model", "llama-3.1-70b"], "unknown accelerator 'nope'"),
        (["--accelerator", "mi355x", "--model", "nope"], "unknown model 'nope'"),
        ([*EMU, "--speed", "0"], "--speed"),
        ([*EMU, "--speed", "nan"], "--speed"),
        ([*EMU, "--port", "70000"], "--port"),
        (["--accelerator", "h100", "--model", "llama-3.1-405b"], "does not fit on 1 x h100"),
    ],
)
def test_bad_options_are_one_line(tmp_path, args, msg):
    code, out, err, _ = run_cli(["serve", "emulated", *args], tmp_path)
    assert code == 2, err
    assert msg in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


# -- the server ----------------------------------------------------------------------


def test_api_is_the_reference_servers_labelled_emulated(emulated):
    srv = emulated()
    label = "emulated:mi355x:llama-3.1-70b"
    code, h, body = call(srv.url + "/v1/models")
    assert code == 200 and json.loads(body)["data"][0]["id"] == label
    assert h["x-accelbench-emulated"] == "mi355x"
    code, h, body = call(srv.url + "/tokenize", {"content": "héllo"})
    assert json.loads(body) == {"tokens": list("héllo".encode())}
    assert h["x-accelbench-emulated"] == "mi355x"
    # streamed chat: role first, then one event per token, usage, [DONE]
    code, h, body = call(srv.url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}})  # fmt: skip
    assert code == 200 and h["x-accelbench-emulated"] == "mi355x"
    events = [e.removeprefix("data: ") for e in body.decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    docs = [json.loads(e) for e in events[:-1]]
    assert docs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len(docs) == 1 + 5 + 1 and all(d["model"] == label for d in docs)
    assert docs[-1]["usage"] == {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45,
                                 "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip
    # not streamed: one document at the end
    code, h, body = call(srv.url + "/v1/completions", {"prompt": "abc", "max_tokens": 3})
    doc = json.loads(body)
    assert code == 200 and doc["model"] == label and doc["usage"]["completion_tokens"] == 3
    assert h["x-accelbench-emulated"] == "mi355x"
    assert call(srv.url + "/v1/completions", {"prompt": "a", "model": "other"})[0] == 404
    code, _, body = call(srv.url + "/v1/completions", {"prompt": "a", "max_tokens": -1})
    assert code == 400 and b"max_tokens" in body
    code, _, body = call(srv.url + "/metrics")
    text = body.decode()
    assert 'accelbench_emulated_info{accelerator="mi355x",model="llama-3.1-70b",tp="8"} 1' in text
    assert "emulated_tokens_total 8" in text and "vllm:num_requests_running 0" in text
    truth = srv.truth()
    assert [len(d["scheduled"]) for d in truth] == [5, 3]
    assert len(truth[0]["token_times"]) == 5 and truth[0]["t_admitted"] >= truth[0]["t_recv"] - 1


def test_request_longer_than_the_kv_cache_is_refused(emulated):
    # 2 x H100 hold Llama-3.1-70B's 141 GB with about 41k tokens of KV cache to spare
    srv = emulated("--accelerator", "h100", "--model", "llama-3.1-70b", "--tp", "2")
    code, _, body = call(srv.url + "/v1/completions", {"prompt": "a", "max_tokens": 100_000})
    assert code == 400 and b"maximum context" in body and b"KV cache" in body
    code, _, body = call(srv.url + "/v1/completions", {"prompt": "a", "max_tokens": 4})
    assert code == 200


def test_client_that_goes_away_frees_its_place(emulated):
    srv = emulated("--accelerator", "h100", "--model", "llama-3.1-8b", "--tp", "1")
    body = json.dumps({"prompt": "hello", "max_tokens": 100_000, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b"
                  % (len(body), body))  # fmt: skip
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(65536)
        assert b"vllm:num_requests_running 1" in call(srv.url + "/metrics")[2]
    deadline = time.monotonic() + 10
    while b"vllm:num_requests_running 0" not in call(srv.url + "/metrics")[2]:
        assert time.monotonic() < deadline, "the engine kept the request of a closed connection"
        time.sleep(0.05)
    assert b"vllm:kv_cache_usage_perc 0.000000" in call(srv.url + "/metrics")[2]
    assert call(srv.url + "/v1/completions", {"prompt": "a", "max_tokens": 2})[0] == 200
    deadline = time.monotonic() + 10  # its line is written just after the response ends
    while len(srv.truth()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    (gone, _) = srv.truth()
    assert gone["client_closed"] is True and len(gone["token_times"]) >= 3


def test_accelbench_run_against_it(emulated, tmp_path):
    """The real CLI against the server as a process: every request ok; the client's TTFT
    and chunk gaps agree with the server's writes within the loops' measured lag; and the
    server's schedule is the scheduler's, run offline on the same arrivals."""
    srv = emulated()
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "-c", "16", "-n", "64",
         "--isl", "300", "--osl", "24", "--no-telemetry", "-q", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"]["completed"] == 64 and s["errors"]["count"] == 0
    run = json.loads((out / "run.json").read_text())
    assert "emulated:mi355x:llama-3.1-70b" in json.dumps(run)
    truth = srv.truth()
    gt = {d["request_id"]: d for d in truth}
    # the measured lag: the client's event loop (worst), and the server's own lateness
    client_lag = max(w["loop_lag_ms_max"] for w in s["client"]["workers"])
    late = [
        (t - d) / 1e6 for g in truth for t, d in zip(g["token_times"], g["scheduled"], strict=True)
    ]
    assert min(late) >= 0  # a write never comes before its due time
    lag = client_lag + max(late) + 1.0  # + 1 ms: the wall clock's steps (kernel stamps)
    rows = pq.read_table(out / "requests.parquet").to_pylist()
    assert len(rows) == 64
    for row in rows:
        g = gt[row["request_id"]]
        assert len(g["token_times"]) == len(row["chunk_times"]) == 24
        # TTFT: the client's against the server's first write, both from the client's send
        truth_ttft = (g["token_times"][0] - row["t_send"]) / 1e6
        assert abs(row["ttft_ms"] - truth_ttft) <= lag, (row["ttft_ms"], truth_ttft, lag)
        truth_tpot = (g["token_times"][-1] - g["token_times"][0]) / 1e6 / 23
        assert abs(row["tpot_ms"] - truth_tpot) <= 2 * lag / 23 + 0.05
        gaps = np.diff(row["chunk_times"]) - np.diff(g["token_times"])
        assert np.max(np.abs(gaps)) / 1e6 <= 2 * lag
    # the schedule: the scheduler offline over the requests as the server received them
    model = step_model_for("mi355x", "llama-3.1-70b", 8)
    order = sorted(truth, key=lambda d: d["t_recv"])
    reqs = [SimRequest(d["t_recv"] / 1e9, d["prompt_tokens"], d["output_tokens"],
                       d["cached_tokens"]) for d in order]  # fmt: skip
    sim = open_loop(model, reqs)
    for i, d in enumerate(order):
        want = np.array(sim.token_times(i)) * 1e9
        assert np.max(np.abs(np.array(d["scheduled"]) - want)) < 2_000  # ns: float rounding
    # it is a batch: requests overlapped, and the step time grew with it
    assert max(x.running for x in sim.steps) >= 8


def test_sessions_hit_its_prefix_cache_and_skip_the_prefill(emulated, tmp_path):
    """The emulated engine keeps earlier prompts' KV (the reference server's cache rule,
    blocks of the scheduler's 16 tokens, as large as the step model's KV capacity): a
    session's later turns report the cached tokens the server logged, the server's
    counters equal the responses', the run's ideal equals the measured rate (gap 0), and a
    cached prompt is scheduled without the prefill of its cached part. Without the cache,
    nothing is cached."""
    srv = emulated()
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "--sessions", "6",
         "--turns", "3", "--think-time", "0", "--isl", "400", "--osl", "8", "-c", "3",
         "--no-telemetry", "-q", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["errors"]["count"] == 0
    gt = {d["request_id"]: d for d in srv.truth()}
    rows = pq.read_table(out / "requests.parquet").to_pylist()
    assert len(rows) == 18
    for row in rows:
        assert row["cached_tokens"] == gt[row["request_id"]]["cached_tokens"]
        if row["turn"] > 0:  # the history is the last turn's prompt + reply: whole blocks
            assert row["cached_tokens"] >= 16 * ((row["isl"] - 400) // 16) - 16
    c, sc = s["cache"], s["client"]["server_cache"]
    assert sc["hits"] == sum(r["cached_tokens"] for r in rows) > 0
    assert sc["capacity_tokens"] == 16 * (step_model_for("mi355x", "llama-3.1-70b", 8)
                                          .kv_capacity_tokens() // 16)  # fmt: skip
    assert c["gap_pp"] == 0 and c["hit_rate"] > 0.3
    # the schedule: cached tokens are not prefilled (the scheduler offline, as the server)
    model = step_model_for("mi355x", "llama-3.1-70b", 8)
    order = sorted(gt.values(), key=lambda d: d["t_recv"])
    reqs = [SimRequest(d["t_recv"] / 1e9, d["prompt_tokens"], d["output_tokens"],
                       d["cached_tokens"]) for d in order]  # fmt: skip
    sim = open_loop(model, reqs)
    for i, d in enumerate(order):
        assert abs(d["scheduled"][0] - sim.token_times(i)[0] * 1e9) < 2_000
    # and without the cache
    off = emulated(*EMU, "--no-prefix-cache")
    code, _, body = call(off.url + "/v1/completions", {"prompt": "y" * 500, "max_tokens": 2})
    code, _, body = call(off.url + "/v1/completions", {"prompt": "y" * 500, "max_tokens": 2})
    assert code == 200 and "prompt_tokens_details" not in json.loads(body)["usage"]
    assert b"prefix_cache_hits_total" not in call(off.url + "/metrics")[2]
    code, _, body = call(srv.url + "/v1/completions", {"prompt": "y" * 500, "max_tokens": 2})
    code, _, body = call(srv.url + "/v1/completions", {"prompt": "y" * 500, "max_tokens": 2})
    assert json.loads(body)["usage"]["prompt_tokens_details"]["cached_tokens"] == 496


class Faster:
    """A step model ``speed`` times faster (what ``--speed`` runs)."""

    def __init__(self, model, speed: float) -> None:
        self.model, self.speed = model, speed

    def step_time(self, step):
        t = self.model.step_time(step)
        return type(t)(t.seconds / self.speed, t.bound)

    def kv_capacity_tokens(self) -> int:
        return self.model.kv_capacity_tokens()

    def max_batch(self) -> int:
        return self.model.max_batch()


def test_behind_schedule_it_catches_up_without_shifting_it(emulated, tmp_path):
    """At 200 x speed the steps (tens of us) come faster than this host can write them:
    the server runs the steps already due together and writes each stream's tokens in
    one go; the schedule stays the scheduler's, and no write precedes its due time."""
    srv = emulated(*EMU, "--speed", "200")
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "-c", "16", "-n", "48",
         "--isl", "64", "--osl", "64", "--no-telemetry", "-q", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"]["completed"] == 48 and s["errors"]["count"] == 0
    metrics = call(srv.url + "/metrics")[2].decode()
    caught = int(metrics.split("\nemulated_catch_up_steps_total ")[1].split()[0])
    assert caught > 0
    truth = sorted(srv.truth(), key=lambda d: d["t_recv"])
    shared = 0
    for g in truth:
        assert all(t >= d for t, d in zip(g["token_times"], g["scheduled"], strict=True))
        shared += len(g["token_times"]) - len(set(g["token_times"]))
    assert shared > 0  # tokens of steps run together went out in one write
    model = Faster(step_model_for("mi355x", "llama-3.1-70b", 8), 200)
    reqs = [SimRequest(d["t_recv"] / 1e9, d["prompt_tokens"], d["output_tokens"]) for d in truth]
    sim = open_loop(model, reqs)
    for i, d in enumerate(truth):
        want = np.array(sim.token_times(i)) * 1e9
        assert np.max(np.abs(np.array(d["scheduled"]) - want)) < 2_000


# ---- the request reader both servers share (reference/server.py, read_generation) -------

_M = "emulated:h100:llama-3.1-8b"


def _read(req: object, chat: bool = False):
    from accelbench.reference.server import read_generation

    return read_generation(json.dumps(req).encode(), chat, _M, 16)


def test_a_field_of_the_wrong_type_is_a_400_not_a_default():
    """max_tokens 0 was answered with the default 16 tokens, messages "x" with an empty
    prompt, prompt {} with its str(): each is a 400 naming the field now."""
    for req, chat, says in (
        ({"model": _M, "prompt": "hi", "max_tokens": 0}, False, "max_tokens must be"),
        ({"model": _M, "messages": "x"}, True, "messages must be a list"),
        ({"model": _M, "prompt": {"a": 1}}, False, "prompt must be a string, a list of"),
        ({"model": _M, "prompt": "hi", "max_completion_tokens": 0}, False, "max_completion"),
    ):
        out = _read(req, chat)
        assert isinstance(out, tuple) and out[0] == 400 and says in out[1]["error"]["message"]
    ok = _read({"model": _M, "prompt": "hi", "max_tokens": None})
    assert not isinstance(ok, tuple) and ok.max_tokens == 16  # null: absent


_ANY = hst.one_of(  # what JSON can carry (NaN is not JSON: "invalid JSON body")
    hst.none(), hst.booleans(), hst.integers(-5, 2_000_000), hst.floats(allow_nan=False, allow_infinity=False),
    hst.text(max_size=5), hst.lists(hst.integers(0, 3), max_size=3),
    hst.lists(hst.integers(-1, 300), max_size=4), hst.lists(hst.text(max_size=3), max_size=3),
    hst.dictionaries(hst.text(max_size=3), hst.integers(), max_size=2),
    hst.fixed_dictionaries({"include_usage": hst.one_of(hst.none(), hst.booleans(), hst.text(max_size=3))}),
    hst.lists(hst.fixed_dictionaries({"type": hst.just("text"), "text": hst.text(max_size=3)}), max_size=2),
)  # fmt: skip


def _tokens(value: object) -> int | None:
    """The prompt tokens (UTF-8 bytes) a prompt or a message content is, if readable."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return sum(len(x.encode()) for x in value)
    if isinstance(value, list) and all(isinstance(x, dict) and isinstance(x.get("text"), str)
                                       for x in value):  # fmt: skip
        return sum(len(x["text"].encode()) for x in value)
    if isinstance(value, list) and all(type(x) is int and 0 <= x <= 255 for x in value):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return len(value)
    return None


@settings(max_examples=300, deadline=None)
@given(
    chat=hst.booleans(),
    field=hst.sampled_from(["prompt", "messages", "content", "max_tokens",
                            "max_completion_tokens", "stream", "stream_options"]),
    value=_ANY,
)  # fmt: skip
def test_property_a_request_is_read_as_given_or_refused(chat, field, value):
    """Any value of a field the servers read: a 400 naming that field, or a request whose
    max_tokens is the one given (the default only where none is), whose prompt is the
    text given, counted in its UTF-8 bytes (a list of token ids: one token each; it was
    the ids' digits: [104, 105] 6 tokens), and whose stream flags are the booleans given
    ("stream": "false" streamed); never a value silently replaced by the default or by
    its str()."""
    base = {"model": _M, "messages": [{"role": "user", "content": "hi"}]} if chat else {
        "model": _M, "prompt": "hi"}  # fmt: skip
    req = {**base, field: value}
    if field == "content":  # the message's content
        req = {**base, "messages": [{"role": "user", "content": value}]}
    out = _read(req, chat)
    if isinstance(out, tuple):
        status, doc = out
        said = "content" if field == "content" else field
        assert status == 400 and said in doc["error"]["message"], (field, value, doc)
        if field == "content":  # not a string, null or text parts
            parts = isinstance(value, list) and all(
                isinstance(x, dict) and isinstance(x.get("text"), str) for x in value
            )
            assert chat and not (value is None or isinstance(value, str) or parts)
        return
    if field in ("max_tokens", "max_completion_tokens"):
        assert out.max_tokens == (16 if value is None else value), (field, value)
        assert type(value) is int or value is None
    elif field == "messages" and chat:
        assert isinstance(value, list) and all(isinstance(m, dict) for m in value)
    elif field == "prompt" and not chat:
        assert out.prompt_tokens == _tokens(value), (value, out)
    elif field == "content" and chat:
        assert out.prompt_tokens == _tokens(value), (value, out)
    elif field == "stream":
        assert value is None or isinstance(value, bool)
        assert out.stream is bool(value)
    elif field == "stream_options":
        assert value is None or isinstance(value, dict)
        usage = (value or {}).get("include_usage")
        assert usage is None or isinstance(usage, bool)
        assert out.usage_wanted is bool(usage)


@settings(max_examples=20, deadline=None)
@given(
    model=hst.sampled_from(["llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b"]),
    decode=hst.integers(0, 64),
    prefill=hst.integers(0, 8192),
)
def test_property_a_config_json_emulates_as_its_catalog_id(model, decode, prefill):
    """serve emulated --model PATH/config.json: the same step model as the catalog id (it
    was "unknown model ... or give a config.json path", the hint false for this command),
    served under the config's name."""
    import tempfile

    from accelbench.yamlfile import load_yaml

    text = (
        Path(__file__).resolve().parents[1] / "src/accelbench/plan/data/models.yaml"
    ).read_text()
    cfg = {**load_yaml(text)["models"][model]["config"], "_name_or_path": "my/model"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(cfg))
        by_file = step_model_for("h200", str(path), 1)
        assert emulated_label("h200", str(path)) == "emulated:h200:my/model"
    by_id = step_model_for("h200", model, 1)
    step = Step(prefill, 0, decode, decode * 1024)
    assert by_file.step_time(step) == by_id.step_time(step)
