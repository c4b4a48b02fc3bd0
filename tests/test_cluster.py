"""Load from several hosts as one run (`accelbench run --ray`): clock offsets, the plan
partition, and whole runs on a real two-node Ray cluster on loopback against the
reference server's ground truth."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.metrics.records import REQUEST_SCHEMA
from accelbench.runner.benchmark import _worker_specs, run_benchmark
from accelbench.runner.cluster.clock import (
    clock_identity,
    offset_from_samples,
    to_driver_timeline,
)
from accelbench.runner.cluster.partition import fixed_shares
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.workload.plan import PlannedRequest, arrival_offsets

MB = 2**20


# -- the lease: no load once the driver stops renewing it (a fake clock, no sleeping) ------
def test_a_load_actor_stops_once_its_lease_runs_out():
    from accelbench.runner.cluster.ray_workers import LEASE_S, LoadActor

    now = [1000.0]
    actor = LoadActor(None, clock=lambda: now[0])  # the lease needs no spec
    assert not actor.should_stop()  # no lease yet: not started
    actor.renew()
    now[0] += LEASE_S * 0.9
    assert not actor.should_stop()
    actor.renew()  # the driver's renewal moves the deadline
    now[0] += LEASE_S * 0.9
    assert not actor.should_stop()
    now[0] += LEASE_S * 0.2  # LEASE_S * 1.1 without a word
    assert actor.should_stop()
    assert actor.driver_lost == f"no word from the driver for {LEASE_S:g} s"
    actor.renew()  # too late: once lost, it stays stopped
    assert actor.should_stop()


# -- clock offsets (hand-checked numbers) ------------------------------------------------
def test_offset_is_the_minimum_delay_sample():
    # remote = driver + 5000 ns. Sample 2 has the smallest round trip (100 ns) and was
    # read at its midpoint; the others are slow and asymmetric.
    samples = [(0, 9000, 2000), (10_000, 15_100, 10_100), (20_000, 25_400, 21_000)]
    off = offset_from_samples(samples)
    assert off.offset_ns == 15_100 - 10_050 == 5050
    assert off.rtt_min_ns == 100 and off.uncertainty_ns == 50 and off.samples == 3
    # the true offset (5000) lies within the reported uncertainty... of the interval
    # [t_r - t1, t_r - t0] = [5000, 5100]
    assert abs(off.offset_ns - 5000) <= off.uncertainty_ns
    assert off.to_json()["offset_ms"] == pytest.approx(0.00505)


def test_a_worker_on_the_drivers_clock_has_offset_zero_and_keeps_the_estimate():
    est = offset_from_samples([(1_000, 1_600, 1_200)])  # offset 500 +- 100 ns
    same = est.on_same_clock()
    assert (same.offset_ns, same.uncertainty_ns, same.rtt_min_ns, same.samples) == (0, 0, 200, 1)
    assert same.to_json() == {
        "offset_ns": 0, "uncertainty_ns": 0, "rtt_min_ns": 200, "samples": 1,
        "offset_ms": 0.0, "uncertainty_ms": 0.0, "same_clock": True,
        "estimate_ms": 0.0005, "estimate_uncertainty_ms": 0.0001,
    }  # fmt: skip
    assert "same_clock" not in est.to_json()  # an estimated offset says nothing more
    rows = [{"t_send": 10, "chunk_times": [11, 12]}]
    assert to_driver_timeline(rows, same.offset_ns) == [{"t_send": 10, "chunk_times": [11, 12]}]


def test_clock_identity_is_one_for_every_process_of_this_host():
    """Two processes of one boot and time namespace read one CLOCK_MONOTONIC: a child
    reports the parent's identity (and where /proc says nothing, None: then estimated)."""
    here = clock_identity()
    assert here is not None and here.count("/") == 1  # this machine is Linux with /proc
    code = "from accelbench.runner.cluster.clock import clock_identity; print(clock_identity())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, check=True)  # fmt: skip
    assert child.stdout.strip() == here


def test_offset_rejects_bad_samples():
    with pytest.raises(ValueError):
        offset_from_samples([])
    with pytest.raises(ValueError, match="backwards"):
        offset_from_samples([(10, 5, 9)])


def test_records_move_to_the_driver_timeline():
    rows = [{"t_sched": 1000, "t_send": 1100, "t_headers": None, "t_first": 1500,
             "t_last": 1700, "t_done": 1800, "chunk_times": [1500, 1600, 1700], "idx": 7}]  # fmt: skip
    to_driver_timeline(rows, 1000)
    assert rows == [{"t_sched": 0, "t_send": 100, "t_headers": None, "t_first": 500,
                     "t_last": 700, "t_done": 800, "chunk_times": [500, 600, 700], "idx": 7}]  # fmt: skip


# -- the plan partition -----------------------------------------------------------------
def _specs(n_workers: int, **kw) -> tuple[list, list]:
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", model="m", **kw)
    cfg.validate()
    plan = [PlannedRequest(prompt=f"p{i}", isl_planned=4, max_tokens=4) for i in range(23)]
    return _worker_specs(cfg, plan, 3, n_workers, None, "t"), plan


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_closed_loop_shares_cover_the_plan_once(n):
    specs, plan = _specs(n, concurrency=7)
    shares = fixed_shares(specs)
    for phase, lo, hi in ((0, 0, 3), (1, 3, 23)):
        idxs = sorted(i for s in shares for i, _ in s.phases[phase].items)
        assert idxs == list(range(lo, hi))  # every request exactly once
    assert sum(s.phases[1].concurrency for s in shares) == 7
    assert all(len(s.phases) == 2 for s in shares)  # every worker meets both barriers


def test_open_loop_partition_is_the_single_host_schedule():
    specs, plan = _specs(3, rate=10.0, arrival="gamma", burstiness=0.5,
                         workload=WorkloadConfig(seed=4))  # fmt: skip
    assert fixed_shares(specs) is specs  # already one schedule dealt out
    single = arrival_offsets(20, 10.0, "gamma", 0.5, 5)  # the measured phase: seed + 1
    got = sorted((i, o) for s in specs for (i, _), o in zip(s.phases[1].items,
                                                             s.phases[1].offsets, strict=True))  # fmt: skip
    assert [i for i, _ in got] == list(range(3, 23))
    assert np.allclose([o for _, o in got], single)


def test_ray_address_must_not_be_empty():
    with pytest.raises(UsageError, match="--ray needs an address"):
        BenchmarkConfig(url="http://127.0.0.1:9", ray=" ").validate()


def test_without_ray_flag_ray_is_never_imported(reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    code = (
        "import sys\n"
        "from accelbench.runner.benchmark import run_benchmark\n"
        "from accelbench.runner.config import BenchmarkConfig, WorkloadConfig\n"
        f"cfg = BenchmarkConfig(url={srv.url!r}, out_dir={str(tmp_path / 'r')!r}, "
        "num_requests=4, workers=1, telemetry=False, workload=WorkloadConfig(isl=8, osl=4))\n"
        "run_benchmark(cfg)\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r" / "summary.json").is_file()


# -- whole runs on a two-node Ray cluster on this host -------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    import ray  # the [ray] extra, which scripts/test.sh installs: missing is a failure
    from ray.cluster_utils import Cluster

    args = {"num_cpus": 2, "object_store_memory": 100 * MB}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
    cluster.add_node(**args)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _ray_run(url: str, tmp: Path, address: str, **kw) -> tuple[Path, dict, dict, list[dict]]:
    wl = kw.pop("workload", WorkloadConfig(isl=16, osl=10))
    cfg = BenchmarkConfig(url=url, out_dir=str(tmp), workload=wl, telemetry=False,
                          ray=address, **kw)  # fmt: skip
    run_dir = run_benchmark(cfg).directory
    meta = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    return run_dir, meta, summary, rows


def _ground_truth(path: Path) -> dict[str, dict]:
    return {d["request_id"]: d for d in map(json.loads, path.read_text().splitlines())}


def test_closed_loop_on_two_nodes_matches_ground_truth(ray_cluster, reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "20", "--itl-ms", "5")
    run_dir, meta, s, rows = _ray_run(
        srv.url, tmp_path / "run", ray_cluster.address, concurrency=8, workers=2,
        num_requests=40, warmup_requests=4,
    )  # fmt: skip
    assert meta["status"] == s["status"] == "completed"
    assert s["counts"]["completed"] == 40 and s["errors"]["count"] == 0
    # the run directory is a local one's, plus the cluster section
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "requests.jsonl", "requests.parquet", "run.json", "summary.json"]  # fmt: skip
    assert pq.read_schema(run_dir / "requests.parquet").equals(REQUEST_SCHEMA)
    c = meta["cluster"]
    assert c["n_nodes"] == 2 and c["n_actors"] == 2
    assert {a["node_id"] for a in c["actors"]} == {n["node_id"] for n in c["nodes"]}
    # each actor records the offset its start instant was converted with: its node's
    offs = {n["node_id"]: n["clock"]["offset_ms"] for n in c["nodes"]}
    assert all(a["clock_offset_ms"] == offs[a["node_id"]] for a in c["actors"])
    # one host: every node reads the driver's own clock, so its offset is 0 exactly (not
    # estimated), and the round trips' estimate, kept as a check, lies within its
    # uncertainty of that truth (0.05 ms for the integer rounding of the midpoint and Ray)
    for node in c["nodes"]:
        clk = node["clock"]
        assert clk["same_clock"] is True and clk["offset_ns"] == 0 and clk["uncertainty_ns"] == 0
        assert abs(clk["estimate_ms"]) < 1.0
        assert abs(clk["estimate_ms"]) <= clk["estimate_uncertainty_ms"] + 0.05
        assert "clock_end" not in node  # the driver's clock does not drift from itself
    assert c["clock_uncertainty_ms"] == 0
    assert all(a["nice"] == 0 for a in c["actors"])  # not Ray's 15 for its workers
    # request by request: each planned request once, from both actors, timed like the server
    assert sorted(r["idx"] for r in rows) == list(range(44))
    assert {r["worker"] for r in rows} == {0, 1}
    gt = _ground_truth(srv.ground_truth)
    assert sorted(gt) == sorted(["probe", *(r["request_id"] for r in rows)])
    ttft_err, gap_err = [], []
    for r in rows:
        truth = gt[r["request_id"]]["token_times"]
        assert len(truth) == len(r["chunk_times"]) == r["osl"] == 10
        ttft_err.append((r["t_first"] - truth[0]) / 1e6)
        gap_err += list((np.diff(r["chunk_times"]) - np.diff(truth)) / 1e6)
    # the client cannot see a token before it was written: on the driver's own clock (no
    # offset estimate in between) not even by the 0.1-0.4 ms an estimate may be off
    assert min(ttft_err) > -0.05
    assert np.median(np.abs(ttft_err)) < 5.0 and np.median(np.abs(gap_err)) < 2.0
    assert s["client"]["n_workers"] == 2 and len(s["client"]["workers"]) == 2


def test_open_loop_arrivals_match_the_planned_schedule(ray_cluster, reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "2")
    rate, n = 40.0, 40
    _, meta, s, rows = _ray_run(
        srv.url, tmp_path / "run", ray_cluster.address, rate=rate, arrival="poisson",
        num_requests=n, workers=3, workload=WorkloadConfig(isl=8, osl=4, seed=3),
    )  # fmt: skip
    assert s["status"] == "completed" and s["counts"]["completed"] == n
    assert {r["worker"] for r in rows} == {0, 1, 2}
    planned = arrival_offsets(n, rate, "poisson", 1.0, 4)  # measured phase: seed + 1
    start = meta["cluster"]["start_ns"]
    got = sorted(rows, key=lambda r: r["idx"])
    assert [r["idx"] for r in got] == list(range(n))
    err_ms = np.array([(r["t_sched"] - start) / 1e6 - 1e3 * planned[r["idx"]] for r in got])
    # within an actor the planned offsets are kept exactly; each actor's phase starts
    # within a few ms of the common instant on a quiet host (its loop start-up; three
    # actors waking at once on 2 busy cores take longer)
    worker = np.array([r["worker"] for r in got])
    for k in range(3):
        assert np.ptp(err_ms[worker == k]) < 0.01, err_ms[worker == k]
    assert err_ms.min() >= -1.0 and err_ms.max() < 100.0, err_ms
    lag = np.array([(r["t_send"] - r["t_sched"]) / 1e6 for r in got])
    assert np.median(lag) < 5.0


def test_lost_actor_keeps_its_records_and_marks_the_run_partial(
    ray_cluster, reference_server, tmp_path
):
    import ray

    srv = reference_server("--ttft-ms", "10", "--itl-ms", "10")
    out = tmp_path / "run"
    killed: list[str] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        journal = out / "requests.jsonl"
        while time.monotonic() < deadline:
            if journal.exists() and len(journal.read_bytes().splitlines()) >= 8:
                break
            time.sleep(0.05)
        for a in ray.util.list_named_actors(all_namespaces=True):
            if a["name"].startswith("accelbench-load-") and a["name"].endswith("-1"):
                ray.kill(ray.get_actor(a["name"], namespace=a["namespace"]))
                killed.append(a["name"])

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    _, meta, s, rows = _ray_run(
        srv.url, out, ray_cluster.address, concurrency=4, workers=2, num_requests=80,
        workload=WorkloadConfig(isl=8, osl=15),
    )  # fmt: skip
    t.join(5)
    assert len(killed) == 1
    assert meta["status"] == s["status"] == "partial"
    assert any("load actor 1" in w and "lost" in w for w in s["client"]["warnings"])
    assert "lost" in meta["cluster"]["actors"][1]
    from1 = [r for r in rows if r["worker"] == 1]
    from0 = [r for r in rows if r["worker"] == 0]
    assert from1 and all(r["ok"] for r in from1)  # what it streamed back is kept
    assert len(from0) == 40 and all(r["ok"] for r in from0)  # the other finished its share
    assert s["counts"]["completed"] == len(rows) < 80


def test_sigint_stops_every_actor_at_once(ray_cluster, reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "10", "--itl-ms", "20")
    out = tmp_path / "int"
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.address}
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "run", "--url", srv.url, "--ray", "auto",
         "--workers", "2", "-c", "4", "-n", "400", "--osl", "25", "--isl", "8",
         "--out", str(out), "--quiet", "--no-telemetry"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    journal = out / "requests.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= 8:
            break
        time.sleep(0.05)
    t_sig = time.monotonic_ns()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    meta = json.loads((out / "run.json").read_text())
    s = json.loads((out / "summary.json").read_text())
    rows = pq.read_table(out / "requests.parquet").to_pylist()
    assert meta["status"] == s["status"] == "interrupted"
    assert 8 <= s["counts"]["completed"] < 400 and s["errors"]["count"] == 0
    assert {r["worker"] for r in rows} == {0, 1}
    # one host, one clock: nothing happened on any actor later than 3 s after the signal
    last = max(max(t for t in (r["t_send"], r["t_last"], r["t_done"]) if t) for r in rows)
    assert (last - t_sig) / 1e9 < 3.0  # ~0.25 s expected; unstopped actors sent for ~50 s
    assert s["counts"]["interrupted"] <= 4


# -- --ray local: one start instant, the network, the driver's death, a closed address -----
def _run_cmd(url: str, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "accelbench", "run", "--url", url, "--ray", "local",
            "--out", str(out), "--quiet", "--no-telemetry", *args]  # fmt: skip


def _wait_rows(proc: subprocess.Popen, journal: Path, n: int, timeout: float = 180) -> None:
    """Until the journal holds ``n`` records (Ray starts slowly on 2 busy cores)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= n:
            return
        time.sleep(0.05)
    err = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
    raise AssertionError(f"no {n} records in {timeout} s (exit {proc.poll()}): {err}")


def _listening(root_pid: int) -> list[tuple[str, str, str]]:
    """(address:port, process name, command line) of every listening TCP socket of
    ``root_pid`` and its descendants (``ss -ltnp``)."""
    import psutil

    procs = {p.pid: p for p in psutil.Process(root_pid).children(recursive=True)}
    procs[root_pid] = psutil.Process(root_pid)
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        for pid, p in procs.items():
            if f"pid={pid}," in line:
                with contextlib.suppress(Exception):
                    found.append((line.split()[3], p.name(), " ".join(p.cmdline())))
    return found


# Ray 2.60's own gRPC servers listen on every interface (its C++ servers bind 0.0.0.0
# / [::] with no option, and Ray replaces a loopback node address with the host's), as
# do its agents on the node address; docs/CLUSTER.md "Network" lists them. What keeps
# others out is Ray's token authentication, checked below with a peer that lacks it.
RAY_ALL_INTERFACES = ("gcs_server", "raylet", "ray::", "python", "accelbench")


def test_ray_local_one_start_instant_and_the_network(reference_server, tmp_path):
    from test_start_instant import check_union_is_the_plan

    srv = reference_server("--ttft-ms", "2", "--itl-ms", "1")
    out = tmp_path / "run"
    rate, n, n_warm, seed = 20.0, 500, 4, 5  # 25 s of load: time to look at the sockets
    proc = subprocess.Popen(
        _run_cmd(srv.url, out, "--workers", "2", "--rate", str(rate), "-n", str(n),
                 "--warmup", str(n_warm), "--isl", "8", "--osl", "3", "--seed", str(seed)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_rows(proc, out / "requests.jsonl", 8)
        socks = _listening(proc.pid)
        gcs = [a for a, name, _ in socks if name == "gcs_server"]
        assert socks and len(gcs) == 1, socks
        # no dashboard; everything else on loopback or one of Ray's documented servers
        assert not any(":8265" in a for a, _, _ in socks)
        assert not any("dashboard/dashboard.py" in c for _, _, c in socks), socks
        for addr, name, cmd in socks:
            host = addr.rsplit(":", 1)[0]
            loopback = host in ("127.0.0.1", "[::1]")
            assert loopback or name.startswith(RAY_ALL_INTERFACES) or "ray" in cmd, socks
        # a peer without Ray's token cannot join through those ports
        port = gcs[0].rsplit(":", 1)[1]
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HOME": str(tmp_path),
               "RAY_gcs_server_port_wait_time_s": "1"}  # fmt: skip
        env.pop("RAY_AUTH_TOKEN", None)
        env.pop("RAY_AUTH_TOKEN_PATH", None)
        peer = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address='127.0.0.1:{port}')"],
            capture_output=True, text=True, timeout=90, env=env,
        )  # fmt: skip
        assert peer.returncode != 0 and "InvalidAuthToken" in peer.stderr, peer.stderr[-2000:]
        assert proc.poll() is None, "the run ended before the checks: make it longer"
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    # Ray's "Set RAY_AUTH_MODE=disabled to opt out" (advice --ray local refuses) is not
    # printed on a --quiet run
    assert b"RAY_AUTH_MODE" not in err, err
    meta = json.loads((out / "run.json").read_text())
    s = json.loads((out / "summary.json").read_text())
    rows = pq.read_table(out / "requests.parquet").to_pylist()
    assert s["status"] == "completed" and s["counts"]["completed"] == n
    # the load actors ran at nice 0 (Ray's workers run at 15 otherwise: starved by the
    # server whenever it wants the CPU), on the driver's own clock
    assert [a["nice"] for a in meta["cluster"]["actors"]] == [0, 0]
    assert all(nd["clock"]["same_clock"] for nd in meta["cluster"]["nodes"])
    assert {r["worker"] for r in rows} == {0, 1}
    assert meta["schedule"]["start_ns"] == meta["cluster"]["start_ns"]
    worst = check_union_is_the_plan(meta, s, rows, rate, n, n_warm, seed)
    print("Ray local: worst send error per worker (ms):", worst)


def test_ray_local_with_token_auth_disabled_is_refused(tmp_path):
    r = subprocess.run(
        _run_cmd("http://127.0.0.1:9", tmp_path / "run", "-n", "2"),
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "RAY_AUTH_MODE" in r.stderr and not (tmp_path / "run").exists()


class _Lateness:
    """A thread that sleeps 10 ms at a time and keeps the worst lateness of its wake-ups:
    what a busy host does to any process's timers, the actors' included."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            t0 = time.monotonic()
            time.sleep(0.01)
            self.worst_ms = max(self.worst_ms, (time.monotonic() - t0 - 0.01) * 1000)

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.worst_ms


def test_no_load_after_the_driver_is_killed(reference_server, tmp_path):
    """SIGKILL of `run --ray local`: the actors watch the driver's process and send
    nothing after it died (they sent 116 more requests before); the server's own
    receive times are the judge."""
    import psutil

    srv = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _run_cmd(srv.url, out, "--workers", "2", "-c", "8", "-n", "100000", "--isl", "8",
                 "--osl", "10"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_rows(proc, out / "requests.jsonl", 64)
        family = psutil.Process(proc.pid).children(recursive=True)
        late = _Lateness()  # how late a 10 ms sleep wakes on this host meanwhile
        t_kill = time.monotonic_ns()
        proc.kill()
    finally:
        proc.kill()
        proc.wait()
    time.sleep(4)  # the load, if any, would go on meanwhile (~100 requests/s here)
    lag_ms = late.stop()
    gt = _ground_truth(srv.ground_truth)
    recv = sorted((d["t_recv"] - t_kill) / 1e6 for d in gt.values() if d["request_id"] != "probe")
    after = [x for x in recv if x > 0]
    print(
        f"requests received after the kill: {len(after)}, the last {max(after, default=0):.1f} ms"
    )
    # An actor checks the driver's pidfd every 50 ms (its flusher); one already past
    # that check may still send. 500 ms leaves 450 ms for a late wake-up on 2 busy cores;
    # where this host woke sleepers later than that meanwhile, the bound is what it measured
    # (an actor's check and its send may each wake that late)
    bound = max(500.0, 50.0 + 2 * lag_ms)
    assert max(after, default=0.0) < bound, (after, f"wake-up lateness max {lag_ms:.0f} ms")
    assert len(recv) > 64
    # and nothing of the Ray runtime outlives the driver (PROCESSES.md)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(p.is_running() for p in family):
        time.sleep(0.2)
    alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, alive


def test_unreachable_ray_address_fails_fast_in_one_line(tmp_path):
    from accelbench.ports import free_port
    from accelbench.runner.cluster.ray_workers import _check_reachable

    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", "http://127.0.0.1:9", "--ray",
         f"127.0.0.1:{port}", "-n", "2", "--out", str(tmp_path / "run"), "--no-telemetry"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Ray cluster" in lines[0], r.stderr
    assert took < 30 and not (tmp_path / "run").exists()  # was: past 60 s
    # where Ray would connect (it replaces a loopback host with the node's address)
    from ray._private.services import get_node_ip_address

    host = get_node_ip_address()
    # an address that never answers (a full backlog drops the SYN): the bound, not Ray's
    import socket

    srv = socket.socket()
    srv.bind((host, 0))
    srv.listen(0)
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue; the next connect waits
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(srv.getsockname())
            fillers.append(c)
        t0 = time.monotonic()
        with pytest.raises(UsageError, match="timed out"):
            _check_reachable(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=1.0)
        assert time.monotonic() - t0 < 5
    finally:
        for c in fillers:
            c.close()
        srv.close()
    # something else listening there (ray.init would retry it for minutes): not gRPC
    srv = socket.socket()
    srv.bind((host, 0))
    srv.listen(8)

    def answer_http1() -> None:
        conn, _ = srv.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    t = threading.Thread(target=answer_http1, daemon=True)
    t.start()
    try:
        with pytest.raises(UsageError, match="does not speak gRPC"):
            _check_reachable(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=5.0)
    finally:
        t.join(5)
        srv.close()


def test_a_live_cluster_address_passes_the_reachability_check(ray_cluster):
    from accelbench.runner.cluster.ray_workers import _check_reachable

    _check_reachable(ray_cluster.address, timeout_s=5.0)  # its GCS speaks gRPC


# -- --ray without Ray installed: one line, exit 2, before anything starts ----------------
@pytest.mark.parametrize("address", ["local", "auto", "127.0.0.1:6379", "ray://127.0.0.1:10001"])
def test_ray_not_installed_is_one_line(address, monkeypatch, tmp_path):
    """Ray is an extra (accelbench[ray]): asking for it where it is missing is bad usage
    that names the install, in the API's check and in every command that takes --ray,
    never an internal error (exit 70) from the import."""
    from tests.cli_inprocess import run_cli

    from accelbench.runner.cluster import RAY_MISSING

    monkeypatch.setitem(sys.modules, "ray", None)  # what an import finds without the extra
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", concurrency=1, num_requests=1, ray=address)
    with pytest.raises(UsageError, match=r"pip install 'accelbench\[ray\]'"):
        cfg.validate()
    for cmd in (["run", "-c", "1", "-n", "1"], ["sweep", "--values", "1"]):
        code, out, err, _ = run_cli(
            [*cmd, "--url", "http://127.0.0.1:9", "--ray", address, "--out", str(tmp_path / "o")],
            tmp_path,
        )
        assert code == 2, (cmd, code, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and RAY_MISSING in lines[0], (cmd, err)
        assert "Traceback" not in err and not (tmp_path / "o").exists()


_LEFT_BEHIND = r"""
import os, subprocess, sys, time
from accelbench.runner.cluster import ray_workers
ray_workers._tie_local_ray()
if sys.argv[1] == "grandchild":  # as Ray's agents: a child's child, reparented on its death
    mid = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; p = subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL); "
        "print(p.pid, flush=True); time.sleep(1)"], stdout=subprocess.PIPE, text=True)
    pid = int(mid.stdout.readline())
else:
    pid = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL).pid
time.sleep(0.6)  # the guard sees it (it polls every 0.2 s)
print(pid, flush=True)
if sys.argv[2] == "exit":
    sys.exit(130)
raise KeyboardInterrupt
"""


@settings(max_examples=4, deadline=None)
@given(st.sampled_from(["child", "grandchild"]), st.sampled_from(["exit", "interrupt"]))
def test_what_a_stopped_ray_start_left_is_ended_at_exit(where, how):
    """A stop inside ``ray.init`` (SIGTERM 3 s into `run --ray local`) left Ray's
    DashboardAgent and RuntimeEnvAgent running for a minute after accelbench had exited:
    ``ray.shutdown()`` had nothing to shut down, and the exit hook then killed the guard
    that would have ended them. Whatever the driver leaves behind now ends with it."""
    import psutil

    r = subprocess.run(
        [sys.executable, "-c", _LEFT_BEHIND, where, how],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    pid = int(r.stdout.split()[-1])
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"pid {pid} ({where}) outlived the driver ({how})")


class _Placed(Exception):
    """Raised where the pool goes on to create its actors: the CPU check let it through."""


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.sampled_from([1.0, 2.0, 3.0, 8.0, 16.0]))
def test_ray_local_refuses_more_actors_than_its_cpus_at_once(n, cpus):
    """--ray local has no autoscaler: more actors than its CPUs can never be placed. They
    are refused at once, naming --workers and the CPUs (it waited the 120 s placement
    timeout, then said "add nodes"); as many as the CPUs or fewer go on to be placed."""
    import ray

    from accelbench.runner.cluster import ray_workers

    specs, _ = _specs(n, concurrency=64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray_workers, "connect", lambda address: False)
        mp.setattr(ray_workers, "local_cpus", lambda: cpus, raising=False)

        def placed(*a, **kw):
            raise _Placed

        mp.setattr(ray, "remote", placed)
        pool = ray_workers.RayWorkerPool(specs, "local")
        if n > cpus:
            with pytest.raises(UsageError, match=rf"--workers {n} needs {n} CPUs .* has {cpus:g}"):
                pool.start()
        else:
            with pytest.raises(_Placed):
                pool.start()


def test_ray_local_too_many_workers_leaves_no_run_directory(
    reference_server, monkeypatch, tmp_path
):
    """Regression: `run --ray local --workers 3` on a 2-CPU host waited 120 s, exited 2 and
    left the run directory with run.json status "running". Now: one line at once, and the
    directory (nothing was sent) is removed."""
    from accelbench.runner.cluster import ray_workers

    monkeypatch.setattr(ray_workers, "connect", lambda address: False)
    monkeypatch.setattr(ray_workers, "local_cpus", lambda: 2.0)
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "run"), concurrency=4,
                          num_requests=8, workers=3, telemetry=False, ray="local")  # fmt: skip
    with pytest.raises(UsageError, match="--workers 3 needs 3 CPUs"):
        run_benchmark(cfg)
    assert not (tmp_path / "run").exists()
