"""Alerts off the sampling path: a hung alert command, a webhook that never answers and a
hung recovery action must not delay sampling; the queue is bounded; a stopping monitor
ends the hung command (its process group) within its drain time."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from accelbench.health.monitor import Dispatcher, Monitor
from accelbench.monitoring.recovery import Recovery, RecoveryPolicy
from accelbench.telemetry.schema import new_row
from accelbench.telemetry.sources.base import Source

OK = {"temp_gpu_c": 60.0, "temp_slowdown_c": 95.0, "ecc_uncorrected_volatile": 0}
HOT = {"temp_gpu_c": 96.0, "temp_slowdown_c": 95.0, "ecc_uncorrected_volatile": 0}
INTERVAL = 0.1
TICKS = 40


class Flapping(Source):
    """OK, HOT, OK, ...: every sample changes the verdict, so every tick alerts. Records
    when each sample was taken."""

    name = "flapping"

    def __init__(self) -> None:
        self.times: list[float] = []

    def probe(self) -> str | None:
        return None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        self.times.append(time.monotonic())
        kw = HOT if len(self.times) % 2 else OK
        return [new_row(t_ns=t_ns, kind="gpu", vendor="nvidia", uuid="GPU-x", device_index=0, **kw)]


def lateness(times: list[float]) -> float:
    """How far the latest sample was behind its slot on the monitor's schedule."""
    return max(t - (times[0] + k * INTERVAL) for k, t in enumerate(times))


def run(mon: Monitor, src: Flapping) -> tuple[float, float]:
    """(lateness of sampling, seconds run() took including its drain)."""
    t0 = time.monotonic()
    mon.run(iterations=TICKS)
    return lateness(src.times), time.monotonic() - t0


def hung_children() -> list[psutil.Process]:
    """The alert commands still running (a zombie, or one gone meanwhile, runs no more:
    its command line cannot be read; on a busy host the reaper may not have run yet)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "hung-alert" in " ".join(p.cmdline()):
                out.append(p)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return out


HUNG = [sys.executable, "-c", "import sys, time; open(sys.argv[1], 'a').write('x'); "
        "time.sleep(60)", "PLACEHOLDER", "hung-alert"]  # fmt: skip


def test_hung_alert_command_does_not_stop_sampling(tmp_path: Path) -> None:
    # the control: the same monitor without any alert action, on this machine now
    src0 = Flapping()
    late0, _ = run(Monitor([src0], INTERVAL, 0.0), src0)

    started = tmp_path / "started"
    argv = [*HUNG[:3], str(started), HUNG[4]]
    src = Flapping()
    mon = Monitor([src], INTERVAL, 0.0, alert_cmd=argv, drain_s=1.0)
    mon.dispatcher = Dispatcher(max_pending=4)
    late, took = run(mon, src)
    print(f"lateness {late:.4f} s (control {late0:.4f} s), run {took:.2f} s")

    assert len(src.times) == TICKS
    assert started.read_text() == "x"  # the pager did start (once: it hangs)
    assert len(mon.events) == TICKS  # every tick changed the verdict
    # Before, the first alert held the loop for its 30 s timeout. Now no sample is a
    # whole interval late; the bound is one interval beyond what the control measured
    # (the spawn of the child shares the CPUs with sampling).
    assert late < INTERVAL + late0, (late, late0)
    # bounded queue: 4 waiting at most, the rest dropped and counted
    assert mon.dispatcher.dropped >= TICKS - 1 - 4
    # stopping: 1 s of drain, then the hung command's group is ended (SIGTERM, then
    # SIGKILL after 0.5 s): run() returns within the ticks + drain + that grace + 1 s
    assert took < TICKS * INTERVAL + late + 1.0 + 0.5 + 1.0, took
    assert hung_children() == []


def test_webhook_that_never_answers_does_not_stop_sampling() -> None:
    # a listening socket that never accepts: connect succeeds, the answer never comes
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/hook"
    try:
        src0 = Flapping()
        late0, _ = run(Monitor([src0], INTERVAL, 0.0), src0)
        src = Flapping()
        mon = Monitor([src], INTERVAL, 0.0, webhook=url, drain_s=0.5)
        late, took = run(mon, src)
    finally:
        srv.close()
    assert len(src.times) == TICKS
    assert late < INTERVAL + late0, (late, late0)
    # the hung POST stays in its own 10 s timeout in an abandoned daemon thread: the
    # monitor does not wait for it (drain 0.5 s, join 0.5 s)
    assert took < TICKS * INTERVAL + late + 0.5 + 0.5 + 1.0, took


def test_hung_recovery_action_runs_off_the_sampling_path(tmp_path: Path) -> None:
    started = tmp_path / "started"
    log = tmp_path / "recovery.jsonl"
    src = Flapping()
    done: list[dict[str, Any]] = []
    mon = Monitor([src], INTERVAL, 0.0, drain_s=0.5)
    policy = RecoveryPolicy(
        argv=[*HUNG[:3], str(started), HUNG[4]], rules=["temperature"], cooldown_s=0,
        max_per_hour=100, log_path=log, timeout_s=0.5,
    )  # fmt: skip
    rec = Recovery(policy, dispatcher=mon.dispatcher, on_done=done.append)
    entries: list[dict[str, Any] | None] = []
    mon.on_tick = lambda rows, health: entries.append(rec.consider(health))
    src0 = Flapping()
    late0, _ = run(Monitor([src0], INTERVAL, 0.0), src0)
    late, _ = run(mon, src)
    assert late < INTERVAL + late0, (late, late0)
    started_entries = [e for e in entries if e is not None and e["action"] == "started"]
    assert started_entries, entries
    # each action that ran was ended by its own 0.5 s timeout (None), or by the stop
    # (killed by a signal: negative), and logged as it ended
    assert done and all(e["action"] == "ran" for e in done)
    assert all(e["exit_status"] is None or e["exit_status"] < 0 for e in done), done
    assert log.read_text().count('"action": "ran"') == len(done)
    assert hung_children() == []
