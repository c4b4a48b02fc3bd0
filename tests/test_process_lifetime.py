"""Load workers never outlive the client, and a stop takes effect at once at any rate:
real runs in subprocesses against the reference server, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from accelbench.runner.loadgen import LoadWorker, PhaseSpec, WorkerSpec
from accelbench.workload.plan import PlannedRequest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def server_requests(url: str) -> int:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    return int(text.split("\nreference_requests_total ")[1].split()[0])


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_run(url: str, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "accelbench", "run", "--url", url, "--isl", "16", "--out",
         str(out), "--quiet", "--no-telemetry", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def wait_journal(out: Path, lines: int, timeout: float = 60) -> None:
    journal = out / "requests.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= lines:
            return
        time.sleep(0.05)
    raise AssertionError("the run did not start")


def test_workers_die_with_a_killed_parent(reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "2", "--itl-ms", "2")
    proc = start_run(srv.url, tmp_path / "k", "-c", "8", "--duration", "120", "--osl", "10",
                     "--workers", "2")  # fmt: skip
    try:
        wait_journal(tmp_path / "k", 20)
        workers = [p for p in children(proc.pid) if alive(p)]
        assert len(workers) >= 2  # the two load workers (and multiprocessing's tracker)
        before = server_requests(srv.url)
        t_kill = time.monotonic_ns()
        os.kill(proc.pid, signal.SIGKILL)  # the parent only, not its process group
        t0 = time.monotonic()
        while any(alive(p) for p in workers) and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        gone = time.monotonic() - t0
        at_kill = server_requests(srv.url)
        time.sleep(1.0)
        after = server_requests(srv.url)
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    print(f"workers gone {1000 * gone:.0f} ms after SIGKILL; server requests {before} "
          f"before, {at_kill} when gone, {after} 1 s later")  # fmt: skip
    assert gone < 2.0, f"workers still alive {gone:.1f} s after the parent died"
    assert after == at_kill  # nothing sends requests any more
    # the workers stopped sending with the parent's death, not at a later poll: the last
    # request the server received (its ground truth, on this host's monotonic clock)
    # came in within 0.5 s of the kill (a closed loop of 8 streams sends ~1 per 3 ms)
    got = [json.loads(x) for x in srv.ground_truth.read_text().splitlines()]
    last = max(d["t_recv"] for d in got if "t_recv" in d)
    assert (last - t_kill) / 1e9 < 0.5, (last - t_kill) / 1e6


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_at_a_slow_rate_is_immediate(reference_server, tmp_path, sig):
    """0.05 req/s: the next arrival is 20 s away; a stop used to wait for it."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    out = tmp_path / "slow"
    proc = start_run(srv.url, out, "--rate", "0.05", "--arrival", "constant", "-n", "5",
                     "--osl", "4")  # fmt: skip
    wait_journal(out, 1)
    before = server_requests(srv.url)
    t0 = time.monotonic()
    proc.send_signal(sig)
    rc = proc.wait(30)
    took = time.monotonic() - t0
    print(f"{signal.Signals(sig).name} at 0.05 req/s: exited after {1000 * took:.0f} ms")
    assert rc in (0, 1)  # the exit code of an interrupted run is the CLI's (README)
    assert took < 10.0  # interpreter teardown and finalizing included; was 15.6-20 s
    assert server_requests(srv.url) == before == 2  # the probe and the first request
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "interrupted" and s["counts"]["completed"] == 1


@pytest.mark.parametrize("far", [20.0, 1e300])
def test_open_loop_stops_issuing_at_once(reference_server, far):
    """In process, to time the loop itself: the next arrival is `far` seconds away
    (a rate of 0.05 req/s, or 1e-300); after the stop, run() returns within a second,
    not at that arrival."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    req = PlannedRequest(prompt="x" * 8, max_tokens=2, isl_planned=8)
    phase = PhaseSpec(name="measured", items=[(0, req), (1, req)], offsets=[0.0, far])
    spec = WorkerSpec(worker=0, n_workers=1, base_url=srv.url, model="reference",
                      endpoint="completions", stream=True, api_key=None, timeout_s=10,
                      ignore_eos=True, extra_body={}, save_text=False, run_tag="t",
                      phases=[phase])  # fmt: skip
    stop = threading.Event()
    rows: list[dict] = []
    worker = LoadWorker(spec, rows.extend, stop.is_set)
    stopped_at: list[float] = []

    def stopper() -> None:
        time.sleep(0.5)
        stopped_at.append(time.monotonic())
        stop.set()

    threading.Thread(target=stopper, daemon=True).start()
    stats = asyncio.run(worker.run())
    latency = time.monotonic() - stopped_at[0]
    print(f"next arrival in {far:g} s: run() returned {1000 * latency:.0f} ms after the stop")
    assert stats["sent"] == 1 and len(rows) == 1 and rows[0]["ok"]
    assert latency < 1.0  # 9 ms measured on a quiet host; was 20 s, or never


# -- a stop signal at each moment a run is vulnerable to it ----------------------------
# accelbench runs under a wrapper that sends the signals to itself from inside the code
# path, right after the named step (its Python handler runs at the next statement): the
# moment is hit every time, whatever the host's load, instead of by a timed kill.
_AT = textwrap.dedent(
    """
    import importlib, os, signal, sys
    moment, sigs = sys.argv[1], [getattr(signal, s) for s in sys.argv[2].split(",")]
    del sys.argv[1:3]
    sys.argv[0] = "accelbench"
    fired = []

    def send():
        if not fired:
            fired.append(1)
            for s in sigs:
                os.kill(os.getpid(), s)

    def after(module, name):
        mod = importlib.import_module(module)
        orig = getattr(mod, name)

        def wrapped(*a, **k):
            out = orig(*a, **k)
            send()
            return out

        setattr(mod, name, wrapped)

    import accelbench.__main__ as entry  # the entry point only: nothing else imported yet
    if moment == "import":  # while the CLI's modules load
        class Hook:
            def find_spec(self, name, path=None, target=None):
                if name == "typer":
                    send()
                return None
        sys.meta_path.insert(0, Hook())
    elif moment == "planned":  # run.json written, before the load
        after("accelbench.runner.benchmark", "write_run_doc")
    elif moment == "records":  # the first records journaled: the load is running
        from accelbench.store.rundir import Journal
        orig_write = Journal.write
        def write(self, rows):
            orig_write(self, rows)
            send()
        Journal.write = write
    elif moment == "workers":  # while the parent waits for the load workers to be ready
        from accelbench.runner import workers
        orig_start = workers.WorkerPool.start
        def start(self, *a, **k):
            real_get = self.out.get
            def get(*ga, **gk):
                send()
                return real_get(*ga, **gk)
            self.out.get = get
            return orig_start(self, *a, **k)
        workers.WorkerPool.start = start
    elif moment == "parquet":  # the end of the run: requests.parquet written, summary not
        after("accelbench.runner.finalize", "write_parquet_atomic")
    elif moment == "summary":  # summary.json written, run.json not yet
        after("accelbench.runner.finalize", "write_summary")
    elif moment == "printed":  # the result shown, the command about to exit
        after("accelbench.report.terminal", "print_summary")
    elif moment == "exit":  # in multiprocessing's exit hook, before it reaps the tracker
        from multiprocessing import util
        util.Finalize(None, send, exitpriority=-50)
    entry.main()
    """
)


def run_at(moment: str, signals: str, args: list[str]) -> tuple[int, str]:
    """``accelbench ARGS`` with ``signals`` (``SIGINT,SIGTERM``) sent at ``moment``:
    (exit code, stderr). Fails on a hang (120 s: a loaded host, not a bound)."""
    proc = subprocess.run([sys.executable, "-c", _AT, moment, signals, *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    return proc.returncode, proc.stderr


def run_args(url: str, out: Path, *extra: str, n: int = 6) -> list[str]:
    return ["run", "--url", url, "-c", "2", "-n", str(n), "--isl", "16", "--osl", "4",
            "--no-telemetry", "-o", str(out), *extra]  # fmt: skip


def status_of(out: Path) -> str:
    return json.loads((out / "run.json").read_text())["status"]


@pytest.mark.parametrize("signals", ["SIGINT", "SIGTERM", "SIGINT,SIGINT", "SIGHUP,SIGTERM"])
@pytest.mark.parametrize("moment", ["parquet", "summary"])
def test_a_stop_while_the_run_finishes_its_files_is_finished_first(
    reference_server, tmp_path, moment, signals
):
    """audit #1: a stop after every request had finished, while requests.parquet /
    summary.json / run.json were written, lost the summary, left run.json ``running`` and
    exited 130. The files are finished; the run had completed: exit 0."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    out = tmp_path / "r"
    rc, err = run_at(moment, signals, run_args(srv.url, out, "-q"))
    assert rc == 0, err
    assert "Traceback" not in err
    assert status_of(out) == "completed"
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "completed" and s["counts"]["completed"] == 6


def test_a_stop_mid_run_keeps_the_results_and_says_so_once(reference_server, tmp_path):
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    out = tmp_path / "r"
    rc, err = run_at("records", "SIGINT", run_args(srv.url, out, n=200))
    assert rc == 1, err
    assert status_of(out) == "interrupted"
    assert (out / "summary.json").exists() and (out / "requests.parquet").exists()
    assert err.count("run interrupted: results so far are in") == 1, err  # audit #9


@pytest.mark.parametrize("signals", ["SIGINT,SIGINT", "SIGTERM,SIGTERM"])
def test_a_second_stop_while_the_workers_start_is_a_stop_not_a_failure(
    reference_server, tmp_path, signals
):
    """audit #2: the second signal kills the starting workers; start() took their death
    for a failure to start (exit 70, run.json ``running``)."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    out = tmp_path / "r"
    rc, err = run_at("workers", signals, run_args(srv.url, out, "-q"))
    assert rc == 1, err
    assert "internal error" not in err and "Traceback" not in err
    assert status_of(out) == "interrupted"
    assert (out / "summary.json").exists()


@pytest.mark.parametrize("signals", ["SIGTERM", "SIGINT"])
def test_a_stop_before_the_load_leaves_no_empty_run_directory(reference_server, tmp_path, signals):
    """audit #9: a stop after the run's directory was made, before any request: nothing
    to keep (exit 130), and no directory left behind holding only run.json."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    out = tmp_path / "r"
    rc, err = run_at("planned", signals, run_args(srv.url, out, "-q"))
    assert rc == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("signals", ["SIGINT", "SIGHUP", "SIGINT,SIGTERM"])
@pytest.mark.parametrize("moment", ["printed", "exit"])
def test_a_late_stop_does_not_turn_a_finished_run_into_a_crash(
    reference_server, tmp_path, moment, signals
):
    """audit #6: once the files are written, a stop (while the summary is printed, in
    multiprocessing's exit hook) gave a KeyboardInterrupt traceback with exit 0, or a
    death by the signal (exit -2, -1). The command's own exit code stands."""
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    out = tmp_path / "r"
    rc, err = run_at(moment, signals, run_args(srv.url, out))
    assert rc == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert status_of(out) == "completed"


@pytest.mark.parametrize("signals", ["SIGINT", "SIGTERM"])
def test_a_stop_while_the_cli_loads_is_one_line(tmp_path, signals):
    """audit #6: a stop while the CLI's modules were imported printed a traceback (and
    SIGTERM killed it, no handler set yet)."""
    rc, err = run_at("import", signals, ["--version"])
    assert rc == 130, err
    assert err.strip() == "interrupted"


def sweep_args(url: str, out: Path) -> list[str]:
    return ["sweep", "--url", url, "--values", "1,2", "--isl-osl", "16/4",
            "--requests-per-point", "3", "--no-telemetry", "--no-saturation-stop", "-q",
            "-o", str(out)]  # fmt: skip


def sweep_points(out: Path) -> tuple[str, list[tuple[int, str]]]:
    sj = json.loads((out / "sweep.json").read_text())
    return sj["status"], [(p["value"], p["status"]) for p in sj["points"]]


@pytest.mark.parametrize(
    ("moment", "point_1"), [("records", "interrupted"), ("parquet", "completed")]
)
def test_a_stop_ends_the_sweep_after_its_point_and_a_rerun_resumes(
    reference_server, tmp_path, moment, point_1
):
    """audit #5: Ctrl-C during a point recorded it ``failed`` and the sweep ran the next
    one; a stop while the point finished its files exited 130 with its run.json
    ``running``. Now: the point is finished (interrupted, or completed when all its
    requests were done), the next not run, exit 1; a rerun runs what is missing."""
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    out = tmp_path / "sw"
    rc, err = run_at(moment, "SIGINT", sweep_args(srv.url, out))
    assert rc == 1, err
    assert "Traceback" not in err
    assert sweep_points(out) == ("interrupted", [(1, point_1), (2, "pending")])
    assert status_of(out / "c0001") == point_1
    assert not (out / "c0002").exists()
    again = subprocess.run([sys.executable, "-m", "accelbench", *sweep_args(srv.url, out)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert sweep_points(out) == ("completed", [(1, "completed"), (2, "completed")])
