"""Benchmark: summaries, frontier and the HTML report for a sweep of 1,000,000 requests.

    python benchmarks/report_1m.py [--dir /tmp/ab-1m] [--requests 1000000] [--points 10]

The sweep is generated synthetically (tests/synthetic_runs.py, no chunk lists) in a child
process, so that the figures measured here (wall time per phase, peak RSS of this process)
cover only the analysis: rebuilding every point's summary.json from requests.parquet,
the frontier with interpolation at a target, and the report (HTML + Markdown).
With --compare, also a full comparison of the sweep against a second copy of itself
(timed separately, after the peak-memory figure of the main phases is taken).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def generate(d: Path, total: int, points: int) -> None:
    from synthetic_runs import make_sweep

    concs = [2**i for i in range(points)]
    per = total // points
    pts = [
        {
            "concurrency": c,
            "n": per,
            "tpot_ms": 10 * (1 + c / 64),
            "ttft_ms": 30 * (1 + c / 32),
            "fail_frac": 0.001,
            "files": ("run.json", "requests.parquet"),
        }
        for c in concs
    ]
    make_sweep(d, pts, osl=128, isl=512, gpus=8, chunks=False, jitter=0.1)


def measure(d: Path, target: float, compare: bool = False) -> dict[str, float]:
    from accelbench.metrics.frontier import build_frontier
    from accelbench.report.data import build_report_data
    from accelbench.report.html import write_html
    from accelbench.report.markdown import write_markdown
    from accelbench.store.runs import load_run, write_json_atomic
    from accelbench.suites.sweep import load_sweep

    t = {}
    t0 = time.perf_counter()
    n = 0
    for rd in sorted(p for p in d.iterdir() if (p / "requests.parquet").exists()):
        info = load_run(rd, recompute=True)
        write_json_atomic(rd / "summary.json", info.summary)
        n += info.summary["counts"]["planned"]
    t["summaries_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    s = load_sweep(d)
    f = build_frontier(s.runs, "output_tps_per_gpu")
    f.at(target)
    t["frontier_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    data = build_report_data([s], target=target, slo={"tpot_ms": 20.0})
    html = write_html(data, d / "report.html")
    write_markdown(data, d / "report.md")
    t["report_s"] = time.perf_counter() - t2
    t["total_s"] = time.perf_counter() - t0
    t["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if compare:
        from accelbench.metrics.compare import compare_sets

        t3 = time.perf_counter()
        other = load_sweep(d)  # the sweep against a second copy of itself
        compare_sets(
            s, other, target_interactivity=target, claims=[f"B >= 1.3 x A at {target} tok/s/user"]
        )
        t["compare_2x_s"] = time.perf_counter() - t3
        t["peak_rss_with_compare_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t["requests"] = n
    t["html_mb"] = html.stat().st_size / 1e6
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/accelbench-1m")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--points", type=int, default=10)
    ap.add_argument("--target", type=float, default=60.0)
    ap.add_argument("--compare", action="store_true", help="Also time compare (sweep vs itself).")
    ap.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    d = Path(a.dir)
    if a.generate:
        generate(d, a.requests, a.points)
        return
    if not (d / "sweep.json").exists():
        t = time.perf_counter()
        cmd = [sys.executable, __file__, "--generate", "--dir", str(d)]
        subprocess.run(cmd + ["--requests", str(a.requests), "--points", str(a.points)], check=True)
        print(f"generated {a.requests:,} requests in {time.perf_counter() - t:.1f} s", flush=True)
    res = measure(d, a.target, a.compare)
    print(json.dumps({k: round(v, 3) for k, v in res.items()}, indent=2))


if __name__ == "__main__":
    main()
