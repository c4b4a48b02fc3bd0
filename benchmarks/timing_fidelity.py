"""Timing fidelity: how close accelbench's measured TTFT, TPOT and chunk gaps are to the
truth, at high concurrency.

The reference server emits each token at a scheduled time and logs (same monotonic
clock, same machine) when it wrote it and when it received the request. Errors:
  TTFT error  = (t_first - t_send) - (server first write - t_send) = delivery delay
  gap error   = client gap - server gap, for every consecutive token pair
  TPOT error  = (client TPOT - server TPOT) / server TPOT
Usage: python benchmarks/timing_fidelity.py [--concurrency 256] [--requests 1024]
       python benchmarks/timing_fidelity.py --streams 32,64,128,256,512 --repeat 3
The second form measures how the error grows with streams per worker (one worker; each
point N streams, N warm-up requests and max(4 N, 512) measured ones, a fresh server), and
prints a table (best and spread of the repeats per point) to choose --workers from.
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
import pyarrow.parquet as pq

from accelbench.engines.llamacpp import free_port
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--ttft-ms", type=float, default=50)
    ap.add_argument("--itl-ms", type=float, default=10)
    ap.add_argument("--osl", type=int, default=100)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--streams", help="comma-separated stream counts: the scaling table")
    ap.add_argument("--repeat", type=int, default=1, help="runs per point (--streams)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    if not args.streams:
        fig = measure(args, args.concurrency, args.requests)
        print(json.dumps(fig, indent=2))
        if args.out:
            args.out.write_text(json.dumps(fig, indent=2))
        return
    points = []
    for c in (int(x) for x in args.streams.split(",")):
        runs = [measure(args, c, max(4 * c, 512)) for _ in range(args.repeat)]
        points.append({"streams": c, "loadavg": os.getloadavg(), "runs": runs})
        if args.out:
            args.out.write_text(json.dumps(points, indent=1))
    print(scaling_table(points, args.workers))


def scaling_table(points: list[dict], workers: int) -> str:
    """Best (lowest) and spread (min-max) over the repeats of each point."""

    def cell(runs: list[dict], get, f: str, high: bool = False) -> str:
        vals = sorted(get(r) for r in runs)
        best = format(vals[-1] if high else vals[0], f)
        return best if len(vals) == 1 else f"{best} ({format(vals[0], f)}-{format(vals[-1], f)})"

    rows = [
        f"| streams per worker ({workers} worker) | TTFT error p50 ms | TTFT error p99 ms "
        "| gap error p99 ms | loop lag p99 ms | client CPU us/chunk | tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in points:
        r = p["runs"]
        rows.append(
            f"| {p['streams']} | {cell(r, lambda x: x['ttft_abs_error_ms']['median'], '.2f')} "
            f"| {cell(r, lambda x: x['ttft_abs_error_ms']['p99'], '.2f')} "
            f"| {cell(r, lambda x: x['gap_abs_error_ms']['p99'], '.2f')} "
            f"| {cell(r, lambda x: x['loop_lag_ms_p99'], '.1f')} "
            f"| {cell(r, lambda x: x['client_cpu_us_per_chunk'], '.1f')} "
            f"| {cell(r, lambda x: x['output_tokens_per_s'], ',.0f', high=True)} |"
        )  # fmt: skip
    return "\n".join(rows)


def measure(args: argparse.Namespace, concurrency: int, requests: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="fidelity-"))
    port = free_port()
    gt_path = tmp / "ground_truth.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "serve", "reference", "--port", str(port),
         "--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms),
         "--ground-truth", str(gt_path)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    try:
        cfg = BenchmarkConfig(
            url=url, concurrency=concurrency, num_requests=requests,
            warmup_requests=concurrency, workers=args.workers, telemetry=False,
            workload=WorkloadConfig(isl=128, osl=args.osl), out_dir=str(tmp / "run"),
        )  # fmt: skip
        run_dir = run_benchmark(cfg, progress=not args.streams).directory
    finally:
        server.terminate()
        server.wait()
    truth = {d["request_id"]: d for d in map(json.loads, gt_path.read_text().splitlines())}
    rows = [r for r in pq.read_table(run_dir / "requests.parquet").to_pylist() if not r["warmup"]]
    ttft_err, gap_err, tpot_err = [], [], []
    for r in rows:
        g = truth[r["request_id"]]
        tt = np.array(g["token_times"], dtype=np.int64)
        ct = np.array(r["chunk_times"], dtype=np.int64)
        if len(tt) != len(ct) or len(ct) < 2:
            continue
        # truth: from the client's send to the server's first write (same clock); the
        # server's receive time is not used: a busy server reads requests late
        true_ttft = (tt[0] - r["t_send"]) / 1e6
        ttft_err.append(r["ttft_ms"] - true_ttft)
        gap_err.extend((np.diff(ct) - np.diff(tt)) / 1e6)
        true_tpot = (tt[-1] - tt[0]) / 1e6 / (len(tt) - 1)
        tpot_err.append((r["tpot_ms"] - true_tpot) / true_tpot)
    s = json.loads((run_dir / "summary.json").read_text())
    shutil.rmtree(tmp, ignore_errors=True)

    def q(a, p):
        return float(np.percentile(np.abs(a), p))

    return {
        "concurrency": concurrency,
        "requests_compared": len(ttft_err),
        "ttft_abs_error_ms": {"median": q(ttft_err, 50), "p99": q(ttft_err, 99)},
        "gap_abs_error_ms": {"median": q(gap_err, 50), "p99": q(gap_err, 99)},
        "tpot_abs_error_pct": {"median": 100 * q(tpot_err, 50), "p99": 100 * q(tpot_err, 99)},
        "output_tokens_per_s": s["throughput"]["output_tokens_per_s"],
        "client_cpu_us_per_chunk": s["client"]["cpu_us_per_chunk"],
        "loop_lag_ms_p99": s["client"]["loop_lag_ms_p99"],
        "warnings": s["client"]["warnings"],
        "loadavg_after": os.getloadavg(),
    }


if __name__ == "__main__":
    main()
