"""Telemetry cost: CPU per sample of each source, CPU of the monitor loop at 1 Hz, and the
exporter's /metrics scrape latency with 8 GPUs of replayed data.

- Sources: host (with --server-pid), sysfs (amdgpu), the server's /metrics (--server-url,
  e.g. llama-server started with --metrics), NVML and amdsmi where present.
  Each is sampled back to back; CPU is this process's CPU time
  (time.process_time), so the cost of a sample at 1 Hz is its CPU per second.
- Monitor at 1 Hz: `Monitor.tick()` (sample + health rules over the window + unknown checks
  + exporter update) with 8 replayed GPUs, the host and the server, over a window of 400
  samples (more than the default 300 s at 1 Hz). The window is kept per device between
  ticks (accelbench.health.window), so the cost grows with devices, little with the window.
- Scrape latency: GET /metrics of the exporter holding those 8 GPUs.
- The server's /metrics parse: a live sample reads only the lines its row reads; against
  the whole parse, on the real vLLM 0.32 scrape in tests/fixtures/telemetry, interleaved.
Usage: python benchmarks/telemetry_cost.py [--samples 200] [--capture FILE.xml]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from accelbench.health.monitor import Monitor
from accelbench.monitoring.replay import ReplaySource
from accelbench.telemetry.exporter import Exporter
from accelbench.telemetry.parsers import parse_server_metrics
from accelbench.telemetry.sources import Source, close_sources, open_sources

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests/fixtures/telemetry/nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml"
VLLM_SCRAPE = REPO / "tests/fixtures/telemetry/vllm_metrics__cpu-tiny-model__vllm0.32.0__load.prom"


def eight_gpu_capture(src: Path, dst: Path) -> Path:
    """The real single-GPU ``nvidia-smi -q -x`` capture with its <gpu> block repeated for
    eight GPUs (distinct bus ids, uuids and minor numbers), as on an 8-GPU node."""
    text = src.read_text()
    m = re.search(r"<gpu id=\"[^\"]+\">.*?</gpu>\n", text, re.S)
    assert m, "no <gpu> block in the capture"
    block = m.group(0)
    gpus = []
    for i in range(8):
        b = re.sub(r'<gpu id="[^"]+">', f'<gpu id="00000000:{0x10 + i:02X}:00.0">', block)
        b = re.sub(
            r"<uuid>GPU-[0-9a-f-]+</uuid>",
            f"<uuid>GPU-00000000-0000-0000-0000-00000000000{i}</uuid>",
            b,
        )
        b = re.sub(r"<minor_number>\d+</minor_number>", f"<minor_number>{i}</minor_number>", b)
        gpus.append(b)
    out = text.replace(block, "".join(gpus)).replace(
        "<attached_gpus>1</attached_gpus>", "<attached_gpus>8</attached_gpus>"
    )
    dst.write_text(out)
    return dst


def cpu_per_sample(src: Source, n: int) -> tuple[float, float]:
    """(CPU ms per sample, wall ms per sample), back to back."""
    src.sample(time.monotonic_ns())  # warm (first psutil calls prime state)
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        src.sample(time.monotonic_ns())
    return (time.process_time() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def server_parse(samples: int, rounds: int) -> None:
    """The live sample's parse of a real vLLM scrape (only the lines a row reads) against
    the whole parse (what every sample did before), interleaved A B A B, ``rounds``
    rounds of ``samples`` parses each; CPU per parse and the ratio, min / median / max."""
    text = VLLM_SCRAPE.read_text()
    assert parse_server_metrics(text, read_only=True) == parse_server_metrics(text)
    per: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for read_only in (False, True):
            c0 = time.process_time()
            for _ in range(samples):
                parse_server_metrics(text, read_only=read_only)
            per[read_only].append((time.process_time() - c0) / samples * 1e3)
    ratios = sorted(a / b for a, b in zip(per[True], per[False], strict=True))

    def mmm(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"{statistics.median(xs):.3f} ({xs[0]:.3f}-{xs[-1]:.3f})"

    print(f"vLLM 0.32 scrape ({len(text):,} bytes, {text.count(chr(10))} lines), CPU ms per "
          f"parse over {rounds} rounds of {samples}, median (min-max):")  # fmt: skip
    print(f"  whole parse (every line)          {mmm(per[False])}")
    print(f"  live sample (the lines it reads)  {mmm(per[True])}")
    print(f"  live / whole                      {mmm(ratios)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="Rounds of the server-parse A/B.")
    ap.add_argument("--only-server-parse", action="store_true",
                    help="Only the A/B of the server /metrics parse (no sources, no monitor).")  # fmt: skip
    ap.add_argument("--capture", type=Path, default=CAPTURE)
    ap.add_argument("--server-url", help="Server whose /metrics to read (e.g. llama-server).")
    ap.add_argument(
        "--server-pid", type=int, help="Its pid (host source: RSS and CPU of its tree)."
    )
    args = ap.parse_args()

    server_parse(args.samples, args.rounds)
    if args.only_server_parse:
        return
    url = args.server_url
    pid = args.server_pid
    if True:  # one block: sources, then the monitor and exporter
        print(
            f"{'source':<12} {'status':<44} {'CPU ms/sample':>14} {'wall ms':>8} {'% core @1 Hz':>13}"
        )
        for name in ("nvml", "amdsmi", "sysfs", "host", "server"):
            active, status = open_sources([name], url, pid)
            if not active:
                print(f"{name:<12} {status[name]}")
                continue
            cpu, wall = cpu_per_sample(active[0], args.samples)
            print(f"{name:<12} {'ok':<44} {cpu:>14.3f} {wall:>8.3f} {cpu / 10:>12.3f}%")
            close_sources(active)

        with tempfile.TemporaryDirectory() as tmp:
            cap = eight_gpu_capture(args.capture, Path(tmp) / "8gpu.xml")
            replay = ReplaySource([cap])
            assert replay.probe() is None
            cpu, wall = cpu_per_sample(replay, args.samples)
            print(f"{'replay x8':<12} {'8 GPUs (capture parsed once, rows copied)':<44} "
                  f"{cpu:>14.3f} {wall:>8.3f} {cpu / 10:>12.3f}%")  # fmt: skip

            more, _ = open_sources(["host", "server"], url, pid)
            exporter = Exporter(port=0)
            eport = exporter.start()
            mon = Monitor([ReplaySource([cap]), *more], interval_s=1.0, window_s=3600.0,
                          exporter=exporter)  # fmt: skip
            # Fill the window: the samples are stamped with the real clock, so all of them
            # stay in it; 300 ticks first = a full 300 s window at 1 Hz, then measure.
            for _ in range(300):
                mon.tick()
            ticks = min(args.samples, 100)
            c0 = time.process_time()
            for _ in range(ticks):
                mon.tick()
            tick_ms = (time.process_time() - c0) / ticks * 1e3
            rows = len(mon.window)
            print(f"\nmonitor tick (8 GPUs + host + server, window of {rows} rows): "
                  f"{tick_ms:.2f} ms CPU = {tick_ms / 10:.2f}% of one core at 1 Hz")  # fmt: skip

            lat = []
            size = 0
            for _ in range(args.samples):
                t0 = time.perf_counter()
                with urllib.request.urlopen(f"http://127.0.0.1:{eport}/metrics") as r:
                    size = len(r.read())
                lat.append((time.perf_counter() - t0) * 1e3)
            lat.sort()
            p99 = lat[int(0.99 * (len(lat) - 1))]
            print(f"exporter scrape, 8 GPUs: p50 {statistics.median(lat):.2f} ms, "
                  f"p99 {p99:.2f} ms, {size} bytes")  # fmt: skip
            exporter.stop()
            close_sources(mon.sources)


if __name__ == "__main__":
    main()
