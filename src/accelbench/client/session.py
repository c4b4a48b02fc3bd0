"""Sending one OpenAI request and filling its record, over the fast HTTP/1.1 transport
(plain http) or aiohttp (https, or when asked)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from accelbench.client.http1 import ConnectionClosed, HTTP1Pool, request_head
from accelbench.client.openai import ResponseHandler, endpoint_path
from accelbench.client.sse import MAX_EVENT_BYTES
from accelbench.errors import AccelbenchError
from accelbench.metrics.records import RequestRecord
from accelbench.urls import redact_url, split_credentials
from accelbench.validate import header_value

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


def auth_headers(url: str, api_key: str | None) -> dict[str, str]:
    """Authorization for a request: the API key (Bearer) if there is one, else the URL's
    credentials (Basic); the key wins, as a server takes one Authorization header."""
    if api_key:
        return {"Authorization": f"Bearer {api_key}"}
    basic = split_credentials(url)[1]
    return {"Authorization": basic} if basic else {}


class Scrubber:
    """Removes the API key and the URL's credentials from any text that may reach
    results, logs or errors."""

    def __init__(self, *secrets: str | None) -> None:
        self.secrets = [s for s in secrets if s and len(s) >= 3]

    def __call__(self, text: str | None) -> str | None:
        if text:
            for secret in self.secrets:
                if secret in text:
                    text = text.replace(secret, "***")
        return text


def url_secrets(url: str) -> list[str]:
    """The URL's password (raw and percent-decoded), to be scrubbed from messages."""
    u = urlsplit(url)
    if u.password is None:
        return []
    return [u.password, unquote(u.password)]


class OpenAIClient:
    def __init__(
        self,
        base_url: str,
        *,
        endpoint: str = "completions",
        stream: bool = True,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        transport: str = "auto",
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        u = urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise AccelbenchError(f"not an http(s) URL: {redact_url(base_url)!r}")
        self.base_url = split_credentials(base_url.rstrip("/"))[0]
        base_path = u.path
        if base_path.endswith("/v1"):
            base_path = base_path[:-3]
        self.path = base_path + endpoint_path(endpoint)
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.endpoint = endpoint
        self.chat = endpoint == "chat"
        self.stream = stream
        self.timeout_s = timeout_s
        self.scrub = Scrubber(api_key, *url_secrets(base_url))
        self.max_event_bytes = max_event_bytes
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self.headers.update(auth_headers(base_url, api_key))
        self.use_h1 = transport == "http1" or (transport == "auto" and u.scheme == "http")
        if transport == "http1" and u.scheme != "http":
            raise AccelbenchError("the http1 transport supports plain http only")
        self._pool = HTTP1Pool(self.host, self.port) if self.use_h1 else None
        self._aio: Any = None

    def receive_stats(self) -> dict[str, Any] | None:
        """The plain-http pool's reads: how many carried the kernel's receive time, and
        how long they waited in the socket (``HTTP1Pool.receive_stats``)."""
        return self._pool.receive_stats() if self._pool is not None else None

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._aio is not None:
            await self._aio.close()

    def _handler(self, rec: RequestRecord) -> ResponseHandler:
        return ResponseHandler(
            rec, chat=self.chat, stream=self.stream, keep_text=True,
            max_event_bytes=self.max_event_bytes,
        )  # fmt: skip

    async def send(self, rec: RequestRecord, body: dict[str, Any]) -> None:
        """Send one request; every outcome (success or error kind) lands in ``rec``."""
        payload = orjson.dumps(body)
        try:
            if self.use_h1:
                await self._send_h1(rec, payload)
            else:
                await self._send_aiohttp(rec, payload)
        except asyncio.CancelledError:
            if rec.error_kind is None:
                rec.ok = False
                rec.error_kind = "interrupted"
                rec.error = "the run was stopped while this request was in flight"
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a record
            rec.ok = False
            rec.error_kind = rec.error_kind or "client_exception"
            rec.error = self.scrub(f"{type(exc).__name__}: {exc}")
        rec.error = self.scrub(rec.error)

    async def _send_h1(self, rec: RequestRecord, payload: bytes) -> None:
        pool = self._pool
        assert pool is not None
        hdrs = dict(self.headers)
        hdrs["Content-Length"] = str(len(payload))
        if rec.request_id:
            hdrs["X-Request-Id"] = rec.request_id
        data = request_head("POST", self.host, self.port, self.path, hdrs) + payload
        deadline = _now() + int(self.timeout_s * 1e9)
        for attempt in range(4):
            handler = self._handler(rec)
            try:
                conn, reused = await pool.acquire()
            except (TimeoutError, OSError) as exc:
                rec.t_send = rec.t_send or _now()
                handler.fail("connect_error", f"cannot connect to {self.host}:{self.port}: {exc}")
                return
            rec.t_send = _now()
            fut = conn.start(data, handler)
            try:
                await asyncio.wait_for(fut, max(0.001, (deadline - _now()) / 1e9))
            except TimeoutError:
                pool.discard(conn)
                handler.fail("timeout", f"no complete response within {self.timeout_s:g} s")
                rec.t_done = _now()
                return
            except ConnectionClosed as exc:
                pool.discard(conn)
                if exc.before_response and reused and attempt < 3:
                    # a kept-alive connection the server had closed: retry on a new one
                    rec.retries += 1
                    _reset_marks(rec)
                    continue
                handler.fail(exc.kind, str(exc))
                rec.t_done = _now()
                return
            except asyncio.CancelledError:
                pool.discard(conn)
                raise
            pool.release(conn)
            return

    async def _send_aiohttp(self, rec: RequestRecord, payload: bytes) -> None:
        import aiohttp

        if self._aio is None:
            self._aio = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                read_bufsize=1 << 20,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        hdrs = dict(self.headers)
        if rec.request_id:
            hdrs["X-Request-Id"] = rec.request_id
        handler = self._handler(rec)
        url = self.base_url.removesuffix("/v1") + endpoint_path(self.endpoint)
        for attempt in range(4):
            rec.t_send = _now()
            got_response = False
            try:
                async with asyncio.timeout(self.timeout_s):
                    async with self._aio.post(
                        url, data=payload, headers=hdrs, allow_redirects=False
                    ) as resp:
                        got_response = True
                        handler.on_headers(resp.status, _now())
                        async for data in resp.content.iter_any():
                            if not handler.on_data(data, _now()):
                                resp.close()
                                return
                        handler.on_end(_now())
                return
            except TimeoutError:
                handler.fail("timeout", f"no complete response within {self.timeout_s:g} s")
            except aiohttp.ClientConnectorError as exc:
                handler.fail("connect_error", f"cannot connect: {exc}")
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if not got_response and attempt < 3:
                    rec.retries += 1
                    _reset_marks(rec)
                    handler = self._handler(rec)
                    continue
                handler.fail("disconnect", f"{type(exc).__name__}: {exc}")
            except aiohttp.ClientPayloadError as exc:
                handler.fail("disconnect", f"incomplete response body: {exc}")
            except aiohttp.ClientResponseError as exc:
                # aiohttp's parser refused the response (bad status line, Content-Length,
                # chunk size, oversized headers): the server's framing, as on http1
                msg = " ".join(str(exc.message).split())
                handler.fail("malformed_stream", f"broken HTTP response: {msg}")
            rec.t_done = _now()
            return


def _reset_marks(rec: RequestRecord) -> None:
    rec.t_headers = rec.t_first = rec.t_last = rec.t_done = None
    rec.chunk_times = []
    rec.http_status = None
    rec.ok = False
    rec.error_kind = rec.error = None


async def get_json(base_url: str, path: str, api_key: str | None, timeout: float = 10.0) -> Any:
    """GET a JSON document from the server (models list, version, props). Raises
    AccelbenchError with a clear reason if unreachable or not JSON."""
    import aiohttp

    headers = auth_headers(base_url, api_key)
    scrub = Scrubber(api_key, *url_secrets(base_url))
    shown = redact_url(base_url)
    base_url = split_credentials(base_url)[0]
    url = base_url.rstrip("/").removesuffix("/v1") + path
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(url, headers=headers) as r:
                text = await r.read()
                if r.status != 200:
                    raise AccelbenchError(f"GET {path} answered HTTP {r.status}")
                return orjson.loads(text)
    except aiohttp.ClientConnectorError as exc:
        raise AccelbenchError(scrub(f"cannot reach {shown}: {exc.os_error or exc}")) from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        msg = f"GET {redact_url(url)} failed: {type(exc).__name__} {exc}"
        raise AccelbenchError(scrub(msg)) from None
    except orjson.JSONDecodeError:
        raise AccelbenchError(f"GET {path} did not return JSON: not an OpenAI server?") from None
