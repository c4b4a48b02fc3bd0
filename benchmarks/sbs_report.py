"""Section 5 of side_by_side.py: report and analysis scale.

A 72-hour soak at 50 requests/s (12,960,000 requests, each with its per-chunk arrival
times) is synthesised once in accelbench's own on-disk format and cached in the workdir;
each round then turns it into its summary, its verdicts and its report, in a fresh child
process whose whole process tree's RSS is sampled from outside (psutil, every 0.05 s),
and times it (once: no peer can load it, so its figure is the goal's, never a ratio).
Beside it, in interleaved rounds, GuideLLM's and AIPerf's own report step on the largest
saved run each could load within the goal (their native files, synthesised at growing
sizes until a step fails or passes the goal), each beside accelbench's step on a soak of
the same number of requests.

    python benchmarks/sbs_report.py generate --dir /tmp/sbs-report/soak   # the 13M soak only
    python benchmarks/sbs_report.py analyse /tmp/sbs-report/soak          # accelbench's step once
    python benchmarks/side_by_side.py --only report --out /tmp/sbs        # the section
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

TODO: str | None = None

RATE = 50.0  # requests/s, constant arrivals (soak_client.py's soak)
ISL, OSL = 64, 32  # the soak of soak_client.py and of the README's measured hour
HOURS_FULL, HOURS_QUICK = 72.0, 6.0
WINDOW_S, SAMPLE_S = 60.0, 5.0  # stress soak's defaults
ROW_GROUP = 1 << 20  # pyarrow's default row group (rows) when a table is written whole
T0 = 1_000_000_000_000  # an arbitrary monotonic origin (ns)
GOAL_MB, GOAL_S = 2000.0, 60.0


# -- the synthetic soak -------------------------------------------------------------------
def _group(rng: np.random.Generator, lo: int, hi: int) -> tuple[Any, dict[str, np.ndarray]]:
    """Requests lo..hi-1 of the soak as one Arrow table (REQUEST_SCHEMA), and the few
    per-request figures the windows need."""
    import pyarrow as pa

    from accelbench.metrics.records import REQUEST_SCHEMA

    n = hi - lo
    idx = np.arange(lo, hi, dtype=np.int64)
    t_sched = T0 + idx * int(1e9 / RATE)
    # send lag: ~80 µs, a long tail (the loop busy with other streams)
    t_send = t_sched + (80_000 * rng.lognormal(0.0, 0.5, n)).astype(np.int64)
    # the reference server's 20 ms TTFT and 5 ms between tokens, as a client sees them on
    # a busy host: lognormal jitter, 0.2 % of first tokens 20-200 ms late, 0.5 % of gaps
    # 2-30 ms late (a GC pause, a descheduled loop)
    ttft_ns = 20e6 * rng.lognormal(0.0, 0.05, n)
    late = rng.random(n) < 0.002
    ttft_ns[late] += rng.uniform(20e6, 200e6, int(late.sum()))
    ok = rng.random(n) >= 1e-4  # 1 in 10,000 fails (an HTTP 503 before any token)
    n_ok = int(ok.sum())
    gaps = 5e6 * rng.lognormal(0.0, 0.1, (n_ok, OSL - 1))
    slow = rng.random(gaps.shape) < 0.005
    gaps[slow] += rng.uniform(2e6, 30e6, int(slow.sum()))
    t_first_ok = t_send[ok] + ttft_ns[ok].astype(np.int64)
    chunks = np.empty((n_ok, OSL), dtype=np.int64)
    chunks[:, 0] = t_first_ok
    chunks[:, 1:] = t_first_ok[:, None] + np.cumsum(gaps, axis=1).astype(np.int64)
    t_first = np.zeros(n, np.int64)
    t_last = np.zeros(n, np.int64)
    t_first[ok], t_last[ok] = chunks[:, 0], chunks[:, -1]
    t_done = np.where(ok, t_last + 150_000, t_send + 2_000_000)
    lens = np.where(ok, OSL, 0).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    ttft = (t_first - t_send) / 1e6
    e2e = (t_last - t_send) / 1e6
    tpot = (e2e - ttft) / (OSL - 1)
    nok = ~ok

    def m(a: np.ndarray, typ: Any) -> Any:
        return pa.array(a, typ, mask=nok)

    cols: dict[str, Any] = {
        "idx": pa.array(idx), "worker": pa.array(np.zeros(n, np.int32)),
        "warmup": pa.array(np.zeros(n, bool)),
        "request_id": pa.compute.binary_join_element_wise(
            "soak-", pa.array(idx).cast(pa.string()), ""),
        "t_sched": pa.array(t_sched), "t_send": pa.array(t_send),
        "t_headers": pa.array(t_send + 300_000), "t_first": m(t_first, pa.int64()),
        "t_last": m(t_last, pa.int64()), "t_done": pa.array(t_done),
        "chunk_times": pa.ListArray.from_arrays(pa.array(offsets), pa.array(chunks.ravel())),
        "chunk_tokens": pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(np.ones(n_ok * OSL, np.int32))),
        "n_chunks": pa.array(lens), "isl": pa.array(np.full(n, ISL, np.int64)),
        "isl_source": pa.array(["server_usage"] * n, pa.string()),
        "isl_planned": pa.array(np.full(n, ISL, np.int64)),
        "osl": m(np.full(n, OSL, np.int64), pa.int64()),
        "osl_source": pa.array(np.where(ok, "server_usage", None), pa.string()),
        "osl_server": m(np.full(n, OSL, np.int64), pa.int64()),
        "max_tokens": pa.array(np.full(n, OSL, np.int64)), "ok": pa.array(ok),
        "error_kind": pa.array(np.where(ok, None, "http_5xx"), pa.string()),
        "http_status": pa.array(np.where(ok, 200, 503).astype(np.int32)),
        "error": pa.array(np.where(ok, None, "HTTP 503: Service Unavailable"), pa.string()),
        "finish_reason": pa.array(np.where(ok, "length", None), pa.string()),
        "retries": pa.array(np.zeros(n, np.int32)),
        "schedule_lag_ms": pa.array((t_send - t_sched) / 1e6),
        "ttft_ms": m(ttft, pa.float64()), "e2e_ms": m(e2e, pa.float64()),
        "tail_ms": m((t_done - t_last) / 1e6, pa.float64()),
        "tpot_ms": m(tpot, pa.float64()), "ntpot_ms": m(e2e / OSL, pa.float64()),
    }  # fmt: skip
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type)
              for f in REQUEST_SCHEMA]  # fmt: skip
    win = {"t_done": t_done, "ok": ok, "ttft": ttft, "tpot": tpot, "e2e": e2e}
    return pa.Table.from_arrays(arrays, schema=REQUEST_SCHEMA), win


def _windows(
    t0_ns: int, w: dict[str, np.ndarray], n_windows: int, window_s: float
) -> list[dict[str, Any]]:
    """windows.jsonl as the soak's collector closes them (a record belongs to the window
    its t_done falls in; window_stats' figures), computed from arrays."""
    from accelbench.suites.stress.common import WindowStats
    from accelbench.suites.stress.document import SoakWindow

    k = ((w["t_done"] - t0_ns) // int(window_s * 1e9)).astype(np.int64)
    order = np.argsort(k, kind="stable")
    bounds = np.searchsorted(k[order], np.arange(n_windows + 1))
    rows = []
    for i in range(n_windows):
        sel = order[bounds[i] : bounds[i + 1]]
        ok = w["ok"][sel]
        n, n_ok = int(sel.size), int(ok.sum())

        def pct(a: np.ndarray, qs: tuple[int, ...], sel=sel, ok=ok) -> dict[str, float | None]:
            v = a[sel][ok]
            if v.size == 0:
                return {f"p{q}": None for q in qs}
            return {f"p{q}": float(x) for q, x in zip(qs, np.percentile(v, qs), strict=True)}

        st = WindowStats(n, n_ok, (n - n_ok) / n if n else None,
                         {"http_5xx": n - n_ok} if n > n_ok else {}, n_ok / window_s,
                         n_ok * OSL / window_s, pct(w["ttft"], (50, 90, 99)),
                         pct(w["tpot"], (50, 90, 99)), pct(w["e2e"], (50, 99)))  # fmt: skip
        rows.append(SoakWindow(i, i * window_s, (i + 0.5) * window_s, (i + 1) * window_s,
                               window_s, st).to_json())  # fmt: skip
    return rows


def _memory(rng: np.random.Generator, hours: float, sample_s: float) -> list[dict[str, Any]]:
    """memory.jsonl: the client's and the server's RSS every SAMPLE_S, flat after a
    10-minute warm-up (the shape the measured hour had: 563 -> 569 MiB), with noise."""
    t = np.arange(0.0, hours * 3600 + 1e-9, sample_s)
    mib = 2.0**20
    warm = 1 - np.exp(-t / 300)
    client = (562 + 6 * warm) * mib + rng.normal(0, 0.3 * mib, t.size)
    server = (101.7 + 3.5 * warm) * mib + rng.normal(0, 0.1 * mib, t.size)
    return [{"t_s": round(float(a), 3), "client_rss_bytes": float(round(b)),
             "server_rss_bytes": float(round(c))} for a, b, c in zip(t, client, server, strict=True)]  # fmt: skip


def generate(d: Path, hours: float, log: Any = print) -> dict[str, Any]:
    """The soak directory (stress.json, windows.jsonl, memory.jsonl, runs/seg-000 with
    run.json and requests.parquet), written into ``d`` (replaced)."""
    import orjson
    import pyarrow.parquet as pq

    from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
    from accelbench.store.rundir import write_json_atomic
    from accelbench.suites.stress.common import dir_bytes
    from accelbench.suites.stress.document import SoakPart, StressDoc, write_stress
    from accelbench.suites.stress.soak import SoakConfig

    t_start = time.monotonic()
    if d.exists():
        shutil.rmtree(d)
    seg = d / "runs" / "seg-000"
    seg.mkdir(parents=True)
    n = int(round(hours * 3600 * RATE))
    rng = np.random.default_rng(20261202)
    wins: dict[str, list[np.ndarray]] = {}
    tmp = seg / ".requests.parquet.tmp"
    from accelbench.metrics.records import REQUEST_SCHEMA

    with pq.ParquetWriter(tmp, REQUEST_SCHEMA, compression="zstd") as w:
        for lo in range(0, n, ROW_GROUP):
            table, win = _group(rng, lo, min(n, lo + ROW_GROUP))
            w.write_table(table, row_group_size=ROW_GROUP)
            for k, v in win.items():
                wins.setdefault(k, []).append(v)
            log(f"  generated {min(n, lo + ROW_GROUP):,} of {n:,} requests")
    tmp.rename(seg / "requests.parquet")
    allw = {k: np.concatenate(v) for k, v in wins.items()}
    # a soak shorter than 8 default windows (the small ones beside a peer's size) gets
    # shorter windows and samples: stress soak refuses a segment shorter than a window
    window_s = min(WINDOW_S, hours * 3600 / 8)
    sample_s = min(SAMPLE_S, window_s / 4)
    n_windows = int(round(hours * 3600 / window_s))
    with open(d / "windows.jsonl", "wb") as f:
        for row in _windows(T0, allw, n_windows, window_s):
            f.write(orjson.dumps(row) + b"\n")
    with open(d / "memory.jsonl", "wb") as f:
        for row in _memory(rng, hours, sample_s):
            f.write(orjson.dumps(row) + b"\n")
    load = BenchmarkConfig(url="http://127.0.0.1:8000", model="reference", rate=RATE,
                           arrival="constant", telemetry=False,
                           workload=WorkloadConfig(isl=ISL, osl=OSL))  # fmt: skip
    cfg = SoakConfig(load=load, duration_s=hours * 3600, window_s=window_s,
                     segment_s=hours * 3600, sample_s=sample_s, gpu=False)  # fmt: skip
    run_cfg = BenchmarkConfig(url="http://127.0.0.1:8000", model="reference", rate=RATE,
                              arrival="constant", telemetry=False, duration_s=hours * 3600,
                              workload=WorkloadConfig(isl=ISL, osl=OSL), out_dir=str(seg))  # fmt: skip
    write_json_atomic(seg / "run.json", {
        "schema": "accelbench.run/1", "run_id": "seg-000", "status": "completed",
        "config": run_cfg.to_json(), "tool": {"name": "accelbench", "version": "synthetic"},
        "environment": {"host": "synthetic"}, "server": {"models": ["reference"]},
        "started_at": "2026-11-29T00:00:00Z", "finished_at": "2026-12-02T00:00:00Z",
    })  # fmt: skip
    size = dir_bytes(d)
    host = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    part = SoakPart(segments=1, windows=n_windows, soak_s=hours * 3600, requests=n,
                    disk_bytes=size, disk_bytes_per_request=size / n)  # fmt: skip
    write_stress(d, StressDoc(suite="soak", status="completed", config=cfg.to_json(),
                              runs=["runs/seg-000"], verdicts=[], part=part,
                              memory_totals={"client_rss_bytes": host,
                                             "server_rss_bytes": host}))  # fmt: skip
    info = {"hours": hours, "requests": n, "osl": OSL, "isl": ISL, "chunk_times": n * OSL,
            "seconds": round(time.monotonic() - t_start, 1),
            "bytes": {p.name: p.stat().st_size for p in [*d.iterdir(), *seg.iterdir()]
                      if p.is_file()}}  # fmt: skip
    (d / "generated.json").write_text(json.dumps(info, indent=1))
    return info


# -- accelbench's step: summary, verdicts, report ------------------------------------------
def analyse(d: Path, skip_summary: bool = False) -> dict[str, Any]:
    """What a finished soak's output goes through: the segment's summary.json from its
    requests.parquet (`accelbench summarize`), the soak's verdicts from windows.jsonl and
    memory.jsonl (soak_verdicts, written into stress.json as the soak does after every
    segment), then `accelbench report` of the soak and its segment (HTML and Markdown).
    Prints per-phase times as JSON."""
    import resource

    out: dict[str, Any] = {}
    seg = d / "runs" / "seg-000"
    acc = [sys.executable, "-m", "accelbench"]
    t = time.perf_counter()
    # the segment's journal is not kept (a 72-hour one would be ~17 GB: 1,325 B a request
    # measured), so `summarize` summarises the requests.parquet it keeps and says the
    # journal is missing (exit 1): the same summarize() a run's end calls
    if skip_summary:  # measured before (the verdicts and report alone)
        p = subprocess.CompletedProcess([], 0)
    else:
        p = subprocess.run([*acc, "summarize", str(seg)], capture_output=True, text=True)
    out["summary_s"] = time.perf_counter() - t
    out["summary_rc"] = p.returncode
    if p.returncode not in (0, 1) or not (seg / "summary.json").exists():
        out["summary_error"] = (p.stderr or p.stdout).strip().splitlines()[-3:]
    out["summary_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    t = time.perf_counter()
    # in a child of its own, like the other two steps: each step's memory is its own
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "verdicts", str(d)],
                       capture_output=True, text=True)  # fmt: skip
    out["verdicts_s"] = time.perf_counter() - t
    if p.returncode:
        out["verdicts_error"] = (p.stderr or p.stdout).strip().splitlines()[-3:]
    else:
        out["verdicts"] = json.loads(p.stdout)
    t = time.perf_counter()
    rep = d.parent / (d.name + "-report")
    rep.mkdir(exist_ok=True)
    p = subprocess.run([*acc, "report", str(d), str(seg),
                        "-o", str(rep / "report.html"), "--markdown", str(rep / "report.md")],
                       capture_output=True, text=True)  # fmt: skip
    out["report_s"] = time.perf_counter() - t
    out["report_rc"] = p.returncode
    if p.returncode:
        out["report_error"] = (p.stderr or p.stdout).strip().splitlines()[-3:]
    out["report_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def verdicts(d: Path) -> dict[str, str]:
    """The soak's verdicts recomputed from windows.jsonl and memory.jsonl (soak_verdicts)
    and written into its stress.json, as the soak does after every segment."""
    from accelbench.suites.stress.document import (
        MEMORY,
        WINDOWS,
        SoakWindow,
        memory_sample,
        memory_series,
        read_rows,
        read_stress,
        write_stress,
    )
    from accelbench.suites.stress.soak import soak_verdicts
    from accelbench.suites.stress.verdicts import DriftThresholds, LeakThresholds

    doc = read_stress(d)
    # the thresholds as recorded; not SoakConfig.from_json, which refuses the recorded
    # load: one 72-hour segment at 50 requests/s plans 12,960,000 requests, over
    # accelbench's 10,000,000 a run (a real 72-hour soak has >= 2 segments; default 72)
    leak = LeakThresholds(**doc.config["leak"])  # type: ignore[arg-type]
    drift = DriftThresholds(**doc.config["drift"])  # type: ignore[arg-type]
    windows, _ = read_rows(d / WINDOWS, SoakWindow.from_json)
    samples, _ = read_rows(d / MEMORY, memory_sample)
    totals = {k: doc.memory_totals.get(k) for k in memory_series(samples)}
    doc.verdicts = soak_verdicts(windows, samples, totals, leak, drift)
    write_stress(d, doc)
    return {v.name: str(v.status) for v in doc.verdicts}


# -- measuring a child from outside --------------------------------------------------------
def tree_rss(p: Any) -> int:
    import psutil

    total = 0
    for q in [p, *p.children(recursive=True)]:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(cmd: list[str], timeout: float, cwd: Path | None = None,
            env: dict[str, str] | None = None, cap_mb: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Run ``cmd``; its wall time and the peak RSS of its whole process tree (sampled
    every 0.05 s); killed past ``timeout`` or past ``cap_mb`` of tree RSS."""
    import resource

    import psutil

    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env=env, start_new_session=True)  # fmt: skip
    ps = psutil.Process(proc.pid)
    peak = 0
    why = ""
    out: list[bytes] = []
    err: list[bytes] = []
    ts = [threading.Thread(target=lambda s, b: b.append(s.read()), args=(s, b), daemon=True)
          for s, b in ((proc.stdout, out), (proc.stderr, err))]  # fmt: skip
    for th in ts:
        th.start()
    while proc.poll() is None:
        with_rss = tree_rss(ps)
        peak = max(peak, with_rss)
        if time.perf_counter() - t0 > timeout:
            why = f"over {timeout:.0f} s"
        elif cap_mb and with_rss > cap_mb * 1e6:
            why = f"over the {cap_mb:.0f} MB cap"
        if why:
            os.killpg(proc.pid, 9)
            break
        time.sleep(0.05)
    rc = proc.wait()
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    for th in ts:
        th.join(5)
    return {"rc": rc, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak / 1e6,
            "killed": why, "stdout": b"".join(out).decode(errors="replace")[-4000:],
            "stderr": b"".join(err).decode(errors="replace")[-2000:]}  # fmt: skip


# -- the peers' saved runs ------------------------------------------------------------------
SEED_REQUESTS, SEED_CONC = 256, 16
PEER_SIZES = (1_024, 4_096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 12_960_000)
SEARCH_KILL = 2.0  # a peer's step is killed at this many times the goal (memory or time)


def seed_runs(wd: Path, a: argparse.Namespace) -> dict[str, Any]:
    """One small real run of each peer (ISL 64, OSL 32, streaming) against the reference
    server (TTFT 20 ms, 5 ms between tokens): the files each one saves, to be replicated."""
    from sbs_common import PEERS, cc, ensure_peer, start_reference

    out: dict[str, Any] = {}
    tok = cc.make_tokenizer_dir(wd / "tokenizer")
    for name in ("guidellm", "aiperf"):
        d = wd / f"seed-{name}"
        done = d / "seed.done"
        pattern = "benchmarks.json" if name == "guidellm" else "profile_export.jsonl"
        if done.exists() and sorted(d.rglob(pattern)):  # the workdir may have moved
            out[name] = {**json.loads(done.read_text()), "file": str(sorted(d.rglob(pattern))[0])}
            continue
        venv, why = ensure_peer(name, PEERS[name], a.install_timeout)
        if venv is None:
            out[name] = {"error": why}
            continue
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        from accelbench.ports import free_port

        port = free_port()
        srv = start_reference(port, d / "gt.jsonl", d)
        base = f"http://127.0.0.1:{port}"
        try:
            if name == "guidellm":
                cmd = [str(venv / "bin" / "guidellm"), "run",
                       "--backend", f"kind=openai_http,target={base},model=reference,"
                       "request_format=/v1/completions,stream=true",
                       "--profile", f"kind=concurrent,streams={SEED_CONC}",
                       "--constraint", f"kind=max_requests,count={SEED_REQUESTS}",
                       "--tokenizer", f"kind=hf_auto,model={tok}",
                       "--data", f"kind=synthetic_text,prompt_tokens={ISL},output_tokens={OSL}",
                       "--output", f"kind=json,path={d / 'benchmarks.json'}",
                       "--disable-progress"]  # fmt: skip
            else:
                cmd = ["env", "-u", "HF_HUB_OFFLINE", "-u", "TRANSFORMERS_OFFLINE",
                       str(venv / "bin" / "aiperf"), "profile", "--model", "reference",
                       "--url", base, "--endpoint-type", "completions", "--streaming",
                       "--concurrency", str(SEED_CONC), "--request-count", str(SEED_REQUESTS),
                       "--synthetic-input-tokens-mean", str(ISL),
                       "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(OSL),
                       "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
                       "--tokenizer", str(tok), "--output-artifact-dir", str(d / "run"),
                       "--ui-type", "none"]  # fmt: skip
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.run_timeout, cwd=d)
        except subprocess.TimeoutExpired:
            p = None
        finally:
            os.killpg(srv.pid, 9)
            srv.wait()
        files = sorted(d.rglob("benchmarks.json" if name == "guidellm" else "profile_export.jsonl"))
        if p is None or not files:
            tail = "timed out" if p is None else (p.stderr or p.stdout)[-300:]
            out[name] = {"error": f"seed run of {name} failed: {tail}"}
            continue
        out[name] = {"file": str(files[0]), "command": cmd}
        done.write_text(json.dumps(out[name]))
    return out


def _template(obj: Any, keys: set[str]) -> tuple[str, list[float]]:
    """``obj`` as JSON with every number under ``keys`` replaced by a format field, and
    those numbers in order: each replica adds its time offset to them."""
    vals: list[float] = []

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: (_mark(vals, v) if k in keys and isinstance(v, int | float)
                        and not isinstance(v, bool) else walk(v)) for k, v in x.items()}  # fmt: skip
        if isinstance(x, list):
            return [walk(y) for y in x]
        return x

    text = json.dumps(walk(obj)).replace("{", "{{").replace("}", "}}")
    text = re.sub(r'"@@(\d+)@@"', lambda m: "{" + m.group(1) + "}", text)
    return text, vals


def _mark(vals: list[float], v: float) -> str:
    vals.append(v)
    return f"@@{len(vals) - 1}@@"


GUIDELLM_TIMES = {"targeted_start", "queued", "dequeued", "scheduled_at", "resolve_start",
                  "request_start", "first_request_iteration", "first_token_iteration",
                  "first_output_token_iteration", "last_token_iteration",
                  "last_request_iteration", "request_end", "resolve_end", "finalized",
                  "scheduler_start_time", "started_at", "completed_at"}  # fmt: skip
AIPERF_TIMES_NS = {"credit_issued_ns", "request_start_ns", "request_ack_ns", "request_end_ns"}


def synth_guidellm(seed: Path, n: int, out: Path) -> None:
    """benchmarks.json with ``n`` successful requests: the seed's requests replicated
    with fresh ids, each copy shifted by its place in a 50 requests/s schedule."""
    doc = json.loads(seed.read_text())
    b = doc["benchmarks"][0]
    reqs = b["requests"]["successful"]
    temps = []
    for r in reqs:
        r = dict(r)
        r["request_id"] = "@@ID@@"
        text, vals = _template(r, GUIDELLM_TIMES)
        temps.append((text.replace('"@@ID@@"', '"{id}"'), vals))
    b["requests"] = {"successful": "@@REQS@@", "errored": [], "incomplete": [], "total": None}
    head, tail = json.dumps(doc).split('"@@REQS@@"')
    t0 = min(vals[0] for _, vals in temps)
    with open(out, "w") as f:
        f.write(head + "[")
        for i in range(n):
            text, vals = temps[i % len(temps)]
            off = i / RATE - (vals[0] - t0) if vals else 0.0
            f.write(
                ("," if i else "")
                + text.format(*[v + off for v in vals], id=f"{i:08x}-0000-4000-8000-000000000000")
            )
        f.write("]" + tail)


def synth_aiperf(seed: Path, n: int, out: Path) -> None:
    """An AIPerf artifact directory whose profile_export.jsonl holds ``n`` records: the
    seed's records replicated with fresh ids, shifted onto a 50 requests/s schedule (its
    aggregate profile_export_aiperf.json copied beside it, as `aiperf plot` reads both)."""
    out.mkdir(parents=True, exist_ok=True)
    for p in seed.parent.iterdir():
        if p.is_file() and p.name != "profile_export.jsonl":
            shutil.copy(p, out / p.name)
    temps = []
    for line in seed.read_text().splitlines():
        r = json.loads(line)
        r["metadata"]["x_request_id"] = "@@ID@@"
        text, vals = _template(r, AIPERF_TIMES_NS)
        temps.append((text.replace('"@@ID@@"', '"{id}"'), [int(v) for v in vals]))
    t0 = min(vals[0] for _, vals in temps)
    with open(out / "profile_export.jsonl", "w") as f:
        for i in range(n):
            text, vals = temps[i % len(temps)]
            off = int(i * 1e9 / RATE) - (vals[0] - t0)
            f.write(
                text.format(*[v + off for v in vals], id=f"{i:08x}-0000-4000-8000-000000000000")
                + "\n"
            )


def peer_command(name: str, inp: Path, out: Path) -> list[str]:
    """The peer's own report step from its saved run: GuideLLM's ``guidellm export``
    (loads benchmarks.json, writes its default outputs: console, json, html, csv);
    AIPerf's ``aiperf plot`` (loads profile_export.jsonl and the aggregate JSON, writes
    its default plots as PNG)."""
    from sbs_common import PEERS, PEERS_DIR

    venv = PEERS_DIR / f"{name}-{PEERS[name]}"
    if name == "guidellm":
        return [str(venv / "bin" / "guidellm"), "export", str(inp)]
    return [str(venv / "bin" / "aiperf"), "plot", str(inp), "--output", str(out)]


def peer_input(name: str, seed: Path, n: int, wd: Path) -> tuple[Path, float, int]:
    """The peer's saved run of ``n`` requests (cached in ``wd``): path, seconds to write
    it (0 when cached), bytes."""
    d = wd / f"{name}-{n}"
    inp = d / ("benchmarks.json" if name == "guidellm" else "run")
    mark = d / "input.done"
    t = time.monotonic()
    if not mark.exists():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        if name == "guidellm":
            synth_guidellm(seed, n, inp)
        else:
            synth_aiperf(seed, n, inp)
        mark.write_text("")
        secs = time.monotonic() - t
    else:
        secs = 0.0
    size = inp.stat().st_size if inp.is_file() else sum(p.stat().st_size for p in inp.rglob("*"))
    return inp, secs, size


def run_peer(name: str, inp: Path, out_dir: Path, timeout: float, cap_mb: float) -> dict[str, Any]:
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    env = {**os.environ, "HOME": str(out_dir.parent / "home")}  # aiperf writes ~/.aiperf
    return measure(peer_command(name, inp, out_dir / "out"), timeout, cwd=out_dir, env=env,
                   cap_mb=cap_mb)  # fmt: skip


def _over(m: dict[str, Any]) -> str:
    """Why a measured step does not meet the goal ("" when it does)."""
    if m["rc"] != 0 or m["killed"]:
        return m["killed"] or f"exit {m['rc']}"
    why = []
    if m["peak_rss_mb"] > GOAL_MB:
        why.append(f"peak {m['peak_rss_mb']:.0f} MB > {GOAL_MB:.0f}")
    if m["wall_s"] > GOAL_S:
        why.append(f"{m['wall_s']:.0f} s > {GOAL_S:.0f}")
    return ", ".join(why)


def search(name: str, seed: Path, wd: Path, sizes: tuple[int, ...]) -> dict[str, Any]:
    """The peer's report step at growing sizes until it fails or passes the goal's
    memory or time (killed at SEARCH_KILL times either); cached in ``wd``."""
    from sbs_common import log

    cache = wd / f"search-{name}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    steps = []
    for n in sizes:
        inp, secs, size = peer_input(name, seed, n, wd)
        log(
            f"report search: {name} at {n:,} requests ({size / 1e6:.0f} MB, written in {secs:.0f} s)"
        )
        m = run_peer(name, inp, wd / f"{name}-{n}-out", GOAL_S * SEARCH_KILL, GOAL_MB * SEARCH_KILL)
        m.pop("stdout")
        steps.append({"requests": n, "input_bytes": size, "input_write_s": round(secs, 1),
                      "over": _over(m), **m})  # fmt: skip
        log(f"  {m['wall_s']:.1f} s, peak {m['peak_rss_mb']:.0f} MB {_over(m)}")
        if steps[-1]["over"]:
            break
    fits = [s["requests"] for s in steps if not s["over"]]
    res = {"steps": steps, "largest_within_goal": max(fits) if fits else None,
           "first_over": next((s for s in steps if s["over"]), None)}  # fmt: skip
    cache.write_text(json.dumps(res, indent=1))
    return res


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    from sbs_common import PEERS, Row, busy_between, load_line, log, machine_state, section_table

    wd.mkdir(parents=True, exist_ok=True)
    hours = HOURS_QUICK if a.quick else HOURS_FULL
    sizes = PEER_SIZES[:2] if a.quick else PEER_SIZES
    soak = wd / f"soak-{hours:g}h"
    gen = None
    if not (soak / "generated.json").exists():
        log(f"report: generating the {hours:g}-hour soak into {soak} (once; kept in the workdir)")
        gen = generate(soak, hours, log=lambda m: None)
        log(f"  {gen['requests']:,} requests in {gen['seconds']:.0f} s")
    info = json.loads((soak / "generated.json").read_text())
    seeds = seed_runs(wd, a)
    searches: dict[str, Any] = {}
    for name in ("guidellm", "aiperf"):
        if "file" in seeds[name]:
            searches[name] = search(name, Path(seeds[name]["file"]), wd / "peers", sizes)
    # accelbench at each peer's size too (a soak of that many requests), so that every
    # ratio compares the same number of requests
    same: dict[str, tuple[int, Path]] = {}
    for name, s in searches.items():
        n = s["largest_within_goal"] or s["steps"][0]["requests"]
        d = wd / f"soak-{n}"
        if not (d / "generated.json").exists():
            generate(d, n / RATE / 3600, log=lambda m: None)
        same[name] = (n, d)
    me = [sys.executable, str(Path(__file__).resolve()), "analyse"]
    big = f"accelbench-{hours:g}h"
    tools: list[tuple[str, list[str] | None, Path | None]] = [(big, me + [str(soak)], None)]
    for name, (n, d) in same.items():
        tools.append((f"accelbench@{name}", me + [str(d)], None))
        tools.append(
            (
                name,
                None,
                wd
                / "peers"
                / (f"{name}-{n}")
                / ("benchmarks.json" if name == "guidellm" else "run"),
            )
        )
    rows = {t: Row(t) for t, _, _ in tools}
    rss_rows = {t: Row(t) for t, _, _ in tools}
    cpu_rows = {t: Row(t) for t, _, _ in tools}
    raw: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for rnd in range(a.repeat):
        for t, cmd, inp in tools:
            if t == big and rnd > 0:  # the big soak once: no peer can load it, no ratio
                continue
            s0 = machine_state()
            log(f"report round {rnd + 1}/{a.repeat}: {t} (load {s0['loadavg'][0]})")
            if cmd is not None:
                m = measure(cmd, a.run_timeout, cap_mb=GOAL_MB * 4)
                try:
                    m["phases"] = json.loads(m["stdout"].strip().splitlines()[-1])
                except (ValueError, IndexError):
                    m["phases"] = None
            else:
                assert inp is not None
                m = run_peer(t, inp, wd / "rounds" / f"{t}-r{rnd + 1}", GOAL_S * SEARCH_KILL,
                             GOAL_MB * SEARCH_KILL)  # fmt: skip
            m.pop("stdout", None)
            st = busy_between(s0, machine_state())
            states.append(st)
            good = m["rc"] == 0 and not m["killed"]
            rows[t].figures.append(m["wall_s"] if good else None)
            rss_rows[t].figures.append(m["peak_rss_mb"] if good else None)
            cpu_rows[t].figures.append(m["cpu_s"] if good else None)
            cpu_rows[t].statuses.append("ok" if good else "failed")
            status = "ok" if good else (m["killed"] or f"exit {m['rc']}: {m['stderr'][-200:]}")
            rows[t].statuses.append(status)
            rss_rows[t].statuses.append(status)
            raw.append({"round": rnd + 1, "tool": t, "machine": st, **m})
            log(f"  {status}: {m['wall_s']:.1f} s, peak {m['peak_rss_mb']:.0f} MB")
    n13 = info["requests"]
    rows[big].note = rss_rows[big].note = cpu_rows[big].note = (
        f"{n13:,} requests, {info['chunk_times']:,} chunk times (OSL {OSL})"
    )
    parts = []
    for name, (n, _) in same.items():
        peer = f"{name} {PEERS[name]}"
        for r in (rows, rss_rows, cpu_rows):
            r[f"accelbench@{name}"].note = f"{n:,} requests"
            r[
                name
            ].note = f"{peer}, {n:,} requests ({'guidellm export' if name == 'guidellm' else 'aiperf plot'})"
        for unit, rr, spec in (
            ("wall s", rows, ".1f"),
            ("peak RSS MB (process tree)", rss_rows, ".0f"),
            ("CPU s (process tree)", cpu_rows, ".1f"),
        ):
            text, _ = section_table(
                f"5. Report step on the same {n:,}-request run: accelbench against {peer}, {unit}",
                unit,
                [rr[f"accelbench@{name}"], rr[name]],
                f"accelbench@{name}",
                a.max_spread,
                spec,
            )
            parts.append(text)
    t13, _ = section_table(
        f"5. accelbench on the {hours:g}-hour soak ({n13:,} requests), wall s (goal < {GOAL_S:g} s)",
        "wall s",
        [rows[big]],
        big,
        a.max_spread,
        ".1f",
    )
    r13, _ = section_table(
        f"5. accelbench on the {hours:g}-hour soak, peak RSS MB (goal < {GOAL_MB:g} MB)",
        "peak RSS MB",
        [rss_rows[big]],
        big,
        a.max_spread,
        ".0f",
    )
    c13, _ = section_table(
        f"5. accelbench on the {hours:g}-hour soak, CPU s of the process tree (wall s over "
        "this is how much the machine's load stretched it)",
        "CPU s",
        [cpu_rows[big]],
        big,
        a.max_spread,
        ".1f",
    )
    lines = []
    for name, s in searches.items():
        fo = s["first_over"]
        lines.append(f"- {name}: largest saved run its report step handled within {GOAL_MB:g} MB "
                     f"and {GOAL_S:g} s: {s['largest_within_goal'] or 'none'} requests"
                     + (f"; at {fo['requests']:,} requests: {fo['over']} "
                        f"({fo['wall_s']:.0f} s, peak {fo['peak_rss_mb']:.0f} MB)" if fo else
                        "; it never went over"))  # fmt: skip
    for name, why in ((n, s.get("error")) for n, s in seeds.items()):
        if why:
            lines.append(f"- {name}: no row: {why}")
    md = "\n\n".join([t13, r13, c13, *parts, "\n".join(lines), load_line(states)])
    table = {"accelbench_13m": {"wall_s": rows[big].figures,
                                "peak_rss_mb": rss_rows[big].figures}}  # fmt: skip
    return {"markdown": md, "table": table, "runs": raw, "searches": searches,
            "generated": info, "generation_now": gen, "seeds": seeds}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--dir", type=Path, required=True)
    g.add_argument("--hours", type=float, default=HOURS_FULL)
    an = sub.add_parser("analyse")
    an.add_argument("dir", type=Path)
    an.add_argument("--skip-summary", action="store_true", help="verdicts and report only")
    ve = sub.add_parser("verdicts")
    ve.add_argument("dir", type=Path)
    a = p.parse_args(argv)
    if a.what == "generate":
        print(json.dumps(generate(a.dir, a.hours), indent=1))
    elif a.what == "analyse":
        print(json.dumps(analyse(a.dir, a.skip_summary)))
    elif a.what == "verdicts":
        print(json.dumps(verdicts(a.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
