"""Benchmark: load workers as Ray actors beside local worker processes, same machine.

    .venv/bin/python benchmarks/cluster_scaling.py --out /tmp/cluster-scaling.json

Starts one paced reference server (``--ttft-ms 50 --itl-ms 10``: one SSE event per
write, the realistic case), then runs the same closed-loop load (``--streams`` streams,
``--osl`` tokens each, ``--duration`` seconds) with 1, 2 and 4 local worker processes
and with 1, 2 and 4 Ray actors (a Ray runtime started on this host), and reports for
each: output tok/s, the load workers' CPU per streamed chunk (each worker measures its
own process's CPU time: for an actor that includes Ray's threads in it), and the same
with the driver's CPU added. Ray's own daemons (GCS, raylet) are not counted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from accelbench.ports import free_port
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig


def _wait(url: str) -> None:
    for _ in range(200):
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


def one(url: str, tmp: Path, workers: int, ray: str | None, a: argparse.Namespace) -> dict:
    cfg = BenchmarkConfig(
        url=url, out_dir=str(tmp / f"{'ray' if ray else 'local'}-{workers}"),
        concurrency=a.streams, duration_s=a.duration, workers=workers, ray=ray,
        telemetry=False, workload=WorkloadConfig(isl=32, osl=a.osl),
    )  # fmt: skip
    run_dir = run_benchmark(cfg).directory
    s = json.loads((run_dir / "summary.json").read_text())
    c = s["client"]
    chunks = s["tokens"]["output"] or 1
    return {
        "mode": "ray actors" if ray else "local processes",
        "workers": workers,
        "status": s["status"],
        "output_tok_s": s["throughput"]["output_tokens_per_s"],
        "cpu_us_per_chunk_workers": c["cpu_us_per_chunk"],
        "cpu_us_per_chunk_with_driver": 1e6 * c["cpu_s"] / chunks,
        "loop_lag_ms_p99": c["loop_lag_ms_p99"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--osl", type=int, default=64)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    port = free_port()
    srv = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "serve", "reference", "--port", str(port),
         "--ttft-ms", "50", "--itl-ms", "10"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    rows: list[dict[str, Any]] = []
    try:
        _wait(url + "/health")
        import ray

        # logical CPUs: as many as the largest actor count, like local processes that
        # may oversubscribe the cores too
        ray.init(num_cpus=max(max(int(x) for x in a.workers.split(",")), 2),
                 include_dashboard=False, log_to_driver=False)  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            for ray in (None, "local"):
                for w in (int(x) for x in a.workers.split(",")):
                    r = one(url, Path(tmp), w, ray, a)
                    rows.append(r)
                    print(
                        f"{r['mode']:16} {w}  {r['output_tok_s']:9,.0f} tok/s  "
                        f"{r['cpu_us_per_chunk_workers']:6.1f} us/chunk workers  "
                        f"{r['cpu_us_per_chunk_with_driver']:6.1f} with driver  "
                        f"lag p99 {r['loop_lag_ms_p99']:.1f} ms  {r['status']}",
                        flush=True,
                    )
    finally:
        srv.terminate()
        srv.wait(5)
    if a.out:
        a.out.write_text(
            json.dumps({"args": vars(a) | {"out": str(a.out)}, "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
