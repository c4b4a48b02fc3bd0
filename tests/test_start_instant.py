"""Load workers share one start instant per phase (docs/CLUSTER.md "Start together",
docs/RESULTS.md ``schedule``): the union of their send times is the plan, shifted by
nothing but each worker's measured lateness. Against the reference server, with local
worker processes (the Ray case is in test_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.runner.loadgen import LoopLagMonitor
from accelbench.workload.plan import arrival_offsets

# Time from the scheduled instant to the request's first byte on the socket, beyond the
# worker's own loop lag: building the body and the write (~0.1 ms), and for a worker's
# first requests opening a loopback connection; a few ms on this loaded 2-core host.
SEND_PATH_MS = 5.0
# The worker's loop-lag monitor wakes every 20 ms (runner.loadgen.LoopLagMonitor): its
# timer can fire first after a stall, see little lag, and the send's timer then waits
# behind the rest of that wake-up's callbacks (chunk reads of other streams), seen only
# as the sample after. A send may be late by that much beyond the largest lag measured
# (Ray, loaded CI: 107.3 ms late against lag + lateness + send path 94.6 ms).
LAG_SAMPLE_MS = LoopLagMonitor().period * 1000


def check_union_is_the_plan(
    meta: dict, summary: dict, rows: list[dict], rate: float, n: int, n_warm: int, seed: int
) -> dict[int, float]:
    """Shared by the local and the Ray test: every worker's phases start at one instant,
    t_sched is that instant plus the planned offset, and t_send is within the worker's
    measured lateness of it. Returns each worker's worst send error (ms)."""
    sched = meta["schedule"]
    assert sched["mode"] == "rate" and sched["open_loop"] and sched["start_ns"]
    workers = summary["client"]["workers"]
    assert len(workers) == sched["workers"] >= 2
    starts: dict[str, set[int]] = {}
    for w in workers:  # the residual is recorded, per worker and phase
        assert [p["name"] for p in w["phases"]] == (["warmup"] if n_warm else []) + ["measured"]
        for p in w["phases"]:
            assert p["late_ms"] >= 0
            starts.setdefault(p["name"], set()).add(p["start_ns"])
    # one instant per phase for all workers (on Ray: the driver's, within the clock
    # estimate each node's conversion carries, which is below 1 us on one host)
    for name, s in starts.items():
        assert max(s) - min(s) <= (0 if "cluster" not in meta else 2_000), (name, s)
    assert min(starts["warmup" if n_warm else "measured"]) - sched["start_ns"] <= 2_000
    start = min(starts["measured"])
    planned = arrival_offsets(n, rate, "poisson", 1.0, seed + 1)
    meas = sorted((r for r in rows if not r["warmup"]), key=lambda r: r["idx"])
    assert [r["idx"] for r in meas] == list(range(n_warm, n_warm + n))
    sched_err = np.array([r["t_sched"] - start - 1e9 * planned[r["idx"] - n_warm] for r in meas])
    assert np.abs(sched_err).max() <= 2_000, sched_err  # ns: the plan itself, no shift
    worst: dict[int, float] = {}
    by_worker = {w["worker"]: w for w in workers}
    for r in meas:
        w = by_worker[r["worker"]]
        late = (r["t_send"] - r["t_sched"]) / 1e6
        # never before the plan; late by at most what this worker measured of itself
        bound = w["phases"][-1]["late_ms"] + w["loop_lag_ms_max"] + SEND_PATH_MS + LAG_SAMPLE_MS
        assert -0.01 <= late <= bound, (r["idx"], r["worker"], late, bound)
        worst[r["worker"]] = max(worst.get(r["worker"], 0.0), late)
    return worst


def test_two_local_workers_send_the_plan_from_one_instant(reference_server, tmp_path: Path):
    srv = reference_server("--ttft-ms", "2", "--itl-ms", "1")
    rate, n, n_warm, seed = 40.0, 60, 4, 5
    cfg = BenchmarkConfig(
        url=srv.url, out_dir=str(tmp_path / "run"), rate=rate, num_requests=n,
        warmup_requests=n_warm, workers=2, telemetry=False,
        workload=WorkloadConfig(isl=8, osl=3, seed=seed),
    )  # fmt: skip
    run_dir = run_benchmark(cfg).directory
    meta = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    assert summary["status"] == "completed" and summary["counts"]["completed"] == n
    assert {r["worker"] for r in rows} == {0, 1}
    worst = check_union_is_the_plan(meta, summary, rows, rate, n, n_warm, seed)
    print("worst send error per worker (ms):", worst)
    assert summary["client"]["start_late_ms_max"] is not None
