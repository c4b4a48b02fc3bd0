"""The transport interface: how a request reaches a server and its response comes back,
whatever carries it (httpx's transport/exception split is the model).

A ``Transport`` makes one attempt per ``send``: it gets a connection, writes the request,
feeds the response to a ``BodySink`` (status, de-framed body bytes with their arrival
times, end) and raises a ``client.errors.TransportError`` for anything that kept a
complete response from arriving. Two implement it: ``http1.HTTP1Transport`` (plain http,
kernel receive stamps, the tee the shadow proxy relays through) and
``aio.AiohttpTransport`` (https). ``send_with_retries`` is the one retry loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from accelbench.client.errors import ResponseTimeout, TransportError
from accelbench.metrics.summary import ReceiveStats

_now = time.monotonic_ns


class BodySink(Protocol):
    def on_headers(self, status: int, t_ns: int) -> None: ...
    def on_data(self, data: bytes, t_ns: int) -> bool: ...
    def on_end(self, t_ns: int) -> None: ...


def head_info(
    sink: BodySink, content_type: bytes | str | None, location: bytes | str | None
) -> None:
    """Tell a sink that wants them (``on_head_info``: the OpenAI ``ResponseHandler``) the
    response's Content-Type and Location, after ``on_headers``; other sinks do not hear."""
    info = getattr(sink, "on_head_info", None)
    if info is not None:
        info(_text(content_type), _text(location))


def _text(v: bytes | str | None) -> str | None:
    if isinstance(v, bytes):
        return v.decode("latin-1")[:200]
    return v[:200] if v is not None else None


class Tee(Protocol):
    """Where a connection copies a response's bytes (``HTTP1Protocol.start``)."""

    def __call__(self, data: bytes) -> None: ...


# A request is sent again at most this often, and only when ``retryable`` (a kept-alive
# connection the server had closed before any byte of the response).
RETRIES = 3


@dataclass(slots=True)
class Request:
    """A POST: the path, its headers (without Host and Content-Length, which the
    transport sets; one client's requests share one dict, never changed once sent), its
    ``X-Request-Id`` (where given), the body; ``wire`` is the whole request as HTTP/1.1
    bytes where the caller framed it itself (the shadow proxy forwards a caller's request
    so)."""

    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    request_id: str = ""
    wire: bytes = b""


class Transport(Protocol):
    def send(
        self,
        req: Request,
        new_sink: Callable[[], BodySink],
        *,
        deadline_ns: int,
        tee: Tee | None = None,
    ) -> Awaitable[bool]:
        """One attempt; ``new_sink()`` is called when the request is about to be written
        (the record's send time). Returns whether the connection stays open for another
        request. Raises ``TransportError``."""
        ...

    def receive_stats(self) -> ReceiveStats | None: ...

    async def close(self) -> None: ...


async def send_with_retries(
    transport: Transport,
    req: Request,
    new_sink: Callable[[], BodySink],
    *,
    timeout_s: float,
    on_retry: Callable[[], None] | None = None,
    first: Callable[[int], Awaitable[bool]] | None = None,
    tee: Tee | None = None,
) -> bool:
    """Send ``req`` within ``timeout_s`` (all attempts together), again on a fresh
    connection while the failure is ``retryable`` (at most ``RETRIES`` times, calling
    ``on_retry`` before each). ``first``: the first attempt, already started (called
    with the deadline). Returns what the successful attempt returned; raises the last
    ``TransportError``."""
    deadline = _now() + int(timeout_s * 1e9)
    attempt = 0
    while True:
        try:
            if first is None:
                return await transport.send(req, new_sink, deadline_ns=deadline, tee=tee)
            pending, first = first, None
            return await pending(deadline)
        except ResponseTimeout:
            raise ResponseTimeout(f"no complete response within {timeout_s:g} s") from None
        except TransportError as exc:
            if not (exc.retryable and attempt < RETRIES):
                raise
        attempt += 1
        if on_retry is not None:
            on_retry()
