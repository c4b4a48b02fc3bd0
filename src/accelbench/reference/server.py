"""The reference server: an OpenAI-compatible streaming server for measuring the *client*.

It is not an inference engine. It emits each token at a scheduled time (TTFT and
inter-token gaps from configurable distributions) and logs when it actually wrote each
one (the ground truth a client's measurements are compared with); in max-throughput
mode it writes whole responses at once, to find the client's ceiling; and it injects
faults: HTTP 429/500/503, disconnects mid-stream, malformed SSE, stalls, slow headers.

Tokens are bytes: ``/tokenize`` maps each UTF-8 byte of the text to one token, so
prompt lengths are exact and ``usage.prompt_tokens`` is the prompt's byte length. It can
have a prefix cache with a known rule (``prefix_cache.py``): told its block size, capacity
and prefill cost per uncached token, it reports ``cached_tokens`` in usage, on /metrics
and in its ground truth.
Written on raw asyncio protocols so that the server costs little CPU per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import orjson

from accelbench import validate
from accelbench.documents import JsonObject
from accelbench.errors import AccelbenchError
from accelbench.eventloop import install_uvloop
from accelbench.httpframing import MAX_HEAD, Reject, RequestReader
from accelbench.lifetime import STOP_SIGNALS
from accelbench.reference.prefix_cache import PrefixCache

FAULT_KINDS = ("429", "500", "503", "disconnect", "malformed", "stall", "slow_headers")
_WORDS = [" alpha", " beta", " gamma", " delta", " token", " stream", " bench", " ref"]
_WORDS_JSON = [orjson.dumps(w) for w in _WORDS]
# Longest response it generates: a larger max_tokens is answered with HTTP 400, as a real
# server answers a request beyond its context. Tokens are made as they are written.
MAX_TOKENS_CAP = 1_000_000
# Longest prompt it takes (its context): stress flood's longest (--lengths up to 2^22).
# A prompt is hashed block by block into the prefix cache on the event loop: a 60 MB one
# held every other client for 6.3 s (16 x that with --prefix-block-size 1).
MAX_PROMPT_TOKENS = 1 << 22
# Max-throughput mode writes this many events per write, pausing when the client reads
# slower than that (transport flow control), so no response is held whole in memory.
_BULK_EVENTS = 256
# The prefix cache's bounds: a block of at most 1 MiB; at most 10 million blocks (the
# cache holds one 16-byte digest per block, about 150 bytes with the LRU's bookkeeping:
# 1.5 GB at most; vLLM's num_gpu_blocks is 10^4-10^6 on real accelerators).
MAX_PREFIX_BLOCK_SIZE = 1 << 20
MAX_PREFIX_CACHE_BLOCKS = 10_000_000
MAX_PREFILL_MS_PER_TOKEN = 1000.0


@dataclass
class Dist:
    """A duration or length distribution: ``50``, ``uniform:40:60``, ``normal:50:5``,
    ``exp:50`` (exponential with that mean)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, spec: str | float | int) -> Dist:
        if isinstance(spec, int | float):
            return cls("fixed", float(spec))
        parts = str(spec).split(":")
        try:
            if len(parts) == 1:
                return cls("fixed", float(parts[0]))
            kind = parts[0]
            nums = [float(x) for x in parts[1:]]
        except ValueError:
            raise AccelbenchError(f"bad distribution {spec!r}") from None
        if kind in ("uniform", "normal") and len(nums) == 2:
            return cls(kind, nums[0], nums[1])
        if kind == "exp" and len(nums) == 1:
            return cls(kind, nums[0])
        raise AccelbenchError(
            f"bad distribution {spec!r}: use N, uniform:LO:HI, normal:MEAN:STD or exp:MEAN"
        )

    def check(self, name: str, hi: float) -> Dist:
        """Every parameter finite and in [0, hi]; one line naming the option if not."""
        for x in (self.a, self.b):
            validate.number(name, x, 0, hi)
        if self.kind == "uniform" and self.b < self.a:
            raise validate.UsageError(
                f"{name} uniform:LO:HI needs LO <= HI (got {self.a:g}:{self.b:g})"
            )
        return self

    def sample(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "normal":
            return max(0.0, rng.gauss(self.a, self.b))
        return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0


@dataclass
class ReferenceConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "reference"
    ttft_ms: Dist = field(default_factory=lambda: Dist("fixed", 50.0))
    itl_ms: Dist = field(default_factory=lambda: Dist("fixed", 10.0))
    osl: Dist | None = None  # None: honour max_tokens exactly
    default_max_tokens: int = 16
    max_throughput: bool = False
    faults: dict[str, float] = field(default_factory=dict)  # kind -> probability
    stall_s: float = 2.0
    # After a response, with this probability the server closes the kept-alive
    # connection when the next request arrives on it, without answering: the race a
    # client meets with servers that drop idle connections (llama-server does).
    drop_keepalive: float = 0.0
    slow_headers_s: float = 1.0
    ground_truth: Path | None = None
    seed: int = 0
    # Known truths for the stress verdicts (accelbench stress): see StressKnobs.
    stress: StressKnobs = field(default_factory=lambda: StressKnobs())
    # The prefix cache (prefix_cache.py): blocks of this many tokens (bytes), this many
    # blocks (0: none), TTFT + this much per uncached prompt token, and whether a
    # completed request's prompt + output blocks are inserted.
    prefix_block_size: int = 16
    prefix_cache_blocks: int = 0
    prefill_ms_per_token: float = 0.0
    prefix_cache_outputs: bool = True

    def validate(self) -> None:
        validate.integer("--port", self.port, 0, 65535)
        if self.ground_truth is not None:  # a FIFO blocked the server's start for ever
            validate.output_file("--ground-truth", self.ground_truth)
        day_ms = 86_400_000.0
        self.ttft_ms.check("--ttft-ms", day_ms)
        self.itl_ms.check("--itl-ms", day_ms)
        if self.osl is not None:
            self.osl.check("--osl", MAX_TOKENS_CAP)
        validate.integer("default max_tokens", self.default_max_tokens, 1, MAX_TOKENS_CAP)
        validate.number("--stall-s", self.stall_s, 0, 3600, unit="s")
        validate.number("--slow-headers-s", self.slow_headers_s, 0, 3600, unit="s")
        validate.number("--drop-keepalive", self.drop_keepalive, 0, 1)
        validate.integer("--seed", self.seed, 0, (1 << 32) - 1)
        total = 0.0
        for k, p in self.faults.items():
            if k not in FAULT_KINDS:
                raise AccelbenchError(f"unknown fault {k!r}: one of {', '.join(FAULT_KINDS)}")
            validate.number(f"--fault {k}", p, 0, 1)
            total += p
        if total > 1 + 1e-9:
            raise AccelbenchError("fault probabilities add up to more than 1")
        self.stress.validate()
        validate.integer("--prefix-block-size", self.prefix_block_size, 1, MAX_PREFIX_BLOCK_SIZE)
        validate.integer(
            "--prefix-cache-blocks", self.prefix_cache_blocks, 0, MAX_PREFIX_CACHE_BLOCKS
        )
        validate.number(
            "--prefill-ms-per-token", self.prefill_ms_per_token, 0, MAX_PREFILL_MS_PER_TOKEN,
            unit="ms",
        )  # fmt: skip
        if not isinstance(self.prefix_cache_outputs, bool):
            raise validate.UsageError(
                f"--prefix-cache-outputs must be true or false (got {self.prefix_cache_outputs!r})"
            )


@dataclass
class StressKnobs:
    """Injected faults with a known rate, for testing the stress verdicts.

    * ``leak_bytes_per_request``: every generation request keeps that many bytes
      (written, so resident): the process RSS grows by exactly that much per request.
    * ``device_memory_*``: a ``reference_device_memory_used_bytes`` gauge on /metrics
      that ramps up by ``warmup_bytes`` over ``warmup_s`` (a KV-cache pool filling),
      then grows ``rate`` bytes per second (a leak); ``..._total_bytes`` is the device.
    * ``ttft_drift_ms_per_min``: TTFT grows by that much per minute of uptime.
    * ``deterministic``: the output depends on the prompt only; ``diverge`` makes
      exactly floor(N x diverge) of the first N generation requests differ in one token.
    """

    leak_bytes_per_request: int = 0
    device_memory_base_bytes: float = 1 << 30
    device_memory_warmup_bytes: float = 0.0
    device_memory_warmup_s: float = 0.0
    device_memory_rate: float = 0.0  # bytes/s after the warm-up
    device_memory_total_bytes: float = 80 * (1 << 30)
    ttft_drift_ms_per_min: float = 0.0
    deterministic: bool = False
    diverge: float = 0.0

    def validate(self) -> None:
        from accelbench import validate as v

        v.integer("--leak-bytes-per-request", self.leak_bytes_per_request, 0, 1 << 30)
        v.number("--diverge", self.diverge, 0.0, 1.0)
        # growth only: a negative rate would report memory below what is in use
        v.number("--device-memory-rate", self.device_memory_rate, 0.0, 1e12, unit="bytes/s")
        v.number("--device-memory-warmup-s", self.device_memory_warmup_s, 0.0, 1e7)
        v.number("--device-memory-warmup", self.device_memory_warmup_bytes, 0.0, 1e15)
        v.number("--device-memory-total", self.device_memory_total_bytes, 0.0, 1e15, lo_open=True)
        v.number("--ttft-drift-ms-per-min", self.ttft_drift_ms_per_min, -1e6, 1e6)

    def device_memory(self, uptime_s: float) -> float:
        w = self.device_memory_warmup_s
        ramp = self.device_memory_warmup_bytes * (min(uptime_s / w, 1.0) if w > 0 else 1.0)
        leak = self.device_memory_rate * max(0.0, uptime_s - w)
        return self.device_memory_base_bytes + ramp + leak

    def diverges(self, k: int) -> bool:
        """Whether generation request k (0-based) diverges: exactly floor(N x diverge)
        of the first N do, spread evenly."""
        return int((k + 1) * self.diverge) > int(k * self.diverge)


def deterministic_words(prompt: str, n: int, diverge: bool) -> list[str]:
    """The output for a prompt in deterministic mode; a diverging one differs in the
    token at position crc32(prompt) mod n (and only there)."""
    import zlib

    h = zlib.crc32(prompt.encode())
    rng = random.Random(h)
    words = [_WORDS[rng.randrange(len(_WORDS))] for _ in range(n)]
    if diverge and n:
        p = h % n
        words[p] = _WORDS[(_WORDS.index(words[p]) + 1) % len(_WORDS)]
    return words


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class _State:
    def __init__(self, cfg: ReferenceConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.gt = open(cfg.ground_truth, "ab") if cfg.ground_truth else None  # noqa: SIM115
        self.requests_total = 0
        self.tokens_total = 0
        self.faults_total: dict[str, int] = {}
        self.dropped_total = 0
        self.counter = 0
        self.t_start = time.monotonic()
        self.leaked: list[bytes] = []  # StressKnobs.leak_bytes_per_request
        self.leaked_bytes = 0
        self.generated = 0  # generation requests answered (deterministic mode)
        self.diverged_total = 0
        self.cache = (
            PrefixCache(cfg.prefix_block_size, cfg.prefix_cache_blocks)
            if cfg.prefix_cache_blocks
            else None
        )
        self.last_event_ns = 0

    def stamp(self, t_ns: int) -> int:
        """``t_ns`` (monotonic), or 1 ns after the last stamp if it is not later: a
        request's arrival (t_recv) and completion (t_end) are distinct and in the order
        in which the prefix cache saw them (pipelined requests share a receive time)."""
        t = max(t_ns, self.last_event_ns + 1)
        self.last_event_ns = t
        return t

    def event_ns(self) -> int:
        return self.stamp(time.monotonic_ns())

    def ttft_drift_ms(self) -> float:
        return self.cfg.stress.ttft_drift_ms_per_min * (time.monotonic() - self.t_start) / 60.0

    def stress_words(self, prompt: str, n: int) -> list[str] | None:
        """Leak this request's bytes; the deterministic output, if that mode is on."""
        k = self.cfg.stress
        if k.leak_bytes_per_request:
            self.leaked.append(b"\xa5" * k.leak_bytes_per_request)  # written: resident
            self.leaked_bytes += k.leak_bytes_per_request
        if not k.deterministic:
            return None
        div = k.diverges(self.generated)
        self.generated += 1
        self.diverged_total += div
        return deterministic_words(prompt, n, div)

    def stress_metrics(self) -> list[str]:
        k = self.cfg.stress
        up = time.monotonic() - self.t_start
        return [
            "# TYPE reference_leaked_bytes gauge",
            f"reference_leaked_bytes {self.leaked_bytes}",
            "# TYPE reference_device_memory_used_bytes gauge",
            f"reference_device_memory_used_bytes {k.device_memory(up):.0f}",
            "# TYPE reference_device_memory_total_bytes gauge",
            f"reference_device_memory_total_bytes {k.device_memory_total_bytes:.0f}",
            "# TYPE reference_diverged_total counter",
            f"reference_diverged_total {self.diverged_total}",
        ]

    def pick_fault(self) -> str | None:
        r = self.rng.random()
        acc = 0.0
        for kind, p in self.cfg.faults.items():
            acc += p
            if r < acc:
                return kind
        return None

    def cache_metrics(self) -> list[str]:
        """vLLM's names and units (tokens) under ``reference:``; only with a cache."""
        c = self.cache
        if c is None:
            return []
        return [
            "# TYPE reference:prefix_cache_queries_total counter",
            f"reference:prefix_cache_queries_total {c.queries_tokens}",
            "# TYPE reference:prefix_cache_hits_total counter",
            f"reference:prefix_cache_hits_total {c.hit_tokens}",
            "# TYPE reference:prefix_cache_evicted_blocks_total counter",
            f"reference:prefix_cache_evicted_blocks_total {c.evicted_blocks}",
            "# TYPE reference:prefix_cache_blocks gauge",
            f"reference:prefix_cache_blocks {len(c)}",
            "# TYPE reference:cache_config_info gauge",
            f'reference:cache_config_info{{block_size="{c.block_size}",'
            f'num_gpu_blocks="{c.capacity}",'
            f'cache_outputs="{str(self.cfg.prefix_cache_outputs).lower()}"}} 1',
        ]

    def log(self, doc: GroundTruthLine) -> None:
        if self.gt is not None:
            self.gt.write(orjson.dumps(doc) + b"\n")
            self.gt.flush()


class GroundTruthLine(TypedDict):
    """One line of ``--ground-truth``: what the server did for one request, on its
    monotonic clock (ns). A faulted request that got an error status has only the
    first three fields; a non-streamed one has no token times. Lines are written when a
    request ends; the order of arrival is the order of ``t_recv`` (distinct values)."""

    request_id: str
    t_recv: int
    fault: str | None
    prompt_tokens: NotRequired[int]  # bytes
    cached_tokens: NotRequired[int]  # served from the prefix cache (0 without one)
    blocks_evicted: NotRequired[int]  # blocks this request evicted, arrival + completion
    token_times: NotRequired[list[int]]  # each token's write (taken just before it)
    scheduled: NotRequired[list[int]]  # each token's due time
    t_headers: NotRequired[int]
    t_end: NotRequired[int]
    client_closed: NotRequired[bool]  # the client went away mid-stream


class ReferenceProtocol(asyncio.Protocol):
    extra_headers = b""  # header lines (each ending in CRLF) on every response

    def __init__(self, state: _State) -> None:
        self.st = state
        self.buf = bytearray()
        self.reader = RequestReader()
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.handles: list[asyncio.TimerHandle] = []
        self.current_log: GroundTruthLine | None = None  # the stream in progress
        self.pending: list[GroundTruthLine] = []  # non-streamed responses not yet written
        self.drop_next = False
        self.paused = False  # the client reads slower than we write
        self.receiving = False  # inside data_received (its loop takes the next request)
        self.bulk: Any = None  # a max-throughput response being written
        self.reading_paused = False  # a request's answer is due and more bytes wait
        self.eof = False  # the client sent all it will: a request cut short is a 400
        self.close_after = False  # the request being answered asked to close after it
        self.http10 = False  # the request being answered is HTTP/1.0: no chunked answer

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.bulk is not None:
            self._pump()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for h in self.handles:
            h.cancel()
        if self.current_log is not None:  # the client went away mid-stream
            self.pending.append(self.current_log)
            self.current_log = None
        for log in self.pending:  # ... or before its answer
            log["t_end"] = time.monotonic_ns()
            log["client_closed"] = True
            self.st.log(log)
        self.pending.clear()

    def data_received(self, data: bytes) -> None:
        self.receiving = True
        try:
            self._received(data)
        finally:
            self.receiving = False

    def _received(self, data: bytes) -> None:
        t = time.monotonic_ns()
        self.buf += data
        # one request at a time, answered in order (RFC 9112 9.3.2): a pipelined request
        # waits for the answer before it, streamed or not (a non-streamed answer still
        # due was overtaken by the next request's, or written into its stream)
        while not self.busy and not self.pending and not self.closed:
            if self.close_after:  # the request before asked to close (or was HTTP/1.0)
                self.transport.close()  # type: ignore[union-attr]
                return
            # framed as the shadow proxy frames requests (RFC 9112, strict): a negative
            # Content-Length had re-read this buffer's own head and hung the server
            try:
                req = self.reader.feed(self.buf)
            except Reject as exc:
                self._simple(exc.status, {"error": {"message": exc.reason}}, close=True)
                return
            if req is None:
                self._waiting()
                return
            self.close_after = req.close
            self.http10 = req.version == b"HTTP/1.0"
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in req.headers}
            target = req.target.decode("latin-1")
            self._dispatch(req.method.decode("ascii"), target, headers, bytes(req.body), t)
        # what a client sends while its answer is due waits in the kernel, not here: it
        # was read into this buffer without bound (1 GB sent beside a long stream held
        # 1.4 GB of the server's memory)
        if (self.busy or self.pending) and len(self.buf) > MAX_HEAD and not self.closed:
            self.transport.pause_reading()  # type: ignore[union-attr]
            self.reading_paused = True

    def eof_received(self) -> bool:
        """The client sent all it will send. While its answer is due, that is the client
        gone (as nginx takes it; a client that timed out closes so): the connection
        closes and the ground truth says so at once. Otherwise a request it cut short is
        answered 400 (it got no answer), and the connection closes."""
        self.eof = True
        if self.busy or self.pending:
            return False
        if not self.receiving:
            self._received(b"")
        return True

    def _waiting(self) -> None:
        """No whole request in the buffer: at the end of input, answer what was cut
        short (400) or close; a head that expects ``100-continue`` is told to go on (a
        client waiting for it had waited, curl 1 s, before sending the body)."""
        assert self.transport is not None
        if self.eof:
            if self.reader.partial or self.buf.strip(b"\r\n"):
                msg = "the request was cut short by the end of input"
                self._simple(400, {"error": {"message": msg}}, close=True)
            else:
                self.transport.close()
        elif self.reader.wants_continue:
            assert self.reader.req is not None
            self.reader.req.expect_continue = False
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    # -- routing -------------------------------------------------------------------
    def _dispatch(self, method: str, path: str, headers: dict, body: bytes, t: int) -> None:
        path = path.split("?", 1)[0]
        cfg = self.st.cfg
        if self.drop_next:
            self.st.dropped_total += 1
            self.transport.close()  # type: ignore[union-attr]
            self.buf.clear()
            return
        if cfg.drop_keepalive and method == "POST" and path.startswith("/v1/"):
            self.drop_next = self.st.rng.random() < cfg.drop_keepalive
        if method == "GET" and path in ("/v1/models", "/models"):
            self._simple(200, {"object": "list", "data": [{"id": cfg.model, "object": "model",
                                                           "owned_by": "accelbench-reference"}]})  # fmt: skip
        elif method == "GET" and path == "/health":
            self._simple(200, {"status": "ok"})
        elif method == "GET" and path == "/version":
            from accelbench import __version__

            self._simple(200, {"version": f"accelbench-reference {__version__}"})
        elif method == "GET" and path == "/metrics":
            self._metrics()
        elif method == "POST" and path in ("/tokenize", "/detokenize"):
            self._tokenize(path, body)
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            self._generate(path.endswith("chat/completions"), headers, body, t)
        else:
            self._simple(404, {"error": {"message": f"no route {method} {path}"}})

    def _simple(
        self, status: int, doc: Any, close: bool = False, ctype: str = "application/json"
    ) -> None:
        body = doc if isinstance(doc, bytes) else orjson.dumps(doc)
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Content Too Large",
                  417: "Expectation Failed", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
                  501: "Not Implemented", 505: "HTTP Version Not Supported",
                  500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")  # fmt: skip
        head = (
            (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "")
            ).encode()
            + self.extra_headers
            + b"\r\n"
        )
        assert self.transport is not None
        self.transport.write(head + body)
        if close:
            self.transport.close()

    def _metrics(self) -> None:
        st = self.st
        lines = [
            "# TYPE reference_requests_total counter",
            f"reference_requests_total {st.requests_total}",
            "# TYPE reference_tokens_total counter",
            f"reference_tokens_total {st.tokens_total}",
        ]
        lines.append(f"reference_dropped_connections_total {st.dropped_total}")
        for k, v in st.faults_total.items():
            lines.append(f'reference_faults_total{{kind="{k}"}} {v}')
        lines += st.stress_metrics()
        lines += st.cache_metrics()
        self._simple(200, ("\n".join(lines) + "\n").encode(), ctype="text/plain; version=0.0.4")

    def _tokenize(self, path: str, body: bytes) -> None:
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._simple(400, {"error": {"message": "invalid JSON"}})
            return
        # a field of the wrong type is refused, never its str() or int() (content null
        # was the text "None", 4 tokens; token 256 was 0, "7" and 7.9 were 7)
        if not isinstance(req, dict):
            self._simple(400, {"error": {"message": f"bad {path} request: not a JSON object"}})
            return
        if path == "/tokenize":
            text = req.get("content")
            text = req.get("prompt") if text is None else text
            if text is not None and not isinstance(text, str):
                msg = f"content (or prompt) must be a string (got {text!r:.40})"
                self._simple(400, {"error": {"message": msg}})
                return
            self._simple(200, {"tokens": list((text or "").encode())})
            return
        ids = req.get("tokens")
        if ids is not None and not (
            isinstance(ids, list) and all(type(i) is int and 0 <= i <= 255 for i in ids)
        ):
            msg = f"tokens must be a list of whole numbers 0 to 255: tokens are bytes (got {ids!r:.40})"
            self._simple(400, {"error": {"message": msg}})
            return
        text = bytes(ids or []).decode("utf-8", "replace")
        self._simple(200, {"content": text, "prompt": text})

    # -- generation ----------------------------------------------------------------
    def _generate(self, chat: bool, headers: dict, body: bytes, t_recv: int) -> None:
        st, cfg = self.st, self.st.cfg
        gen = self._read_generation(body, chat)
        if gen is None:
            return
        prompt, prompt_tokens, max_tokens = gen.prompt, gen.prompt_tokens, gen.max_tokens
        prompt_bytes = str(prompt).encode()
        n = (
            max_tokens
            if cfg.osl is None
            else max(1, min(max_tokens, round(cfg.osl.sample(st.rng))))
        )
        stream, usage_wanted = gen.stream, gen.usage_wanted
        rid = headers.get("x-request-id", f"ref-{st.counter}")
        t_recv = st.stamp(t_recv)  # distinct: the order of arrival (pipelined ones share t)
        st.counter += 1
        st.requests_total += 1
        fault = st.pick_fault() if cfg.faults else None
        if fault:
            st.faults_total[fault] = st.faults_total.get(fault, 0) + 1
        if fault in ("429", "500", "503"):
            self._simple(
                int(fault), {"error": {"message": f"injected fault {fault}", "type": "reference"}}
            )
            st.log(GroundTruthLine(request_id=rid, fault=fault, t_recv=t_recv))
            return
        first_word = st.counter
        # deterministic / diverging output (stress): the words, else None
        words = st.stress_words(str(prompt), n)
        # the prefix cache sees the prompt on arrival, prompt + output on completion
        adm = st.cache.arrive(prompt_bytes) if st.cache is not None else None
        cached = adm.cached_tokens if adm is not None else 0
        prefill_ms = cfg.prefill_ms_per_token * (prompt_tokens - cached)
        log = GroundTruthLine(request_id=rid, t_recv=t_recv, fault=fault,
                              prompt_tokens=prompt_tokens, cached_tokens=cached,
                              blocks_evicted=adm.evicted if adm is not None else 0)  # fmt: skip

        def output_text() -> str:
            if words is not None:
                return "".join(words)
            return "".join(_WORDS[(first_word + i) % len(_WORDS)] for i in range(n))

        def complete() -> None:
            """The last token is written: the prefix cache takes prompt + output."""
            if adm is not None and st.cache is not None and cfg.prefix_cache_outputs:
                st.cache.complete(adm, output_text().encode())
                log["blocks_evicted"] = adm.evicted

        created = int(time.time())
        fr = StreamFraming.of(chat, rid, created, cfg.model)
        pre, post_open, post_last = fr.pre, fr.post_open, fr.post_last

        def event(i: int) -> bytes:
            """Token i's event, made when it is written (never the whole response)."""
            if words is not None:
                word = orjson.dumps(words[i])
            else:
                word = _WORDS_JSON[(first_word + i) % len(_WORDS)]
            return pre + word + (post_last if i == n - 1 else post_open)

        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "total_tokens": prompt_tokens + n,
        }
        if adm is not None:  # where vLLM and OpenAI put it
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        tail = fr.tail(usage if usage_wanted else None)
        st.tokens_total += n
        if not stream:
            doc = whole_response(chat, rid, created, cfg.model, output_text(), usage)
            delay = 0.0 if cfg.max_throughput else (
                cfg.ttft_ms.sample(st.rng) + st.ttft_drift_ms() + prefill_ms
                + sum(cfg.itl_ms.sample(st.rng) for _ in range(n - 1))) / 1000  # fmt: skip
            self.pending.append(log)

            def answer() -> None:
                if self.closed:  # logged by connection_lost
                    return
                self._simple(200, doc)
                complete()
                log["t_end"] = st.event_ns()
                self.pending.remove(log)
                st.log(log)
                self._next_request()

            self._later(delay, answer)
            return
        head = STREAM_HEAD[:-2] + self.extra_headers + b"\r\n"
        head_events = fr.head_events
        self.busy = True
        if cfg.max_throughput and fault is None:
            assert self.transport is not None
            self.transport.write(head + (_chunk(head_events) if head_events else b""))
            self.bulk = [event, n, tail, 0, complete]
            self._pump()
            return
        rng = random.Random(st.rng.getrandbits(64))  # its own draws: faults stay seeded
        self._stream(log, head, head_events, event, n, tail, rng, prefill_ms, complete)

    def _read_generation(self, body: bytes, chat: bool) -> Generation | None:
        """The request, or None when it was answered with an error: a stream is written
        in chunks (Transfer-Encoding: chunked), which an HTTP/1.0 request may not be sent
        (RFC 9112 6.1): it got the chunk-size lines inside its events."""
        cfg = self.st.cfg
        gen = read_generation(body, chat, cfg.model, cfg.default_max_tokens)
        if isinstance(gen, tuple):
            self._simple(*gen)
            return None
        if gen.stream and self.http10:
            msg = "stream needs HTTP/1.1: a stream is sent chunked, which HTTP/1.0 does not read"
            self._simple(400, {"error": {"message": msg, "type": "invalid_request_error"}})
            return None
        return gen

    def _pump(self) -> None:
        """Write a max-throughput response in batches while the client keeps up."""
        event, n, tail, i, complete = self.bulk
        tr = self.transport
        assert tr is not None
        while i < n and not self.paused and not self.closed:
            j = min(n, i + _BULK_EVENTS)
            tr.write(b"".join([_chunk(event(k)) for k in range(i, j)]))
            i = j
        self.bulk[3] = i
        if i == n and not self.closed:
            tr.write(_chunk(tail) + b"0\r\n\r\n")
            complete()
            self._done_response()

    def _done_response(self) -> None:
        self.bulk = None
        self.busy = False
        self.handles.clear()
        self._next_request()

    def _next_request(self) -> None:
        """The answer is written: read on, and take a request that came meanwhile."""
        if self.reading_paused and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        if (self.buf or self.eof or self.close_after) and not self.receiving:
            self.data_received(b"")

    def _later(self, delay_s: float, fn) -> None:
        loop = asyncio.get_running_loop()
        self.handles.append(loop.call_later(delay_s, fn))

    def _stream(self, log: GroundTruthLine, head: bytes, head_events: bytes, event: Any,
                n: int, tail: bytes, rng: random.Random, prefill_ms: float,
                complete: Any) -> None:  # fmt: skip
        """Write token i at its scheduled time; each token (and the next time) is made
        when the previous one is written, so a long response costs nothing ahead. TTFT
        counts from the request's arrival (t_recv, the loop's clock)."""
        cfg = self.st.cfg
        fault = log["fault"]
        loop = asyncio.get_running_loop()
        t0 = log["t_recv"] / 1e9
        fault_at = n // 2
        delay0 = cfg.slow_headers_s if fault == "slow_headers" else 0.0
        sent: list[int] = []
        scheduled: list[int] = []
        log["token_times"] = sent
        log["scheduled"] = scheduled
        self.current_log = log

        def done() -> None:
            log["t_end"] = self.st.event_ns()
            self.st.log(log)
            self.current_log = None

        def write_head() -> None:
            if self.closed:
                return
            self.transport.write(head + (_chunk(head_events) if head_events else b""))  # type: ignore[union-attr]
            log["t_headers"] = time.monotonic_ns()

        def schedule(i: int, due: float) -> None:
            scheduled.append(int(due * 1e9))  # loop clock == time.monotonic
            self.handles[:] = [loop.call_at(due, emit, i, due)]

        def emit(i: int, due: float) -> None:
            if self.closed:
                return
            tr = self.transport
            assert tr is not None
            if fault == "disconnect" and i == fault_at:
                done()
                tr.abort()
                return
            if fault == "malformed" and i == fault_at:
                tr.write(_chunk(b'data: {"choices": [{"text": "broken\n\n'))
            sent.append(time.monotonic_ns())  # taken just before the write: causality
            tr.write(_chunk(event(i)))
            if i == n - 1:
                tr.write(_chunk(tail) + b"0\r\n\r\n")
                complete()
                done()
                self._done_response()
                return
            gap = cfg.itl_ms.sample(rng) / 1000
            if fault == "stall" and i + 1 == fault_at:
                gap += cfg.stall_s
            schedule(i + 1, due + gap)

        if delay0:
            self.handles.append(loop.call_at(t0 + delay0, write_head))
        else:
            write_head()
        if n == 0:
            self.transport.write(_chunk(tail) + b"0\r\n\r\n")  # type: ignore[union-attr]
            done()
            self._done_response()
            return
        first = (
            t0 + delay0 + (cfg.ttft_ms.sample(rng) + self.st.ttft_drift_ms() + prefill_ms) / 1000
        )
        if fault == "stall" and fault_at == 0:
            first += cfg.stall_s
        scheduled.append(int(first * 1e9))
        self.handles.append(loop.call_at(first, emit, 0, first))


# -- what the reference and the emulated server (predict/emulate.py) share ------------

STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Generation:
    """A completions or chat request as the servers read it (tokens are UTF-8 bytes)."""

    prompt: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    usage_wanted: bool


def _invalid(message: str) -> tuple[int, JsonObject]:
    return 400, {"error": {"message": message, "type": "invalid_request_error"}}


def read_generation(
    body: bytes, chat: bool, model: str, default_max_tokens: int
) -> Generation | tuple[int, dict[str, Any]]:
    """The request in ``body``, or (status, error document) to answer instead."""
    try:
        req = orjson.loads(body)
    except orjson.JSONDecodeError:
        return 400, {"error": {"message": "invalid JSON body"}}
    if not isinstance(req, dict):
        return 400, {"error": {"message": "the body is not a JSON object"}}
    if req.get("model") not in (None, model):
        return 404, {"error": {"message": f"model {req.get('model')!r:.80} not found"}}
    # a field of the wrong type is refused, not read as absent or as its str() (messages
    # "x" was an empty prompt; max_tokens 0 was the default number of tokens; a prompt
    # of token ids [104, 105] was the text "104105", 6 tokens, and content parts were
    # their str(); "stream": "false" streamed)
    if chat:
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            return _invalid(f"messages must be a list of objects (got {msgs!r:.40})")
        parts = [_content(m.get("content")) for m in msgs]
        if any(p is None for p in parts):
            return _invalid("a message's content must be a string, null or a list of "
                            '{"type": "text", "text": "..."} parts')  # fmt: skip
        prompt = "".join(p for p in parts if p is not None)
    else:
        got = _prompt(req.get("prompt"))
        if got is None:
            return _invalid(
                "prompt must be a string, a list of strings, or a list of token ids (whole "
                f"numbers 0 to 255 forming UTF-8 text: tokens are bytes) (got {req.get('prompt')!r:.40})"
            )
        prompt = got
    n_prompt = len(prompt.encode())
    if n_prompt > MAX_PROMPT_TOKENS:  # worded as servers word it: the client's context_exceeded
        return _invalid(f"the prompt of {n_prompt} tokens exceeds the maximum context length "
                        f"of {MAX_PROMPT_TOKENS} tokens")  # fmt: skip
    given = [k for k in ("max_tokens", "max_completion_tokens") if req.get(k) is not None]
    raw_max = req[given[0]] if given else default_max_tokens
    if type(raw_max) is not int or not 1 <= raw_max <= MAX_TOKENS_CAP:
        name = given[0] if given else "max_tokens"
        return _invalid(f"{name} must be an integer in [1, {MAX_TOKENS_CAP}] (got {raw_max!r:.40})")
    opts = req.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        return _invalid(f"stream_options must be an object (got {opts!r:.40})")
    stream, usage = req.get("stream"), (opts or {}).get("include_usage")
    for name, flag in (("stream", stream), ("stream_options.include_usage", usage)):
        if flag is not None and not isinstance(flag, bool):
            return _invalid(f"{name} must be true or false (got {flag!r:.40})")
    return Generation(prompt, n_prompt, raw_max, bool(stream), bool(usage))


def _content(content: Any) -> str | None:
    """A chat message's content as text: a string, null (""), or text parts joined;
    None where it is none of these."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _prompt(raw: Any) -> str | None:
    """A completions prompt as text: a string (null: ""), strings joined, or token ids
    (bytes) of UTF-8 text; None where it is none of these."""
    if raw is None or isinstance(raw, str):
        return raw or ""
    if not isinstance(raw, list):
        return None
    if all(isinstance(x, str) for x in raw):
        return "".join(raw)
    if all(type(x) is int and 0 <= x <= 255 for x in raw):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


@dataclass(frozen=True, slots=True)
class StreamFraming:
    """The bytes around each streamed token of one response: token i's event is
    ``pre + json(word) + (post_last if last else post_open)``, made when it is written."""

    rid: str
    created: int
    model: str
    kind: str
    pre: bytes
    post_open: bytes
    post_last: bytes
    head_events: bytes  # written with the head (chat: the assistant role)

    @classmethod
    def of(cls, chat: bool, rid: str, created: int, model: str) -> StreamFraming:
        model_json = orjson.dumps(model).decode()
        kind = "chat.completion.chunk" if chat else "text_completion"
        ident = f"chatcmpl-{rid}" if chat else f"cmpl-{rid}"
        # the id comes from the request's X-Request-Id: JSON-quoted (a '"' in it made
        # every event of the stream malformed)
        ident_json = orjson.dumps(ident).decode()
        opening = f'data: {{"id":{ident_json},"object":"{kind}","created":{created},'
        opening += f'"model":{model_json},"choices":[{{"index":0,'
        if chat:
            pre = (opening + '"delta":{"content":').encode()
            post_open = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            pre = (opening + '"text":').encode()
            post_open = b',"logprobs":null,"finish_reason":null}]}\n\n'
        post_last = post_open.replace(b'"finish_reason":null', b'"finish_reason":"length"')
        head_events = b""
        if chat:
            role = b'"delta":{"role":"assistant","content":'
            head_events = pre.replace(b'"delta":{"content":', role) + b'""' + post_open
        return cls(rid, created, model, kind, pre, post_open, post_last, head_events)

    def tail(self, usage: dict[str, int] | None) -> bytes:
        """What follows the last token: the usage event (if asked for) and [DONE]."""
        out = b""
        if usage is not None:
            out += b"data: " + orjson.dumps({"id": self.rid, "object": self.kind, "created": self.created,
                                             "model": self.model, "choices": [], "usage": usage}) + b"\n\n"  # fmt: skip
        return out + b"data: [DONE]\n\n"


def whole_response(
    chat: bool, rid: str, created: int, model: str, text: str, usage: dict[str, int]
) -> dict[str, Any]:
    """A non-streamed response's document."""
    choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
              if chat else {"index": 0, "text": text, "finish_reason": "length"})  # fmt: skip
    return {"id": rid, "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": model, "choices": [choice], "usage": usage}  # fmt: skip


async def serve_reference(cfg: ReferenceConfig, ready: Any = None) -> None:
    """Serve until cancelled or SIGINT/SIGTERM."""
    cfg.validate()
    state = _State(cfg)
    await serve_until_stopped(lambda: ReferenceProtocol(state), state, ready)


async def serve_until_stopped(
    factory: Callable[[], asyncio.Protocol], state: _State, ready: Any = None
) -> None:
    """Listen on ``state.cfg``'s address with ``factory``'s protocol until cancelled or a
    stop signal; ``ready(port)`` once listening; the ground-truth file closed at the end
    (the reference and the emulated server alike)."""
    cfg = state.cfg
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(factory, cfg.host, cfg.port, backlog=4096)
    except OSError as exc:
        raise AccelbenchError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}") from None
    stop = asyncio.Event()
    for s in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(s, stop.set)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    try:
        await stop.wait()
    finally:
        server.close()
        if state.gt is not None:
            state.gt.close()


def run_reference(cfg: ReferenceConfig, ready: Any = None) -> None:
    install_uvloop()
    asyncio.run(serve_reference(cfg, ready))
