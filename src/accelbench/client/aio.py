"""The aiohttp transport (``client.transport.Transport``): https, or plain http when
asked (``--transport aiohttp``). Arrival times are taken when aiohttp hands the bytes
over (after a coroutine wake-up), not the kernel's (client/http1.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from accelbench.client.errors import (
    ConnectError,
    ConnectionClosed,
    ErrorKind,
    ResponseTimeout,
    TransportError,
)
from accelbench.client.transport import BodySink, Request, Tee, head_info
from accelbench.metrics.summary import ReceiveStats

_now = time.monotonic_ns


class AiohttpTransport:
    def __init__(self, root: str) -> None:
        self.root = root  # the server's root URL, without credentials
        self._session: Any = None

    async def send(
        self,
        req: Request,
        new_sink: Callable[[], BodySink],
        *,
        deadline_ns: int,
        tee: Tee | None = None,
    ) -> bool:
        import aiohttp

        if tee is not None:
            raise TransportError("the aiohttp transport has no tee")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                read_bufsize=1 << 20,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        headers = req.headers
        if req.request_id:
            headers = {**headers, "X-Request-Id": req.request_id}
        sink = new_sink()
        got_response = False
        try:
            async with asyncio.timeout(max(0.001, (deadline_ns - _now()) / 1e9)):
                async with self._session.post(
                    self.root + req.path, data=req.body, headers=headers, allow_redirects=False
                ) as resp:
                    got_response = True
                    sink.on_headers(resp.status, _now())
                    head_info(sink, resp.headers.get("Content-Type"), resp.headers.get("Location"))
                    async for data in resp.content.iter_any():
                        if not sink.on_data(data, _now()):
                            resp.close()
                            return False
                    sink.on_end(_now())
            return True
        except TimeoutError:
            raise ResponseTimeout("no complete response before the deadline") from None
        except aiohttp.ClientConnectorError as exc:
            raise ConnectError(f"cannot connect: {exc}") from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            err = ConnectionClosed(f"{type(exc).__name__}: {exc}", before_response=not got_response)
            err.retryable = not got_response
            raise err from None
        except aiohttp.ClientPayloadError as exc:
            raise ConnectionClosed(f"incomplete response body: {exc}", False) from None
        except aiohttp.ClientResponseError as exc:
            # aiohttp's parser refused the response (bad status line, Content-Length,
            # chunk size, oversized headers): the server's framing, as on http1
            msg = " ".join(str(exc.message).split())
            raise TransportError(
                f"broken HTTP response: {msg}", kind=ErrorKind.MALFORMED_STREAM
            ) from None

    def receive_stats(self) -> ReceiveStats | None:
        return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
