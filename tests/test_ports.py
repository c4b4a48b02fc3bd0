"""servers/ports.py: the port a started server will bind."""

from __future__ import annotations

import socket

from accelbench import ports


def test_free_ports_are_below_the_ephemeral_range_distinct_and_bindable():
    low = ports._ephemeral_low()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        assert low == int(f.read().split()[0])
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50  # never the same twice in a process
    assert all(1024 <= p < low for p in got)
    for p in got[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def _unbound_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_taken_port_and_a_given_one_are_skipped(monkeypatch):
    taken = socket.create_server(("127.0.0.1", 0))
    t, q, r = taken.getsockname()[1], _unbound_port(), _unbound_port()
    picks = iter([t, q, q, r])  # what the random choice returns, in turn
    monkeypatch.setattr(ports.random, "randrange", lambda lo, hi: next(picks))
    monkeypatch.setattr(ports, "_given", set())
    try:
        assert ports.free_port() == q  # t is bound: skipped
        assert ports.free_port() == r  # q was given already: skipped
    finally:
        taken.close()
