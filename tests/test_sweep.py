"""Sweep planning, the saturation stop, resuming, and (engine) a real llama-server sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.errors import AccelbenchError, UsageError
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.suites.sweep import (
    SaturationRule,
    SweepPlan,
    inferencex_config,
    load_sweep,
    plan_values,
    run_sweep,
)
from synthetic_runs import make_run


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=1, max_size=12))
def test_property_sweep_values_each_once(values):
    """Any --values list: refused naming the repeat when a value comes twice, else every
    value runs, in order (a repeat was dropped without a word)."""
    if len(set(values)) < len(values):
        with pytest.raises(UsageError, match="more than once"):
            plan_values(values)
    else:
        assert plan_values(values) == sorted(float(v) for v in values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["1", "2", "4", "", " "]), min_size=1, max_size=6))
def test_property_an_empty_values_entry_is_refused(items):
    """`--values 1,,2` ran 1 and 2, the empty entry dropped without a word: any list with
    an empty entry is refused naming --values; one without runs each value once."""
    from accelbench.cli.sweep import _floats

    text = ",".join(items)
    if not text.strip():
        assert _floats(text, "--values") == []  # nothing given: the sweep asks for values
    elif any(not x.strip() for x in items):
        with pytest.raises(UsageError, match="--values has an empty entry"):
            _floats(text, "--values")
    else:
        assert _floats(text, "--values") == [float(x) for x in items]


def test_plan_values():
    assert plan_values(start=1, end=64) == [1, 2, 4, 8, 16, 32, 64]
    assert plan_values(start=1, end=48) == [1, 2, 4, 8, 16, 32, 48]
    assert plan_values([8, 1, 4]) == [1, 4, 8]
    with pytest.raises(AccelbenchError, match="--values gives 4.0 more than once"):
        plan_values([8, 1, 4, 4])  # was run once without a word
    assert plan_values([0.5, 1], kind="rate") == [0.5, 1.0]
    with pytest.raises(AccelbenchError, match="whole numbers"):
        plan_values([1.5])
    with pytest.raises(AccelbenchError, match="start <= end"):
        plan_values(start=8, end=4)
    with pytest.raises(AccelbenchError, match="give the sweep"):
        plan_values()
    # both ways at once: the range was ignored (the sweep ran --values only)
    for rng in ({"start": 4, "end": 64}, {"start": 4}, {"end": 64}):
        with pytest.raises(UsageError, match="--values lists the points"):
            plan_values([1, 2], **rng)


@pytest.mark.parametrize("kind", ["concurrency", "rate"])
@pytest.mark.parametrize(
    "bad",
    [
        {"values": [math.nan]},
        {"values": [math.inf]},
        {"values": [1, -math.inf]},
        {"values": [0]},
        {"values": [1e308]},
        {"values": [10**30]},
        {"start": math.nan, "end": 4},
        {"start": 1, "end": math.inf},
        {"start": 1, "end": 1e308},
        {"start": -1, "end": 4},
    ],
)
def test_plan_values_refuses_out_of_range(kind, bad):
    # nan/inf reached int() (ValueError, OverflowError: exit 70) or an empty list (IndexError)
    with pytest.raises(UsageError, match=r"--(values|start|end) must be"):
        plan_values(**bad, kind=kind)


def test_point_config_and_preset(tmp_path):
    base = inferencex_config(BenchmarkConfig(url="http://x/v1", gpus=8), 8192, 1024)
    wl = base.workload
    assert (wl.isl, wl.osl, wl.range_ratio, wl.range_convention) == (8192, 1024, 0.8, "inferencex")
    assert wl.isl_dist == wl.osl_dist == "uniform" and base.ignore_eos
    plan = SweepPlan(base, [1, 16])
    cfg = plan.point_config(16, tmp_path / "c0016")
    assert (cfg.concurrency, cfg.num_requests, cfg.warmup_requests) == (16, 160, 32)
    assert cfg.out_dir == str(tmp_path / "c0016") and cfg.gpus == 8
    assert plan.point_dir(16) == "c0016"
    assert SweepPlan(base, [0.5], "rate").point_dir(0.5) == "r0p5"


class FakeRunner:
    """Fabricates each point's run directory: TPOT grows with concurrency, and past
    ``knee`` requests queue (TTFT explodes, throughput stalls)."""

    def __init__(self, knee: int = 1000, fail_at: int | None = None, errors_at: int | None = None,
                 none_ok_at: int | None = None):  # fmt: skip
        self.calls: list[int] = []
        self.knee, self.fail_at, self.errors_at = knee, fail_at, errors_at
        self.none_ok_at = none_ok_at  # every request fails: the run is failed (finalize)

    def __call__(self, cfg: BenchmarkConfig, progress: bool = True) -> Path:
        c = cfg.concurrency
        self.calls.append(c)
        out = Path(cfg.out_dir)
        if out.exists() and any(out.iterdir()):  # as run_benchmark does
            raise AccelbenchError(f"{out} exists and is not empty")
        if c == self.fail_at:
            out.mkdir(parents=True)
            (out / "run.json").write_text('{"status": "failed"}')  # a partial attempt
            raise RuntimeError("server went away")
        eff = min(c, self.knee)
        ttft = 20.0 * (1 + c / 4) * (1 if c <= self.knee else 4 * c / self.knee)
        make_run(
            cfg.out_dir, cfg.num_requests, concurrency=c, warmup=cfg.warmup_requests,
            tpot_ms=10 * (1 + eff / 8), ttft_ms=ttft, osl=cfg.workload.osl,
            isl=cfg.workload.isl, gpus=cfg.gpus, chunks=False,
            fail_frac=1.0 if c == self.none_ok_at else 0.3 if c == self.errors_at else 0.0,
            seed=c, status="failed" if c == self.none_ok_at else "completed",
        )  # fmt: skip
        return Path(cfg.out_dir)


def _plan(values, **kw):
    base = BenchmarkConfig(url="http://x/v1", workload=WorkloadConfig(isl=64, osl=16), gpus=2)
    return SweepPlan(base, list(values), **kw)


def test_full_sweep_and_load(tmp_path):
    r = FakeRunner()
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=r, progress=False)
    assert r.calls == [1, 2, 4]
    assert doc.status == "completed"
    assert [p.status for p in doc.points] == ["completed"] * 3
    sj = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert sj["base_config"]["gpus"] == 2 and sj["kind"] == "concurrency"
    s = load_sweep(tmp_path / "s")
    assert [x.concurrency for x in s.runs] == [1, 2, 4] and not s.problems
    assert s.runs[0].summary["counts"]["completed"] == 10
    assert s.runs[0].summary["counts"]["warmup"] == 2


def test_resume_runs_only_missing_points(tmp_path):
    r1 = FakeRunner(fail_at=4)
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4, 8]), runner=r1, progress=False)
    assert r1.calls == [1, 2, 4]
    st = {p.value: p.status for p in doc.points}
    assert st == {1: "completed", 2: "completed", 4: "failed", 8: "skipped"}
    assert "server went away" in doc.points[2].reason
    assert doc.status == "partial"
    r2 = FakeRunner()
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4, 8]), runner=r2, progress=False)
    assert r2.calls == [4, 8] and doc.status == "completed"
    assert doc.points[2].earlier_attempts == ["c0004.attempt1"]
    assert (tmp_path / "s" / "c0004.attempt1" / "run.json").exists()
    assert not load_sweep(tmp_path / "s").problems
    r3 = FakeRunner()  # nothing left; a new value extends the sweep
    run_sweep(tmp_path / "s", _plan([16]), runner=r3, progress=False)
    assert r3.calls == [16]


def test_interrupted_point_is_rerun(tmp_path):
    class Interrupting(FakeRunner):
        def __call__(self, cfg, progress=True):
            if cfg.concurrency == 2:
                raise KeyboardInterrupt
            return super().__call__(cfg, progress)

    # a stop while a point starts (its run raises KeyboardInterrupt, nothing of it on
    # disk): the sweep ends there, that point still to run (no directory: pending)
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=Interrupting(), progress=False)
    assert doc.status == "interrupted"
    sj = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert [p["status"] for p in sj["points"]] == ["completed", "pending", "pending"]
    assert sj["status"] == "interrupted"
    r = FakeRunner()
    run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=r, progress=False)
    assert r.calls == [2, 4]


def test_a_point_stopped_by_a_signal_ends_the_sweep(tmp_path):
    """audit #5: a point whose run a stop signal ended (status interrupted, its results
    kept) was recorded ``failed`` and the sweep went on to the next point."""

    class Stopped(FakeRunner):
        def __call__(self, cfg, progress=True):
            out = super().__call__(cfg, progress)
            if cfg.concurrency == 2:
                for name in ("run.json", "summary.json"):
                    doc = json.loads((out / name).read_text())
                    doc["status"] = "interrupted"
                    (out / name).write_text(json.dumps(doc))
            return out

    r = Stopped()
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=r, progress=False)
    assert r.calls == [1, 2]
    assert [p.status for p in doc.points] == ["completed", "interrupted", "pending"]
    assert doc.status == "interrupted"
    r2 = FakeRunner()
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=r2, progress=False)
    assert r2.calls == [2, 4] and doc.status == "completed"
    assert doc.points[1].earlier_attempts == ["c0002.attempt1"]


def test_saturation_stop(tmp_path):
    r = FakeRunner(knee=8)
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4, 8, 16, 32, 64]), runner=r, progress=False)
    assert r.calls == [1, 2, 4, 8, 16]
    assert "saturated at c=16" in doc.stop_reason
    assert [p.status for p in doc.points][-2:] == ["skipped", "skipped"]
    # without the rule, everything runs
    r = FakeRunner(knee=8)
    plan = _plan([1, 8, 16, 32], saturation=SaturationRule(enabled=False))
    run_sweep(tmp_path / "t", plan, runner=r, progress=False)
    assert r.calls == [1, 8, 16, 32]


def test_error_rate_stop(tmp_path):
    r = FakeRunner(errors_at=4)
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4, 8]), runner=r, progress=False)
    assert r.calls == [1, 2, 4]
    assert "error rate" in doc.stop_reason


def test_a_point_with_no_successful_request_fails_and_stops_the_sweep(tmp_path):
    """audit_srv #8: a run whose every request failed said completed; now it is failed,
    and so is its sweep point: the sweep stops there and ends partial (exit 1), even
    without the saturation rule."""
    r = FakeRunner(none_ok_at=2)
    plan = _plan([1, 2, 4], saturation=SaturationRule(enabled=False))
    doc = run_sweep(tmp_path / "s", plan, runner=r, progress=False)
    assert r.calls == [1, 2]
    assert [p.status for p in doc.points] == ["completed", "failed", "skipped"]
    assert doc.points[1].reason == "no measured request succeeded"
    assert doc.status == "partial" and "no measured request succeeded" in (doc.stop_reason or "")


def test_other_sweep_in_same_dir_refused(tmp_path):
    run_sweep(tmp_path / "s", _plan([1]), runner=FakeRunner(), progress=False)
    other = _plan([1])
    other.base = other.base.with_(workload=WorkloadConfig(isl=128, osl=16))
    with pytest.raises(AccelbenchError, match="different sweep"):
        run_sweep(tmp_path / "s", other, runner=FakeRunner(), progress=False)


# how a resume may differ from the sweep it resumes: (option named, change to the plan)
_MEASURED_OTHERWISE = {
    "--endpoint": lambda p: setattr(p, "base", p.base.with_(endpoint="chat")),
    "--stream": lambda p: setattr(p, "base", p.base.with_(stream=False)),
    "--extra-body": lambda p: setattr(p, "base", p.base.with_(extra_body={"temperature": 1})),
    "--ignore-eos": lambda p: setattr(p, "base", p.base.with_(ignore_eos=not p.base.ignore_eos)),
    "--slo": lambda p: setattr(p, "base", p.base.with_(slo={"ttft_ms": 5.0})),
    "--seed": lambda p: setattr(p, "base", p.base.with_(
        workload=WorkloadConfig(isl=64, osl=16, seed=7))),
    "--osl-dist": lambda p: setattr(p, "base", p.base.with_(
        workload=WorkloadConfig(isl=64, osl=16, osl_dist="uniform", range_ratio=0.5))),
    "--requests-per-point": lambda p: setattr(p, "requests_per_point", 3.0),
    "--warmup-per-point": lambda p: setattr(p, "warmup_per_point", 0.0),
}  # fmt: skip
_SAME_MEASUREMENT = {
    "--url": lambda p: setattr(p, "base", p.base.with_(url="http://127.0.0.1:9/v1")),
    "--timeout": lambda p: setattr(p, "base", p.base.with_(timeout_s=1200.0)),
    "--workers": lambda p: setattr(p, "base", p.base.with_(workers=2)),
    "--results-root": lambda p: setattr(p, "base", p.base.with_(results_root="elsewhere")),
    "--no-telemetry": lambda p: setattr(p, "base", p.base.with_(telemetry=False)),
}  # fmt: skip


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(option=st.sampled_from(sorted(_MEASURED_OTHERWISE) + sorted(_SAME_MEASUREMENT)))
def test_a_resume_that_would_measure_otherwise_is_refused(tmp_path_factory, option):
    """Property: rerunning a sweep resumes it only as it was measured. Before, a resume
    with --endpoint chat (or --no-ignore-eos, --extra-body, --requests-per-point 5...)
    kept the completed points (completions, 2 requests each), ran the new ones otherwise,
    and rewrote sweep.json's base_config as if all were chat: one frontier of two ways of
    measuring. Now refused, one line naming the option, nothing run or rewritten; the
    URL, timeouts, workers, results root and telemetry may change."""
    d = tmp_path_factory.mktemp("s") / "s"
    run_sweep(d, _plan([1, 2]), runner=FakeRunner(), progress=False)
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    plan = _plan([1, 2, 4])
    (_MEASURED_OTHERWISE | _SAME_MEASUREMENT)[option](plan)
    r = FakeRunner()
    if option in _SAME_MEASUREMENT:
        doc = run_sweep(d, plan, runner=r, progress=False)
        assert [p.status for p in doc.points] == ["completed"] * 3 and len(r.calls) == 1
        return
    with pytest.raises(AccelbenchError) as exc:
        run_sweep(d, plan, runner=r, progress=False)
    msg = str(exc.value)
    assert msg.count(option) == 1 and "sweep.json" in msg and "\n" not in msg, msg
    assert exc.value.exit_code == 2 and r.calls == []
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda d: [1, 2], "not a JSON object: list"),
        (lambda d: {**d, "points": None}, "points is not a list of objects"),
        (lambda d: {**d, "points": [1, 2]}, "points is not a list of objects"),
        (lambda d: {**d, "points": [{"value": 1}]}, "a point without a directory"),
        (lambda d: {**d, "points": [{**d["points"][0], "value": math.nan}]}, "whole number"),
        (lambda d: {**d, "points": [{**d["points"][0], "value": "abc"}]}, "must be a number"),
        (lambda d: {**d, "points": [{**d["points"][0], "value": -3}]}, "whole number >= 1"),
        (lambda d: {**d, "points": [{**d["points"][0], "value": 10**6}]}, "must be in [1,"),
    ],
)
def test_damaged_sweep_json_is_one_error_and_touches_nothing(tmp_path, damage, needle):
    # each of these was an AttributeError/TypeError/KeyError/ValueError: exit 70
    run_sweep(tmp_path / "s", _plan([1]), runner=FakeRunner(), progress=False)
    sj = tmp_path / "s" / "sweep.json"
    sj.write_text(json.dumps(damage(json.loads(sj.read_text()))))
    before = {p: p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file()}
    r = FakeRunner()
    with pytest.raises(AccelbenchError, match="damaged") as exc:
        run_sweep(tmp_path / "s", _plan([1, 2]), runner=r, progress=False)
    assert needle in str(exc.value) and r.calls == []
    assert {p: p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file()} == before


def test_run_directories_sweep_json_does_not_list_are_said(tmp_path):
    """The audit's example: sweep.json cut to one point while c0002/ and c0004/ are complete
    runs. The views read the sweep's record (a resume sets unlisted directories aside and
    reruns the point): the others are left out, in one warning line naming them; an
    earlier attempt the record names is not among them."""
    from synthetic_runs import make_sweep

    d = make_sweep(tmp_path / "w5", [{"concurrency": c} for c in (1, 2, 4)], osl=16)
    make_run(d / "c0001.attempt1", 4, concurrency=1, osl=16)
    sj = json.loads((d / "sweep.json").read_text())
    sj["points"] = sj["points"][:1]
    sj["points"][0]["earlier_attempts"] = ["c0001.attempt1"]
    (d / "sweep.json").write_text(json.dumps(sj))
    s = load_sweep(d)
    assert [r.path.name for r in s.runs] == ["c0001"]
    assert s.problems == ["sweep.json lists no point for run directories c0002, c0004: left out"]


_NOT_A_CONCURRENCY = st.sampled_from([0, -3, 0.5, 2.5, math.nan, math.inf, -math.inf, 10**400])
_NOT_A_RATE = st.sampled_from([0, -3, -1e-9, math.nan, math.inf, -math.inf, 10**400])


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data(), kind=st.sampled_from(["concurrency", "rate"]), where=st.sampled_from(
    ["points", "values"]))  # fmt: skip
def test_a_point_that_is_no_load_is_refused_by_the_reader(tmp_path_factory, data, kind, where):
    """A sweep.json point (or planned value) that is no load (zero, negative, NaN,
    infinite, a fractional concurrency): one DocumentError line naming it; the views then
    use the run directories found and say so (the run is not lost); a resume refuses."""
    from accelbench.errors import DocumentError
    from accelbench.store.sweepdoc import SweepDoc
    from synthetic_runs import make_sweep

    bad = data.draw(_NOT_A_CONCURRENCY if kind == "concurrency" else _NOT_A_RATE)
    d = make_sweep(tmp_path_factory.mktemp("sw") / "s", [{"concurrency": 1}, {"concurrency": 2}],
                   osl=16)  # fmt: skip
    sj = json.loads((d / "sweep.json").read_text())
    sj["kind"] = kind
    if where == "points":
        sj["points"][1]["value"] = bad
    else:
        sj["values"][1] = bad
    with pytest.raises(DocumentError) as exc:
        SweepDoc.from_json(sj)
    assert f"sweep.json: {where}[1]" in str(exc.value) and "\n" not in str(exc.value)
    (d / "sweep.json").write_text(json.dumps(sj))
    s = load_sweep(d)
    assert sorted(r.path.name for r in s.runs) == ["c0001", "c0002"]
    assert len(s.problems) == 1 and "using the run directories found" in s.problems[0]
    good = dict(sj, values=[1, 2], points=[dict(p, value=i + 1) for i, p in
                                            enumerate(sj["points"])])  # fmt: skip
    assert [p.value for p in SweepDoc.from_json(good).points] == [1, 2]


def _app() -> typer.Typer:
    from accelbench.cli import analysis, sweep

    app = typer.Typer()
    analysis.register(app)
    sweep.register(app)
    return app


def test_cli_sweep_frontier_compare_report_runs(tmp_path, monkeypatch):
    import accelbench.suites.sweep.core as core

    fake = FakeRunner()
    monkeypatch.setattr(core, "_default_runner", lambda: fake)
    cli = CliRunner()
    app = _app()
    res = cli.invoke(app, ["sweep", "--out", str(tmp_path / "A"), "--url", "http://x/v1",
                           "--values", "1,2,4", "--preset", "inferencex", "--isl-osl", "64/16",
                           "--gpus", "2", "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert fake.calls == [1, 2, 4]
    sj = json.loads((tmp_path / "A" / "sweep.json").read_text())
    assert sj["preset"] == "inferencex" and sj["base_config"]["workload"]["range_ratio"] == 0.8
    res = cli.invoke(app, ["frontier", str(tmp_path / "A"), "--at", "80", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out[0]["frontiers"]["output_tps_per_gpu"]["at"]["value"] is not None
    res = cli.invoke(app, ["compare", str(tmp_path / "A"), str(tmp_path / "A"),
                           "--claim", "B >= 1.3 x A at concurrency 2"])  # fmt: skip
    assert res.exit_code == 1 and "refuted" in res.output  # A vs itself: ratio 1
    res = cli.invoke(app, ["report", str(tmp_path / "A"), "-o", str(tmp_path / "r.html"),
                           "--markdown", str(tmp_path / "r.md"), "--at", "80"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.html").stat().st_size > 100_000 and (tmp_path / "r.md").exists()
    res = cli.invoke(app, ["runs", "query", "SELECT count(*) AS n FROM runs", "--root",
                           str(tmp_path), "--format", "csv"])  # fmt: skip
    assert res.exit_code == 0 and res.output.splitlines() == ["n", "3"]
    res = cli.invoke(app, ["runs", "list", "--root", str(tmp_path)])
    assert res.exit_code == 0 and "3 run(s)" in res.output


def test_cli_sweep_of_a_dataset_is_not_refused_for_the_sweeps_own_isl(tmp_path, monkeypatch):
    """The sweep's --isl defaults to 1024, the run's to 128: a dataset sweep without
    --isl was refused ("--dataset gives the prompts: --isl does not apply") though the
    user gave no --isl."""
    import accelbench.suites.sweep.core as core

    fake = FakeRunner()
    monkeypatch.setattr(core, "_default_runner", lambda: fake)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(4)))
    res = CliRunner().invoke(_app(), ["sweep", "--out", str(tmp_path / "A"), "--url",
                                      "http://x/v1", "--values", "1,2", "--dataset", str(data),
                                      "--osl", "16", "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert fake.calls == [1, 2]
    wl = json.loads((tmp_path / "A" / "sweep.json").read_text())["base_config"]["workload"]
    assert wl["dataset"] == str(data) and wl["osl"] == 16 and wl["isl"] == 128


def test_cli_errors_are_accelbench_errors(tmp_path):
    cli = CliRunner()
    res = cli.invoke(_app(), ["report", str(tmp_path / "missing")])
    assert isinstance(res.exception, AccelbenchError) and "no such file" in str(res.exception)
    res = cli.invoke(_app(), ["compare", str(tmp_path), str(tmp_path), "--claim", "nonsense"])
    assert isinstance(res.exception, AccelbenchError)


@pytest.mark.engine
def test_sweep_against_llama_server(llama_server, tmp_path):
    """A real sweep: two concurrency points against llama.cpp's server, then the report."""
    pytest.importorskip("accelbench.runner.benchmark")
    from accelbench.report.data import build_report_data
    from accelbench.report.html import write_html

    base = BenchmarkConfig(
        url=llama_server, workload=WorkloadConfig(isl=32, osl=16), gpus=1, telemetry=False,
        timeout_s=120,
    )  # fmt: skip
    plan = SweepPlan(base, [1, 2], requests_per_point=3, warmup_per_point=1)
    doc = run_sweep(tmp_path / "sweep", plan, progress=False)
    assert [p.status for p in doc.points] == ["completed", "completed"], doc
    s = load_sweep(tmp_path / "sweep")
    assert len(s.usable_runs) == 2
    for r in s.runs:
        assert r.figure("interactivity") and r.figure("output_tps_per_gpu")
        counts = r.summary["counts"]
        assert counts["completed"] + counts["failed"] == 3 * r.concurrency
        assert counts["completed"] >= 1, r.summary["errors"]
        assert counts["warmup"] == r.concurrency
    again = run_sweep(tmp_path / "sweep", plan, progress=False)  # resumable: nothing to run
    assert again.status == "completed"
    data = build_report_data([tmp_path / "sweep"])
    assert write_html(data, tmp_path / "r.html").stat().st_size > 100_000


class RefusingRunner(FakeRunner):
    """Refuses the points in ``refuse`` as run_benchmark refuses an unknown model or an
    unreachable server: an AccelbenchError before its run directory exists."""

    def __init__(self, refuse: set[int]):
        super().__init__()
        self.refuse = refuse

    def __call__(self, cfg: BenchmarkConfig, progress: bool = True) -> Path:
        if cfg.concurrency in self.refuse:
            raise AccelbenchError("model 'nosuch' is not served at http://x/v1")
        return super().__call__(cfg, progress)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"/"
            for p in sorted(root.rglob("*"))}  # fmt: skip


def test_a_first_point_refused_is_the_sweeps_error_and_leaves_nothing(tmp_path):
    # the audit's `sweep --model nosuch`: exit 2 as `run`, no sweep.json, no folders
    with pytest.raises(AccelbenchError, match="not served"):
        run_sweep(
            tmp_path / "a" / "s", _plan([1, 2]), runner=RefusingRunner({1, 2}), progress=False
        )
    assert list(tmp_path.iterdir()) == []


def test_a_refused_resume_puts_the_sweep_back_as_it_was(tmp_path):
    d = tmp_path / "s"
    run_sweep(d, _plan([1, 2]), runner=FakeRunner(), progress=False)
    before = _tree(d)
    with pytest.raises(AccelbenchError, match="not served"):  # the server changed since
        run_sweep(d, _plan([1, 2, 4]), runner=RefusingRunner({4}), progress=False)
    assert _tree(d) == before


def test_a_later_point_refused_stays_a_failed_point(tmp_path):
    # the server went away mid-sweep: the earlier points are kept, the sweep partial
    doc = run_sweep(tmp_path / "s", _plan([1, 2, 4]), runner=RefusingRunner({2}), progress=False)
    assert [p.status for p in doc.points] == ["completed", "failed", "skipped"]
    assert doc.status == "partial" and (tmp_path / "s" / "sweep.json").exists()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(pairs=st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 4096)), min_size=1, unique=True,
                      max_size=4),
       dup=st.integers(0, 3), zeros=st.integers(0, 2))  # fmt: skip
def test_an_isl_osl_pair_given_twice_is_refused(tmp_path, pairs, dup, zeros):
    """Property: each --isl-osl pair once (as --values, --lengths). Before, a pair given
    twice (also as 16/8 and 016/8) ran its sweep, then resumed it in the same directory,
    without a word. Now exit 2, one line naming it, before anything is made."""
    from cli_inprocess import run_cli

    a, b = pairs[dup % len(pairs)]
    args = [f"{i}/{o}" for i, o in pairs] + [f"{'0' * zeros}{a}/{b}"]
    out = tmp_path / "never"
    code, _, err, _ = run_cli(["sweep", "--url", "http://127.0.0.1:9/v1", "--out", str(out),
                               "--values", "1", *[x for p in args for x in ("--isl-osl", p)]],
                              tmp_path)  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"'{a}/{b}' more than once" in err, err
    assert not out.exists()


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(pairs=st.booleans())
def test_a_run_directory_is_no_sweep_directory(tmp_path_factory, pairs):
    """A sweep into a run directory wrote its sweep.json and c0001 beside the run's files:
    frontier and report then read the directory as that sweep and the run was hidden.
    Refused in one line, exit 2, the run untouched (also a pair's directory of one)."""
    from cli_inprocess import run_cli

    tmp = tmp_path_factory.mktemp("o")
    out = tmp / "r"
    run = out / "isl16_osl8" if pairs else out
    make_run(run, 20)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    extra = ["--isl-osl", "16/8", "--isl-osl", "32/8"] if pairs else []
    code, _, err, _ = run_cli(["sweep", "--url", "http://127.0.0.1:9/v1", "--out", str(out),
                               "--values", "1", *extra], tmp)  # fmt: skip
    (line,) = err.strip().splitlines()
    assert code == 2 and f"--out {run} is a run directory" in line, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(form=st.sampled_from(["../other", "{abs}", "c0001/../../other", "./../other"]),
       point=st.integers(0, 1))  # fmt: skip
def test_a_point_directory_outside_the_sweep_is_left_out(tmp_path_factory, form, point):
    """Property: a sweep's points are run directories under it. An edited sweep.json
    whose point names '../other' or an absolute path pulled that run (any run on the
    disk) into the sweep's frontier, compare and report, without a word. Now that point
    is left out, one warning naming it; the sweep's own points stay."""
    tmp = tmp_path_factory.mktemp("w")
    d = tmp / "s"
    run_sweep(d, _plan([1, 2]), runner=FakeRunner(), progress=False)
    other = make_run(tmp / "other", 20, concurrency=1 + point)
    sj = d / "sweep.json"
    doc = json.loads(sj.read_text())
    doc["points"][point]["dir"] = form.format(abs=other)
    sj.write_text(json.dumps(doc))
    s = load_sweep(d)
    assert all(r.path.resolve().is_relative_to(d.resolve()) for r in s.runs)
    assert len(s.runs) == 1
    assert any(f"point {point + 1}: run directory" in p and "outside the sweep" in p
               for p in s.problems), s.problems  # fmt: skip


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(ij=st.permutations([0, 1, 2]))
def test_a_run_directory_two_points_name_is_read_once(tmp_path_factory, ij):
    """An edited sweep.json whose points 1 and 2 both name c0004 read that run three
    times (three c=4 points, weighed thrice in the frontier and compare), the values 1
    and 2 gone without a word. Now read once, the later points named in a warning."""
    i, j, _ = ij
    d = tmp_path_factory.mktemp("w") / "s"
    run_sweep(d, _plan([1, 2, 4]), runner=FakeRunner(), progress=False)
    sj = d / "sweep.json"
    doc = json.loads(sj.read_text())
    doc["points"][j]["dir"] = doc["points"][i]["dir"]
    sj.write_text(json.dumps(doc))
    s = load_sweep(d)
    paths = [r.path.resolve() for r in s.runs]
    assert len(paths) == len(set(paths)) == 2
    later, first = max(i, j), min(i, j)
    assert any(f"point {[1, 2, 4][later]}: run directory" in p
               and f"point {[1, 2, 4][first]}'s too" in p for p in s.problems), s.problems  # fmt: skip
