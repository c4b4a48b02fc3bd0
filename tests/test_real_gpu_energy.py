"""benchmarks/real_gpu_energy.py (the figures of docs/TELEMETRY.md "On a real GPU") on a
synthetic GPU whose power reading is the 1 s trailing average of its energy counter's
rate, as NVML documents for nvmlDeviceGetPowerUsage on Ampere (except GA100) and newer.
The expected joules are worked out by hand below each case."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

_saved_path = list(sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import real_gpu_energy as R  # noqa: E402

sys.path[:] = _saved_path

S = 1_000_000_000
STEP = S // 10  # a sample every 100 ms


def true_power(t_ns: int) -> float:
    """80 W idle, 690 W from 8 s, 130 W from 20 s."""
    return 80.0 if t_ns < 8 * S else 690.0 if t_ns < 20 * S else 130.0


def energy(t_ns: int) -> float:
    """The exact integral of true_power from 0 (what the counter reads)."""
    e, t = 0.0, 0
    for edge in (8 * S, 20 * S, t_ns):
        stop = min(edge, t_ns)
        if stop > t:
            e += true_power(t) * (stop - t) / S
            t = stop
    return e


def rows() -> list[dict]:
    out = []
    for k in range(301):  # 0 to 30 s
        t = k * STEP
        busy = 8 * S <= t < 20 * S
        out.append(
            {
                "t_ns": t,
                "energy_j": energy(t),
                # NVML's reading: the counter's rate over the trailing second
                "power_w": 80.0 if t < S else energy(t) - energy(t - S),
                "clock_sm_hz": 1410e6 if busy else 345e6,
                "temp_gpu_c": 60 if busy else 40,
                "throttle_reasons": "sw_power_cap" if busy else "",
                "throttle_power_s": min(max(t - 8 * S, 0), 12 * S) / S,
            }
        )
    return out


PHASES = {"idle_before": (0, 8 * S), "load": (8 * S, 20 * S), "idle_after": (20 * S, 30 * S)}


def test_phases_power_lag_moves_half_a_step_across_each_edge() -> None:
    res = R.analyse(rows(), PHASES)
    p = res["phases"]
    # idle: a flat 80 W, both methods 640 J
    assert p["idle_before"]["counter_j"] == pytest.approx(640.0)
    assert p["idle_before"]["integrated_over_counter"] == pytest.approx(1.0)
    # load: counter 690 W x 12 s = 8280 J; the reading ramps 80 -> 690 W over the first
    # second: 0.5 x (80 + 690) + 690 x 11 = 7975 J, short by (690 - 80) x 0.5 s = 305 J
    assert p["load"]["counter_j"] == pytest.approx(8280.0)
    assert p["load"]["integrated_power_j"] == pytest.approx(7975.0)
    # after: counter 130 W x 10 s = 1300 J; the reading ramps 690 -> 130 W over the first
    # second: 0.5 x (690 + 130) + 130 x 9 = 1580 J, over by (690 - 130) x 0.5 s = 280 J
    assert p["idle_after"]["counter_j"] == pytest.approx(1300.0)
    assert p["idle_after"]["integrated_power_j"] == pytest.approx(1580.0)
    assert p["idle_after"]["integrated_over_counter"] == pytest.approx(1580 / 1300)


def test_steady_load_window_and_what_it_reads() -> None:
    res = R.analyse(rows(), PHASES)
    # the counter's rate first exceeds 400 W over (8.0, 8.1] s and last over (19.9, 20.0] s
    assert res["load_edges_s"] == pytest.approx([8.1, 20.0])
    st = res["steady_load"]
    assert st["seconds"] == pytest.approx(20.0 - 0.1 - 10.1)  # 2 s settle, 0.1 s trim
    assert st["integrated_over_counter"] == pytest.approx(1.0)
    assert st["counter_mean_w"] == pytest.approx(690.0)
    assert st["power_w_min_max"] == pytest.approx([690.0, 690.0])
    assert st["clock_sm_mhz_min_median_max"] == pytest.approx([1410.0, 1410.0, 1410.0])
    assert st["throttle_reasons"] == ["sw_power_cap"]
    assert st["power_violation_s_per_s"] == pytest.approx(1.0)


def test_lag_fits_the_one_second_average_best() -> None:
    lag = R.analyse(rows(), PHASES)["lag"]
    assert lag["1"]["mean_abs_w"] == pytest.approx(0.0, abs=1e-6)
    for w in ("0.1", "0.5", "1.5"):
        assert lag[w]["mean_abs_w"] > 20.0, w


def test_fall_shows_the_counter_drop_at_once_and_the_reading_ramp() -> None:
    fall = R.analyse(rows(), PHASES)["fall"]
    after = [f for f in fall if f["t_s"] > 20.05]
    assert after[0]["counter_rate_w"] == pytest.approx(130.0)
    assert after[0]["power_w"] == pytest.approx(690.0 - 560.0 * 0.1)  # 0.1 s into the ramp
    assert [f["power_w"] for f in after if f["t_s"] >= 21.0 - 1e-9][0] == pytest.approx(130.0)


@pytest.mark.parametrize("with_bounds", [True, False])
def test_load_reads_the_script_output(tmp_path: Path, with_bounds: bool) -> None:
    rs = [dict(r, t_ns=r["t_ns"] + 5 * S) for r in rows()]  # the clock does not start at 0
    with gzip.open(tmp_path / "nvml_rows.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rs)
    check: dict = {"energy": {k: {"seconds": (b - a) / S} for k, (a, b) in PHASES.items()}}
    if with_bounds:  # what real_gpu_check.py now writes: 1 s later than the rows' start
        check["phases_ns"] = {k: [a + 6 * S, b + 6 * S] for k, (a, b) in PHASES.items()}
    (tmp_path / "check.json").write_text(json.dumps(check))
    got_rows, phases = R.load(tmp_path)
    assert got_rows == rs
    shift = 6 * S if with_bounds else 5 * S  # without bounds: end to end from the first row
    assert phases == {k: (a + shift, b + shift) for k, (a, b) in PHASES.items()}


def test_without_an_energy_counter_only_the_phases_with_no_counter_figure() -> None:
    rs = [{k: v for k, v in r.items() if k != "energy_j"} for r in rows()]
    res = R.analyse(rs, PHASES)
    assert set(res) == {"phases"}
    assert res["phases"]["load"]["counter_j"] is None
    assert res["phases"]["load"]["integrated_power_j"] == pytest.approx(7975.0)
    assert res["phases"]["load"]["integrated_over_counter"] is None
