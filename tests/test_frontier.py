"""Frontier extraction, monotone interpolation and goodput against hand-computed cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.metrics.frontier import (
    OUT_OF_RANGE,
    build_frontier,
    frontier_from_points,
    goodput_points,
    highest_load_meeting,
    monotone_interp,
    pareto_indices,
)
from accelbench.suites.sweep import load_sweep
from synthetic_runs import make_sweep


def test_pareto_hand_case():
    x = [10, 20, 15, 30, 5]
    y = [100, 80, 70, 50, 90]
    # (15, 70) is dominated by (20, 80); (5, 90) by (10, 100)
    assert list(pareto_indices(x, y)) == [0, 1, 3]


def test_pareto_ties_and_nonfinite():
    x = [10, 10, 20, np.nan, 20]
    y = [100, 90, 50, 999, 50]
    idx = pareto_indices(x, y)
    assert [(x[i], y[i]) for i in idx] == [(10, 100), (20, 50)]


def test_non_monotone_raw_sweep():
    # concurrency 1..32: throughput rises, then falls past saturation
    inter = [100, 95, 85, 60, 30, 15]
    tput = [100, 190, 350, 600, 640, 600]
    f = frontier_from_points(inter, tput, [f"c={c}" for c in (1, 2, 4, 8, 16, 32)])
    assert f.labels == ["c=16", "c=8", "c=4", "c=2", "c=1"]
    assert list(f.x) == [30, 60, 85, 95, 100]
    assert list(f.y) == [640, 600, 350, 190, 100]
    xs, ys = f.curve(500)
    assert np.all(np.diff(ys) <= 1e-9)  # monotone along the frontier
    assert ys.max() <= 640 + 1e-9 and ys.min() >= 100 - 1e-9  # no overshoot
    v = f.at(60)
    assert v.value == pytest.approx(600) and v.reason is None
    assert f.at(72.5).between == ("c=8", "c=4")


def test_pchip_hand_computed():
    # h = 1, slopes 1 and 3; interior derivative = harmonic mean 6/(3+1) = 1.5;
    # end derivative (3*1 - 3)/2 = 0. Hermite at t = 0.5: 0.5*1 - 0.125*1.5 = 0.3125
    assert monotone_interp([0, 1, 2], [0, 1, 4], 0.5)[0] == pytest.approx(0.3125)
    # two knots: a straight line
    assert monotone_interp([10, 20], [100, 80], 15)[0] == pytest.approx(90)
    # unsorted input is sorted first
    assert monotone_interp([2, 0, 1], [4, 0, 1], 0.5)[0] == pytest.approx(0.3125)


def test_never_extrapolates():
    out = monotone_interp([10, 20, 40], [300, 200, 50], [9.99, 10, 40, 40.01])
    assert np.isnan(out[0]) and np.isnan(out[3])
    assert out[1] == 300 and out[2] == 50
    f = frontier_from_points([10, 20, 40], [300, 200, 50])
    v = f.at(41)
    assert v.value is None and OUT_OF_RANGE in v.reason and "10-40" in v.reason


def test_single_and_empty_frontier():
    f = frontier_from_points([25.0], [400.0])
    assert f.at(25).value == 400
    assert f.at(26).value is None and "one point, at 25" in f.at(26).reason
    e = frontier_from_points([], [])
    assert e.empty and e.at(10).reason == "no usable points"
    with pytest.raises(ValueError):
        monotone_interp([1, 1], [2, 3], 1)


def _sweep(tmp_path, name="s", gpus=1, tpot_scale=1.0, **kw):
    pts = [
        {"concurrency": c, "tpot_ms": tpot_scale * 10 * (1 + c / 8), "ttft_ms": 20 * (1 + c / 4)}
        for c in (1, 2, 4, 8, 16)
    ]
    return make_sweep(tmp_path / name, pts, gpus=gpus, osl=32, jitter=0.02, **kw)


def test_frontier_from_synthetic_sweep(tmp_path):
    s = load_sweep(_sweep(tmp_path, gpus=2))
    assert not s.problems
    f = build_frontier(s.runs, "output_tps_per_gpu")
    # interactivity is 1000 / p50 TPOT: 1000 / (10 * (1 + c/8)) within jitter
    expect = sorted(1000 / (10 * (1 + c / 8)) for c in (1, 2, 4, 8, 16))
    np.testing.assert_allclose(f.x, expect, rtol=0.03)
    # per-GPU throughput: c * osl / e2e / gpus, i.e. rising with c here
    c16 = s.runs[-1]
    e2e = c16.figure("e2e_p50_ms")
    assert f.y[0] == pytest.approx(16 * 32 / (e2e / 1000) / 2, rel=0.05)
    t = build_frontier(s.runs, "total_tps_per_gpu")
    assert np.all(t.y > f.y)


def test_goodput_and_highest_load(tmp_path):
    s = load_sweep(_sweep(tmp_path))
    # TPOT at c: 10*(1+c/8) = 11.25, 12.5, 15, 20, 30 ms
    pts = goodput_points(s.runs, {"tpot_ms": 17.0})
    assert [p.meets for p in pts] == [True, True, True, False, False]
    best = highest_load_meeting(pts)
    assert best is not None and best.load == 4
    assert pts[0].fraction == 1.0 and pts[-1].fraction == 0.0
    assert pts[0].requests_per_s > 0
    assert highest_load_meeting(goodput_points(s.runs, {"ttft_ms": 1.0})) is None


def test_scalar_pchip_matches_scipy():
    from accelbench.metrics.frontier import pchip_at

    rng = np.random.default_rng(3)
    for n in (2, 3, 4, 7):
        for _ in range(20):
            x = np.sort(rng.choice(np.arange(1, 200), n, replace=False)).astype(float)
            y = rng.normal(100, 40, n)
            for t in np.linspace(x[0], x[-1], 13):
                assert pchip_at(x, y, t) == pytest.approx(monotone_interp(x, y, t)[0], abs=1e-9)
    assert np.isnan(pchip_at(np.array([1.0, 2.0]), np.array([1.0, 2.0]), 2.5))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(failed=st.lists(st.booleans(), min_size=1, max_size=4))
def test_property_a_point_left_off_is_said_and_no_frontier_exits_1(tmp_path_factory, failed):
    """Whichever points of a sweep failed every request (a valid summary, null
    interactivity): they are named in one warning line, never left off without a word;
    when no point is left, the command exits 1 with one line saying there is no frontier
    (it printed empty tables and exited 0)."""
    import json

    from cli_inprocess import run_cli

    d = tmp_path_factory.mktemp("f")
    pts = [{"concurrency": 2**i, **({"fail_frac": 1.0} if f else {})}
           for i, f in enumerate(failed)]  # fmt: skip
    make_sweep(d / "sw", pts, osl=32)
    code, out, err, _ = run_cli(["frontier", "sw", "--json"], d)
    (entry,) = json.loads(out)
    gone = [f"c={2**i}" for i, f in enumerate(failed) if f]
    said = [w for w in entry["warnings"] if "left off the frontier" in w]
    assert said == ([f"{', '.join(gone)}: no interactivity (no request succeeded, or none "
                     "with two tokens): left off the frontier"] if gone else [])  # fmt: skip
    points = entry["frontiers"]["output_tps_per_gpu"]["points"]
    assert {p["label"] for p in points} <= {f"c={2**i}" for i, f in enumerate(failed) if not f}
    if all(failed):
        assert code == 1 and not points
        (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert "there is no frontier to show" in line
        code, out, err, _ = run_cli(["frontier", "sw"], d)
        assert code == 1 and "left off the frontier" in err and not out.strip()
    else:
        assert code == 0, err


# ------------------------------------------- compare, report, cost: runs left off, named

_NO_THROUGHPUT = "c=2: no throughput (no request succeeded: no measured window)"
_NO_INTERACTIVITY = "no interactivity (no request succeeded, or none with two tokens)"


def _sweep_lacking(path, lacking: bool):
    """A sweep from 25 to 100 tok/s/user; ``lacking``: c=2 failed every request (no
    figure at all) and c=4 had one-token outputs (throughput, no TPOT: no interactivity)."""
    pts = [{"concurrency": 1, "tpot_ms": 10.0}, {"concurrency": 2, "tpot_ms": 15.0},
           {"concurrency": 4, "tpot_ms": 20.0}, {"concurrency": 8, "tpot_ms": 40.0}]  # fmt: skip
    if lacking:
        pts[1]["fail_frac"] = 1.0
        pts[2]["osl"] = 1
    return make_sweep(path, pts, osl=32)


@pytest.fixture(scope="module", params=[True, False], ids=["lacking", "complete"])
def left_off_sweeps(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("left_off")
    _sweep_lacking(d / "a", request.param)
    _sweep_lacking(d / "b", False)
    return d, request.param


def test_compare_names_the_runs_it_leaves_off(left_off_sweeps):
    """compare left a run with no throughput out of its comparisons, and one with no
    interactivity off its frontiers, without a word: each is named with why, in the API's
    result and on the command line; complete runs give no such line."""
    from accelbench.metrics.compare import compare_sets
    from accelbench.store.sets import load_inputs
    from cli_inprocess import run_cli

    d, lacking = left_off_sweeps
    a, b = load_inputs([d / "a", d / "b"])
    comps = compare_sets(a, b, target_interactivity=50, claims=["B >= 1 x A at 50 tok/s/user"],
                         n_boot=50)  # fmt: skip
    gone = f"A (a): {_NO_THROUGHPUT}: left off the comparisons"
    off = f"A (a): c=4: {_NO_INTERACTIVITY}: left off the frontier"
    for c in comps:
        at_frontier = "tok/s/user" in c.condition
        said = [w for w in c.warnings if "left off" in w]
        assert said == (([gone, off] if at_frontier else [gone]) if lacking else [])
    code, out, err, _ = run_cli(["compare", "a", "b", "--at", "50", "--n-boot", "50"], d)
    assert code == 0, err
    flat = " ".join(out.split())  # the table's console wraps long lines
    assert (gone in flat and off in flat) == lacking and ("left off" in flat) == lacking


def test_report_names_the_runs_left_off_its_frontiers(left_off_sweeps):
    """The report drew its frontiers without the runs lacking a figure and said nothing:
    they are named in the set's warnings, in the HTML's and the Markdown's warnings."""
    from accelbench.report.data import build_report_data
    from accelbench.report.html import render_html
    from accelbench.report.markdown import render_markdown

    d, lacking = left_off_sweeps
    data = build_report_data([d / "a", d / "b"], n_boot=50, timelines=False)
    line = f"c=2, c=4: {_NO_INTERACTIVITY}: left off the frontier"
    said = [w for w in data.sets[0].warnings if "left off" in w]
    assert said == ([line] if lacking else [])
    assert not [w for w in data.sets[1].warnings if "left off" in w]
    md, html = render_markdown(data), render_html(data)
    assert (line in md) == lacking and (line in html) == lacking
    assert ("left off" in md) == lacking


def test_cost_names_the_runs_left_off_a_sweeps_frontier(left_off_sweeps):
    """cost of a sweep at an interactivity left out the runs with no throughput or no
    interactivity without a word: named in the result's warnings (--json) and printed."""
    from accelbench.cost.costing import throughput_from_source
    from cli_inprocess import run_cli

    d, lacking = left_off_sweeps
    line = f"c=2, c=4: {_NO_INTERACTIVITY}: left off the frontier"
    assert throughput_from_source(str(d / "a"), 50).warnings == ([line] if lacking else [])
    args = ["cost", "h100:a", "-i", "50", "--usd-per-gpu-hour", "2"]
    code, out, err, _ = run_cli([*args, "--json"], d)
    assert code == 0, err
    (res,) = json.loads(out)["results"]
    assert res["warnings"] == ([line] if lacking else [])
    code, out, err, _ = run_cli(args, d)
    assert code == 0, err
    flat = " ".join(out.split())
    assert (f"warning: h100: a: {line}" in flat) == lacking and ("left off" in flat) == lacking


def test_cost_names_a_run_whose_figure_is_zero(tmp_path):
    """A sweep run whose summary says 0 tok/s/user (an imported or edited summary) was
    skipped by cost's frontier without a word: named, with why."""
    from accelbench.cost.costing import throughput_from_source

    _sweep_lacking(tmp_path / "a", False)
    summary = tmp_path / "a" / "c0008" / "summary.json"
    doc = json.loads(summary.read_text())
    doc["interactivity"]["tok_s_user"] = 0
    summary.write_text(json.dumps(doc))
    line = "c=8: interactivity or total throughput of 0: left off the frontier"
    assert throughput_from_source(str(tmp_path / "a"), 50).warnings == [line]
