"""A strict, incremental Server-Sent Events parser (WHATWG HTML "event stream" rules).

Fed raw body bytes as they arrive; returns complete events. Handles ``\\n``, ``\\r\\n``
and bare ``\\r`` line ends (also split across reads), multi-line ``data:`` fields,
comment / ping lines (``:...``), ``event:`` names, and fields without a colon.
"""

from __future__ import annotations

__all__ = ["SSEParser", "Event"]

Event = tuple[str, bytes]  # (event type, data); type is "message" unless `event:` said


class SSEParser:
    __slots__ = ("_buf", "_data", "_event", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event = ""
        self._cr = False  # last feed ended with \r: a following \n belongs to it

    def feed(self, chunk: bytes) -> list[Event]:
        # Fast path for the common shape (servers send `data: {...}\n\n` blocks): no CR,
        # no half-parsed event; simple one-line `data:` blocks are taken whole, any other
        # block goes through the line parser below.
        if not self._cr and not self._data and not self._event and b"\r" not in chunk:
            buf = self._buf + chunk if self._buf else chunk
            blocks = buf.split(b"\n\n")
            tail = blocks.pop()
            events: list[Event] = []
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block:
                    events.append(("message", block[6:]))
                elif block:
                    self._buf = b""
                    events += self._feed_lines(block + b"\n\n")
                    if self._data or self._event:  # cannot happen after a blank line
                        self._data, self._event = [], ""
            self._buf = tail
            return events
        return self._feed_lines(chunk)

    def _feed_lines(self, chunk: bytes) -> list[Event]:
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
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
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            # `id` and `retry` carry nothing a benchmark needs; unknown fields are ignored
        self._buf = buf[start:]
        return events

    def flush(self) -> list[Event]:
        """End of stream: an event without its final blank line is still dispatched
        only if it is complete up to a line end (the spec discards a partial one)."""
        events: list[Event] = []
        if self._data:
            events.append((self._event or "message", b"\n".join(self._data)))
        self._data = []
        self._event = ""
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an unterminated line left at end of stream (a sign of truncation)."""
        return self._buf
