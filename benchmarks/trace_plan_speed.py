"""How long planning a big session trace takes (issue 22: a 100,000-session trace
planned in under 10 s). Writes a synthetic agent trace (workload.agenttrace) of
``--sessions`` sessions, then times ``load_trace`` (parse and check every line, put the
sessions in order) and ``trace_plan`` (synthesise each prompt from its hash_ids blocks,
exact in the tokenizer's count) separately, with the reference server's byte tokens in
this process, or with ``--tokenizer`` (a tokenizer.json). Prints one JSON line: seconds
of each step (wall, and the CPU seconds of load and plan: on a shared host the wall time
includes waiting for a core), requests, distinct block ids, prompt bytes, peak RSS, and the
host's load average.

    python benchmarks/trace_plan_speed.py                       # 100,000 sessions x 4 turns
    python benchmarks/trace_plan_speed.py --sessions 20000 --tokenizer ~/.cache/accelbench/models/tiny-default/hf
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from accelbench.workload.agenttrace import AgentTraceSpec, write_agent_trace
from accelbench.workload.traces import load_trace, trace_plan


class ByteTokenizer:
    """One token per UTF-8 byte: what the reference server's /tokenize answers."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", "replace")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--system-tokens", type=int, default=1024)
    ap.add_argument("--tool-tokens", type=int, default=256)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=512)
    ap.add_argument("--tokenizer", help="a tokenizer.json (default: byte tokens)")
    a = ap.parse_args()
    tok = ByteTokenizer()
    if a.tokenizer:
        from accelbench.workload.tokenizer import LocalTokenizer

        tok = LocalTokenizer(a.tokenizer)  # type: ignore[assignment]
    spec = AgentTraceSpec(sessions=a.sessions, turns=a.turns, system_tokens=a.system_tokens,
                          tool_tokens=a.tool_tokens, osl=a.osl, block_size=a.block_size)  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "agent.jsonl"
        t0 = time.perf_counter()
        write_agent_trace(spec, path)
        t1, c1 = time.perf_counter(), time.process_time()
        trace = load_trace(path, block_size=a.block_size)
        t2, c2 = time.perf_counter(), time.process_time()
        plan = trace_plan(trace, tok, seed=0)
        t3, c3 = time.perf_counter(), time.process_time()
    ids = {i for pr in plan for i in pr.blocks or ()}
    print(json.dumps({
        "sessions": trace.sessions, "requests": len(plan), "tokenizer": tok.name,
        "generate_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2),
        "plan_s": round(t3 - t2, 2), "load_and_plan_s": round(t3 - t1, 2),
        "load_cpu_s": round(c2 - c1, 2), "plan_cpu_s": round(c3 - c2, 2),
        "load_and_plan_cpu_s": round(c3 - c1, 2), "load_avg_1m": os.getloadavg()[0],
        "distinct_block_ids": len(ids),
        "prompt_bytes": sum(len(str(pr.prompt)) for pr in plan),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
