"""Section 3 of benchmarks/side_by_side.py: the arrival server's stamps and the schedules
rebuilt for each tool (no peer needed: the peers' runs are the benchmark's)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from accelbench.workload.traces import load_trace
from benchmark_modules import import_benchmark


@pytest.fixture(scope="module")
def sched():
    return import_benchmark("sbs_schedule")


@pytest.fixture(scope="module")
def server_exe(sched, tmp_path_factory):
    exe, why = sched.build_c(sched.ARRIVAL_C, tmp_path_factory.mktemp("bin"))
    assert exe is not None, why
    return exe


@pytest.fixture(scope="module")
def floor_exe(sched, tmp_path_factory):
    exe, why = sched.build_c(sched.FLOOR_C, tmp_path_factory.mktemp("bin"))
    assert exe is not None, why
    return exe


def _post(sock: socket.socket, rid: str | None, body: bytes, split: bool = False) -> bytes:
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
    if rid is not None:
        head += b"X-Request-Id: " + rid.encode() + b"\r\n"
    head += b"Content-Length: %d\r\n\r\n" % len(body)
    if split:  # header and body in two segments, the body sent after a pause
        sock.sendall(head)
        time.sleep(0.02)
        sock.sendall(body)
    else:
        sock.sendall(head + body)
    got = b""
    while not got.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        assert chunk, "server closed"
        got += chunk
    return got


def test_arrival_stamps_bracketed_by_send_and_server(sched, server_exe, tmp_path):
    """Each generation request gets the kernel's receive stamp, converted to the
    monotonic clock: after the sender's stamp taken before send(), before the server's
    own stamp after its read; a request in two segments is stamped at its last byte."""
    out = tmp_path / "arrivals.txt"
    port = sched.cc.free_port()
    proc = sched.start_arrival(server_exe, port, out)
    sent: dict[str, tuple[int, int]] = {}
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            for i in range(20):
                rid = f"req-{i}"
                split = i % 5 == 4
                t0 = time.monotonic_ns()
                reply = _post(s, rid, b'{"prompt":"hello","max_tokens":1}', split=split)
                sent[rid] = (t0, time.monotonic_ns())
                assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
                assert b"text/event-stream" in reply and b"data: [DONE]" in reply
            _post(s, None, b"{}")  # no id: counted, not matched
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200 OK")
            s.sendall(b"POST /tokenize HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            assert s.recv(4096).startswith(b"HTTP/1.1 404")
    finally:
        sched.stop_arrival(proc)
    arrivals, counts = sched.read_arrivals(out)
    assert counts == {"requests": 21, "unstamped": 0, "no_id": 1, "complete": 1}
    assert set(arrivals) == set(sent)
    for rid, (t0, t1) in sent.items():
        a = arrivals[rid]
        assert t0 <= a.kernel_ns <= a.user_ns <= t1, (rid, t0, a, t1)
        if rid in ("req-4", "req-9", "req-14", "req-19"):
            # the body went 20 ms after the header: its segment's stamp is the one taken
            assert a.kernel_ns - t0 >= 20_000_000 * 0.9


def test_floor_sender_keeps_its_schedule_file_honest(sched, server_exe, floor_exe, tmp_path):
    """The C floor sends each request at or after its due time, says when, and the
    arrival server sees every one of them after that send and with its id."""
    import subprocess

    offs = sched.floor_offsets(200.0, 60, seed=5)
    assert offs == sched.floor_offsets(200.0, 60, seed=5) and offs == sorted(offs)
    (tmp_path / "schedule.txt").write_text("".join(f"{int(o * 1e9)}\n" for o in offs))
    port = sched.cc.free_port()
    proc = sched.start_arrival(server_exe, port, tmp_path / "arrivals.txt")
    try:
        p = subprocess.run([str(floor_exe), str(port), str(tmp_path / "schedule.txt"),
                            str(tmp_path / "sent.txt")], capture_output=True, timeout=60)  # fmt: skip
    finally:
        sched.stop_arrival(proc)
    assert p.returncode == 0, p.stderr
    due = sched.read_floor(tmp_path / "sent.txt")
    assert list(due) == [f"c-{i}" for i in range(60)]
    # its schedule is the offsets from one origin (to the ns the file holds)
    t0 = due["c-0"] - offs[0]
    assert all(abs(due[f"c-{i}"] - t0 - o) < 2e-9 for i, o in enumerate(offs))
    arrivals, counts = sched.read_arrivals(tmp_path / "arrivals.txt")
    assert counts["requests"] == 60 and counts["unstamped"] == 0
    for line in (tmp_path / "sent.txt").read_text().splitlines():
        rid, t_sched, t_send = line.split(" ")
        assert int(t_sched) <= int(t_send) <= arrivals[rid].kernel_ns <= arrivals[rid].user_ns


def test_arrival_server_bad_arguments(server_exe, tmp_path):
    import subprocess

    p = subprocess.run([str(server_exe), "0", str(tmp_path / "x")], capture_output=True)
    assert p.returncode == 2 and b"bad port" in p.stderr
    p = subprocess.run([str(server_exe)], capture_output=True)
    assert p.returncode == 2 and b"usage" in p.stderr


def test_floor_sender_bad_arguments(floor_exe, tmp_path):
    import subprocess

    p = subprocess.run([str(floor_exe), "1", str(tmp_path / "missing"), "x"], capture_output=True)
    assert p.returncode == 2 and b"cannot read" in p.stderr


def test_vllm_schedule_rescaled_to_n_over_rate(sched):
    # draws 1, 1, 2 -> cumulative 1, 2, 4 -> rescaled so the last is 3 / 1.5 = 2 s
    assert sched.vllm_schedule([1.0, 1.0, 2.0], 3, 1.5) == [0.5, 1.0, 2.0]


def test_aiperf_targets_are_the_running_sum(sched):
    assert sched.cumulative([0.25, 0.5, 0.125]) == [0.25, 0.75, 0.875]


def test_arrival_errors_remove_the_median_shift(sched):
    # arrivals 10 ms after schedule except one 30 ms: errors 0, 0, 0, 0, 20 ms
    pairs = [(int((t + 0.010) * 1e9), t) for t in (1.0, 2.0, 3.0, 4.0)]
    pairs.append((int((5.0 + 0.030) * 1e9), 5.0))
    e = sched.arrival_errors(pairs)
    assert e["requests"] == 5
    assert e["p50_ms"] == pytest.approx(0.0, abs=1e-3)
    assert e["max_ms"] == pytest.approx(20.0, abs=1e-3)
    # numpy's linear percentile: p99 of (0, 0, 0, 0, 20) is 0.96 * 20
    assert e["p99_ms"] == pytest.approx(19.2, abs=1e-3)


def test_trace_is_valid_mooncake_and_bursty(sched, tmp_path):
    path = tmp_path / "trace.jsonl"
    ts = sched.make_trace(path, 2.0, seed=3)
    assert ts == sorted(ts) and 0 <= ts[0] and ts[-1] < 2.0
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [ln["timestamp"] / 1000 for ln in lines] == ts
    assert all(ln["input_length"] == 128 and ln["output_length"] == 1 for ln in lines)
    # the same seed, the same trace; the high half-seconds hold most of the requests
    assert sched.make_trace(tmp_path / "again.jsonl", 2.0, seed=3) == ts
    hi = sum(1 for t in ts if int(t / 0.5) % 2 == 0)
    assert hi > 5 * (len(ts) - hi)
    # accelbench's own reader takes it as Mooncake, one request per line, in line order
    tr = load_trace(path, block_size=128)
    assert tr.format == "mooncake"
    assert [e.offset_s for e in tr.entries] == pytest.approx([t - ts[0] for t in ts])


def test_private_hf_cache_resolves_offline(sched, tmp_path, monkeypatch):
    from huggingface_hub import snapshot_download

    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{}")
    repo = sched.hf_cache_tokenizer(tok, tmp_path / "hf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    got = snapshot_download(repo, local_files_only=True, cache_dir=tmp_path / "hf" / "hub")
    assert (Path(got) / "tokenizer.json").read_text() == "{}"
