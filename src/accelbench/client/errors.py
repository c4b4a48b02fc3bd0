"""What can go wrong on the way to a server, as exceptions a transport raises (httpx's
split: the transport raises, the caller decides what a failure means for its record).

Every transport error carries the record's :class:`ErrorKind` and whether sending the
request again is safe (``retryable``: the connection ended before any byte of a response,
on a connection that had served an earlier request, so the server never saw this one or
did not start on it). ``client.transport.send_with_retries`` is the one place that
retries."""

from __future__ import annotations

from accelbench.metrics.records import ErrorKind

__all__ = [
    "ConnectError",
    "ConnectionClosed",
    "ErrorKind",
    "ResponseTimeout",
    "TransportError",
]


class TransportError(Exception):
    """A request that got no complete response; ``kind`` is its record's error kind."""

    kind: ErrorKind = ErrorKind.CLIENT_EXCEPTION

    def __init__(self, msg: str, *, kind: ErrorKind | None = None, retryable: bool = False) -> None:
        super().__init__(msg)
        if kind is not None:
            self.kind = kind
        self.retryable = retryable


class ConnectError(TransportError):
    """No connection to the server (refused, unreachable, name unknown, connect timeout)."""

    kind = ErrorKind.CONNECT_ERROR


class ResponseTimeout(TransportError):
    """No complete response before the request's deadline."""

    kind = ErrorKind.TIMEOUT


class ConnectionClosed(TransportError):
    """The connection ended; ``before_response`` says whether no response byte had come,
    ``kind`` the record's error kind (``disconnect``, or ``malformed_stream`` for a
    response whose HTTP framing is broken)."""

    kind = ErrorKind.DISCONNECT

    def __init__(
        self, msg: str, before_response: bool, kind: ErrorKind = ErrorKind.DISCONNECT
    ) -> None:
        super().__init__(msg, kind=kind)
        self.before_response = before_response
