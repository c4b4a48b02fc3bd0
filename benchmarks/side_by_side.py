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
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sbs_client_cpu  # noqa: E402
import sbs_proxy  # noqa: E402
import sbs_report  # noqa: E402
import sbs_schedule  # noqa: E402
import sbs_timing  # noqa: E402
from sbs_common import MIN_ROUNDS, log  # noqa: E402

# -- main -----------------------------------------------------------------------------------
# each section is a module with ``run(args, workdir) -> dict`` (``markdown``, ``table``,
# ``runs``) and ``TODO`` (None, or the line printed in place of a section not measured yet)
SECTIONS: dict[str, Any] = {
    "client-cpu": sbs_client_cpu,
    "proxy": sbs_proxy,
    "schedule": sbs_schedule,
    "timing": sbs_timing,
    "report": sbs_report,
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
        mod = SECTIONS[s]
        if mod.TODO:
            parts.append(f"**{mod.TODO}**")
            doc["sections"][s] = {"todo": mod.TODO}
            continue
        log(f"section {s}")
        t0 = time.monotonic()
        res = mod.run(a, wd / s)
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
