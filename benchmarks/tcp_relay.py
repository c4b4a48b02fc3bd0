"""The null proxy: a raw TCP relay on the same event loop as the shadow proxy (uvloop),
no HTTP parsing, no copies, no records. Bytes read from either side are written to the
other at once (TCP_NODELAY on both). What it adds to TTFT is the floor any proxy in
Python on this host pays: one more process to wake, one read and one write per chunk.

    python benchmarks/tcp_relay.py LISTEN_PORT TARGET_PORT
"""

from __future__ import annotations

import asyncio
import socket
import sys

from accelbench.eventloop import install_uvloop


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Side(asyncio.Protocol):
    def __init__(self) -> None:
        self.peer: _Side | None = None
        self.transport: asyncio.Transport | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self.pending.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class _Downstream(_Side):
    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        _, up = await loop.create_connection(_Side, "127.0.0.1", self.target)
        up.peer, self.peer = self, up
        for data in self.pending:
            up.transport.write(data)  # type: ignore[union-attr]
        self.pending.clear()


async def main(listen: int, target: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Downstream(target), "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    install_uvloop()
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
