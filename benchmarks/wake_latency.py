"""How late this host wakes a process at scheduled times (the floor under any arrival
schedule): 1,000 Poisson arrivals at 100/s, waited for three ways on uvloop, lateness
measured in the loop at the moment the arrival would be sent. Prints percentiles (ms)
and each way's CPU seconds.

* ``spin``: loop timer to 1 ms before, then yield to the loop until due (the old way);
* ``thread``: a timer thread sleeps in the kernel until due, then wakes the loop
  (``call_soon_threadsafe``);
* ``blocking``: loop timer to 2 ms before, then a blocking sleep (blocks the loop).

    python benchmarks/wake_latency.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time

import numpy as np

from accelbench.eventloop import install_uvloop

_now = time.monotonic_ns


def offsets(n: int = 1000, rate: float = 100.0) -> list[float]:
    rng = random.Random(1)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def spin(offs: list[float]) -> list[int]:
    start, late = _now() + 20_000_000, []
    for o in offs:
        due = start + int(o * 1e9)
        d = (due - _now()) / 1e9
        if d > 0.002:
            await asyncio.sleep(d - 0.001)
        while _now() < due:
            await asyncio.sleep(0)
        late.append(_now() - due)
    return late


async def thread(offs: list[float]) -> list[int]:
    loop = asyncio.get_running_loop()
    start, late, done = _now() + 20_000_000, [], loop.create_future()

    def fired(due: int) -> None:
        late.append(_now() - due)
        if len(late) == len(offs):
            done.set_result(None)

    def run() -> None:
        for o in offs:
            due = start + int(o * 1e9)
            if due > _now():
                time.sleep((due - _now()) / 1e9)
            loop.call_soon_threadsafe(fired, due)

    threading.Thread(target=run, daemon=True).start()
    await done
    return late


async def blocking(offs: list[float]) -> list[int]:
    start, late = _now() + 20_000_000, []
    for o in offs:
        due = start + int(o * 1e9)
        d = (due - _now()) / 1e9
        if d > 0.003:
            await asyncio.sleep(d - 0.002)
        r = due - _now()
        if r > 0:
            time.sleep(r / 1e9)
        late.append(_now() - due)
    return late


def main() -> None:
    install_uvloop()
    offs = offsets()
    out: dict = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    for fn in (spin, thread, blocking, spin, thread):
        c0 = time.process_time()
        late = np.array(asyncio.run(fn(offs))) / 1e6
        out.setdefault(fn.__name__, []).append(
            {**{k: round(float(np.percentile(late, q)), 3) for k, q in
                (("p50", 50), ("p90", 90), ("p99", 99))},
             "max": round(float(late.max()), 2), "cpu_s": round(time.process_time() - c0, 3)}
        )  # fmt: skip
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
