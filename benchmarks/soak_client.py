"""What the stress suites cost the client, and whether the client adds time to TTFT.

    python benchmarks/soak_client.py soak  [--duration 300] [--rate 50]
    python benchmarks/soak_client.py flood [--lengths 1024,4096,16384] [--context 131072]

soak: a soak at --rate requests/s (constant arrivals, 64 in / 32 out tokens) against
the reference server (20 ms TTFT, 5 ms between tokens): the client's RSS growth per hour
(the leak verdict's Theil-Sen slope after the warm-up, with its interval), the client
CPU (cores busy, and CPU microseconds per request), and disk bytes per request. The
issue asks for an hour; a shorter run extrapolates the slope to an hour (say so when
quoting it).

flood: a flood on the generated tiny model (llama-server, one slot, context lifted to
--context) at concurrency 1; for every request, the client's TTFT beside the server's
own prompt-processing time (llama-server's "prompt eval time", the ``timings.prompt_ms``
of its responses, read from its log in completion order). The difference is what the
HTTP path, the server's tokenization and the client add.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from accelbench.ports import free_port
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig


def soak(args: argparse.Namespace) -> dict:
    from accelbench.suites.stress.soak import SoakConfig, run_soak

    port = free_port()
    srv = subprocess.Popen([sys.executable, "-m", "accelbench", "serve", "reference", "--port",
                            str(port), "--ttft-ms", "20", "--itl-ms", "5"],
                           stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    out = Path(tempfile.mkdtemp(prefix="soak-bench-")) / "soak"
    try:
        load = BenchmarkConfig(url=url, rate=args.rate, arrival="constant", telemetry=False,
                               workload=WorkloadConfig(isl=64, osl=32))  # fmt: skip
        cfg = SoakConfig(load=load, duration_s=args.duration, window_s=args.window,
                         sample_s=5.0, server_pid=srv.pid, gpu=False)  # fmt: skip
        res = run_soak(cfg, out)
    finally:
        srv.terminate()
        srv.wait()
    doc = json.loads((out / "stress.json").read_text())
    v = {x.name: x for x in res.verdicts}["leak client_rss_bytes"]
    summaries = [json.loads((out / r / "summary.json").read_text()) for r in doc["runs"]]
    client = [s.get("client") or {} for s in summaries]
    cpu_s = sum(c.get("cpu_s") or 0 for c in client)
    mem = [json.loads(x) for x in (out / "memory.jsonl").read_text().splitlines()]
    rss = [m["client_rss_bytes"] for m in mem if m.get("client_rss_bytes")]
    return {
        "soak_s": doc["soak_s"], "rate": args.rate, "requests": doc["requests"],
        "client_rss_mib_first_last": [rss[0] / 2**20, rss[-1] / 2**20] if rss else None,
        "client_rss_growth_mib_per_h": v.estimate / 2**20 if v.estimate is not None else None,
        "client_rss_growth_ci_mib_per_h": [v.low / 2**20, v.high / 2**20] if v.low is not None else None,
        "client_rss_warmup_end_s": v.evidence.get("warmup_end_s"),
        "client_cpu_cores_busy": [c.get("cpu_util") for c in client],
        "client_cpu_us_per_request": 1e6 * cpu_s / max(1, doc["requests"]),
        "disk_bytes_per_request": doc["disk_bytes_per_request"],
        "extrapolated": doc["soak_s"] < 3600,
        "stress_dir": str(out),
    }  # fmt: skip


PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def flood(args: argparse.Namespace) -> dict:
    from accelbench.engines.llamacpp import running_llama_server
    from accelbench.suites.stress.common import run_records
    from accelbench.suites.stress.flood import FloodConfig, run_flood

    lengths = [int(x) for x in args.lengths.split(",")]
    out = Path(tempfile.mkdtemp(prefix="flood-bench-")) / "flood"
    extra = ["--override-kv", f"llama.context_length=int:{args.context}"]
    with running_llama_server("tiny", parallel=1, ctx_per_slot=args.context, extra_args=extra,
                              log=lambda m: None) as s:  # fmt: skip
        load = BenchmarkConfig(url=s.url, telemetry=False, timeout_s=3600,
                               extra_body={"cache_prompt": False}, workload=WorkloadConfig())  # fmt: skip
        res = run_flood(FloodConfig(load=load, lengths=lengths, requests=args.requests, osl=4,
                                    server_pid=s.pid, gpu=False), out)  # fmt: skip
        log = Path(s.log_path).read_text(errors="replace")
    server = [(float(ms), int(n)) for ms, n in PROMPT_EVAL.findall(log)]
    client = []
    for st in res.steps:
        recs = sorted(run_records(out / st["run"]), key=lambda r: r["t_done"] or 0)
        client += [(r["ttft_ms"], r.get("isl")) for r in recs if r.get("ok")]
    # the probe request of every step (max_tokens 1) is logged too: drop the short ones
    server = [x for x in server if x[1] >= min(lengths) // 2]
    rows = []
    for (ttft, isl), (pms, n) in zip(client, server, strict=False):
        rows.append({"input_tokens": isl, "server_tokens": n, "client_ttft_ms": ttft,
                     "server_prompt_ms": pms, "difference_ms": ttft - pms,
                     "difference_pct": 100 * (ttft - pms) / ttft})  # fmt: skip
    return {"context": args.context, "steps": res.steps, "ttft_fit_ms": res.fit,
            "client_vs_server": rows, "stress_dir": str(out)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("soak")
    s.add_argument("--duration", type=float, default=300.0)
    s.add_argument("--rate", type=float, default=50.0)
    s.add_argument("--window", type=float, default=30.0)
    f = sub.add_parser("flood")
    f.add_argument("--lengths", default="1024,4096,16384")
    f.add_argument("--context", type=int, default=131072)
    f.add_argument("--requests", type=int, default=2)
    args = ap.parse_args()
    print(json.dumps(soak(args) if args.what == "soak" else flood(args), indent=2))


if __name__ == "__main__":
    main()
