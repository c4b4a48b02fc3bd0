"""Client health: when chunk timestamps may be later than the timing-error bound."""

from __future__ import annotations

from accelbench.runner.finalize import (
    STREAMS_PER_WORKER_KNEE,
    TIMING_BOUND_MS,
    RecordedConfig,
    _client_health,
)


def _summary(n_workers: int, lag_ms: float, util: float = 0.3) -> dict:
    workers = [
        {"worker": i, "cpu_s": 10 * util, "wall_s": 10.0, "loop_lag_ms_p99": lag_ms}
        for i in range(n_workers)
    ]
    return {
        "client": {"workers": workers, "n_workers": n_workers, "warnings": []},
        "latency": {"schedule_lag_ms": {"p99": None}},
        "window": {"duration_s": 10.0},
        "counts": {"completed": 100, "failed": 0},
    }


def test_streams_per_worker_above_the_knee_is_flagged():
    s = _summary(1, lag_ms=0.5)
    _client_health(s, RecordedConfig(concurrency=2 * STREAMS_PER_WORKER_KNEE))
    c = s["client"]
    assert c["streams_per_worker"] == 2 * STREAMS_PER_WORKER_KNEE
    assert any("streams per load worker" in w and "add --workers" in w for w in c["warnings"])
    # the same streams over two workers are at the knee: no warning
    s = _summary(2, lag_ms=0.5)
    _client_health(s, RecordedConfig(concurrency=2 * STREAMS_PER_WORKER_KNEE))
    assert s["client"]["streams_per_worker"] == STREAMS_PER_WORKER_KNEE
    assert s["client"]["warnings"] == []


def test_loop_lag_above_the_bound_is_flagged_with_its_cause():
    s = _summary(1, lag_ms=TIMING_BOUND_MS + 0.5, util=0.2)
    _client_health(s, RecordedConfig(concurrency=8))
    (w,) = s["client"]["warnings"]
    assert "lagged (p99 2.5 ms" in w and "other processes" in w
    assert not s["client"]["bottleneck"]  # an idle worker kept waiting is not the limit
    s = _summary(1, lag_ms=TIMING_BOUND_MS, util=0.2)  # at the bound: fine
    _client_health(s, RecordedConfig(concurrency=8))
    assert s["client"]["warnings"] == []


def test_open_loop_without_a_cap_has_no_streams_figure():
    s = _summary(1, lag_ms=0.1)
    _client_health(s, RecordedConfig(rate=5.0))
    assert s["client"]["streams_per_worker"] is None


def test_auto_workers_follow_the_knee(monkeypatch):
    """Hand-checked with the knee at 128: 300 streams -> 3 workers where 8 cores allow
    4; 1,000 -> capped at 4 (half of 8 cores) locally, 8 on a Ray cluster, the CPUs Ray has
    with --ray local; 2 cores -> always 1."""
    from accelbench.runner import benchmark
    from accelbench.runner.config import BenchmarkConfig

    assert STREAMS_PER_WORKER_KNEE == 128
    monkeypatch.setattr(benchmark.os, "cpu_count", lambda: 8)
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=128)) == 1
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=129)) == 2
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=300)) == 3
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=1000)) == 4
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=1000, ray="auto")) == 8
    # --ray local: the CPUs of the Ray runtime it started (one actor each), not the knee's 8
    from accelbench.runner.cluster import ray_workers

    monkeypatch.setattr(ray_workers, "local_cpus", lambda: 2.0)
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=1000, ray="local")) == 2
    assert benchmark.auto_workers(BenchmarkConfig(rate=100.0)) == 2  # 2 s of arrivals: 200
    monkeypatch.setattr(benchmark.os, "cpu_count", lambda: 2)
    assert benchmark.auto_workers(BenchmarkConfig(concurrency=1000)) == 1


def _kernel(s: dict, read_delay_p99: float | None, gap_p50: float) -> dict:
    s["client"].update(arrival_stamps="kernel", read_delay_ms_p99=read_delay_p99)
    s["latency"]["chunk_gap_ms"] = {"p50": gap_p50}
    return s


def test_kernel_stamps_drop_the_streams_per_worker_warning():
    """With the kernel's receive times, many streams per worker do not make chunk times
    late; what can, a read taking two chunks of one stream, is flagged by the read delay."""
    s = _kernel(_summary(1, lag_ms=0.5), read_delay_p99=0.3, gap_p50=10.0)
    _client_health(s, RecordedConfig(concurrency=4 * STREAMS_PER_WORKER_KNEE))
    assert s["client"]["streams_per_worker"] == 4 * STREAMS_PER_WORKER_KNEE
    assert s["client"]["warnings"] == []
    s = _kernel(_summary(1, lag_ms=0.5), read_delay_p99=12.5, gap_p50=10.0)
    _client_health(s, RecordedConfig(concurrency=4 * STREAMS_PER_WORKER_KNEE))
    (w,) = s["client"]["warnings"]
    assert "up to 12.5 ms (p99)" in w and "median chunk gap (10.0 ms)" in w
    assert "add --workers" in w


def test_kernel_stamps_loop_lag_means_late_sends_not_late_times():
    s = _kernel(_summary(1, lag_ms=TIMING_BOUND_MS + 1, util=0.8), read_delay_p99=0.2,
                gap_p50=10.0)  # fmt: skip
    _client_health(s, RecordedConfig(concurrency=8))
    (w,) = s["client"]["warnings"]
    assert "lagged (p99 3.0 ms; it was busy)" in w
    assert "requests may have gone out late" in w and "not delayed by it" in w


def test_a_stepped_wall_clock_is_flagged_with_its_step():
    """Kernel stamps are on the wall clock: moving against the monotonic clock (only a
    step does that) is flagged with its rate and largest step; 50 ppm and less is not."""
    s = _kernel(_summary(1, lag_ms=0.5), read_delay_p99=0.3, gap_p50=10.0)
    s["client"].update(realtime_drift_ppm=5000.0, realtime_step_ms_max=0.5)
    _client_health(s, RecordedConfig(concurrency=8))
    (w,) = s["client"]["warnings"]
    assert "+5000 ppm, steps up to 0.50 ms" in w and "off by one step" in w
    s = _kernel(_summary(1, lag_ms=0.5), read_delay_p99=0.3, gap_p50=10.0)
    s["client"].update(realtime_drift_ppm=-50.0, realtime_step_ms_max=0.0)
    _client_health(s, RecordedConfig(concurrency=8))
    assert s["client"]["warnings"] == []


def test_a_niced_worker_is_named_and_nice_zero_says_nothing():
    s = _summary(2, lag_ms=0.5)
    s["client"]["workers"][1]["nice"] = 15  # Ray's default for its workers
    s["client"]["workers"][0]["nice"] = 0
    _client_health(s, RecordedConfig(concurrency=8))
    (w,) = s["client"]["warnings"]
    assert w.startswith("load worker(s) 1 ran at nice 15:") and "nice 0" in w
    for nice in (0, None):  # at 0, or not recorded (a summary from before): no alarm
        s = _summary(2, lag_ms=0.5)
        for wk in s["client"]["workers"]:
            wk["nice"] = nice
        _client_health(s, RecordedConfig(concurrency=8))
        assert s["client"]["warnings"] == []


def test_a_run_started_under_nice_records_and_warns(reference_server, tmp_path):
    """End to end: `nice -n 5 accelbench run` against the reference server; its worker
    inherits the niceness, summary.json records it and says so."""
    import json
    import os
    import subprocess
    import sys

    srv = reference_server("--ttft-ms", "2", "--itl-ms", "1")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "-c", "2", "-n", "6",
           "--isl", "8", "--osl", "3", "--workers", "1", "--quiet", "--no-telemetry",
           "-o", str(out)]  # fmt: skip
    base = os.getpriority(os.PRIO_PROCESS, 0)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                       preexec_fn=lambda: os.nice(5))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    c = json.loads((out / "summary.json").read_text())["client"]
    assert [w["nice"] for w in c["workers"]] == [base + 5]
    assert any(w.startswith(f"load worker(s) 0 ran at nice {base + 5}:") for w in c["warnings"])


def test_a_busy_worker_is_judged_only_over_a_second_of_its_life():
    """audit_srv #9: a run stopped at once (0 requests) warned 'load worker 0 used 94% of
    a core' from 0.02 s of CPU over 0.021 s: CPU counts in 10 ms ticks."""
    s = _summary(1, lag_ms=0.1)
    s["client"]["workers"][0].update(cpu_s=0.02, wall_s=0.0213)
    _client_health(s, RecordedConfig(concurrency=2))
    assert s["client"]["warnings"] == [] and not s["client"]["bottleneck"]
    s = _summary(1, lag_ms=0.1, util=0.95)  # 9.5 s of 10 s: the client may be the limit
    _client_health(s, RecordedConfig(concurrency=2))
    assert any("used 95% of a core" in w for w in s["client"]["warnings"])
    assert s["client"]["bottleneck"]
