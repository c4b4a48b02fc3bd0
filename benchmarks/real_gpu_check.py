"""accelbench on a real NVIDIA GPU: captures and a known-truth energy check, in one run.

Run on a machine with an NVIDIA GPU, nvidia-smi and PyTorch (for the load)::

    python benchmarks/real_gpu_check.py OUT_DIR [--load-s 40]

What it does, in order (about 3 minutes):

1. Captures the tool outputs that accelbench parses (``nvidia-smi``, ``-q``, ``-q -x``,
   ``topo -m``, every ``--query-gpu`` field as CSV, ``dmon``) at idle and under load, so they
   can become fixtures (tests/fixtures/telemetry/SOURCES.md says where each came from).
2. Samples the GPU through accelbench's own NVML source (``NvmlSource``) every 100 ms across
   idle, a bf16 matrix-product load and idle again, and compares two independent NVML
   readings of the same energy: the driver's energy counter (``counter_energy``) against the
   integral of the power samples (``integrate_power``), per phase.
3. Runs ``accelbench health``, ``doctor --json`` and ``monitor`` (its Prometheus scrape) live,
   and ``accelbench run --telemetry`` against the reference server while the GPU is loaded,
   so the run's energy section comes from a real GPU.

Everything lands in OUT_DIR (``check.json`` holds the figures, ``captures/`` the raw outputs,
``nvml_rows.jsonl`` the NVML rows); nothing is judged here beyond what check.json states.
check.json's ``energy_analysis`` is benchmarks/real_gpu_energy.py's reading of the rows
(steady load, the power reading's lag, the fall after the load); that script recomputes it
from OUT_DIR. The figures quoted in docs/TELEMETRY.md ("On a real GPU") come from these two
scripts and ``captures/nvml_sample_profile.txt``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

LOAD = r"""
import sys, time, torch
secs = float(sys.argv[1])
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < secs:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize(); k += 20
dt = time.perf_counter() - t0
print(f"{k} products of {n}^3 bf16 in {dt:.2f} s: {2 * n**3 * k / dt / 1e12:.0f} TFLOP/s", flush=True)
"""


def sh(cmd: list[str], out: Path | None = None, timeout: float = 120) -> str:
    """Run a command; its stdout (and stderr, marked) to ``out`` when given. Never raises."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        text, rc = p.stdout, p.returncode
        err = p.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        text, rc, err = "", -1, str(exc)
    took = time.monotonic() - t0
    if out is not None:
        out.write_text(text)
        if err.strip():
            out.with_suffix(out.suffix + ".stderr").write_text(err)
    print(f"[{took:6.1f}s rc={rc}] {' '.join(cmd)[:110]}", flush=True)
    return text


def query_fields() -> list[str]:
    """Every field ``nvidia-smi --help-query-gpu`` lists (quoted names at a line start)."""
    helptext = sh(["nvidia-smi", "--help-query-gpu"])
    names: list[str] = []
    for line in helptext.splitlines():
        # field names only: the help also quotes enumerated values ("0: Default")
        for name in re.findall(r'^"([a-z][a-z0-9_.]*)"', line):
            if name not in names:
                names.append(name)
    return names


def capture(cap: Path, tag: str, fields: list[str]) -> None:
    sh(["nvidia-smi"], cap / f"nvidia-smi__{tag}.txt")
    sh(["nvidia-smi", "-q"], cap / f"nvidia-smi_q__{tag}.txt")
    sh(["nvidia-smi", "-q", "-x"], cap / f"nvidia-smi_q_x__{tag}.xml")
    sh(
        ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"],
        cap / f"nvidia-smi_query-gpu_csv__{tag}.csv",
    )
    sh(["nvidia-smi", "dmon", "-c", "5"], cap / f"nvidia-smi_dmon__{tag}.txt")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--load-s", type=float, default=40.0)
    ap.add_argument("--idle-s", type=float, default=8.0)
    args = ap.parse_args()
    out: Path = args.out
    cap = out / "captures"
    cap.mkdir(parents=True, exist_ok=True)
    ab = [sys.executable, "-m", "accelbench"]
    result: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    from accelbench.telemetry.energy import counter_energy, integrate_power
    from accelbench.telemetry.sources.nvml import NvmlSource

    sh(["nvidia-smi", "--version"], cap / "nvidia-smi_version.txt")
    sh(["nvidia-smi", "topo", "-m"], cap / "nvidia-smi_topo_m.txt")
    sh(["dmesg"], cap / "dmesg.txt")
    sh(["lspci", "-vvv", "-d", "10de:"], cap / "lspci_vvv.txt")
    fields = query_fields()
    result["query_fields"] = len(fields)
    capture(cap, "idle", fields)
    sh([*ab, "doctor", "--json"], cap / "doctor.json", timeout=180)
    sh([*ab, "health", "--duration", "3", "--json"], cap / "health_idle.json")

    src = NvmlSource()
    why = src.probe()
    result["nvml_probe"] = why or "ok"
    if why is not None:
        (out / "check.json").write_text(json.dumps(result, indent=2))
        print("NVML:", why)
        return 1

    # what one sample costs, call by call (NVML calls go to the driver, in a VM through it)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(50):
        src.sample(time.monotonic_ns())
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
    (cap / "nvml_sample_profile.txt").write_text(buf.getvalue())

    rows: list[dict[str, Any]] = []
    phases: dict[str, tuple[int, int]] = {}
    sample_cost: list[float] = []

    stop = threading.Event()

    def sampler() -> None:  # every 100 ms across all phases, beside the captures and runs
        while not stop.is_set():
            t = time.monotonic_ns()
            rows.extend(src.sample(t))
            sample_cost.append((time.monotonic_ns() - t) / 1e6)
            stop.wait(max(0.0, 0.1 - (time.monotonic_ns() - t) / 1e9))

    thread = threading.Thread(target=sampler, daemon=True)
    t0 = time.monotonic_ns()
    thread.start()
    time.sleep(args.idle_s)
    phases["idle_before"] = (t0, time.monotonic_ns())
    load = subprocess.Popen(
        [sys.executable, "-c", LOAD, str(args.load_s)], stdout=subprocess.PIPE, text=True
    )
    t1 = time.monotonic_ns()
    # the reference server and a benchmark run with telemetry, while the GPU is loaded
    ref = subprocess.Popen(
        [*ab, "serve", "reference", "--port", "18011", "--ttft-ms", "20", "--itl-ms", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mon = subprocess.Popen(
        [*ab, "monitor", "--duration", "20", "--interval", "1", "--port", "19400"],
        stdout=(cap / "monitor.txt").open("w"),
        stderr=subprocess.STDOUT,
    )
    time.sleep(8.0)
    capture(cap, "load", fields)
    try:
        with urllib.request.urlopen("http://127.0.0.1:19400/metrics", timeout=5) as r:
            (cap / "monitor_metrics.prom").write_bytes(r.read())
    except OSError as exc:
        result["monitor_scrape"] = str(exc)
    sh([*ab, "health", "--duration", "3", "--json"], cap / "health_load.json")
    run_dir = out / "run"
    sh(
        [
            *ab,
            "run",
            "--url",
            "http://127.0.0.1:18011",
            "-c",
            "8",
            "-d",
            "10",
            "--osl",
            "64",
            "--telemetry",
            "--telemetry-interval",
            "0.2",
            "--out",
            str(run_dir),
            "-q",
        ],
        cap / "run.txt",
        timeout=120,
    )
    loadline = load.communicate(timeout=args.load_s + 120)[0].strip()
    phases["load"] = (t1, time.monotonic_ns())
    result["load"] = loadline
    t2 = time.monotonic_ns()
    time.sleep(args.idle_s)
    phases["idle_after"] = (t2, time.monotonic_ns())
    time.sleep(0.3)  # one more sample past the window's end
    stop.set()
    thread.join()
    src.close()
    for p in (ref, mon):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

    with (out / "nvml_rows.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
    e_pts = [(r["t_ns"], float(r["energy_j"])) for r in rows if r.get("energy_j") is not None]
    p_pts = [(r["t_ns"], float(r["power_w"])) for r in rows if r.get("power_w") is not None]
    energy: dict[str, Any] = {}
    for name, (a, b) in phases.items():
        c = counter_energy(e_pts, a, b)
        i = integrate_power(p_pts, a, b)
        energy[name] = {
            "seconds": (b - a) / 1e9,
            "counter_j": c,
            "integrated_power_j": i,
            "integrated_over_counter": None if not c or i is None else i / c,
            "mean_power_w": None if c is None else c / ((b - a) / 1e9),
        }
    result["energy"] = energy
    result["phases_ns"] = phases
    # the steady-load window, the power reading's lag and the fall after the load
    # (real_gpu_energy.py; it reads the same back from OUT_DIR later)
    from real_gpu_energy import analyse

    result["energy_analysis"] = analyse(rows, phases)
    result["samples"] = len(rows)
    result["sample_ms"] = {
        "median": sorted(sample_cost)[len(sample_cost) // 2],
        "max": max(sample_cost),
    }

    # how often the counter and the power reading change (their update periods)
    def changes(pts: list[tuple[int, float]]) -> float | None:
        ts = [t for (t, v), (_, w) in zip(pts[1:], pts, strict=False) if v != w]
        return None if len(ts) < 2 else (ts[-1] - ts[0]) / 1e6 / (len(ts) - 1)

    result["update_period_ms"] = {"energy_counter": changes(e_pts), "power": changes(p_pts)}
    result["first_row"] = {k: v for k, v in rows[0].items() if v is not None} if rows else None
    summary = run_dir / "summary.json"
    if summary.exists():
        result["run_energy"] = json.loads(summary.read_text()).get("energy")
    (out / "check.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: result[k] for k in ("load", "energy", "update_period_ms")}, indent=2))
    shutil.make_archive(str(out / "captures"), "gztar", cap)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
