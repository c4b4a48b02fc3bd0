"""Two reference clients for ``client_ceiling.py --paced``, run as tools beside accelbench.

``vllm``: vLLM's own request function (``async_request_openai_completions`` of
``vllm/benchmarks/lib/endpoint_request_func.py``, loaded from ``--module``, a verbatim copy
kept outside this repository) driven the way ``vllm bench serve --backend openai
--request-rate inf --max-concurrency C`` drives it: one aiohttp session with its
connector settings, one task per request behind a semaphore, ``asyncio.gather``, default
asyncio loop. What is left out of ``bench serve`` is per-run, not per-chunk work (dataset
sampling with a tokenizer, the warm-up probe, the metrics at the end).

``null``: the floor. A raw uvloop protocol that sends the same requests and only counts
reads (no parsing, no timestamps kept): what the event loop and the kernel cost per
chunk on this machine, below which no Python client can go.

Prints one JSON line: requests, reads (null) or chunks, and this process's user/system
CPU seconds during the load (start-up excluded).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import resource
import socket
import string
import time


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _prompts(n: int, isl: int) -> list[str]:
    rng = random.Random(0)
    letters = string.ascii_letters + " "
    return ["".join(rng.choices(letters, k=isl)) for _ in range(n)]


async def run_vllm(a: argparse.Namespace) -> dict:
    import aiohttp

    spec = importlib.util.spec_from_file_location("vllm_request_func", a.module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = mod.async_request_openai_completions
    url = a.base_url.rstrip("/") + "/v1/completions"
    # the connector and session of vllm.benchmarks.serve.benchmark()
    connector = aiohttp.TCPConnector(
        limit=a.concurrency, limit_per_host=a.concurrency, ttl_dns_cache=300,
        use_dns_cache=True, keepalive_timeout=60, enable_cleanup_closed=True,
        force_close=False, ssl=False,
    )  # fmt: skip
    session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                    timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))  # fmt: skip
    inputs = [
        mod.RequestFuncInput(
            prompt=p,
            api_url=url,
            prompt_len=a.isl,
            output_len=a.osl,
            model=a.model,
            ignore_eos=True,
        )  # fmt: skip
        for p in _prompts(a.requests, a.isl)
    ]
    sem = asyncio.Semaphore(a.concurrency)

    async def limited(inp):
        async with sem:
            return await fn(request_func_input=inp, session=session, pbar=None)

    u0, s0 = _cpu()
    t0 = time.monotonic()
    tasks = [asyncio.create_task(limited(i)) for i in inputs]
    outs = await asyncio.gather(*tasks)
    wall = time.monotonic() - t0
    u1, s1 = _cpu()
    await session.close()
    ok = [o for o in outs if o.success]
    return {
        "tool": "vllm-client", "requests": len(outs), "completed": len(ok),
        "chunks": sum(len(o.itl) + 1 for o in ok),
        "output_tokens": sum(o.output_tokens or 0 for o in ok),
        "wall_s": wall, "user_s": u1 - u0, "sys_s": s1 - s0,
        "errors": sorted({o.error.splitlines()[-1][:120] for o in outs if not o.success})[:3],
    }  # fmt: skip


async def run_null(a: argparse.Namespace) -> dict:
    host, port = a.base_url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    stats = {"sent": 0, "done": 0, "reads": 0}
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    prompts = _prompts(a.requests, a.isl)

    def request(i: int) -> bytes:
        body = json.dumps({"model": a.model, "prompt": prompts[i], "max_tokens": a.osl,
                           "stream": True, "stream_options": {"include_usage": True},
                           "ignore_eos": True}).encode()  # fmt: skip
        return (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode() + body  # fmt: skip

    class Null(asyncio.Protocol):
        def connection_made(self, tr):
            self.tr = tr
            tr.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.send()

        def send(self) -> None:
            if stats["sent"] < a.requests:
                stats["sent"] += 1
                self.tr.write(request(stats["sent"] - 1))

        def data_received(self, data: bytes) -> None:
            time.monotonic_ns()  # the one timestamp every client takes per read
            stats["reads"] += 1
            if data.endswith(b"0\r\n\r\n"):  # end of the chunked response
                stats["done"] += 1
                if stats["done"] == a.requests:
                    finished.set_result(None)
                else:
                    self.send()

    u0, s0 = _cpu()
    t0 = time.monotonic()
    for _ in range(min(a.concurrency, a.requests)):
        await loop.create_connection(Null, host, int(port))
    await finished
    wall = time.monotonic() - t0
    u1, s1 = _cpu()
    return {"tool": "null-client", "requests": stats["done"], "completed": stats["done"],
            "reads": stats["reads"], "wall_s": wall, "user_s": u1 - u0, "sys_s": s1 - s0}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("vllm", "null"))
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--module", help="vllm: path of endpoint_request_func.py (a copy)")
    ap.add_argument("--model", default="reference")
    ap.add_argument("-c", "--concurrency", type=int, default=256)
    ap.add_argument("-n", "--requests", type=int, default=1024)
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=256)
    ap.add_argument("--out", help="write the JSON here too")
    a = ap.parse_args()
    if a.mode == "vllm":
        res = asyncio.run(run_vllm(a))  # bench serve runs on the default asyncio loop
    else:
        import uvloop

        res = uvloop.run(run_null(a))
    text = json.dumps(res)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
