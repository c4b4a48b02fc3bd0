"""One stop path for SIGINT, SIGTERM and SIGHUP in `shadow proxy` and `shadow replay`
(real `python -m accelbench` subprocesses against reference servers): each signal, with
requests in flight and while waiting for the next arrival, ends the command within about
a second, with status `interrupted` and exit 1, a record for every request either side
received, and no traceback.

Before: replay slept through Ctrl-C and SIGTERM until the next arrival, and on SIGHUP
wrote `completed` after 26 of 400 requests; the proxy on Ctrl-C printed two tracebacks
and lost the records in flight yet said `completed`."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from accelbench.suites.shadow.store import read_shadow_dir
from accelbench.suites.shadow.verdict import shadow_verdict
from conftest import free_port, wait_http

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
SLOW_TTFT_MS = "4000"  # in flight far longer than any stop may take


def _startup_s() -> float:
    """How long this machine takes now to start `python -m accelbench` (its imports):
    the stop path is less work than that, so 1 s plus it is generous on a busy host and
    still far below the 4 s a request stays in flight or a replay waits."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "accelbench", "--version"], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    return time.monotonic() - t0


def _received(url: str) -> int:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return int(re.search(r"^reference_requests_total (\d+)", text, re.M).group(1))  # type: ignore[union-attr]


def _stop(
    proc: subprocess.Popen, sig: signal.Signals, bound_s: float, *more: signal.Signals
) -> tuple[float, str]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    for s in more:  # further signals while it stops (an impatient user, a supervisor)
        time.sleep(0.02)
        proc.send_signal(s)
    try:
        proc.wait(timeout=bound_s + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
    took = time.monotonic() - t0
    print(f"{sig.name}: exited {took:.3f} s after the signal (bound {bound_s:.2f} s)")
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    return took, err


def _check(out: Path, proc: subprocess.Popen, took: float, err: str, bound_s: float,
           sides: dict[str, str]) -> dict:  # fmt: skip
    assert "Traceback" not in err, err[-3000:]
    assert took < bound_s, (took, bound_s, err[-2000:])
    assert proc.returncode == 1, (proc.returncode, err[-2000:])
    meta, rows = read_shadow_dir(out)
    assert meta.status == "interrupted"
    for side, url in sides.items():
        # every request the side received has its record (finished or `interrupted`)
        assert len(rows[side]) == _received(url), (side, rows[side])
        assert len({r["idx"] for r in rows[side]}) == len(rows[side])
    return rows


def _post(port: int, n: int) -> list[socket.socket]:
    socks = []
    body = orjson.dumps({"model": "reference", "prompt": "x", "max_tokens": 3, "stream": True})
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json"
                  b"\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))  # fmt: skip
        socks.append(s)
    return socks


def _until(what: str, ok, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("moment", ["in_flight", "idle", "in_flight_then_all_three"])
def test_proxy_stops_on_each_signal(reference_server, tmp_path: Path, sig, moment) -> None:
    """``in_flight_then_all_three``: the other signals follow during the stop (a second
    Ctrl-C had raised inside the drain: tracebacks, records lost)."""
    bound = 1.0 + _startup_s()
    base = reference_server("--ttft-ms", SLOW_TTFT_MS, "--itl-ms", "1")
    cand = reference_server("--ttft-ms", SLOW_TTFT_MS, "--itl-ms", "1")
    port, out = free_port(), tmp_path / "sh"
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "shadow", "proxy", "--listen", f"127.0.0.1:{port}",
         "--baseline", base.url, "--candidate", cand.url, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
    socks = []
    if moment != "idle":
        socks = _post(port, 4)
        _until("4 requests at each side", lambda: _received(base.url) == 4 == _received(cand.url))
    more = SIGNALS if moment == "in_flight_then_all_three" else []
    took, err = _stop(proc, sig, bound, *more)
    rows = _check(out, proc, took, err, bound, {"baseline": base.url, "candidate": cand.url})
    n = 0 if moment == "idle" else 4
    assert len(rows["baseline"]) == n
    assert all(r["error_kind"] == "interrupted" for side in rows.values() for r in side)
    for s in socks:  # the callers were answered or cut, never left hanging
        s.settimeout(5)
        while s.recv(65536):
            pass
        s.close()


def _trace(path: Path, offsets: list[float]) -> None:
    lines = [{"schema": "accelbench.trace/1"}]
    for i, t in enumerate(offsets):
        lines.append({"idx": i, "t": t, "endpoint": "completions",
                      "body": {"model": "reference", "prompt": f"p{i}", "max_tokens": 2}})  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("moment", ["in_flight", "waiting"])
def test_replay_stops_on_each_signal(reference_server, tmp_path: Path, sig, moment) -> None:
    """``waiting``: two quick requests, then the next arrival 60 s later (a slow trace);
    ``in_flight``: requests that take 4 s each."""
    bound = 1.0 + _startup_s()
    ttft = SLOW_TTFT_MS if moment == "in_flight" else "1"
    base = reference_server("--ttft-ms", ttft, "--itl-ms", "1")
    cand = reference_server("--ttft-ms", ttft, "--itl-ms", "1")
    _trace(tmp_path / "t.jsonl", [0.0, 0.05, 60.0, 120.0])
    out = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "shadow", "replay", "--trace", str(tmp_path / "t.jsonl"),
         "--baseline", base.url, "--candidate", cand.url, "--out", str(out), "--no-telemetry"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _until(
        "both first requests at each side", lambda: _received(base.url) == 2 == _received(cand.url)
    )
    if moment == "waiting":  # both answered: the replay now waits for the arrival at 60 s
        _until("their records", lambda: (out / "candidate.jsonl").exists()
               and len((out / "candidate.jsonl").read_bytes().splitlines()) == 2
               and len((out / "baseline.jsonl").read_bytes().splitlines()) == 2)  # fmt: skip
    took, err = _stop(proc, sig, bound)
    rows = _check(out, proc, took, err, bound, {"baseline": base.url, "candidate": cand.url})
    kinds = {r["error_kind"] for side in rows.values() for r in side}
    assert kinds == ({"interrupted"} if moment == "in_flight" else {None})
    assert "interrupted" in err
    # the verdict of a replay stopped early says it judges the start of the trace only
    doc = shadow_verdict(out, ["error_rate <= +0.5pp"])
    assert any("replay is interrupted, not completed" in w for w in doc.warnings), doc.warnings
