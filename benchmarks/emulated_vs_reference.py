"""The emulated server's token-time error against its own schedule, beside the reference
server's emitter at the same rate and stream count, in the same run, interleaved.

Each server logs, per token, when it was due (``scheduled``) and when it was written
(``token_times``), on the same monotonic clock: the error is write - due. Both are
driven by the same load (accelbench's own client, in this process: ``--concurrency``
streams, ``--requests`` requests of ``--isl``/``--osl`` tokens). The reference server
is given the emulated engine's median TTFT and step time (measured from the first
emulated run's schedule), so both stream at about the same tokens per second.

Usage: python benchmarks/emulated_vs_reference.py [--accelerator mi355x]
       [--model llama-3.1-70b] [--tp 8] [--concurrency 256] [--requests 1024]
       [--isl 128] [--osl 256] [--rounds 3] [--out FILE]
Prints one line per run and a table of the medians over rounds; the emulated server
passes when its p99 error is no worse than the reference's (within the rounds' spread).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil

from accelbench.ports import free_port
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9))


def start(args: list[str], gt: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "serve", *args, "--port", str(port),
         "--ground-truth", str(gt)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"server {args[0]} did not start")


def measure(a: argparse.Namespace, server: str, args: list[str]) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="emu-vs-ref-"))
    gt = tmp / "gt.jsonl"
    proc, url = start(args, gt)
    try:
        cfg = BenchmarkConfig(
            url=url, concurrency=a.concurrency, num_requests=a.requests,
            warmup_requests=a.concurrency, workers=a.workers, telemetry=False,
            workload=WorkloadConfig(isl=a.isl, osl=a.osl), out_dir=str(tmp / "run"),
        )  # fmt: skip
        run_dir = run_benchmark(cfg, progress=False).directory
        cpu = psutil.Process(proc.pid).cpu_times()
    finally:
        proc.terminate()
        proc.wait()
    truth = [json.loads(x) for x in gt.read_text().splitlines()]
    s = json.loads((run_dir / "summary.json").read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    err = np.concatenate(
        [np.array(d["token_times"]) - np.array(d["scheduled"]) for d in truth if d.get("token_times")]
    ) / 1e6  # fmt: skip
    first = min(d["token_times"][0] for d in truth if d.get("token_times"))
    last = max(d["token_times"][-1] for d in truth if d.get("token_times"))
    sched_ttft = [(d["scheduled"][0] - d["t_recv"]) / 1e6 for d in truth if d.get("scheduled")]
    gaps = np.concatenate(
        [np.diff(d["scheduled"]) for d in truth if len(d.get("scheduled", [])) > 1]
    )
    return {
        "server": server,
        "streams": a.concurrency,
        "tokens": int(err.size),
        "tok_s": err.size / ((last - first) / 1e9),
        "error_ms": {p: float(np.percentile(err, q)) for p, q in PERCENTILES}
        | {"max": float(err.max()), "min": float(err.min())},
        # the server's own CPU per token written (all of it: parsing, scheduling, writes)
        "server_cpu_us_per_token": 1e6 * (cpu.user + cpu.system) / err.size,
        "schedule_ttft_ms_p50": float(np.median(sched_ttft)),
        "schedule_gap_ms_p50": float(np.median(gaps) / 1e6),
        "client_loop_lag_ms_p99": s["client"]["loop_lag_ms_p99"],
        "client_output_tok_s": s["throughput"]["output_tokens_per_s"],
        "loadavg": os.getloadavg()[0],
    }


def line(r: dict) -> str:
    e = r["error_ms"]
    return (f"{r['server']:9s} {r['streams']} streams {r['tok_s']:9,.0f} tok/s written | error ms "
            f"p50 {e['p50']:.2f} p90 {e['p90']:.2f} p99 {e['p99']:.2f} p99.9 {e['p99.9']:.2f} "
            f"max {e['max']:.1f} | server {r['server_cpu_us_per_token']:.1f} us CPU/token | "
            f"client lag p99 {r['client_loop_lag_ms_p99']:.1f} ms | "
            f"load {r['loadavg']:.1f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--accelerator", default="mi355x")
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=256)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write every run as JSON here")
    a = ap.parse_args()
    emu = ["emulated", "--accelerator", a.accelerator, "--model", a.model, "--tp", str(a.tp)]
    runs: list[dict] = []
    ref: list[str] | None = None
    for k in range(a.rounds):
        # alternate which goes first; the first round starts with the emulated server,
        # whose schedule sets the reference server's TTFT and gap
        order = ["emulated", "reference"] if k % 2 == 0 else ["reference", "emulated"]
        for server in order:
            r = measure(a, server, emu if server == "emulated" else ref)  # type: ignore[arg-type]
            runs.append(r)
            print(line(r), flush=True)
            if ref is None:
                ref = ["reference", "--ttft-ms", f"{r['schedule_ttft_ms_p50']:.3f}",
                       "--itl-ms", f"{r['schedule_gap_ms_p50']:.3f}"]  # fmt: skip
        if a.out:
            a.out.write_text(json.dumps(runs, indent=1))
    print()
    print(
        "| server | runs | tok/s written | error p50 ms | p99 ms | p99.9 ms | max ms | CPU us/token |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for server in ("emulated", "reference"):
        rs = [r for r in runs if r["server"] == server]

        def cell(get, f: str) -> str:
            v = sorted(get(r) for r in rs)  # noqa: B023
            return f"{format(float(np.median(v)), f)} ({format(v[0], f)}-{format(v[-1], f)})"

        print(f"| {server} | {len(rs)} | {cell(lambda r: r['tok_s'], ',.0f')} "
              f"| {cell(lambda r: r['error_ms']['p50'], '.2f')} "
              f"| {cell(lambda r: r['error_ms']['p99'], '.2f')} "
              f"| {cell(lambda r: r['error_ms']['p99.9'], '.2f')} "
              f"| {cell(lambda r: r['error_ms']['max'], '.1f')} "
              f"| {cell(lambda r: r['server_cpu_us_per_token'], '.1f')} |")  # fmt: skip


if __name__ == "__main__":
    main()
