"""What the shadow proxy adds to the caller's TTFT, and how exactly a replay keeps a
trace's arrival times. Prints JSON.

Overhead: the reference server (ground truth on) as baseline and a second one as
candidate; C concurrent streams of N requests, first straight to the baseline, then
through the proxy. Per request, on one clock (all processes on this machine):

* ``gt``: the caller's first-token time minus the server's own first write (ground
  truth), direct and via the proxy; their difference of percentiles is the added TTFT;
* ``paired``: the caller's TTFT minus the TTFT the proxy itself measured for the same
  request on the baseline: the proxy's added time on both paths, request by request;
* ``null relay``: the same load through benchmarks/tcp_relay.py (a raw TCP relay on the
  same event loop, no parsing, no copies): the floor of any Python proxy on this host.

Replay: a Mooncake-style trace of R requests at the given rate replayed to the
reference server; arrival error = the server's receive time (ground truth) minus the
scheduled time; lengths compared with the server's usage. Where a packet socket can be
opened (Linux, CAP_NET_RAW), each request's arrival is also taken from the loopback
interface (the kernel's receive stamp of its first segment): the arrival at the server's
socket, independent of when the server's event loop read it.

    python benchmarks/shadow_overhead.py --concurrency 64 --requests 2048 --replay 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import orjson

from accelbench.client.http1 import clock_offset_ns
from accelbench.client.session import OpenAIClient
from accelbench.metrics.records import RequestRecord
from accelbench.ports import free_port


def wait(url: str) -> None:
    for _ in range(400):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accelbench", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def pct(a: np.ndarray) -> dict[str, float]:
    return {
        k: round(float(np.percentile(a, q)), 4) for k, q in (("p50", 50), ("p90", 90), ("p99", 99))
    }


async def load(url: str, tag: str, n: int, conc: int, osl: int) -> list[RequestRecord]:
    client = OpenAIClient(url, stream=True)
    recs = [RequestRecord(idx=i, request_id=f"{tag}-{i}") for i in range(n)]
    sem = asyncio.Semaphore(conc)

    async def one(r: RequestRecord) -> None:
        async with sem:
            await client.send(r, {"model": "reference", "prompt": f"{tag}-{r.idx}",
                                  "max_tokens": osl, "stream": True})  # fmt: skip

    await asyncio.gather(*(one(r) for r in recs))
    await client.close()
    return recs


def overhead(tmp: Path, conc: int, n: int, osl: int, ttft: str, itl: str, sample: float) -> dict:
    gt = tmp / "gt.jsonl"
    pb, pc, pp = free_port(), free_port(), free_port()
    procs = [start(["serve", "reference", "--port", str(pb), "--ttft-ms", ttft, "--itl-ms", itl,
                    "--ground-truth", str(gt)]),
             start(["serve", "reference", "--port", str(pc), "--ttft-ms", ttft, "--itl-ms", itl])]  # fmt: skip
    try:
        wait(f"http://127.0.0.1:{pb}/health")
        wait(f"http://127.0.0.1:{pc}/health")
        proxy = start(["shadow", "proxy", "--listen", f"127.0.0.1:{pp}", "--baseline",
                       f"http://127.0.0.1:{pb}", "--candidate", f"http://127.0.0.1:{pc}",
                       "--sample", str(sample), "--out", str(tmp / "shadow")])  # fmt: skip
        wait(f"http://127.0.0.1:{pp}/health")
        asyncio.run(load(f"http://127.0.0.1:{pb}", "warm", conc, conc, osl))
        direct = asyncio.run(load(f"http://127.0.0.1:{pb}", "direct", n, conc, osl))
        asyncio.run(load(f"http://127.0.0.1:{pp}", "warmvia", conc, conc, osl))
        import psutil

        ps = psutil.Process(proxy.pid)
        kids = ps.children()  # the candidate process

        def cpu() -> tuple[float, float]:
            return sum(ps.cpu_times()[:2]), sum(sum(k.cpu_times()[:2]) for k in kids)

        (cpu0, kcpu0), t0 = cpu(), time.monotonic()
        via = asyncio.run(load(f"http://127.0.0.1:{pp}", "via", n, conc, osl))
        (cpu1, kcpu1), t1 = cpu(), time.monotonic()
        proxy.send_signal(signal.SIGINT)
        proxy.wait(60)
        pr = free_port()
        relay = subprocess.Popen([sys.executable, str(Path(__file__).with_name("tcp_relay.py")),
                                  str(pr), str(pb)])  # fmt: skip
        try:
            wait(f"http://127.0.0.1:{pr}/health")
            asyncio.run(load(f"http://127.0.0.1:{pr}", "warmnull", conc, conc, osl))
            null = asyncio.run(load(f"http://127.0.0.1:{pr}", "null", n, conc, osl))
        finally:
            relay.terminate()
            relay.wait(10)
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    first = {}
    for line in gt.read_text().splitlines():
        doc = json.loads(line)
        if doc.get("token_times"):
            first[doc["request_id"]] = doc["token_times"][0]
    e_direct = np.array([(r.t_first - first[r.request_id]) / 1e6 for r in direct if r.ok])
    e_via = np.array([(r.t_first - first[r.request_id]) / 1e6 for r in via if r.ok])
    e_null = np.array([(r.t_first - first[r.request_id]) / 1e6 for r in null if r.ok])
    # the proxy's own baseline records, matched to the caller's by the unique prompt
    trace = {}
    for line in (tmp / "shadow" / "trace.jsonl").read_bytes().splitlines()[1:]:
        doc = orjson.loads(line)
        trace[doc["idx"]] = doc["body"]["prompt"]
    proxy_ttft = {}
    for line in (tmp / "shadow" / "baseline.jsonl").read_bytes().splitlines():
        doc = orjson.loads(line)
        if doc["t_first"]:
            proxy_ttft[trace[doc["idx"]]] = (doc["t_first"] - doc["t_send"]) / 1e6
    paired = np.array([(r.t_first - r.t_send) / 1e6 - proxy_ttft[f"via-{r.idx}"]
                       for r in via if r.ok and f"via-{r.idx}" in proxy_ttft])  # fmt: skip
    return {
        "concurrency": conc, "requests": n, "sample": sample,
        "ok": {"direct": int(e_direct.size), "via": int(e_via.size), "null": int(e_null.size)},
        "caller_first_token_minus_server_write_ms": {"direct": pct(e_direct), "via": pct(e_via),
                                                     "null_relay": pct(e_null)},
        "added_ttft_ms_by_percentile": {k: round(pct(e_via)[k] - pct(e_direct)[k], 4)
                                        for k in ("p50", "p90", "p99")},
        "null_relay_added_ttft_ms_by_percentile": {k: round(pct(e_null)[k] - pct(e_direct)[k], 4)
                                                   for k in ("p50", "p90", "p99")},
        "added_ttft_ms_paired": pct(paired),
        "proxy_cpu_us_per_request": round(1e6 * (cpu1 - cpu0) / n, 1),
        "candidate_process_cpu_us_per_request": round(1e6 * (kcpu1 - kcpu0) / n, 1),
        "proxy_cpu_util": round((cpu1 - cpu0) / (t1 - t0), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip


class LoopbackCapture:
    """Arrival of each request at the server, seen on the loopback interface: a packet
    socket (needs CAP_NET_RAW) records the kernel's receive stamp (SO_TIMESTAMPNS, the
    same stamp the server's socket would get) of every TCP segment to ``port`` whose
    payload starts an HTTP request, keyed by its X-Request-Id. An observer independent of
    both the replayer and the server's event loop, in a process of its own (so it takes
    no time from the replayer's)."""

    def __init__(self, port: int, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen([sys.executable, __file__, "--capture", str(port), str(out)],
                                     stderr=subprocess.PIPE)  # fmt: skip
        time.sleep(0.5)
        self.error = None
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode().strip().splitlines() if self.proc.stderr else []
            self.error = f"no packet capture ({err[-1] if err else 'failed'}); needs CAP_NET_RAW"

    def close(self) -> dict[str, int]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        return json.loads(self.out.read_text()) if self.out.exists() else {}


def capture(port: int, out: Path) -> None:
    """The capture process (``--capture PORT OUT``): until SIGTERM, then write the stamps."""
    import struct

    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS (Linux)
    sock.settimeout(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    seen: dict[str, int] = {}
    off, _ = clock_offset_ns()  # realtime minus monotonic, bracketed
    while not stop:
        try:
            data, anc, _, addr = sock.recvmsg(65536, 64)
        except (TimeoutError, InterruptedError):
            continue
        if addr[2] != 0 or len(data) < 54 or data[12:14] != b"\x08\x00":
            continue  # PACKET_HOST IPv4 only: each loopback packet once, as received
        tcp = 14 + (data[14] & 0x0F) * 4
        if int.from_bytes(data[tcp + 2 : tcp + 4], "big") != port:
            continue
        payload = data[tcp + (data[tcp + 12] >> 4) * 4 :]
        k = payload.find(b"X-Request-Id: ")
        if not payload.startswith(b"POST ") or k < 0 or not anc:
            continue
        rid = payload[k + 14 : payload.find(b"\r\n", k)].decode()
        sec, nsec = struct.unpack("qq", anc[0][2][:16])
        seen.setdefault(rid, sec * 1_000_000_000 + nsec - off)
    out.write_text(json.dumps(seen))


def replay_accuracy(tmp: Path, n: int, rate: float) -> dict:
    from accelbench.runner.config import BenchmarkConfig
    from accelbench.suites.shadow.replay import ReplayOptions, replay
    from accelbench.workload.config import WorkloadConfig

    rng = random.Random(1)
    t = 0.0
    lines = []
    for _ in range(n):
        lines.append({"timestamp": round(t * 1000, 3), "input_length": rng.randint(16, 512),
                      "output_length": rng.randint(1, 8)})  # fmt: skip
        t += rng.expovariate(rate)
    trace = tmp / "trace.jsonl"
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    gt = tmp / "gt-replay.jsonl"
    port = free_port()
    ref = start(["serve", "reference", "--port", str(port), "--ttft-ms", "5", "--itl-ms", "1",
                 "--ground-truth", str(gt)])  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    cap = LoopbackCapture(port, tmp / "capture.json")
    try:
        wait(url + "/health")
        cfg = BenchmarkConfig(workload=WorkloadConfig(trace=str(trace)), telemetry=False)
        d, _ = replay(cfg, ReplayOptions(url, url, str(tmp / "replay"), sequential=True))
    finally:
        ref.terminate()
        ref.wait(10)
        time.sleep(0.3)
        seen = cap.close()
    recv = {}
    for line in gt.read_text().splitlines():
        doc = json.loads(line)
        recv[doc["request_id"]] = doc["t_recv"]
    rows = [orjson.loads(x) for x in (d / "baseline.jsonl").read_bytes().splitlines()]
    arrival = np.array([(recv[r["request_id"]] - r["t_sched"]) / 1e6 for r in rows])
    send = np.array([(r["t_send"] - r["t_sched"]) / 1e6 for r in rows])
    wire = np.array([(seen[r["request_id"]] - r["t_sched"]) / 1e6 for r in rows
                     if r["request_id"] in seen])  # fmt: skip
    isl_exact = sum(r["isl"] == lines[r["idx"]]["input_length"] for r in rows)
    osl_exact = sum(r["osl_server"] == lines[r["idx"]]["output_length"] for r in rows)
    return {
        "requests": n, "rate": rate, "arrival_error_ms": pct(np.abs(arrival)),
        "send_lag_ms": pct(send), "isl_exact": isl_exact, "osl_exact": osl_exact,
        # arrival at the server's socket, from the packet capture: |stamp - schedule|
        "arrival_at_socket_error_ms": pct(np.abs(wire)) if len(wire) else cap.error,
        "arrival_at_socket_seen": len(wire),
    }  # fmt: skip


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--capture":
        capture(int(sys.argv[2]), Path(sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2048)
    ap.add_argument("--osl", type=int, default=16)
    ap.add_argument("--ttft-ms", default="20")
    ap.add_argument("--itl-ms", default="5")
    ap.add_argument("--sample", type=float, default=1.0)
    ap.add_argument(
        "--replay", type=int, default=1000, help="requests in the replay check (0: skip)"
    )
    ap.add_argument("--replay-rate", type=float, default=100.0)
    a = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if a.requests:
            out["proxy_overhead"] = overhead(tmp, a.concurrency, a.requests, a.osl, a.ttft_ms,
                                             a.itl_ms, a.sample)  # fmt: skip
        if a.replay:
            out["replay"] = replay_accuracy(tmp, a.replay, a.replay_rate)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
