"""The energy figures of docs/TELEMETRY.md "On a real GPU", from what real_gpu_check.py wrote.

Reads OUT_DIR/nvml_rows.jsonl (or .jsonl.gz) and OUT_DIR/check.json and prints, as JSON:

- ``phases``: per phase (idle, load, idle), NVML's energy counter against the integral of
  NVML's power samples (the two energy methods of accelbench.telemetry.energy);
- ``steady_load``: the same from ``settle_s`` after the counter's rate first exceeds
  ``high_w`` to ``trim_s`` before it last does, with the power, SM clock, temperatures,
  throttle reasons and the growth of the power-violation time over that window;
- ``lag``: near the load's two edges, how far the power reading is from the counter's rate
  averaged over a trailing window of each length (the length that fits best is how long
  the power reading averages over);
- ``fall``: the samples after the load ends, power reading beside the counter's rate.

    python benchmarks/real_gpu_energy.py OUT_DIR [OUT_DIR ...]

real_gpu_check.py stores the phase bounds (``phases_ns``) in check.json. A check.json
without them (the first runs') has only each phase's length: the phases are then laid end
to end from the first row's ``t_ns``, as the script ran them (the gaps between them are a
process start, milliseconds).
"""

from __future__ import annotations

import bisect
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from accelbench.telemetry.energy import counter_energy, integrate_power

Points = list[tuple[int, float]]
PHASES = ("idle_before", "load", "idle_after")


def load(out: Path) -> tuple[list[dict[str, Any]], dict[str, tuple[int, int]]]:
    """The NVML rows and the phase bounds (ns) of one real_gpu_check.py output folder."""
    plain = out / "nvml_rows.jsonl"
    if plain.exists():
        text = plain.read_text()
    else:
        with gzip.open(out / "nvml_rows.jsonl.gz", "rt") as f:
            text = f.read()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    check = json.loads((out / "check.json").read_text())
    if "phases_ns" in check:
        phases = {k: (int(a), int(b)) for k, (a, b) in check["phases_ns"].items()}
    else:
        phases, t = {}, int(rows[0]["t_ns"])
        for name in PHASES:
            end = t + int(check["energy"][name]["seconds"] * 1e9)
            phases[name] = (t, end)
            t = end
    return rows, phases


def series(rows: list[dict[str, Any]], col: str) -> Points:
    return [(int(r["t_ns"]), float(r[col])) for r in rows if r.get(col) is not None]


def compare(energy: Points, power: Points, a: int, b: int) -> dict[str, float | None]:
    """Counter joules, integrated-power joules and their ratio over [a, b]."""
    c = counter_energy(energy, a, b)
    i = integrate_power(power, a, b)
    return {
        "seconds": (b - a) / 1e9,
        "counter_j": c,
        "integrated_power_j": i,
        "integrated_over_counter": None if not c or i is None else i / c,
    }


def counter_rate(energy: Points) -> Points:
    """The counter's rate (W) between consecutive samples, stamped at the later one."""
    return [
        (tb, (eb - ea) / ((tb - ta) / 1e9))
        for (ta, ea), (tb, eb) in zip(energy, energy[1:], strict=False)
    ]


def trailing_rate(energy: Points, t: int, window_ns: int) -> float | None:
    """The counter's rate over [t - window, t], from the samples at or before each end."""
    ts = [p[0] for p in energy]
    j = bisect.bisect_right(ts, t) - 1
    k = bisect.bisect_right(ts, t - window_ns) - 1
    if k < 0 or j <= k:
        return None
    return (energy[j][1] - energy[k][1]) / ((ts[j] - ts[k]) / 1e9)


def load_edges(energy: Points, high_w: float) -> tuple[int, int] | None:
    """First and last sample time at which the counter's rate exceeds ``high_w``."""
    high = [t for t, w in counter_rate(energy) if w > high_w]
    return (high[0], high[-1]) if high else None


def analyse(
    rows: list[dict[str, Any]],
    phases: dict[str, tuple[int, int]],
    high_w: float = 400.0,
    settle_s: float = 2.0,
    trim_s: float = 0.1,
    edge_s: float = 3.0,
    windows_s: tuple[float, ...] = (0.1, 0.5, 1.0, 1.5),
) -> dict[str, Any]:
    energy, power = series(rows, "energy_j"), series(rows, "power_w")
    out: dict[str, Any] = {
        "phases": {k: compare(energy, power, a, b) for k, (a, b) in phases.items()}
    }
    edges = load_edges(energy, high_w)
    if edges is None:  # no counter, or no load seen on it
        return out
    t0 = energy[0][0]
    on, off = edges
    a, b = on + int(settle_s * 1e9), off - int(trim_s * 1e9)
    steady = [r for r in rows if a <= r["t_ns"] <= b]
    out["load_edges_s"] = [(on - t0) / 1e9, (off - t0) / 1e9]
    if steady:
        clocks = [r["clock_sm_hz"] / 1e6 for r in steady if r.get("clock_sm_hz") is not None]
        viol = [
            (r["t_ns"], r["throttle_power_s"])
            for r in steady
            if r.get("throttle_power_s") is not None
        ]
        c = compare(energy, power, a, b)
        out["steady_load"] = {
            **c,
            "counter_mean_w": None if c["counter_j"] is None else c["counter_j"] / ((b - a) / 1e9),
            "power_w_min_max": _min_max(steady, "power_w"),
            "clock_sm_mhz_min_median_max": [min(clocks), statistics.median(clocks), max(clocks)]
            if clocks
            else None,
            "temp_gpu_c_min_max": _min_max(steady, "temp_gpu_c"),
            "throttle_reasons": sorted({r.get("throttle_reasons") or "" for r in steady}),
            "power_violation_s_per_s": None
            if len(viol) < 2
            else (viol[-1][1] - viol[0][1]) / ((viol[-1][0] - viol[0][0]) / 1e9),
        }
    near = [(t, p) for t, p in power if abs(t - on) <= edge_s * 1e9 or abs(t - off) <= edge_s * 1e9]
    lag: dict[str, Any] = {}
    for w in windows_s:
        errs = [
            abs(p - r) for t, p in near if (r := trailing_rate(energy, t, int(w * 1e9))) is not None
        ]
        lag[f"{w:g}"] = {
            "mean_abs_w": statistics.fmean(errs) if errs else None,
            "samples": len(errs),
        }
    out["lag"] = lag
    rate = dict(counter_rate(energy))
    out["fall"] = [
        {"t_s": (t - t0) / 1e9, "power_w": p, "counter_rate_w": rate.get(t)}
        for t, p in power
        if off - int(0.2e9) <= t <= off + int(1.6e9)
    ]
    return out


def _min_max(rows: list[dict[str, Any]], col: str) -> list[float] | None:
    vals = [float(r[col]) for r in rows if r.get(col) is not None]
    return [min(vals), max(vals)] if vals else None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for d in argv:
        rows, phases = load(Path(d))
        print(json.dumps({"dir": d, **analyse(rows, phases)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
