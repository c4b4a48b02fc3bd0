"""How long the continuous-batching scheduler (predict/scheduler.py) takes to simulate
1,000 requests: open loop (Poisson arrivals) and closed loop, over the roofline step
model of ``accelbench serve emulated`` (the default: Llama-3.1-70B on 8 x MI355X).

Usage: python benchmarks/scheduler_speed.py [--requests 1000] [--isl 1024] [--osl 256]
       [--concurrency 64] [--rate 20] [--repeat 5]
Prints the best and median wall time of each, and the simulated figures (a check that
the work was done).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from accelbench.predict.emulate import step_model_for
from accelbench.predict.scheduler import SimRequest, closed_loop, open_loop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--accelerator", default="mi355x")
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--isl", type=int, default=1024)
    ap.add_argument("--osl", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rate", type=float, default=20.0, help="open loop: requests/s")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    model = step_model_for(a.accelerator, a.model, a.tp)
    rng = random.Random(0)
    lens = [(rng.randint(a.isl // 2, a.isl * 3 // 2), rng.randint(a.osl // 2, a.osl * 3 // 2))
            for _ in range(a.requests)]  # fmt: skip
    t, arrivals = 0.0, []
    for _ in lens:
        t += rng.expovariate(a.rate)
        arrivals.append(t)
    reqs = [SimRequest(at, p, o) for at, (p, o) in zip(arrivals, lens, strict=True)]
    for name, run in (("open loop", lambda: open_loop(model, reqs)),
                      ("closed loop", lambda: closed_loop(model, a.concurrency, lens))):  # fmt: skip
        walls = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            s = run()
            walls.append(time.perf_counter() - t0)
        ttft = statistics.median(r.ttft_s for r in s.requests)
        tpot = statistics.median(r.tpot_s for r in s.requests)
        out = sum(r.output_tokens for r in s.requests) / s.duration_s
        print(f"{name}: {a.requests} requests, {len(s.steps):,} steps: wall best "
              f"{min(walls) * 1e3:.1f} ms, median {statistics.median(walls) * 1e3:.1f} ms | "
              f"simulated {s.duration_s:.1f} s, {out:,.0f} output tok/s, TTFT p50 "
              f"{ttft * 1e3:.1f} ms, TPOT p50 {tpot * 1e3:.2f} ms, bounds {s.bound_shares()}")  # fmt: skip


if __name__ == "__main__":
    main()
