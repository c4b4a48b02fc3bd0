"""Benchmark: the peak memory of a run's end, with telemetry on and off.

    python benchmarks/run_end_rss.py --requests 31000 --out /tmp/run-end.json

A real ``accelbench run`` (``-c 256``, ISL 128, OSL 256, one worker) against
``accelbench serve reference --max-throughput``, once with telemetry (the default: the
sampler runs and is stopped with the run's measured window and token counts) and once
with ``--no-telemetry``, on the same server. About 4.5 kB of journal per request at
OSL 256, so the default 31,000 requests make the issue's case, a ~138 MB
``requests.jsonl``.

The run's main process (not its load worker) is sampled every ``--sample-s`` from
/proc: its RSS, and its high-water mark (VmHWM). The load is over when the server has
answered every request; what follows (stopping telemetry, finalizing the journal into
requests.parquet and summary.json) is *the end*. Per run: ``peak_rss_mb`` (VmHWM, the
whole run), ``end_peak_rss_mb`` (highest RSS sampled in the end), ``load_peak_rss_mb``
(highest before it), ``end_s``, the journal's size, and ``tree_maxrss_mb`` (wait4's
maxrss: the largest process of the run's tree). The figure the issue asks for is
``telemetry_extra_mb``: the end's peak with telemetry minus without (target: < 50 MB);
beside it ``telemetry_extra_end_s``, the time telemetry adds to the end, and each end's
RSS over time (``end_rss_mb``, at most 60 points).

``--accelbench`` is the program that runs (a wrapper that sets PYTHONPATH to another
tree's src compares trees, as benchmarks/before_after.py does); ``--server`` the one
that serves (default: the same). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_ceiling import RefServer, free_port, load_avg, server_counters  # noqa: E402

MODES = ("on", "off")  # telemetry


def _status_kb(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _downsample(kb: list[int], points: int) -> list[float]:
    step = max(1, -(-len(kb) // points))
    return [round(max(kb[i : i + step]) / 1024, 1) for i in range(0, len(kb), step)]


def one_run(a: argparse.Namespace, srv: RefServer, wd: Path, telemetry: bool) -> dict[str, Any]:
    out = wd / ("run-telemetry" if telemetry else "run-no-telemetry")
    cmd = a.accelbench + [
        "run", "--url", srv.base, "-c", str(a.concurrency), "-n", str(a.requests),
        "--isl", str(a.isl), "--osl", str(a.osl), "--workers", "1", "--warmup", "0", "--quiet",
        "-o", str(out),
    ] + ([] if telemetry else ["--no-telemetry"])  # fmt: skip
    env = dict(os.environ, NO_COLOR="1")
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy"):
        env.pop(k, None)
    _, req0 = server_counters(srv.base)
    la0 = load_avg()
    log = open(wd / "run.log", "ab")  # noqa: SIM115
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip
    # the run's main process: `python -m accelbench` itself, or the one a wrapper execs
    samples: list[tuple[float, int]] = []  # (t, RSS kB)
    hwm = 0
    t_load_done: float | None = None
    rusage = None
    code = None
    while True:
        t = time.monotonic() - t0
        rss = _status_kb(proc.pid, "VmRSS")
        if rss is not None:
            samples.append((t, rss))
            hwm = max(hwm, _status_kb(proc.pid, "VmHWM") or 0)
        if t_load_done is None:
            with contextlib.suppress(OSError):
                _, req = server_counters(srv.base)
                if req - req0 >= a.requests:  # every request answered: the load is over
                    t_load_done = t
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            rusage, code = ru, os.waitstatus_to_exitcode(status)
            break
        if t > a.timeout:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(proc.pid, 0)
            code = "timeout"
            break
        time.sleep(a.sample_s)
    wall = time.monotonic() - t0
    log.close()
    journal = out / "requests.jsonl"
    res: dict[str, Any] = {
        "telemetry": telemetry,
        "status": "ok" if code == 0 else f"failed ({code})",
        "loadavg_before": la0,
        "wall_s": wall,
        "journal_mb": journal.stat().st_size / 1e6 if journal.exists() else None,
        "peak_rss_mb": hwm / 1024 if hwm else None,
        "tree_maxrss_mb": rusage.ru_maxrss / 1024 if rusage else None,
    }
    if t_load_done is not None:
        load = [r for t, r in samples if t <= t_load_done]
        end = [r for t, r in samples if t > t_load_done]
        res.update(
            load_s=t_load_done,
            end_s=wall - t_load_done,
            load_peak_rss_mb=max(load) / 1024 if load else None,
            end_peak_rss_mb=max(end) / 1024 if end else None,
            end_samples=len(end),
            # the end's shape (telemetry's read of the journal, then finalize): at most
            # 60 points, each the highest RSS of its stretch
            end_rss_mb=_downsample(end, 60),
        )
    if res["status"] != "ok":
        res["log_tail"] = (wd / "run.log").read_bytes()[-2000:].decode("utf-8", "replace")
    with contextlib.suppress(OSError):  # a 138 MB journal per run: keep the disk free
        if not a.keep:
            for f in out.iterdir():
                f.unlink()
            out.rmdir()
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", "-n", type=int, default=31_000)
    p.add_argument("--concurrency", "-c", type=int, default=256)
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=256)
    p.add_argument("--modes", default="on,off", help="telemetry on, off, or both (in order)")
    p.add_argument("--repeat", type=int, default=1, help="rounds over the modes")
    p.add_argument("--accelbench", default=f"{shlex.quote(sys.executable)} -m accelbench",
                   help="the accelbench that runs (a command line)")  # fmt: skip
    p.add_argument("--server", help="the accelbench that serves (default: --accelbench)")
    p.add_argument("--sample-s", type=float, default=0.02)
    p.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    p.add_argument("--workdir", type=Path)
    p.add_argument("--keep", action="store_true", help="keep the run directories")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    a = p.parse_args(argv)
    a.accelbench = shlex.split(a.accelbench)
    server = shlex.split(a.server) if a.server else a.accelbench
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: a list of {', '.join(MODES)}")
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="run-end-rss-"))
    wd.mkdir(parents=True, exist_ok=True)
    srv = RefServer(server, free_port(), wd, None)
    rounds = []
    try:
        srv.wait_ready()
        for _ in range(a.repeat):
            rounds.append({m: one_run(a, srv, wd, m == "on") for m in modes})
    finally:
        srv.stop()
    doc: dict[str, Any] = {
        "schema": "accelbench.bench.run_end_rss/1",
        "requests": a.requests,
        "concurrency": a.concurrency,
        "isl": a.isl,
        "osl": a.osl,
        "rounds": rounds,
    }
    for r in rounds:
        on, off = r.get("on", {}), r.get("off", {})
        if on.get("end_peak_rss_mb") is not None and off.get("end_peak_rss_mb") is not None:
            r["telemetry_extra_mb"] = on["end_peak_rss_mb"] - off["end_peak_rss_mb"]
        if on.get("end_s") is not None and off.get("end_s") is not None:
            r["telemetry_extra_end_s"] = on["end_s"] - off["end_s"]
    text = json.dumps(doc, indent=1)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
