"""Hand-written HTTP/1.1 servers for the shadow proxy's tests: a real listening socket on
127.0.0.1, a thread per connection, and requests framed by Content-Length (the proxy
always sends one; RFC 9112 section 6). What a server answers is its own :meth:`serve`."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator


def read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(head, body, what follows) of the next request on ``conn`` after ``buf`` (bytes
    already read); None when the peer closes first. At most one Content-Length."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lengths = [ln.split(b":", 1)[1] for ln in head.split(b"\r\n")[1:]
               if ln.lower().startswith(b"content-length:")]  # fmt: skip
    assert len(lengths) <= 1, head  # the proxy frames by one Content-Length
    n = int(lengths[0]) if lengths else 0
    while len(rest) < n:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return head, rest[:n], rest[n:]


class RawHttpServer:
    """Listens on a free 127.0.0.1 port (:attr:`url`); each connection is served by
    :meth:`serve` in a thread of its own; :attr:`connections` counts them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            self.serve(conn)

    def serve(self, conn: socket.socket) -> None:
        """Answer what comes on ``conn`` (closed when this returns)."""
        raise NotImplementedError

    def requests(self, conn: socket.socket) -> Iterator[tuple[bytes, bytes]]:
        """Every request on ``conn`` in turn, as (head, body), until the peer closes."""
        buf = b""
        while (got := read_request(conn, buf)) is not None:
            head, body, buf = got
            yield head, body
