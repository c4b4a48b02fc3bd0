"""A strict, incremental Server-Sent Events parser (WHATWG HTML "event stream" rules).

Fed raw body bytes as they arrive; returns complete events. Handles ``\\n``, ``\\r\\n``
and bare ``\\r`` line ends (also split across reads), multi-line ``data:`` fields,
comment / ping lines (``:...``), ``event:`` names, and fields without a colon.

The server is untrusted: an event may not grow beyond ``max_event_bytes`` (``SSEError``
then), and the work is linear in the bytes received: an unfinished event is kept as a
list of reads and only each new read is searched for the end of the event, so an endless
line or a huge event costs one pass over its bytes, not one pass per read.
"""

from __future__ import annotations

__all__ = ["SSEParser", "SSEError", "Event", "MAX_EVENT_BYTES"]

Event = tuple[str, bytes]  # (event type, data); type is "message" unless `event:` said

MAX_EVENT_BYTES = 16 << 20  # 16 MiB: far above any real completion event


class SSEError(ValueError):
    """The stream broke a limit (an event larger than ``max_event_bytes``)."""


class SSEParser:
    __slots__ = ("_pending", "_plen", "_data", "_dlen", "_event", "_cr", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._pending: list[bytes] = []  # reads of an unfinished block / line
        self._plen = 0
        self._data: list[bytes] = []
        self._dlen = 0
        self._event = ""
        self._cr = False  # last feed ended with \r: a following \n belongs to it
        self.max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[Event]:
        # Fast path for the common shape (servers send `data: {...}\n\n` blocks): no CR,
        # no half-parsed event; simple one-line `data:` blocks are taken whole, any other
        # block goes through the line parser below.
        if not chunk:
            return []
        if not self._cr and not self._data and not self._event and b"\r" not in chunk:
            pending = self._pending
            if pending:
                if b"\n\n" not in chunk and not (chunk[:1] == b"\n" and pending[-1][-1:] == b"\n"):
                    self._keep(chunk)  # the block goes on: do not rescan what came before
                    return []
                buf = b"".join(pending) + chunk
                self._pending = []
                self._plen = 0
            else:
                buf = chunk
            blocks = buf.split(b"\n\n")
            tail = blocks.pop()
            events: list[Event] = []
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block:
                    events.append(("message", block[6:]))
                elif block:
                    events += self._feed_lines(block + b"\n\n")
                    if self._data or self._event:  # cannot happen after a blank line
                        self._data, self._dlen, self._event = [], 0, ""
            if tail:
                self._keep(tail)
            return events
        return self._feed_lines(chunk)

    def single(self, chunk: bytes) -> bytes | None:
        """The data of ``chunk`` when it is exactly one ``data: ...`` block of one line
        (what a paced server writes per token) and nothing is pending: the event
        ``feed`` would return, without its list. None otherwise: ``feed`` the chunk."""
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1:] == b"\n"
            and chunk.find(b"\r") < 0
            and not self._pending
            and not self._cr
            and not self._data
            and not self._event
        ):
            return chunk[6:-2]
        return None

    @property
    def idle(self) -> bool:
        """Whether nothing of an event is held (between events, no CR to pair)."""
        return not (self._pending or self._cr or self._data or self._event)

    def _keep(self, piece: bytes) -> None:
        """Hold bytes of an unfinished block or line, within the event size limit."""
        self._pending.append(piece)
        self._plen += len(piece)
        if self._plen + self._dlen > self.max_event_bytes:
            size = self._plen + self._dlen
            self._pending, self._plen, self._data, self._dlen = [], 0, [], 0
            raise SSEError(
                f"SSE event larger than {self.max_event_bytes} bytes "
                f"({size} bytes without an event end)"
            )

    def _feed_lines(self, chunk: bytes) -> list[Event]:
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._pending:
            if b"\n" not in chunk:
                self._keep(chunk)  # the line goes on
                return []
            buf = b"".join(self._pending) + chunk
            self._pending = []
            self._plen = 0
        else:
            buf = chunk
        events: list[Event] = []
        start = 0
        find = buf.find
        while True:
            end = find(b"\n", start)
            if end < 0:
                break
            line = buf[start:end]
            start = end + 1
            if not line:  # blank line: dispatch
                if self._data:
                    events.append((self._event or "message", b"\n".join(self._data)))
                self._data = []
                self._dlen = 0
                self._event = ""
                continue
            if line[0] == 58:  # ':' comment / keep-alive ping
                continue
            colon = line.find(b":")
            if colon < 0:
                name, value = line, b""
            else:
                name = line[:colon]
                value = line[colon + 1 :]
                if value[:1] == b" ":
                    value = value[1:]
            if name == b"data":
                self._data.append(value)
                self._dlen += len(value) + 1
                if self._dlen > self.max_event_bytes:
                    self._keep(b"")  # raises SSEError
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            # `id` and `retry` carry nothing a benchmark needs; unknown fields are ignored
        if start < len(buf):
            self._keep(buf[start:])
        return events

    def flush(self) -> list[Event]:
        """End of stream: an event without its final blank line is still dispatched
        only if it is complete up to a line end (the spec discards a partial one)."""
        events: list[Event] = []
        if self._pending:  # complete lines the fast path held back count too
            buf = b"".join(self._pending)
            cut = buf.rfind(b"\n") + 1
            self._pending, self._plen = [], 0
            if cut:
                self._cr = False
                events += self._feed_lines(buf[:cut])
            if cut < len(buf):
                self._pending, self._plen = [buf[cut:]], len(buf) - cut
        if self._data:
            events.append((self._event or "message", b"\n".join(self._data)))
        self._data = []
        self._dlen = 0
        self._event = ""
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an unterminated line left at end of stream (a sign of truncation)."""
        return b"".join(self._pending)
