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

Sections (``--only``), each its own module (its docstring says how it measures;
benchmarks/README.md has the method and the last tables):

- ``client-cpu`` (1, ``sbs_client_cpu.py``): client CPU per streamed chunk, 256 paced
  streams, one SSE event per write, against vLLM's ``bench serve``, AIPerf, GuideLLM, an
  asyncio/uvloop floor and a C floor.
- ``proxy`` (2, ``sbs_proxy.py``): the caller's TTFT and chunk gaps through accelbench's
  shadow proxy against nginx's ``mirror`` and haproxy, identical / slow / dead candidate.
- ``schedule`` (3, ``sbs_schedule.py``): open-loop arrival error at the server's socket
  (a kernel receive stamp, ``arrival_server.c``), Poisson at 100 and 1,000 requests/s
  and a trace replay, against vLLM, AIPerf and a C sender floor.
- ``timing`` (4, ``sbs_timing.py``): TTFT and chunk-gap error against the reference
  server's ground truth at 256 and 1,000 streams (``--workers 2``, ``--ray local``),
  beside vLLM's ``bench serve`` at 256.
- ``report`` (5, ``sbs_report.py``): a 13-million-request soak into verdicts and a
  report, peak memory and time, against GuideLLM's and AIPerf's report step.

A section whose module still has a ``TODO`` prints that line instead of a table: listed,
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
                   help="refuse a ratio whose per-round ratios' max/min exceeds this while the two "
                        "contenders' rounds overlap")  # fmt: skip
    p.add_argument("--run-timeout", type=float, default=300.0, help="seconds per tool run")
    p.add_argument("--install-timeout", type=float, default=1200.0, help="seconds per pip install")
    p.add_argument("--workdir", type=Path, help="tool outputs (default: a temporary folder)")
    p.add_argument(
        "--pin-hop",
        action="store_true",
        help="proxy section: each hop under test on the last CPU, the caller and "
        "servers on the rest (a proxy's place in production: cores of its own)",
    )
    p.add_argument(
        "--proxy-requests",
        type=int,
        help="proxy section: requests per run at every stream count (default 320 / 512 at "
        "64 / 256 streams; psutil's 10 ms CPU ticks are 39 us a request at 256)",
    )
    a = p.parse_args(argv)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    if not only or any(s not in SECTIONS for s in only):
        p.error(f"--only: a comma-separated list of {', '.join(SECTIONS)}")
    if a.repeat < 1 or a.max_spread < 1:
        p.error("--repeat must be >= 1 and --max-spread >= 1")
    if a.proxy_requests is not None and a.proxy_requests < 1:
        p.error("--proxy-requests must be >= 1")
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
        "quick": a.quick, "repeat": a.repeat, "max_spread": a.max_spread, "pin_hop": a.pin_hop,
        "sections": {},
    }  # fmt: skip
    parts = [
        f"Side by side, {started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs ({cpu}), "
        f"{a.repeat} interleaved rounds{' (--quick)' if a.quick else ''}. A ratio is the "
        f"median (min-max) of the per-round ratios, printed only when both contenders have "
        f">= {MIN_ROUNDS} good rounds and either the per-round ratios agree within max/min "
        f"<= {a.max_spread:g} or the two contenders' rounds do not overlap (every round of "
        "one beats every round of the other)."
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
