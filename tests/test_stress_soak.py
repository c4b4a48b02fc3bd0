"""A real short soak against the reference server with a known leak and drift; and an
interrupted soak resumed from its finished windows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.suites.stress.soak import SoakConfig, run_soak
from accelbench.suites.stress.verdicts import DriftThresholds

LEAK_PER_REQ = 100_000  # bytes kept per request
RATE = 20.0  # requests/s, constant arrivals: the leak per hour is known
DEV_RATE = 500_000.0  # bytes/s of the device-memory gauge after its warm-up ramp


RESUME = [sys.executable, "-m", "accelbench", "stress", "soak", "--resume"]


def by_name(verdicts):
    return {v.name: v for v in verdicts}


def test_soak_recovers_injected_leak_and_drift(reference_server, tmp_path):
    srv = reference_server(
        "--ttft-ms", "10", "--itl-ms", "1", "--leak-bytes-per-request", str(LEAK_PER_REQ),
        "--device-memory-warmup", "100000000", "--device-memory-warmup-s", "6",
        "--device-memory-rate", str(DEV_RATE), "--ttft-drift-ms-per-min", "60",
    )  # fmt: skip
    load = BenchmarkConfig(url=srv.url, rate=RATE, arrival="constant", telemetry=False,
                           workload=WorkloadConfig(isl=16, osl=8))  # fmt: skip
    # drift thresholds for a minute, not for hours: warn at 25 % and fail at 83 % over
    # it (1,500 and 5,000 %/h); the injected TTFT drift, 60 ms/min on a median of ~43 ms,
    # is ~8,400 %/h, and
    # with the hourly defaults any upward noise in TPOT over a minute would be "drift".
    # 66 one-second windows: a trend's interval needs 60 points (MIN_TREND_POINTS)
    cfg = SoakConfig(load=load, duration_s=66, window_s=1.0, sample_s=0.5, server_pid=srv.proc.pid,
                     metrics=["reference_device_memory_used_bytes", "reference_leaked_bytes"],
                     gpu=False, drift=DriftThresholds(warn_pct_per_h=1500, fail_pct_per_h=5000))  # fmt: skip
    res = run_soak(cfg, tmp_path / "soak")
    assert res.status == "completed"
    v = by_name(res.verdicts)

    truth = LEAK_PER_REQ * RATE * 3600  # bytes per hour
    # the server's own count of what it kept, and its RSS, both within 10 %
    assert v["leak metric:reference_leaked_bytes"].estimate == pytest.approx(truth, rel=0.10)
    rss = v["leak server_rss_bytes"]
    assert rss.estimate == pytest.approx(truth, rel=0.10) and rss.word == "fail"
    # the device-memory gauge: its warm-up ramp is cut off, the leak after it recovered
    dev = v["leak metric:reference_device_memory_used_bytes"]
    assert dev.estimate == pytest.approx(DEV_RATE * 3600, rel=0.10) and dev.word == "fail"
    assert dev.evidence["warmup_end_s"] > 1.0
    assert dev.evidence["total_bytes"] == 80 * 2**30
    # latency drift injected in TTFT only: TTFT fails, TPOT and errors do not
    assert v["drift ttft p50"].word == "fail" and v["drift ttft p50"].low > 0
    assert v["drift tpot p50"].word == "pass"
    assert v["drift error rate"].word == "pass"

    doc = json.loads((tmp_path / "soak" / "stress.json").read_text())
    assert doc["suite"] == "soak" and doc["status"] == "completed"
    assert 65 <= doc["windows"] <= 66 and doc["disk_bytes_per_request"] > 0
    w = [json.loads(x) for x in (tmp_path / "soak" / "windows.jsonl").read_text().splitlines()]
    # windows end with the load (66 s), not with its drain and finalize after it
    assert max(x["t_end_s"] for x in w) <= 66.0
    assert sum(x["requests"] for x in w) == pytest.approx(RATE * 66, abs=RATE * 2)
    assert all(x["error_rate"] == 0 for x in w)
    # memory is sampled while the load runs, not while the segment is finalized after it
    mem = [json.loads(x) for x in (tmp_path / "soak" / "memory.jsonl").read_text().splitlines()]
    assert max(m["t_s"] for m in mem) <= 66.0 and len(mem) >= 66 / 0.5 - 2
    # its run is an ordinary run directory
    seg = tmp_path / "soak" / "runs" / "seg-000"
    assert json.loads((seg / "run.json").read_text())["status"] == "completed"
    assert (seg / "summary.json").exists()
    from accelbench.store.runs import find_run_dirs

    assert find_run_dirs(tmp_path) == [seg]  # the runs store sees it (runs list)


def test_interrupted_soak_keeps_windows_and_resumes(reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    out = tmp_path / "soak"
    cmd = [sys.executable, "-m", "accelbench", "stress", "soak", "--url", srv.url,
           "--rate", "10", "--duration", "6", "--window", "1", "--sample-interval", "0.5",
           "--isl", "16", "--osl", "4", "--no-telemetry", "--out", str(out), "-q"]  # fmt: skip
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "COLUMNS": "120"})  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait for two finished windows
        wf = out / "windows.jsonl"
        if wf.exists() and len(wf.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1, err
    doc = json.loads((out / "stress.json").read_text())
    assert doc["status"] == "interrupted"
    kept = [json.loads(x) for x in (out / "windows.jsonl").read_text().splitlines()]
    assert len(kept) >= 2

    # a damaged line before the end stops the resume (it would be lost from the verdicts)
    import shutil

    for bad_line in (b"{garbage", b'{"t_s": "x", "t_end_s": 1}', b"[1, 2]"):
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(out, bad)
        lines = (bad / "windows.jsonl").read_bytes().splitlines()
        (bad / "windows.jsonl").write_bytes(b"\n".join([lines[0], bad_line, *lines[1:]]) + b"\n")
        before = {f.name: f.read_bytes() for f in bad.iterdir() if f.is_file()}
        r = subprocess.run([*RESUME, str(bad), "-q"], capture_output=True, text=True,
                           timeout=60)  # fmt: skip
        assert r.returncode == 2 and "line(s) 2 are damaged" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert {f.name: f.read_bytes() for f in bad.iterdir() if f.is_file()} == before
    # a torn last line (killed mid-write) is dropped: the next window does not land on it
    with (out / "windows.jsonl").open("ab") as f:
        f.write(b'{"window": 99, "t_start_s": 1')

    r = subprocess.run([*RESUME, str(out), "-q"], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "stress.json").read_text())
    assert doc["status"] == "completed" and doc["segments"] == 2
    w = [json.loads(x) for x in (out / "windows.jsonl").read_text().splitlines()]
    assert w[: len(kept)] == kept  # the finished windows are kept as they were
    ends = [x["t_end_s"] for x in w]
    assert ends == sorted(ends) and ends[-1] == pytest.approx(6, abs=1.0)
    assert [x["window"] for x in w] == list(range(len(w)))


def _windows(out):
    f = out / "windows.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_soak_resumes_after_sigkill_in_its_first_segment(reference_server, tmp_path):
    """SIGKILL (no cleanup at all) during the first and only segment: the configuration
    was recorded before the first request, so the soak resumes from it, on the recorded
    server and options; conflicting options and another server are refused (one line,
    exit 2, nothing changed)."""
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    other = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    out = tmp_path / "soak"
    cmd = [sys.executable, "-m", "accelbench", "stress", "soak", "--url", srv.url,
           "--rate", "10", "--duration", "8", "--window", "1", "--sample-interval", "0.5",
           "--isl", "16", "--osl", "4", "--seed", "7", "--no-telemetry", "--out", str(out),
           "-q"]  # fmt: skip
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_windows(out)) < 2:
        time.sleep(0.1)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    doc = json.loads((out / "stress.json").read_text())
    assert doc["status"] == "running" and doc["segments"] == 0  # killed in segment 0
    recorded = doc["config"]
    kept = _windows(out)
    assert len(kept) >= 2

    def files():
        return {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}

    before = files()
    for extra, words in (
        (["--rate", "50"], "drop --rate"),
        (["--isl", "16"], "drop --isl"),  # the same value is still not the recorded option
        (["--url", other.url], "not the server the soak ran against"),
        (["--duration", "nan"], "--duration"),
    ):
        r = subprocess.run([*RESUME, str(out), "-q", *extra], capture_output=True, text=True,
                           timeout=60)  # fmt: skip
        assert r.returncode == 2, (extra, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], lines
        assert files() == before, extra

    r = subprocess.run([*RESUME, str(out), "-q", "--url", srv.url], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    doc = json.loads((out / "stress.json").read_text())
    assert doc["status"] == "completed", r.stderr
    # exit 1 only for a failed verdict (8 s of windows on a busy machine may drift)
    failed = [v["name"] for v in doc["verdicts"] if v["status"] == "fail"]
    assert r.returncode == (1 if failed else 0), (r.stderr, failed)
    assert doc["config"] == recorded  # resumed with the recorded configuration
    assert doc["runs"] == ["runs/seg-000", "runs/seg-001"]  # the killed segment kept apart
    w = _windows(out)
    assert w[: len(kept)] == kept
    ends = [x["t_end_s"] for x in w]
    assert ends == sorted(ends) and ends[-1] == pytest.approx(8, abs=1.0)
    assert [x["window"] for x in w] == list(range(len(w)))
    # every request of the resumed segment went to the recorded server, none to the other
    seg1 = json.loads((out / "runs" / "seg-001" / "run.json").read_text())
    assert seg1["config"]["url"] == srv.url and seg1["config"]["rate"] == 10


def test_resume_of_a_soak_with_url_credentials_asks_for_them(tmp_path):
    """stress.json never holds the credentials of the URL: a resume without --url would
    send '***' as the user, so it is refused with one line; another host is refused too."""
    from accelbench.suites.stress.document import SoakPart, StressDoc, write_stress

    cfg = SoakConfig(load=BenchmarkConfig(url="http://user:s3cret@127.0.0.1:1"), duration_s=100)
    write_stress(tmp_path, StressDoc("soak", "running", cfg.to_json(), [], [],
                                     SoakPart(0, 0, 0.0, 0, 0, None)))  # fmt: skip
    assert "s3cret" not in (tmp_path / "stress.json").read_text()
    before = (tmp_path / "stress.json").read_bytes()
    for extra, words in (
        ([], "needs its credentials"),
        (["--url", "http://user:s3cret@127.0.0.2:1"], "not the server"),
    ):
        r = subprocess.run([*RESUME, str(tmp_path), "-q", *extra], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr
        assert "s3cret" not in r.stderr
    assert (tmp_path / "stress.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stress.json"]


def test_soak_windows_close_on_the_given_clock(tmp_path):
    """The collector's windows follow its clock (the journal's): ten seconds of records
    become ten one-second windows at once, without waiting ten seconds."""
    from accelbench.store.rundir import JOURNAL
    from accelbench.suites.stress.common import JsonlAppender
    from accelbench.suites.stress.document import WINDOWS, SoakWindow, read_rows
    from accelbench.suites.stress.soak import _Collector

    t0 = 1_000_000_000_000
    rows = [
        {"t_sched": t0 + k * 10**8, "t_send": t0 + k * 10**8, "t_done": t0 + k * 10**8 + 10**6,
         "ok": k % 10 != 9, "warmup": False, "error_kind": None if k % 10 != 9 else "timeout",
         "ttft_ms": 5.0, "tpot_ms": 1.0, "e2e_ms": 10.0, "osl": 4, "isl": 8}
        for k in range(100)
    ]  # fmt: skip
    (tmp_path / JOURNAL).write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Probe:
        def sample(self, t_s: float) -> dict[str, float | str | None]:
            return {"t_s": t_s, "client_rss_bytes": 1e9}

    now = [t0 + 10 * 10**9 + 3 * 10**9]  # the load ran 10 s; the grace has passed
    load = BenchmarkConfig(url="http://127.0.0.1:1/v1", rate=10)
    cfg = SoakConfig(load=load, duration_s=10, window_s=1.0, sample_s=1.0, gpu=False)
    col = _Collector(cfg, Probe(), tmp_path / JOURNAL, 0.0,  # type: ignore[arg-type]
                     JsonlAppender(tmp_path / WINDOWS), JsonlAppender(tmp_path / "memory.jsonl"),
                     0, clock_ns=lambda: now[0])  # fmt: skip
    col.length = 10.0
    t_wall = time.monotonic()
    col.start()
    while len(col.done) < 10 and col.is_alive() and time.monotonic() - t_wall < 5:
        time.sleep(0.01)  # the collector's thread closes them as its clock allows
    col.finish()
    assert col.error is None
    assert time.monotonic() - t_wall < 5  # not the ten seconds the windows span
    wins, bad = read_rows(tmp_path / WINDOWS, SoakWindow.from_json)
    assert not bad and [w.window for w in wins] == list(range(10))
    assert [w.t_end_s for w in wins] == [float(k) for k in range(1, 11)]
    assert all(w.stats.requests == 10 and w.stats.errors == {"timeout": 1} for w in wins)
    assert wins == col.done


def test_soak_errors_fail_against_a_server_failing_half_its_requests(reference_server, tmp_path):
    """Known truth: the reference server answers half its requests with HTTP 500 at random
    (seeded), with no drift. The drift verdicts have nothing to say about a level; the
    ``soak errors`` verdict fails, its estimate the fraction the server injected. The soak
    is cut in two, its stress.json rewritten as a soak written before the verdict (no
    ``soak errors``, no ``warn_errors`` / ``fail_errors`` in its config), and resumed."""
    from accelbench.suites.stress.soak import recorded_config

    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1", "--fault", "500:0.5", "--seed", "3")
    load = BenchmarkConfig(url=srv.url, rate=20.0, arrival="constant", telemetry=False,
                           workload=WorkloadConfig(isl=16, osl=4))  # fmt: skip
    out = tmp_path / "soak"
    res = run_soak(SoakConfig(load=load, duration_s=3, window_s=1.0, sample_s=0.5, gpu=False), out)
    assert res.status == "completed" and "soak errors" in by_name(res.verdicts)

    doc = json.loads((out / "stress.json").read_text())  # as an older soak wrote it
    doc["verdicts"] = [v for v in doc["verdicts"] if v["name"] != "soak errors"]
    del doc["config"]["warn_errors"], doc["config"]["fail_errors"]
    (out / "stress.json").write_text(json.dumps(doc))
    cfg = recorded_config(out)  # reads, with the defaults for what it lacks
    assert (cfg.warn_errors, cfg.fail_errors) == (0.0, 0.05)
    cfg.duration_s = 6
    res = run_soak(cfg, out, resume=True)
    assert res.status == "completed"

    v = by_name(res.verdicts)["soak errors"]
    assert v.word == "fail" and v.low > 0.05
    w = [json.loads(x) for x in (out / "windows.jsonl").read_text().splitlines()]
    assert v.evidence["requests"] == sum(x["requests"] for x in w) >= 80
    assert v.evidence["failed"] == sum(x["requests"] - x["ok"] for x in w)
    assert v.evidence["errors_http_5xx"] == v.evidence["failed"]  # every failure a 500
    truth = srv.truth()  # every request the server saw, the probe and warm-up too
    injected = sum(t.get("fault") == "500" for t in truth) / len(truth)
    assert v.estimate == pytest.approx(injected, abs=0.1)
    assert v.low < injected < v.high
    stored = json.loads((out / "stress.json").read_text())
    assert "soak errors" in [x["name"] for x in stored["verdicts"]]


def test_a_failed_soak_says_why_in_stress_json_and_on_the_command_line(tmp_path):
    """Every measured request answered with HTTP 500: the segment's run fails, the soak's
    status is failed, and stress.json's ``reason`` (and the command's last line) say why;
    a stress.json written before ``reason`` still reads (None)."""
    from accelbench.suites.stress.document import StressDoc, read_stress
    from hostile_server import HostileServer

    body = b'{"error": {"message": "down for maintenance"}}'
    http500 = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
    http500 += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    out = tmp_path / "soak"
    with HostileServer(lambda rid: http500) as srv:
        cmd = [sys.executable, "-m", "accelbench", "stress", "soak", "--url", srv.url,
               "--rate", "10", "--duration", "2", "--window", "1", "--sample-interval", "0.5",
               "--isl", "8", "--osl", "2", "--no-telemetry", "--out", str(out), "-q"]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert r.returncode == 1, r.stderr
    doc = read_stress(out)
    assert doc.status == "failed"
    assert doc.reason is not None and doc.reason.startswith("run seg-000 failed: ")
    assert "no measured request succeeded" in doc.reason
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"stress soak: failed ({doc.reason}), see ")
    assert json.loads((out / "stress.json").read_text())["reason"] == doc.reason
    raw = json.loads((out / "stress.json").read_text())
    del raw["reason"]  # as written before the field
    assert StressDoc.from_json(raw).reason is None


def test_suite_reason_names_the_failed_verdicts():
    from accelbench.metrics.verdict import Status, Verdict
    from accelbench.suites.stress.document import suite_reason

    vs = [Verdict("leak server_rss_bytes", Status.FAIL, "s"), Verdict("soak errors", Status.WARN,
          "s"), Verdict("drift ttft p50", Status.FAIL, "s")]  # fmt: skip
    assert suite_reason("completed", None, vs) == (
        "failed verdicts: leak server_rss_bytes, drift ttft p50"
    )
    assert suite_reason("completed", None, vs[1:2]) is None
    assert suite_reason("running", None, vs) is None  # not decided yet
    assert suite_reason("interrupted", None, vs) == "stopped by a signal"
    assert suite_reason("failed", "run seg-001 failed: x", []) == "run seg-001 failed: x"


def test_soak_windows_count_output_tokens_as_the_run_summary_does(tmp_path):
    """A server whose usage cannot be true (999 completion tokens for max_tokens 2): the
    client rejects it (``usage_rejected``) and the run's summary counts the text with the
    server's tokenizer (one token per byte: " a b" is 4), not the 2 chunks. The windows
    count the same 4 per request."""
    from hostile_server import HostileServer, sse_events

    body = sse_events(
        {"choices": [{"text": " a", "finish_reason": None}]},
        {"choices": [{"text": " b", "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 999}},
    )
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
             % len(body)) + body  # fmt: skip
    out = tmp_path / "soak"
    with HostileServer(lambda rid: reply) as srv:
        load = BenchmarkConfig(url=srv.url, rate=10.0, arrival="constant", telemetry=False,
                               workload=WorkloadConfig(isl=8, osl=2))  # fmt: skip
        res = run_soak(SoakConfig(load=load, duration_s=3, window_s=1.0, sample_s=0.5,
                                  gpu=False), out)  # fmt: skip
    assert res.status == "completed"
    seg = out / "runs" / "seg-000"
    summary = json.loads((seg / "summary.json").read_text())
    assert summary["tokens"]["usage_rejected"]["requests"] == summary["counts"]["completed"]
    assert summary["tokens"]["osl_source"] == {"client_tokenizer": summary["counts"]["completed"]}
    per_request = summary["tokens"]["output"] / summary["counts"]["completed"]
    assert per_request == 4  # the tokenizer's count of " a b", not 2 chunks, not 999
    assert res.windows and all(w.stats.ok > 0 for w in res.windows)
    for w in res.windows:
        assert w.stats.output_tok_per_s is not None
        assert w.stats.output_tok_per_s * w.span_s == pytest.approx(per_request * w.stats.ok)
