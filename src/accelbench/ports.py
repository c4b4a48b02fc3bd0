"""A free TCP port for a server that accelbench starts (an engine, the reference server)
and that binds it a moment later."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default lower bound


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now, below the system's ephemeral range.

    Why not ``bind(0)``: that hands out a port from the ephemeral range, and until the
    server binds it, any outgoing connection on the host can be given the same port as
    its local end (then the server fails with "address in use", or a test talks to the
    wrong peer). Below the range only an explicit bind takes a port. Never the same port
    twice in one process, so two servers started together do not pick one port."""
    low = _ephemeral_low()
    lo = max(1024, low - 12000)
    for _ in range(1000):
        port = random.randrange(lo, low) if low > lo else 0
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            port = s.getsockname()[1]
        _given.add(port)
        return port
    raise OSError(f"no free port on {host} below {low}")
