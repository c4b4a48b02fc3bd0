"""The client's CPU per streamed chunk on a multi-turn workload against a single-turn one at
the same token rate (issue 22: within 10 %), interleaved A B A B against one paced
reference server (one SSE event per write, as real servers do).

    python benchmarks/session_overhead.py [--streams 64] [--turns 4] [--repeat 3] [--quick]

Both sides keep ``--streams`` streams in flight (closed loop), each token paced at
``--itl-ms``, so the token rate is the same; the session side's prompts grow with the
history (each turn resends the earlier prompts and replies), the single-turn side's
prompts are as long as the session side's mean prompt. Prints JSON: per side the client
CPU µs per chunk of every repetition, the medians, their ratio (sessions / single) and
the spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from accelbench.runner.benchmark import run_benchmark  # noqa: E402
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig  # noqa: E402
from conftest import RefServer  # noqa: E402  (the tests' reference server starter)


def one(url: str, out: Path, wl: WorkloadConfig, streams: int, n: int | None) -> dict:
    cfg = BenchmarkConfig(url=url, out_dir=str(out), workload=wl, concurrency=streams,
                          num_requests=n, telemetry=False)  # fmt: skip
    s = run_benchmark(cfg, progress=False).summary
    c = s["client"]
    return {
        "cpu_us_per_chunk": c.get("cpu_us_per_chunk"),
        "requests": s["counts"]["completed"],
        "errors": s["errors"]["count"],
        "output_tok_s": s["throughput"]["output_tokens_per_s"],
        "input_tokens_mean": s["tokens"]["input"] / max(1, s["counts"]["completed"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=256)
    ap.add_argument("--isl", type=int, default=256)
    ap.add_argument("--osl", type=int, default=64)
    ap.add_argument("--itl-ms", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="64 sessions: try the harness")
    a = ap.parse_args()
    if a.quick:
        a.sessions = 64
    tmp = Path(tempfile.mkdtemp(prefix="session-overhead-"))
    ref = RefServer(["--ttft-ms", "20", "--itl-ms", str(a.itl_ms)], tmp)
    try:
        sess_wl = WorkloadConfig(isl=a.isl, osl=a.osl, sessions=a.sessions, turns=str(a.turns))
        # the single-turn side: as many requests, each as long as a mean session prompt
        mean_isl = a.isl * (a.turns + 1) // 2 + a.osl * 6 * (a.turns - 1) // 2
        single_wl = WorkloadConfig(isl=mean_isl, osl=a.osl)
        n = a.sessions * a.turns
        rows: dict[str, list[dict]] = {"single": [], "sessions": []}
        for rep in range(a.repeat):
            t0 = time.monotonic()
            rows["single"].append(one(ref.url, tmp / f"single-{rep}", single_wl, a.streams, n))
            rows["sessions"].append(one(ref.url, tmp / f"sess-{rep}", sess_wl, a.streams, None))
            print(f"repetition {rep + 1}/{a.repeat} in {time.monotonic() - t0:.0f} s",
                  file=sys.stderr)  # fmt: skip
    finally:
        ref.stop()
    med = {k: statistics.median(r["cpu_us_per_chunk"] for r in v) for k, v in rows.items()}
    spread = {k: [min(r["cpu_us_per_chunk"] for r in v), max(r["cpu_us_per_chunk"] for r in v)]
              for k, v in rows.items()}  # fmt: skip
    print(json.dumps({
        "streams": a.streams, "turns": a.turns, "sessions": a.sessions, "itl_ms": a.itl_ms,
        "runs": rows, "median_cpu_us_per_chunk": med, "range": spread,
        "ratio_sessions_over_single": med["sessions"] / med["single"],
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
