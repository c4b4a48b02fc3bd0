"""Sending one OpenAI request and filling its record, over the fast HTTP/1.1 transport
(plain http) or aiohttp (https, or when asked).

The server is an ``urls.Endpoint`` (a URL string is parsed into one): requests go to its
credential-free URL with its Authorization header, and every message is scrubbed of the
URL's password and the API key."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import orjson

from accelbench.client.aio import AiohttpTransport
from accelbench.client.errors import ErrorKind, TransportError
from accelbench.client.http1 import HTTP1Transport
from accelbench.client.openai import ResponseHandler, endpoint_path, sent_max_tokens
from accelbench.client.sse import MAX_EVENT_BYTES
from accelbench.client.transport import Request, Transport, send_with_retries
from accelbench.errors import AccelbenchError
from accelbench.metrics.records import RequestRecord
from accelbench.metrics.summary import ReceiveStats
from accelbench.urls import Endpoint
from accelbench.validate import header_value

__all__ = ["OpenAIClient", "Scrubber", "get_json", "load_api_key"]

_now = time.monotonic_ns


def load_api_key(env_var: str | None, key_file: str | None) -> str | None:
    """The API key from a file (first line) or an environment variable; never logged."""
    if key_file:
        p = Path(key_file)
        if not p.is_file():  # a FIFO or device would block; a directory cannot be read
            raise AccelbenchError(f"--api-key-file {key_file} is not a regular file")
        try:
            with p.open("rb") as f:
                head = f.read(65536)  # a key is a line, not a file of any size
            lines = head.decode("utf-8").strip().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise AccelbenchError(f"cannot read the API key file {key_file}: {exc}") from None
        key = lines[0].strip() if lines else ""
        if not key:
            raise AccelbenchError(f"the API key file {key_file} is empty")
        return header_value(f"the API key in {key_file}", key)
    if env_var and (env_key := os.environ.get(env_var)):
        return header_value(f"the API key in ${env_var}", env_key)
    return None


class Scrubber:
    """Removes the API key and the URL's credentials from any text that may reach
    results, logs or errors."""

    def __init__(self, *secrets: str | None) -> None:
        self.secrets = [s for s in secrets if s and len(s) >= 3]

    @classmethod
    def of(cls, endpoint: Endpoint, api_key: str | None) -> Scrubber:
        return cls(api_key, *endpoint.secrets)

    def __call__(self, text: str | None) -> str | None:
        if text:
            for secret in self.secrets:
                if secret in text:
                    text = text.replace(secret, "***")
        return text


class OpenAIClient:
    """Sends OpenAI requests to one server and fills their records, over a ``Transport``:
    ``HTTP1Transport`` for plain http (``transport`` "auto" or "http1"),
    ``AiohttpTransport`` for https or when asked ("aiohttp")."""

    def __init__(
        self,
        base_url: str | Endpoint,
        *,
        endpoint: str = "completions",
        stream: bool = True,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        transport: str = "auto",
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        server = Endpoint.parse(base_url)
        u = server.parts
        if u.scheme not in ("http", "https") or not u.hostname:
            raise AccelbenchError(f"not an http(s) URL: {server.display!r}")
        self.server = server
        self.base_url = server.url
        self.path = endpoint_path(endpoint)
        base_path = u.path.removesuffix("/v1")
        self.host = server.host
        self.port = server.port
        self.endpoint = endpoint
        self.chat = endpoint == "chat"
        self.stream = stream
        self.timeout_s = timeout_s
        self.scrub = Scrubber.of(server, api_key)
        self.max_event_bytes = max_event_bytes
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self.headers.update(server.headers(api_key))
        self.use_h1 = transport == "http1" or (transport == "auto" and u.scheme == "http")
        if transport == "http1" and u.scheme != "http":
            raise AccelbenchError("the http1 transport supports plain http only")
        self.transport: Transport
        if self.use_h1:
            self.path = base_path + self.path
            self.transport = HTTP1Transport(self.host, self.port)
        else:
            self.transport = AiohttpTransport(server.root)

    def receive_stats(self) -> ReceiveStats | None:
        """The plain-http pool's reads: how many carried the kernel's receive time, and
        how long they waited in the socket (``HTTP1Pool.receive_stats``)."""
        return self.transport.receive_stats()

    async def close(self) -> None:
        await self.transport.close()

    async def send(self, rec: RequestRecord, body: dict[str, Any]) -> None:
        """Send one request; every outcome (success or error kind) lands in ``rec``."""
        req = Request(self.path, orjson.dumps(body), self.headers, rec.request_id)
        limit = sent_max_tokens(body)

        def new_sink() -> ResponseHandler:
            rec.t_send = _now()
            return ResponseHandler(
                rec, chat=self.chat, stream=self.stream, keep_text=True,
                max_event_bytes=self.max_event_bytes, max_tokens=limit,
            )  # fmt: skip

        def on_retry() -> None:
            rec.retries += 1
            _reset_marks(rec)

        try:
            await send_with_retries(
                self.transport, req, new_sink, timeout_s=self.timeout_s, on_retry=on_retry
            )
        except TransportError as exc:
            _failed(rec, exc.kind, str(exc))
        except asyncio.CancelledError:
            rec.interrupt("the run was stopped while this request was in flight")
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a record
            rec.ok = False
            rec.error_kind = rec.error_kind or ErrorKind.CLIENT_EXCEPTION
            rec.error = f"{type(exc).__name__}: {exc}"
        rec.error = self.scrub(rec.error)


def _failed(rec: RequestRecord, kind: ErrorKind, message: str) -> None:
    """A request that got no complete response: its kind and why. A connection that
    never opened received nothing: no end time."""
    rec.ok = False
    rec.error_kind = kind
    rec.error = message[:500]
    rec.t_send = rec.t_send or _now()
    if kind is not ErrorKind.CONNECT_ERROR:
        rec.t_done = _now()


def _reset_marks(rec: RequestRecord) -> None:
    rec.t_headers = rec.t_first = rec.t_last = rec.t_done = None
    rec.chunk_times = []
    rec.cached_tokens = None
    rec.http_status = None
    rec.ok = False
    rec.error_kind = rec.error = None


async def get_json(
    base_url: str | Endpoint, path: str, api_key: str | None, timeout: float = 10.0
) -> Any:
    """GET a JSON document from the server (models list, version, props). Raises
    AccelbenchError with a clear reason if unreachable or not JSON."""
    import aiohttp

    server = Endpoint.parse(base_url)
    scrub = Scrubber.of(server, api_key)
    url = server.root + path
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(url, headers=server.headers(api_key)) as r:
                text = await r.read()
                if r.status != 200:
                    raise AccelbenchError(f"GET {path} answered HTTP {r.status}")
                return orjson.loads(text)
    except aiohttp.ClientConnectorError as exc:
        msg = f"cannot reach {server.display}: {exc.os_error or exc}"
        raise AccelbenchError(scrub(msg)) from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        msg = f"GET {url} failed: {type(exc).__name__} {exc}"
        raise AccelbenchError(scrub(msg)) from None
    except orjson.JSONDecodeError:
        raise AccelbenchError(f"GET {path} did not return JSON: not an OpenAI server?") from None
