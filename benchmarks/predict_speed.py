"""Benchmark: `accelbench predict` speed (issue 23: one point under 1 s, a 1,000-point grid
under 30 s on this machine). Prints JSON.

    python benchmarks/predict_speed.py [--rounds 7]

One point from the command line is timed as a whole process, against two others in the
same rounds, interleaved (a shared host moves absolute times 2x, so the ratios are the
figures to read): `python -c pass`, the interpreter's floor, and the entry point as it was
before it imported commands lazily (every command module imported first, then main()).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from accelbench.predict.point import Layout, Target, predict_point

PREDICT_ARGS = ["predict", "--model", "deepseek-r1", "--accelerator", "mi355x", "--tp", "8",
                "--concurrency", "64"]  # fmt: skip
# the three processes timed in each round
PROCESSES = {
    "floor": "pass",
    "cli": "from accelbench.cli.main import main; main()",
    # the old entry point: main() on the whole tree, every command module imported
    "cli_all_imports": (
        "import accelbench.cli.main as m; m._modules_for = lambda argv: m.COMMAND_MODULES; m.main()"
    ),
}


def _process_s(code: str) -> float:
    argv = [] if code == "pass" else PREDICT_ARGS
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *argv], check=True, capture_output=True)
    return time.perf_counter() - t0


def cli_rounds(rounds: int) -> dict[str, object]:
    """Each process once per round, in the same order, `rounds` times; medians, ranges and
    the ratios of the medians."""
    times: dict[str, list[float]] = {k: [] for k in PROCESSES}
    load_before = os.getloadavg()
    for _ in range(rounds):
        for name, code in PROCESSES.items():
            times[name].append(_process_s(code))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "rounds": rounds,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "range_s": {k: [round(min(v), 3), round(max(v), 3)] for k, v in times.items()},
        "cli_over_floor": round(med["cli"] / med["floor"], 2),
        "cli_all_imports_over_floor": round(med["cli_all_imports"] / med["floor"], 2),
        "cli_over_cli_all_imports": round(med["cli"] / med["cli_all_imports"], 2),
        "cli_minus_floor_s": round(med["cli"] - med["floor"], 3),
        "cli_all_imports_minus_floor_s": round(med["cli_all_imports"] - med["floor"], 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="rounds of the process timings")
    rounds = ap.parse_args().rounds
    cli = cli_rounds(rounds)
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
                # one point from the command line: whole processes, interleaved rounds
                "one_point_cli": cli,
                "one_point_in_process_s": round(one_in_process, 4),  # a search, after the first
                "grid_points": n,
                "grid_s": round(grid, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
