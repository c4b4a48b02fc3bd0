"""Benchmark: `accelbench predict` speed (issue 23: one point under 1 s, a 1,000-point grid
under 30 s on this machine). Prints JSON.

    python benchmarks/predict_speed.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from accelbench.predict.point import Layout, Target, predict_point


def main() -> int:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "from accelbench.cli.main import main; main()", "predict", "--model", "deepseek-r1",
         "--accelerator", "mi355x", "--tp", "8", "--concurrency", "64"],
        check=True, capture_output=True,
    )  # fmt: skip
    one_cli = time.perf_counter() - t0
    t0 = time.perf_counter()
    predict_point("llama-3.1-70b", "mi355x", Layout(8), 1024, 1024, Target(interactivity=32))
    one_in_process = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = 0
    for acc in ("h200", "b200", "b300", "mi300x", "mi325x", "mi355x"):
        for isl, osl in ((1024, 1024), (1024, 8192), (8192, 1024), (4096, 512)):
            for c in range(1, 43):
                predict_point("deepseek-r1", acc, Layout(8), isl, osl, Target(concurrency=c * 6))
                n += 1
    grid = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "one_point_cli_s": round(one_cli, 3),  # process start and imports included
                "one_point_in_process_s": round(one_in_process, 4),  # a search, after the first
                "grid_points": n,
                "grid_s": round(grid, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
