"""Benchmark: peak RSS of a run's end (finalize, telemetry stop, summary.json) on a large
journal, with telemetry on and off.

    python benchmarks/run_end_isolated.py [--dir /tmp/ab-run-end] [--mb 138] [--osl 128]

Writes a run directory holding a journal of about ``--mb`` MB (measured requests with
``--osl`` chunk times each, as a run journals them) and a run.json, then ends the run in
a fresh child process per mode, as ``run_benchmark`` does after the load: ``off`` without
a sampler, ``on`` with a telemetry sampler whose one source reports a GPU's power and
energy counter. Each child reports its peak RSS (``ru_maxrss``) and wall time; the
difference on - off is the memory telemetry adds to the end of a run (issue 21: within
50 MB for the 138 MB journal). The child drives the tree it imports (PYTHONPATH), so
the same script measures before and after a change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
run_dir, mode = Path(sys.argv[1]), sys.argv[2]
import accelbench.runner.benchmark as bm
from accelbench.telemetry.sampler import TelemetrySampler
from accelbench.telemetry.schema import new_row
from accelbench.telemetry.sources.base import Source

class FakeGpu(Source):
    name = "fake"
    def __init__(self):
        self.j = 0.0
    def probe(self):
        return None
    def sample(self, t_ns):
        self.j += 30.0
        return [new_row(source="fake", kind="gpu", vendor="nvidia", uuid="GPU-0",
                        power_w=300.0, energy_j=self.j)]

sampler = None
if mode == "on":
    import accelbench.telemetry.sampler as ts
    ts.open_sources = lambda *a: ([FakeGpu()], {"fake": "ok"})  # a GPU on any machine
    sampler = TelemetrySampler(run_dir, interval_s=0.1)
    sampler.start()
    time.sleep(0.5)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.monotonic()
client = {"workers": [], "n_workers": 1}
if hasattr(bm, "_stop_telemetry"):  # before issue 21: three steps, the journal read twice
    from accelbench.runner.finalize import finalize_run
    extra = {}
    if sampler is not None:
        extra["telemetry"] = bm._stop_telemetry(sampler, run_dir)
    summary = finalize_run(run_dir, status="completed", client=client, extra=extra)
    bm._fill_energy(summary, run_dir)
else:  # one pass
    summary = bm.end_run(run_dir, status="completed", client=client, sampler=sampler)
wall = time.monotonic() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
energy = summary.get("energy") or {}
print(json.dumps({"mode": mode, "peak_rss_mb": peak, "before_end_mb": base, "wall_s": wall,
                  "requests": summary["counts"]["completed"],
                  "j_per_output_token": energy.get("j_per_output_token")}))
"""


def make_run(d: Path, mb: float, osl: int) -> int:
    """A run directory with run.json and a journal of about ``mb`` MB; returns its rows."""
    import orjson

    d.mkdir(parents=True, exist_ok=True)
    run = {
        "schema": "accelbench.run/1",
        "run_id": d.name,
        "status": "running",
        "config": {"concurrency": 64, "gpus": 1, "save_text": False, "slo": {}},
        "planned_requests": None,
    }
    (d / "run.json").write_text(json.dumps(run))
    target = int(mb * 1e6)
    t = time.monotonic_ns()
    n = 0
    size = 0
    with open(d / "requests.jsonl", "wb") as f:
        while size < target:
            t_send = t + n * 2_000_000
            chunks = [t_send + 30_000_000 + k * 10_000_000 + (n % 997) for k in range(osl)]
            row = {
                "idx": n, "worker": 0, "warmup": False, "request_id": f"x-{n}",
                "t_sched": t_send, "t_send": t_send, "t_headers": t_send + 1_000_000,
                "t_first": chunks[0], "t_last": chunks[-1], "t_done": chunks[-1] + 100_000,
                "chunk_times": chunks, "chunk_tokens": None, "n_chunks": osl, "isl": 128,
                "isl_source": "server_usage", "isl_planned": 128, "osl": None,
                "osl_source": None, "osl_server": osl, "osl_client": None,
                "osl_mismatch": None, "max_tokens": osl, "ok": True, "error_kind": None,
                "http_status": 200, "error": None, "finish_reason": "length", "retries": 0,
                "output_text": None,
            }  # fmt: skip
            line = orjson.dumps(row) + b"\n"
            f.write(line)
            size += len(line)
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/ab-run-end"))
    ap.add_argument("--mb", type=float, default=138.0)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3, help="pairs of runs (off, on)")
    args = ap.parse_args()
    out = []
    for rep in range(args.repeat):
        for mode in ("off", "on"):
            d = args.dir / f"{mode}-{rep}"
            if d.exists():
                import shutil

                shutil.rmtree(d)
            n = make_run(d, args.mb, args.osl)
            size = (d / "requests.jsonl").stat().st_size / 1e6
            r = subprocess.run(
                [sys.executable, "-c", CHILD, str(d), mode],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            res = json.loads(r.stdout.strip().splitlines()[-1])
            res.update(journal_mb=size, rows=n)
            out.append(res)
            print(json.dumps(res), flush=True)
    by = {m: sorted(r["peak_rss_mb"] for r in out if r["mode"] == m) for m in ("off", "on")}
    med = {m: statistics.median(v) for m, v in by.items()}
    for m, v in by.items():
        print(
            f"peak RSS {m}: median {med[m]:.0f} MiB (min {v[0]:.0f}, max {v[-1]:.0f}, n {len(v)})"
        )
    print(f"telemetry adds {med['on'] - med['off']:+.0f} MiB (medians)")


if __name__ == "__main__":
    main()
